"""Scalar dtypes: names, classification and promotion rules.

The rules are deliberately strict: floats of different widths never mix
without a cast, and a float never mixes with an integer.  Integers of
different widths widen (index arithmetic mixes int32 and int64 freely).
"""

import numpy as np

from ..errors import DtypeError

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)


def canonical(dtype):
    """Normalise a dtype given as a string, numpy dtype or numpy type."""
    if dtype is None:
        raise DtypeError("dtype must not be None")
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise DtypeError(f"unknown dtype {dtype!r}; polyad supports {', '.join(DTYPES)}") from None
    if name not in DTYPES:
        raise DtypeError(f"unsupported dtype {name!r}; polyad supports {', '.join(DTYPES)}")
    return name


def is_float(dtype):
    return dtype in FLOAT_DTYPES


def is_int(dtype):
    return dtype in INT_DTYPES


def is_bool(dtype):
    return dtype == "bool"


def bits(dtype):
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize * 8


def promote(a, b, what="operation"):
    """The dtype of a binary arithmetic result of operands of dtypes a and b."""
    if a == b:
        return a
    if is_int(a) and is_int(b):
        return "int64"
    raise DtypeError(
        f"cannot mix {a} and {b} in {what} without a cast (use pa.cast(x, {a!r}) or pa.cast(x, {b!r}))"
    )


def const_dtype(value):
    """Default dtype of a Python scalar: bool, int32 (int64 if it does not fit), float32."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        if isinstance(value, np.integer):
            return canonical(value.dtype)
        return "int32" if -(2**31) <= value < 2**31 else "int64"
    if isinstance(value, (float, np.floating)):
        if isinstance(value, np.floating):
            return canonical(value.dtype)
        return "float32"
    raise DtypeError(f"cannot make a constant of {value!r} (type {type(value).__name__})")


def min_value(dtype):
    if is_float(dtype):
        return -np.inf
    if is_bool(dtype):
        return False
    return int(np.iinfo(dtype).min)


def max_value(dtype):
    if is_float(dtype):
        return np.inf
    if is_bool(dtype):
        return True
    return int(np.iinfo(dtype).max)
