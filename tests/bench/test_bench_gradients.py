"""The benchmark's baselines are honest: hand-written TE (through pa.evaluate) and
numpy gradients agree with float64 finite differences and with torch autograd."""

import numpy as np
import pytest

import polyad as pa
from polyad.te.tensor import placeholders

from polyad.bench import workloads as wl

# Every family at tiny shapes, incl. stride/pad/dilation and overlapping/padded pools.
TINY = {
    "dense": (wl.dense, dict(batch=3, n_in=5, n_out=4)),
    "dense_wb": (wl.dense, dict(batch=3, n_in=5, n_out=4, wrt=("W", "B"))),
    "conv3x3": (wl.conv2d, dict(batch=2, c_in=3, size=7, c_out=2, k=3)),
    "conv5x5_s3_p1": (wl.conv2d, dict(batch=2, c_in=2, size=11, c_out=3, k=5, stride=3, pad=1)),
    "conv_dil2_p1": (wl.conv2d, dict(batch=2, c_in=2, size=9, c_out=2, k=3, stride=1, pad=1, dil=2)),
    "conv_s2_d2_p2": (wl.conv2d, dict(batch=1, c_in=2, size=10, c_out=2, k=3, stride=2, pad=2, dil=2)),
    "avg_pool": (wl.pool, dict(batch=2, channels=2, size=7, kind="avg")),
    "avg_pool_k3s2p1": (wl.pool, dict(batch=2, channels=2, size=7, kernel=3, stride=2, pad=1, kind="avg")),
    "max_pool": (wl.pool, dict(batch=2, channels=2, size=7, kind="max")),
    "max_pool_k3s2p1": (wl.pool, dict(batch=2, channels=2, size=7, kernel=3, stride=2, pad=1, kind="max")),
    "softmax": (wl.softmax, dict(batch=3, n_in=5, n_out=4)),
    "softmax_homebrew": (wl.softmax, dict(batch=3, n_in=5, n_out=4, homebrew=True)),
    "flatten": (wl.flatten, dict(batch=2, c=3, h=4, w=5)),
    "chain": (wl.chain, dict(n=7, depth=5)),
    "mlp_step": (wl.mlp_step, dict(batch=4, sizes=(6, 5, 4, 3))),
    "lenet_step": (wl.lenet_step, dict(batch=2, size=16, c1=2, c2=3, k=3, dense=(5, 4, 3))),
}


def _case(key):
    fam, params = TINY[key]
    return fam(**params)


def _f64(arrays):
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()}


def _relerr(got, ref):
    return max(float(np.max(np.abs(np.asarray(g, np.float64).reshape(r.shape) - r)) / max(np.max(np.abs(r)), 1e-300))
               for g, r in zip(got, ref))


@pytest.mark.parametrize("key", list(TINY))
def test_numpy_gradient_matches_finite_differences(key):
    case = _case(key)
    a = _f64(case.data(seed=1))
    _, saved = case.np_forward(a)
    grads = case.np_backward(a, saved, a["H"])
    assert len(grads) == len(case.wrt)
    rng = np.random.default_rng(2)
    eps = 1e-6
    for name, g in zip(case.wrt, grads):
        assert g.shape == a[name].shape, name
        v = rng.standard_normal(a[name].shape)
        plus, minus = dict(a), dict(a)
        plus[name], minus[name] = a[name] + eps * v, a[name] - eps * v
        fd = np.sum((case.np_forward(plus)[0] - case.np_forward(minus)[0]) * a["H"]) / (2 * eps)
        assert abs(fd - np.sum(g * v)) <= 1e-6 * max(1.0, abs(fd)), (key, name, fd, np.sum(g * v))


@pytest.mark.parametrize("key", list(TINY))
def test_handwritten_te_matches_numpy(key):
    case = _case(key)
    a = case.data(seed=3)
    a64 = _f64(a)
    _, saved = case.np_forward(a64)
    ref = case.np_backward(a64, saved, a64["H"])
    grads = case.hand_te(case.placeholders())
    assert [g.shape for g in grads] == [r.shape for r in ref]
    # Built and evaluated in float64 too, so the check is exact up to rounding, not float32 noise.
    g64 = case.hand_te(case.placeholders("float64"))
    assert _relerr(pa.evaluate(g64, {p: a64[p.name] for p in placeholders(g64)}), ref) < 1e-12
    got32 = pa.evaluate(grads, {p: a[p.name] for p in placeholders(grads)})
    assert all(g.dtype == np.float32 for g in got32)
    assert _relerr(got32, ref) < 1e-5


@pytest.mark.parametrize("key", list(TINY))
def test_torch_forward_and_autograd_match_numpy(key):
    torch = pytest.importorskip("torch")
    case = _case(key)
    a = _f64(case.data(seed=4))
    y, saved = case.np_forward(a)
    ref = case.np_backward(a, saved, a["H"])
    t = {k: torch.tensor(v, requires_grad=k in case.wrt) for k, v in a.items()}
    yt = case.torch_forward(t)
    np.testing.assert_allclose(yt.detach().numpy(), y, rtol=1e-10, atol=1e-12)
    got = torch.autograd.grad(yt, [t[k] for k in case.wrt], t["H"].reshape(yt.shape))
    assert _relerr([g.numpy() for g in got], ref) < 1e-10


def test_max_pool_ties_go_to_the_first_maximum():
    case = wl.pool(batch=1, channels=1, size=4, kind="max")
    x = np.array([[[[1, 1, 0, 2], [1, 0, 2, 2], [3, 3, 5, 4], [3, 3, 5, 5]]]], np.float32)
    h = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)
    expect = np.zeros_like(x)
    expect[0, 0, 0, 0], expect[0, 0, 0, 3], expect[0, 0, 2, 0], expect[0, 0, 2, 2] = 1, 2, 3, 4
    _, arg = case.np_forward({"X": x})
    np.testing.assert_array_equal(case.np_backward({"X": x}, arg, h)[0], expect)
    ph = case.placeholders()
    (g,) = case.hand_te(ph)
    np.testing.assert_array_equal(pa.evaluate(g, {ph["X"]: x, ph["H"]: h}), expect)


def test_strided_conv_backward_visits_only_valid_taps():
    # dilation 1, stride 3, kernel 5: ceil(5/3) = 2 taps per axis, not 5.
    from polyad.bench import handwritten as hw

    case = wl.conv2d(batch=1, c_in=1, size=11, c_out=1, k=5, stride=3, pad=1)
    ph = case.placeholders()
    dX = hw.conv2d_bwd_data(ph["H"], ph["W"], ph["X"].shape, stride=3, pad=1)
    assert [ax.extent for ax in dX.op.reduce_axis] == [1, 2, 2]
