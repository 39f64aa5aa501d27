"""rfactor with ``axis_last``: a weight gradient's partials in lanes along the batch, its operands read through copies
with the batch last (rule rfactor_batch_lanes, and a graph move of the tuner's)::

    H_t[o, y, x, b] = H[b, o, y, x]                                    { H[b, o, y, x] -> H_t[o, y, x, b] }
    X_t[c, y, x, b] = X[b, c, y, x]
    dW_rf[o, c, kh, kw, b_i] = sum_{b_o, y, x} H_t[o, y, x, 16b_o + b_i] * X_t[c, y + kh, x + kw, 16b_o + b_i]
    dW[o, c, kh, kw] = sum_{b_i} dW_rf[o, c, kh, kw, b_i]

Partials along x (rfactor_lanes) have ragged last lanes on rows of 26 and load shifted rows; along the batch
every lane is full and every load an aligned vector.  Three layers: against ``pa.evaluate`` on random
convolutions, the form, its errors and the auto-scheduler's choice, and an OpenCL build against ``pa.evaluate``.
conv2d_3x3's backward: 0.81x auto's lanes along x, conv2d_5x5_s3's 0.80x (docs/benchmarks.md, 21st session).
"""

import pathlib
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import polyad as pa
from polyad.errors import ScheduleError
from polyad.schedule import RFactor, Schedule
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import (_reduction_form, axis_movable, reduction_axis_last, rfactor, stage_ops,
                                   uniquely_named)
from polyad.schedule.space import _rfactor_options, graph_decisions
from polyad.te.expr import Load
from polyad.te.visit import post_order
from polyad.tuner.configs import graph_moves

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402
from conv_cases import ZEN5, conv_grads, random_convs  # noqa: E402


def _batch_axis(op):
    """The reduction axis of a conv weight gradient that both operands index first (the batch)."""
    _, _, red = _reduction_form(op)
    return next(a.name for a in red if axis_movable(op, a.name) is None)


@settings(max_examples=25, deadline=None)
@given(case=random_convs())
def test_batch_lanes_equal_evaluate_on_random_convolutions(case):
    size, strides, pad, dil, k = case
    grads, feeds = conv_grads(size, strides, pad, dil, k=k, batch=8)
    dW = grads[1]
    ax = _batch_axis(dW.op)
    want = pa.evaluate(grads, feeds)
    for f in (4, 8):
        new = rfactor(grads, dW.name, f, axis=ax, interleave=True, axis_last=True)
        for a, b in zip(pa.evaluate(new, feeds), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        part = stage_ops(new)[1][f"{dW.name}_rf"]
        assert part.shape == dW.shape + (f,)


def test_the_copies_and_the_partials_loads():
    grads, _ = conv_grads(8, 1, 0, 1, k=3, batch=16)
    dW = grads[1]
    ax = _batch_axis(dW.op)
    assert ax == "b"
    new = rfactor(grads, dW.name, 16, axis="b", interleave=True, axis_last=True)
    ops = stage_ops(new)[1]
    for name, src in (("H_t", "H"), ("X_t", "X")):  # { T[b, c, y, x] -> T_t[c, y, x, b] }, a kernel each
        (st,) = ops[name].statements
        (ld,) = [n for n in post_order(st.values) if isinstance(n, Load)]
        assert ld.tensor.name == src and str(ld) == f"{src}[j3, j0, j1, j2]"
        assert ops[name].shape == ld.tensor.shape[1:] + ld.tensor.shape[:1]
        assert ops[name].attrs == {"moved_last_for": dW.name}
    part = ops[f"{dW.name}_rf"]
    reads = sorted(str(n) for n in post_order(part.body) if isinstance(n, Load))
    assert reads == ["H_t[i0, y, x, b_o*16 + b_i]", "X_t[i1, y + i2, x + i3, b_o*16 + b_i]"]
    # dX reads neither copy: its own layout is its own decision
    assert {t.name for t in ops[grads[0].name].input_tensors} == {"H", "W"}


def test_errors_name_the_stage_and_the_axis():
    grads, _ = conv_grads(8, 1, 0, 1, k=3, batch=16)
    dW = grads[1]
    with pytest.raises(ScheduleError, match=r"reduction_axis_last: stage 'd_W_from_conv2d' has no reduction axis 'q'"):
        reduction_axis_last(grads, dW.name, "q")
    with pytest.raises(ScheduleError, match=r"there is no stage 'nope'"):
        reduction_axis_last(grads, "nope", "b")
    with pytest.raises(ScheduleError, match="axis_last goes with the interleaved form"):
        rfactor(grads, dW.name, 8, axis="b", interleave=False, axis_last=True)
    # x is read as x and as y + kh's neighbour x + kw: not one plain index
    with pytest.raises(ScheduleError, match=r"reads X with 'x' other than as one plain index"):
        reduction_axis_last(grads, dW.name, "x")
    # a row sum reads its axis last already
    A = pa.placeholder((4, 32), name="A")
    r = pa.reduce_axis((0, 32), name="r")
    S = pa.compute((4,), lambda i: pa.sum(A[i, r], axis=r), name="S")
    with pytest.raises(ScheduleError, match=r"stage 'S' reads 'r' last in every operand already"):
        reduction_axis_last([S], "S", "r")
    E = pa.compute((4,), lambda i: S[i] * 2.0, name="E")
    with pytest.raises(ScheduleError, match=r"reduction_axis_last: stage 'E' is not a reduction"):
        reduction_axis_last([E], "E", "r")


def test_the_decision_is_schedule_data():
    spec = RFactor(16, "b", True, axis_last=True)
    s = Schedule("t", rfactor={"d_W_from_conv2d": spec})
    back = Schedule.from_json(s.to_json())
    assert back.rfactor == {"d_W_from_conv2d": spec}
    assert RFactor.of(spec.to_data()) == spec and spec.to_data()["axis_last"] is True
    assert "axis_last" not in RFactor(16, "b", True).to_data()  # older schedules read and write as before
    assert spec.describe() == "16 over b, interleaved, its operands read with b last"
    with pytest.raises(ScheduleError, match="axis_last must be true, false or null"):
        RFactor(8, "b", True, axis_last="yes")


def test_auto_takes_it_where_the_rows_give_no_whole_vectors_and_the_batch_two():
    """rfactor_batch_lanes: conv2d_3x3 (rows of 26: ragged lanes of 8) and conv2d_5x5_s3 (x at stride 3, which
    no longer gets a de-interleaved copy); not conv2d_dilated (batch 8, under two vectors of 16) nor lenet_step
    (rows of 24 and 8: whole vectors; its heads are computed)."""
    for name, ax in (("conv2d_3x3", "b"), ("conv2d_5x5_s3", "b")):
        outs = uniquely_named(dict(auto_golden.graphs(name, None))["bwd"])
        s = auto_schedule(outs, device=ZEN5)
        assert s.rfactor["d_W_from_conv2d"] == RFactor(16, ax, True, axis_last=True), name
        assert not s.space_to_depth, name
        assert any(n.startswith("rfactor d_W_from_conv2d by 16 over b, interleaved, its operands read with b last")
                   for n in s.notes)
        g = graph_decisions(outs, ZEN5)
        ops = stage_ops(g.outputs)[1]
        part = ops["d_W_from_conv2d_rf"]
        # lane_partials' block: the lanes whole, outer outputs sharing loads in registers
        assert s.stages[part.name].vectorize == 16 and s.stages[part.name].tile[-1] == 16
        copies = [o for o in stage_ops(g.outputs)[0] if "moved_last_for" in getattr(o, "attrs", {})]
        # one copy per tensor and layout: conv2d_5x5_s3's data gradient (batch innermost) reads dW's copy of H
        keys = [(tuple(t.name for t in o.input_tensors), o.shape) for o in copies]
        assert len(keys) == len(set(keys)), keys
    for name in ("conv2d_dilated", "lenet_step"):
        s = auto_schedule(dict(auto_golden.graphs(name, None))["bwd"], device=ZEN5)
        assert not any(isinstance(v, RFactor) and v.axis_last for v in s.rfactor.values()), name


def test_the_tuner_can_move_back_to_the_lanes_along_the_rows():
    """Where auto took the batch lanes, one graph move is rfactor_lanes' own proposal (measured slower here, maybe
    not on the user's machine)."""
    outs = uniquely_named(dict(auto_golden.graphs("conv2d_3x3", None))["bwd"])
    auto = auto_schedule(outs, device=ZEN5)
    moves = [m.value for m, _ in graph_moves(outs, auto, ZEN5) if m.field == "rfactor" and m.name == "d_W_from_conv2d"]
    assert RFactor(8, "x", True) in moves and None in moves  # the rows' lanes, and no rfactor at all
    # conv2d_5x5_s3's data gradient is a sum to pad only once its crop is folded: the rows' lanes are looked for on
    # auto's folded and padded graph (padded unfolded, the tuner stopped on a ScheduleError before its first trial)
    outs = uniquely_named(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"])
    auto = auto_schedule(outs, device=ZEN5)
    assert auto.fold == auto.pad == {"d_X_from_conv2d_pad"} and RFactor.of(auto.rfactor["d_W_from_conv2d"]).axis_last
    whys = [w for _, w in graph_moves(outs, auto, ZEN5)]
    assert "no pad_reads of d_X_from_conv2d_pad" in whys and "no rfactor of d_W_from_conv2d" in whys


def test_the_space_and_the_tuners_moves_hold_it():
    """At this size (under rfactor_lanes' min_iterations) not the auto-scheduler's choice: one of the rfactor forms
    the tuner's space holds, and one graph move."""
    grads, _ = conv_grads(8, 1, 0, 1, k=3, batch=32)
    dW = grads[1]
    opts = [o for o in _rfactor_options(dW.op) if isinstance(o, RFactor) and o.axis_last]
    assert {(o.factor, o.axis) for o in opts} == {(4, "b"), (8, "b"), (16, "b")}
    auto = auto_schedule(grads, device=ZEN5)
    assert not any(isinstance(v, RFactor) and v.axis_last for v in auto.rfactor.values())
    moves = [m for m, _ in graph_moves(grads, auto, ZEN5) if isinstance(m.value, RFactor) and m.value.axis_last]
    assert [(m.name, m.value.factor) for m in moves] == [(dW.name, ZEN5.vector_width)]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_built_batch_lanes_equal_evaluate():
    grads, feeds = conv_grads(10, 1, 1, 1, k=3, c_in=3, c_out=4, batch=16)
    s = Schedule("t", rfactor={grads[1].name: RFactor(8, "b", True, axis_last=True)})
    got = pa.build(grads, list(feeds), schedule=s)(*feeds.values())
    for t, a, b in zip(grads, got, pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)
