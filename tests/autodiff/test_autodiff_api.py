"""pa.differentiate / pa.jacobian: the result object, heads, errors, custom gradients, sharing."""

import time

import numpy as np
import pytest

import polyad as pa
from polyad.autodiff import diff_building_block

from autodiff_helpers import check_grad, graph_size, numeric_grad

F = "float64"


def _dense():
    X = pa.placeholder((3, 4), F, "X")
    W = pa.placeholder((2, 4), F, "W")
    k = pa.reduce_axis((0, 4), "k")
    Y = pa.compute((3, 2), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="Y")
    return X, W, Y


def test_dense_head_and_identity_head():
    X, W, Y = _dense()
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    H = pa.placeholder((5, 3, 2), F, "H")  # a prefix of 5 and values that are not all ones
    h = rng.normal(size=(5, 3, 2))
    dX, dW = pa.differentiate(Y, [X, W], H)
    assert dX.shape == (5, 3, 4) and dW.shape == (5, 2, 4)
    gx, gw = pa.evaluate([dX, dW], {X: x, W: w, H: h})
    np.testing.assert_allclose(gx, np.einsum("pij,jk->pik", h, w))
    np.testing.assert_allclose(gw, np.einsum("pij,ik->pjk", h, x))
    check_grad(Y, [X, W], {X: x, W: w, H: h}, head=H)
    check_grad(Y, [X, W], {X: x, W: w})  # full Jacobians, shape (3, 2) + input shape


def test_result_is_list_like_in_input_order_and_inputs_default_to_placeholders():
    X, W, Y = _dense()
    res = pa.differentiate(Y)
    assert len(res) == 2 and [g.shape for g in res] == [(3, 2, 3, 4), (3, 2, 2, 4)]
    res2 = pa.differentiate(Y, [W, X])
    assert [g.shape for g in res2] == [(3, 2, 2, 4), (3, 2, 3, 4)]
    (dW,) = pa.differentiate(Y, W)  # a single tensor is a list of one
    assert dW.shape == (3, 2, 2, 4)


def test_adjoints_and_summands_of_a_tensor_with_several_consumers():
    # X feeds A twice (X[i] and X[9-i]) and C directly; A feeds B
    X = pa.placeholder((10,), F, "X")
    A = pa.compute((10,), lambda i: X[i] + X[9 - i], name="A")
    B = pa.compute((10,), lambda i: A[i] * A[i], name="B")
    C = pa.compute((10,), lambda i: B[i] + pa.sin(X[i]) + 0.5 * A[9 - i], name="C")
    H = pa.placeholder((10,), F, "H")
    res = pa.differentiate(C, [X], H)
    assert set(res.adjoints) == {C, B, A, X}
    assert res.adjoints[C] is H
    assert set(res.adjoint_summands[X]) == {A, C}
    assert set(res.adjoint_summands[A]) == {B, C}
    rng = np.random.default_rng(1)
    feed = {X: rng.normal(size=10), H: rng.normal(size=10)}
    for t in (X, A):
        parts = pa.evaluate(list(res.adjoint_summands[t].values()), feed)
        np.testing.assert_allclose(sum(parts), pa.evaluate(res.adjoints[t], feed))
    check_grad(C, [X], feed, head=H)
    # d(A)/dX through the head: dX[j] = H[j] + H[9-j]
    dX_A = res.adjoint_summands[X][A]
    hA = pa.evaluate(res.adjoints[A], feed)
    gA = pa.evaluate(diff_building_block(A, X, res.adjoints[A]), feed)
    np.testing.assert_allclose(pa.evaluate(dX_A, feed), hA + hA[::-1])
    np.testing.assert_allclose(gA, hA + hA[::-1])


def test_input_the_output_does_not_depend_on_gets_zeros():
    X, W, Y = _dense()
    Z = pa.placeholder((7,), F, "Z")
    I = pa.placeholder((3, 4), "int32", "I")
    H = pa.placeholder((2, 3, 2), F, "H")
    dZ, dX, dI = pa.differentiate(Y, [Z, X, I], H)
    assert dZ.shape == (2, 7) and dI.shape == (2, 3, 4) and dI.dtype == "int32"
    rng = np.random.default_rng(2)
    gz, gi = pa.evaluate([dZ, dI], {Z: rng.normal(size=7), I: np.ones((3, 4), "int32")})
    assert not gz.any() and not gi.any()
    assert Z not in pa.differentiate(Y, [Z, X], H).adjoints


def test_integer_input_used_in_the_body_gets_zeros():
    X = pa.placeholder((4,), F, "X")
    I = pa.placeholder((4,), "int32", "I")
    Y = pa.compute((4,), lambda i: X[i] * pa.cast(I[i], F), name="Y")
    dX, dI = pa.differentiate(Y, [X, I])
    feed = {X: np.arange(4.0), I: np.arange(4, dtype="int32")}
    np.testing.assert_array_equal(pa.evaluate(dI, feed), np.zeros((4, 4), "int32"))
    np.testing.assert_array_equal(pa.evaluate(dX, feed), np.diag(np.arange(4.0)))


def test_errors_name_tensors_and_shapes():
    X, W, Y = _dense()
    Hbad = pa.placeholder((3, 3), F, "Hbad")
    with pytest.raises(pa.ShapeError, match=r"Hbad.*\(3, 3\).*\(3, 2\)"):
        pa.differentiate(Y, [X], Hbad)
    H32 = pa.placeholder((3, 2), "float32", "H32")
    with pytest.raises(pa.DtypeError, match="H32"):
        pa.differentiate(Y, [X], H32)
    with pytest.raises(pa.PolyadError, match="not a tensor"):
        pa.differentiate(Y, [X, "W"])
    with pytest.raises(pa.PolyadError, match="must be a tensor"):
        pa.differentiate(Y, [X], head=np.ones((3, 2)))
    I = pa.placeholder((3,), "int32", "I")
    Yi = pa.compute((3,), lambda i: I[i] * 2, name="Yi")
    with pytest.raises(pa.DtypeError, match=r"Yi.*int32\[3\]"):
        pa.differentiate(Yi, [I])
    with pytest.raises(pa.PolyadError, match="output must be a tensor"):
        pa.differentiate(np.ones(3))
    Z = pa.compute((3, 2), lambda i, j: Y[i, j] * 2.0, name="Z")
    with pytest.raises(pa.PolyadError, match=r"'X'.*not an immediate input of 'Z'"):
        pa.jacobian(Z, X)
    with pytest.raises(pa.PolyadError, match="override"):
        pa.differentiate(Y, [X], override={Y: [X]})

    def bad_fdiff(out, inp, head):
        return pa.compute((1,), lambda i: pa.const(0.0, F), name="wrong")

    with pytest.raises(pa.ShapeError, match=r"'Y' w.r.t. 'X' has shape \(1,\)"):
        pa.differentiate(Y, [X], fdiff=bad_fdiff)


def test_jacobian_of_immediate_input_matches_finite_differences():
    X, W, Y = _dense()
    rng = np.random.default_rng(3)
    feed = {X: rng.normal(size=(3, 4)), W: rng.normal(size=(2, 4))}
    for opt in (True, False):
        J = pa.jacobian(Y, W, optimize=opt)
        assert J.shape == (3, 2, 2, 4)
        np.testing.assert_allclose(pa.evaluate(J, feed), numeric_grad(Y, W, feed), atol=1e-7)


def test_fdiff_blocks_the_gradient_to_one_input():
    X = pa.placeholder((4,), F, "X")
    W = pa.placeholder((4,), F, "W")
    A = pa.compute((4,), lambda i: X[i] * W[i], name="A")
    B = pa.compute((4,), lambda i: pa.exp(A[i]) + W[i], name="B")
    calls = []

    def fdiff(out, inp, head):
        calls.append((out.name, inp.name))
        if inp is W:
            return pa.compute(head.shape[:-1] + W.shape, lambda *i: pa.const(0.0, F), name="blocked")
        return diff_building_block(out, inp, head)

    H = pa.placeholder((4,), F, "H")
    dX, dW = pa.differentiate(B, [X, W], H, fdiff=fdiff)
    assert sorted(calls) == [("A", "W"), ("A", "X"), ("B", "A"), ("B", "W")]
    rng = np.random.default_rng(4)
    x, w, h = rng.normal(size=(3, 4))
    gx, gw = pa.evaluate([dX, dW], {X: x, W: w, H: h})
    np.testing.assert_allclose(gx, h * np.exp(x * w) * w)
    assert not gw.any()


def test_override_cuts_edges_and_blocks_an_input():
    X = pa.placeholder((4,), F, "X")
    W = pa.placeholder((4,), F, "W")
    A = pa.compute((4,), lambda i: X[i] * W[i], name="A")
    B = pa.compute((4,), lambda i: A[i] * A[i], name="B")

    def only_x(out, inputs, head):  # the gradient of A w.r.t. X only: W is treated as a constant
        (x,) = inputs
        return [pa.compute(head.shape, lambda *i: head[i] * W[i[-1:]], name="dA_dX")]

    H = pa.placeholder((4,), F, "H")
    res = pa.differentiate(B, [X, W], H, override={A: ([X], only_x)})
    rng = np.random.default_rng(5)
    x, w, h = rng.normal(size=(3, 4))
    gx, gw = pa.evaluate(list(res), {X: x, W: w, H: h})
    np.testing.assert_allclose(gx, h * 2 * x * w * w)
    assert not gw.any()
    assert W not in res.adjoints


def test_override_with_a_hand_written_flatten_gradient():
    X = pa.placeholder((2, 3, 4), F, "X")
    Fl = pa.compute((2, 12), lambda n, m: X[n, m // 4, m % 4], name="flatten")
    V = pa.placeholder((12,), F, "V")
    k = pa.reduce_axis((0, 12), "k")
    L = pa.compute((2,), lambda n: pa.sum(pa.tanh(Fl[n, k]) * V[k], axis=k), name="L")
    used = []

    def flatten_grad(out, inputs, head):
        used.append(out)
        p = head.ndim - 2
        return [pa.compute(head.shape[:p] + X.shape,
                           lambda *i: head[i[:p] + (i[p], i[p + 1] * 4 + i[p + 2])], name="dflatten")]

    H = pa.placeholder((3, 2), F, "H")
    rng = np.random.default_rng(6)
    feed = {X: rng.normal(size=(2, 3, 4)), V: rng.normal(size=12), H: rng.normal(size=(3, 2))}
    check_grad(L, [X, V], feed, head=H, override={Fl: ([X], flatten_grad)})
    assert used == [Fl, Fl]
    custom = pa.differentiate(L, [X], H, override={Fl: ([X], flatten_grad)})
    default = pa.differentiate(L, [X], H)
    assert custom.adjoint_summands[X][Fl].op.name == "dflatten"
    np.testing.assert_allclose(*pa.evaluate([custom[0], default[0]], feed))


def test_override_may_name_a_non_immediate_dependency():
    X = pa.placeholder((5,), F, "X")
    Z = pa.compute((5,), lambda i: X[i] * 2.0, name="Z")
    Y = pa.compute((5,), lambda i: pa.exp(Z[i]), name="Y")

    def fn(out, inputs, head):
        return [pa.compute(head.shape, lambda *i: head[i] * 2.0 * pa.exp(2.0 * X[i[-1:]]), name="dY_dX")]

    rng = np.random.default_rng(7)
    feed = {X: rng.normal(size=5)}
    res = check_grad(Y, [X], feed, override={Y: ([X], fn)})
    assert Z not in res[0].adjoints


def test_the_output_itself_as_input_and_the_head_as_its_gradient():
    X, W, Y = _dense()
    H = pa.placeholder((3, 2), F, "H")
    dY, dX = pa.differentiate(Y, [Y, X], H)
    assert dY is H


def _chain(n, size=3):
    x = pa.placeholder((size,), F, "x")
    y = x
    for level in range(n):
        prev = y
        y = pa.compute((size,), lambda i: x[i] * prev[i], name=f"y{level}")
    return x, y


def test_chain_gradient_is_correct():
    x, y = _chain(6)
    H = pa.placeholder((3,), F, "H")
    xv = np.array([0.5, -1.2, 1.1])
    check_grad(y, [x], {x: xv, H: np.array([1.0, 2.0, -0.5])}, head=H)
    (g,) = pa.differentiate(y, [x], H)
    np.testing.assert_allclose(pa.evaluate(g, {x: xv, H: np.ones(3)}), 7 * xv ** 6)


@pytest.mark.parametrize("optimize", [True, False])
def test_chain_gradient_grows_linearly(optimize):
    sizes, times = {}, {}
    for n in (50, 100, 200, 400):
        x, y = _chain(n)
        H = pa.placeholder((3,), F, "H")
        t0 = time.perf_counter()
        (g,) = pa.differentiate(y, [x], H, optimize=optimize)
        times[n] = time.perf_counter() - t0
        sizes[n] = graph_size([g]) - graph_size([y])  # the nodes the gradient adds
    for n in (100, 200, 400):
        ratio = sizes[n] / sizes[n // 2]
        assert 1.8 < ratio < 2.2, sizes
    assert sizes[400] < 40 * 400, sizes
    assert times[400] < 30 * times[50] + 0.5, times  # linear, with room for noise


def test_an_intermediate_tensor_as_input():
    X = pa.placeholder((4,), F, "X")
    A = pa.compute((4,), lambda i: pa.exp(X[i]), name="A")
    B = pa.compute((4,), lambda i: A[i] * X[i], name="B")
    H = pa.placeholder((4,), F, "H")
    dA, dX = pa.differentiate(B, [A, X], H)
    rng = np.random.default_rng(8)
    x, h = rng.normal(size=(2, 4))
    ga, gx = pa.evaluate([dA, dX], {X: x, H: h})
    np.testing.assert_allclose(ga, h * x)
    np.testing.assert_allclose(gx, h * np.exp(x) * x + h * np.exp(x))


def _doc_block(after):
    """The first ``` block after the line containing ``after`` in docs/autodiff.md."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "autodiff.md").read_text()
    rest = text[text.index(after):]
    rest = rest[rest.index("```") + 3:]  # past the end of the code block that contains ``after``
    start = rest.index("```\n") + 4
    return rest[start:rest.index("```", start)].strip()


def test_the_documented_examples_print_what_the_docs_say():
    X = pa.placeholder((32, 100), name="X")
    W = pa.placeholder((10, 100), name="W")
    k = pa.reduce_axis((0, 100), name="k")
    T = pa.compute((32, 10), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    H = pa.placeholder((32, 10), name="H")
    dX, dW = pa.differentiate(T, [X, W], H)
    assert pa.show(dW) == _doc_block("print(pa.show(dW))")

    X = pa.placeholder((10,), name="X")
    A = pa.compute((10,), lambda i: X[i] + X[9 - i], name="A")
    H = pa.placeholder((10,), name="H")
    res = pa.differentiate(A, [X], H, optimize=False)
    assert _doc_block("res = pa.differentiate(A, [X], H, optimize=False)") in pa.show(res[0])
    feed = {X: np.arange(10.0, dtype="float32"), H: np.arange(10.0, dtype="float32") ** 2}
    opt = pa.differentiate(A, [X], H)
    assert list(opt.adjoint_summands[X]) == [A]
    h = feed[H]
    for r in (res, opt):
        np.testing.assert_allclose(pa.evaluate(r[0], feed), h + h[::-1])


def test_float32_graphs_give_float32_gradients():
    X = pa.placeholder((3, 4), "float32", "X")
    W = pa.placeholder((2, 4), "float32", "W")
    k = pa.reduce_axis((0, 4), "k")
    D = pa.compute((3, 2), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="D")
    Yt = pa.compute((3, 2), lambda i, j: pa.tanh(D[i, j]), name="Yt")
    Z = pa.compute((3, 2), lambda i, j: pa.sigmoid(Yt[i, j]), name="Z")
    H = pa.placeholder((3, 2), "float32", "H")
    rng = np.random.default_rng(9)
    x, w, h = rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), rng.normal(size=(3, 2))
    for opt in (True, False):
        dX, dW = pa.differentiate(Z, [X, W], H, optimize=opt)
        assert dX.dtype == dW.dtype == "float32"
        gx, gw = pa.evaluate([dX, dW], {X: x.astype("float32"), W: w.astype("float32"), H: h.astype("float32")})
        t = np.tanh(x @ w.T)
        s = 1 / (1 + np.exp(-t))
        d = h * s * (1 - s) * (1 - t * t)
        np.testing.assert_allclose(gx, d @ w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gw, d.T @ x, rtol=1e-5, atol=1e-6)


def test_a_stage_without_derivative_raises_unless_overridden():
    from dataclasses import dataclass
    from functools import cached_property

    from polyad.te.tensor import Operation, Tensor

    X = pa.placeholder((3,), F, "X")

    @dataclass(frozen=True, eq=False)
    class Opaque(Operation):  # a stage polyad cannot look into
        name: str
        shape: tuple
        input_tensors: tuple

        def output_dtype(self, i):
            return F

        def evaluate_numpy(self, values):
            return [values[id(X)] * 3.0]

        @cached_property
        def _outputs(self):
            return (Tensor(self, 0),)

        __hash__ = object.__hash__

    T = Opaque("opaque", (3,), (X,)).output(0)
    Y = pa.compute((3,), lambda i: T[i] * T[i], name="Y")
    H = pa.placeholder((3,), F, "H")
    with pytest.raises(pa.NotDifferentiableError, match="'opaque'"):
        pa.differentiate(Y, [X], H)

    def opaque_grad(out, inputs, head):
        return [pa.compute(head.shape, lambda *i: head[i] * 3.0, name="d_opaque")]

    check_grad(Y, [X], {X: np.array([0.5, -1.0, 2.0]), H: np.array([1.0, 2.0, 3.0])}, head=H,
               override={T: ([X], opaque_grad)})


def test_override_returning_none_gives_no_contribution():
    X = pa.placeholder((3,), F, "X")
    A = pa.compute((3,), lambda i: X[i] * 2.0, name="A")
    B = pa.compute((3,), lambda i: A[i] + X[i], name="B")
    res = pa.differentiate(B, [X], override={B: ([A, X], lambda out, ins, head: [None, head])})
    assert A not in res.adjoints
    np.testing.assert_array_equal(pa.evaluate(res[0], {X: np.ones(3)}), np.eye(3))
    with pytest.raises(pa.PolyadError, match=r"override of 'B' returned 0.0: expected a list of adjoint tensors"):
        pa.differentiate(B, [X], override={B: ([A, X], lambda out, ins, head: 0.0)})


def test_optimize_applies_the_simplifier_it_is_given():
    from polyad import autodiff
    from polyad.poly import PolyOp

    X = pa.placeholder((2, 3, 4), name="X")
    Y = pa.nn.flatten(X)
    H = pa.placeholder(Y.shape, name="H")
    feed = {X: np.zeros((2, 3, 4), "float32"), H: np.arange(24.0, dtype="float32").reshape(2, 12)}
    (g,) = pa.differentiate(Y, [X], H)
    assert isinstance(g.op, PolyOp)  # pa.differentiate passes polyad.poly.simplify
    np.testing.assert_array_equal(pa.evaluate(g, feed), feed[H].reshape(2, 3, 4))
    seen = []
    (g,) = autodiff.differentiate(Y, [X], H, simplifier=lambda ts: seen.append(len(ts)) or ts)
    assert seen and not isinstance(g.op, PolyOp)
    (g,) = autodiff.differentiate(Y, [X], H)  # autodiff alone: no simplifier, nothing installed globally
    assert not isinstance(g.op, PolyOp)
    np.testing.assert_array_equal(pa.evaluate(g, feed), feed[H].reshape(2, 3, 4))
    (g,) = autodiff.differentiate(Y, [X], H, optimize=False, simplifier=lambda ts: pytest.fail("ran"))
    assert isinstance(pa.differentiate(Y, [X], H)[0].op, PolyOp)  # the calls above left pa's alone
    with pytest.raises(pa.PolyadError, match="simplifier must be callable"):
        autodiff.differentiate(Y, [X], H, simplifier=42)


def test_gradient_of_a_simplified_stage_passes_the_simplifier_on():
    # a PolyOp's reverse pass differentiates its plain-compute form: with the simplifier it was given
    from polyad import autodiff
    from polyad.poly import PolyOp

    X = pa.placeholder((2, 3, 4), name="X")
    H = pa.placeholder((2, 12), name="H")
    (g,) = pa.differentiate(pa.nn.flatten(X), [X], H)
    assert isinstance(g.op, PolyOp)
    H2 = pa.placeholder(g.shape, name="H2")
    seen = []
    (gg,) = autodiff.differentiate(g, [H], H2, simplifier=lambda ts: seen.append(len(ts)) or ts)
    assert len(seen) == 2  # the stage's own reverse pass, then the outer one
    (gg2,) = pa.differentiate(g, [H], H2)
    h2 = np.arange(24.0, dtype="float32").reshape(2, 3, 4)
    for r in (gg, gg2):
        np.testing.assert_array_equal(pa.evaluate(r, {H2: h2, X: np.zeros((2, 3, 4), "float32")}), h2.reshape(2, 12))


def test_stop_gradient_is_a_constant_to_reverse_mode():
    # d/dx [x * sg(x)] = sg(x) = x, not 2x: the second factor is a constant (JAX's lax.stop_gradient)
    X = pa.placeholder((5,), F, "X")
    S = pa.stop_gradient(X)
    Y = pa.compute((5,), lambda i: X[i] * S[i], name="Y")
    x = np.random.default_rng(0).normal(size=5)
    H = pa.placeholder((5,), F, "H")
    h = np.random.default_rng(1).normal(size=5)
    np.testing.assert_allclose(pa.evaluate(S, {X: x}), x)  # its values pass through
    (dX,) = pa.differentiate(Y, [X], H)
    np.testing.assert_allclose(pa.evaluate(dX, {X: x, H: h}), h * x)
    # an input reached only through it gets zeros; so does the Jacobian of the stage itself
    Z = pa.compute((5,), lambda i: S[i] * 2.0, name="Z")
    assert not pa.evaluate(pa.differentiate(Z, [X], H)[0], {X: x, H: h}).any()
    assert pa.jacobian(S, X).shape == (5, 5) and not pa.evaluate(pa.jacobian(S, X), {X: x}).any()
    with pytest.raises(pa.PolyadError, match="stop_gradient: expected a tensor"):
        pa.stop_gradient(3.0)


def test_softmax_and_cross_entropy_gradients_route_nothing_through_the_row_max():
    # the max only keeps exp in range: its derivative terms cancel, so the backward has no argmax
    # routing and no d_*_max stage (the gradients' values are checked in test_autodiff_ops)
    X = pa.placeholder((3, 4), F, "X")
    H = pa.placeholder((3, 4), F, "H")
    labels = pa.placeholder((3,), "int32", "labels")
    graphs = [pa.differentiate(pa.nn.softmax(X), [X], H), pa.differentiate(pa.nn.log_softmax(X), [X], H),
              pa.differentiate(pa.nn.cross_entropy(X, labels), [X])]
    for grads in graphs:
        names = {op.name for op in pa.te.walk_ops(list(grads))}
        assert not {n for n in names if "argmax" in n or n.startswith("d_") and n.endswith("_max")}, names


def test_a_body_hundreds_of_selects_deep_differentiates():
    # the simplifier's peeling recursed once a node: a RecursionError at 150 selects
    X = pa.placeholder((8,), "float64", name="X")

    def body(i):
        e = X[i]
        for s in range(300):
            e = pa.tanh(e) * 0.9 + 0.01 if s % 2 else pa.select(e > 0, e, e * 0.5)
        return e

    Y = pa.compute((8,), body, name="D")
    (dX,) = pa.differentiate(pa.ops.sum(Y), [X])
    x = np.linspace(-1, 1, 8)
    eps = 1e-6
    fd = (pa.evaluate(Y, {X: x + eps}) - pa.evaluate(Y, {X: x - eps})) / (2 * eps)
    np.testing.assert_allclose(pa.evaluate(dX, {X: x}), fd, rtol=1e-5, atol=1e-8)


def test_a_long_product_differentiates_in_linear_work_and_exactly_with_zeros():
    # exclusive products cost the window's points for each point (a product over 784 points: 76 ms against a
    # 0.2 ms forward); a long product divides the product of its nonzero points, counting the zeros
    X = pa.placeholder((4, 50), "float64", name="X")
    H = pa.placeholder((4,), "float64", name="H")
    Y = pa.ops.prod(X, axis=1)
    (dX,) = pa.differentiate(Y, [X], H)
    names = {op.name for op in pa.te.walk_ops(dX)}
    assert "prod_nzprod" in names and "prod_zeros" in names and "prod_excl" not in names
    rng = np.random.default_rng(18)
    x = rng.uniform(0.5, 1.5, (4, 50))
    x[1, 7] = 0.0  # one zero: only it has a gradient in its row
    x[2, 3] = x[2, 9] = 0.0  # two: no gradient in the row
    h = rng.standard_normal(4)
    want = np.empty_like(x)
    for i in range(4):
        for j in range(50):
            want[i, j] = h[i] * np.prod(np.delete(x[i], j))
    np.testing.assert_allclose(pa.evaluate(dX, {X: x, H: h}), want, rtol=1e-12, atol=1e-300)
    assert not pa.evaluate(dX, {X: x, H: h})[2].any()
    short = pa.ops.prod(pa.placeholder((4, 8), "float64", name="S"), axis=1)  # exact exclusive products still
    assert "prod_excl" in {op.name for op in pa.te.walk_ops(pa.differentiate(short, [short.op.input_tensors[0]])[0])}
