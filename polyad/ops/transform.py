"""transform ops (being written)."""

__all__ = []
