"""pa.build with computed tensors among the inputs (saved forward activations): the backward a framework runs.

Few builds (each compiles a program): a softmax gradient fed with its residuals, a relu-MLP gradient
fed with its activations, the cache and the errors.
"""

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline.programs import program_key
from polyad.te.graph import cut

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]

rng = np.random.default_rng(11)


def rand(t):
    return rng.standard_normal(t.shape).astype(t.dtype)


def _softmax_grad():
    X = pa.placeholder((6, 9), name="X")
    W = pa.placeholder((7, 9), name="W")
    Y = pa.nn.softmax(pa.nn.dense(X, W))
    H = pa.placeholder(Y.shape, name="H")
    return [X, W, H], list(pa.differentiate(Y, [X, W], H))


def test_softmax_gradient_fed_with_its_residuals():
    (X, W, H), grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    x, w, h = rand(X), rand(W), rand(H)
    saved = pa.build(res, [X, W], schedule="naive")(x, w)  # the forward, run beforehand
    mod = pa.build(grads, [X, W, H] + res)
    assert mod.inputs == [X, W, H] + res  # as given
    kernels = {k.name for k in mod.program.kernels}
    assert not kernels & {"dense", "softmax_max", "softmax_max_stopgrad", "softmax_expsum"}  # not computed again
    want = pa.evaluate(grads, {X: x, W: w, H: h})
    for g, f in zip(want, mod(x, w, h, *saved)):
        np.testing.assert_allclose(f, g, rtol=2e-5, atol=2e-6)
    # the fed values are really used: a different row sum scales the gradient as the oracle says
    expsum = res[2]
    assert expsum.name == "softmax_expsum"
    other = list(saved)
    other[2] = saved[2] * 2.0
    fed_other = pa.evaluate(grads, {X: x, W: w, H: h, **dict(zip(res, other))})
    got = mod(x, w, h, *other)
    assert not np.allclose(got[0], want[0], rtol=1e-3, atol=1e-4)
    for g, f in zip(fed_other, got):
        np.testing.assert_allclose(f, g, rtol=2e-5, atol=2e-6)
    with pytest.raises(pa.ShapeError, match="'softmax_max_stopgrad'"):
        mod(x, w, h, saved[0], saved[1][:3], saved[2])
    with pytest.raises(pa.DtypeError, match="'softmax_expsum'"):
        mod(x, w, h, *saved[:2], saved[2].astype("float64"))


def test_relu_mlp_gradient_fed_with_activations_and_the_cache_keeps_both_builds_apart():
    X = pa.placeholder((5, 8), name="X")
    W1, b1 = pa.placeholder((6, 8), name="W1"), pa.placeholder((6,), name="b1")
    W2, b2 = pa.placeholder((3, 6), name="W2"), pa.placeholder((3,), name="b2")
    z1 = pa.nn.dense(X, W1, b1)
    a1 = pa.nn.relu(z1)
    Y = pa.nn.dense(a1, W2, b2)
    H = pa.placeholder(Y.shape, name="H")
    grads = list(pa.differentiate(Y, [W1, b1, W2, b2], H))
    assert pa.residuals(grads, [H]) == [z1, a1]
    ins = [X, W1, b1, W2, b2, H]
    arrays = [rand(t) for t in ins]
    feed = dict(zip(ins, arrays))
    saved = pa.evaluate([z1, a1], feed)
    full = pa.build(grads, ins)
    fed = pa.build(grads, ins + [z1, a1])
    assert len(fed.program.kernels) < len(full.program.kernels) and fed.source != full.source
    keys = {program_key(*cut(grads, i), "auto", "dev") for i in (ins, ins + [z1, a1], ins + [a1])}
    assert len(keys) == 3
    want = pa.evaluate(grads, feed)
    for g, a, b in zip(want, full(*arrays), fed(*arrays, *saved)):
        np.testing.assert_allclose(a, g, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(b, g, rtol=2e-5, atol=2e-5)
    # a warm build of either finds its own program
    assert pa.build(grads, ins + [z1, a1]).source == fed.source
    assert pa.build(grads, ins).source == full.source
    # feeding a different activation changes dW2 = Hᵀ·a1 accordingly (the relu stage is not run)
    fake = np.abs(saved[1]) + 1.0
    dW2 = fed(*arrays, saved[0], fake)[2]
    np.testing.assert_allclose(dW2, feed[H].T @ fake, rtol=1e-5, atol=1e-5)


def test_build_feed_errors_name_the_tensor():
    (X, W, H), grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    with pytest.raises(pa.FeedError, match="'softmax_max_stopgrad' is given twice"):
        pa.build(grads, [X, W, H, res[1], res[1]])
    with pytest.raises(pa.FeedError, match=f"'{grads[1].name}' is both an output and a fed input"):
        pa.build(grads, [X, W, H, grads[1]])
    with pytest.raises(pa.PolyadError, match="'X' is needed"):
        pa.build(grads, [W, H] + res)  # dW still reads X
