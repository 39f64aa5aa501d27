"""Polyhedral layer: TE <-> isl, the statement form of stages, gradient simplification."""
