"""The op library (filled by the op modules)."""
