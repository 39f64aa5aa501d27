"""innermost (issue 12, vectors where rows are short): a stage computed in a layout whose last dimension is one
of its outputs, the batch of a strided convolution's data gradient, whose NCHW rows are phased at stride 3:

    H_t[f, oy, ox, n] = H[n, f, oy, ox]
    dX_t[c, y, x, n] = sum H_t[f, oy, ox, n] * W[f, c, y - 3oy, x - 3ox]     (vectors along n)
    dX[n, c, y, x] = dX_t[c, y, x, n]

Three layers: the transformation against ``pa.evaluate`` on random convolutions (hypothesis), its isl form and
its errors, and the auto-scheduler's choice with an OpenCL build against ``pa.evaluate``.  conv2d_5x5_s3's dX:
5.8-6.0 ms phased NCHW, 1.5-1.7 ms batch-innermost plus 0.15 and 0.23-0.7 ms of copies.
"""

import dataclasses
import pathlib
import sys

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings

import polyad as pa
from polyad.errors import ScheduleError
from polyad.schedule import DeviceModel, Schedule, StageSchedule, prepare, validate
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import fold, inlinable, innermost, movable, stage_ops, uniquely_named
from polyad.schedule.space import RULE
from polyad.te.expr import Load
from polyad.te.visit import post_order
from polyad.tuner.configs import graph_moves

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402
from conv_cases import ZEN5, conv_grads, random_convs  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(case=random_convs())
def test_innermost_equals_evaluate_on_random_convolutions(case):
    size, strides, pad, dil, k = case
    grads, feeds = conv_grads(size, strides, pad, dil, k=k)
    want = pa.evaluate(grads, feeds)
    for g in grads:  # dX (a crop of the padded gradient where pad > 0) and dW, batch / output channels last
        new = innermost(grads, g.name, 0)
        for a, b in zip(pa.evaluate(new, feeds), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        moved = stage_ops(new)[1][f"{g.name}_t"]
        assert moved.shape == g.shape[1:] + g.shape[:1]


def test_the_moved_stride_3_data_gradient_in_isl():
    grads, feeds = conv_grads(14, 3, 1, 1, k=5, batch=8)
    n = grads[0].name
    new = innermost(fold(grads, n), n, 0)
    ops = stage_ops(new)[1]
    moved = ops[f"{n}_t"]
    st, z = moved.statements  # the sum and the zero row and column 13 no cell reaches (see fold's tests)
    assert z.domain.is_equal(isl.Set("{ Z[i1, i2, i3, i0] : 0 <= i0 <= 7 and 0 <= i1 <= 1 and 0 <= i2 <= 13 and "
                                     "0 <= i3 <= 13 and (i2 = 13 or i3 = 13) }"))
    # { S0[n, c, y, x, f, oy, ox] } -> { S0[c, y, x, n, f, oy, ox] }: the same points, the batch last
    assert st.domain.is_equal(isl.Set(
        "{ S0[i1, i2, i3, i0, f, y, x] : 0 <= i0 <= 7 and 0 <= i1 <= 1 and 0 <= i2 <= 13 and 0 <= i3 <= 13 and "
        "0 <= f <= 2 and 0 <= y <= 3 and 0 <= x <= 3 and i2 - 3 <= 3y <= i2 + 1 and i3 - 3 <= 3x <= i3 + 1 }"))
    reads = {ld.tensor.name: ld for ld in post_order(st.values) if isinstance(ld, Load)}
    assert set(reads) == {"H_t", "W"}  # H through its copy with the batch last; W does not read the batch
    assert str(reads["H_t"]) == "H_t[f, y, x, i0]" and ops["H_t"].shape == (3, 4, 4, 8)
    assert inlinable(ops["H_t"]) and "innermost made" in inlinable(ops["H_t"])
    # the moved stage and the operand's copy each get their own rule's block, never the other's
    assert RULE["batch_blocks"].propose(ops["H_t"], None, ZEN5, None) == []
    assert RULE["batch_last_copy"].propose(moved, None, ZEN5, None) == []
    assert RULE["batch_blocks"].propose(moved, None, ZEN5, None) and RULE["batch_last_copy"].propose(
        ops["H_t"], None, ZEN5, None)
    assert str(ops[n].body[0]) == f"{n}_t[i1, i2, i3, i0]"  # the copy back keeps the stage's name
    for a, b in zip(pa.evaluate(new, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_innermost_errors_name_the_stage_and_the_field_is_data():
    X = pa.placeholder((4, 6, 5), name="X")
    k = pa.reduce_axis((0, 5), name="k")
    S = pa.compute((4, 6), lambda i, j: pa.sum(X[i, j, k], axis=k), name="S")
    Sh = pa.compute((3, 6), lambda i, j: pa.sum(X[i + 1, j, k], axis=k), name="Sh")
    with pytest.raises(ScheduleError, match="no stage 'nope'"):
        innermost([S], "nope", 0)
    for bad in (1, 2, -1, True, "0"):
        with pytest.raises(ScheduleError, match="stage 'S' has output dimensions 0 to 1; dim must be one of 0 to 0"):
            innermost([S], "S", bad)
    with pytest.raises(ScheduleError, match="'Sh' reads X with its output dimension 0 \\(i\\) other than as one plain"):
        innermost([Sh], "Sh", 0)
    # the check innermost raises on is the one batch_lanes asks
    assert movable(S.op, 0) is None and movable(Sh.op, 0).startswith("reads X with its output dimension 0")
    s = Schedule("s", innermost={"S": 0}, stages={"S_t": StageSchedule(tile=(2, 4), vectorize=4)})
    validate([S], s)
    assert Schedule.from_json(s.to_json()) == s and s.to_dict()["innermost"] == {"S": 0}
    assert "innermost" not in Schedule("s").to_dict()
    assert "innermost S: output dimension 0 last (computed as S_t)" in s.describe()
    with pytest.raises(ScheduleError, match="Schedule.innermost must be a dict"):
        Schedule("s", innermost={"S": "0"})
    with pytest.raises(ScheduleError, match="'innermost' must be an object"):
        Schedule.from_dict(dict(Schedule("s").to_dict(), innermost=["S"]))
    g, _ = prepare([S], s)
    assert sorted(op.name for op in stage_ops(g)[0]) == ["S", "S_t", "X_t"]
    x = np.random.default_rng(0).standard_normal((4, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(pa.evaluate(g, {X: x})[0], x.sum(-1), rtol=1e-5, atol=1e-5)


def test_auto_moves_the_batch_of_the_strided_data_gradient_only():
    """At the benchmark shapes: conv2d_5x5_s3's dX (its outputs phased at stride 3, its batch 32), and the padded
    data gradients whose rows are not whole vectors (conv2d_3x3's 28, lenet_step's 12, batches 32 and 64), on
    the recorded CPU model and an 8-lane one; not the dilated convolution's (a batch of 8 is one vector), nor on
    a GPU.  The copies get measured blocks; the tuner can undo it."""
    v8 = dataclasses.replace(ZEN5, vector_width=8)
    got = {}
    for model in (ZEN5, v8):
        for name in ("conv2d_5x5_s3", "conv2d_3x3", "conv2d_dilated", "lenet_step", "max_pool", "dense"):
            s = auto_schedule(dict(auto_golden.graphs(name, None))["bwd"], device=model)
            if s.innermost:
                got[name, model.vector_width] = s
    assert sorted(got) == [(n, w) for n in ("conv2d_3x3", "conv2d_5x5_s3", "conv2d_dilated", "lenet_step")
                           for w in (8, 16)]
    # not its batch: its weight gradient's 16 channels, one vector or two (filters_innermost; the backward 0.92x
    # on the Zen 5 VM; with POCL_LLVM_CPU_NAME=haswell and 8 lanes, 0.935x and 0.978x)
    assert got["conv2d_dilated", 8].innermost == got["conv2d_dilated", 16].innermost == {"d_W_from_conv2d": 1}
    s = got["conv2d_5x5_s3", 8]
    assert s.innermost == {"d_X_from_conv2d_pad": 0}
    assert s.stages["d_X_from_conv2d_pad_t"] == StageSchedule(tile=(8, 1, 1, 16), vectorize=8, phase=(1, 3, 3, 1))
    assert s.stages["d_X_from_conv2d_pad"] == StageSchedule(tile=(32, 1, 1, 2), vectorize=2)
    # run over its phases' boxes on a zero-padded H (pad_reads), read with the batch last: its batch of 32 whole
    # by 2 points of the row, in float2 (against 16 points by a float4 on the Zen 5 VM's backward: 0.68x)
    assert s.pad == {"d_X_from_conv2d_pad"}
    assert s.stages["H_pad_t"] == StageSchedule(tile=(1, 1, 2, 32), vectorize=2)
    s3 = got["conv2d_3x3", 8]
    assert s3.innermost == {"d_X_from_conv2d": 0} and s3.pad == {"d_X_from_conv2d"}
    assert s3.stages["d_X_from_conv2d_t"] == StageSchedule(tile=(8, 1, 1, 16), vectorize=8)
    assert s3.stages["H_pad_t"] == StageSchedule(tile=(1, 1, 2, 32), vectorize=2)
    # another batch: runs of 16 by a float4 (against float8 on the Zen 5 VM's backwards: 0.87-1.03x)
    assert got["lenet_step", 8].stages["d_conv2d_from_bias_add_pad_t"] == StageSchedule(tile=(1, 1, 16, 4),
                                                                                        vectorize=4)
    gpu = auto_golden.DEVICES / "gpu-former-constants.json"
    assert not auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"],
                             device=DeviceModel.load(gpu)).innermost
    grads = uniquely_named(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"])
    assert "no innermost of d_X_from_conv2d_pad" in [w for _, w in graph_moves(grads, s, v8)]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_built_batch_innermost_equals_evaluate():
    grads, feeds = conv_grads(17, 3, 1, 1, k=5, c_in=3, c_out=4, batch=16)
    n = grads[0].name
    s = dataclasses.replace(auto_schedule(grads), fold={n}, innermost={n: 0})
    s = dataclasses.replace(s, stages={**s.stages,
                                       f"{n}_t": StageSchedule(tile=(3, 1, 1, 16), vectorize=8, phase=(1, 3, 3, 1)),
                                       n: StageSchedule(tile=(16, 1, 1, 1))})
    got = pa.build(grads, list(feeds), schedule=s)(*feeds.values())
    for t, a, b in zip(grads, got, pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)


@settings(max_examples=30, deadline=None)
@given(case=random_convs())
def test_innermost_after_pad_reads_copies_the_pads_source_and_equals_evaluate(case):
    """A padded data gradient (pad_reads) moved batch-innermost: the operand with the batch last is a copy of
    H itself over the padded box, moved, zero elsewhere; never a copy of H's padded copy."""
    from polyad.schedule.graph import foldable, pad_reads, paddable

    size, strides, pad, dil, k = case
    grads, feeds = conv_grads(size, strides, pad, dil, k=k)
    n = grads[0].name
    g = fold(grads, n) if foldable(grads, stage_ops(grads)[1][n]) is None else grads
    if paddable(stage_ops(g)[1][n]) is not None:
        g = pad_reads(g, n)
    new = innermost(g, n, 0)
    for a, b in zip(pa.evaluate(new, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    copies = [op for op in stage_ops(new)[0] if op.attrs.get("moved_last_for") == n]
    assert copies and all(t.name in ("H", "W") for op in copies for t in op.input_tensors), [
        (op.name, [t.name for t in op.input_tensors]) for op in copies]


def test_the_batch_last_copy_of_a_padded_head_in_isl():
    """conv2d_3x3 (pad 0): dX reads H zero-padded by 2, { H_pad[n, f, y, x] -> H[n, f, y - 2, x - 2] } over
    2 <= y, x <= 7; with the batch innermost the copy is { H_pad_t[f, y, x, n] -> H[n, f, y - 2, x - 2] } over
    the same box, moved, and zero elsewhere."""
    grads, feeds = conv_grads(8, 1, 0, 1, k=3, batch=4)
    n = grads[0].name
    new = innermost(pad_reads_of(grads, n), n, 0)
    (copy,) = [op for op in stage_ops(new)[0] if op.attrs.get("moved_last_for") == n]
    read, zero = copy.statements
    assert copy.shape == (3, 10, 10, 4) and [t.name for t in copy.input_tensors] == ["H"]
    assert read.domain.is_equal(isl.Set(
        "{ S0[f, y, x, b] : 0 <= f <= 2 and 2 <= y <= 7 and 2 <= x <= 7 and 0 <= b <= 3 }"))
    assert str(read.values[0]) == "H[j3, j0, j1 - 2, j2 - 2]" and zero.values[0].value == 0
    assert not [op for op in stage_ops(new)[0] if op.attrs.get("pad_of") == n]  # H's padded copy: read by nothing
    for a, b in zip(pa.evaluate(new, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def pad_reads_of(grads, n):
    from polyad.schedule.graph import pad_reads

    return pad_reads(grads, n)


def test_few_channels_make_up_the_accumulators_along_the_row():
    """batch_blocks: two vectors of the batch (32 lanes in float16: 0.85-0.92x on conv2d_3x3's and conv2d_5x5_s3's
    backwards, where one vector of 16 ran); 6 channels (lenet_step's second convolution's dX) are 12 float16
    accumulators, so the block takes 2 points of the row beside the batch too (24; 6x1x3x16, 18, had run 0.56-0.73 of
    6x1x1x16's time, and 6x1x2x32's backward reads 0.98x of it).  8 channels and more, or phased outputs, keep one
    point of the row (row blocks measured 0.84-1.7x on conv2d_3x3 and conv2d_5x5_s3)."""
    built = {}

    def block(c_in, stride):
        grads, feeds = conv_grads(12 if stride == 1 else 14, stride, 0, 1, k=3, c_in=c_in, c_out=4, batch=32)
        n = grads[0].name
        moved = stage_ops(innermost(grads, n, 0))[1][f"{n}_t"]
        (ss,) = RULE["batch_blocks"].propose(moved, None, ZEN5, None)
        built[c_in, stride] = grads, feeds, Schedule("s", innermost={n: 0}, stages={f"{n}_t": ss})
        return ss.tile, ss.vectorize, moved.shape, ss.phase

    tile, vec, shape, phase = block(6, 1)
    assert shape == (6, 12, 12, 32) and tile == (6, 1, 2, 32) and vec == 16 and phase is None
    assert block(8, 1)[0] == (8, 1, 1, 32) and block(17, 1)[0] == (8, 1, 1, 32)
    assert block(2, 1)[0] == (2, 1, 4, 32)
    tile, _, _, phase = block(6, 3)
    assert phase is not None and tile[2] == 1  # phases: one point of the row
    grads, feeds, sched = built[6, 1]  # the block built, against pa.evaluate
    n = grads[0].name
    copies = [op.name for op in stage_ops(innermost(grads, n, 0))[0] if "moved_last_for" in op.attrs]
    assert copies  # the operands' batch-last copies: the batch of 32 whole by 2 points of the row (batch_last_copy)
    whole = {c: StageSchedule(tile=(1, 1, 2, 32), vectorize=2) for c in copies}
    ins = list(feeds)
    for s in (sched, dataclasses.replace(sched, stages={**sched.stages, **whole})):
        got = pa.build(grads, ins, schedule=s)(*[feeds[t] for t in ins])
        for a, b in zip(got, pa.evaluate(grads, feeds)):  # dW sums 3200 products: float32's rounding
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
