"""pa.nn against independent numpy implementations, through pa.evaluate.

The references below never call polyad: convolutions are explicit loops over
the kernel with numpy slicing, pooling loops over output windows, transposed
convolution scatters every input pixel.
"""

import time

import numpy as np
import pytest

import polyad as pa

rng = np.random.default_rng(1234)


def rand(*shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


def close(a, b, dtype="float64"):
    tol = 1e-10 if dtype == "float64" else 2e-5
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def ph(shape, name, dtype="float64"):
    return pa.placeholder(shape, dtype=dtype, name=name)


# ---------------------------------------------------------------------------
# numpy references
# ---------------------------------------------------------------------------

def pad4(p):
    if isinstance(p, int):
        return (p, p, p, p)
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return tuple(p)


def ref_conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    pt, pl, pb, pr = pad4(padding)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    o, cig, kh, kw = w.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), x.dtype)
    cog = o // groups
    for g in range(groups):
        xs = xp[:, g * cig:(g + 1) * cig]
        ws = w[g * cog:(g + 1) * cog]
        for a in range(kh):
            for b in range(kw):
                patch = xs[:, :, a * dh: a * dh + (oh - 1) * sh + 1: sh, b * dw: b * dw + (ow - 1) * sw + 1: sw]
                out[:, g * cog:(g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, ws[:, :, a, b])
    return out


def ref_conv2d_transpose(x, w, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    oph, opw = (output_padding, output_padding) if isinstance(output_padding, int) else output_padding
    pt, pl, pb, pr = pad4(padding)
    n, c, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = c // groups
    fh, fw = (h - 1) * sh + (kh - 1) * dh + 1, (wd - 1) * sw + (kw - 1) * dw + 1
    full = np.zeros((n, cog * groups, fh + oph, fw + opw), x.dtype)
    for g in range(groups):
        xs = x[:, g * cig:(g + 1) * cig]
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        full[:, g * cog:(g + 1) * cog, i * sh + a * dh, j * sw + b * dw] += (
                            xs[:, :, i, j] @ w[g * cig:(g + 1) * cig, :, a, b])
    return full[:, :, pt: fh + oph - pb, pl: fw + opw - pr]


def pool_len(size, k, s, p0, p1, ceil_mode):
    # count window starts i*s (padded coordinates) that fit; in ceil mode a window may overhang
    # the padded end by up to s-1 but must start before the end of the real input
    n = 0
    while True:
        start = n * s
        if ceil_mode:
            ok = start + k <= size + p0 + p1 + s - 1 and start < size + p0
        else:
            ok = start + k <= size + p0 + p1
        if not ok:
            return n
        n += 1


def ref_pool2d(x, kernel, stride, padding, pool_type, ceil_mode=False, count_include_pad=True):
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    pt, pl, pb, pr = pad4(padding)
    n, c, h, w = x.shape
    oh, ow = pool_len(h, kh, sh, pt, pb, ceil_mode), pool_len(w, kw, sw, pl, pr, ceil_mode)
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * sh - pt, j * sw - pl
            h1, w1 = min(h0 + kh, h + pb), min(w0 + kw, w + pr)
            padded_size = (h1 - h0) * (w1 - w0)
            a0, b0, a1, b1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            win = x[:, :, a0:a1, b0:b1]
            if pool_type == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = padded_size if count_include_pad else (a1 - a0) * (b1 - b0)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------------------
# dense, bias, activations
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("with_bias", [False, True])
def test_dense(with_bias):
    X, W, B = ph((3, 5), "X"), ph((4, 5), "W"), ph((4,), "B")
    Y = pa.nn.dense(X, W, B if with_bias else None)
    assert Y.name == "dense" and Y.shape == (3, 4)
    x, w, b = rand(3, 5), rand(4, 5), rand(4)
    feed = {X: x, W: w, B: b} if with_bias else {X: x, W: w}
    close(pa.evaluate(Y, feed), x @ w.T + (b if with_bias else 0))


def test_dense_size_one_axes_float32():
    X, W, B = ph((1, 1), "X", "float32"), ph((1, 1), "W", "float32"), ph((1,), "B", "float32")
    x, w, b = rand(1, 1, dtype="float32"), rand(1, 1, dtype="float32"), rand(1, dtype="float32")
    y = pa.evaluate(pa.nn.dense(X, W, B), {X: x, W: w, B: b})
    assert y.dtype == np.float32
    close(y, x @ w.T + b, "float32")


def test_bias_add_axes():
    X, B = ph((2, 3, 4), "X"), ph((4,), "B")
    x, b = rand(2, 3, 4), rand(4)
    close(pa.evaluate(pa.nn.bias_add(X, B, axis=-1), {X: x, B: b}), x + b)
    B1 = ph((3,), "B1")
    b1 = rand(3)
    close(pa.evaluate(pa.nn.bias_add(X, B1), {X: x, B1: b1}), x + b1[None, :, None])


def test_activations():
    X = ph((3, 4), "X")
    x = rand(3, 4)
    x[0, 0] = 0.0
    close(pa.evaluate(pa.nn.relu(X), {X: x}), np.maximum(x, 0))
    close(pa.evaluate(pa.nn.leaky_relu(X, 0.2), {X: x}), np.where(x > 0, x, 0.2 * x))
    close(pa.evaluate(pa.nn.sigmoid(X), {X: x}), 1 / (1 + np.exp(-x)))
    close(pa.evaluate(pa.nn.tanh(X), {X: x}), np.tanh(x))
    A = ph((4,), "A")
    a = rand(4)
    close(pa.evaluate(pa.nn.prelu(X, A, axis=1), {X: x, A: a}), np.where(x > 0, x, a[None, :] * x))
    A0 = ph((3,), "A0")
    a0 = rand(3)
    close(pa.evaluate(pa.nn.prelu(X, A0, axis=0), {X: x, A0: a0}), np.where(x > 0, x, a0[:, None] * x))


# ---------------------------------------------------------------------------
# softmax family, cross-entropy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
def test_softmax_and_log_softmax(axis):
    X = ph((2, 3, 4), "X")
    x = rand(2, 3, 4) * 30  # large values: max-subtraction matters
    close(pa.evaluate(pa.nn.softmax(X, axis=axis), {X: x}), ref_softmax(x, axis))
    m = x.max(axis=axis, keepdims=True)
    ref = x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    close(pa.evaluate(pa.nn.log_softmax(X, axis=axis), {X: x}), ref)


def test_softmax_stages_and_no_overflow_float32():
    X = ph((2, 1), "X", "float32")
    Y = pa.nn.softmax(X)
    names = [op.name for op in pa.te.walk_ops(Y)]
    assert names == ["X", "softmax_max", "softmax_max_stopgrad", "softmax_expsum", "softmax"]
    x = np.array([[1000.0], [-1000.0]], np.float32)
    close(pa.evaluate(Y, {X: x}), np.ones((2, 1), np.float32), "float32")
    Z = ph((1, 3), "Z", "float32")
    z = np.array([[1000.0, 999.0, -5.0]], np.float32)
    y = pa.evaluate(pa.nn.log_softmax(Z), {Z: z})
    assert np.isfinite(y).all()
    close(y, (z - 1000.0 - np.log1p(np.exp(-1.0) + np.exp(-1005.0))).astype(np.float32), "float32")


@pytest.mark.parametrize("label_dtype", ["int32", "int64"])
def test_cross_entropy(label_dtype):
    Z, L = ph((4, 5), "Z"), ph((4,), "labels", label_dtype)
    z = rand(4, 5) * 50
    lab = np.array([0, 4, 2, 4], label_dtype)
    loss = pa.evaluate(pa.nn.cross_entropy(Z, L), {Z: z, L: lab})
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    assert loss.shape == ()
    close(loss, np.mean(lse - z[np.arange(4), lab]))


# ---------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------

CONV_CASES = [
    # (data shape, weight shape, stride, padding, dilation, groups)
    ((2, 3, 7, 7), (4, 3, 3, 3), 1, 0, 1, 1),
    ((1, 2, 6, 5), (3, 2, 3, 2), 2, 1, 1, 1),
    ((1, 2, 5, 5), (2, 2, 3, 3), 1, 2, 1, 1),  # padding larger than half the kernel
    ((1, 2, 9, 8), (2, 2, 2, 2), 3, 0, 1, 1),  # stride larger than the kernel
    ((1, 1, 9, 9), (2, 1, 3, 3), 1, 1, 2, 1),  # dilation 2
    ((1, 2, 11, 10), (2, 2, 3, 2), (2, 1), (1, 2), 3, 1),  # dilation 3, pairs
    ((2, 4, 6, 6), (4, 1, 3, 3), 1, 1, 1, 4),  # depthwise: groups = channels
    ((1, 4, 6, 6), (8, 1, 3, 3), 1, 1, 1, 4),  # depthwise with channel multiplier 2
    ((1, 4, 5, 6), (6, 2, 2, 3), 1, 0, 1, 2),  # grouped
    ((1, 2, 5, 6), (3, 2, 3, 3), 2, (2, 0, 1, 3), 1, 1),  # asymmetric (top, left, bottom, right)
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1),  # size-1 everything
    ((1, 1, 1, 1), (1, 1, 3, 3), 1, 1, 1, 1),  # 1x1 input, all but the centre is padding
]


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONV_CASES)
def test_conv2d(xs, ws, stride, padding, dilation, groups):
    X, W = ph(xs, "X"), ph(ws, "W")
    Y = pa.nn.conv2d(X, W, strides=stride, padding=padding, dilation=dilation, groups=groups)
    x, w = rand(*xs), rand(*ws)
    ref = ref_conv2d(x, w, stride, padding, dilation, groups)
    close(pa.evaluate(Y, {X: x, W: w}), ref)


def test_conv2d_pad_stage_is_select_guarded():
    X, W = ph((1, 1, 4, 4), "X"), ph((1, 1, 3, 3), "W")
    Y = pa.nn.conv2d(X, W, padding=(0, 1))
    pad_op = Y.op.input_tensors[0].op
    assert pad_op.name == "conv2d_pad" and pad_op.tag == "injective" and pad_op.shape == (1, 1, 4, 6)
    assert pad_op.body[0].op == "select"
    assert Y.op.tag == "conv2d"
    # no padding: the conv reads the data directly
    assert pa.nn.conv2d(X, W).op.input_tensors[0] is X


def test_conv2d_float32_workload_shape():
    X, W = ph((2, 17, 12, 12), "X", "float32"), ph((19, 17, 5, 5), "W", "float32")
    x, w = rand(2, 17, 12, 12, dtype="float32"), rand(19, 17, 5, 5, dtype="float32")
    y = pa.evaluate(pa.nn.conv2d(X, W, 3, 1), {X: x, W: w})
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), 3, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


TRANSPOSE_CASES = [
    # (data shape, weight shape, stride, padding, output_padding, dilation, groups)
    ((2, 3, 4, 4), (3, 2, 3, 3), 1, 0, 0, 1, 1),
    ((1, 2, 3, 4), (2, 3, 3, 3), 2, 1, 1, 1, 1),
    ((1, 2, 3, 3), (2, 2, 2, 2), 3, 0, 2, 1, 1),  # stride larger than the kernel
    ((1, 2, 4, 3), (2, 1, 3, 2), (2, 3), (1, 0), (1, 2), 2, 1),  # dilation 2, pairs
    ((1, 1, 3, 3), (1, 1, 2, 3), 2, 0, 2, 3, 1),  # dilation 3, output_padding < dilation
    ((1, 4, 3, 3), (4, 1, 3, 3), 2, 1, 0, 1, 4),  # depthwise
    ((1, 4, 3, 2), (4, 3, 2, 2), 2, 0, 1, 1, 2),  # grouped
    ((1, 2, 4, 4), (2, 2, 3, 3), 2, (1, 0, 2, 1), 0, 1, 1),  # asymmetric padding
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 0, 1, 1),
]


@pytest.mark.parametrize("xs,ws,stride,padding,opad,dilation,groups", TRANSPOSE_CASES)
def test_conv2d_transpose(xs, ws, stride, padding, opad, dilation, groups):
    X, W = ph(xs, "X"), ph(ws, "W")
    Y = pa.nn.conv2d_transpose(X, W, stride, padding, opad, dilation, groups)
    x, w = rand(*xs), rand(*ws)
    close(pa.evaluate(Y, {X: x, W: w}), ref_conv2d_transpose(x, w, stride, padding, opad, dilation, groups))


def test_conv2d_transpose_is_a_gather_with_quasi_affine_conditions():
    X, W = ph((1, 1, 4, 4), "X"), ph((1, 1, 3, 3), "W")
    Y = pa.nn.conv2d_transpose(X, W, 2, 1)
    body = Y.op.body[0]
    assert isinstance(body, pa.te.Reduce) and Y.op.input_tensors == [X, W]
    text = str(body.condition)
    assert "%2 == 0" in text
    assert "//2" in str(body.source[0])
    # 1x1 kernel, stride 1, no padding: every bound holds, so no condition at all
    one = pa.nn.conv2d_transpose(X, ph((1, 1, 1, 1), "W1")).op.body[0]
    assert one.condition.value is True and "//" not in str(one.source[0])


def test_transpose_is_adjoint_of_conv():
    # <conv(x, w), y> == <x, conv_transpose(y, w)>: an independent consistency check
    X, W, Yt = ph((1, 2, 7, 6), "X"), ph((3, 2, 3, 3), "W"), ph((1, 3, 4, 3), "Y")
    x, w, y = rand(1, 2, 7, 6), rand(3, 2, 3, 3), rand(1, 3, 4, 3)
    conv = pa.evaluate(pa.nn.conv2d(X, W, 2, 1, 1), {X: x, W: w})
    back = pa.evaluate(pa.nn.conv2d_transpose(Yt, W, 2, 1, (0, 1)), {Yt: y, W: w})
    assert back.shape == x.shape
    close(np.array((conv * y).sum()), np.array((x * back).sum()))


# ---------------------------------------------------------------------------
# pooling, upsampling, flatten
# ---------------------------------------------------------------------------

POOL_CASES = [
    # (shape, kernel, stride, padding, ceil_mode, count_include_pad)
    ((2, 3, 6, 6), 2, 2, 0, False, True),
    ((1, 2, 7, 5), 3, 2, 1, False, True),
    ((1, 2, 7, 5), 3, 2, 1, False, False),  # count_include_pad False
    ((1, 2, 6, 7), 3, 2, 1, True, True),  # ceil_mode
    ((1, 2, 6, 7), 3, 2, 1, True, False),
    ((1, 1, 8, 8), 2, 3, 0, True, True),  # stride larger than the kernel, ceil mode
    ((1, 1, 5, 6), (3, 2), (1, 2), (1, 0, 0, 1), True, False),  # asymmetric
    ((1, 1, 1, 1), 1, 1, 0, False, True),
    ((1, 1, 1, 3), (1, 3), 1, (0, 1), False, False),  # size-1 axis
]


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape,kernel,stride,padding,ceil_mode,cip", POOL_CASES)
def test_pool2d(pool_type, shape, kernel, stride, padding, ceil_mode, cip):
    X = ph(shape, "X")
    x = rand(*shape) - 3.0  # all-negative-ish: padding must not act as zeros for max
    Y = pa.nn.pool2d(X, kernel, stride, padding, pool_type, ceil_mode=ceil_mode, count_include_pad=cip)
    close(pa.evaluate(Y, {X: x}), ref_pool2d(x, kernel, stride, padding, pool_type, ceil_mode, cip))


def test_pool2d_default_stride_and_constant_divisor():
    X = ph((1, 1, 4, 4), "X", "float32")
    Y = pa.nn.pool2d(X, 2, pool_type="avg")
    assert Y.shape == (1, 1, 2, 2)
    assert "/4.0" in str(Y.op.body[0]).replace(" ", "")  # no clipping: the divisor folds to a constant
    x = rand(1, 1, 4, 4, dtype="float32")
    close(pa.evaluate(Y, {X: x}), x.reshape(1, 1, 2, 2, 2, 2).mean(axis=(3, 5)), "float32")
    M = pa.nn.pool2d(X, 2)
    assert isinstance(M.op.body[0], pa.te.Reduce)
    assert M.op.body[0].condition.value is True  # nothing to guard


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_global_pool2d(pool_type):
    X = ph((2, 3, 4, 5), "X")
    x = rand(2, 3, 4, 5)
    ref = x.max(axis=(2, 3), keepdims=True) if pool_type == "max" else x.mean(axis=(2, 3), keepdims=True)
    close(pa.evaluate(pa.nn.global_pool2d(X, pool_type), {X: x}), ref)


@pytest.mark.parametrize("scale", [2, (1, 3)])
def test_upsampling(scale):
    X = ph((1, 2, 3, 2), "X")
    x = rand(1, 2, 3, 2)
    sh, sw = (scale, scale) if isinstance(scale, int) else scale
    ref = np.repeat(np.repeat(x, sh, axis=2), sw, axis=3)
    close(pa.evaluate(pa.nn.upsampling(X, scale), {X: x}), ref)


def test_flatten():
    X = ph((2, 3, 4, 5), "X")
    x = rand(2, 3, 4, 5)
    Y = pa.nn.flatten(X)
    assert Y.shape == (2, 60)
    close(pa.evaluate(Y, {X: x}), x.reshape(2, 60))


# ---------------------------------------------------------------------------
# normalisation, dropout
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [1, -1])
def test_batch_norm(axis):
    X = ph((2, 3, 3), "X")
    params = [ph((3,), n) for n in ("gamma", "beta", "mean", "var")]
    x = rand(2, 3, 3)
    g, b, m = rand(3), rand(3), rand(3)
    v = np.abs(rand(3)) + 0.1
    Y = pa.nn.batch_norm(X, *params, axis=axis, epsilon=1e-3)
    sh = (1, 3, 1) if axis == 1 else (1, 1, 3)
    ref = (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + 1e-3) * g.reshape(sh) + b.reshape(sh)
    close(pa.evaluate(Y, dict(zip([X] + params, [x, g, b, m, v]))), ref)


def test_dropout():
    X = ph((3, 4), "X")
    x = rand(3, 4)
    keep = rng.random((3, 4)) > 0.3
    Mb = ph((3, 4), "mask", "bool")
    close(pa.evaluate(pa.nn.dropout(X, Mb, 0.3), {X: x, Mb: keep}), np.where(keep, x / 0.7, 0.0))
    Mf = ph((3, 4), "maskf")
    close(pa.evaluate(pa.nn.dropout(X, Mf, 0.25), {X: x, Mf: keep.astype("float64")}), x * keep / 0.75)
    close(pa.evaluate(pa.nn.dropout(X, Mf, 0.0), {X: x, Mf: keep.astype("float64")}), x * keep)
    close(pa.evaluate(pa.nn.dropout(X, Mb, 1.0), {X: x, Mb: keep}), np.zeros((3, 4)))
    with pytest.raises(pa.PolyadError, match="rate"):
        pa.nn.dropout(X, Mb, 1.5)


def test_relu_integer_and_bool():
    I = ph((4,), "I", "int32")
    i = np.array([-2, 0, 3, -1], "int32")
    y = pa.evaluate(pa.nn.relu(I), {I: i})
    assert y.dtype == np.int32 and (y == np.maximum(i, 0)).all()
    with pytest.raises(pa.DtypeError, match="'flags'"):
        pa.nn.relu(ph((4,), "flags", "bool"))


@pytest.mark.parametrize("size,axis", [(3, 1), (4, 1), (1, 1), (5, 0), (2, -1)])
def test_lrn(size, axis):
    X = ph((2, 4, 3), "X")
    x = rand(2, 4, 3)
    alpha, beta, k = 0.3, 0.75, 2.0
    xa = np.moveaxis(x, axis, 0)
    c = xa.shape[0]
    sq = np.zeros_like(xa)
    for ch in range(c):  # window [ch - size//2, ch + (size-1)//2], clipped
        lo, hi = max(0, ch - size // 2), min(c, ch + (size - 1) // 2 + 1)
        sq[ch] = (xa[lo:hi] ** 2).sum(axis=0)
    ref = np.moveaxis(xa / (k + alpha / size * sq) ** beta, 0, axis)
    close(pa.evaluate(pa.nn.lrn(X, size, axis, alpha, beta, k), {X: x}), ref)


@pytest.mark.parametrize("axis", [None, 1, (0, 2), -1])
def test_l2_normalize(axis):
    X = ph((2, 3, 4), "X")
    x = rand(2, 3, 4)
    ax = tuple(range(3)) if axis is None else axis
    ref = x / np.sqrt(np.maximum((x * x).sum(axis=ax, keepdims=True), 1e-6))
    close(pa.evaluate(pa.nn.l2_normalize(X, 1e-6, axis), {X: x}), ref)
    z = np.zeros((2, 3, 4))
    close(pa.evaluate(pa.nn.l2_normalize(X, 1e-6, axis), {X: z}), z)  # eps guards 0/0


# ---------------------------------------------------------------------------
# bad input: PolyadError subclasses naming the tensor and the axis
# ---------------------------------------------------------------------------

def test_conv2d_channel_mismatch():
    X, W = ph((1, 3, 5, 5), "img"), ph((4, 2, 3, 3), "filt")
    with pytest.raises(pa.ShapeError, match=r"filt.*axis 1.*img.*axis 1"):
        pa.nn.conv2d(X, W)


def test_conv2d_groups_not_dividing():
    X = ph((1, 6, 5, 5), "img")
    with pytest.raises(pa.ShapeError, match=r"groups=4.*'img'.*axis 1"):
        pa.nn.conv2d(X, ph((8, 1, 3, 3), "filt"), groups=4)
    with pytest.raises(pa.ShapeError, match=r"groups=3.*'filt'.*axis 0"):
        pa.nn.conv2d(X, ph((4, 2, 3, 3), "filt"), groups=3)
    with pytest.raises(pa.ShapeError, match=r"groups=4.*'img'.*axis 1"):
        pa.nn.conv2d_transpose(X, ph((6, 1, 3, 3), "filt"), groups=4)


def test_kernel_larger_than_padded_input():
    X = ph((1, 1, 4, 6), "img")
    with pytest.raises(pa.ShapeError, match=r"'filt'.*axis 2.*'img'"):
        pa.nn.conv2d(X, ph((1, 1, 5, 3), "filt"))
    with pytest.raises(pa.ShapeError, match=r"axis 3.*'img'"):
        pa.nn.conv2d(X, ph((1, 1, 2, 4), "filt"), dilation=2)  # effective width 7 > 6
    pa.nn.conv2d(X, ph((1, 1, 5, 3), "filt"), padding=(1, 0))  # fits once padded
    with pytest.raises(pa.ShapeError, match=r"'img'.*axis 2"):
        pa.nn.pool2d(ph((1, 1, 2, 2), "img"), (5, 1), 1, (1, 0), "max")
    with pytest.raises(pa.ShapeError, match=r"axis 3 of 'img'"):
        pa.nn.pool2d(X, 2, 1, (0, 2))  # padding more than half the kernel


def test_cross_entropy_float_labels():
    with pytest.raises(pa.DtypeError, match=r"'lab'.*axis 0"):
        pa.nn.cross_entropy(ph((2, 3), "Z"), ph((2,), "lab", "float32"))
    with pytest.raises(pa.ShapeError, match=r"'lab'.*axis 0"):
        pa.nn.cross_entropy(ph((2, 3), "Z"), ph((3,), "lab", "int32"))


def test_bad_parameters_name_the_tensor():
    X = ph((1, 2, 5, 5), "img")
    W = ph((2, 2, 3, 3), "filt")
    with pytest.raises(pa.ShapeError, match=r"conv2d of 'img': strides"):
        pa.nn.conv2d(X, W, strides=0)
    with pytest.raises(pa.ShapeError, match=r"conv2d of 'img': padding"):
        pa.nn.conv2d(X, W, padding=(1, 2, 3))
    with pytest.raises(pa.ShapeError, match=r"conv2d of 'img': padding"):
        pa.nn.conv2d(X, W, padding=-1)
    with pytest.raises(pa.ShapeError, match=r"conv2d_transpose of 'img': dilation"):
        pa.nn.conv2d_transpose(X, W, dilation=(1, 0))
    with pytest.raises(pa.ShapeError, match=r"pool2d of 'img': kernel"):
        pa.nn.pool2d(X, 2.5)
    with pytest.raises(pa.ShapeError, match=r"upsampling of 'img': scale"):
        pa.nn.upsampling(X, 0)


def test_conv2d_same_and_valid_padding_as_pytorch():
    # "same": the total padding d*(k-1), its odd row and column at the bottom and right (PyTorch's split)
    X = ph((1, 2, 9, 8), "X", "float32")
    W = ph((3, 2, 4, 3), "W", "float32")
    rng = np.random.default_rng(5)
    feed = {X: rng.standard_normal((1, 2, 9, 8)).astype("float32"),
            W: rng.standard_normal((3, 2, 4, 3)).astype("float32")}
    same = pa.nn.conv2d(X, W, padding="same", dilation=(1, 2))
    assert same.shape == (1, 3, 9, 8)
    explicit = pa.nn.conv2d(X, W, padding=(1, 2, 2, 2), dilation=(1, 2))  # (top, left, bottom, right)
    np.testing.assert_array_equal(pa.evaluate(same, feed), pa.evaluate(explicit, feed))
    np.testing.assert_array_equal(pa.evaluate(pa.nn.conv2d(X, W, padding="valid"), feed),
                                  pa.evaluate(pa.nn.conv2d(X, W), feed))
    with pytest.raises(pa.ShapeError, match=r"conv2d of 'X': padding='same' needs strides 1"):
        pa.nn.conv2d(X, W, strides=2, padding="same")
    with pytest.raises(pa.ShapeError, match=r"pool2d of 'X': padding must be an int, .* got 'valid'"):
        pa.nn.pool2d(X, 2, padding="valid")  # a string was iterated: five paddings 'v', 'a', ...


def test_other_bad_input():
    X = ph((2, 5), "X")
    with pytest.raises(pa.ShapeError, match=r"'W'.*axis 1.*'X'.*axis 1"):
        pa.nn.dense(X, ph((3, 4), "W"))
    with pytest.raises(pa.ShapeError, match=r"'B'.*axis 0"):
        pa.nn.dense(X, ph((3, 5), "W"), ph((4,), "B"))
    with pytest.raises(pa.DtypeError, match=r"'W'"):
        pa.nn.dense(X, ph((3, 5), "W", "float32"))
    with pytest.raises(pa.AxisError, match=r"'X'.*axis 2"):
        pa.nn.softmax(X, axis=2)
    with pytest.raises(pa.ShapeError, match=r"'b'.*axis 1.*'X'"):
        pa.nn.bias_add(X, ph((2,), "b"))
    with pytest.raises(pa.ShapeError, match=r"'X'.*4 dimensions"):
        pa.nn.conv2d(X, ph((1, 1, 1, 1), "W"))
    with pytest.raises(pa.DtypeError, match=r"'I'"):
        pa.nn.sigmoid(ph((2,), "I", "int32"))
    with pytest.raises(pa.ShapeError, match=r"output_padding"):
        pa.nn.conv2d_transpose(ph((1, 1, 3, 3), "X"), ph((1, 1, 3, 3), "W"), 2, 0, 2)
    with pytest.raises(pa.PolyadError, match=r"pool_type"):
        pa.nn.pool2d(ph((1, 1, 3, 3), "X"), 2, pool_type="sum")
    with pytest.raises(pa.ShapeError, match=r"'m'.*'X'"):
        pa.nn.dropout(X, ph((2, 4), "m", "bool"), 0.5)
    with pytest.raises(pa.DtypeError, match=r"lrn of 'X': beta must be a real number, got 'x'"):
        pa.nn.lrn(ph((1, 3, 2, 2), "X"), beta="x")
    with pytest.raises(pa.DtypeError, match=r"leaky_relu of 'X': alpha must be a real number"):
        pa.nn.leaky_relu(X, alpha=None)
    # NaN, inf or a negative epsilon made every output NaN; a string flag was truth-tested ("False" was true)
    P = ph((1, 3, 4, 4), "P", "float32")
    G = ph((3,), "G", "float32")
    with pytest.raises(pa.PolyadError, match=r"batch_norm of 'P': epsilon must be a finite number >= 0, got -1.0"):
        pa.nn.batch_norm(P, G, G, G, G, epsilon=-1.0)
    with pytest.raises(pa.PolyadError, match=r"l2_normalize of 'P': eps must be a finite number >= 0, got nan"):
        pa.nn.l2_normalize(P, float("nan"))
    with pytest.raises(pa.PolyadError, match=r"leaky_relu of 'P': alpha must be a finite number, got inf"):
        pa.nn.leaky_relu(P, float("inf"))
    with pytest.raises(pa.DtypeError, match=r"pool2d of 'P': ceil_mode must be True or False, got 'False'"):
        pa.nn.pool2d(P, 3, 2, ceil_mode="False")
    with pytest.raises(pa.DtypeError, match=r"pool2d of 'P': count_include_pad must be True or False, got 'no'"):
        pa.nn.pool2d(P, 3, 2, 1, "avg", count_include_pad="no")
    with pytest.raises(pa.DtypeError, match=r"cross_entropy: check_labels must be True or False, got 'no'"):
        pa.nn.cross_entropy(ph((2, 3), "L", "float32"), ph((2,), "Y", "int64"), check_labels="no")
    with pytest.raises(pa.DtypeError, match=r"sum of tensor 'P': keepdims must be True or False, got 'yes'"):
        pa.ops.sum(P, 1, keepdims="yes")
    assert pa.nn.pool2d(P, 3, 2, ceil_mode=np.True_).shape == (1, 3, 2, 2)  # numpy's bools, and 0 and 1
    assert pa.ops.sum(P, 1, keepdims=1).shape == (1, 1, 4, 4)
    with pytest.raises(pa.DtypeError, match=r"pool2d: tensor 'Q' is bool; cast it"):  # "max of a bool expression"
        pa.nn.pool2d(ph((1, 1, 4, 4), "Q", "bool"), 2)
    with pytest.raises(pa.DtypeError, match=r"pad of tensor 'I': constant_values: cannot use the float constant 0.5"):
        pa.ops.pad(ph((4,), "I", "int32"), 1, constant_values=0.5)
    # one check for every op: the op and the argument are named
    with pytest.raises(pa.DtypeError, match=r"dense: expected a tensor for weight, got ndarray"):
        pa.nn.dense(X, np.ones((3, 5)))
    with pytest.raises(pa.DtypeError, match=r"transpose: expected a tensor for input, got list"):
        pa.ops.transpose([[1.0]])
    with pytest.raises(pa.DtypeError, match=r"zeros_like: expected a tensor for the prototype"):
        pa.ops.zeros_like(np.ones(3))


# ---------------------------------------------------------------------------
# the workloads of WORKLOADS.md at batch 2: the forward evaluates quickly
# ---------------------------------------------------------------------------

def _lenet(b):
    X = ph((b, 1, 28, 28), "X", "float32")
    C1, C2 = ph((6, 1, 5, 5), "C1", "float32"), ph((16, 6, 5, 5), "C2", "float32")
    h = pa.nn.pool2d(pa.nn.relu(pa.nn.conv2d(X, C1)), 2)
    h = pa.nn.flatten(pa.nn.pool2d(pa.nn.relu(pa.nn.conv2d(h, C2)), 2))
    for i, (a, o) in enumerate(((256, 120), (120, 84))):
        h = pa.nn.relu(pa.nn.dense(h, ph((o, a), f"W{i}", "float32"), ph((o,), f"B{i}", "float32")))
    logits = pa.nn.dense(h, ph((10, 84), "W2", "float32"), ph((10,), "B2", "float32"))
    return pa.nn.cross_entropy(logits, ph((b,), "labels", "int32"))


def _mlp(b):
    X = ph((b, 784), "X", "float32")
    h = X
    for i, (a, o) in enumerate(((784, 512), (512, 256))):
        h = pa.nn.relu(pa.nn.dense(h, ph((o, a), f"W{i}", "float32"), ph((o,), f"B{i}", "float32")))
    logits = pa.nn.dense(h, ph((10, 256), "W2", "float32"), ph((10,), "B2", "float32"))
    return pa.nn.cross_entropy(logits, ph((b,), "labels", "int32"))


def _ref_step(feed, convs):
    """The numpy forward of _mlp (convs=False) / _lenet (convs=True), in float64."""
    v = {t.name: a.astype("float64") if a.dtype == np.float32 else a for t, a in feed.items()}
    h = v["X"]
    if convs:
        for c in ("C1", "C2"):
            h = ref_pool2d(np.maximum(ref_conv2d(h, v[c]), 0), 2, 2, 0, "max")
        h = h.reshape(h.shape[0], -1)
    for i in range(2):
        h = np.maximum(h @ v[f"W{i}"].T + v[f"B{i}"], 0)
    z = h @ v["W2"].T + v["B2"]
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    return np.mean(lse - z[np.arange(z.shape[0]), v["labels"]])


WORKLOADS = {
    "dense": lambda: pa.nn.dense(ph((2, 1000), "X", "float32"), ph((1000, 1000), "W", "float32"),
                                 ph((1000,), "B", "float32")),
    "conv2d_3x3": lambda: pa.nn.conv2d(ph((2, 17, 28, 28), "X", "float32"), ph((19, 17, 3, 3), "W", "float32")),
    "conv2d_5x5_s3": lambda: pa.nn.conv2d(ph((2, 17, 58, 58), "X", "float32"), ph((19, 17, 5, 5), "W", "float32"),
                                          3, 1),
    "conv2d_dilated": lambda: pa.nn.conv2d(ph((2, 16, 32, 32), "X", "float32"), ph((16, 16, 3, 3), "W", "float32"),
                                           1, 1, 2),
    "avg_pool": lambda: pa.nn.pool2d(ph((2, 17, 280, 280), "X", "float32"), 2, 2, pool_type="avg"),
    "max_pool": lambda: pa.nn.pool2d(ph((2, 64, 100, 100), "X", "float32"), 2, 2),
    "softmax": lambda: pa.nn.softmax(pa.nn.dense(ph((2, 1000), "X", "float32"), ph((1000, 1000), "W", "float32"))),
    "dense_big": lambda: pa.nn.dense(ph((2, 10000), "X", "float32"), ph((3000, 10000), "W", "float32"),
                                     ph((3000,), "B", "float32")),
    "flatten": lambda: pa.nn.flatten(ph((2, 100, 20, 25), "X", "float32")),
    "mlp_step": lambda: _mlp(2),
    "lenet_step": lambda: _lenet(2),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_forward_batch2_is_fast(name):
    Y = WORKLOADS[name]()
    feed = {}
    for t in pa.te.placeholders(Y):
        if t.dtype == "int32":
            feed[t] = rng.integers(0, 10, t.shape).astype("int32")
        else:
            feed[t] = rng.standard_normal(t.shape, dtype=np.float32) * 0.3
    t0 = time.perf_counter()
    y = pa.evaluate(Y, feed)
    elapsed = time.perf_counter() - t0
    assert np.isfinite(y).all()
    assert elapsed < 5.0, f"{name}: pa.evaluate took {elapsed:.2f} s"
    if name in ("mlp_step", "lenet_step"):
        np.testing.assert_allclose(y, _ref_step(feed, name == "lenet_step"), rtol=1e-4)


def test_names_and_tags():
    X, W = ph((1, 2, 4, 4), "X"), ph((2, 2, 3, 3), "W")
    V = ph((2,), "V")
    cases = {
        "dense": (pa.nn.dense(ph((2, 3), "A"), ph((4, 3), "B")), "dense"),
        "bias_add": (pa.nn.bias_add(X, V), "broadcast"),
        "relu": (pa.nn.relu(X), "elementwise"),
        "softmax": (pa.nn.softmax(X), "broadcast"),
        "conv2d": (pa.nn.conv2d(X, W, padding=1), "conv2d"),
        "conv2d_transpose": (pa.nn.conv2d_transpose(X, W), "conv2d_transpose"),
        "pool2d": (pa.nn.pool2d(X, 2), "pool"),
        "global_pool2d": (pa.nn.global_pool2d(X), "pool"),
        "upsampling": (pa.nn.upsampling(X, 2), "injective"),
        "lrn": (pa.nn.lrn(X, 3), "elementwise"),
        "flatten": (pa.nn.flatten(X), None),
    }
    for name, (t, tag) in cases.items():
        assert t.op.name == name
        if tag is not None:
            assert t.op.tag == tag, name
    assert pa.nn.conv2d(X, W, 2, (1, 0, 2, 1), 2).op.attrs == {
        "strides": (2, 2), "padding": (1, 0, 2, 1), "dilation": (2, 2), "groups": 1}


# ---------------------------------------------------------------------------
# gradients (pa.differentiate) against central finite differences, float64
# ---------------------------------------------------------------------------

L3 = ph((3,), "labels", "int32")
GRAD_CASES = {
    "dense": (lambda x, w, b: pa.nn.dense(x, w, b), [(2, 3), (4, 3), (4,)]),
    "bias_add": (lambda x, b: pa.nn.bias_add(x, b), [(2, 3, 2), (3,)]),
    "leaky_relu": (lambda x: pa.nn.leaky_relu(x, 0.1), [(2, 5)]),
    "prelu": (lambda x, a: pa.nn.prelu(x, a), [(2, 3), (3,)]),
    "sigmoid_tanh": (lambda x: pa.nn.tanh(pa.nn.sigmoid(x)), [(2, 3)]),
    "softmax": (lambda x: pa.nn.softmax(x, 0), [(3, 4)]),
    "log_softmax": (lambda x: pa.nn.log_softmax(x), [(3, 4)]),
    "conv2d": (lambda x, w: pa.nn.conv2d(x, w, 2, (1, 0, 2, 1), 2), [(1, 2, 6, 6), (2, 2, 2, 2)]),
    "conv2d_depthwise": (lambda x, w: pa.nn.conv2d(x, w, 1, 1, 1, 2), [(1, 2, 4, 4), (2, 1, 3, 3)]),
    "conv2d_transpose": (lambda x, w: pa.nn.conv2d_transpose(x, w, 2, 1, 1), [(1, 2, 3, 3), (2, 2, 3, 3)]),
    "max_pool_ceil": (lambda x: pa.nn.pool2d(x, 3, 2, 1, "max", True), [(1, 2, 6, 6)]),
    "avg_pool_ceil": (lambda x: pa.nn.pool2d(x, 3, 2, 1, "avg", True, False), [(1, 2, 6, 6)]),
    "global_pool": (lambda x: pa.nn.global_pool2d(x, "avg"), [(1, 2, 3, 3)]),
    "upsampling": (lambda x: pa.nn.upsampling(x, (2, 3)), [(1, 1, 2, 3)]),
    "batch_norm": (lambda x, g, b, m: pa.nn.batch_norm(x, g, b, m, ph((3,), "var")), [(2, 3, 2), (3,), (3,), (3,)]),
    "lrn": (lambda x: pa.nn.lrn(x, 3, alpha=0.5), [(1, 4, 2, 2)]),
    "l2_normalize": (lambda x: pa.nn.l2_normalize(x, 1e-6, 1), [(2, 3)]),
    "cross_entropy": (lambda z: pa.nn.cross_entropy(z, L3), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_matches_finite_differences(name):
    build, shapes = GRAD_CASES[name]
    ins = [ph(s, f"in{i}") for i, s in enumerate(shapes)]
    Y = build(*ins)
    H = ph(Y.shape, "H")
    feed = {t: rand(*t.shape) for t in ins}
    for t in pa.te.placeholders(Y):  # the fixed inputs: variances and labels
        if t not in feed:
            feed[t] = np.array([0, 3, 1], "int32") if t.dtype == "int32" else np.abs(rand(*t.shape)) + 0.5
    h = rand(*Y.shape)
    grads = pa.evaluate(list(pa.differentiate(Y, ins, H)), {**feed, H: h})
    eps = 1e-6
    for t, g in zip(ins, grads):  # directional derivative along a random direction
        d = rand(*t.shape)
        fp = (pa.evaluate(Y, {**feed, t: feed[t] + eps * d}) * h).sum()
        fm = (pa.evaluate(Y, {**feed, t: feed[t] - eps * d}) * h).sum()
        np.testing.assert_allclose((g * d).sum(), (fp - fm) / (2 * eps), rtol=1e-6, atol=1e-7, err_msg=t.name)
