"""Neural-network ops (``pa.nn``): the TOPI of polyad, NCHW layout, OIHW weights.

Every op is plain ``compute`` stages.  Index expressions are affine or
quasi-affine (``//`` and ``%`` by constants) in the output and reduce indices,
and bounds are expressed as conditions (``pa.select`` guards or ``where=``),
never by clamping indices: the polyhedral layer turns those conditions into
exact domains.  Stage names start with the op name; tags follow TOPI
("elementwise", "broadcast", "injective", "reduction", "conv2d", "pool", "dense").
"""

import math

import numpy as np

from ..errors import DtypeError, PolyadError, ShapeError
from ..te import dtype as dt
from ..te.construct import cast, const, select
from ..te.reduce import reduce_axis
from ..te.reduce import max as _max
from ..te.reduce import min as _min
from ..te.reduce import sum as _sum
from ..te.intrin import exp, log, logical_and, pow, rsqrt, sigmoid as _sigmoid, sqrt, tanh as _tanh
from ..te.tensor import compute, stop_gradient
from ._util import check_flag, check_tensor, conjunction, is_int, normalize_axes, normalize_axis
from .transform import batch_flatten, pad

__all__ = [
    "dense", "bias_add", "relu", "leaky_relu", "prelu", "sigmoid", "tanh", "softmax", "log_softmax",
    "conv2d", "conv2d_transpose", "pool2d", "global_pool2d", "upsampling", "batch_norm", "dropout",
    "lrn", "l2_normalize", "cross_entropy", "flatten",
]


# ---------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------

def _ndim(x, n, op, layout=None):
    if x.ndim != n:
        what = f" ({layout})" if layout else ""
        raise ShapeError(f"{op}: tensor {x.name!r} must have {n} dimensions{what}, got shape {x.shape}")


def _float(x, op):
    if not dt.is_float(x.dtype):
        raise DtypeError(f"{op}: tensor {x.name!r} has dtype {x.dtype}; a float dtype is needed (use pa.ops.cast)")


def _number(v, what, op, lo=None):
    """A float parameter (alpha, epsilon, ...) given as a finite Python or numpy real number, at least ``lo``
    (NaN or a negative epsilon made every output NaN without a word)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise DtypeError(f"{op}: {what} must be a real number, got {v!r}")
    if not math.isfinite(v) or lo is not None and v < lo:
        raise PolyadError(f"{op}: {what} must be a finite number{'' if lo is None else f' >= {lo}'}, got {v!r}")
    return float(v)


def _same_dtype(a, b, op):
    if a.dtype != b.dtype:
        raise DtypeError(
            f"{op}: tensor {b.name!r} has dtype {b.dtype} but {a.name!r} has dtype {a.dtype}; cast one of them"
        )


def _per_channel(p, x, axis, op, arg):
    """``p`` must be a 1-D tensor with one entry per index of ``x``'s axis ``axis``."""
    check_tensor(p, op, arg)
    _same_dtype(x, p, op)
    if p.ndim != 1 or p.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"{op}: {arg} tensor {p.name!r} must have shape ({x.shape[axis]},) to match axis {axis} of "
            f"{x.name!r} {x.shape}, got {p.shape}"
        )


def _int(v, what, op, lo):
    if not is_int(v) or v < lo:
        raise ShapeError(f"{op}: {what} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _pair(v, what, op, lo=1):
    """An int or a pair of ints -> (height, width)."""
    if is_int(v):
        v = (v, v)
    try:
        v = tuple(v)
    except TypeError:
        raise ShapeError(f"{op}: {what} must be an int or a pair of ints, got {v!r}") from None
    if len(v) != 2:
        raise ShapeError(f"{op}: {what} must be an int or a pair of ints, got {v!r}")
    return tuple(_int(x, what, op, lo) for x in v)


def _padding(p, op):
    """int, (h, w) or (top, left, bottom, right) -> (top, left, bottom, right)."""
    if is_int(p):
        p = (p, p)
    if isinstance(p, str):  # iterated, 'valid' was five paddings
        raise ShapeError(f"{op}: padding must be an int, (h, w) or (top, left, bottom, right), got {p!r}")
    try:
        p = tuple(p)
    except TypeError:
        raise ShapeError(f"{op}: padding must be an int, a pair or a 4-tuple, got {p!r}") from None
    if len(p) == 2:
        p = p + p
    if len(p) != 4:
        raise ShapeError(f"{op}: padding must be an int, (h, w) or (top, left, bottom, right), got {p!r}")
    return tuple(_int(x, "padding", op, 0) for x in p)


def _zero(x):
    return const(0, x.dtype)


# ---------------------------------------------------------------------------
# dense, bias, activations
# ---------------------------------------------------------------------------

def dense(data, weight, bias=None):
    """``Y = X·Wᵀ + B``: data (batch, in), weight (out, in), bias (out,) or None.

    :param data: the input, a 2-D tensor (batch, in_features).
    :param weight: the weight, a 2-D tensor (out_features, in_features) of ``data``'s dtype.
    :param bias: a 1-D tensor (out_features,) of the same dtype, or None for no bias.
    :returns: a new (batch, out_features) tensor (the matmul stage, then the bias stage when ``bias`` is given).
    :raises DtypeError: when an argument is not a tensor, or the dtypes differ.
    :raises ShapeError: when ``data`` or ``weight`` is not 2-D, their in_features differ, or ``bias`` is not
        (out_features,).
    """
    op = "dense"
    check_tensor(data, op, "data")
    check_tensor(weight, op, "weight")
    _ndim(data, 2, op, "batch, in_features")
    _ndim(weight, 2, op, "out_features, in_features")
    _same_dtype(data, weight, op)
    n, cin = data.shape
    cout, win = weight.shape
    if win != cin:
        raise ShapeError(
            f"{op}: weight {weight.name!r} axis 1 has {win} input features but data {data.name!r} axis 1 has {cin}"
        )
    k = reduce_axis((0, cin), "k")
    mm = compute(
        (n, cout), lambda i, j: _sum(data[i, k] * weight[j, k], axis=k),
        name="dense" if bias is None else "dense_matmul", tag="dense",
    )
    if bias is None:
        return mm
    _per_channel(bias, weight, 0, op, "bias")
    return compute((n, cout), lambda i, j: mm[i, j] + bias[j], name="dense", tag="broadcast")


def bias_add(data, bias, axis=1):
    """``data + bias`` with the 1-D ``bias`` broadcast along ``axis`` of ``data``.

    :param data: the tensor.
    :param bias: a 1-D tensor of ``data``'s dtype, one entry per index of ``data``'s ``axis``.
    :param axis: the axis of ``data`` that ``bias`` runs along (negative counts from the end).
    :returns: a new tensor of ``data``'s shape.
    :raises DtypeError: when ``data`` or ``bias`` is not a tensor, or their dtypes differ.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises ShapeError: when ``bias`` is not 1-D of ``data``'s size on ``axis``.
    """
    op = "bias_add"
    check_tensor(data, op, "data")
    axis = normalize_axis(axis, data.ndim, f"{op} of {data.name!r}")
    _per_channel(bias, data, axis, op, "bias")
    return compute(data.shape, lambda *i: data[i] + bias[i[axis]], name=op, tag="broadcast")


def relu(x):
    """``max(x, 0)``.

    :param x: the tensor (any numeric dtype).
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor, or is bool.
    """
    check_tensor(x, "relu", "x")
    if dt.is_bool(x.dtype):
        raise DtypeError(f"relu: tensor {x.name!r} is bool; cast it to a number first")
    return compute(x.shape, lambda *i: _max(x[i], _zero(x)), name="relu", tag="elementwise")


def leaky_relu(x, alpha=0.01):
    """``x`` where positive, ``alpha * x`` elsewhere.

    :param x: the tensor, of a float dtype.
    :param alpha: the slope below zero, a real number.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a float tensor, or ``alpha`` is not a real number.
    :raises PolyadError: when ``alpha`` is NaN or infinite.
    """
    check_tensor(x, "leaky_relu", "x")
    _float(x, "leaky_relu")
    a = const(_number(alpha, "alpha", f"leaky_relu of {x.name!r}"), x.dtype)
    return compute(x.shape, lambda *i: select(x[i] > _zero(x), x[i], a * x[i]), name="leaky_relu", tag="elementwise")


def prelu(x, alpha, axis=1):
    """Leaky relu with a learned slope per index of ``axis`` (``alpha`` is 1-D).

    :param x: the tensor, of a float dtype.
    :param alpha: a 1-D tensor of ``x``'s dtype: the slope below zero of each index of ``axis``.
    :param axis: the axis of ``x`` that ``alpha`` runs along (negative counts from the end).
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` or ``alpha`` is not a tensor, ``x`` is not a float tensor, or the dtypes differ.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises ShapeError: when ``alpha`` is not 1-D of ``x``'s size on ``axis``.
    """
    op = "prelu"
    check_tensor(x, op, "x")
    _float(x, op)
    axis = normalize_axis(axis, x.ndim, f"{op} of {x.name!r}")
    _per_channel(alpha, x, axis, op, "alpha")
    return compute(
        x.shape, lambda *i: select(x[i] > _zero(x), x[i], alpha[i[axis]] * x[i]), name=op, tag="broadcast"
    )


def sigmoid(x):
    """``1 / (1 + exp(-x))``.

    :param x: the tensor, of a float dtype.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or not of a float dtype.
    """
    check_tensor(x, "sigmoid", "x")
    _float(x, "sigmoid")
    return compute(x.shape, lambda *i: _sigmoid(x[i]), name="sigmoid", tag="elementwise")


def tanh(x):
    """The hyperbolic tangent of ``x``, elementwise.

    :param x: the tensor, of a float dtype.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or not of a float dtype.
    """
    check_tensor(x, "tanh", "x")
    _float(x, "tanh")
    return compute(x.shape, lambda *i: _tanh(x[i]), name="tanh", tag="elementwise")


# ---------------------------------------------------------------------------
# softmax family
# ---------------------------------------------------------------------------

def _replace(idx, axis, v):
    return idx[:axis] + (v,) + idx[axis + 1:]


def _max_and_expsum(x, axis, op):
    """(m, s): the max of ``x`` along ``axis`` (under :func:`stop_gradient`) and the sum of ``exp(x - m)`` along it
    (axis dropped)."""
    shape = x.shape[:axis] + x.shape[axis + 1:]

    def at(idx, v):
        return idx[:axis] + (v,) + idx[axis:]

    k = reduce_axis((0, x.shape[axis]), "k")
    m = compute(shape, lambda *i: _max(x[at(i, k)], axis=k), name=f"{op}_max", tag="reduction")
    # m only keeps exp in range: the functions built on it do not depend on it, so its derivative terms
    # cancel exactly; a constant to reverse mode, as in JAX's softmax (no argmax routing in the backward)
    m = stop_gradient(m)
    k2 = reduce_axis((0, x.shape[axis]), "k")
    s = compute(shape, lambda *i: _sum(exp(x[at(i, k2)] - m[i]), axis=k2), name=f"{op}_expsum", tag="reduction")
    return m, s


def _row_stats(x, axis, op):
    """Checked (axis, max, sum of exp(x - max)) along ``axis``: what softmax and log_softmax share."""
    check_tensor(x, op, "x")
    _float(x, op)
    axis = normalize_axis(axis, x.ndim, f"{op} of {x.name!r}")
    return (axis,) + _max_and_expsum(x, axis, op)


def _drop(idx, axis):
    return idx[:axis] + idx[axis + 1:]


def softmax(x, axis=-1):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (stages: max, exp-sum, divide; the max under ``stop_gradient``).

    :param x: the tensor, of a float dtype.
    :param axis: the axis to normalise along (negative counts from the end).
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or not of a float dtype.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    """
    op = "softmax"
    axis, m, s = _row_stats(x, axis, op)
    return compute(
        x.shape, lambda *i: exp(x[i] - m[_drop(i, axis)]) / s[_drop(i, axis)], name=op, tag="broadcast"
    )


def log_softmax(x, axis=-1):
    """``x - max - log(sum(exp(x - max)))`` along ``axis``.

    :param x: the tensor, of a float dtype.
    :param axis: the axis to normalise along (negative counts from the end).
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or not of a float dtype.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    """
    op = "log_softmax"
    axis, m, s = _row_stats(x, axis, op)
    return compute(
        x.shape, lambda *i: x[i] - m[_drop(i, axis)] - log(s[_drop(i, axis)]), name=op, tag="broadcast"
    )


def cross_entropy(logits, labels, check_labels=True):
    """Mean over the batch of ``-log softmax(logits)[n, labels[n]]``; a 0-d tensor.

    ``logits`` is (batch, classes), ``labels`` an integer (batch,) tensor.  The
    target logit is picked by ``sum_c select(labels[n] == c, logits[n, c], 0)``,
    which keeps every index affine (its gradient is a select, not a scatter).

    ``check_labels`` (the default): a label outside ``[0, classes)`` makes the
    loss and the gradient of its row NaN, in ``pa.evaluate`` and in compiled
    kernels alike, where PyTorch stops with an assert; never a finite number
    for an undefined loss.  ``check_labels=False`` drops the check (one select
    per row less): such a label then contributes no target term.

    :param logits: the scores, a 2-D float tensor (batch, classes).
    :param labels: the class of each row, an int32 or int64 tensor (batch,).
    :param check_labels: make the loss NaN for a label outside ``[0, classes)`` (True), or let it contribute no
        target term (False).
    :returns: a new 0-d tensor of ``logits``' dtype: the mean loss.
    :raises DtypeError: when ``logits`` or ``labels`` is not a tensor, ``logits`` is not a float tensor,
        ``labels`` is not an integer tensor, or ``check_labels`` is not a bool.
    :raises ShapeError: when ``logits`` is not 2-D, or ``labels`` is not (batch,).
    """
    op = "cross_entropy"
    check_tensor(logits, op, "logits")
    check_tensor(labels, op, "labels")
    _ndim(logits, 2, op, "batch, classes")
    _float(logits, op)
    if not dt.is_int(labels.dtype):
        raise DtypeError(
            f"{op}: labels tensor {labels.name!r} has dtype {labels.dtype}; class labels (axis 0) must be int32 or int64"
        )
    check_labels = check_flag(check_labels, "check_labels", op)
    n, c = logits.shape
    if labels.shape != (n,):
        raise ShapeError(
            f"{op}: labels tensor {labels.name!r} must have shape ({n},) to match axis 0 of logits "
            f"{logits.name!r} {logits.shape}, got {labels.shape}"
        )
    m, s = _max_and_expsum(logits, 1, op)
    k = reduce_axis((0, c), "c")
    picked = compute(
        (n,), lambda i: _sum(select(labels[i] == k, logits[i, k], _zero(logits)), axis=k),
        name=f"{op}_target", tag="reduction",
    )
    b = reduce_axis((0, n), "n")
    inv_n = const(1.0 / n, logits.dtype)
    if not check_labels:
        return compute(
            (), lambda: _sum((m[b] + log(s[b]) - picked[b]) * inv_n, axis=b), name=op, tag="reduction",
        )
    # 1/n for a label in range, NaN otherwise: a factor of the row's term, so its gradient is NaN too
    weight = compute(
        (n,), lambda i: select(logical_and(labels[i] >= 0, labels[i] < c), inv_n,
                               const(float("nan"), logits.dtype)),
        name=f"{op}_label_check", tag="elemwise",
    )
    return compute(
        (), lambda: _sum((m[b] + log(s[b]) - picked[b]) * weight[b], axis=b), name=op, tag="reduction",
    )


# ---------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------

def _pad(data, pad_before, pad_after, name):
    """Zero padding as its own stage (``pa.ops.pad``: select-guarded reads); ``data`` when nothing is padded."""
    if not any(pad_before) and not any(pad_after):
        return data
    return pad(data, list(zip(pad_before, pad_after)), name=name)


def _conv_common(data, weight, op):
    check_tensor(data, op, "data")
    check_tensor(weight, op, "weight")
    _ndim(data, 4, op, "NCHW")
    _ndim(weight, 4, op, "OIHW" if op == "conv2d" else "in, out/groups, kh, kw")
    _float(data, op)
    _same_dtype(data, weight, op)


def conv2d(data, weight, strides=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as PyTorch and TVM), NCHW data, OIHW weight.

    ``padding`` is an int, (h, w), or (top, left, bottom, right); ``groups``
    splits the channels (``groups == channels`` is depthwise).  Padding is a
    separate ``pad`` stage (select-guarded reads), TVM-style.

    :param data: the input, a 4-D float tensor (N, C, H, W).
    :param weight: the filters, a 4-D tensor (O, C/groups, kh, kw) of ``data``'s dtype.
    :param strides: the stride, an int or an (h, w) pair of ints >= 1.
    :param padding: the zero padding, ints >= 0: one int, (h, w), or (top, left, bottom, right); or ``"valid"``
        (none) or ``"same"`` (strides 1: the output has the input's size, an odd total padding's extra row and
        column at the bottom and right, as PyTorch's).
    :param dilation: the kernel dilation, an int or an (h, w) pair of ints >= 1.
    :param groups: the number of channel groups, an int >= 1 dividing C and O.
    :returns: a new (N, O, out_h, out_w) tensor (after a ``conv2d_pad`` stage when ``padding`` is not 0).
    :raises DtypeError: when ``data`` or ``weight`` is not a tensor, ``data`` is not a float tensor, or the dtypes
        differ.
    :raises ShapeError: when ``data`` or ``weight`` is not 4-D, a stride, padding, dilation or ``groups`` is
        malformed or out of range, ``groups`` does not divide the channels, the weight's input channels do not
        match, or the dilated kernel is larger than the padded input.
    """
    op = "conv2d"
    _conv_common(data, weight, op)
    n, c, h, w = data.shape
    o, cig, kh, kw = weight.shape
    ctx = f"{op} of {data.name!r}"
    sh, sw = _pair(strides, "strides", ctx)
    dh, dw = _pair(dilation, "dilation", ctx)
    if isinstance(padding, str) and padding in ("same", "valid"):  # PyTorch's: "same" puts the odd row last
        if padding == "same" and (sh, sw) != (1, 1):
            raise ShapeError(f"{ctx}: padding='same' needs strides 1 (as in PyTorch), got {(sh, sw)}")
        th, tw = (dh * (kh - 1), dw * (kw - 1)) if padding == "same" else (0, 0)
        padding = (th // 2, tw // 2, th - th // 2, tw - tw // 2)
    pt, pl, pb, pr = _padding(padding, ctx)
    groups = _int(groups, "groups", ctx, 1)
    if c % groups:
        raise ShapeError(f"{op}: groups={groups} does not divide the {c} channels of data {data.name!r} (axis 1)")
    if o % groups:
        raise ShapeError(
            f"{op}: groups={groups} does not divide the {o} output channels of weight {weight.name!r} (axis 0)"
        )
    if cig * groups != c:
        raise ShapeError(
            f"{op}: weight {weight.name!r} axis 1 has {cig} input channels per group, but data {data.name!r} "
            f"axis 1 has {c} channels in {groups} group(s): expected {c // groups}"
        )
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    for ax, size, ek, what in ((2, h + pt + pb, ekh, "height"), (3, w + pl + pr, ekw, "width")):
        if size < ek:
            raise ShapeError(
                f"{op}: the {what} of the kernel of {weight.name!r} (axis {ax}, {ek} with dilation) is larger "
                f"than the padded {what} {size} of data {data.name!r} (axis {ax})"
            )
    oh, ow = (h + pt + pb - ekh) // sh + 1, (w + pl + pr - ekw) // sw + 1
    padded = _pad(data, (0, 0, pt, pl), (0, 0, pb, pr), name=f"{op}_pad")
    cog = o // groups
    rh, rw = reduce_axis((0, kh), "rh"), reduce_axis((0, kw), "rw")
    attrs = {"strides": (sh, sw), "padding": (pt, pl, pb, pr), "dilation": (dh, dw), "groups": groups}
    if cig == 1:  # one input channel per group (depthwise): no channel reduction
        def body(b, f, y, x):
            return _sum(padded[b, f // cog, y * sh + rh * dh, x * sw + rw * dw] * weight[f, 0, rh, rw], axis=[rh, rw])
    else:
        rc = reduce_axis((0, cig), "rc")

        def body(b, f, y, x):
            ch = rc if groups == 1 else (f // cog) * cig + rc
            return _sum(
                padded[b, ch, y * sh + rh * dh, x * sw + rw * dw] * weight[f, rc, rh, rw], axis=[rc, rh, rw]
            )
    return compute((n, o, oh, ow), body, name=op, tag="conv2d", attrs=attrs)


def conv2d_transpose(data, weight, strides=1, padding=0, output_padding=0, dilation=1, groups=1):
    """The transpose (gradient wrt the input) of conv2d, PyTorch's ``conv_transpose2d``.

    data (N, C_in, H, W), weight (C_in, C_out/groups, kh, kw).  Written as a
    gather: ``Y[n, o, y, x] = sum X[n, ci, (y + pt - rh*dh)/sh, ...] * W[ci, o % cog, rh, rw]``
    over the reduce points where the division is exact and in range; those
    conditions are affine/quasi-affine (``%`` by the stride) for the isl layer.

    :param data: the input, a 4-D float tensor (N, C_in, H, W).
    :param weight: the filters, a 4-D tensor (C_in, C_out/groups, kh, kw) of ``data``'s dtype.
    :param strides: the stride of the convolution this transposes, an int or an (h, w) pair of ints >= 1.
    :param padding: the padding of that convolution, ints >= 0: one int, (h, w), or (top, left, bottom, right).
    :param output_padding: extra rows/columns at the bottom/right, an int or an (h, w) pair of ints >= 0, smaller
        than the stride or the dilation on each axis.
    :param dilation: the kernel dilation, an int or an (h, w) pair of ints >= 1.
    :param groups: the number of channel groups, an int >= 1 dividing C_in.
    :returns: a new (N, C_out, out_h, out_w) tensor, out_h = (H - 1)·sh - pt - pb + (kh - 1)·dh + oph + 1.
    :raises DtypeError: when ``data`` or ``weight`` is not a tensor, ``data`` is not a float tensor, or the dtypes
        differ.
    :raises ShapeError: when ``data`` or ``weight`` is not 4-D, a stride, padding, output padding, dilation or
        ``groups`` is malformed or out of range, the weight's input channels do not match ``data``'s, ``groups``
        does not divide them, or the padding leaves no output.
    """
    op = "conv2d_transpose"
    _conv_common(data, weight, op)
    n, c, h, w = data.shape
    wc, cog, kh, kw = weight.shape
    ctx = f"{op} of {data.name!r}"
    sh, sw = _pair(strides, "strides", ctx)
    dh, dw = _pair(dilation, "dilation", ctx)
    pt, pl, pb, pr = _padding(padding, ctx)
    oph, opw = _pair(output_padding, "output_padding", ctx, lo=0)
    groups = _int(groups, "groups", ctx, 1)
    if wc != c:
        raise ShapeError(
            f"{op}: weight {weight.name!r} axis 0 has {wc} input channels but data {data.name!r} axis 1 has {c}"
        )
    if c % groups:
        raise ShapeError(f"{op}: groups={groups} does not divide the {c} channels of data {data.name!r} (axis 1)")
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise ShapeError(
            f"{ctx}: output_padding {(oph, opw)} must be smaller than the stride or the dilation on each axis "
            f"(axes 2, 3: strides {(sh, sw)}, dilation {(dh, dw)})"
        )
    cig = c // groups
    o = cog * groups
    oh = (h - 1) * sh - pt - pb + (kh - 1) * dh + oph + 1
    ow = (w - 1) * sw - pl - pr + (kw - 1) * dw + opw + 1
    for ax, size, what in ((2, oh, "height"), (3, ow, "width")):
        if size <= 0:
            raise ShapeError(f"{op}: the padding leaves no output {what} (axis {ax}) for data {data.name!r}")
    rh, rw = reduce_axis((0, kh), "rh"), reduce_axis((0, kw), "rw")
    rc = reduce_axis((0, cig), "rc")
    attrs = {"strides": (sh, sw), "padding": (pt, pl, pb, pr), "output_padding": (oph, opw),
             "dilation": (dh, dw), "groups": groups}

    def body(b, f, y, x):
        ty, tx = y + pt - rh * dh, x + pl - rw * dw
        # t = s*i with 0 <= i < size: exact division and range, as constraints; bounds that hold
        # for every (output, kernel) point are left out
        conds = []
        for t, p0, k, d, s, size, n_out in ((ty, pt, kh, dh, sh, h, oh), (tx, pl, kw, dw, sw, w, ow)):
            if p0 - (k - 1) * d < 0:
                conds.append(t >= 0)
            if n_out - 1 + p0 > (size - 1) * s:
                conds.append(t <= (size - 1) * s)
            if s > 1:
                conds.append(t % s == 0)
        cond = conjunction(conds)
        ci = rc if groups == 1 else (f // cog) * cig + rc
        fo = f if groups == 1 else f % cog
        return _sum(data[b, ci, ty // sh, tx // sw] * weight[ci, fo, rh, rw], axis=[rc, rh, rw], where=cond)

    return compute((n, o, oh, ow), body, name=op, tag="conv2d_transpose", attrs=attrs)


# ---------------------------------------------------------------------------
# pooling and resizing
# ---------------------------------------------------------------------------

def _pool_out(size, k, s, pb_, pa_, ceil_mode):
    """Output length of a pooling axis, PyTorch's rule (a ceil-mode window must start inside the input)."""
    span = size + pb_ + pa_ - k
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= size + pb_:
        out -= 1
    return out


def pool2d(data, kernel, stride=None, padding=0, pool_type="max", ceil_mode=False, count_include_pad=True):
    """Max or average pooling over the last two axes of NCHW data (PyTorch's semantics).

    ``stride`` defaults to ``kernel``; ``padding`` is an int, (h, w) or
    (top, left, bottom, right), at most half the kernel.  Padding is never
    read: windows are clipped by ``where=`` bounds.  The average divides by the
    window size including padding (``count_include_pad``) but not the part of
    a ceil-mode window past the padding, or by the in-range count otherwise.

    :param data: the input, a 4-D tensor (N, C, H, W) (a float tensor for ``"avg"``).
    :param kernel: the window, an int or an (h, w) pair of ints >= 1.
    :param stride: the stride, an int or an (h, w) pair of ints >= 1; None takes ``kernel``.
    :param padding: ints >= 0, at most half the kernel: one int, (h, w), or (top, left, bottom, right).
    :param pool_type: ``"max"`` or ``"avg"``.
    :param ceil_mode: round the output size up (a last window must still start inside the input or its top/left
        padding), as PyTorch's ``ceil_mode``.
    :param count_include_pad: for ``"avg"``: divide by the window including padding (True) or by the number of input
        elements in it (False).
    :returns: a new (N, C, out_h, out_w) tensor of ``data``'s dtype.
    :raises DtypeError: when ``data`` is not a tensor, or is not a float tensor for ``"avg"``, or ``ceil_mode`` or
        ``count_include_pad`` is not a bool.
    :raises PolyadError: when ``pool_type`` is neither ``"max"`` nor ``"avg"``.
    :raises ShapeError: when ``data`` is not 4-D, ``kernel``, ``stride`` or ``padding`` is malformed or out of
        range, a pad is more than half the kernel, or the kernel is larger than the padded input.
    """
    op = "pool2d"
    check_tensor(data, op, "data")
    _ndim(data, 4, op, "NCHW")
    if pool_type not in ("max", "avg"):
        raise PolyadError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if dt.is_bool(data.dtype):
        raise DtypeError(f"{op}: tensor {data.name!r} is bool; cast it to a number first")
    n, c, h, w = data.shape
    ctx = f"{op} of {data.name!r}"
    ceil_mode = check_flag(ceil_mode, "ceil_mode", ctx)
    count_include_pad = check_flag(count_include_pad, "count_include_pad", ctx)
    kh, kw = _pair(kernel, "kernel", ctx)
    sh, sw = _pair(kernel if stride is None else stride, "stride", ctx)
    pt, pl, pb, pr = _padding(padding, ctx)
    for ax, (size, k, p0, p1, what) in enumerate(((h, kh, pt, pb, "height"), (w, kw, pl, pr, "width")), 2):
        if max(p0, p1) * 2 > k:
            raise ShapeError(
                f"{op}: padding {(p0, p1)} of axis {ax} of {data.name!r} is more than half the kernel {what} {k}"
            )
        if size + p0 + p1 < k:
            raise ShapeError(
                f"{op}: kernel {what} {k} is larger than the padded {what} {size + p0 + p1} of "
                f"{data.name!r} (axis {ax})"
            )
    oh = _pool_out(h, kh, sh, pt, pb, ceil_mode)
    ow = _pool_out(w, kw, sw, pl, pr, ceil_mode)
    rh, rw = reduce_axis((0, kh), "rh"), reduce_axis((0, kw), "rw")
    attrs = {"kernel": (kh, kw), "stride": (sh, sw), "padding": (pt, pl, pb, pr), "pool_type": pool_type,
             "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
    # Static facts: does any window leave the input at the low/high end of an axis?
    low_h, high_h = pt > 0, (oh - 1) * sh - pt + kh > h
    low_w, high_w = pl > 0, (ow - 1) * sw - pl + kw > w

    def bounds(y, x):
        iy, ix = y * sh + rh - pt, x * sw + rw - pl
        cond = conjunction(cnd() for flag, cnd in ((low_h, lambda: iy >= 0), (high_h, lambda: iy < h),
                                                   (low_w, lambda: ix >= 0), (high_w, lambda: ix < w)) if flag)
        return iy, ix, cond

    def reduce_body(red):
        def body(b, f, y, x):
            iy, ix, cond = bounds(y, x)
            return red(data[b, f, iy, ix], axis=[rh, rw], where=cond)
        return body

    if pool_type == "max":
        return compute((n, c, oh, ow), reduce_body(_max), name=op, tag="pool", attrs=attrs)
    _float(data, op)
    total = compute((n, c, oh, ow), reduce_body(_sum), name=f"{op}_sum", tag="pool", attrs=attrs)

    def extent(o, n_out, s, k, p0, size, p1):
        """Window length the divisor counts, an integer min/max expression of o (constant when no clipping)."""
        hi = size + p1 if count_include_pad else size
        clip_hi = (n_out - 1) * s - p0 + k > hi  # clip only where some window crosses the limit
        clip_lo = not count_include_pad and p0 > 0
        if not (clip_hi or clip_lo):
            return k
        start = o * s - p0
        end = _min(start + k, hi) if clip_hi else start + k
        return end - (_max(start, 0) if clip_lo else start)

    def divide(b, f, y, x):
        cnt = extent(y, oh, sh, kh, pt, h, pb) * extent(x, ow, sw, kw, pl, w, pr)
        return total[b, f, y, x] / (const(float(cnt), data.dtype) if isinstance(cnt, int) else cast(cnt, data.dtype))

    return compute((n, c, oh, ow), divide, name=op, tag="pool", attrs=attrs)


def global_pool2d(data, pool_type="max"):
    """Max or average over the whole height and width: (N, C, H, W) -> (N, C, 1, 1).

    :param data: the input, a 4-D tensor (N, C, H, W) (a float tensor for ``"avg"``).
    :param pool_type: ``"max"`` or ``"avg"``.
    :returns: a new (N, C, 1, 1) tensor of ``data``'s dtype.
    :raises DtypeError: when ``data`` is not a tensor, or is not a float tensor for ``"avg"``, or ``ceil_mode`` or
        ``count_include_pad`` is not a bool.
    :raises PolyadError: when ``pool_type`` is neither ``"max"`` nor ``"avg"``.
    :raises ShapeError: when ``data`` is not 4-D.
    """
    op = "global_pool2d"
    check_tensor(data, op, "data")
    _ndim(data, 4, op, "NCHW")
    if pool_type not in ("max", "avg"):
        raise PolyadError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if dt.is_bool(data.dtype):
        raise DtypeError(f"{op}: tensor {data.name!r} is bool; cast it to a number first")
    n, c, h, w = data.shape
    rh, rw = reduce_axis((0, h), "rh"), reduce_axis((0, w), "rw")
    if pool_type == "max":
        return compute((n, c, 1, 1), lambda b, f, y, x: _max(data[b, f, rh, rw], axis=[rh, rw]), name=op, tag="pool")
    _float(data, op)
    total = compute((n, c, 1, 1), lambda b, f, y, x: _sum(data[b, f, rh, rw], axis=[rh, rw]),
                    name=f"{op}_sum", tag="pool")
    inv = const(1.0 / (h * w), data.dtype)
    return compute((n, c, 1, 1), lambda b, f, y, x: total[b, f, y, x] * inv, name=op, tag="elementwise")


def upsampling(data, scale=2, method="nearest"):
    """Nearest-neighbour upsampling of NCHW data by integer factors (int or (h, w)).

    :param data: the input, a 4-D tensor (N, C, H, W).
    :param scale: the factor, an int or an (h, w) pair of ints >= 1.
    :param method: ``"nearest"``, the only method.
    :returns: a new (N, C, H·sh, W·sw) tensor of ``data``'s dtype.
    :raises DtypeError: when ``data`` is not a tensor.
    :raises ShapeError: when ``data`` is not 4-D, or ``scale`` is malformed or below 1.
    :raises PolyadError: when ``method`` is not ``"nearest"``.
    """
    op = "upsampling"
    check_tensor(data, op, "data")
    _ndim(data, 4, op, "NCHW")
    if method != "nearest":
        raise PolyadError(f"{op}: method {method!r} is not supported (only 'nearest')")
    sh, sw = _pair(scale, "scale", f"{op} of {data.name!r}")
    n, c, h, w = data.shape
    return compute((n, c, h * sh, w * sw), lambda b, f, y, x: data[b, f, y // sh, x // sw],
                   name=op, tag="injective", attrs={"scale": (sh, sw), "method": method})


def flatten(data):
    """(N, d1, d2, ...) -> (N, d1*d2*...): ``pa.ops.batch_flatten``.

    :param data: the tensor, of at least one axis (the batch axis 0).
    :returns: a new 2-D tensor of shape ``(N, d1*d2*...)``, named "flatten".
    :raises DtypeError: when ``data`` is not a tensor.
    :raises ShapeError: when ``data`` is 0-d.
    """
    return batch_flatten(data, name="flatten")


# ---------------------------------------------------------------------------
# normalisation, dropout
# ---------------------------------------------------------------------------

def batch_norm(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5):
    """Inference batch norm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` per index of ``axis``.

    :param data: the input, a float tensor.
    :param gamma: the scale, a 1-D tensor of ``data``'s dtype with one entry per index of ``axis``.
    :param beta: the shift, a 1-D tensor like ``gamma``.
    :param moving_mean: the mean, a 1-D tensor like ``gamma``.
    :param moving_var: the variance, a 1-D tensor like ``gamma``.
    :param axis: the channel axis of ``data`` (negative counts from the end).
    :param epsilon: added to the variance, a real number.
    :returns: a new tensor of ``data``'s shape and dtype.
    :raises DtypeError: when an argument is not a tensor, ``data`` is not a float tensor, the dtypes differ, or
        ``epsilon`` is not a real number.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises ShapeError: when a parameter tensor is not 1-D of ``data``'s size on ``axis``.
    :raises PolyadError: when ``epsilon`` is negative, NaN or infinite.
    """
    op = "batch_norm"
    check_tensor(data, op, "data")
    _float(data, op)
    axis = normalize_axis(axis, data.ndim, f"{op} of {data.name!r}")
    for p, arg in ((gamma, "gamma"), (beta, "beta"), (moving_mean, "moving_mean"), (moving_var, "moving_var")):
        _per_channel(p, data, axis, op, arg)
    epsilon = _number(epsilon, "epsilon", f"{op} of {data.name!r}", lo=0)
    eps = const(epsilon, data.dtype)

    def body(*i):
        ch = i[axis]
        return (data[i] - moving_mean[ch]) * rsqrt(moving_var[ch] + eps) * gamma[ch] + beta[ch]

    return compute(data.shape, body, name=op, tag="broadcast", attrs={"epsilon": float(epsilon)})


def dropout(data, mask, rate=0.5):
    """``data * mask / (1 - rate)`` with an explicit mask (bool, or 0/1 of data's dtype, same shape).

    ``rate == 1`` drops everything: the output is zero, as in PyTorch.

    :param data: the input, a float tensor.
    :param mask: the keep mask, of ``data``'s shape: bool, or 0/1 values of ``data``'s dtype.
    :param rate: the drop probability the mask was drawn with, a real number in [0, 1].
    :returns: a new tensor of ``data``'s shape and dtype.
    :raises DtypeError: when ``data`` or ``mask`` is not a tensor, ``data`` is not a float tensor, a non-bool
        ``mask`` has another dtype, or ``rate`` is not a real number.
    :raises ShapeError: when ``mask``'s shape differs from ``data``'s.
    :raises PolyadError: when ``rate`` is outside [0, 1].
    """
    op = "dropout"
    check_tensor(data, op, "data")
    check_tensor(mask, op, "mask")
    _float(data, op)
    if mask.shape != data.shape:
        raise ShapeError(f"{op}: mask {mask.name!r} has shape {mask.shape} but data {data.name!r} has {data.shape}")
    if not dt.is_bool(mask.dtype):
        _same_dtype(data, mask, op)
    rate = _number(rate, "rate", op)
    if not 0.0 <= rate <= 1.0:
        raise PolyadError(f"{op}: rate must be in [0, 1], got {rate}")
    scale = const(0.0 if rate == 1.0 else 1.0 / (1.0 - rate), data.dtype)
    if dt.is_bool(mask.dtype):
        body = lambda *i: select(mask[i], data[i] * scale, _zero(data))  # noqa: E731
    else:
        body = lambda *i: data[i] * mask[i] * scale  # noqa: E731
    return compute(data.shape, body, name=op, tag="elementwise", attrs={"rate": rate})


def lrn(data, size=5, axis=1, alpha=1e-4, beta=0.75, bias=1.0):
    """Local response normalisation across ``axis``, as PyTorch's ``LocalResponseNorm``.

    ``y = x / (bias + alpha/size * sum_{j in window(c)} x_j**2) ** beta`` with the
    window ``[c - size//2, c + (size-1)//2]`` clipped to the axis.

    :param data: the input, a float tensor.
    :param size: the window length along ``axis``, an int >= 1.
    :param axis: the axis to normalise across (negative counts from the end).
    :param alpha: the scale, a real number (divided by ``size``).
    :param beta: the exponent, a real number.
    :param bias: the additive constant, a real number.
    :returns: a new tensor of ``data``'s shape and dtype.
    :raises DtypeError: when ``data`` is not a float tensor, or ``alpha``, ``beta`` or ``bias`` is not a real
        number.
    :raises AxisError: when ``axis`` is not an integer or is out of range.
    :raises ShapeError: when ``size`` is not an integer >= 1.
    """
    op = "lrn"
    check_tensor(data, op, "data")
    _float(data, op)
    axis = normalize_axis(axis, data.ndim, f"{op} of {data.name!r}")
    size = _int(size, "size", f"{op} of {data.name!r}", 1)
    ch = data.shape[axis]
    half = size // 2
    r = reduce_axis((0, size), "r")

    def sq(*i):
        j = i[axis] + r - half
        cond = conjunction(([j >= 0] if half > 0 else []) + ([j < ch] if size - 1 - half > 0 else []))
        v = data[_replace(i, axis, j)]
        return _sum(v * v, axis=r, where=cond)

    ctx = f"{op} of {data.name!r}"
    alpha, beta, bias = (_number(v, w, ctx) for v, w in ((alpha, "alpha"), (beta, "beta"), (bias, "bias")))
    sqsum = compute(data.shape, sq, name=f"{op}_sqsum", tag="reduction")
    a = const(float(alpha) / size, data.dtype)
    k = const(float(bias), data.dtype)
    bt = const(float(beta), data.dtype)
    return compute(data.shape, lambda *i: data[i] / pow(k + a * sqsum[i], bt), name=op, tag="elementwise",
                   attrs={"size": size, "alpha": float(alpha), "beta": float(beta), "bias": float(bias)})


def l2_normalize(data, eps=1e-12, axis=None):
    """``x / sqrt(max(sum(x**2, axis), eps))`` (TVM's l2_normalize); axis None means all axes.

    :param data: the input, a float tensor.
    :param eps: the floor of the sum of squares, a real number.
    :param axis: None (all axes), an int or a tuple of ints: the axes summed over.
    :returns: a new tensor of ``data``'s shape and dtype.
    :raises DtypeError: when ``data`` is not a float tensor, or ``eps`` is not a real number.
    :raises AxisError: when an axis is not an integer, is out of range or repeated.
    :raises PolyadError: when ``eps`` is negative, NaN or infinite.
    """
    op = "l2_normalize"
    check_tensor(data, op, "data")
    _float(data, op)
    axes = normalize_axes(axis, data.ndim, f"{op} of {data.name!r}")
    keep = tuple(d for d in range(data.ndim) if d not in axes)
    rs = [reduce_axis((0, data.shape[d]), f"r{d}") for d in axes]

    def sq(*i):
        full = [None] * data.ndim
        for d, v in zip(keep, i):
            full[d] = v
        for d, v in zip(axes, rs):
            full[d] = v
        x = data[tuple(full)]
        return _sum(x * x, axis=rs)

    sqsum = compute(tuple(data.shape[d] for d in keep), sq, name=f"{op}_sqsum", tag="reduction")
    eps = _number(eps, "eps", f"{op} of {data.name!r}", lo=0)
    e = const(eps, data.dtype)
    return compute(
        data.shape, lambda *i: data[i] / sqrt(_max(sqsum[tuple(i[d] for d in keep)], e)),
        name=op, tag="broadcast", attrs={"eps": float(eps)},
    )
