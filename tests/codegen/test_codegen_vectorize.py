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
