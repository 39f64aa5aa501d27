"""elementwise ops (being written)."""

__all__ = []
