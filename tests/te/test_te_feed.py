"""Feeding computed tensors (te.graph.cut, pa.evaluate) and pa.residuals: pure graph functions, numpy only."""

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.ops.reduction import _argmax
from polyad.poly.stage import PolyOp, Statement
from polyad.te.expr import IterVar
from polyad.te.reduce import sum_reducer
from polyad.te.graph import cut
from polyad.te.tensor import PlaceholderOp, walk_ops

rng = np.random.default_rng(3)


def rand(t):
    return rng.standard_normal(t.shape).astype(t.dtype)


def _names(tensors):
    return [t.name for t in tensors]


def _softmax_grad(n=4, m=5, k=6):
    X = pa.placeholder((n, k), name="X")
    W = pa.placeholder((m, k), name="W")
    Y = pa.nn.softmax(pa.nn.dense(X, W))
    H = pa.placeholder(Y.shape, name="H")
    return [X, W, H], Y, list(pa.differentiate(Y, [X, W], H))


def _mlp_grad(batch=3, sizes=(5, 6, 4)):
    X = pa.placeholder((batch, sizes[0]), name="X")
    W1 = pa.placeholder((sizes[1], sizes[0]), name="W1")
    b1 = pa.placeholder((sizes[1],), name="b1")
    W2 = pa.placeholder((sizes[2], sizes[1]), name="W2")
    b2 = pa.placeholder((sizes[2],), name="b2")
    z1 = pa.nn.dense(X, W1, b1)
    a1 = pa.nn.relu(z1)
    Y = pa.nn.dense(a1, W2, b2)
    H = pa.placeholder(Y.shape, name="H")
    return [X, W1, b1, W2, b2, H], (z1, a1), list(pa.differentiate(Y, [W1, b1, W2, b2], H))


# ------------------------------------------------------------------------------------ residuals

def test_residuals_of_softmax_are_the_row_statistics_and_logits():
    (X, W, H), Y, grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    # the gradient reads the logits and the per-row max/sum, not X·Wᵀ again; the max is under stop_gradient,
    # so no argmax routes a (cancelling) gradient to it
    assert _names(res) == ["dense", "softmax_max_stopgrad", "softmax_expsum"]
    assert all(not isinstance(t.op, PlaceholderOp) for t in res)
    assert pa.residuals(grads, H) == res  # one tensor or a list; deterministic


def test_residuals_of_dense_maxpool_and_mlp():
    X = pa.placeholder((3, 5), name="X")
    W = pa.placeholder((4, 5), name="W")
    B = pa.placeholder((4,), name="B")
    Y = pa.nn.dense(X, W, B)
    H = pa.placeholder(Y.shape, name="H")
    assert pa.residuals(list(pa.differentiate(Y, [X, W, B], H)), [H]) == []  # reads only X, W, H

    P = pa.placeholder((2, 2, 7, 7), name="P")
    Yp = pa.nn.pool2d(P, (3, 3), (2, 2), 1, "max")
    Hp = pa.placeholder(Yp.shape, name="H")
    assert _names(pa.residuals(pa.differentiate(Yp, [P], Hp)[0], [Hp])) == ["pool2d_argmax.v0"]  # the window argmax

    ins, (z1, a1), grads = _mlp_grad()
    res = pa.residuals(grads, [ins[-1]])
    assert res == [z1, a1]  # relu's input (its derivative's mask) and the activation dW2 reads


def test_residuals_graph_order_and_outputs_that_do_not_depend_on_the_head():
    X = pa.placeholder((4,), name="X")
    H = pa.placeholder((4,), name="H")
    A = pa.compute((4,), lambda i: X[i] * 2.0, name="A")
    B = pa.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = pa.compute((4,), lambda i: H[i] * B[i] + A[i], name="C")
    K = pa.compute((4,), lambda i: A[i] * A[i], name="K")  # an output without the head: computed, not a residual
    assert pa.residuals([C, K], [H]) == [A, B]
    assert pa.residuals([K], [H]) == []
    with pytest.raises(pa.PolyadError, match="'A'.*not a placeholder"):
        pa.residuals([C], [A])


# ------------------------------------------------------------------------------------ cut

def test_cut_replaces_reads_by_placeholders_and_drops_what_only_they_need():
    (X, W, H), Y, grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    outs, phs = cut(grads, [X, W, H] + res)
    assert phs[:3] == [X, W, H]  # placeholders stay themselves
    for t, p in zip(res, phs[3:]):
        assert isinstance(p.op, PlaceholderOp) and (p.name, p.shape, p.dtype) == (t.name, t.shape, t.dtype)
    ops = walk_ops(outs)
    stage_names = {op.name for op in ops if not isinstance(op, PlaceholderOp)}
    assert not stage_names & {"dense", "softmax_max", "softmax_max_stopgrad", "softmax_expsum"}
    assert {op.name for op in walk_ops(grads)} > stage_names  # the original graph is untouched
    assert all(t.op in ops for t in phs[3:])  # every residual is read
    assert _names(outs) == _names(grads)
    # nothing fed: the same graph
    same, ins = cut(grads, [X, W, H])
    assert all(a is b for a, b in zip(same, grads)) and ins == [X, W, H]


def test_cut_errors_name_the_tensor():
    (X, W, H), Y, grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    with pytest.raises(pa.FeedError, match="'softmax_max_stopgrad' is given twice"):
        cut(grads, [X, W, H, res[1], res[1]])
    with pytest.raises(pa.FeedError, match="'X' is given twice"):
        cut(grads, [X, W, X, H])
    with pytest.raises(pa.FeedError, match=f"'{grads[0].name}' is both an output and a fed input"):
        cut(grads, [X, W, H, grads[0]])
    # a computed tensor the outputs do not read is accepted, as an unused placeholder is
    outs, phs = cut(grads, [X, W, H, Y])
    assert phs[3].name == "softmax" and phs[3].op not in walk_ops(outs)


def test_cut_rebuilds_polyops_and_one_output_of_a_tuple_reduction():
    n = 5
    X = pa.placeholder((n,), name="X")
    A = pa.compute((n,), lambda i: X[i] * 3.0, name="A")
    i, k = IterVar("i", "int32", lo=0, extent=n, kind="data"), IterVar("k", "int32", lo=0, extent=n, kind="reduce")
    st = Statement("S0", (i, k), 1, isl.Set(f"{{ S0[i, k] : 0 <= k <= i < {n} }}"), (A[k],), sum_reducer("float32"))
    T = PolyOp("T", (n,), ("float32",), (st,)).output(0)  # cumsum of A
    outs, (pA,) = cut([T], [A])
    assert outs[0] is not T and outs[0].op.statements[0].domain.is_equal(st.domain)
    a = rand(A)
    np.testing.assert_allclose(pa.evaluate(outs[0], {pA: a}), np.cumsum(a), rtol=1e-5)
    np.testing.assert_allclose(pa.evaluate(T, {A: a}), np.cumsum(a), rtol=1e-5)

    Z = pa.placeholder((3, 4), name="Z")
    r = pa.reduce_axis((0, 4), "r")
    idx, val = pa.compute((3,), lambda j: _argmax((pa.cast(r, "int64"), Z[j, r]), axis=r), name="am")
    U = pa.compute((3,), lambda j: pa.cast(idx[j], "float32") + val[j], name="U")
    z = rand(Z)
    fed_val = np.array([10.0, 20.0, 30.0], "float32")
    outs, (pv,) = cut([U], [val])
    assert outs[0].op.input_tensors[0].op.name == "am"  # idx is still computed, val is read from pv
    want = np.argmax(z, axis=1) + fed_val
    np.testing.assert_allclose(pa.evaluate(outs[0], {Z: z, pv: fed_val}), want)
    np.testing.assert_allclose(pa.evaluate(U, {Z: z, val: fed_val}), want)  # evaluate feeds the same way


# ------------------------------------------------------------------------------------ evaluate

def test_evaluate_fed_activations_give_the_recomputed_gradient():
    (X, W, H), Y, grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    feed = {X: rand(X), W: rand(W), H: rand(H)}
    saved = pa.evaluate(res, {X: feed[X], W: feed[W]})
    for g, f in zip(pa.evaluate(grads, feed), pa.evaluate(grads, {**feed, **dict(zip(res, saved))})):
        np.testing.assert_array_equal(g, f)

    ins, acts, grads = _mlp_grad()
    feed = {t: rand(t) for t in ins}
    saved = pa.evaluate(list(acts), feed)
    for g, f in zip(pa.evaluate(grads, feed), pa.evaluate(grads, {**feed, **dict(zip(acts, saved))})):
        np.testing.assert_array_equal(g, f)


def test_evaluate_uses_the_fed_array_and_does_not_compute_its_stage(monkeypatch):
    import importlib

    ev = importlib.import_module("polyad.evaluate")
    ins, (z1, a1), grads = _mlp_grad()
    feed = {t: rand(t) for t in ins}
    X, H = ins[0], ins[-1]
    fake = np.abs(rand(a1)) + 1.0  # a different activation: dW2 = Hᵀ·a1 must follow it
    calls = []
    real = ev._eval_compute
    monkeypatch.setattr(ev, "_eval_compute", lambda op, v: calls.append(op.name) or real(op, v))
    dW2 = pa.evaluate(grads[2], {**feed, a1: fake})
    np.testing.assert_allclose(dW2, feed[H].T @ fake, rtol=1e-5, atol=1e-5)
    assert "relu" not in calls and "dense" not in calls  # the forward is not evaluated at all
    assert X not in walk_ops(grads[2], [a1])


def test_evaluate_checks_fed_computed_tensors():
    (X, W, H), Y, grads = _softmax_grad()
    feed = {X: rand(X), W: rand(W), H: rand(H)}
    mx = pa.residuals(grads, [H])[1]
    with pytest.raises(pa.EvaluationError, match="'softmax_max_stopgrad' has shape"):
        pa.evaluate(grads, {**feed, mx: np.zeros((3,), "float32")})
    with pytest.raises(pa.EvaluationError, match="'softmax_max_stopgrad' has dtype float32"):
        pa.evaluate(grads, {**feed, mx: np.zeros(mx.shape, "float64")})
    with pytest.raises(pa.EvaluationError, match="'softmax' is both an output and fed"):
        pa.evaluate(Y, {X: feed[X], W: feed[W], Y: np.zeros(Y.shape, "float32")})
    y = pa.evaluate(Y, {X: feed[X], W: feed[W], grads[0]: np.zeros(grads[0].shape, "float32")})  # unused: fine
    assert y.shape == Y.shape


def test_residuals_save_reductions_recomputes_elementwise_and_pads():
    """JAX's dots_saveable: a reduction-free residual gives way to the computed values it reads."""
    X = pa.placeholder((4,), name="X")
    H = pa.placeholder((4,), name="H")
    A = pa.compute((4,), lambda i: X[i] * 2.0, name="A")
    B = pa.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = pa.compute((4,), lambda i: H[i] * B[i] + A[i], name="C")
    assert pa.residuals([C], [H], save="reductions") == []  # an elementwise chain: recomputed
    ins, (z1, a1), grads = _mlp_grad()
    res = pa.residuals(grads, [ins[-1]], save="reductions")
    assert _names(res) == ["dense_matmul"] and res[0] is z1.op.input_tensors[0]  # the matmul, not relu's
    Xc = pa.placeholder((2, 3, 6, 6), name="Xc")
    Wc = pa.placeholder((4, 3, 3, 3), name="Wc")
    Yc = pa.nn.relu(pa.nn.conv2d(Xc, Wc, padding=1))
    Hc = pa.placeholder(Yc.shape, name="H")
    grads = pa.differentiate(Yc, [Xc, Wc], Hc)
    assert "conv2d_pad" in _names(pa.residuals(grads, [Hc]))
    assert _names(pa.residuals(grads, [Hc], save="reductions")) == ["conv2d"]  # the pad is recomputed
    feed = {Xc: np.random.default_rng(0).standard_normal(Xc.shape).astype(np.float32),
            Wc: np.random.default_rng(1).standard_normal(Wc.shape).astype(np.float32),
            Hc: np.random.default_rng(2).standard_normal(Yc.shape).astype(np.float32)}
    res = pa.residuals(grads, [Hc], save="reductions")
    saved = pa.evaluate(res, feed)
    for g, r in zip(pa.evaluate(grads, {**feed, **dict(zip(res, saved))}), pa.evaluate(grads, feed)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    with pytest.raises(pa.PolyadError, match="save must be one of"):
        pa.residuals(grads, [Hc], save="dots")


def test_cut_of_the_same_tensors_is_the_same_graph():
    """pa.vjp's backward is its gradient fed the forward's residuals: each warm build cuts the same graph, and
    the same new graph lets every per-stage memo (stage keys, the program key's text) hit.  Another feed, or
    another graph, is cut anew; the lists returned are the caller's own."""
    (X, W, H), Y, grads = _softmax_grad()
    res = pa.residuals(grads, [H])
    outs, phs = cut(grads, [X, W, H] + res)
    outs2, phs2 = cut(list(grads), [X, W, H] + list(res))
    assert all(a is b for a, b in zip(outs + phs, outs2 + phs2))
    outs2.append(X)
    phs2.clear()
    outs3, phs3 = cut(grads, [X, W, H] + res)
    assert len(outs3) == len(outs) and len(phs3) == len(phs)
    other, _ = cut(grads, [X, W, H] + res[:1])
    assert not any(a is b for a, b in zip(outs, other))
    (X2, W2, H2), _, grads2 = _softmax_grad()
    again, _ = cut(grads2, [X2, W2, H2] + pa.residuals(grads2, [H2]))
    assert not any(a is b for a, b in zip(outs, again))
