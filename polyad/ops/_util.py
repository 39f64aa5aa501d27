"""Helpers shared by the op library: argument checking, broadcasting, axes."""

import numpy as np

from ..errors import AxisError, ShapeError
from ..te import dtype as dt
from ..te.expr import Expr, as_expr
from ..te.tensor import Tensor, compute


def tensor_name(x):
    return x.name if isinstance(x, Tensor) else repr(x)


def normalize_axis(axis, ndim, what):
    """An axis in [-ndim, ndim) -> [0, ndim); AxisError naming ``what`` otherwise."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
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
    out = tuple(sorted({normalize_axis(a, ndim, what) for a in axis}))
    if len(out) != len(tuple(axis)):
        raise AxisError(f"{what}: repeated axis in {tuple(axis)}")
    return out


def broadcast_shape(shapes, what):
    """numpy broadcasting of shapes; ShapeError naming ``what`` if impossible."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        size = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                raise ShapeError(
                    f"{what}: shapes {' and '.join(str(tuple(x)) for x in shapes)} do not broadcast (axis {d}: {size} vs {s[k]})"
                )
            size = s[k]
        out.append(size)
    return tuple(out)


def broadcast_read(x, out_shape, idx):
    """Read tensor/scalar ``x`` at output indices ``idx`` under numpy broadcasting."""
    if not isinstance(x, Tensor):
        return x
    off = len(out_shape) - x.ndim
    return x[tuple(0 if x.shape[d] == 1 and out_shape[off + d] != 1 else idx[off + d] for d in range(x.ndim))]


def operand_shape(x):
    return x.shape if isinstance(x, Tensor) else ()


def operand_dtype(x):
    if isinstance(x, (Tensor, Expr)):
        return x.dtype
    return dt.const_dtype(x)


def elementwise(fn, *xs, name, tag="elementwise"):
    """``compute`` over the broadcast shape of ``xs`` of ``fn(*scalars)``."""
    shapes = [operand_shape(x) for x in xs]
    shape = broadcast_shape(shapes, name)
    return compute(shape, lambda *idx: fn(*(broadcast_read(x, shape, idx) for x in xs)), name=name, tag=tag)


__all__ = [
    "normalize_axis", "normalize_axes", "broadcast_shape", "broadcast_read", "elementwise",
    "operand_shape", "operand_dtype", "tensor_name", "as_expr",
]
