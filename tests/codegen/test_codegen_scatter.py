"""One-hot sums built as scatters (poly/scatter.py, codegen/tree.py's _scatter_stage).

The adjoint of a data-dependent read, ``dW[v, c] = sum_k select(I[k] == v, H[k, c], 0)`` over
``{ S0[v, c, k] : 0 <= v < V and 0 <= c < C and 0 <= k < K }``, runs its naive loops as
``dW[:, c] = 0; for k: dW[I[k], c] += H[k, c]`` over ``{ S0[c, k] }``: the gather's additions, in its order.
A max pool's gradient compares its argmax with an affine expression of two output coordinates, which isl solves.
"""

from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import generate
from polyad.poly.scatter import scatter_form
from polyad.schedule import DeviceModel, Schedule, StageSchedule, auto_schedule
from polyad.schedule import cost
from polyad.schedule.auto import stage_cost, stage_info

ZEN5 = DeviceModel.load(Path(__file__).parent.parent / "data" / "devices" / "zen5-former-constants.json")
GPU = DeviceModel.load(Path(__file__).parent.parent / "data" / "devices" / "gpu-former-constants.json")


def _take_grad(V=50, C=6, index_shape=(5, 6), axis=0, mode="clip", dtype="float32", index_dtype="int32"):
    W = pa.placeholder((V, C) if axis == 0 else (C, V), name="W", dtype=dtype)
    I = pa.placeholder(index_shape, name="I", dtype=index_dtype)
    Y = pa.ops.take(W, I, axis=axis, mode=mode)
    H = pa.placeholder(Y.shape, name="H", dtype=dtype)
    [dW] = pa.differentiate(Y, [W], H)
    return dW, I, H


def _run(outs, ins, feeds, schedule):
    got = pa.build(outs, ins, schedule=schedule)(*feeds)
    return [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]


def _oracle(outs, ins, feeds):
    ref = pa.evaluate(outs, dict(zip(ins, feeds)))
    return [np.asarray(r) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]


def test_take_gradient_is_a_one_hot_sum_over_the_table_rows():
    dW, _, _ = _take_grad(V=50, C=6, index_shape=(40,))
    form = scatter_form(dW.op)
    assert [(str(a), str(e)) for a, e in form.steps] == [("pa_a0", "int64(max(min(I[i0], 49), 0))")]
    assert [(str(a), lo, hi) for a, lo, hi in form.ranges] == [("pa_a0", 0, 49)]  # tested as it is bound
    assert form.check is None and [(d, str(p)) for d, p in form.picks] == [(0, "pa_a0")]
    assert str(form.value) == "H[i0, i1]" and form.dims == (0,)
    assert form.domain.is_equal(pa.poly.stage.box_set("x", form.loop).reset_tuple_id())
    assert scatter_form(_take_grad(axis=1)[0].op).dims == (1,)
    # int64 indices compare with the cast variable: I[k] == int64(v)
    assert scatter_form(_take_grad(V=50, C=1, index_dtype="int64")[0].op) is not None


def test_a_strided_max_pools_gradient_solves_both_coordinates_from_the_argmax():
    """``A[n, c, y, x] == 3*i + j - 6*y - 2*x + 4`` over the windows that hold ``(i, j)``: isl gives ``i`` and ``j``
    from ``a = A[...]``, and where ``a`` picks a point (the padding is never picked)."""
    X = pa.placeholder((2, 3, 9, 9), name="X")
    H = pa.placeholder((2, 3, 5, 5), name="H")
    [dX] = pa.differentiate(pa.nn.pool2d(X, 3, 2, 1, "max"), [X], H)
    form = scatter_form(dX.op)
    assert form.dims == (2, 3)
    assert [(d, str(p)) for d, p in form.picks] == [(2, "2*int64(y) + pa_a0//3 - 1"), (3, "2*int64(x) + pa_a0%3 - 1")]
    # 0 <= a <= 8 as a is bound; then the padding on all four sides (9 rows: the last window's row 9 is
    # padding), and no floor division's own definition (3*(a//3) <= a)
    assert [(str(a), lo, hi) for a, lo, hi in form.ranges] == [("pa_a0", 0, 8)]
    assert str(form.check) == (
        "6*int64(y) + pa_a0 >= 3 and 6*int64(y) + pa_a0 <= 29 and "
        "2*int64(x) + pa_a0 <= 3*(pa_a0//3) + 9 and 3*(pa_a0//3) < 2*int64(x) + pa_a0")


def _sum(body, where=None, shape=(50, 6), K=30, dtype="float32", name="T"):
    H = pa.placeholder((K, shape[1]), name="H", dtype=dtype)
    I = pa.placeholder((K,), name="I", dtype="int32")
    k = pa.reduce_axis((0, K), name="k")
    T = pa.compute(shape, lambda v, c: pa.sum(body(H, I, k, v, c), axis=k,
                                             where=None if where is None else where(I, k, v)), name=name)
    return T, I, H


@pytest.mark.parametrize("case, body", [
    ("the value reads the picked dimension",
     lambda H, I, J, k, v, c: pa.select(I[k] == v, H[k, c] * pa.cast(v, "float32"), 0.0)),
    ("the compared value reads it", lambda H, I, J, k, v, c: pa.select(I[k] + v == 2 * v, H[k, c], 0.0)),
    ("a conjunct that reads data reads it", lambda H, I, J, k, v, c: pa.select(
        pa.logical_and(I[k] == v, J[v] > 0), H[k, c], 0.0)),
    ("one comparison, two output variables: { [k, a] -> [v, c] : v + c = a } is not a function",
     lambda H, I, J, k, v, c: pa.select(I[k] == v + c, H[k, 0], 0.0)),
    ("no comparison with an output variable", lambda H, I, J, k, v, c: pa.select(I[k] == 3, H[k, c], 0.0)),
    ("a max, not a sum", None),
])
def test_what_is_not_a_one_hot_sum_stays_a_gather(case, body):
    J = pa.placeholder((50,), name="J", dtype="int32")
    if body is None:
        H = pa.placeholder((30, 6), name="H")
        I = pa.placeholder((30,), name="I", dtype="int32")
        k = pa.reduce_axis((0, 30), name="k")
        T = pa.compute((50, 6), lambda v, c: pa.max(pa.select(I[k] == v, H[k, c], 0.0), axis=k), name="T")
    else:
        T, _, _ = _sum(lambda H, I, k, v, c: body(H, I, J, k, v, c))
    assert scatter_form(T.op) is None, case


@pytest.mark.parametrize("case, body, where", [
    ("an affine conjunct reads the picked dimension: it joins the check",
     lambda H, I, k, v, c: pa.select(pa.logical_and(I[k] == v, v < 9), H[k, c], 0.0), None),
    ("the reduction's bounds depend on it: { S[v, c, k] : k < v }", lambda H, I, k, v, c: H[k, c],
     lambda I, k, v: pa.logical_and(I[k] == v, k < v)),
])
def test_affine_conditions_on_the_picked_dimension_join_its_check(opencl, case, body, where):
    rng = np.random.default_rng(7)
    T, I, H = _sum(body, where)
    assert scatter_form(T.op) is not None, case
    # built as one too: lift_where's zero fill of the rows no k reaches (v = 0) is the scatter's zeroing
    assert "scatter" in {i.role for i in generate([T], [I, H], "naive").tree.statements.values()}, case
    feeds = [rng.integers(-3, 53, 30).astype(np.int32), rng.standard_normal((30, 6)).astype(np.float32)]
    [ref] = _oracle([T], [I, H], feeds)
    [scattered] = _run([T], [I, H], feeds, "naive")
    np.testing.assert_allclose(scattered, ref, rtol=1e-6)
    [gathered] = _run([T], [I, H], feeds, Schedule("t", stages={"T": StageSchedule(tile=(2, 6))}))
    assert np.array_equal(scattered, gathered), case


def test_int32_sums_stay_gathers():
    """With 64-bit indices a register accumulates an int32 sum in ``long``: stored at every step it would wrap
    differently.  int64 sums scatter."""
    for dtype, scatters in (("int32", False), ("int64", True)):
        T, _, _ = _sum(lambda H, I, k, v, c: pa.select(I[k] == v, H[k, c], pa.const(0, dtype)), dtype=dtype)
        assert (scatter_form(T.op) is not None) == scatters, dtype


@pytest.mark.parametrize("kernel, stride, padding, ceil, size", [
    (3, 2, 1, False, 9), (5, 2, 2, False, 9), (3, 2, 0, True, 9),
    (3, 2, 0, False, 8),  # the last row and column are in no window: a zero fill beside the sum
    (3, 1, 1, False, 9), (2, 1, 0, False, 8),  # over the window positions, run down (_over_positions)
])
def test_max_pool_gradients_scatter_as_the_gather_sums(opencl, kernel, stride, padding, ceil, size):
    rng = np.random.default_rng(kernel * 10 + stride)
    X = pa.placeholder((2, 3, size, size), name="X")
    Y = pa.nn.pool2d(X, kernel, stride, padding, "max", ceil_mode=ceil)
    H = pa.placeholder(Y.shape, name="H")
    [dX] = pa.differentiate(Y, [X], H)
    assert scatter_form(dX.op).dims == (2, 3)
    assert "scatter" in {i.role for i in generate([dX], [X, H], "naive").tree.statements.values()}
    x = rng.standard_normal(X.shape).astype(np.float32)
    x[0, 0, :4, :4] = 1.0  # ties: the first maximum in the window's order takes the gradient
    h = rng.standard_normal(Y.shape).astype(np.float32)
    [ref] = _oracle([dX], [X, H], [x, h])
    [scattered] = _run([dX], [X, H], [x, h], "naive")
    np.testing.assert_allclose(scattered, ref, rtol=1e-6, atol=1e-7)
    [gathered] = _run([dX], [X, H], [x, h], Schedule("t", stages={dX.op.name: StageSchedule(tile=(1, 1, 3, 3))}))
    assert np.array_equal(scattered, gathered)


def test_a_stride_one_pool_scatters_over_the_window_positions_in_the_gathers_order():
    """The simplifier writes a stride-1 pool's gradient over the window offsets, ``A[n, c, i - rh, j - rw] == 2*rh +
    rw``, whose compared value reads the output coordinates.  Over the positions ``rh_at = i - rh`` and ``rw_at = j -
    rw`` it reads ``A[n, c, rh_at, rw_at]`` and picks ``i`` and ``j``; ``rh`` ran up, so ``rh_at`` runs down: at every
    point the windows add in the gather's order."""
    X = pa.placeholder((2, 3, 8, 8), name="X")
    Y = pa.nn.pool2d(X, 2, 1, 0, "max")
    H = pa.placeholder(Y.shape, name="H")
    [dX] = pa.differentiate(Y, [X], H)
    form = scatter_form(dX.op)
    assert [str(v) for v in form.loop] == ["i0", "i1", "rh_at", "rw_at"] and form.order == (-1, -1)
    assert [str(e) for a, e in form.steps] == ["int64(pool2d_argmax.v0[i0, i1, rh_at, rw_at])"]
    assert [(d, str(p)) for d, p in form.picks] == [(2, "int64(rh_at) + pa_a0//2"), (3, "int64(rw_at) + pa_a0%2")]
    src = generate([dX], [X, H], "naive").source
    assert "for (int c0 = -6; c0 <= 0; c0 += 1)" in src and "int const rh_at = -c0;" in src


def test_a_guard_that_only_the_check_can_test_keeps_the_gather_unless_the_read_is_inside_without_it():
    """``i >= r and A[i - r] == r``: over the positions ``r_at = i - r`` the guard reads the picked ``i``, so only
    the check after the read could test it, and ``A[r_at]`` would be read for r_at in [-3, 8] (a helper found it).
    Without the guard the read is inside its tensor over the domain, and the stage scatters."""
    A = pa.placeholder((9,), name="A", dtype="int32")
    G = pa.placeholder((64,), name="G")
    r = pa.reduce_axis((0, 4), name="r")
    T = pa.compute((9,), lambda i: pa.sum(pa.select(pa.logical_and(i >= r, A[i - r] == r), G[i - r], 0.0), axis=r),
                   name="T")
    assert scatter_form(T.op) is None
    r = pa.reduce_axis((0, 4), name="r")
    U = pa.compute((9,), lambda i: pa.sum(G[i - r + 3], axis=r, where=A[i - r + 3] == r), name="U")
    form = scatter_form(U.op)
    assert form is not None and [str(v) for v in form.loop] == ["r_at"] and form.order == (-1,)


def test_naive_program_zeroes_then_adds_at_the_computed_index_without_a_comparison_per_output_point():
    dW, I, H = _take_grad(V=50, C=6, index_shape=(40,))
    prog = generate([dW], [I, H], "naive")
    roles = sorted(ist.role for ist in prog.tree.statements.values())
    assert roles == ["scatter", "zero"]
    src = prog.source
    assert "==" not in src and "acc" not in src and "const long t0 = (long)max(min(I[i0_1], 49), 0);" in src
    assert "if (t0 >= 0L && t0 <= 49L)" in src and "d_W_from_take[i0 * 6 + i1] = 0.0f;" in src
    assert "d_W_from_take[i0 * 6 + i1] = d_W_from_take[i0 * 6 + i1] + H[i0_1 * 6 + i1];" in src
    # tiles of 1 along the picked dimension are blocks of the scatter, the block's points innermost
    blocked = generate([dW], [I, H], Schedule("b", stages={dW.op.name: StageSchedule(tile=(1, 3))})).source
    assert "==" not in blocked and "for (int c1 = 3 * gid0; c1 <= ((3 * gid0) + 2); c1 += 1)" in blocked
    scatter = blocked[blocked.index("for (int c0 = 0; c0 <= 39; c0 += 1)"):]  # the reduction loop, then the block's
    assert scatter.index("c1 = 3 * gid0") < scatter.index("const long t0")
    # other tiles, vectors or unrolling keep the gather
    for ss in (StageSchedule(tile=(2, 6)), StageSchedule(tile=(1, 6), vectorize=2), StageSchedule(unroll=2)):
        src = generate([dW], [I, H], Schedule("t", stages={dW.op.name: ss})).source
        assert "== i0" in src and "_zero" not in src, ss


@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_matches_the_oracle_and_the_tiled_gather_bit_for_bit(opencl, mode, axis):
    rng = np.random.default_rng(axis)
    dW, I, H = _take_grad(V=50, C=6, index_shape=(5, 8), axis=axis, mode=mode)
    lo, hi = (0, 50) if mode == "raise" else (-70, 130)  # clip and wrap take any index
    i = rng.integers(lo, hi, (5, 8)).astype(np.int32)
    i[1] = i[0]  # repeated rows: contributions add up
    h = rng.standard_normal(H.shape).astype(np.float32)
    [ref] = _oracle([dW], [I, H], [i, h])
    [scattered] = _run([dW], [I, H], [i, h], "naive")
    np.testing.assert_allclose(scattered, ref, rtol=1e-5, atol=1e-6)
    tile = (2, 6) if axis == 0 else (6, 2)
    [gathered] = _run([dW], [I, H], [i, h], Schedule("t", stages={dW.op.name: StageSchedule(tile=tile)}))
    assert np.array_equal(scattered, gathered)  # the same additions in the same order at every point
    blocks = (1, 4) if axis == 0 else (4, 1)  # a ragged last block: 6 = 4 + 2
    [blocked] = _run([dW], [I, H], [i, h], Schedule("b", stages={dW.op.name: StageSchedule(tile=blocks)}))
    assert np.array_equal(scattered, blocked)


def test_a_product_is_rounded_before_it_is_added_as_the_gather_rounds_it(opencl):
    """``T + a * b`` in one C statement contracts to a fused multiply-add, one rounding fewer than the gather's
    ``acc + (c ? a * b : 0)``: the scatter adds a temporary (12 of 30 points differed, a helper found)."""
    rng = np.random.default_rng(6)
    H = pa.placeholder((64, 6), name="H")
    G = pa.placeholder((64, 6), name="G")
    I = pa.placeholder((64,), name="I", dtype="int32")
    k = pa.reduce_axis((0, 64), name="k")
    T = pa.compute((5, 6), lambda v, c: pa.sum(pa.select(I[k] == v, H[k, c] * G[k, c], 0.0), axis=k), name="T")
    assert scatter_form(T.op) is not None
    feeds = [rng.integers(0, 5, 64).astype(np.int32), rng.standard_normal((64, 6)).astype(np.float32),
             rng.standard_normal((64, 6)).astype(np.float32)]
    [scattered] = _run([T], [I, H, G], feeds, "naive")
    [gathered] = _run([T], [I, H, G], feeds, Schedule("t", stages={"T": StageSchedule(tile=(2, 6))}))
    assert np.array_equal(scattered, gathered)


def test_a_sum_from_negative_zero_stays_a_gather():
    """-0.0 + 0.0 is +0.0: the gather's first added zero turns the identity positive, a scatter's zeroing would
    leave -0.0 where no index lands."""
    H = pa.placeholder((30, 6), name="H")
    I = pa.placeholder((30,), name="I", dtype="int32")
    k = pa.reduce_axis((0, 30), name="k")
    for zero, scatters in ((-0.0, False), (0.0, True)):
        add = pa.comm_reducer(lambda a, b: a + b, lambda dtype, z=zero: pa.const(z, dtype), name=f"add{zero}")
        T = pa.compute((50, 6), lambda v, c: add(pa.select(I[k] == v, H[k, c], 0.0), axis=k), name="T")
        assert (scatter_form(T.op) is not None) == scatters, zero


def test_one_dimensional_float64_table(opencl):
    rng = np.random.default_rng(3)
    W = pa.placeholder((50,), name="W", dtype="float64")
    I = pa.placeholder((30,), name="I", dtype="int64")
    H = pa.placeholder((30,), name="H", dtype="float64")
    [dW] = pa.differentiate(pa.ops.take(W, I), [W], H)
    assert scatter_form(dW.op) is not None
    i, h = rng.integers(0, 50, 30), rng.standard_normal(30)
    expect = np.zeros(50)
    np.add.at(expect, i, h)
    np.testing.assert_allclose(_run([dW], [I, H], [i, h], "naive")[0], expect, rtol=1e-12)


def test_a_value_is_tested_against_what_its_comparison_can_match_before_any_arithmetic(opencl):
    """``A[k] == 2*v and B[k] == v``: isl's check says ``2*b == a``, which wraps for ``b`` near int64's limits and
    picked v = 3 for B = INT64_MIN + 3 (a helper found it).  Each value is first kept within what its affine side
    takes over the domain: ``0 <= a <= 18``, ``0 <= b <= 9``."""
    A = pa.placeholder((1,), name="A", dtype="int64")
    B = pa.placeholder((1,), name="B", dtype="int64")
    G = pa.placeholder((1,), name="G")
    k = pa.reduce_axis((0, 1), name="k")
    T = pa.compute((10,), lambda v: pa.sum(pa.select(pa.logical_and(A[k] == 2 * v, B[k] == v), G[k], 0.0), axis=k),
                   name="T")
    assert [(lo, hi) for _, lo, hi in scatter_form(T.op).ranges] == [(0, 18), (0, 9)]
    feeds = [np.array([6]), np.array([np.iinfo(np.int64).min + 3]), np.array([1.0], np.float32)]
    assert not _run([T], [A, B, G], feeds, "naive")[0].any()
    feeds[1][0] = 3
    assert _run([T], [A, B, G], feeds, "naive")[0].tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]


def test_a_comparison_whose_affine_side_is_not_index_sized_stays_a_gather():
    """``A[k] == 2**62 * v``: the gather computes ``2**62 * v`` in int64, wrapping, and the scatter's isl constants
    would not fit a C literal."""
    A = pa.placeholder((4,), name="A", dtype="int64")
    G = pa.placeholder((4,), name="G")
    k = pa.reduce_axis((0, 4), name="k")
    T = pa.compute((4,), lambda v: pa.sum(pa.select(A[k] == pa.const(2**62, "int64") * pa.cast(v, "int64"), G[k], 0.0),
                                          axis=k), name="T")
    assert scatter_form(T.op) is None


def test_an_affine_conjunct_still_guards_the_read_after_it(opencl):
    """``k < 30 and I[k] == v`` over k < 40 with I of 30: the read of I[k] stays under its guard (the check alone,
    after it, would have read past the buffer)."""
    rng = np.random.default_rng(8)
    H = pa.placeholder((40, 6), name="H")
    I = pa.placeholder((30,), name="I", dtype="int32")
    k = pa.reduce_axis((0, 40), name="k")
    T = pa.compute((50, 6), lambda v, c: pa.sum(pa.select(pa.logical_and(k < 30, I[k] == v), H[k, c], 0.0), axis=k),
                   name="T")
    form = scatter_form(T.op)
    assert [(str(a), str(e)) for a, e in form.steps] == [("None", "k < 30"), ("pa_a0", "int64(I[k])")]
    assert form.check is None  # k <= 29: tested already; 0 <= a <= 49 as a is bound
    src = generate([T], [I, H], "naive").source
    assert src.index("if (k < 30)") < src.index("(long)I[k]")
    feeds = [rng.integers(0, 50, 30).astype(np.int32), rng.standard_normal((40, 6)).astype(np.float32)]
    np.testing.assert_allclose(_run([T], [I, H], feeds, "naive")[0], _oracle([T], [I, H], feeds)[0], rtol=1e-6)


def test_a_flattened_table_picks_both_dimensions(opencl):
    """``take(W, I)`` without an axis reads ``W[I[k] // 7, I[k] % 7]``: each k adds at one point, in one loop."""
    rng = np.random.default_rng(5)
    W = pa.placeholder((20, 7), name="W")
    I = pa.placeholder((30,), name="I", dtype="int32")
    H = pa.placeholder((30,), name="H")
    [dW] = pa.differentiate(pa.ops.take(W, I), [W], H)
    form = scatter_form(dW.op)
    assert form.dims == (0, 1) and form.domain.dim(isl.dim_type.set) == 1
    prog = generate([dW], [I, H], "naive")
    assert "==" not in prog.source and prog.source.count("if (") == 2  # each index inside its range
    i, h = rng.integers(-5, 150, 30).astype(np.int32), rng.standard_normal(30).astype(np.float32)
    i[:4] = 33
    expect = np.zeros(140)
    np.add.at(expect, np.clip(i, 0, 139), h)
    np.testing.assert_allclose(_run([dW], [I, H], [i, h], "naive")[0], expect.reshape(20, 7), rtol=1e-6)


def test_conjuncts_before_the_comparison_guard_the_index_and_those_after_it_the_value(opencl):
    rng = np.random.default_rng(4)
    J = pa.placeholder((30,), name="J", dtype="int32")

    def body(H, I, k, v, c):
        return pa.select(pa.logical_and(pa.logical_and(J[k] > 0, I[k] == v), c < 4), H[k, c], 0.0)

    T, I, H = _sum(body)
    form = scatter_form(T.op)
    assert [(str(a), str(e)) for a, e in form.steps] == [
        ("None", "J[k] > 0"), ("pa_a0", "int64(I[k])"), ("None", "c < 4")]
    assert form.check is None and [(lo, hi) for _, lo, hi in form.ranges] == [(0, 49)]
    feeds = [rng.integers(-3, 53, 30).astype(np.int32), rng.integers(-1, 2, 30).astype(np.int32),
             rng.standard_normal((30, 6)).astype(np.float32)]
    [ref] = _oracle([T], [I, J, H], feeds)
    np.testing.assert_allclose(_run([T], [I, J, H], feeds, "naive")[0], ref, rtol=1e-6)
    W, _, _ = _sum(lambda H, I, k, v, c: H[k, c] * 2.0, where=lambda I, k, v: I[k] == v, name="W")
    assert scatter_form(W.op) is not None  # where= is the select's condition


def test_the_model_prices_the_scatter_and_auto_builds_it_with_its_producers_inlined():
    """An embedding table's gradient, 10000 x 64 from 4096 rows: the gather compares every row with every index
    (2.6e9 iterations, 17 ms on the Zen 5 VM), the scatter adds each index's row once (0.4 ms)."""
    dW, I, H = _take_grad(V=10000, C=64, index_shape=(4096,))
    info = stage_info(dW.op)
    assert info.scatter.iterations == 64 * 4096 and info.iterations == 10000 * 64 * 4096
    naive = stage_cost(info, StageSchedule(), ZEN5)
    assert naive * 20 < stage_cost(info, StageSchedule(tile=(4, 64), vectorize=16), ZEN5)
    chosen = auto_schedule([dW], device=ZEN5).for_stage(dW.op.name)
    # rows in blocks, not a work-item a column (measured 4.4-5.5x slower: cost.SCATTER_COLUMNS)
    assert scatter_form(dW.op).blocks(chosen, 2) is not None and chosen.tile[-1] >= 4
    # on a GPU a work-item's chain of 4096 read-modify-writes costs at least as many round trips (unmeasured
    # there): auto keeps a gather
    assert stage_cost(info, StageSchedule(), GPU) >= 4096 * cost.SCATTER_GPU_ROUND_TRIP_S
    assert stage_cost(info, StageSchedule(tile=(1, 8)), GPU) >= 8 * 4096 * cost.SCATTER_GPU_ROUND_TRIP_S
    assert scatter_form(dW.op).blocks(auto_schedule([dW], device=GPU).for_stage(dW.op.name), 2) is None
    # a model's gradient: the producers of the scattered value are evaluated once per reduction point, inlined
    W = pa.placeholder((50, 6), name="W")
    I = pa.placeholder((30,), name="I", dtype="int32")
    X = pa.placeholder((30, 6), name="X")
    E = pa.ops.take(W, I, axis=0)
    Z = pa.compute((30, 6), lambda a, b: pa.tanh(E[a, b]) * X[a, b], name="Z")
    H = pa.placeholder((30, 6), name="H")
    [dW] = pa.differentiate(Z, [W], H)
    sched = auto_schedule([dW], device=ZEN5)
    assert {"take", "d_take_from_Z"} <= sched.inline
    text = pa.show(dW, schedule=sched)
    assert "scatter d_W_from_take: d_W_from_take[pa_a0, i1] += H[i0_1, i1]*X[i0_1, i1]" in text


def test_show_says_where_a_stage_scatters():
    dW, _, _ = _take_grad(V=50, C=6, index_shape=(40,))
    assert ("scatter d_W_from_take: d_W_from_take[pa_a0, i1] += H[i0_1, i1] where pa_a0 = int64(max(min(I[i0_1], 49), "
            "0)) in [0, 49], in the reduction's order") in pa.show(dW, schedule="naive")
    blocked = Schedule("b", stages={dW.op.name: StageSchedule(tile=(1, 3))})
    assert "scatter d_W_from_take:" in pa.show(dW, schedule=blocked)
    tiled = Schedule("t", stages={dW.op.name: StageSchedule(tile=(2, 6))})
    assert "scatter" not in pa.show(dW, schedule=tiled)
