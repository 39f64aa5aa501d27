"""The cases of TVM's former te.gradient test suite, on hand-made computes (float64, tiny shapes)."""

import numpy as np
import pytest

import polyad as pa

from autodiff_helpers import check_grad

F = "float64"
N = 5


@pytest.fixture
def A0():
    return pa.placeholder((N, N), F, "A0")


def _feed(rng, *tensors, lo=-1.0, hi=1.0):
    return {t: rng.uniform(lo, hi, t.shape) for t in tensors}


def test_identity(A0):
    A = pa.compute((N, N), lambda i, j: A0[i, j], name="A")
    check_grad(A, [A0], _feed(np.random.default_rng(0), A0))


def test_transposed_access(A0):
    A = pa.compute((N, N), lambda i, j: A0[i, j] + A0[j, i], name="A")
    check_grad(A, [A0], _feed(np.random.default_rng(1), A0))
    (g,) = pa.differentiate(A, [A0], pa.placeholder((N, N), F, "H"))
    assert "select" not in pa.show(g)  # both loads are permutations: substituted directly


def test_floor_and_log(A0):
    A = pa.compute((N, N), lambda i, j: pa.floor(A0[i, j]) + pa.log(A0[i, j]) * A0[j, i], name="A")
    check_grad(A, [A0], _feed(np.random.default_rng(2), A0, lo=0.2, hi=0.8))


def test_sum_of_products_of_transposes(A0):
    k = pa.reduce_axis((0, N), "k")
    B = pa.compute((N,), lambda i: pa.sum(A0[i, k] * A0[k, i] + 5.0, axis=k), name="B")
    check_grad(B, [A0], _feed(np.random.default_rng(3), A0))


def test_reduction_with_an_unused_output_axis(A0):
    k = pa.reduce_axis((0, N), "k")
    B = pa.compute((N, 3), lambda i, j: pa.sum(A0[i, k] * A0[k, k], axis=k), name="B")
    H = pa.placeholder((N, 3), F, "H")
    check_grad(B, [A0], {**_feed(np.random.default_rng(4), A0), H: np.random.default_rng(5).normal(size=(N, 3))}, head=H)


def test_max_reduction(A0):
    k = pa.reduce_axis((0, N), "k")
    B = pa.compute((N,), lambda i: pa.max(A0[i, k] * A0[k, i] + 5.0, axis=k), name="B")
    check_grad(B, [A0], _feed(np.random.default_rng(6), A0))
    (g,) = pa.differentiate(B, [A0], pa.placeholder((N,), F, "H"))
    assert "argmax" in pa.show(g)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_extremum_ties_go_to_the_first_in_iteration_order(kind):
    X = pa.placeholder((2, 2, 3), F, "X")
    r = pa.reduce_axis((0, 2), "r")
    s = pa.reduce_axis((0, 3), "s")
    red = pa.max if kind == "max" else pa.min
    Y = pa.compute((2,), lambda n: red(X[n, r, s] * 2.0, axis=[r, s]), name="Y")
    H = pa.placeholder((2,), F, "H")
    x = np.zeros((2, 2, 3))
    x[0] = [[1, 3, 3], [0, 3, 1]]  # three ties at 3: (0, 1) is first
    x[1] = [[0, 0, 0], [0, 0, 0]]  # all equal: (0, 0) is first
    if kind == "min":
        x = -x
    for opt in (True, False):
        (g,) = pa.differentiate(Y, [X], H, optimize=opt)
        got = pa.evaluate(g, {X: x, H: np.array([1.0, 10.0])})
        want = np.zeros((2, 2, 3))
        want[0, 0, 1] = 2.0
        want[1, 0, 0] = 20.0
        np.testing.assert_array_equal(got, want)


def test_max_reduction_with_where_and_offset_axis():
    X = pa.placeholder((6,), F, "X")
    r = pa.reduce_axis((1, 5), "r")
    Y = pa.compute((3,), lambda i: pa.max(X[r] * pa.cast(i + 1, F), axis=r, where=r > i), name="Y")
    check_grad(Y, [X], _feed(np.random.default_rng(7), X))


def test_diagonal_read_with_min_in_index(A0):
    k = pa.reduce_axis((0, N), "k")
    B = pa.compute((N, N), lambda i, j: pa.sum(A0[k, k] - A0[pa.min(j + k, N - 1), j] * A0[i, k], axis=k), name="B")
    H = pa.placeholder((N, N), F, "H")
    rng = np.random.default_rng(8)
    check_grad(B, [A0], {**_feed(rng, A0), H: rng.normal(size=(N, N))}, head=H)


def test_prod_comm_reducer(A0):
    prod = pa.comm_reducer(lambda x, y: x * y, lambda t: pa.const(1, t), name="prod")
    k = pa.reduce_axis((0, N), "k")
    B = pa.compute((N, N), lambda i, j: prod(A0[i, k] + A0[k, i], axis=k), name="B")
    H = pa.placeholder((N, N), F, "H")
    rng = np.random.default_rng(9)
    check_grad(B, [A0], {**_feed(rng, A0), H: rng.normal(size=(N, N))}, head=H)


def test_prod_is_exact_with_zero_elements():
    X = pa.placeholder((2, 4), F, "X")
    k = pa.reduce_axis((0, 4), "k")
    Y = pa.compute((2,), lambda i: pa.prod(X[i, k], axis=k), name="Y")
    x = np.array([[2.0, 0.0, 3.0, 5.0], [0.0, 4.0, 0.0, 1.5]])  # one zero; two zeros
    H = pa.placeholder((2,), F, "H")
    for opt in (True, False):
        (g,) = pa.differentiate(Y, [X], H, optimize=opt)
        got = pa.evaluate(g, {X: x, H: np.ones(2)})
        np.testing.assert_array_equal(got, [[0.0, 30.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    check_grad(Y, [X], {X: x + 0.0})


def test_prod_with_where():
    X = pa.placeholder((4,), F, "X")
    k = pa.reduce_axis((0, 4), "k")
    Y = pa.compute((4,), lambda i: pa.prod(X[k], axis=k, where=k != i), name="Y")
    check_grad(Y, [X], _feed(np.random.default_rng(10), X))


def test_reversed_index():
    X = pa.placeholder((10,), F, "X")
    A = pa.compute((10,), lambda i: X[i] + X[9 - i], name="A")
    B = pa.compute((10,), lambda i: X[i] * X[9 - i], name="B")
    rng = np.random.default_rng(11)
    check_grad(A, [X], _feed(rng, X))
    check_grad(B, [X], _feed(rng, X))


def test_sum_with_where_triangle():
    X = pa.placeholder((4, 4), F, "X")
    k = pa.reduce_axis((0, 4), "k")
    Y = pa.compute((4,), lambda i: pa.sum(pa.exp(X[i, k]), axis=k, where=k <= i), name="Y")
    check_grad(Y, [X], _feed(np.random.default_rng(12), X))


def test_padding_select_guards_out_of_range_reads():
    X = pa.placeholder((6,), F, "X")
    Y = pa.compute((6,), lambda i: pa.select(i >= 1, X[i - 1], 0.0) * 2.0 + pa.select(i < 5, X[i + 1] * X[i], 0.0),
                   name="Y")
    check_grad(Y, [X], _feed(np.random.default_rng(13), X))


def test_general_comm_reducer_logsumexp():
    lse = pa.comm_reducer(lambda x, y: pa.log(pa.exp(x) + pa.exp(y)), lambda t: pa.const(-np.inf, t), name="lse")
    X = pa.placeholder((3, 4), F, "X")
    k = pa.reduce_axis((0, 4), "k")
    Y = pa.compute((3,), lambda i: lse(X[i, k] * 2.0, axis=k), name="Y")
    rng = np.random.default_rng(14)
    H = pa.placeholder((2, 3), F, "H")
    check_grad(Y, [X], {**_feed(rng, X), H: rng.normal(size=(2, 3))}, head=H)
    check_grad(Y, [X], _feed(rng, X))


def test_a_stable_logsumexp_reducer_differentiates():
    # max(x, y) + log1p(exp(-|x - y|)) is lawful, but its (value, derivative) pairs are not associative at ties
    # (max sends a tie's derivative to one operand): the derived reducer is not held to the laws
    slse = pa.comm_reducer(lambda x, y: pa.max(x, y) + pa.log1p(pa.exp(-pa.abs(x - y))),
                           lambda t: pa.const(-1e300, t), name="slse")
    X = pa.placeholder((3, 5), F, "X")
    k = pa.reduce_axis((0, 5), "k")
    Y = pa.compute((3,), lambda i: slse(X[i, k], axis=k), name="Y")
    x = np.random.default_rng(17).normal(size=(3, 5))
    H = pa.placeholder((3,), F, "H")
    dX, = pa.differentiate(Y, [X], H)
    e = np.exp(x)
    np.testing.assert_allclose(pa.evaluate(dX, {X: x, H: np.ones(3)}), e / e.sum(1, keepdims=True), rtol=1e-12)
    check_grad(Y, [X], {X: x})


def test_general_tuple_reducer_elementary_symmetric():
    # (e1, e2) of the source values: e1 = sum x, e2 = sum_{a<b} x_a x_b
    esym = pa.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1] + x[0] * y[0]),
                           lambda t0, t1: (pa.const(0, t0), pa.const(0, t1)), name="esym")
    X = pa.placeholder((2, 4), F, "X")
    k = pa.reduce_axis((0, 4), "k")
    E1, E2 = pa.compute((2,), lambda i: esym((X[i, k], pa.const(0.0, F)), axis=k), name="E")
    rng = np.random.default_rng(15)
    feed = _feed(rng, X)
    x = feed[X]
    np.testing.assert_allclose(pa.evaluate(E2, feed), (x.sum(1) ** 2 - (x ** 2).sum(1)) / 2)
    check_grad(E2, [X], feed)
    check_grad(E1, [X], feed)
    L = pa.compute((2,), lambda i: E1[i] * E2[i], name="L")  # both outputs of one tuple op on the path
    check_grad(L, [X], feed)


def test_tuple_argmax_reducer_value_output():
    def fcombine(x, y):
        take = (y[1] > x[1]) | ((y[1] == x[1]) & (y[0] < x[0]))
        return pa.select(take, y[0], x[0]), pa.select(take, y[1], x[1])

    argmax = pa.comm_reducer(fcombine, lambda ti, tv: (pa.const(2**31 - 1, ti), pa.const(-np.inf, tv)), name="argmax")
    X = pa.placeholder((2, 5), F, "X")
    k = pa.reduce_axis((0, 5), "k")
    I, V = pa.compute((2,), lambda i: argmax((k, X[i, k] * 3.0), axis=k), name="AM")
    x = np.array([[0.1, 0.7, 0.7, 0.2, 0.0], [0.5, -1.0, 0.2, 0.9, 0.3]])
    H = pa.placeholder((2,), F, "H")
    dX, = pa.differentiate(V, [X], H)
    want = np.zeros((2, 5))
    want[0, 1], want[1, 3] = 3.0, 6.0
    np.testing.assert_array_equal(pa.evaluate(dX, {X: x, H: np.array([1.0, 2.0])}), want)
    check_grad(V, [X], {X: np.random.default_rng(16).normal(size=(2, 5))})


def test_conv2d_relu_chain():
    Xs = pa.placeholder((1, 2, 5, 5), F, "X")
    W1 = pa.placeholder((2, 2, 3, 3), F, "W1")
    W2 = pa.placeholder((1, 2, 2, 2), F, "W2")

    def conv(X, W, pad, name):
        n_, c_, h_, w_ = X.shape
        o_, _, kh, kw = W.shape
        oh, ow = h_ + 2 * pad - kh + 1, w_ + 2 * pad - kw + 1
        c = pa.reduce_axis((0, c_), "c")
        ry = pa.reduce_axis((0, kh), "ry")
        rx = pa.reduce_axis((0, kw), "rx")

        def body(n, o, y, x):
            yy, xx = y + ry - pad, x + rx - pad
            inside = (yy >= 0) & (yy < h_) & (xx >= 0) & (xx < w_)
            return pa.sum(pa.select(inside, X[n, c, yy, xx], 0.0) * W[o, c, ry, rx], axis=[c, ry, rx])

        return pa.compute((n_, o_, oh, ow), body, name=name)

    C1 = conv(Xs, W1, 1, "conv1")
    R1 = pa.compute(C1.shape, lambda *i: pa.max(C1[i], 0.0), name="relu1")
    C2 = conv(R1, W2, 0, "conv2")
    Y = pa.compute(C2.shape, lambda *i: pa.tanh(C2[i]), name="Y")
    H = pa.placeholder(Y.shape, F, "H")
    rng = np.random.default_rng(17)
    feed = {**_feed(rng, Xs, W1, W2), H: rng.normal(size=Y.shape)}
    check_grad(Y, [Xs, W1, W2], feed, head=H, optimize=(True,))
    check_grad(C1, [Xs, W1], feed, optimize=(False,))  # full Jacobians in the raw form


def _hand_conv_reshape(rng):
    X = pa.placeholder((1, 1, 4, 4), F, "X")
    W = pa.placeholder((2, 1, 2, 2), F, "W")
    ry = pa.reduce_axis((0, 2), "ry")
    rx = pa.reduce_axis((0, 2), "rx")
    C = pa.compute((1, 2, 3, 3), lambda n, o, y, x: pa.sum(X[n, 0, y + ry, x + rx] * W[o, 0, ry, rx], axis=[ry, rx]),
                   name="conv")
    R = pa.compute((2, 9), lambda a, b: C[0, a, b // 3, b % 3], name="reshape")
    return X, W, R, _feed(rng, X, W)


@pytest.mark.parametrize("what", ["softmax", "log_softmax", "sigmoid", "tanh"])
def test_activations_of_reshaped_conv(what):
    rng = np.random.default_rng(18)
    X, W, R, feed = _hand_conv_reshape(rng)
    m = pa.reduce_axis((0, 9), "m")
    if what in ("softmax", "log_softmax"):
        M = pa.compute((2,), lambda a: pa.max(R[a, m], axis=m), name="rowmax")
        m2 = pa.reduce_axis((0, 9), "m2")
        S = pa.compute((2,), lambda a: pa.sum(pa.exp(R[a, m2] - M[a]), axis=m2), name="rowsum")
        if what == "softmax":
            Y = pa.compute((2, 9), lambda a, b: pa.exp(R[a, b] - M[a]) / S[a], name="softmax")
        else:
            Y = pa.compute((2, 9), lambda a, b: R[a, b] - M[a] - pa.log(S[a]), name="log_softmax")
    else:
        Y = pa.compute((2, 9), lambda a, b: getattr(pa, what)(R[a, b]), name=what)
    H = pa.placeholder((2, 9), F, "H")
    feed[H] = rng.normal(size=(2, 9))
    check_grad(Y, [X, W], feed, head=H)


def test_concatenate_and_split():
    A = pa.placeholder((3, 2), F, "A")
    B = pa.placeholder((2, 2), F, "B")
    C = pa.compute((5, 2), lambda i, j: pa.select(i < 3, A[pa.min(i, 2), j], B[pa.max(i - 3, 0), j] * 2.0), name="concat")
    S1 = pa.compute((2, 2), lambda i, j: C[i, j], name="split1")
    S2 = pa.compute((3, 2), lambda i, j: C[i + 2, j], name="split2")
    Y = pa.compute((3, 2), lambda i, j: pa.sin(S1[i % 2, j]) * S2[i, j], name="Y")
    rng = np.random.default_rng(19)
    check_grad(Y, [A, B], _feed(rng, A, B))
    check_grad(S2, [A, B], _feed(rng, A, B))


def test_take_with_a_data_dependent_index():
    A = pa.placeholder((5, 3), F, "A")
    I = pa.placeholder((4,), "int32", "I")
    T = pa.compute((4, 3), lambda i, j: A[I[i], j] * A[I[i], 2 - j], name="take")
    rng = np.random.default_rng(20)
    feed = {**_feed(rng, A), I: np.array([3, 0, 3, 1], "int32")}
    check_grad(T, [A], feed)
    dA, dI = pa.differentiate(T, [A, I])
    assert dI.dtype == "int32" and not pa.evaluate(dI, feed).any()


def test_hand_made_softmax_of_dense():
    X = pa.placeholder((2, 3), F, "X")
    W = pa.placeholder((4, 3), F, "W")
    k = pa.reduce_axis((0, 3), "k")
    D = pa.compute((2, 4), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="dense")
    E = pa.compute((2, 4), lambda i, j: pa.exp(D[i, j]), name="E")
    m = pa.reduce_axis((0, 4), "m")
    S = pa.compute((2,), lambda i: pa.sum(E[i, m], axis=m), name="S")
    Y = pa.compute((2, 4), lambda i, j: E[i, j] / S[i], name="Y")
    rng = np.random.default_rng(21)
    H = pa.placeholder((2, 4), F, "H")
    check_grad(Y, [X, W], {**_feed(rng, X, W), H: rng.normal(size=(2, 4))}, head=H)
    check_grad(Y, [X], _feed(rng, X, W))


def test_max_pool_and_avg_pool():
    X = pa.placeholder((1, 1, 4, 4), F, "X")
    ry = pa.reduce_axis((0, 2), "ry")
    rx = pa.reduce_axis((0, 2), "rx")
    P = pa.compute((1, 1, 2, 2), lambda n, c, y, x: pa.max(X[n, c, 2 * y + ry, 2 * x + rx], axis=[ry, rx]), name="maxpool")
    qy = pa.reduce_axis((0, 2), "qy")
    qx = pa.reduce_axis((0, 2), "qx")
    Q = pa.compute((1, 1, 3, 3), lambda n, c, y, x: pa.sum(X[n, c, y + qy, x + qx] * 0.25, axis=[qy, qx]), name="avgpool")
    Y = pa.compute((1, 1, 2, 2), lambda n, c, y, x: P[n, c, y, x] * Q[n, c, y + 1, x], name="Y")
    rng = np.random.default_rng(22)
    check_grad(Y, [X], _feed(rng, X))
