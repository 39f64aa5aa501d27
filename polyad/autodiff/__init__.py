"""Reverse-mode automatic differentiation (being written)."""


def differentiate(output, inputs=None, head=None, *, fdiff=None, override=None, optimize=True):
    raise NotImplementedError("pa.differentiate is being written")


def jacobian(output, input, optimize=True):
    raise NotImplementedError("pa.jacobian is being written")
