"""Neural-network ops (being written)."""
