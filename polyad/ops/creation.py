"""creation ops (being written)."""

__all__ = []
