"""Transform ops: reshape, transpose, slicing, joining, padding, gathering, contractions.

Every op is a ``compute`` whose body reads its inputs at index expressions
that are affine or quasi-affine in the output indices (sums of indices times
constants, ``floordiv``/``floormod`` by constants, ``min``/``max`` of
such), so the ISL simplifier can invert them exactly.  The one exception is
``take``, whose indices are data.  Reads that would fall outside an input
happen only inside the false branch of a ``select`` guarding them.

Shapes, axes and slice bounds are Python integers known while building;
bad ones raise a :class:`~polyad.errors.PolyadError` subclass naming the
tensor and the axis.
"""

import math

import numpy as np

from ..errors import AxisError, DtypeError, IndexingError, OutOfBoundsError, PolyadError, ShapeError
from ..te import dtype as dt
from ..te.construct import as_expr, binary, floordiv, floormod, select
from ..te.reduce import reduce_axis, sum as _sum
from ..te.tensor import Tensor, compute
from ._util import broadcast_shape, check_tensor, conjunction, is_int, normalize_axes, normalize_axis


# ---------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------

def _int_tuple(values, op, what):
    if is_int(values):
        values = (values,)
    try:
        values = tuple(values)
    except TypeError:
        raise ShapeError(f"{op}: {what} must be an integer or a sequence of integers, got {values!r}") from None
    for i, v in enumerate(values):
        if not is_int(v):
            raise ShapeError(f"{op}: {what}[{i}] = {v!r} is not an integer")
    return tuple(int(v) for v in values)


def _prod(shape):
    return int(math.prod(shape))


def _min(a, b):
    return binary("min", a, b)


def _max(a, b):
    return binary("max", a, b)


# ---------------------------------------------------------------------------
# reshape family
# ---------------------------------------------------------------------------

def _reshape_groups(in_shape, out_shape):
    """Pair the non-unit axes of two shapes of equal size into minimal groups of equal product.

    Returns a list of (input axes, output axes).  Within a group the row-major
    linear index is the same on both sides; across groups the axes are
    independent, so e.g. (N, C, H, W) -> (N, C*H*W) keeps ``N`` as is.
    """
    ins = [d for d, s in enumerate(in_shape) if s != 1]
    outs = [d for d, s in enumerate(out_shape) if s != 1]
    groups, i, j = [], 0, 0
    while i < len(ins):
        gi, gj = [ins[i]], [outs[j]]
        pi, pj = in_shape[ins[i]], out_shape[outs[j]]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                gi.append(ins[i])
                pi *= in_shape[ins[i]]
                i += 1
            else:
                gj.append(outs[j])
                pj *= out_shape[outs[j]]
                j += 1
        groups.append((gi, gj))
    return groups


def _reshape_indices(in_shape, out_shape, idx):
    """Input indices of a row-major reshape, as quasi-affine expressions of the output indices."""
    res = [as_expr(0)] * len(in_shape)
    for gi, gj in _reshape_groups(in_shape, out_shape):
        lin, stride = as_expr(0), 1
        for d in reversed(gj):
            lin = idx[d] * stride + lin
            stride *= out_shape[d]
        if len(gi) == 1:
            res[gi[0]] = lin
            continue
        stride = 1
        for pos in range(len(gi) - 1, -1, -1):
            d = gi[pos]
            e = floordiv(lin, stride) if stride != 1 else lin
            # the first axis of a group needs no modulo: its quotient is already in range
            res[d] = floormod(e, in_shape[d]) if pos > 0 else e
            stride *= in_shape[d]
    return tuple(res)


def _infer_shape(x, newshape, op):
    newshape = _int_tuple(newshape, op, "newshape")
    unknown = [d for d, s in enumerate(newshape) if s == -1]
    if len(unknown) > 1:
        raise ShapeError(f"{op} of tensor {x.name!r}: only one axis may be -1, got {newshape} (axes {unknown})")
    for d, s in enumerate(newshape):
        if s == 0 or s < -1:
            raise ShapeError(f"{op} of tensor {x.name!r}: axis {d} of the new shape {newshape} has size {s}")
    known = _prod(s for s in newshape if s != -1)
    if unknown:
        d = unknown[0]
        if x.size % known:
            raise ShapeError(
                f"{op} of tensor {x.name!r} {x.shape} ({x.size} elements) to {newshape}: "
                f"axis {d} (-1) cannot be inferred, {x.size} is not a multiple of {known}"
            )
        newshape = newshape[:d] + (x.size // known,) + newshape[d + 1:]
    elif known != x.size:
        raise ShapeError(
            f"{op} of tensor {x.name!r}: cannot reshape {x.shape} ({x.size} elements) "
            f"to {newshape} ({known} elements)"
        )
    return newshape


def reshape(x, newshape, name="reshape"):
    """numpy ``reshape`` (row-major); one axis of ``newshape`` may be -1.

    :param x: the tensor to reshape.
    :param newshape: the new shape: an int or a sequence of ints with as many elements in all as ``x``; one entry
        may be -1, inferred from the others.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of shape ``newshape``, reading ``x`` at quasi-affine indices.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``newshape`` is not integers, has more than one -1, a size of 0 or below -1, or a
        different number of elements than ``x``.
    """
    x = check_tensor(x, name)
    shape = _infer_shape(x, newshape, name)
    return compute(shape, lambda *i: x[_reshape_indices(x.shape, shape, i)], name=name, tag="injective")


def reshape_like(x, like, name="reshape_like"):
    """Reshape ``x`` to the shape of tensor ``like``.

    :param x: the tensor to reshape.
    :param like: the tensor whose shape the result takes (its values are not read).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``like``'s shape.
    :raises DtypeError: when ``x`` or ``like`` is not a tensor.
    :raises ShapeError: when ``like`` has a different number of elements than ``x``.
    """
    return reshape(x, check_tensor(like, name, "like").shape, name=name)


def flatten(x, name="flatten"):
    """numpy ``ravel``: all of ``x`` as one row-major axis.

    :param x: the tensor to flatten.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new 1-D tensor of ``x.size`` elements.
    :raises DtypeError: when ``x`` is not a tensor.
    """
    x = check_tensor(x, name)
    return reshape(x, (x.size,), name=name)


def batch_flatten(x, name="batch_flatten"):
    """(N, ...) -> (N, prod(...)): keep the first axis, flatten the rest.

    :param x: the tensor, of at least one axis (the batch axis 0).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new 2-D tensor of shape ``(x.shape[0], prod(x.shape[1:]))``.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``x`` is 0-d.
    """
    x = check_tensor(x, name)
    if x.ndim == 0:
        raise ShapeError(f"{name} of tensor {x.name!r}: needs at least 1 axis (the batch axis 0), got a scalar")
    return reshape(x, (x.shape[0], _prod(x.shape[1:])), name=name)


def squeeze(x, axis=None, name="squeeze"):
    """Remove size-1 axes (all of them, or those in ``axis``, which must have size 1).

    :param x: the tensor.
    :param axis: None (every size-1 axis), or an int or a tuple of ints: the axes to remove.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``x``'s shape without the removed axes.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when an axis is not an integer, is out of range or repeated.
    :raises ShapeError: when an axis in ``axis`` does not have size 1.
    """
    x = check_tensor(x, name)
    if axis is None:
        drop = tuple(d for d, s in enumerate(x.shape) if s == 1)
    else:
        drop = normalize_axes(axis, x.ndim, f"{name} of tensor {x.name!r}")
        for d in drop:
            if x.shape[d] != 1:
                raise ShapeError(f"{name} of tensor {x.name!r}: axis {d} has size {x.shape[d]}, not 1")
    keep = [d for d in range(x.ndim) if d not in drop]

    def body(*i):
        idx = [0] * x.ndim
        for d, e in zip(keep, i):
            idx[d] = e
        return x[tuple(idx)]

    return compute(tuple(x.shape[d] for d in keep), body, name=name, tag="injective")


def expand_dims(x, axis, name="expand_dims"):
    """numpy ``expand_dims``: insert size-1 axes at the positions ``axis`` of the result.

    :param x: the tensor.
    :param axis: an int or a sequence of ints: the positions of the new axes in the result (negative counts from the
        end of the result).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of rank ``x.ndim + len(axis)``.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``axis`` is not integers.
    :raises AxisError: when a position is out of range for the result or repeated.
    """
    x = check_tensor(x, name)
    n = x.ndim + len(_int_tuple(axis, name, "axis"))
    new = normalize_axes(axis, n, f"{name} of tensor {x.name!r}")
    old = [d for d in range(n) if d not in new]
    shape = [1] * n
    for d, s in zip(old, x.shape):
        shape[d] = s
    return compute(tuple(shape), lambda *i: x[tuple(i[d] for d in old)], name=name, tag="injective")


def transpose(x, axes=None, name="transpose"):
    """numpy ``transpose``: output axis k is input axis ``axes[k]``; None reverses the axes.

    :param x: the tensor.
    :param axes: a permutation of ``x``'s axes (negative counts from the end), or None to reverse them.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of shape ``tuple(x.shape[a] for a in axes)``.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``axes`` is not integers.
    :raises AxisError: when ``axes`` has the wrong length, an axis out of range, or is not a permutation.
    """
    x = check_tensor(x, name)
    if axes is None:
        axes = tuple(range(x.ndim - 1, -1, -1))
    axes = _int_tuple(axes, name, "axes")
    if len(axes) != x.ndim:
        raise AxisError(
            f"{name} of tensor {x.name!r}: axes {axes} has {len(axes)} entries, the tensor has {x.ndim} axes"
        )
    perm = tuple(normalize_axis(a, x.ndim, f"{name} of tensor {x.name!r}") for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        missing = sorted(set(range(x.ndim)) - set(perm))
        raise AxisError(f"{name} of tensor {x.name!r}: axes {axes} is not a permutation (axis {missing[0]} is missing)")
    shape = tuple(x.shape[a] for a in perm)

    def body(*i):
        idx = [None] * x.ndim
        for k, a in enumerate(perm):
            idx[a] = i[k]
        return x[tuple(idx)]

    return compute(shape, body, name=name, tag="injective")


def layout_transform(x, src_layout, dst_layout, name="layout_transform"):
    """Permute axes between layouts named by distinct letters, e.g. ``"NCHW"`` -> ``"NHWC"``.

    :param x: the tensor, of as many axes as ``src_layout`` has letters.
    :param src_layout: ``x``'s layout, one distinct letter per axis (case does not matter).
    :param dst_layout: the result's layout: the same letters in another order.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor, ``x`` transposed to ``dst_layout``.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when a layout is not distinct letters, or the two layouts name different axes.
    :raises ShapeError: when ``src_layout`` does not have one letter per axis of ``x``.
    """
    x = check_tensor(x, name)
    for lay in (src_layout, dst_layout):
        if not isinstance(lay, str) or not lay.isalpha() or len(set(lay.upper())) != len(lay):
            raise AxisError(f"{name} of tensor {x.name!r}: layout {lay!r} must be distinct letters like 'NCHW'")
    src, dst = src_layout.upper(), dst_layout.upper()
    if len(src) != x.ndim:
        raise ShapeError(f"{name} of tensor {x.name!r}: layout {src_layout!r} has {len(src)} axes, the tensor {x.ndim}")
    if sorted(src) != sorted(dst):
        raise AxisError(f"{name} of tensor {x.name!r}: layouts {src_layout!r} and {dst_layout!r} name different axes")
    return transpose(x, tuple(src.index(c) for c in dst), name=name)


# ---------------------------------------------------------------------------
# joining and slicing
# ---------------------------------------------------------------------------

def _tensor_list(tensors, name):
    """One tensor or a non-empty list of them, each checked."""
    tensors = list(tensors) if not isinstance(tensors, Tensor) else [tensors]
    if not tensors:
        raise ShapeError(f"{name}: needs at least one tensor")
    for t in tensors:
        check_tensor(t, name)
    return tensors


def concatenate(tensors, axis=0, name="concatenate"):
    """numpy ``concatenate`` along ``axis``: the other axes must match.

    :param tensors: a tensor or a non-empty sequence of tensors of one dtype and rank (at least 1).
    :param axis: the axis to join along (negative counts from the end).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor whose ``axis`` is the sum of the inputs' sizes on it.
    :raises DtypeError: when an element is not a tensor, or the tensors' dtypes differ.
    :raises ShapeError: when there is no tensor, the tensors are 0-d, their ranks differ, or their shapes differ off
        ``axis``.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    """
    tensors = _tensor_list(tensors, name)
    t0 = tensors[0]
    if t0.ndim == 0:
        raise ShapeError(f"{name}: tensor {t0.name!r} is a scalar; zero-dimensional tensors cannot be concatenated")
    axis = normalize_axis(axis, t0.ndim, f"{name} of tensor {t0.name!r}")
    for t in tensors[1:]:
        if t.ndim != t0.ndim:
            raise ShapeError(f"{name}: tensor {t.name!r} has {t.ndim} axes, tensor {t0.name!r} has {t0.ndim}")
        for d in range(t0.ndim):
            if d != axis and t.shape[d] != t0.shape[d]:
                raise ShapeError(
                    f"{name} along axis {axis}: tensor {t.name!r} {t.shape} and tensor {t0.name!r} {t0.shape} "
                    f"differ at axis {d} ({t.shape[d]} vs {t0.shape[d]})"
                )
        if t.dtype != t0.dtype:
            raise DtypeError(f"{name}: tensor {t.name!r} is {t.dtype}, tensor {t0.name!r} is {t0.dtype}; cast first")
    offsets = np.cumsum([0] + [t.shape[axis] for t in tensors]).tolist()
    shape = t0.shape[:axis] + (offsets[-1],) + t0.shape[axis + 1:]

    def body(*i):
        # the last piece is the default; each earlier one is guarded so its reads stay in bounds
        def read(k):
            idx = list(i)
            idx[axis] = i[axis] - offsets[k]
            return tensors[k][tuple(idx)]

        e = read(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            e = select(i[axis] < offsets[k + 1], read(k), e)
        return e

    return compute(shape, body, name=name, tag="injective")


def stack(tensors, axis=0, name="stack"):
    """numpy ``stack``: join equal-shaped tensors along a new axis.

    :param tensors: a tensor or a non-empty sequence of tensors of one shape and dtype.
    :param axis: the position of the new axis in the result (negative counts from the end).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of rank ``ndim + 1``, of size ``len(tensors)`` on ``axis``.
    :raises DtypeError: when an element is not a tensor, or the tensors' dtypes differ.
    :raises ShapeError: when there is no tensor, or the shapes differ.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    """
    tensors = _tensor_list(tensors, name)
    t0 = tensors[0]
    axis = normalize_axis(axis, t0.ndim + 1, f"{name} of tensor {t0.name!r}")
    for t in tensors[1:]:
        if t.shape != t0.shape:
            raise ShapeError(f"{name}: tensor {t.name!r} {t.shape} and tensor {t0.name!r} {t0.shape} differ in shape")
        if t.dtype != t0.dtype:
            raise DtypeError(f"{name}: tensor {t.name!r} is {t.dtype}, tensor {t0.name!r} is {t0.dtype}; cast first")
    shape = t0.shape[:axis] + (len(tensors),) + t0.shape[axis:]

    def body(*i):
        idx = i[:axis] + i[axis + 1:]
        e = tensors[-1][idx]
        for k in range(len(tensors) - 2, -1, -1):
            e = select(i[axis] == k, tensors[k][idx], e)
        return e

    return compute(shape, body, name=name, tag="injective")


def _slice_compute(x, starts, steps, shape, name, tag="injective"):
    """out[i] = x[starts[d] + steps[d] * i[d]]: the common body of every slicing op."""

    def at(s, st, e):
        return s + st * e if st > 0 else s - (-st) * e  # "3 - i", not "3 + -1*i"

    return compute(shape, lambda *i: x[tuple(at(*a) for a in zip(starts, steps, i))], name=name, tag=tag)


def _norm_slice(x, d, b, e, s, name):
    n = x.shape[d]
    if s == 0:
        raise ShapeError(f"{name} of tensor {x.name!r}: axis {d} has step 0")
    start, stop, step = slice(b, e, s).indices(n)
    length = len(range(start, stop, step))
    if length == 0:
        raise ShapeError(
            f"{name} of tensor {x.name!r}: axis {d} slice [{b}:{e}:{s}] of size {n} is empty; "
            "tensors cannot have empty axes"
        )
    return start, step, length


def _entries(v, op, what):
    """A slice list's entries; one int (or None) is one entry (``list(2)`` raised a raw TypeError)."""
    if v is None or is_int(v):
        return [v]
    try:
        return list(v)
    except TypeError:
        raise ShapeError(f"{op}: {what} must be a list of ints (or None), got {v!r}") from None


def strided_slice(x, begin, end, strides=None, axes=None, name="strided_slice"):
    """``x[b0:e0:s0, b1:e1:s1, ...]`` with numpy slice semantics.

    ``begin``/``end``/``strides`` may be shorter than the rank (the remaining
    axes are taken whole) and may contain None (the numpy default for that
    bound).  Out-of-range bounds clamp as in numpy; negative strides walk
    backwards.  ``axes`` (as in TVM) names the axes the lists apply to.

    :param x: the tensor to slice.
    :param begin: the start of each sliced axis (an int or None), a list (one int for one axis).
    :param end: the stop of each sliced axis (an int or None), as many entries as ``begin``.
    :param strides: the step of each sliced axis (nonzero ints or None; missing ones are 1), or None for all 1.
    :param axes: the axes the lists apply to, or None for the first ``len(begin)`` axes.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of the sliced shape.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when an axis in ``axes`` is out of range or repeated, or there are more than ``x.ndim``.
    :raises ShapeError: when the lists' lengths do not match the axes, a bound or stride is not an integer, a stride
        is 0, or a slice is empty (tensors have no empty axes).
    """
    x = check_tensor(x, name)
    begin, end = _entries(begin, name, "begin"), _entries(end, name, "end")
    strides = [1] * len(begin) if strides is None else _entries(strides, name, "strides")
    if axes is None:
        axes = list(range(len(begin)))
    else:
        axes = [normalize_axis(a, x.ndim, f"{name} of tensor {x.name!r}") for a in _int_tuple(axes, name, "axes")]
    if len(set(axes)) != len(axes):
        raise AxisError(f"{name} of tensor {x.name!r}: axis {next(a for a in axes if axes.count(a) > 1)} is "
                        f"sliced twice (axes {axes})")
    if len(axes) > x.ndim:
        raise AxisError(f"{name} of tensor {x.name!r}: {len(axes)} slice axes {axes} for a tensor of {x.ndim} axes")
    if len(begin) != len(axes) or len(end) != len(axes) or len(strides) > len(axes):
        raise ShapeError(
            f"{name} of tensor {x.name!r}: begin, end, strides have {len(begin)}, {len(end)}, {len(strides)} "
            f"entries for {len(axes)} axes"
        )
    strides = strides + [1] * (len(axes) - len(strides))
    starts, steps, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    for k, d in enumerate(axes):
        b, e, s = begin[k], end[k], strides[k]
        for what, v in (("begin", b), ("end", e), ("stride", s)):
            if v is not None and not is_int(v):
                raise ShapeError(f"{name} of tensor {x.name!r}: axis {d} {what} {v!r} is not an integer")
        starts[d], steps[d], shape[d] = _norm_slice(x, d, b, e, s, name)
    return _slice_compute(x, starts, steps, tuple(shape), name)


def flip(x, axis=None, name="flip"):
    """numpy ``flip``: reverse the given axes (all when None).

    :param x: the tensor.
    :param axis: an int or a tuple of ints: the axes to reverse, or None for all.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``x``'s shape.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when an axis is not an integer, is out of range or repeated.
    """
    x = check_tensor(x, name)
    axes = normalize_axes(axis, x.ndim, f"{name} of tensor {x.name!r}")
    starts = [x.shape[d] - 1 if d in axes else 0 for d in range(x.ndim)]
    steps = [-1 if d in axes else 1 for d in range(x.ndim)]
    return _slice_compute(x, starts, steps, x.shape, name)


def split(x, indices_or_sections, axis=0, name="split"):
    """numpy ``split``: ``n`` equal sections, or pieces cut at the sorted ``indices``.

    Returns a list of tensors.  A piece would be empty (repeated or
    out-of-range indices) raises ShapeError: tensors have no empty axes.

    :param x: the tensor to split, of at least one axis.
    :param indices_or_sections: an int ``n`` (that many equal pieces) or a sequence of ints (the cut positions along
        ``axis``).
    :param axis: the axis to split (negative counts from the end).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a list of new tensors, the pieces in order.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises ShapeError: when ``x`` is 0-d, ``n`` is not positive or does not divide the axis, the cut positions are
        not integers, or a piece would be empty.
    """
    x = check_tensor(x, name)
    if x.ndim == 0:
        raise ShapeError(f"{name} of tensor {x.name!r}: cannot split a scalar")
    axis = normalize_axis(axis, x.ndim, f"{name} of tensor {x.name!r}")
    n = x.shape[axis]
    if is_int(indices_or_sections):
        sec = int(indices_or_sections)
        if sec <= 0 or n % sec:
            raise ShapeError(f"{name} of tensor {x.name!r}: axis {axis} of size {n} does not split into {sec} equal sections")
        cuts = [n // sec * k for k in range(1, sec)]
    else:
        cuts = list(_int_tuple(indices_or_sections, name, "indices"))
    bounds = [0] + cuts + [n]
    outs = []
    for k in range(len(bounds) - 1):
        start, step, length = _norm_slice(x, axis, bounds[k], bounds[k + 1], 1, f"{name} (piece {k})")
        starts = [0] * x.ndim
        starts[axis] = start
        shape = x.shape[:axis] + (length,) + x.shape[axis + 1:]
        outs.append(_slice_compute(x, starts, [1] * x.ndim, shape, name))
    return outs


def slice_like(x, like, axes=None, name="slice_like"):
    """TVM ``slice_like``: the leading ``like.shape`` corner of ``x`` on ``axes`` (default: the axes of ``like``).

    :param x: the tensor to slice.
    :param like: a tensor or a shape (a sequence of ints) to match.
    :param axes: the axes of ``x`` to slice (int or tuple of ints), or None for the first ``len(like.shape)`` axes.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor, ``x[0:like.shape[d]]`` on each sliced axis ``d``.
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``like`` is not a tensor or integers, has more axes than ``x`` (``axes`` None), or is
        larger than ``x`` on a sliced axis.
    :raises AxisError: when an axis is out of range or repeated, or is not an axis of ``like``.
    """
    x = check_tensor(x, name)
    lshape = like.shape if isinstance(like, Tensor) else _int_tuple(like, name, "shape")
    if axes is None:
        if len(lshape) > x.ndim:
            raise ShapeError(f"{name} of tensor {x.name!r}: the shape to match {lshape} has more axes than {x.shape}")
        axes = tuple(range(len(lshape)))
    else:
        axes = normalize_axes(axes, x.ndim, f"{name} of tensor {x.name!r}")
    shape = list(x.shape)
    for d in axes:
        if d >= len(lshape):
            raise AxisError(f"{name} of tensor {x.name!r}: axis {d} is not an axis of the shape {lshape} to match")
        if lshape[d] > x.shape[d]:
            raise ShapeError(f"{name} of tensor {x.name!r}: axis {d} has size {x.shape[d]} < {lshape[d]}")
        shape[d] = lshape[d]
    return _slice_compute(x, [0] * x.ndim, [1] * x.ndim, tuple(shape), name)


# ---------------------------------------------------------------------------
# broadcasting and its adjoint
# ---------------------------------------------------------------------------

def broadcast_to(x, shape, name="broadcast_to"):
    """numpy ``broadcast_to``: the result has exactly ``shape``.

    :param x: a tensor, or a scalar (the result is then that constant everywhere).
    :param shape: the target shape: an int or a sequence of positive ints to which ``x`` broadcasts.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``shape``.
    :raises ShapeError: when ``shape`` is not positive integers, has fewer axes than ``x``, or ``x`` does not
        broadcast to it.
    """
    shape = _int_tuple(shape, name, "shape")
    if not isinstance(x, Tensor):  # a scalar: a constant fill
        value = as_expr(x)
        return compute(shape, lambda *i: value, name=name, tag="injective")
    if len(shape) < x.ndim:
        raise ShapeError(f"{name} of tensor {x.name!r} {x.shape}: the target {shape} has fewer axes")
    off = len(shape) - x.ndim
    for d, s in enumerate(x.shape):
        if s != 1 and s != shape[off + d]:
            raise ShapeError(
                f"{name} of tensor {x.name!r} {x.shape} to {shape}: axis {d} has size {s}, "
                f"the target axis {off + d} has size {shape[off + d]}"
            )

    def body(*i):
        return x[tuple(0 if x.shape[d] == 1 else i[off + d] for d in range(x.ndim))]

    return compute(shape, body, name=name, tag="injective")


def broadcast_to_like(x, like, name="broadcast_to_like"):
    """numpy ``broadcast_to`` to the shape of tensor ``like``.

    :param x: a tensor, or a scalar (the result is then that constant everywhere).
    :param like: the tensor whose shape the result takes (its values are not read).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``like``'s shape.
    :raises DtypeError: when ``like`` is not a tensor.
    :raises ShapeError: when ``x`` does not broadcast to ``like``'s shape.
    """
    return broadcast_to(x, check_tensor(like, name, "like").shape, name=name)


def collapse_sum_to(x, shape, name="collapse_sum"):
    """Sum ``x`` down to ``shape``, which must broadcast to ``x.shape``: the adjoint of broadcast_to.

    :param x: the tensor to sum.
    :param shape: the target shape: an int or a sequence of ints that broadcasts to ``x.shape``.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``shape`` (a copy of ``x`` when ``shape`` is ``x.shape``).
    :raises DtypeError: when ``x`` is not a tensor.
    :raises ShapeError: when ``shape`` is not integers, has more axes than ``x``, or does not broadcast to
        ``x.shape``.
    """
    x = check_tensor(x, name)
    shape = _int_tuple(shape, name, "shape")
    off = x.ndim - len(shape)
    if off < 0:
        raise ShapeError(f"{name} of tensor {x.name!r} {x.shape}: the target {shape} has more axes")
    for d, s in enumerate(shape):
        if s != 1 and s != x.shape[off + d]:
            raise ShapeError(
                f"{name} of tensor {x.name!r} {x.shape} to {shape}: target axis {d} has size {s}, "
                f"tensor axis {off + d} has size {x.shape[off + d]}"
            )
    summed = [d for d in range(x.ndim) if d < off or (shape[d - off] == 1 and x.shape[d] != 1)]
    if not summed:
        return _slice_compute(x, [0] * x.ndim, [1] * x.ndim, x.shape, name)  # x has the shape already
    ks = {d: reduce_axis((0, x.shape[d]), name=f"k{d}") for d in summed}

    def body(*i):
        idx = tuple(ks[d] if d in ks else (0 if x.shape[d] == 1 else i[d - off]) for d in range(x.ndim))
        return _sum(x[idx], axis=[ks[d] for d in summed])

    return compute(shape, body, name=name, tag="reduction")


def collapse_sum_like(x, like, name="collapse_sum_like"):
    """Sum ``x`` to the shape of ``like`` (summing the axes broadcasting added or widened).

    :param x: the tensor to sum.
    :param like: the tensor whose shape the result takes (its values are not read).
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of ``like``'s shape.
    :raises DtypeError: when ``x`` or ``like`` is not a tensor.
    :raises ShapeError: when ``like``'s shape does not broadcast to ``x.shape``.
    """
    return collapse_sum_to(x, check_tensor(like, name, "like").shape, name=name)


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------

def _pad_widths(x, pad_width, name):
    try:
        pw = np.broadcast_to(np.asarray(pad_width, dtype=object), (x.ndim, 2))
    except ValueError:
        raise ShapeError(f"{name} of tensor {x.name!r}: pad_width {pad_width!r} does not fit {x.ndim} axes") from None
    out = []
    for d in range(x.ndim):
        b, a = pw[d]
        if not (is_int(b) and is_int(a)) or b < 0 or a < 0:
            raise ShapeError(f"{name} of tensor {x.name!r}: axis {d} pad ({b!r}, {a!r}) must be non-negative integers")
        out.append((int(b), int(a)))
    return out


def pad(x, pad_width, mode="constant", constant_values=0, name="pad"):
    """numpy ``pad`` with modes ``constant``, ``edge``, ``reflect`` and ``symmetric``.

    ``pad_width`` is as numpy's: an int, a (before, after) pair, or one pair
    per axis.  ``reflect`` needs pads smaller than the axis, ``symmetric``
    pads at most the axis size (numpy would reflect repeatedly).

    :param x: the tensor to pad.
    :param pad_width: the pads: an int, a (before, after) pair, or one pair per axis, non-negative integers.
    :param mode: ``"constant"``, ``"edge"``, ``"reflect"`` or ``"symmetric"``.
    :param constant_values: the scalar written in the pads (mode ``"constant"``), converted to ``x``'s dtype.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor, each axis longer by its two pads.
    :raises DtypeError: when ``x`` is not a tensor, or ``constant_values`` cannot be exactly ``x``'s dtype (0.5 for
        an integer tensor).
    :raises ShapeError: when ``pad_width`` does not fit ``x``'s axes or has a negative or non-integer pad,
        ``constant_values`` is not one scalar, or a reflect/symmetric pad is too large for its axis.
    :raises PolyadError: when ``mode`` is unknown.
    """
    x = check_tensor(x, name)
    pw = _pad_widths(x, pad_width, name)
    shape = tuple(s + b + a for s, (b, a) in zip(x.shape, pw))
    padded = [d for d in range(x.ndim) if pw[d] != (0, 0)]

    if mode == "constant":
        if not np.ndim(constant_values) == 0:
            raise ShapeError(f"{name} of tensor {x.name!r}: constant_values must be one scalar")
        try:
            value = as_expr(constant_values, x.dtype)
        except DtypeError as e:  # 0.5 padding an integer tensor: name the op and the tensor
            raise DtypeError(f"{name} of tensor {x.name!r}: constant_values: {e}") from None

        def body(*i):
            idx = tuple(i[d] - pw[d][0] for d in range(x.ndim))
            conds = []
            for d in padded:
                b, a = pw[d]
                if b:
                    conds.append(i[d] >= b)
                if a:
                    conds.append(i[d] < b + x.shape[d])
            cond = conjunction(conds)
            return x[idx] if cond is None else select(cond, x[idx], value)

        return compute(shape, body, name=name, tag="injective")

    if mode == "edge":
        def fold(d, i):
            j = i - pw[d][0]
            j = _max(j, 0) if pw[d][0] else j
            return _min(j, x.shape[d] - 1) if pw[d][1] else j
    elif mode == "reflect":
        for d in padded:
            if max(pw[d]) >= x.shape[d]:
                raise ShapeError(
                    f"{name} of tensor {x.name!r}: reflect padding {pw[d]} of axis {d} needs pads smaller "
                    f"than its size {x.shape[d]}"
                )

        def fold(d, i):  # j = i - before: -j below 0, 2(n-1) - j above n-1 (|j| <= 2(n-1) as pads < n)
            a = _max(i - pw[d][0], pw[d][0] - i) if pw[d][0] else i  # |j| as a max: piecewise affine for isl
            return _min(a, 2 * (x.shape[d] - 1) - a) if pw[d][1] else a
    elif mode == "symmetric":
        for d in padded:
            if max(pw[d]) > x.shape[d]:
                raise ShapeError(
                    f"{name} of tensor {x.name!r}: symmetric padding {pw[d]} of axis {d} needs pads at most "
                    f"its size {x.shape[d]}"
                )

        def fold(d, i):  # j = i - before: -1 - j below 0, 2n - 1 - j above n-1 (pads <= n)
            b = _max(i - pw[d][0], pw[d][0] - 1 - i) if pw[d][0] else i
            return _min(b, 2 * x.shape[d] - 1 - b) if pw[d][1] else b
    else:
        raise PolyadError(f"{name} of tensor {x.name!r}: unknown mode {mode!r} (constant, edge, reflect, symmetric)")

    def body(*i):
        return x[tuple(fold(d, i[d]) if d in padded else i[d] for d in range(x.ndim))]

    return compute(shape, body, name=name, tag="injective")


# ---------------------------------------------------------------------------
# gathering
# ---------------------------------------------------------------------------

_TAKE_MODES = ("clip", "raise", "wrap")


def take(a, indices, axis=None, mode="clip", name="take"):
    """numpy ``take``: elements of ``a`` at integer ``indices`` (a tensor or a Python int).

    ``axis=None`` indexes the flattened ``a``.  ``mode``: ``"clip"`` (the
    default, as TVM: always safe in compiled code) clamps into range;
    ``"wrap"`` wraps modulo the size; ``"raise"`` counts negative indices
    from the end as numpy and reads as is otherwise, so ``pa.evaluate``
    raises OutOfBoundsError on an index out of range (compiled code reads NaN
    there: :mod:`polyad.poly.bounds`).

    :param a: the tensor to read from.
    :param indices: an integer tensor of indices (read as data), or a Python int.
    :param axis: the axis to index (negative counts from the end), or None for the flattened ``a``.
    :param mode: ``"clip"``, ``"wrap"`` or ``"raise"``: what an index out of range does.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor of shape ``a.shape[:axis] + indices.shape + a.shape[axis + 1:]`` (``indices.shape`` when
        ``axis`` is None).
    :raises DtypeError: when ``a`` is not a tensor.
    :raises PolyadError: when ``mode`` is not one of the three.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises IndexingError: when ``indices`` is neither an integer tensor nor a Python int.
    :raises OutOfBoundsError: when ``indices`` is a Python int outside ``[-n, n)`` in mode ``"raise"``.
    """
    a = check_tensor(a, name)
    if mode not in _TAKE_MODES:
        raise PolyadError(f"{name} of tensor {a.name!r}: mode {mode!r} is not one of {_TAKE_MODES}")
    if axis is None:
        src_shape = (a.size,)
        ax, what = 0, f"{name} of tensor {a.name!r} (flattened)"
    else:
        ax = normalize_axis(axis, a.ndim, f"{name} of tensor {a.name!r}")
        src_shape, what = a.shape, f"{name} of tensor {a.name!r}, axis {ax}"
    n = src_shape[ax]

    if isinstance(indices, Tensor):
        if not dt.is_int(indices.dtype):
            raise IndexingError(f"{what}: indices tensor {indices.name!r} is {indices.dtype}; indices must be integers")
        ind_shape = indices.shape
    elif is_int(indices):
        k = int(indices)
        if mode == "clip":
            k = min(max(k, 0), n - 1)
        elif mode == "wrap":
            k %= n
        elif not -n <= k < n:
            raise OutOfBoundsError(f"{what}: index {k} is outside [-{n}, {n})")
        k %= n
        ind_shape = ()
    else:
        raise IndexingError(f"{what}: indices must be an integer tensor or a Python int, got {indices!r}")

    def position(j):
        if mode == "clip":
            return _max(_min(j, n - 1), 0)
        if mode == "wrap":
            return floormod(j, n)
        return select(j < 0, j + n, j)

    def src_read(pos, outer, inner):
        if axis is None:
            # unravel the flat position; the first axis takes the whole quotient, so an
            # out-of-range position is an out-of-range read even through size-1 axes
            idx, stride = [], a.size
            for d, s in enumerate(a.shape):
                stride //= s
                q = floordiv(pos, stride)
                idx.append(q if d == 0 else floormod(q, s))
            return a[tuple(idx)]
        return a[tuple(outer) + (pos,) + tuple(inner)]

    m = len(ind_shape)
    shape = (a.shape[:ax] + ind_shape + a.shape[ax + 1:]) if axis is not None else ind_shape

    def body(*i):
        outer, mid = (i[:ax], i[ax:ax + m]) if axis is not None else ((), i)
        inner = i[ax + m:] if axis is not None else ()
        if isinstance(indices, Tensor):
            pos = position(indices[tuple(mid)])
        else:
            pos = k
        return src_read(pos, outer, inner)

    return compute(shape, body, name=name, tag="injective")


# ---------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------

def _check_same_dtype(a, b, name):
    if a.dtype != b.dtype:
        raise DtypeError(f"{name}: tensor {a.name!r} is {a.dtype}, tensor {b.name!r} is {b.dtype}; cast first")


def tensordot(a, b, axes=2, name="tensordot"):
    """numpy ``tensordot``: sum over ``axes`` (an int N: the last N of ``a`` with the first N of ``b``,
    or a pair of axis lists).

    :param a: the first tensor.
    :param b: the second tensor, of ``a``'s dtype.
    :param axes: an int N, or a pair (axes of ``a``, axes of ``b``) of equal-length axis lists to contract.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor: the free axes of ``a`` then those of ``b``.
    :raises DtypeError: when ``a`` or ``b`` is not a tensor, or their dtypes differ.
    :raises AxisError: when N is out of range, ``axes`` is malformed, the lists differ in length, or an axis is out
        of range or repeated.
    :raises ShapeError: when an axis list is not integers, or paired axes differ in size.
    """
    a, b = check_tensor(a, name), check_tensor(b, name)
    _check_same_dtype(a, b, name)
    if is_int(axes):
        if not 0 <= axes <= min(a.ndim, b.ndim):
            raise AxisError(f"{name} of tensors {a.name!r} and {b.name!r}: cannot contract {axes} axes")
        ax_a, ax_b = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise AxisError(f"{name}: axes must be an int or a pair of axis lists, got {axes!r}") from None
        ax_a, ax_b = _int_tuple(ax_a, name, "axes[0]"), _int_tuple(ax_b, name, "axes[1]")
        if len(ax_a) != len(ax_b):
            raise AxisError(f"{name}: {len(ax_a)} axes of tensor {a.name!r} paired with {len(ax_b)} of {b.name!r}")
        ax_a = tuple(normalize_axis(d, a.ndim, f"{name} of tensor {a.name!r}") for d in ax_a)
        ax_b = tuple(normalize_axis(d, b.ndim, f"{name} of tensor {b.name!r}") for d in ax_b)
        for t, ax in ((a, ax_a), (b, ax_b)):
            if len(set(ax)) != len(ax):
                raise AxisError(f"{name}: repeated axis of tensor {t.name!r} in {ax}")
    for da, db in zip(ax_a, ax_b):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(
                f"{name}: axis {da} of tensor {a.name!r} (size {a.shape[da]}) does not match "
                f"axis {db} of tensor {b.name!r} (size {b.shape[db]})"
            )
    free_a = [d for d in range(a.ndim) if d not in ax_a]
    free_b = [d for d in range(b.ndim) if d not in ax_b]
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    ks = [reduce_axis((0, a.shape[d]), name=f"k{j}") for j, d in enumerate(ax_a)]

    def body(*i):
        ia, ib = [None] * a.ndim, [None] * b.ndim
        for d, e in zip(free_a, i):
            ia[d] = e
        for d, e in zip(free_b, i[len(free_a):]):
            ib[d] = e
        for k, da, db in zip(ks, ax_a, ax_b):
            ia[da] = ib[db] = k
        prod = a[tuple(ia)] * b[tuple(ib)]
        return _sum(prod, axis=ks) if ks else prod

    return compute(shape, body, name=name, tag="reduction" if ks else "injective")


def matmul(a, b, name="matmul"):
    """numpy ``matmul``: 1-D operands are promoted and their axis dropped; batch axes broadcast.

    :param a: the left tensor, of at least one axis.
    :param b: the right tensor, of at least one axis and ``a``'s dtype.
    :param name: the name of the resulting compute (what ``pa.show`` and the generated kernels call it).
    :returns: a new tensor: the broadcast batch axes, then the rows of ``a`` and the columns of ``b`` (each dropped
        for a 1-D operand).
    :raises DtypeError: when ``a`` or ``b`` is not a tensor, or their dtypes differ.
    :raises ShapeError: when an operand is 0-d, the contracted axes differ in size, or the batch axes do not
        broadcast.
    """
    a, b = check_tensor(a, name), check_tensor(b, name)
    _check_same_dtype(a, b, name)
    for t in (a, b):
        if t.ndim == 0:
            raise ShapeError(f"{name}: tensor {t.name!r} is a scalar; matmul needs at least 1 axis (use multiply)")
    ka, kb = a.ndim - 1, (b.ndim - 2 if b.ndim > 1 else 0)
    if a.shape[ka] != b.shape[kb]:
        raise ShapeError(
            f"{name}: axis {ka} of tensor {a.name!r} {a.shape} (size {a.shape[ka]}) does not match "
            f"axis {kb} of tensor {b.name!r} {b.shape} (size {b.shape[kb]})"
        )
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    batch = broadcast_shape([batch_a, batch_b], f"{name} of tensors {a.name!r} and {b.name!r} (batch axes)")
    nb = len(batch)
    rows = a.ndim > 1
    cols = b.ndim > 1
    shape = batch + ((a.shape[-2],) if rows else ()) + ((b.shape[-1],) if cols else ())
    k = reduce_axis((0, a.shape[ka]), name="k")

    def batch_idx(t_batch, i):
        off = nb - len(t_batch)
        return tuple(0 if s == 1 else i[off + d] for d, s in enumerate(t_batch))

    def body(*i):
        ia = batch_idx(batch_a, i) + ((i[nb],) if rows else ()) + (k,)
        ib = batch_idx(batch_b, i) + (k,) + ((i[-1],) if cols else ())
        return _sum(a[ia] * b[ib], axis=k)

    return compute(shape, body, name=name, tag="reduction")


__all__ = [
    "reshape", "reshape_like", "flatten", "batch_flatten", "squeeze", "expand_dims", "transpose",
    "layout_transform", "concatenate", "stack", "strided_slice", "flip", "split", "slice_like",
    "broadcast_to", "broadcast_to_like", "collapse_sum_to", "collapse_sum_like", "pad", "take",
    "tensordot", "matmul",
]
