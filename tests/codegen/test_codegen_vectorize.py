"""The vectorisation pass (codegen/vectorize.py): vector decisions as data, before printing."""

import polyad as pa
from polyad.codegen import vectorize as vz
from polyad.pipeline import generate
from polyad.schedule import Schedule, StageSchedule


def _blocks(prog, role):
    return [ist for ist in prog.tree.statements.values() if ist.kind == "block" and ist.role == role]


def test_dense_update_loads_the_row_as_a_vector_and_broadcasts_the_rest():
    X = pa.placeholder((5, 7), name="X")
    W = pa.placeholder((7, 16), name="W")
    k = pa.reduce_axis((0, 7), name="k")
    T = pa.compute((5, 16), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="T")
    prog = generate([T], [X, W], Schedule("v", stages={"T": StageSchedule(tile=(1, 8), vectorize=4)}))
    (upd,), (init,), (final,) = _blocks(prog, "update"), _blocks(prog, "init"), _blocks(prog, "final")
    plan = vz.vectorize_block(upd)
    assert plan.width == 4 and isinstance(plan.lane, vz.Ramp) and plan.lane.var is upd.stmt.out_vars[-1]
    forms = list(plan.values.forms.values())
    loads = [f for f in forms if isinstance(f, vz.VecLoad)]
    assert [f.tensor.name for f in loads] == ["W"] and loads[0].contiguous
    assert any(isinstance(f, vz.VecOp) and f.call.op == "mul" for f in forms)  # X[i, k] stays scalar
    assert not any(isinstance(f, vz.Lanes) for f in forms)
    assert all(isinstance(o, vz.VecVar) for o in plan.operands) and plan.combine is not None
    assert isinstance(vz.vectorize_block(init).init[0], vz.Broadcast)
    assert [(s.width, s.contiguous) for s in vz.vectorize_block(final).stores] == [(4, True)]
    assert "vload4(0, W + " in prog.source and "vstore4(" in prog.source


def test_selects_by_vector_masks_are_vector_selects_and_gathers_and_bool_reads_go_lane_by_lane(opencl):
    """A comparison of vectors is a mask (OpenCL's -1 a true lane) and a select by it OpenCL's ``select()`` of
    whole vectors (a max-pool gradient's argmax match, a relu mask); a transposed read is gathered lane by lane,
    and a bool read from memory has no mask: what uses it goes lane by lane."""
    import numpy as np

    A = pa.placeholder((4, 8), name="A")
    C = pa.placeholder((8, 4), name="C")
    B = pa.placeholder((4, 8), "bool", name="B")
    Y = pa.compute((4, 8), lambda i, j: pa.select((j > i) | (A[i, j] < 0.5), A[i, j], C[j, i])
                   + pa.cast(j, "float32"), name="Y")
    Z = pa.compute((4, 8), lambda i, j: pa.select(B[i, j] & (j > i), A[i, j], 1.0), name="Z")
    ss = StageSchedule(tile=(1, 8), vectorize=8)
    s = Schedule("v", stages={"Y": ss, "Z": ss})
    prog = generate([Y, Z], [A, C, B], s)
    y, z = sorted(_blocks(prog, "assign"), key=lambda i: i.stage.name)
    forms = vz.vectorize_block(y).values.forms.values()
    kinds = {type(f).__name__ for f in forms}
    assert {"Ramp", "VecMask", "VecSelect", "Lanes", "VecLoad", "Convert", "VecOp"} == kinds
    assert [f.tensor.name for f in forms if isinstance(f, vz.VecLoad)] == ["A"]
    assert [f.expr.tensor.name for f in forms if isinstance(f, vz.Lanes)] == ["C"]  # the gather C[j, i]
    zforms = vz.vectorize_block(z).values.forms.values()
    assert {type(f).__name__ for f in zforms} == {"Ramp", "VecMask", "ScalarLanes", "VecLoad", "Lanes"}
    assert "select((float8)(C[" in prog.source
    rng = np.random.default_rng(3)
    arrays = [rng.random((4, 8)).astype("float32"), rng.random((8, 4)).astype("float32"), rng.random((4, 8)) < 0.5]
    for g, w in zip(pa.build([Y, Z], [A, C, B], schedule=s)(*arrays), pa.evaluate([Y, Z], dict(zip([A, C, B], arrays)))):
        np.testing.assert_array_equal(g, w)


def test_scalar_blocks_have_no_vector_forms():
    A = pa.placeholder((4, 8), name="A")
    Y = pa.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="Y")
    prog = generate([Y], [A], Schedule("v", stages={"Y": StageSchedule(tile=(2, 4))}))
    (st,) = _blocks(prog, "assign")
    plan = vz.vectorize_block(st)
    assert plan.width == 1 and plan.values is None and [(s.width, s.tensor.name) for s in plan.stores] == [(1, "Y")]


def _upsampled_mask():
    """``Y[i, j] = M[i, j // 2] == j % 2 ? H[i, j // 2] : 0``: a max-pool gradient's shape."""
    M = pa.placeholder((4, 8), "int32", name="M")
    H = pa.placeholder((4, 8), name="H")
    return pa.compute((4, 16), lambda i, j: pa.select(M[i, j // 2] == j % 2, H[i, j // 2], pa.const(0.0)),
                      name="Y"), [M, H]


def test_a_lane_by_lane_select_reads_its_in_bounds_operands_always_and_selects(opencl):
    """A select by a vector comparison is ``select()`` of vectors over reads isl proves in bounds (no branch a lane:
    a max-pool gradient's argmax matches are unpredictable, and the branches ran it 6x slower); a read it cannot
    prove stays under its condition, lane by lane in a ``?:``."""
    import numpy as np

    Y, ins = _upsampled_mask()
    ss = StageSchedule(tile=(1, 8), vectorize=4)
    src = generate([Y], ins, Schedule("v", stages={"Y": ss})).source
    assert "select((float4)(0.0f), (float4)(H[" in src and "? H[" not in src and "min(max(" not in src
    M, H = ins
    # a read past H's rows where its condition is false (j >= 14): isl's proof is over the whole domain, so it
    # stays under its condition
    G = pa.compute((4, 16), lambda i, j: pa.select((M[i, j // 2] == j % 2) & (j < 14), H[i, j // 2 + 1],
                                                   pa.const(0.0)), name="G")
    guarded = generate([G], [M, H], Schedule("v", stages={"G": ss})).source
    assert "? H[" in guarded and "select(0.0f, H[" not in guarded
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 2, (4, 8)).astype("int32"), rng.standard_normal((4, 8)).astype("float32")]
    for t, src_ins in ((Y, ins), (G, [M, H])):
        m = pa.build([t], src_ins, schedule=Schedule("v", stages={t.op.name: ss}))
        np.testing.assert_array_equal(m(*arrays)[0], pa.evaluate([t], dict(zip(src_ins, arrays)))[0])


def test_a_vectorised_min_max_is_one_vector_op_and_propagates_nan(opencl):
    """max and min are vector ops (a NaN-propagating ``select`` helper for floats, OpenCL's ``max`` for ints): printed
    lane by lane, a guarded max pool's combine rebuilt the whole value vector in each of its 16 lanes (3.4x the time)."""
    import numpy as np

    X = pa.placeholder((2, 20), name="X")
    N = pa.placeholder((2, 20), "int32", name="N")
    r = pa.reduce_axis((0, 3), name="r")
    Y = pa.compute((2, 16), lambda i, j: pa.max(pa.select(j + r - 1 >= 0, X[i, j + r], pa.const(-1.0)), axis=r),
                   name="Y")
    Z = pa.compute((2, 16), lambda i, j: pa.min(pa.min(N[i, j + r], N[i, j + r + 1] * 2), axis=r), name="Z")
    ss = StageSchedule(tile=(1, 16), vectorize=8)
    s = Schedule("v", stages={"Y": ss, "Z": ss})
    prog = generate([Y, Z], [X, N], s)
    for name in ("Y", "Z"):
        (upd,) = [i for i in _blocks(prog, "update") if i.stage.name == name]
        plan = vz.vectorize_block(upd)
        op = "max" if name == "Y" else "min"
        assert [f.call.op for f in plan.combine.forms.values() if isinstance(f, vz.VecOp)] == [op]
    src = prog.source
    assert "static inline float8 pa_fmax_f32x8(float8 a, float8 b)" in src and "= min(acc" in src
    assert src.count("X[") <= 8 * 2  # the guarded read: once a lane, not once a lane per lane
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 20)).astype("float32")
    x[0, 5], x[1, 17] = np.nan, np.inf
    n = rng.integers(-100, 100, (2, 20)).astype("int32")
    got = pa.build([Y, Z], [X, N], schedule=s)(x, n)
    for g, w in zip(got, pa.evaluate([Y, Z], {X: x, N: n})):
        np.testing.assert_array_equal(g, w)
    assert np.isnan(got[0][0, 3:6]).all() and np.isinf(got[0][1, 15])


def test_a_combine_printed_lane_by_lane_reads_its_value_from_one_temporary(opencl):
    """A reducer whose combine has no vector form (a select by a cast to bool, which has no mask: "first nonzero")
    takes its value from one vector temporary: substituted into each lane, the guarded value was printed whole
    once a lane."""
    import numpy as np

    first = pa.comm_reducer(lambda a, b: pa.select(pa.cast(a, "bool"), a, b), lambda t: pa.const(0.0, t), name="first")
    X = pa.placeholder((2, 20), name="X")
    r = pa.reduce_axis((0, 3), name="r")
    Y = pa.compute((2, 16), lambda i, j: first(pa.select(j + r - 1 >= 0, X[i, j + r], pa.const(0.0)), axis=r),
                   name="Y")
    s = Schedule("v", stages={"Y": StageSchedule(tile=(1, 16), vectorize=8)})
    prog = generate([Y], [X], s)
    (upd,) = _blocks(prog, "update")
    assert any(isinstance(f, vz.Lanes) for f in vz.vectorize_block(upd).combine.forms.values())
    assert prog.source.count("X[") <= 8 * 2 and "y0.s7" in prog.source
    x = np.random.default_rng(2).standard_normal((2, 20)).astype("float32")
    x[:, ::3] = 0.0
    np.testing.assert_array_equal(pa.build([Y], [X], schedule=s)(x)[0], pa.evaluate([Y], {X: x})[0])


def test_a_select_by_a_lane_free_condition_picks_whole_vectors(opencl):
    """An embedding's gradient sums ``select(I[k] == r, H[k, c], 0)`` along k, vectorised along c: one condition
    for every lane, which picked lane by lane ran 450 ms (10000x64 table, 4096 indices), 20 ms as whole vectors."""
    import numpy as np

    I = pa.placeholder((6,), "int32", name="I")
    H = pa.placeholder((6, 16), name="H")
    k = pa.reduce_axis((0, 6), name="k")
    D = pa.compute((5, 16), lambda r, c: pa.sum(pa.select(I[k] == r, H[k, c], pa.const(0.0)), axis=k), name="D")
    s = Schedule("v", stages={"D": StageSchedule(tile=(1, 16), vectorize=8)})
    prog = generate([D], [I, H], s)
    (upd,) = _blocks(prog, "update")
    assert any(isinstance(f, vz.VecSelect) for f in vz.vectorize_block(upd).values.forms.values())
    assert "? vload8(0, H + " in prog.source and ".s7" not in prog.source
    i = np.array([0, 3, 3, 4, 0, 2], np.int32)
    h = np.random.default_rng(5).standard_normal((6, 16)).astype("float32")
    np.testing.assert_allclose(pa.build([D], [I, H], schedule=s)(i, h)[0], pa.evaluate([D], {I: i, H: h})[0],
                               rtol=1e-6)
