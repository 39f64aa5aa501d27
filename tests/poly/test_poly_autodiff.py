"""simplify() on the real reverse-mode output: pa.differentiate(..., optimize=False) + simplify."""

import time

import numpy as np
import pytest

import polyad as pa
from polyad.poly import PolyOp, estimate, simplify
from polyad.te.expr import Call
from polyad.te.tensor import walk_ops
from polyad.te.visit import post_order
from poly_rawforms import rand, window_pairs

GUARDS = ("select", "lt", "le", "gt", "ge", "eq", "ne")


def _grads(Y, inputs):
    H = pa.placeholder(Y.shape, name="H")
    return H, list(pa.differentiate(Y, inputs, H, optimize=False))


def _guards_of(op):
    if not isinstance(op, PolyOp):
        return []
    return [n.op for st in op.statements for n in post_order(st.values) if isinstance(n, Call) and n.op in GUARDS]


SMALL = [
    ("dense", lambda: _dense((3, 4), (5, 4))),
    ("conv2d_s3_p1", lambda: _conv((1, 2, 9, 9), (2, 2, 5, 5), 3, 1, 1)),
    ("conv2d_dilated", lambda: _conv((1, 2, 8, 8), (2, 2, 3, 3), 1, 1, 2)),
    ("avg_pool", lambda: _pool((1, 2, 7, 7), 2, 2, "avg")),
    ("max_pool", lambda: _pool((1, 2, 7, 7), 3, 2, "max")),
    ("flatten", lambda: _unary((2, 3, 4, 5), pa.nn.flatten)),
    ("softmax", lambda: _unary((3, 6), pa.nn.softmax)),
    ("transpose", lambda: _unary((2, 3, 4), lambda x: pa.ops.transpose(x, (2, 0, 1)))),
    ("reshape", lambda: _unary((6, 4), lambda x: pa.ops.reshape(x, (3, 8)))),
    ("pad", lambda: _unary((3, 4), lambda x: pa.ops.pad(x, ((1, 2), (0, 1))))),
    ("upsampling", lambda: _unary((1, 1, 3, 4), lambda x: pa.nn.upsampling(x, 2))),
]


def _dense(xs, ws):
    X, W, B = pa.placeholder(xs, name="X"), pa.placeholder(ws, name="W"), pa.placeholder((ws[0],), name="B")
    return pa.nn.dense(X, W, B), [X, W, B]


def _conv(xs, ws, s, p, d):
    X, W = pa.placeholder(xs, name="X"), pa.placeholder(ws, name="W")
    return pa.nn.conv2d(X, W, s, p, d), [X, W]


def _pool(xs, k, s, kind):
    X = pa.placeholder(xs, name="X")
    return pa.nn.pool2d(X, k, s, 0, kind), [X]


def _unary(xs, fn):
    X = pa.placeholder(xs, name="X")
    return fn(X), [X]


@pytest.mark.parametrize("name,make", SMALL, ids=[n for n, _ in SMALL])
def test_simplified_autodiff_gradient_equals_raw(name, make):
    Y, inputs = make()
    H, raw = _grads(Y, inputs)
    s = simplify(raw)
    feed = {t: np.round(rand(t.shape, k), 2) for k, t in enumerate(inputs)}
    feed[H] = rand(H.shape, 9)
    for a, b in zip(pa.evaluate(s, feed), pa.evaluate(raw, feed)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert estimate(s).flops <= estimate(raw).flops
    # every stage simplify touched is guard-free, except the comparison with an argmax
    for op in walk_ops(s):
        g = _guards_of(op)
        assert g == [] or (name in ("max_pool", "softmax") and sorted(g) == ["eq", "select"]), (op.name, g)


def test_max_pool_gradient_work_is_linear():
    n, c, h, k, st = 1, 2, 9, 3, 2
    Y, inputs = _pool((n, c, h, h), k, st, "max")
    _, raw = _grads(Y, inputs)
    (dX,) = simplify(raw)
    oh = (h - k) // st + 1
    P = window_pairs(h, oh, k, st)
    # argmax once per window element, then one select (+ add) per (input element, window) pair
    assert estimate(dX).stage(dX.op.name).iterations == n * c * P * P
    argmax_iters = sum(s.iterations for s in estimate(dX).stages if s.name != dX.op.name)
    assert argmax_iters == n * c * oh * oh * k * k


WORKLOADS = [
    ("dense", lambda: _dense((32, 1000), (1000, 1000))),
    ("conv2d_3x3", lambda: _conv((32, 17, 28, 28), (19, 17, 3, 3), 1, 0, 1)),
    ("conv2d_5x5_s3", lambda: _conv((32, 17, 58, 58), (19, 17, 5, 5), 3, 1, 1)),
    ("conv2d_dilated", lambda: _conv((8, 16, 32, 32), (16, 16, 3, 3), 1, 1, 2)),
    ("avg_pool", lambda: _pool((32, 17, 280, 280), 2, 2, "avg")),
    ("max_pool", lambda: _pool((32, 64, 100, 100), 2, 2, "max")),
    ("softmax", lambda: _unary((60, 1000), pa.nn.softmax)),
    ("flatten", lambda: _unary((32, 100, 20, 25), pa.nn.flatten)),
]


@pytest.mark.parametrize("name,make", WORKLOADS, ids=[n for n, _ in WORKLOADS])
def test_workload_gradients_simplify_fast(name, make):
    Y, inputs = make()
    _, raw = _grads(Y, inputs)
    t0 = time.perf_counter()
    s = simplify(raw)
    assert time.perf_counter() - t0 < 1.0
    est, est_raw = estimate(s), estimate(raw)
    assert est.flops < est_raw.flops
    dX = s[0]
    if name == "flatten":
        assert est.flops == 0 and est.iterations == Y.size
        assert "= H[i0, 500*i1 + 25*i2 + i3]" in pa.show(dX)
    if name == "max_pool":
        # stride = kernel: each input element reads its window's argmax once
        assert estimate(dX).stage(dX.op.name).iterations == 32 * 64 * 100 * 100
    if name == "dense":
        assert estimate(dX).stage(dX.op.name).flops == 2 * 32 * 1000 * 1000


def test_chain_gradient_simplifies_to_linear_size():
    """WORKLOADS "chain": y = x*(x*(...)); the raw adjoints are select-sums over (1000 x 1000).  The
    simplified gradient's work grows linearly with depth (twice as deep, twice the flops: no quadratic
    growth of expressions, TVM's failure); how fast simplify runs is benchmarks/'s business (chain)."""
    def simplified(depth):
        x = pa.placeholder((1000,), name="x")
        y = x
        for _ in range(depth):
            y = pa.ops.multiply(x, y)
        H = pa.placeholder((1000,), name="H")
        return simplify(list(pa.differentiate(y, [x], H, optimize=False)))

    half, s = estimate(simplified(100)), estimate(simplified(200))
    assert 1.8 <= s.flops / half.flops <= 2.2, (half.flops, s.flops)
    assert len(s.stages) <= 2.2 * len(half.stages)
    # every raw select-sum over (1000 x 1000) became a 1000-point elementwise stage
    assert all(st.iterations <= 1000 for st in s.stages)
