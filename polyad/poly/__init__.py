"""Polyhedral layer: TE <-> isl, the statement form of stages, gradient simplification."""


def estimate(tensors):
    raise NotImplementedError("pa.estimate is being written")
