"""Scalar intrinsics: ``pa.exp(x)``, ``pa.pow(a, b)``, ...  Each builds one ``Call``."""

from .expr import binary, unary

_UNARY = (
    "exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf",
    "floor", "ceil", "round", "trunc", "abs", "sign",
)


def _make(op):
    def f(x):
        return unary(op, x)

    f.__name__ = op
    f.__doc__ = f"``pa.{op}(x)``: elementwise {op} of a scalar expression."
    return f


for _op in _UNARY:
    globals()[_op] = _make(_op)

round.__doc__ = "``pa.round(x)``: round half to even (numpy's and OpenCL's rint)."  # noqa: F821


def pow(a, b):  # noqa: A001
    """``pa.pow(a, b)``: a**b."""
    return binary("pow", a, b)


def logical_and(a, b):
    return binary("and", a, b)


def logical_or(a, b):
    return binary("or", a, b)


def logical_not(a):
    return unary("not", a)


__all__ = list(_UNARY) + ["pow", "logical_and", "logical_or", "logical_not"]
