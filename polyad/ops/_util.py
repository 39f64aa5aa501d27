"""Helpers shared by the op library: argument checking, broadcasting, dtypes, axes.

Operands of the numpy-like ops are tensors or scalars.  Scalars follow numpy's
promotion rules (NEP 50): a Python ``bool``/``int``/``float`` is *weak* and
takes the dtype of the tensor it meets (``float32_tensor * 2.0`` stays
float32, ``int32_tensor + 1.5`` becomes float64), while a numpy scalar
(``np.float64(2)``) or a scalar expression is *strong* and promotes like a
0-d tensor of its dtype.
"""

import math

import numpy as np

from ..errors import AxisError, DtypeError, ShapeError
from ..te import dtype as dt
from ..te.construct import binary, cast
from ..te.expr import Const, Expr
from ..te.tensor import Tensor, compute


def is_int(v):
    """A Python or numpy integer, not a bool: what sizes, axes, strides and paddings are."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_tensor(x, op, arg="input"):
    """``x`` when it is a tensor; DtypeError naming the op and the argument otherwise."""
    if not isinstance(x, Tensor):
        raise DtypeError(f"{op}: expected a tensor for {arg}, got {type(x).__name__} {x!r}")
    return x


def check_flag(v, what, op):
    """A yes/no parameter: a bool, or the integer 0 or 1 as numpy takes them (the string "False" was true)."""
    if not (isinstance(v, (bool, np.bool_)) or is_int(v) and v in (0, 1)):
        raise DtypeError(f"{op}: {what} must be True or False, got {v!r}")
    return bool(v)


def conjunction(conds):
    """The ``and`` of bool expressions; None when there are none (no guard at all)."""
    out = None
    for c in conds:
        out = c if out is None else binary("and", out, c)
    return out


def describe(x):
    """How an operand is named in error messages: ``tensor 'X' (2, 3) float32`` or the scalar."""
    if isinstance(x, Tensor):
        return f"tensor {x.name!r} {x.shape} {x.dtype}"
    if isinstance(x, Expr):
        return f"scalar expression {x} ({x.dtype})"
    return f"scalar {x!r}"


def normalize_axis(axis, ndim, what):
    """An axis in [-ndim, ndim) -> [0, ndim); AxisError naming ``what`` otherwise."""
    if not is_int(axis):
        raise AxisError(f"{what}: axis must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise AxisError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def normalize_axes(axis, ndim, what):
    """None -> all axes; an int or a sequence -> a sorted tuple of distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    try:
        axis = tuple(axis)
    except TypeError:
        raise AxisError(f"{what}: axis must be None, an integer or a tuple of integers, got {axis!r}") from None
    seen = {}
    for a in axis:
        n = normalize_axis(a, ndim, what)
        if n in seen:
            raise AxisError(f"{what}: repeated axis {a} (the same as axis {seen[n]}) in {axis}")
        seen[n] = a
    return tuple(sorted(seen))


def broadcast_shape(shapes, what, names=None):
    """numpy broadcasting of shapes; ShapeError naming ``what`` (and ``names[i]``) if impossible."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        size, owner = 1, None
        for i, s in enumerate(shapes):
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                if names is not None:
                    j, kj = owner
                    detail = (f"axis {kj} of {names[j]} has size {size} but axis {k} of {names[i]} has size {s[k]}"
                              f" (output axis {d})")
                else:
                    detail = f"axis {d}: {size} vs {s[k]}"
                raise ShapeError(
                    f"{what}: shapes {' and '.join(str(tuple(x)) for x in shapes)} do not broadcast ({detail})"
                )
            size, owner = s[k], (i, k)
        out.append(size)
    return tuple(out)


def broadcast_read(x, out_shape, idx):
    """Read tensor/scalar ``x`` at output indices ``idx`` under numpy broadcasting."""
    if not isinstance(x, Tensor):
        return x
    off = len(out_shape) - x.ndim
    return x[tuple(0 if x.shape[d] == 1 and out_shape[off + d] != 1 else idx[off + d] for d in range(x.ndim))]


def check_operand(x, what):
    """A tensor, a scalar expression, or a Python/numpy scalar (0-d arrays become numpy scalars)."""
    if isinstance(x, np.ndarray):
        if x.ndim != 0:
            raise DtypeError(
                f"{what}: got a numpy array of shape {x.shape}; arrays are data, not graph nodes: "
                "make a pa.placeholder and feed the array"
            )
        x = x[()]
    if isinstance(x, np.generic):
        try:
            dt.canonical(x.dtype)
        except DtypeError as e:
            raise DtypeError(f"{what}: scalar {x!r}: {e}") from None
        return x
    if isinstance(x, (Tensor, Expr, bool, int, float)):
        return x
    raise DtypeError(f"{what}: cannot use {x!r} (type {type(x).__name__}) as an operand; expected a tensor or a scalar")


def result_dtype(xs, what):
    """numpy's ``result_type`` of the operands, Python scalars weak; DtypeError if polyad lacks it."""
    args = []
    for x in xs:
        if isinstance(x, (Tensor, Expr)):
            args.append(np.dtype(x.dtype))
        elif isinstance(x, np.generic):
            args.append(x.dtype)
        else:
            args.append(x)
    try:
        res = np.result_type(*args)
    except TypeError as e:
        raise DtypeError(f"{what}: no common dtype ({e})") from None
    try:
        return dt.canonical(res)
    except DtypeError:
        raise DtypeError(f"{what}: the result dtype would be {res.name}, which polyad does not support") from None


def scalar_const(value, dtype, what):
    """A scalar operand converted to a Const of ``dtype``, as numpy would (ints must fit)."""
    if isinstance(value, np.generic):
        value = value.item()
    if dt.is_bool(dtype):
        return Const(bool(value), dtype)
    if dt.is_int(dtype):
        if isinstance(value, float):
            if not math.isfinite(value):
                raise DtypeError(f"{what}: cannot convert {value!r} to {dtype}")
            value = math.trunc(value)
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise DtypeError(f"{what}: the scalar {value!r} does not fit in {dtype}")
        return Const(int(value), dtype)
    return Const(float(value), dtype)


def read_as(x, dtype, out_shape, idx, what):
    """Operand ``x`` at output indices ``idx`` (broadcast), converted to ``dtype``."""
    if isinstance(x, Tensor):
        return cast(broadcast_read(x, out_shape, idx), dtype)
    if isinstance(x, Expr):
        return cast(x, dtype)
    return scalar_const(x, dtype, what)


def map_compute(name, xs, fn, what=None):
    """``compute`` over the broadcast shape of operands ``xs`` of ``fn(idx)``, tagged like TOPI.

    The tag is "elementwise" when every tensor operand has the output shape,
    "broadcast" when some operand is broadcast.
    """
    what = what or name
    tensors = [x for x in xs if isinstance(x, Tensor)]
    shape = broadcast_shape([x.shape for x in tensors], what, names=[f"tensor {x.name!r}" for x in tensors])
    tag = "elementwise" if all(x.shape == shape for x in tensors) else "broadcast"
    return compute(shape, lambda *idx: fn(idx, shape), name=name, tag=tag)


__all__ = [
    "normalize_axis", "normalize_axes", "broadcast_shape", "broadcast_read", "describe", "check_operand",
    "result_dtype", "scalar_const", "read_as", "map_compute", "is_int", "check_tensor", "conjunction",
]
