"""Measured structure: the simplified gradient does exactly the work of the hand-written one.

Each case builds the raw gradient (the form reverse mode produces), simplifies
it, checks the values against the raw form through pa.evaluate, and checks
that ``pa.estimate(...).flops`` equals the count of the hand-written gradient,
given by its formula.  Counting rules (polyad/poly/estimate.py): one flop per
float operator per statement instance, plus one per instance of a reduction
(the combine); index arithmetic is free.  A hand-written gradient that sums c
contributions into a point (c > 1) costs c*(ops per term + 1); one that
copies a single contribution costs the term's ops.

``P(n, out, k, s, d, p)`` is the number of (output position, kernel offset)
pairs whose read lands inside an input axis of size n (window_pairs).
"""

import itertools

import numpy as np
import pytest

import polyad as pa
from polyad.poly import estimate, simplify
from polyad.te.expr import Call
from polyad.te.visit import post_order
from poly_rawforms import argmax_rows, argmax_stage, out_size, rand, raw_grad, window_pairs

COMPARE = ("select", "lt", "le", "gt", "ge", "eq", "ne")


def _guarded_ops(t):
    return sorted(
        n.op for st in t.op.statements for n in post_order(st.values) if isinstance(n, Call) and n.op in COMPARE
    )


def _check(raw, feed, flops, iterations=None, allowed=()):
    s = simplify(raw)
    np.testing.assert_allclose(pa.evaluate(s, feed), pa.evaluate(raw, feed), rtol=1e-5, atol=1e-5)
    est = estimate(s).stage(raw.op.name)
    assert est.flops == flops
    if iterations is not None:
        assert est.iterations == iterations
    assert _guarded_ops(s) == sorted(allowed)
    assert estimate(s).flops <= estimate(raw).flops
    return s


# ---------------------------------------------------------------------------
# dense and convolutions
# ---------------------------------------------------------------------------

def test_dense():
    N, K, M = 3, 4, 5
    X, W = pa.placeholder((N, K), name="X"), pa.placeholder((M, K), name="W")
    H = pa.placeholder((N, M), name="H")
    feed = {X: rand((N, K), 1), W: rand((M, K), 2), H: rand((N, M), 3)}
    dX = raw_grad((N, K), (N, M), (K,), lambda o, r: [((o[0], r[0]), None, H[o[0], o[1]] * W[o[1], r[0]])])
    dW = raw_grad((M, K), (N, M), (K,), lambda o, r: [((o[1], r[0]), None, H[o[0], o[1]] * X[o[0], r[0]])], "dW")
    dB = raw_grad((M,), (N, M), (), lambda o, r: [((o[1],), None, H[o[0], o[1]])], "dB")
    # hand-written: dX = H·W (2NKM), dW = Hᵀ·X (2NKM), dB = column sums of H (NM)
    _check(dX, feed, 2 * N * K * M, N * K * M)
    _check(dW, feed, 2 * N * K * M, N * K * M)
    _check(dB, feed, N * M, N * M)
    j = pa.reduce_axis((0, M), "j")
    hand = pa.compute((N, K), lambda i, k: pa.sum(H[i, j] * W[j, k], axis=j), name="hand")
    assert estimate(hand).flops == 2 * N * K * M


def _conv_case(n, c, f, h, k, s, d, p):
    oh = out_size(h, k, s, d, p)
    X = pa.placeholder((n, c, h, h), name="X")
    W = pa.placeholder((f, c, k, k), name="W")
    H = pa.placeholder((n, f, oh, oh), name="H")

    def reads_x(o, r):
        N_, F_, Y_, X_ = o
        C_, RY, RX = r
        iy, ix = s * Y_ + d * RY - p, s * X_ + d * RX - p
        g = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < h) if p else None
        return [((N_, C_, iy, ix), g, H[N_, F_, Y_, X_] * W[F_, C_, RY, RX])]

    def reads_w(o, r):
        N_, F_, Y_, X_ = o
        C_, RY, RX = r
        iy, ix = s * Y_ + d * RY - p, s * X_ + d * RX - p
        g = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < h)
        # the forward reads X under the padding guard: d/dW = H * select(g, X[...], 0)
        return [((F_, C_, RY, RX), None, H[N_, F_, Y_, X_] * pa.select(g, X[N_, C_, iy, ix], 0.0))]

    dX = raw_grad((n, c, h, h), (n, f, oh, oh), (c, k, k), reads_x)
    dW = raw_grad((f, c, k, k), (n, f, oh, oh), (c, k, k), reads_w, name="dW")
    feed = {X: rand((n, c, h, h), 1), W: rand((f, c, k, k), 2), H: rand((n, f, oh, oh), 3)}
    P = window_pairs(h, oh, k, s, d, p)
    reached = len({s * y + d * r - p for y in range(oh) for r in range(k)} & set(range(h)))
    return dX, dW, feed, P, n * c * (h * h - reached * reached), n * oh * oh


@pytest.mark.parametrize("k,s,p,h", [(3, 1, 0, 8), (5, 3, 1, 11)], ids=["conv2d_3x3", "conv2d_5x5_s3_p1"])
def test_conv2d(k, s, p, h):
    n, c, f = 2, 2, 3
    dX, dW, feed, P, zeros, _ = _conv_case(n, c, f, h, k, s, 1, p)
    # hand-written: every (output, kernel offset) pair inside the image, once: 2 flops (mul, add);
    # input points no window reads are written with zeros
    _check(dX, feed, 2 * n * c * f * P * P, n * c * f * P * P + zeros)
    _check(dW, feed, 2 * n * c * f * P * P, n * c * f * P * P)


@pytest.mark.parametrize("s,d,k", list(itertools.product((1, 2, 3), (1, 2, 3), (1, 2, 3))))
def test_conv2d_strides_dilations_kernels(s, d, k):
    n, c, f, h = 1, 2, 2, 7
    dX, dW, feed, P, zeros, per_dw = _conv_case(n, c, f, h, k, s, d, 0)
    _check(dX, feed, 2 * n * c * f * P * P, n * c * f * P * P + zeros)
    # dW sums n*oh*ow products per weight; a single one (oh = ow = 1) is a plain product
    _check(dW, feed, n * c * f * P * P * (2 if per_dw > 1 else 1), n * c * f * P * P)


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("k,s", list(itertools.product((1, 2, 3), (1, 2, 3))))
def test_avg_pool(k, s):
    n, c, h = 1, 2, 7
    oh = out_size(h, k, s)
    H = pa.placeholder((n, c, oh, oh), name="H")
    dX = raw_grad(
        (n, c, h, h), (n, c, oh, oh), (k, k),
        lambda o, r: [((o[0], o[1], s * o[2] + r[0], s * o[3] + r[1]), None, H[o[0], o[1], o[2], o[3]] * (1.0 / (k * k)))],
    )
    P = window_pairs(h, oh, k, s)
    # per (input point, window) pair: the 1/k² scaling (none for k = 1), and an add where windows overlap
    _check(dX, {H: rand((n, c, oh, oh))}, n * c * P * P * ((k > 1) + (k > s)), n * c * max(P * P, h * h))


@pytest.mark.parametrize("k,s", list(itertools.product((1, 2, 3), (1, 2, 3))))
def test_max_pool(k, s):
    n, c, h = 1, 2, 7
    oh = out_size(h, k, s)
    X = pa.placeholder((n, c, h, h), name="X")
    H = pa.placeholder((n, c, oh, oh), name="H")
    A = argmax_stage(X, (n, c, oh, oh), k, s)
    dX = raw_grad(
        (n, c, h, h), (n, c, oh, oh), (k, k),
        lambda o, r: [((o[0], o[1], s * o[2] + r[0], s * o[3] + r[1]),
                       A[o[0], o[1], o[2], o[3]] == r[0] * k + r[1], H[o[0], o[1], o[2], o[3]])],
    )
    x = np.round(rand((n, c, h, h)), 1)  # ties exercise "first maximum"
    P = window_pairs(h, oh, k, s)
    # per pair: the select against the window's argmax, and an add where windows overlap
    _check(dX, {X: x, H: rand((n, c, oh, oh))}, n * c * P * P * (1 + (k > s)), allowed=("eq", "select"))


# ---------------------------------------------------------------------------
# layout and data movement: no arithmetic at all
# ---------------------------------------------------------------------------

def test_flatten_reshape_transpose():
    X = pa.placeholder((2, 3, 4), name="X")
    H = pa.placeholder((2, 12), name="H")
    flat = raw_grad((2, 3, 4), (2, 12), (), lambda o, r: [((o[0], o[1] // 4, o[1] % 4), None, H[o[0], o[1]])])
    _check(flat, {H: rand((2, 12))}, 0, 24)
    # reshape (6, 4) -> (3, 8): Y[a, b] = X[(8a + b) // 4, (8a + b) % 4]
    H2 = pa.placeholder((3, 8), name="H2")
    resh = raw_grad((6, 4), (3, 8), (), lambda o, r: [(((8 * o[0] + o[1]) // 4, (8 * o[0] + o[1]) % 4), None, H2[o[0], o[1]])])
    s = _check(resh, {H2: rand((3, 8))}, 0, 24)
    assert "H2[i0//2, 4*(i0%2) + i1]" in pa.show(s) or "H2[i0//2, i1 + 4*(i0%2)]" in pa.show(s)
    H3 = pa.placeholder((4, 3, 2), name="H3")
    tr = raw_grad((2, 3, 4), (4, 3, 2), (), lambda o, r: [((o[2], o[1], o[0]), None, H3[o[0], o[1], o[2]])])
    s = _check(tr, {H3: rand((4, 3, 2))}, 0, 24)
    assert "= H3[i2, i1, i0]" in pa.show(s)
    del X


def test_pad_and_strided_slice():
    n, p = 6, 2
    H = pa.placeholder((n + 2 * p,), name="H")
    pad = raw_grad((n,), (n + 2 * p,), (), lambda o, r: [((o[0] - p,), (o[0] >= p) & (o[0] < n + p), H[o[0]])])
    s = _check(pad, {H: rand((n + 2 * p,))}, 0, n)
    assert "= H[i0 + 2]" in pa.show(s)
    # X[1:10:3] of a length-11 X: dX[j] = H[(j - 1)/3] where j = 1 (mod 3), else 0
    H2 = pa.placeholder((3,), name="H2")
    sl = raw_grad((11,), (3,), (), lambda o, r: [((1 + 3 * o[0],), None, H2[o[0]])])
    s = _check(sl, {H2: rand((3,))}, 0, 11)
    assert any(st.name == "Z" for st in s.op.statements)


def test_upsampling():
    # nearest, factor 2: Y[y, x] = X[y//2, x//2]; dX sums each 2x2 block of H
    H = pa.placeholder((6, 8), name="H")
    up = raw_grad((3, 4), (6, 8), (), lambda o, r: [((o[0] // 2, o[1] // 2), None, H[o[0], o[1]])])
    s = _check(up, {H: rand((6, 8))}, 6 * 8, 6 * 8)
    # each reduction variable runs over [2*i, 2*i + 1]: rebased to a box, with no condition left
    assert "dX[i0, i1] = sum(H[2*i0 + o0, 2*i1 + o1], axis=[o0 in [0, 2), o1 in [0, 2)])" in pa.show(s)


def test_concatenate_and_split():
    # Y = concatenate(A (3,), B (4,)): Y[i] = select(i < 3, A[i], B[i - 3])
    H = pa.placeholder((7,), name="H")
    dA = raw_grad((3,), (7,), (), lambda o, r: [((o[0],), o[0] < 3, H[o[0]])], "dA")
    dB = raw_grad((4,), (7,), (), lambda o, r: [((o[0] - 3,), ~(o[0] < 3), H[o[0]])], "dB")
    feed = {H: rand((7,))}
    _check(dA, feed, 0, 3)
    s = _check(dB, feed, 0, 4)
    assert "= H[i0 + 3]" in pa.show(s)
    # split of X (8,) into 2 equal sections, as one stacked consumer Y[t, i] = X[4t + i]
    H2 = pa.placeholder((2, 4), name="H2")
    sp = raw_grad((8,), (2, 4), (), lambda o, r: [((4 * o[0] + o[1],), None, H2[o[0], o[1]])])
    s = _check(sp, {H2: rand((2, 4))}, 0, 8)
    assert "= H2[i0//4, i0%4]" in pa.show(s)


def test_broadcast_to():
    # X (5,) broadcast to (3, 5): dX[j] = sum_i H[i, j]
    H = pa.placeholder((3, 5), name="H")
    b = raw_grad((5,), (3, 5), (), lambda o, r: [((o[1],), None, H[o[0], o[1]])])
    _check(b, {H: rand((3, 5))}, 15, 15)


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def test_sum_mean_max_reductions():
    N, K = 3, 5
    H = pa.placeholder((N,), name="H")
    Z = pa.placeholder((N, K), name="Z")
    feed = {H: rand((N,)), Z: np.round(rand((N, K), 4), 1)}
    sm = raw_grad((N, K), (N,), (K,), lambda o, r: [((o[0], r[0]), None, H[o[0]])], "dsum")
    _check(sm, feed, 0, N * K)  # dX = H[i]: a broadcast
    mean = raw_grad((N, K), (N,), (K,), lambda o, r: [((o[0], r[0]), None, H[o[0]] * (1.0 / K))], "dmean")
    _check(mean, feed, N * K, N * K)  # one scaling per element
    A = argmax_rows(Z)
    mx = raw_grad((N, K), (N,), (K,), lambda o, r: [((o[0], r[0]), A[o[0]] == r[0], H[o[0]])], "dmax")
    _check(mx, feed, N * K, N * K, allowed=("eq", "select"))  # one select per element


def test_softmax_through_max_is_linear_not_quadratic():
    N, K = 4, 6
    Z = pa.placeholder((N, K), name="Z")
    dM = pa.placeholder((N,), name="dM")
    A = argmax_rows(Z)
    raw = raw_grad((N, K), (N,), (K,), lambda o, r: [((o[0], r[0]), A[o[0]] == r[0], dM[o[0]])], name="dZ")
    _check(raw, {Z: rand((N, K)), dM: rand((N,))}, N * K, N * K, allowed=("eq", "select"))
    assert estimate(raw).stage("dZ").iterations == (N * K) ** 2


def test_a_grouped_convolutions_data_gradient_sums_over_its_group_as_a_box():
    # the channels of i1's group, 8*(i1//8) <= f <= 8*(i1//8) + 7, are rebased to f' in [0, 8): the model had priced
    # every block of the quasi-affine range as naive loops (auto 8.6 ms, against 0.97 ms padded and blocked now)
    X = pa.placeholder((2, 16, 6, 6), name="X")
    W = pa.placeholder((16, 8, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, padding=1, groups=2)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    text = pa.show(dX)
    assert "H[i0, 8*(i1//8) + f, i2 - rh, i3 - rw]*W[8*(i1//8) + f, i1%8, rh, rw], axis=[f in [0, 8)" in text, text
    assert "floor" not in text and "8*(i1//8) <= f" not in text
    rng = np.random.default_rng(19)
    x, w, h = (rng.standard_normal(t.shape).astype("float32") for t in (X, W, H))
    got = pa.evaluate(dX, {W: w, H: h})
    want = np.zeros_like(x)  # the transposed grouped convolution, by hand
    hp = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for c in range(16):
        g = c // 8
        for f in range(8 * g, 8 * g + 8):
            for rh in range(3):
                for rw in range(3):
                    want[:, c] += hp[:, f, 2 - rh:8 - rh, 2 - rw:8 - rw] * w[f, c % 8, rh, rw]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
