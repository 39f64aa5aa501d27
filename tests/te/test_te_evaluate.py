"""pa.evaluate, the numpy oracle: semantics, masks, reducers, blocking, speed."""

import importlib
import time

import numpy as np
import pytest

import polyad as pa
ev_mod = importlib.import_module("polyad.evaluate")  # pa.evaluate is the function

rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def test_matmul_with_reduction():
    X = pa.placeholder((5, 7), name="X")
    W = pa.placeholder((3, 7), name="W")
    k = pa.reduce_axis((0, 7), "k")
    T = pa.compute((5, 3), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    x, w = rand(5, 7), rand(3, 7)
    t = pa.evaluate(T, {X: x, W: w})
    assert t.dtype == np.float32 and t.shape == (5, 3)
    np.testing.assert_allclose(t, x @ w.T, rtol=1e-5, atol=1e-5)


def test_list_in_list_out_and_each_stage_once(monkeypatch):
    X = pa.placeholder((4,), name="X")
    A = pa.compute((4,), lambda i: X[i] * 2.0, name="A")
    B = pa.compute((4,), lambda i: A[i] + A[3 - i], name="B")
    C = pa.compute((4,), lambda i: A[i] * B[i], name="C")
    calls = []
    real = ev_mod._eval_compute
    monkeypatch.setattr(ev_mod, "_eval_compute", lambda op, v: calls.append(op.name) or real(op, v))
    x = rand(4)
    b, c = pa.evaluate([B, C], {X: x})
    a = 2 * x
    np.testing.assert_allclose(b, a + a[::-1])
    np.testing.assert_allclose(c, a * (a + a[::-1]))
    assert sorted(calls) == ["A", "B", "C"]


def test_floor_semantics_for_integer_division_and_modulo():
    N = pa.placeholder((6,), dtype="int32", name="N")
    D = pa.compute((6,), lambda i: pa.floordiv(N[i], 4), name="D")
    M = pa.compute((6,), lambda i: N[i] % -4, name="M")
    n = np.array([-9, -4, -1, 0, 3, 9], dtype="int32")
    d, m = pa.evaluate([D, M], {N: n})
    np.testing.assert_array_equal(d, n // 4)
    np.testing.assert_array_equal(m, n % -4)
    assert d.dtype == np.int32
    F = pa.placeholder((3,), name="F")
    G = pa.compute((3,), lambda i: pa.floordiv(F[i], 2.0) + pa.floormod(F[i], 2.0), name="G")
    f = np.array([-3.5, 0.5, 5.0], "float32")
    np.testing.assert_allclose(pa.evaluate(G, {F: f}), np.floor(f / 2) + (f - np.floor(f / 2) * 2))


def test_padding_reads_are_legal_under_a_false_select_branch():
    X = pa.placeholder((5,), name="X")
    P = pa.compute((9,), lambda i: pa.select(pa.logical_and(i >= 2, i < 7), X[i - 2], 0.0), name="P")
    x = rand(5)
    np.testing.assert_allclose(pa.evaluate(P, {X: x}), np.pad(x, 2))
    # the same guard expressed with where= on a reduction
    k = pa.reduce_axis((-1, 2), "k")
    S = pa.compute((5,), lambda i: pa.sum(X[i + k], axis=k, where=pa.logical_and(i + k >= 0, i + k < 5)), name="S")
    ref = np.array([x[max(0, i - 1):i + 2].sum() for i in range(5)])
    np.testing.assert_allclose(pa.evaluate(S, {X: x}), ref, rtol=1e-6)


def test_an_and_decided_by_a_scalar_first_operand_never_evaluates_the_second():
    S = pa.placeholder((), name="S")
    X = pa.placeholder((4,), name="X")
    # X[i + 2] is out of range for i >= 2, but only read where S > 0 (scalar, whole-stage) and it holds
    Y = pa.compute((4,), lambda i: pa.select((S[()] > 0.0) & (X[i + 2] > 0.0), 1.0, 0.0), name="Y")
    Z = pa.compute((4,), lambda i: pa.select((S[()] <= 0.0) | (X[i + 2] > 0.0), 1.0, 0.0), name="Z")
    x = np.arange(4, dtype="float32")
    y, z = pa.evaluate([Y, Z], {S: np.float32(-1), X: x})
    np.testing.assert_array_equal(y, np.zeros(4))
    np.testing.assert_array_equal(z, np.ones(4))
    with pytest.raises(pa.OutOfBoundsError, match="'X' at axis 0 index 4"):
        pa.evaluate(Y, {S: np.float32(1), X: x})


def test_reducers_sum_prod_max_min_with_where_and_empty_sets():
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")
    cond = k < X.shape[1] - 1
    outs = [
        pa.compute((3,), lambda i: pa.sum(X[i, k], axis=k, where=k < 3)),
        pa.compute((3,), lambda i: pa.prod(X[i, k], axis=k, where=cond)),
        pa.compute((3,), lambda i: pa.max(X[i, k], axis=k, where=k >= i + 2)),
        pa.compute((3,), lambda i: pa.min(X[i, k], axis=k)),
    ]
    x = rand(3, 4)
    s, p, m, n = pa.evaluate(outs, {X: x})
    np.testing.assert_allclose(s, x[:, :3].sum(1), rtol=1e-6)
    np.testing.assert_allclose(p, x[:, :3].prod(1), rtol=1e-6)
    np.testing.assert_allclose(m[:2], [x[0, 2:].max(), x[1, 3:].max()])
    assert m[2] == -np.inf  # empty reduction: the identity
    np.testing.assert_allclose(n, x.min(1))


def test_tuple_reducer_argmax_takes_the_first_maximum():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return pa.select(keep, x[0], y[0]), pa.select(keep, x[1], y[1])

    argmax = pa.comm_reducer(fcombine, lambda ti, tv: (pa.const(-1, ti), pa.const(-np.inf, tv)), name="argmax")
    X = pa.placeholder((4, 6), name="X")
    k = pa.reduce_axis((0, 6), "k")
    idx, val = pa.compute((4,), lambda i: argmax((k, X[i, k]), axis=k), name="A")
    x = np.array([[1, 3, 3, 0, 3, 2], [5, 5, 5, 5, 5, 5], [0, 1, 2, 3, 4, 5], [9, 0, 0, 0, 0, 9]], "float32")
    a, v = pa.evaluate([idx, val], {X: x})
    np.testing.assert_array_equal(a, x.argmax(1))
    np.testing.assert_array_equal(v, x.max(1))
    assert a.dtype == np.int32


def test_tuple_reducers_fold_in_iteration_order_with_where():
    # composition of maps x -> a*x + b: associative, NOT commutative, identity (1, 0)
    def compose(f, g):  # f first, then g
        return f[0] * g[0], g[0] * f[1] + g[1]

    affine = pa.comm_reducer(compose, lambda ta, tb: (pa.const(1, ta), pa.const(0, tb)), name="affine")
    n = 1001  # odd, so the pairwise evaluation pads
    A = pa.placeholder((3, n), "int64", name="A")
    B = pa.placeholder((3, n), "int64", name="B")
    k = pa.reduce_axis((0, n), "k")
    ra, rb = pa.compute((3,), lambda i: affine((A[i, k], B[i, k]), axis=k, where=(k % 7 != i)), name="R")
    a = rng.choice([-1, 1], size=(3, n)).astype("int64")
    b = rng.integers(-3, 4, size=(3, n)).astype("int64")
    got_a, got_b = pa.evaluate([ra, rb], {A: a, B: b})
    for i in range(3):
        fa, fb = 1, 0
        for j in range(n):
            if j % 7 != i:
                fa, fb = fa * a[i, j], a[i, j] * fb + b[i, j]
        assert (got_a[i], got_b[i]) == (fa, fb)


def test_data_dependent_index_and_its_bounds():
    X = pa.placeholder((5,), name="X")
    I = pa.placeholder((3,), dtype="int64", name="I")
    T = pa.compute((3,), lambda i: X[I[i]], name="T")
    x = rand(5)
    np.testing.assert_allclose(pa.evaluate(T, {X: x, I: np.array([4, 0, 2])}), x[[4, 0, 2]])
    with pytest.raises(pa.OutOfBoundsError, match="'X' at axis 0 index 7"):
        pa.evaluate(T, {X: x, I: np.array([4, 7, 2])})


def test_intrinsics_match_numpy():
    from math import erf

    X = pa.placeholder((7,), dtype="float64", name="X")
    x = np.linspace(0.1, 2.5, 7)
    cases = {
        pa.exp: np.exp, pa.log: np.log, pa.sqrt: np.sqrt, pa.rsqrt: lambda a: 1 / np.sqrt(a),
        pa.tanh: np.tanh, pa.sigmoid: lambda a: 1 / (1 + np.exp(-a)), pa.sin: np.sin, pa.cos: np.cos,
        pa.erf: np.vectorize(erf), pa.floor: np.floor, pa.ceil: np.ceil, pa.round: np.round,
        pa.trunc: np.trunc, pa.log1p: np.log1p, pa.log2: np.log2, pa.abs: np.abs, pa.sign: np.sign,
    }
    outs = [pa.compute((7,), lambda i, f=f: f(X[i] - 1.0)) for f in cases]
    got = pa.evaluate(outs, {X: x})
    for g, ref in zip(got, cases.values()):
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(g, ref(x - 1.0), rtol=1e-12, equal_nan=True)


def test_casts_and_bool_tensors():
    X = pa.placeholder((4,), name="X")
    B = pa.compute((4,), lambda i: X[i] > 0.0, name="B")
    C = pa.compute((4,), lambda i: pa.cast(B[i], "int32") + pa.cast(X[i], "int32"), name="C")
    x = np.array([-1.7, 0.0, 2.5, 3.9], "float32")
    b, c = pa.evaluate([B, C], {X: x})
    assert b.dtype == np.bool_ and c.dtype == np.int32
    np.testing.assert_array_equal(c, (x > 0).astype("int32") + x.astype("int32"))


def test_blocking_gives_the_same_result(monkeypatch):
    X = pa.placeholder((37, 29), name="X")
    k = pa.reduce_axis((0, 29), "k")
    T = pa.compute((37, 37), lambda i, j: pa.sum(X[i, k] * X[j, k], axis=k), name="T")
    x = rand(37, 29)
    whole = pa.evaluate(T, {X: x})
    monkeypatch.setattr(ev_mod, "BLOCK_ELEMENTS", 500)
    blocked = pa.evaluate(T, {X: x})
    np.testing.assert_array_equal(whole, blocked)


def test_dense_workload_at_batch_2_evaluates_quickly():
    X = pa.placeholder((2, 1000), name="X")
    W = pa.placeholder((1000, 1000), name="W")
    k = pa.reduce_axis((0, 1000), "k")
    Y = pa.compute((2, 1000), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="Y")
    x, w = rand(2, 1000), rand(1000, 1000)
    t = time.perf_counter()
    y = pa.evaluate(Y, {X: x, W: w})
    assert time.perf_counter() - t < 5  # generous: this is a smoke check, the budget is seconds
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-3)


def test_scalar_tensors_and_lists_in_feed():
    S = pa.placeholder((), name="S")
    X = pa.placeholder((3,), name="X")
    Y = pa.compute((3,), lambda i: X[i] * S[()], name="Y")
    np.testing.assert_allclose(pa.evaluate(Y, {S: np.float32(2), X: [1.0, 2.0, 3.0]}), [2, 4, 6])
    np.testing.assert_allclose(pa.evaluate(Y, {S: 2, X: [1, 2, True]}), [2, 4, 2])  # ints and bools fit a float


def test_python_numbers_that_do_not_fit_the_tensor_are_refused():
    # numpy's astype wraps 2**40 to 0 in int32 and makes 1e300 inf in float32; numpy's array() refuses the first
    I = pa.placeholder((2,), "int32", name="I")
    X = pa.placeholder((2,), name="X")
    Y = pa.compute((2,), lambda i: pa.cast(I[i], "float32") + X[i], name="Y")
    with pytest.raises(pa.EvaluationError, match=r"'I' is int32, but the fed array holds 1099511627776, outside"):
        pa.evaluate(Y, {I: [2**40, 2], X: [0.0, 0.0]})
    with pytest.raises(pa.EvaluationError, match=r"'X' is float32, but the fed array holds 1e\+300, outside"):
        pa.evaluate(Y, {I: [1, 2], X: [1e300, 0.0]})
    with pytest.raises(pa.EvaluationError, match=r"'I' has dtype int32, but the fed array has dtype float64"):
        pa.evaluate(Y, {I: [1.5, 2], X: [0.0, 0.0]})  # a float into an integer tensor would truncate
    edges = pa.evaluate(Y, {I: [-2**31, 2**31 - 1], X: [0.0, 0.0]})  # the range's ends fit
    np.testing.assert_array_equal(edges, np.array([-2**31, 2**31 - 1], "int32").astype("float32"))


def test_nested_selects_reusing_their_value_and_deep_bodies_evaluate_in_linear_time():
    # keyed by expression and mask, a select nested 12 deep that reuses its value in its condition and both
    # branches took 14 s (3**12 evaluations); a body 600 operations deep was a RecursionError
    X = pa.placeholder((4,), name="X")
    x = np.linspace(-1, 1, 4).astype("float32")

    def nested(i):
        e = X[i]
        for s in range(40):
            e = pa.select(e > 0.01 * s, e * 0.5, e + 0.1)
        return e

    want = x.copy()
    for s in range(40):
        want = np.where(want > np.float32(0.01 * s), want * np.float32(0.5), want + np.float32(0.1))
    t = time.perf_counter()
    np.testing.assert_allclose(pa.evaluate(pa.compute((4,), nested, name="S"), {X: x}), want, rtol=1e-6)
    assert time.perf_counter() - t < 5

    def deep(i):
        e = X[i]
        for _ in range(400):
            e = pa.tanh(e) * 0.9 + 0.01
        return e

    ref = x.copy()
    for _ in range(400):
        ref = np.tanh(ref) * np.float32(0.9) + np.float32(0.01)
    np.testing.assert_allclose(pa.evaluate(pa.compute((4,), deep, name="D"), {X: x}), ref, rtol=1e-5)


def test_a_read_is_checked_where_any_path_evaluates_it():
    # the same read under two branches: out of range under one of them is an error, under neither is not
    X = pa.placeholder((4,), name="X")
    x = np.arange(4, dtype="float32")
    shifted = lambda i: X[i + 1]  # noqa: E731 - out of range at i == 3
    ok = pa.compute((4,), lambda i: pa.select(i < 3, shifted(i), 0.0) + pa.select(i < 2, shifted(i) * 2.0, 1.0),
                    name="ok")
    np.testing.assert_array_equal(pa.evaluate(ok, {X: x}), [1 + 2, 2 + 4, 3 + 1, 0 + 1])
    bad = pa.compute((4,), lambda i: pa.select(i < 3, shifted(i), 0.0) + pa.select(i > 0, shifted(i), 1.0),
                     name="bad")
    with pytest.raises(pa.OutOfBoundsError, match=r"'X' at axis 0 index 4"):
        pa.evaluate(bad, {X: x})
