"""Reductions over tensor axes with numpy semantics: ``sum max min mean prod argmax argmin``.

``axis`` is None (every axis), an int or a tuple of ints (negative counts from
the end); ``keepdims=True`` keeps reduced axes with size 1.  Each op is one
``compute`` named after the op and tagged "reduction" whose body is a single
reduction over one reduce axis per reduced dimension (a reduction over no axis,
``axis=()`` or a 0-d tensor, is an "elementwise" copy).

Result dtypes follow numpy: ``sum``/``prod`` of int32 or bool accumulate in
int64, ``mean`` of integers or bools is float64, ``max``/``min`` keep the dtype
(on bool they are any/all), ``argmax``/``argmin`` give int64 indices (flat
row-major indices when ``axis=None``) of the first extremum, NaN counting as
the extremum as numpy does.
"""

from ..errors import AxisError, DtypeError
from ..te import dtype as dt
from ..te.construct import binary, cast
from ..te.expr import Const
from ..te.reduce import arg_combiner, arg_identity, comm_reducer, reduce_axis
from ..te.reduce import max as _te_max
from ..te.reduce import min as _te_min
from ..te.reduce import prod as _te_prod
from ..te.reduce import sum as _te_sum
from ..te.tensor import compute
from ._util import check_flag, check_tensor, normalize_axes, normalize_axis

__all__ = ["sum", "max", "min", "mean", "prod", "argmax", "argmin"]

_any = comm_reducer(lambda x, y: binary("or", x, y), lambda t: Const(False, t), name="any")
_all = comm_reducer(lambda x, y: binary("and", x, y), lambda t: Const(True, t), name="all")


def _dtype_arg(name, x, dtype, default):
    if dtype is None:
        return default
    try:
        return dt.canonical(dtype)
    except DtypeError as e:
        raise DtypeError(f"{name} of tensor {x.name!r}: {e}") from None


def _reduction(name, x, axes, keepdims, body, copy):
    """The compute of a reduction of ``x`` over the (normalised) ``axes``.

    ``body(element, raxes)`` builds the reduction of ``element`` (``x`` read
    at the output point and the reduce axes ``raxes``); ``copy(element)`` is
    the result when there is nothing to reduce.
    """
    shape = x.shape
    keepdims = check_flag(keepdims, "keepdims", f"{name} of tensor {x.name!r}")
    if keepdims:
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    else:
        out_shape = tuple(s for d, s in enumerate(shape) if d not in axes)

    def read(idx, raxes):
        by_dim = dict(zip(axes, raxes))
        kept = iter(idx if not keepdims else ())
        return x[tuple(by_dim[d] if d in by_dim else (idx[d] if keepdims else next(kept)) for d in range(x.ndim))]

    if not axes:
        return compute(out_shape, lambda *idx: copy(read(idx, ())), name=name, tag="elementwise")

    def fcompute(*idx):
        raxes = tuple(reduce_axis((0, shape[d]), name=f"k{d}") for d in axes)
        return body(read(idx, raxes), raxes)

    return compute(out_shape, fcompute, name=name, tag="reduction")


def _axes(name, x, axis):
    return normalize_axes(axis, x.ndim, f"{name} of tensor {x.name!r} {x.shape}")


def _accumulator(x):
    """numpy's accumulator for sum/prod: small integers and bools widen to int64."""
    return x.dtype if dt.is_float(x.dtype) or x.dtype == "int64" else "int64"


def sum(x, axis=None, keepdims=False, dtype=None):  # noqa: A001 - numpy's name
    """Sum over ``axis``; int32/bool accumulate in int64 unless ``dtype`` is given.

    :param x: the tensor to reduce.
    :param axis: the axes to reduce: None (every axis), an int or a tuple of ints (negative counts from the end).
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :param dtype: the accumulation and result dtype; None accumulates int32 and bool in int64, others in their
        dtype; ``"bool"`` is whether any element is nonzero, as numpy's.
    :returns: a new tensor of the reduced shape, tagged "reduction".
    :raises DtypeError: when ``x`` is not a tensor, or ``dtype`` is not a dtype polyad supports.
    :raises AxisError: when an axis is not an integer, is out of range for ``x``, or is repeated.
    """
    x = check_tensor(x, "sum")
    t = _dtype_arg("sum", x, dtype, _accumulator(x))
    red = _any if dt.is_bool(t) else _te_sum  # numpy's bool sum: True + True is True
    return _reduction("sum", x, _axes("sum", x, axis), keepdims,
                      lambda e, k: red(cast(e, t), axis=k), lambda e: cast(e, t))


def prod(x, axis=None, keepdims=False, dtype=None):
    """Product over ``axis``; int32/bool accumulate in int64 unless ``dtype`` is given.

    :param x: the tensor to reduce.
    :param axis: the axes to reduce: None (every axis), an int or a tuple of ints (negative counts from the end).
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :param dtype: the accumulation and result dtype; None accumulates int32 and bool in int64, others in their
        dtype; ``"bool"`` is whether every element is nonzero, as numpy's.
    :returns: a new tensor of the reduced shape, tagged "reduction".
    :raises DtypeError: when ``x`` is not a tensor, or ``dtype`` is not a dtype polyad supports.
    :raises AxisError: when an axis is not an integer, is out of range for ``x``, or is repeated.
    """
    x = check_tensor(x, "prod")
    t = _dtype_arg("prod", x, dtype, _accumulator(x))
    red = _all if dt.is_bool(t) else _te_prod  # numpy's bool product
    return _reduction("prod", x, _axes("prod", x, axis), keepdims,
                      lambda e, k: red(cast(e, t), axis=k), lambda e: cast(e, t))


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis`` (any for bool).

    :param x: the tensor to reduce.
    :param axis: the axes to reduce: None (every axis), an int or a tuple of ints (negative counts from the end).
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :returns: a new tensor of the reduced shape and ``x``'s dtype, tagged "reduction".
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when an axis is not an integer, is out of range for ``x``, or is repeated.
    """
    x = check_tensor(x, "max")
    red = _any if dt.is_bool(x.dtype) else (lambda e, axis: _te_max(e, axis=axis))
    return _reduction("max", x, _axes("max", x, axis), keepdims, lambda e, k: red(e, axis=k), lambda e: e)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis`` (all for bool).

    :param x: the tensor to reduce.
    :param axis: the axes to reduce: None (every axis), an int or a tuple of ints (negative counts from the end).
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :returns: a new tensor of the reduced shape and ``x``'s dtype, tagged "reduction".
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when an axis is not an integer, is out of range for ``x``, or is repeated.
    """
    x = check_tensor(x, "min")
    red = _all if dt.is_bool(x.dtype) else (lambda e, axis: _te_min(e, axis=axis))
    return _reduction("min", x, _axes("min", x, axis), keepdims, lambda e, k: red(e, axis=k), lambda e: e)


def mean(x, axis=None, keepdims=False, dtype=None):
    """Arithmetic mean over ``axis``: float64 for integer and bool tensors unless ``dtype`` is given.

    One stage: the sum of ``x * (1/n)``.

    :param x: the tensor to reduce.
    :param axis: the axes to reduce: None (every axis), an int or a tuple of ints (negative counts from the end).
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :param dtype: the float dtype of the computation and the result; None takes ``x``'s for floats, float64
        otherwise.
    :returns: a new float tensor of the reduced shape, tagged "reduction".
    :raises DtypeError: when ``x`` is not a tensor, or ``dtype`` is not a float dtype polyad supports.
    :raises AxisError: when an axis is not an integer, is out of range for ``x``, or is repeated.
    """
    x = check_tensor(x, "mean")
    t = _dtype_arg("mean", x, dtype, x.dtype if dt.is_float(x.dtype) else "float64")
    if not dt.is_float(t):
        raise DtypeError(f"mean of tensor {x.name!r}: dtype {t} is not a float dtype")
    axes = _axes("mean", x, axis)
    n = 1
    for d in axes:
        n *= x.shape[d]
    scale = Const(1.0 / n, t)
    return _reduction("mean", x, axes, keepdims,
                      lambda e, k: _te_sum(cast(e, t) * scale, axis=k), lambda e: cast(e, t))


_argmax = comm_reducer(arg_combiner("gt"), arg_identity("max"), name="argmax")
_argmin = comm_reducer(arg_combiner("lt"), arg_identity("min"), name="argmin")


def _arg(name, reducer, x, axis, keepdims):
    x = check_tensor(x, name)
    what = f"{name} of tensor {x.name!r} {x.shape}"
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        if not isinstance(axis, int) and not hasattr(axis, "__index__"):
            raise AxisError(f"{what}: axis must be None or one integer, got {axis!r}")
        axes = (normalize_axis(axis, x.ndim, what),)

    def body(e, raxes):
        flat, stride = Const(0, "int64"), 1
        for d, k in reversed(list(zip(axes, raxes))):
            flat = flat + cast(k, "int64") * Const(stride, "int64")
            stride *= x.shape[d]
        return reducer((flat, e), axis=raxes)

    out = _reduction(name, x, axes, keepdims, body, lambda e: Const(0, "int64"))
    return out[0] if isinstance(out, list) else out


def argmax(x, axis=None, keepdims=False):
    """int64 indices of the first maximum along ``axis`` (of the flattened tensor if None).

    :param x: the tensor.
    :param axis: the one axis to search along (negative counts from the end), or None for the flattened tensor.
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :returns: a new int64 tensor of the reduced shape (row-major flat indices when ``axis`` is None).
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when ``axis`` is not None or one integer, or is out of range for ``x``.
    """
    return _arg("argmax", _argmax, x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """int64 indices of the first minimum along ``axis`` (of the flattened tensor if None).

    :param x: the tensor.
    :param axis: the one axis to search along (negative counts from the end), or None for the flattened tensor.
    :param keepdims: keep the reduced axes with size 1 (numpy's ``keepdims``).
    :returns: a new int64 tensor of the reduced shape (row-major flat indices when ``axis`` is None).
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when ``axis`` is not None or one integer, or is out of range for ``x``.
    """
    return _arg("argmin", _argmin, x, axis, keepdims)
