"""Scalar intrinsics: ``pa.exp(x)``, ``pa.pow(a, b)``, ...  Each builds one ``Call`` node.

Each takes scalar expressions (a tensor read, a constant, a Python number) and returns an
expression of the same dtype (floats for the transcendental ones); differentiation rules live in
:mod:`polyad.autodiff.rules`.
"""

from .construct import binary, unary


def exp(x):  # noqa: A001
    """``pa.exp(x)``: e raised to ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``exp(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("exp", x)


def log(x):  # noqa: A001
    """``pa.log(x)``: the natural logarithm of ``x`` (NaN below 0, -inf at 0).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``log(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("log", x)


def log2(x):  # noqa: A001
    """``pa.log2(x)``: the base-2 logarithm of ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``log2(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("log2", x)


def log1p(x):  # noqa: A001
    """``pa.log1p(x)``: ``log(1 + x)``, exact for small ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``log1p(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("log1p", x)


def sqrt(x):  # noqa: A001
    """``pa.sqrt(x)``: the square root of ``x`` (NaN below 0).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``sqrt(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("sqrt", x)


def rsqrt(x):  # noqa: A001
    """``pa.rsqrt(x)``: ``1 / sqrt(x)``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``rsqrt(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("rsqrt", x)


def tanh(x):  # noqa: A001
    """``pa.tanh(x)``: the hyperbolic tangent of ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``tanh(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("tanh", x)


def sigmoid(x):  # noqa: A001
    """``pa.sigmoid(x)``: the logistic function ``1 / (1 + exp(-x))``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``sigmoid(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("sigmoid", x)


def sin(x):  # noqa: A001
    """``pa.sin(x)``: the sine of ``x`` (radians).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``sin(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("sin", x)


def cos(x):  # noqa: A001
    """``pa.cos(x)``: the cosine of ``x`` (radians).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``cos(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("cos", x)


def erf(x):  # noqa: A001
    """``pa.erf(x)``: the error function of ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``erf(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("erf", x)


def floor(x):  # noqa: A001
    """``pa.floor(x)``: the largest integer value not above ``x`` (a float for a float ``x``).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``floor(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("floor", x)


def ceil(x):  # noqa: A001
    """``pa.ceil(x)``: the smallest integer value not below ``x``.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``ceil(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("ceil", x)


def round(x):  # noqa: A001
    """``pa.round(x)``: ``x`` rounded half to even (numpy's ``round`` and OpenCL's ``rint``).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``round(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("round", x)


def trunc(x):  # noqa: A001
    """``pa.trunc(x)``: ``x`` rounded towards zero.

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``trunc(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("trunc", x)


def abs(x):  # noqa: A001
    """``pa.abs(x)``: the absolute value of ``x`` (floats and integers).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``abs(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("abs", x)


def sign(x):  # noqa: A001
    """``pa.sign(x)``: -1, 0 or 1 as ``x`` is negative, zero or positive (of ``x``'s dtype).

    :param x: a scalar expression (``X[i]``, a constant, a Python number).
    :returns: the expression ``sign(x)``.
    :raises DtypeError: where the op does not apply to ``x``'s dtype.
    """
    return unary("sign", x)


def pow(a, b):  # noqa: A001
    """``pa.pow(a, b)``: ``a`` raised to ``b``.

    :param a: the base, a scalar expression.
    :param b: the exponent, a scalar expression.
    :returns: the expression ``a ** b``.
    :raises DtypeError: when the dtypes cannot be promoted together.
    """
    return binary("pow", a, b)


def logical_and(a, b):
    """``pa.logical_and(a, b)``: both conditions hold.

    :param a: a boolean expression (a comparison).
    :param b: a boolean expression.
    :returns: the boolean expression ``a and b``.
    """
    return binary("and", a, b)


def logical_or(a, b):
    """``pa.logical_or(a, b)``: either condition holds.

    :param a: a boolean expression (a comparison).
    :param b: a boolean expression.
    :returns: the boolean expression ``a or b``.
    """
    return binary("or", a, b)


def logical_not(a):
    """``pa.logical_not(a)``: the condition does not hold.

    :param a: a boolean expression.
    :returns: the boolean expression ``not a``.
    """
    return unary("not", a)


__all__ = [
    "exp",
    "log",
    "log2",
    "log1p",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "sin",
    "cos",
    "erf",
    "floor",
    "ceil",
    "round",
    "trunc",
    "abs",
    "sign",
    "pow",
    "logical_and",
    "logical_or",
    "logical_not",
]
