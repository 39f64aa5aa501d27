"""The statement forms simplify() produces compile and run (pa.build, naive schedule) like pa.evaluate."""

import os

import numpy as np
import pytest

import polyad as pa
from polyad.poly import simplify
from poly_rawforms import rand, raw_grad

pytestmark = pytest.mark.opencl


def _build_or_skip(outs, ins):
    try:
        return pa.build(outs, ins, schedule="naive")
    except pa.DeviceError as e:  # no OpenCL device on this machine: nothing to run on
        if not os.environ.get("POLYAD_ALLOW_NO_OPENCL"):
            raise
        pytest.skip(str(e))


def test_zero_fill_accumulate_and_masked_statements_run():
    n = 7
    H = pa.placeholder((n,), name="H")
    idx = pa.placeholder((n,), "int32", name="idx")
    acc = simplify(raw_grad(
        (n,), (n,), (),
        lambda o, r: [((o[0],), None, H[o[0]]), ((n - 1 - o[0],), None, H[o[0]] * 2.0), ((o[0] // 2,), None, H[o[0]])],
        name="acc",
    ))
    up = simplify(raw_grad((3,), (n,), (), lambda o, r: [((o[0] // 3,), o[0] < 6, H[o[0]])], name="up"))
    take = simplify(raw_grad((4,), (n,), (), lambda o, r: [((idx[o[0]],), o[0] >= 1, H[o[0]])], name="take"))
    outs = [acc, up, take]
    mod = _build_or_skip(outs, [H, idx])
    h, i = rand((n,)), np.array([3, 0, 3, 1, 2, 2, 0], "int32")
    for got, ref in zip(mod(h, i), pa.evaluate(outs, {H: h, idx: i})):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_strided_conv_gradient_runs():
    X = pa.placeholder((1, 2, 7, 7), name="X")
    W = pa.placeholder((2, 2, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, 2, 1)
    H = pa.placeholder(Y.shape, name="H")
    g = simplify(list(pa.differentiate(Y, [X, W], H, optimize=False)))
    mod = _build_or_skip(g, [X, W, H])
    feed = {X: rand(X.shape, 1), W: rand(W.shape, 2), H: rand(H.shape, 3)}
    for got, ref in zip(mod(*feed.values()), pa.evaluate(g, feed)):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
