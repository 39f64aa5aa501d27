"""simplify(): raw-form gradients become polyhedral stages with the same values, less work."""

import time

import numpy as np
import pytest

import polyad as pa
from polyad.poly import PolyOp, estimate, simplify
from polyad.te.expr import Call
from polyad.te.visit import post_order
from poly_rawforms import argmax_rows, argmax_stage, out_size, rand, raw_grad, window_pairs


def selects_and_compares(t):
    """Operators select / comparisons left in the values of t's stage."""
    ops = []
    for st in t.op.statements:
        for n in post_order(st.values):
            if isinstance(n, Call) and n.op in ("select", "lt", "le", "gt", "ge", "eq", "ne"):
                ops.append(n.op)
    return ops


def check_same(raw, feed, rtol=1e-5):
    s = simplify(raw)
    assert isinstance(s.op, PolyOp)
    np.testing.assert_allclose(pa.evaluate(s, feed), pa.evaluate(raw, feed), rtol=rtol, atol=1e-5)
    return s


def flatten_raw(shape, names="abcd"):
    N, B, C, D = shape
    H = pa.placeholder((N, B * C * D), name="H")

    def body(a, b, c, d):
        n = pa.reduce_axis((0, N), "n")
        m = pa.reduce_axis((0, B * C * D), "m")
        cond = (n == a) & (m // (C * D) == b) & ((m // D) % C == c) & (m % D == d)
        return pa.sum(pa.select(cond, H[n, m], 0.0), axis=[n, m])

    return H, pa.compute(shape, body, name="dX")


def test_flatten_gradient_is_a_gather_without_reduction():
    H, dX = flatten_raw((32, 100, 20, 25))
    s = simplify(dX)
    text = pa.show(s)
    assert "  dX[a, b, c, d] = H[a, 500*b + 25*c + d]" in text.splitlines()
    assert "where" not in text and "sum(" not in text
    (st,) = s.op.statements
    assert st.combiner is None and not st.red_vars
    assert estimate(s).iterations == 32 * 100 * 20 * 25
    assert estimate(s).flops == 0


def test_flatten_values():
    H, dX = flatten_raw((2, 3, 4, 5))
    check_same(dX, {H: rand((2, 60))})


def test_dense_gradients_keep_one_reduction():
    N, K, M = 3, 4, 5
    X, W = pa.placeholder((N, K), name="X"), pa.placeholder((M, K), name="W")
    H = pa.placeholder((N, M), name="H")
    dX = raw_grad((N, K), (N, M), (K,), lambda o, r: [((o[0], r[0]), None, H[o[0], o[1]] * W[o[1], r[0]])])
    dW = raw_grad((M, K), (N, M), (K,), lambda o, r: [((o[1], r[0]), None, H[o[0], o[1]] * X[o[0], r[0]])], "dW")
    dB = raw_grad((M,), (N, M), (), lambda o, r: [((o[1],), None, H[o[0], o[1]])], "dB")
    feed = {X: rand((N, K), 1), W: rand((M, K), 2), H: rand((N, M), 3)}
    for raw, red in ((dX, M), (dW, N), (dB, N)):
        s = check_same(raw, feed)
        (st,) = s.op.statements
        assert len(st.red_vars) == 1 and st.red_vars[0].extent == red
        assert selects_and_compares(s) == []
    assert "dW[i0, i1] = sum(H[o0, i0]*X[o0, i1], axis=[o0 in [0, 3)])" in pa.show(simplify(dW))


def test_strided_padded_conv_has_exact_bounds_and_no_guard():
    n, c, f, h, k, st, p = 1, 2, 2, 11, 5, 3, 1
    oh = out_size(h, k, st, 1, p)
    H = pa.placeholder((n, f, oh, oh), name="H")
    W = pa.placeholder((f, c, k, k), name="W")

    def reads(o, r):
        N_, F_, Y_, X_ = o
        C_, RY, RX = r
        iy, ix = st * Y_ + RY - p, st * X_ + RX - p
        g = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < h)
        return [((N_, C_, iy, ix), g, H[N_, F_, Y_, X_] * W[F_, C_, RY, RX])]

    dX = raw_grad((n, c, h, h), (n, f, oh, oh), (c, k, k), reads)
    s = check_same(dX, {H: rand((n, f, oh, oh)), W: rand((f, c, k, k))})
    text = pa.show(s)
    # the kernel offsets are solved (r = x - 3o + 1); o keeps exact bounds in the domain
    assert "W[o1, i1, i2 - 3*o2 + 1, i3 - 3*o3 + 1]" in text
    assert "3*o2 <= i2 + 1" in text and "i2 <= 3*o2 + 3" in text
    assert selects_and_compares(s) == []
    P = window_pairs(h, oh, k, st, 1, p)
    assert estimate(s).flops == 2 * n * c * f * P * P


def test_avg_pool_stride_equal_kernel_has_no_reduction():
    n, c, h, k = 2, 2, 7, 2
    oh = out_size(h, k, k)
    H = pa.placeholder((n, c, oh, oh), name="H")
    dX = raw_grad(
        (n, c, h, h), (n, c, oh, oh), (k, k),
        lambda o, r: [((o[0], o[1], k * o[2] + r[0], k * o[3] + r[1]), None, H[o[0], o[1], o[2], o[3]] * 0.25)],
    )
    s = check_same(dX, {H: rand((n, c, oh, oh))})
    lines = pa.show(s).splitlines()
    assert "  dX[i0, i1, i2, i3] = H[i0, i1, i2//2, i3//2]*0.25   where i3 <= 5 and i2 <= 5" in lines
    # the last row/column (7 = 2*3 + 1) gets nothing: a zero-fill statement covers exactly it
    z = [st for st in s.op.statements if st.name == "Z"]
    assert len(z) == 1 and estimate(s).iterations == n * c * h * h


def test_several_reads_become_accumulating_statements():
    # Y[i] = X[i] + 2*X[n-1-i] + X[i//2]: three reads, overlapping projections
    n = 7
    H = pa.placeholder((n,), name="H")
    dX = raw_grad(
        (n,), (n,), (),
        lambda o, r: [((o[0],), None, H[o[0]]), ((n - 1 - o[0],), None, H[o[0]] * 2.0), ((o[0] // 2,), None, H[o[0]])],
    )
    s = check_same(dX, {H: rand((n,))})
    sts = s.op.statements
    assert not sts[0].accumulate and any(st.accumulate for st in sts)
    assert sum(1 for st in sts if st.name == "Z") == 0


def test_data_dependent_index_falls_back_to_a_masked_sum():
    # Y[i] = X[idx[i]] (take): the condition idx[i'] == j is not affine; it stays a guard
    n, m = 5, 4
    H = pa.placeholder((n,), name="H")
    idx = pa.placeholder((n,), "int32", name="idx")
    dX = raw_grad((m,), (n,), (), lambda o, r: [((idx[o[0]],), o[0] >= 1, H[o[0]])])
    s = simplify(dX)
    assert isinstance(s.op, PolyOp)
    feed = {H: rand((n,)), idx: np.array([3, 0, 3, 1, 2], "int32")}
    np.testing.assert_allclose(pa.evaluate(s, feed), pa.evaluate(dX, feed), rtol=1e-6)
    # the affine guard o >= 1 went into the domain; the data-dependent one is kept as a select
    assert sorted(selects_and_compares(s)) == ["eq", "select"]
    assert estimate(s).iterations == m * (n - 1)
    assert "# fallback: non-affine condition kept as a mask in the value (e.g. idx[o0] == i0)" in pa.show(s)


def test_max_pool_routes_the_head_to_the_first_maximum():
    n, c, h, k, st = 1, 2, 7, 3, 2
    oh = out_size(h, k, st)
    X = pa.placeholder((n, c, h, h), name="X")
    H = pa.placeholder((n, c, oh, oh), name="H")
    A = argmax_stage(X, (n, c, oh, oh), k, st)
    dX = raw_grad(
        (n, c, h, h), (n, c, oh, oh), (k, k),
        lambda o, r: [((o[0], o[1], st * o[2] + r[0], st * o[3] + r[1]),
                       A[o[0], o[1], o[2], o[3]] == r[0] * k + r[1], H[o[0], o[1], o[2], o[3]])],
    )
    x = rand((n, c, h, h))
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = x[0, 0, 1, 0] = 10.0  # ties: the first in window order wins
    s = check_same(dX, {X: x, H: rand((n, c, oh, oh))})
    # the only comparison left is with the window's argmax
    assert sorted(selects_and_compares(s)) == ["eq", "select"]
    P = window_pairs(h, oh, k, st)
    g = simplify(dX)
    assert estimate(g).stage("dX").flops == n * c * P * P * 2
    assert estimate(g).stage("dX").iterations == n * c * P * P
    # the whole gradient: argmax once per window element, plus O(window) per input element
    assert estimate(g).iterations == n * c * oh * oh * k * k + n * c * P * P


def test_softmax_gradient_through_the_max_is_linear():
    # M[i] = max_k Z[i, k] through A = argmax; the raw adjoint of Z from dM is O(n^2) over (i', k')
    N, K = 4, 6
    Z = pa.placeholder((N, K), name="Z")
    dM = pa.placeholder((N,), name="dM")
    A = argmax_rows(Z)
    raw = raw_grad((N, K), (N,), (K,), lambda o, r: [((o[0], r[0]), A[o[0]] == r[0], dM[o[0]])], name="dZ")
    s = check_same(raw, {Z: rand((N, K)), dM: rand((N,))})
    est = estimate(s).stage("dZ")
    assert est.iterations == N * K and est.flops == N * K
    assert estimate(raw).stage("dZ").iterations == N * K * N * K


def test_stage_without_provable_structure_is_left_alone():
    X = pa.placeholder((4, 5), name="X")
    k = pa.reduce_axis((0, 5), "k")
    T = pa.compute((4,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="T")
    M = pa.compute((4,), lambda i: pa.max(X[i, k], axis=k), name="M")
    assert simplify(T) is T and simplify(M) is M
    assert simplify([T, M]) == [T, M]


def test_consumers_of_simplified_stages_are_rebuilt():
    H, dX = flatten_raw((2, 3, 4, 5))
    Y = pa.compute((2, 3, 4, 5), lambda a, b, c, d: dX[a, b, c, d] * 2.0, name="Y")
    s = simplify(Y)
    assert s is not Y and s.op.name == "Y"
    assert isinstance(s.op.input_tensors[0].op, PolyOp)
    h = rand((2, 60))
    np.testing.assert_allclose(pa.evaluate(s, {H: h}), pa.evaluate(Y, {H: h}))
    # untouched graphs come back as they were
    X = pa.placeholder((3,), name="X")
    Z = pa.compute((3,), lambda i: X[i] + 1.0, name="Z")
    assert simplify(Z) is Z


def test_simplify_is_memoised_and_fast():
    H, dX = flatten_raw((32, 100, 20, 25))
    t0 = time.perf_counter()
    a = simplify(dX)
    t1 = time.perf_counter()
    b = simplify(dX)
    t2 = time.perf_counter()
    assert a.op is b.op
    assert t1 - t0 < 1.0 and t2 - t1 < 0.01


def test_the_memo_does_not_keep_dead_graphs_alive():
    import gc
    import weakref

    def make():
        H, dX = flatten_raw((2, 3, 4, 2))
        s = simplify(dX)
        assert isinstance(s.op, PolyOp)
        return weakref.ref(dX.op), weakref.ref(s.op)

    refs = [make()]
    gc.collect()  # frees the raw stages, which drops their memo entries ...
    gc.collect()  # ... and then the simplified stages
    assert all(r() is None for pair in refs for r in pair)


def test_bad_input():
    with pytest.raises(pa.PolyadError):
        simplify("not a tensor")


def test_conditions_the_domain_decides_are_folded():
    # the guard inside exp() cannot be lifted, but on the domain (o = j + 1, 0 <= j < n - 1)
    # `o >= 1` always holds and `o > n` never does: both selects disappear
    n = 6
    H = pa.placeholder((n,), name="H")
    X = pa.placeholder((n,), name="X")
    raw = raw_grad(
        (n - 1,), (n,), (),
        lambda o, r: [((o[0] - 1,), o[0] >= 1,
                       H[o[0]] * pa.exp(pa.select(o[0] >= 1, X[o[0]], 0.0)) + pa.select(o[0] > n, X[0], 0.0))],
    )
    s = check_same(raw, {H: rand((n,)), X: rand((n,), 1)})
    assert selects_and_compares(s) == []
    assert "= H[i0 + 1]*exp(X[i0 + 1])" in pa.show(s)


def test_readable_indices_for_reversals_and_equal_domains():
    n = 5
    H = pa.placeholder((n,), name="H")
    rev = raw_grad((n,), (n,), (), lambda o, r: [((n - 1 - o[0],), None, H[o[0]])])
    assert "  dX[i0] = H[4 - i0]" in pa.show(simplify(rev)).splitlines()
    # reverse of a merge: Y[m] = X[(9 - m)//5, (9 - m)%5], m < 10
    H2 = pa.placeholder((10,), name="H2")
    rm = raw_grad((2, 5), (10,), (), lambda o, r: [(((9 - o[0]) // 5, (9 - o[0]) % 5), None, H2[o[0]])])
    s = check_same(rm, {H2: rand((10,))})
    assert "= H2[9 - 5*i0 - i1]" in pa.show(s)
    # two reads reaching the same points with no reduction left: one statement, values added
    both = raw_grad((n,), (n,), (), lambda o, r: [((o[0],), None, H[o[0]]), (((2 * o[0]) // 2,), None, H[o[0]] * 3.0)])
    s = check_same(both, {H: rand((n,))})
    assert len(s.op.statements) == 1 and estimate(s).iterations == n


def test_reduction_axes_of_extent_one_disappear():
    H = pa.placeholder((2, 3, 1, 1), name="H")
    y = pa.reduce_axis((0, 1), "y")
    x = pa.reduce_axis((0, 1), "x")
    T = pa.compute((2, 3, 4, 4), lambda n, c, h, w: pa.sum(H[n, c, y, x], axis=[y, x]), name="T")
    s = check_same(T, {H: rand((2, 3, 1, 1))})
    assert "  T[n, c, h, w] = H[n, c, 0, 0]" in pa.show(s).splitlines()
    assert estimate(s).flops == 0


def test_evaluation_in_blocks_matches(monkeypatch):
    import sys

    ev = sys.modules["polyad.evaluate"]  # the module (pa.evaluate is the function)

    n, c, f, h, k, st, p = 1, 2, 2, 9, 3, 2, 1
    oh = out_size(h, k, st, 1, p)
    H = pa.placeholder((n, f, oh, oh), name="H")
    W = pa.placeholder((f, c, k, k), name="W")

    def reads(o, r):
        iy, ix = st * o[2] + r[1] - p, st * o[3] + r[2] - p
        g = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < h)
        return [((o[0], r[0], iy, ix), g, H[o[0], o[1], o[2], o[3]] * W[o[1], r[0], r[1], r[2]])]

    dX = raw_grad((n, c, h, h), (n, f, oh, oh), (c, k, k), reads)
    s = simplify(dX)
    feed = {H: rand((n, f, oh, oh)), W: rand((f, c, k, k))}
    whole = pa.evaluate(s, feed)
    monkeypatch.setattr(ev, "BLOCK_ELEMENTS", 16)
    np.testing.assert_array_equal(pa.evaluate(s, feed), whole)
    np.testing.assert_allclose(whole, pa.evaluate(dX, feed), rtol=1e-5, atol=1e-6)


def test_prefix_head_dimensions_and_identity_head():
    # dX[p, j] = sum_o select(o == (j+1) and o < n, H[p, o], 0): a Jacobian-shaped adjoint (prefix p)
    n = 4
    H = pa.placeholder((3, n), name="H")

    def body(p, j):
        o = pa.reduce_axis((0, n), "o")
        return pa.sum(pa.select((o == j + 1) & (o < n), H[p, o], 0.0), axis=o)

    dX = pa.compute((3, n), body, name="dX")
    s = check_same(dX, {H: rand((3, n))})
    lines = pa.show(s).splitlines()
    assert "  dX[p, j] = H[p, j + 1]   where j <= 2" in lines and "  dX[p, j] = 0.0   where j == 3" in lines
    # the identity head I[p, o] = (p == o) becomes 1 on the diagonal, a zero fill elsewhere
    eye = pa.compute((3, 3), lambda a, b: pa.select(a == b, 1.0, 0.0), name="I")
    s = check_same(eye, {})
    assert "  I[a, b] = 1.0   where b == a" in pa.show(s).splitlines()
    assert "  I[a, b] = 0.0   where a < b or b < a" in pa.show(s).splitlines()


def test_idempotent_and_polyops_read_rewritten_inputs():
    from polyad.poly import simplify_op

    H, dA = flatten_raw((2, 3, 4, 5))
    # B reads the raw stage dA through a data-dependent-free raw adjoint of its own
    dB = raw_grad((2, 3, 4, 5), (2, 3, 4, 5), (), lambda o, r: [(tuple(o), None, dA[tuple(o)] * 2.0)], "dB")
    poly_b = simplify_op(dB.op)
    assert poly_b.input_tensors[0] is dA  # simplified alone, it still reads the raw dA
    s = simplify(poly_b.output(0))
    (inp,) = s.op.input_tensors
    assert isinstance(s.op, PolyOp) and isinstance(inp.op, PolyOp) and inp is not dA
    h = rand((2, 60))
    np.testing.assert_allclose(pa.evaluate(s, {H: h}), pa.evaluate(dB, {H: h}))
    assert simplify(s) is s


def test_overlapping_assignment_terms_become_disjoint_pieces_that_tiles_keep_in_order(opencl):
    """``select(b < 8, A, 0) + B`` is ``A + B where b <= 7`` and ``B where b >= 8``: overlapping, the second term
    was an accumulating statement without a reduction, and every tiled schedule of it was a ScheduleError."""
    from polyad.schedule import Schedule, StageSchedule

    A = pa.placeholder((2, 16, 3, 40), name="A")
    B = pa.placeholder((2, 16, 3, 40), name="B")
    D = pa.compute(A.shape, lambda a, b, c, d: pa.select(b < 8, A[a, b, c, d], 0.0) + B[a, b, c, d], name="D")
    S = simplify(D)
    assert [st.accumulate for st in S.op.statements] == [False, False] and not selects_and_compares(S)
    doms = [st.domain.reset_tuple_id() for st in S.op.statements]
    assert doms[0].intersect(doms[1]).is_empty()
    x, y = rand(A.shape, 1), rand(B.shape, 2)
    want = pa.evaluate(D, {A: x, B: y})
    for ss in (StageSchedule(tile=(1, 1, 3, 32), vectorize=16), StageSchedule(tile=(1, 2, 1, 8))):
        got = pa.build(S, [A, B], schedule=Schedule("t", stages={"D": ss}))(x, y)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_adjoint_adding_piecewise_contributions_is_one_stage_of_their_pieces():
    """split's adjoint added four full-size stages, each its quarter of H and zeros (16x32x56x56: 4.7 ms, its
    forward 0.15): read as their pieces, the sum is one stage of four disjoint copies, no zero fill."""
    X = pa.placeholder((2, 8, 3, 5), name="X")
    Y = pa.ops.concatenate(pa.ops.split(X, 4, axis=1)[::-1], axis=1)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    assert isinstance(dX.op, PolyOp) and len(dX.op.statements) == 4, pa.show(dX)
    assert not selects_and_compares(dX) and not any(st.accumulate for st in dX.op.statements)
    reads = {t.op.name for t in dX.op.input_tensors}  # the concatenation's adjoint pieces (slices of H, inlined
    assert not any(r.startswith("d_X_from") for r in reads), reads  # when built), no contribution stage
    h = rand(H.shape, 3)
    want = np.concatenate(np.split(h, 4, axis=1)[::-1], axis=1)
    np.testing.assert_array_equal(pa.evaluate(dX, {H: h}), want)
    # a contribution read elsewhere too, and a piece overlapping a plain read: still exact
    Z = pa.compute(X.shape, lambda a, b, c, d: X[a, b, c, d] * 3.0, name="Z")
    Y2 = pa.ops.concatenate([pa.ops.split(X, 2, axis=1)[0], pa.ops.split(Z, 2, axis=1)[1]], axis=1)
    H2 = pa.placeholder(Y2.shape, name="H2")
    (dX2,) = pa.differentiate(Y2, [X], H2)
    h2 = rand(H2.shape, 4)
    want2 = np.zeros(X.shape, np.float32)
    want2[:, :4] = h2[:, :4]
    want2[:, 4:] = 3.0 * h2[:, 4:]
    np.testing.assert_allclose(pa.evaluate(dX2, {H2: h2}), want2, rtol=1e-6)
