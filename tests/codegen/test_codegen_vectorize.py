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


def test_lane_dependent_selects_and_transposed_reads_go_lane_by_lane():
    A = pa.placeholder((4, 8), name="A")
    C = pa.placeholder((8, 4), name="C")
    Y = pa.compute((4, 8), lambda i, j: pa.select(j > i, A[i, j], C[j, i]) + pa.cast(j, "float32"), name="Y")
    prog = generate([Y], [A, C], Schedule("v", stages={"Y": StageSchedule(tile=(1, 8), vectorize=8)}))
    (st,) = _blocks(prog, "assign")
    forms = vz.vectorize_block(st).values.forms.values()
    kinds = {type(f).__name__ for f in forms}
    assert {"Ramp", "ScalarLanes", "Lanes", "VecLoad", "Convert", "VecOp"} <= kinds
    assert [f.tensor.name for f in forms if isinstance(f, vz.VecLoad)] == ["A"]
    lanes = [f.expr for f in forms if isinstance(f, vz.Lanes)]  # the select, and the gather C[j, i]
    assert sorted(getattr(e, "op", None) or e.tensor.name for e in lanes) == ["C", "select"]


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
    """A select printed lane by lane is ``select()`` over reads isl proves in bounds (no branch a lane: a max-pool
    gradient's argmax matches are unpredictable, and the branches ran it 6x slower); a read it cannot prove stays
    under its condition, in a ``?:``."""
    import numpy as np

    Y, ins = _upsampled_mask()
    ss = StageSchedule(tile=(1, 8), vectorize=4)
    src = generate([Y], ins, Schedule("v", stages={"Y": ss})).source
    assert "select(0.0f, H[" in src and "? H[" not in src and "min(max(" not in src
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
