"""Space-to-depth (issue 12): a reduction's strided reads ``X[3y + kh, 3x + kw]`` read a de-interleaved copy
``X_s2d[.., kh mod 3, kw mod 3, y + kh div 3, x + kw div 3]`` at unit stride.

Three layers: the transformation against ``pa.evaluate`` on random convolutions (hypothesis), its structure
(which reads are strided, the copy reads through a zero-padded input, no strided read is left), and the
auto-scheduler's choice (only conv2d_5x5_s3's weight gradient at the benchmark shapes, and its forward, whose
outputs read at the stride) with a build against ``pa.evaluate``.  docs/scheduling.md has the measurements.
"""

import pathlib
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import polyad as pa
from polyad.bench.workloads import WORKLOADS
from polyad.schedule import DeviceModel, RFactor, Schedule, StageSchedule, prepare, validate
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import (apply_graph_schedule, axis_padding, inlinable, pad_axis, space_to_depth, stage_ops,
                                   strided_reads, uniquely_named)
from polyad.schedule.space import _cut_width, candidate_space
from polyad.te.expr import Load
from polyad.te.tensor import ComputeOp, PlaceholderOp, walk_ops
from polyad.te.visit import post_order

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402
from conv_cases import ZEN5, conv_grads, random_convs  # noqa: E402


_conv_grads = conv_grads


def _strided_stages(outs):
    return [op.name for op in stage_ops(outs)[0] if strided_reads(op)]


#: a stride-2 transposed convolution's gradient stages, both reading its output gradient at the stride
_TRANSPOSED = ("d_X_from_conv2d_transpose", "d_W_from_conv2d_transpose")


def _transposed_conv_grads(size, c_in, c_out):
    """(inputs X, W, H, the gradients of X and W) of a 3x3, stride-2, padding-1 transposed convolution."""
    X = pa.placeholder((2, c_in, size, size), name="X")
    W = pa.placeholder((c_in, c_out, 3, 3), name="W")
    Y = pa.nn.conv2d_transpose(X, W, strides=2, padding=1)
    H = pa.placeholder(Y.shape, name="H")
    return (X, W, H), list(pa.differentiate(Y, [X, W], head=H))


def _assert_built_equals_evaluate(grads, ins, schedule, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in ins]
    got = pa.build(grads, list(ins), schedule=schedule)(*arrays)
    for g, ref in zip(got, pa.evaluate(grads, dict(zip(ins, arrays)))):
        np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(case=random_convs())
def test_space_to_depth_equals_evaluate_on_random_convolutions(case):
    size, (sh, sw), pad, (dh, dw), k = case
    grads, feeds = _conv_grads(size, (sh, sw), pad, (dh, dw), k=k)
    want = pa.evaluate(grads, feeds)
    names = _strided_stages(grads)
    # a stride above 1 over more than one output row or column is what makes the weight gradient's reads
    # strided (dilations stride the outputs)
    oh, ow = next(a.shape for t, a in feeds.items() if t.name == "H")[2:]
    assert bool(names) == ((sh > 1 and oh > 1) or (sw > 1 and ow > 1)), (names, sh, sw, oh, ow)
    for n in names:
        new = space_to_depth(grads, n)
        for a, b in zip(pa.evaluate(new, feeds), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        op = stage_ops(new)[1][n]
        assert strided_reads(op) == []  # every read of the stage is unit-stride now


def test_the_strided_reads_of_a_stride_3_weight_gradient_and_the_copy_it_reads():
    grads, feeds = _conv_grads(14, 3, 1, 1, k=5)
    dW = grads[1].name
    (T, strides, loads), = strided_reads(stage_ops(grads)[1][dW])
    assert strides == (1, 1, 3, 3) and len(loads) == 1
    new = space_to_depth(grads, dW)
    ops = stage_ops(new)[1]
    copy = ops[f"{T.name}_s2d"]
    # { X_pad[b, c, i, j] -> X_s2d[b, c, i mod 3, j mod 3, i div 3, j div 3] }: 16 padded rows -> 3 phases x 6
    assert copy.shape == (2, 2, 3, 3, 6, 6)
    # the zero-padded copy of X is read through: the s2d copy reads X itself, the padded X has no kernel left
    assert {t.name for t in copy.input_tensors} == {"X"} and T.name not in ops
    assert inlinable(copy) is not None and "space_to_depth" in inlinable(copy)
    reads = [n for n in post_order(tuple(ops[dW].body)) if isinstance(n, Load) and n.tensor.op is copy]
    assert len(reads) == 1 and str(reads[0]).endswith("x + i3//3]")  # the lanes' axis x at unit stride
    for a, b in zip(pa.evaluate(new, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _conv_forward(size, stride, pad, dil, k=3, c_in=2, c_out=3, batch=2):
    X = pa.placeholder((batch, c_in, size, size), name="X")
    W = pa.placeholder((c_out, c_in, k, k), name="W")
    Y = uniquely_named([pa.nn.conv2d(X, W, strides=stride, padding=pad, dilation=dil)])
    rng = np.random.default_rng(size * 5 + pad)
    return Y, {t: rng.standard_normal(t.shape).astype(np.float32) for t in (X, W)}


@settings(max_examples=40, deadline=None)
@given(case=random_convs())
def test_a_forward_strided_over_its_outputs_reads_a_de_interleaved_copy_equal_to_evaluate(case):
    size, (sh, sw), pad, (dh, dw), k = case
    outs, feeds = _conv_forward(size, (sh, sw), pad, (dh, dw), k=k)
    op = outs[0].op
    red = strided_reads(op)  # a dilation strides the reduction variables (x + 2*rw)
    found = strided_reads(op, over="output")
    oh, ow = outs[0].shape[2:]
    if (sh > 1 and oh > 1) or (sw > 1 and ow > 1):
        assert found, (sh, sw, oh, ow)
    if found:  # an output of extent 1 may read at its stride or not: isl keeps or drops its coefficient
        (T, strides, _), = found
        assert strides[:2] == (1, 1) and all(t == s if o > 1 else t in (1, s)
                                             for t, s, o in zip(strides[2:], (sh, sw), (oh, ow))), (strides, case)
    if not (red or found):
        return
    new = space_to_depth(outs, op.name)  # the reduction variables' strides first, where there are any
    np.testing.assert_allclose(pa.evaluate(new, feeds)[0], pa.evaluate(outs, feeds)[0], rtol=1e-5, atol=1e-5)
    if not red:  # consecutive outputs read consecutive elements
        assert strided_reads(stage_ops(new)[1][op.name], over="output") == []


def test_the_schedule_field_is_data_and_its_errors_name_the_stage():
    grads, _ = _conv_grads(14, 3, 1, 1, k=5)
    dW, dX = grads[1].name, grads[0].name
    s = Schedule("s2d", space_to_depth={dW})
    assert Schedule.from_json(s.to_json()) == s and f"space_to_depth {dW}" in s.describe()
    assert "space_to_depth" not in Schedule("plain").to_dict()  # older schedules read and write as before
    validate(grads, s)
    with pytest.raises(pa.ScheduleError, match="space_to_depth: there is no stage 'nope'"):
        validate(grads, Schedule("bad", space_to_depth={"nope"}))
    other = [op.name for op in stage_ops(grads)[0] if not strided_reads(op)][0]
    with pytest.raises(pa.ScheduleError, match=f"stage '{other}' is not a reduction that reads an operand at a stride"):
        validate(grads, Schedule("bad", space_to_depth={other}))
    with pytest.raises(pa.ScheduleError, match="space_to_depth must be a set of stage names"):
        Schedule("bad", space_to_depth=dW)
    with pytest.raises(pa.ScheduleError, match="'space_to_depth' must be a list"):
        Schedule.from_dict(dict(Schedule("x").to_dict(), space_to_depth=dW))
    assert dX not in _strided_stages(grads)  # the data gradient is phased (StageSchedule.phase), not this


def test_auto_reads_de_interleaved_copies_for_the_stride_3_weight_gradient_only():
    got = {}
    for name in sorted(WORKLOADS):
        for kind, outs in auto_golden.graphs(name, None):
            s = auto_schedule(outs, device=ZEN5)
            if s.space_to_depth:
                got[name, kind] = s
    # the forward by strided_windows (its outputs' stride); the weight gradients' lanes run along the batch there
    # (rfactor_batch_lanes), whose copies are read at unit stride whatever the stride along x
    assert set(got) == {("conv2d_5x5_s3", "fwd")}
    fwd = got["conv2d_5x5_s3", "fwd"]
    assert fwd.space_to_depth == {"conv2d"} and any(n.startswith("space_to_depth conv2d: its outputs read")
                                                      for n in fwd.notes)
    # then a box reduction, in vector blocks along its rows of 19
    assert fwd.stages["conv2d"] == StageSchedule(tile=(4, 1, 4, 8), vectorize=8, unroll=2)
    # with a batch under two vectors (8 on 16 lanes), the weight gradient reads a de-interleaved copy
    # (autodiff's and the hand-written TE one's alike: the rule reads structure, not names)
    shape = dict(WORKLOADS["conv2d_5x5_s3"].params, batch=8)
    for kind, outs in auto_golden.graphs("conv2d_5x5_s3", shape):
        if kind == "fwd":
            continue
        s = auto_schedule(outs, device=ZEN5)
        dw = "d_W_from_conv2d" if kind == "bwd" else "conv_dW"
        assert s.space_to_depth == {dw}, kind
        if kind != "bwd":
            continue
        # the copy makes the reads along x unit-stride: rfactor_lanes interleaves them, copy_rows blocks the copy
        spec = RFactor.of(s.rfactor[dw])
        assert spec.axis == "x" and spec.pad  # 19 columns: 3 ragged lanes of 8, padded to 24
        assert any(n.startswith("space_to_depth d_W_from_conv2d") for n in s.notes)
        # the copy's rows: 20 columns, run to 25 for the padded lanes (x + kw div 3 < 25), in float4 rows of 28
        assert s.stages["conv2d_pad_s2d"].tile[-1] == 28
    # not at tiny shapes (the copy would not pay), not on the GPU model (not measured there)
    tiny = dict(auto_golden.graphs("conv2d_5x5_s3", auto_golden.TINY["conv2d_5x5_s3"]))["bwd"]
    assert not auto_schedule(tiny, device=ZEN5).space_to_depth
    gpu = DeviceModel.load(auto_golden.DEVICES / "gpu-former-constants.json")
    assert not auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", shape))["bwd"], device=gpu).space_to_depth


def test_the_tuner_space_offers_space_to_depth_both_ways():
    from polyad.tuner.configs import graph_moves

    grads, _ = _conv_grads(14, 3, 1, 1, k=5)
    dW = grads[1].name
    assert candidate_space(grads, ZEN5).space_to_depth == (dW,)
    plain = auto_schedule(grads, device=ZEN5)
    assert not plain.space_to_depth
    whys = [w for _, w in graph_moves(grads, plain, ZEN5)]
    assert f"space_to_depth {dW}" in whys
    with_it = Schedule("auto", space_to_depth={dW})
    assert f"no space_to_depth of {dW}" in [w for _, w in graph_moves(grads, with_it, ZEN5)]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("stride,pad", [((3, 3), 1), ((2, 3), 0)])
def test_built_space_to_depth_with_lane_vectors_equals_evaluate(stride, pad):
    grads, feeds = _conv_grads(23, stride, pad, 1, k=5, c_in=3, c_out=4)
    dW = grads[1].name
    s = Schedule("s2d", space_to_depth={dW}, rfactor={dW: RFactor(4, axis="x", interleave=True)},
                 stages={f"{dW}_rf": StageSchedule(tile=(1, 1, 5, 5, 4), vectorize=4)})
    ins = list(feeds)
    got = pa.build(grads, ins, schedule=s)(*feeds.values())
    for t, a, b in zip(grads, got, pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)
    assert any(op.name.endswith("_s2d") for op in walk_ops(pa.schedule.prepare(grads, s)[0])
               if not isinstance(op, PlaceholderOp))


def test_with_8_lane_vectors_5_wide_kernels_get_lanes_and_matmuls_keep_their_blocks():
    """A fresh calibration on a Zen 4 says 8 lanes: kw = 5 is more than half a vector, yet the sliding
    window X[3x + kw] still runs best as lanes along x (conv2d_5x5_s3 dW 62.7 -> 7.5 ms, lenet's conv
    dWs 1.26 -> 0.23 and 2.56 -> 0.36 ms); a matmul's 10 narrow outputs keep their register blocks."""
    import dataclasses

    v8 = dataclasses.replace(ZEN5, vector_width=8)
    s = auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"], device=v8)
    assert s.space_to_depth == {"d_W_from_conv2d"} and RFactor.of(s.rfactor["d_W_from_conv2d"]).axis == "x"
    s = auto_schedule(dict(auto_golden.graphs("lenet_step", None))["bwd"], device=v8)
    assert {n for n, v in s.rfactor.items() if RFactor.of(v).axis == "x"} == {"d_cw1_from_conv2d", "d_cw2_from_conv2d"}
    X = pa.placeholder((24, 800), name="X")
    W = pa.placeholder((10, 800), name="W")
    k = pa.reduce_axis((0, 800), name="k")
    M = pa.compute((24, 10), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="M")
    assert "M" not in auto_schedule([M], device=v8).rfactor


def test_copy_rows_blocks_plain_copies_only():
    """Crops, padded and de-interleaved copies run in whole rows as vectors (conv2d_5x5_s3's dX crop 2.0 ->
    0.45 ms, before fold_crops made the crop compute the gradient itself); a max-pool gradient (its selects
    read the argmax), an avg-pool gradient (an inlined H/4) and flatten (a reshape: aliased, no kernel) are
    left to the model."""
    shape = dict(WORKLOADS["conv2d_5x5_s3"].params, batch=8)  # the weight gradient's lanes along x, H padded
    s = auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", shape))["bwd"], device=ZEN5)
    # H padded to 24 columns for the weight gradient's lanes (and to 21 for the data gradient's phase boxes)
    (wide,) = [n for n, st in s.stages.items() if n.startswith("H_pad") and st.tile[-2:] == (1, 24) and
               st.vectorize == 8]
    assert any(n.startswith(wide + ":") and "a copy: whole rows of 24" in n for n in s.notes)
    s = auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"], device=ZEN5)
    # the crop computes the data gradient (folded): a reduction, not a copy
    assert s.fold == {"d_X_from_conv2d_pad"} and s.innermost == {"d_X_from_conv2d_pad": 0}
    assert s.stages["d_X_from_conv2d_pad_t"].phase == (1, 3, 3, 1)
    # its copy back from the batch-innermost layout is batch_back's, not copy_rows'
    assert s.stages["d_X_from_conv2d_pad"] == StageSchedule(tile=(32, 1, 1, 2), vectorize=2)
    # a crop whose producer is read elsewhere too stays a copy, in whole rows
    X = pa.placeholder((2, 3, 40, 40), name="X")
    k = pa.reduce_axis((0, 3), name="k")
    T = pa.compute((2, 42, 42), lambda n, y, x: pa.sum(X[n, k, pa.min(y, 39), pa.min(x, 39)], axis=k), name="T")
    C = pa.compute((2, 40, 40), lambda n, y, x: T[n, y + 1, x + 1], name="C")
    s = auto_schedule([C, T], device=ZEN5)
    assert not s.fold and s.stages["C"].tile[-1] == 40
    assert any(n.startswith("C:") and "a copy: whole rows of 40" in n for n in s.notes)
    for name in ("max_pool", "avg_pool", "flatten"):
        for kind, outs in auto_golden.graphs(name, None):
            s = auto_schedule(outs, device=ZEN5)
            assert not any("a copy: whole rows" in n for n in s.notes), (name, kind)


def test_a_shared_de_interleaved_copy_is_not_rebuilt_longer_for_one_of_its_readers(opencl):
    """Padded lanes (``rfactor(.., pad=True)``) rebuild a space-to-depth copy longer under its own name when only
    the stage it was made for reads it; a copy two stages share gets a zero-padded copy instead, so that no two
    stages share a name, and the gradients equal pa.evaluate."""
    ins, grads = _transposed_conv_grads(7, 4, 3)
    sched = Schedule("s2d", pad=_TRANSPOSED, space_to_depth=_TRANSPOSED,
                     rfactor={"d_W_from_conv2d_transpose": RFactor(4, "xq", True, pad=True)})  # 7 columns run 8
    ops = [op for op in walk_ops(apply_graph_schedule(grads, sched)[0]) if not isinstance(op, PlaceholderOp)]
    assert len({op.name for op in ops}) == len(ops), [op.name for op in ops]
    assert any(op.name.endswith("_s2d_pad") for op in ops)
    _assert_built_equals_evaluate(grads, ins, sched, 4)


def test_a_copy_whose_rows_no_vector_divides_runs_whole_rows_in_float4(opencl):
    """copy_rows: a de-interleaved copy's rows of 57 (a stride-2 transposed conv's output gradient) run whole in a
    work-item, 14 float4 and a point (1.00 ms against float4 tiles' 1.43-1.45, the last moved back, at
    16x16x2x2x57x57; rows of 15, 29: 0.62x, 0.81x); rows shorter than two float4 keep the naive loops; the built
    copy equals pa.evaluate."""
    ins, grads = _transposed_conv_grads(14, 3, 2)  # 27 wide: the copy's rows are 15 (14 read)
    graph = Schedule("g", pad=_TRANSPOSED, space_to_depth=_TRANSPOSED)
    sched = auto_schedule(apply_graph_schedule(grads, graph)[0], device=ZEN5)
    (copy,) = [n for n in sched.stages if n.endswith("_s2d")]
    assert sched.stages[copy] == StageSchedule(tile=(1, 1, 1, 1, 1, 16), vectorize=4)
    assert any(n.startswith(copy + ":") and "whole rows in vectors of 4" in n for n in sched.notes)
    assert [_cut_width(e, ZEN5) for e in (57, 15, 8, 7)] == [4, 4, 4, None]
    built = Schedule("g", pad=_TRANSPOSED, space_to_depth=_TRANSPOSED, stages={copy: sched.stages[copy]})
    _assert_built_equals_evaluate(grads, ins, built, 2)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_divided_rows_vectorise_an_upsampled_gradient_only():
    """avg_pool's data gradient reads H[.., y // 2, x // 2]: PoCL leaves its naive loops scalar (11.2 ms) where
    float4 rows run 6.6.  The rule decides there (autodiff's and the hand-written gradient alike); not on a
    max-pool's gradient (strided: its stride-cell blocks were measured), not on elementwise stages without a
    divided read (mlp_step's relu: PoCL widens those itself, float2 blocks ran 1.22-1.31x slower), not on a
    GPU, and the built gradient is the evaluated one."""
    from polyad.schedule.cost import stage_info

    gpu_model = DeviceModel.load(auto_golden.DEVICES / "gpu-former-constants.json")
    for kind, outs in auto_golden.graphs("avg_pool", None):
        if kind not in ("bwd", "hand"):
            continue
        s = auto_schedule(outs, device=ZEN5)
        (name,) = [n for n in s.stages if n.startswith(("d_X", "avg_pool_dX"))]
        assert s.stages[name] == StageSchedule(tile=(1, 1, 1, 4), vectorize=4), (kind, s.describe())
        assert any("reads x // k along its rows" in n for n in s.notes), kind
        assert not any("reads x // k" in n for n in auto_schedule(outs, device=gpu_model).notes)
    for name in ("max_pool", "mlp_step", "softmax", "conv2d_3x3"):
        for kind, outs in auto_golden.graphs(name, None):
            assert not any("reads x // k" in n for n in auto_schedule(outs, device=ZEN5).notes), (name, kind)
    # what counts as divided: x // k (k >= 2) plus terms free of x, along the last dimension only
    X = pa.placeholder((4, 8), name="X")
    Up = pa.compute((4, 16), lambda r, x: X[r, x // 2] * 0.25, name="Up")
    Shift = pa.compute((4, 14), lambda r, x: X[r, x // 2 + 1], name="Shift")
    Rows = pa.compute((8, 8), lambda r, x: X[r // 2, x], name="Rows")
    Same = pa.compute((4, 8), lambda r, x: X[r, x // 1], name="Same")
    assert [stage_info(t.op).divided for t in (Up, Shift, Rows, Same)] == [True, True, False, False]
    # a plain upsampling copy (no arithmetic) is copy_rows' (whole rows), as it was
    Copy = pa.compute((4, 16), lambda r, x: X[r, x // 2], name="Copy")
    assert any(n.startswith("Copy:") and "a copy: whole rows" in n for n in auto_schedule([Copy], device=ZEN5).notes)
    up = auto_schedule([Up], device=ZEN5)
    assert up.stages["Up"] == StageSchedule(tile=(1, 4), vectorize=4)
    mod = pa.build(Up, [X], schedule=up)
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(mod(x), pa.evaluate(Up, {X: x}), rtol=1e-6)


# ------------------------------------------------------------------------------------ padded lanes
@settings(max_examples=30, deadline=None)
@given(size=st.integers(9, 30), stride=st.integers(1, 3), dil=st.integers(1, 2), k=st.integers(2, 5),
       factor=st.sampled_from([4, 8]), data=st.data())
def test_padded_lanes_equal_evaluate_on_random_convolutions(size, stride, dil, k, factor, data):
    """rfactor(..., interleave=True, pad=True): the axis runs to a multiple of the lanes on zero-padded
    operands (with or without a space-to-depth copy first): the same gradients as pa.evaluate."""
    pad = data.draw(st.integers(0, k - 1))
    out = (size + 2 * pad - dil * (k - 1) - 1) // stride + 1
    if out <= factor or out % factor == 0:
        return  # nothing ragged to pad
    grads, feeds = _conv_grads(size, stride, pad, dil, k=k)
    dW = grads[1].name
    s2d = {dW} if stride > 1 else set()
    g, _ = prepare(grads, Schedule("lanes", space_to_depth=s2d, rfactor={dW: RFactor(factor, "x", True, pad=True)}))
    part = stage_ops(g)[1][f"{dW}_rf"]
    assert isinstance(part, ComputeOp)  # a box: no guard, every lane full
    assert {a.name: a.extent for a in part.body[0].axis}["x_o"] == -(-out // factor)
    for a, b in zip(pa.evaluate(g, feeds), pa.evaluate(grads, feeds)):
        # float32 sums in two orders: an output near zero among terms of the gradient's scale keeps their rounding
        # (size 28, k 5: -0.20997 against -0.20996 where the gradient reaches 62)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(b).max())))
    # no copy of a copy: a zero-padded copy never reads another zero-padded copy
    for op in stage_ops(g)[0]:
        if "pad_of" in op.attrs:
            assert all(t.op.attrs.get("pad_of") is None and "_pad" not in t.name for t in op.input_tensors
                       if not isinstance(t.op, PlaceholderOp)), op.name


def test_a_padded_lane_operand_that_is_a_padded_copy_copies_its_source():
    """The dilated convolution pads X by 1 (X_pad, 34 columns) and its dW's lanes need 36: the longer copy
    reads X over X_pad's box, { [b, c, y, x] : 1 <= y <= 32 and 1 <= x <= 32 }, and X_pad's kernel goes."""
    import islpy as isl

    grads, feeds = _conv_grads(32, 1, 1, 2, k=3, c_in=2, c_out=3)
    dW = grads[1].name
    g, _ = prepare(grads, Schedule("lanes", rfactor={dW: RFactor(8, "x", True, pad=True)}))
    ops = stage_ops(g)[1]
    (longer,) = [op for op in ops.values() if op.attrs.get("pad_of") == dW and op.name.startswith("conv2d_pad")]
    assert longer.shape == (2, 2, 34, 36) and "conv2d_pad" not in ops
    read, zeros = longer.statements
    assert {t.name for t in longer.input_tensors} == {"X"}
    assert read.domain.reset_tuple_id().is_equal(isl.Set(
        "{ [b, c, y, x] : 0 <= b <= 1 and 0 <= c <= 1 and 1 <= y <= 32 and 1 <= x <= 32 }"))
    for a, b in zip(pa.evaluate(g, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_axis_padding_says_why_not_and_the_field_is_data():
    grads, _ = _conv_grads(21, 1, 0, 1, k=3)
    ops = stage_ops(grads)[1]
    dW = ops[grads[1].name]
    need = axis_padding(dW, "x", 24)
    # H[b, co, y, x] is read past its 19 columns: zero there; X[b, ci, y + kh, x + kw] needs 26 columns
    assert sorted((t.name, d, e) for t, d, e in need.values()) == [("H", 3, 24), ("X", 3, 26)]
    assert "no reduction axis 'z'" in axis_padding(dW, "z", 24)
    X = pa.placeholder((4, 19), name="X")
    x = pa.reduce_axis((0, 19), name="x")
    E = pa.compute((4,), lambda i: pa.sum(pa.exp(X[i, x]), axis=x), name="E")  # exp(0) = 1: not zero
    assert "not zero" in axis_padding(E.op, "x", 24)
    with pytest.raises(pa.ScheduleError, match="pad_axis: stage 'E' cannot run 'x' to 24"):
        pad_axis([E], "E", "x", 24)
    spec = RFactor(8, "x", True, pad=True)
    assert RFactor.of(spec.to_data()) == spec and spec.to_data()["pad"] is True
    assert "pad" not in RFactor(8, "x", True).to_data()  # older schedules read and write as before
    assert "zero-padded" in spec.describe()
    with pytest.raises(pa.ScheduleError, match="rfactor pad must be"):
        RFactor(8, "x", True, pad="yes")


def test_auto_pads_lanes_where_the_ragged_share_is_large():
    """8 lanes (a fresh Zen 4 calibration): conv2d_5x5_s3's 19 columns (3 ragged, 16%) and the dilated
    convolution's 30 (6 ragged, 20%) are padded (dW 7.5 -> 4.5 ms and 0.41-0.75 -> 0.29 ms);
    conv2d_3x3's 26 (2 ragged, 8%) are not (2.42 against 2.40 ms padded, plus 0.2 ms of copies).  The dilated one's
    16 channels now run innermost instead (filters_innermost)."""
    import dataclasses

    v8 = dataclasses.replace(ZEN5, vector_width=8)
    got = {}
    for name in ("conv2d_5x5_s3", "conv2d_3x3"):
        s = auto_schedule(dict(auto_golden.graphs(name, None))["bwd"], device=v8)
        got[name] = RFactor.of(s.rfactor["d_W_from_conv2d"])
    assert {n: (r.factor, bool(r.pad)) for n, r in got.items()} == {"conv2d_5x5_s3": (8, True), "conv2d_3x3": (8, False)}
    # the dilated one's 16 channels fill two vectors of 8: computed with them innermost, no partials
    dil = auto_schedule(dict(auto_golden.graphs("conv2d_dilated", None))["bwd"], device=v8)
    assert dil.innermost == {"d_W_from_conv2d": 1} and "d_W_from_conv2d" not in dil.rfactor


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_built_padded_lanes_equal_evaluate():
    grads, feeds = _conv_grads(23, 1, 1, 2, k=3, c_in=3, c_out=4)  # dilated: 19 columns, 3 ragged
    dW = grads[1].name
    s = Schedule("lanes", rfactor={dW: RFactor(8, axis="x", interleave=True, pad=True)},
                 stages={f"{dW}_rf": StageSchedule(tile=(1, 1, 3, 3, 8), vectorize=8)})
    got = pa.build(grads, list(feeds), schedule=s)(*feeds.values())
    for t, a, b in zip(grads, got, pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)


def test_padded_lanes_read_the_data_gradients_padded_head_where_it_covers_them():
    """conv2d_dilated: pad_reads gives dX a zero-padded H, H at offset 3 in 36x36 ({ [b, f, y, x] : 3 <= y <= 32
    and 3 <= x <= 32 } read, zeros elsewhere).  dW's lanes need H run to 32 columns on zeros, which that copy
    covers (3 + 32 <= 36): the partials read it at +3 and no second copy of H is made (one kernel less)."""
    import islpy as isl
    from polyad.schedule.graph import zero_padded_offsets

    grads, feeds = _conv_grads(32, 1, 1, 2, k=3, c_in=2, c_out=3)
    dX, dW = (t.name for t in grads)
    g, _ = prepare(grads, Schedule("shared", fold={dX}, pad={dX}, rfactor={dW: RFactor(8, "x", True, pad=True)}))
    ops = stage_ops(g)[1]
    H = next(t for t in feeds if t.name == "H")
    (Hp,) = [op for op in ops.values() if H in op.input_tensors and op.attrs.get("pad_of")]
    assert Hp.shape == (2, 3, 36, 36) and zero_padded_offsets(Hp.output(0), H) == (0, 0, 3, 3)
    assert Hp.statements[0].domain.reset_tuple_id().is_equal(isl.Set(
        "{ [b, f, y, x] : 0 <= b <= 1 and 0 <= f <= 2 and 3 <= y <= 32 and 3 <= x <= 32 }"))
    part = ops[f"{dW}_rf"]
    reads = {n.tensor.name for n in post_order(part.body) if isinstance(n, Load)}
    assert Hp.name in reads and "H" not in reads  # H only through the shared copy
    for a, b in zip(pa.evaluate(g, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # without dX's padded copy there is none to share: dW's lanes get a copy of their own
    g2, _ = prepare(grads, Schedule("alone", rfactor={dW: RFactor(8, "x", True, pad=True)}))
    (own,) = [op for op in stage_ops(g2)[0] if H in op.input_tensors and op.attrs.get("pad_of") == dW]
    assert own.shape == (2, 3, 30, 32) and zero_padded_offsets(own.output(0), H) == (0, 0, 0, 0)
    assert zero_padded_offsets(own.output(0), next(t for t in feeds if t.name == "X")) is None


@settings(max_examples=30, deadline=None)
@given(size=st.integers(7, 21), dil=st.tuples(st.integers(1, 3), st.integers(1, 3)), k=st.integers(2, 4),
       factor=st.sampled_from([4, 8]), stride=st.sampled_from([(1, 1), (1, 1), (1, 1), (2, 1)]), data=st.data())
def test_padded_lanes_after_pad_reads_equal_evaluate_on_random_convolutions(size, dil, k, factor, stride, data):
    """dX's pad_reads first, then dW's padded lanes, which read dX's zero-padded H where it covers them (at
    its offsets) and make their own copy where it does not: the same gradients as pa.evaluate."""
    from polyad.schedule.graph import _reduction_form, axis_padding, fold, foldable, pad_reads, paddable, rfactor

    pad = data.draw(st.integers(0, k - 1))
    assume(all(size + 2 * pad - d * (k - 1) - 1 >= 0 for d in dil))
    grads, feeds = _conv_grads(size, stride, pad, dil, k=k)
    dX, dW = (t.name for t in grads)
    g = grads
    if foldable(g, stage_ops(g)[1][dX]) is None:
        g = fold(g, dX)
    if paddable(stage_ops(g)[1][dX]) is not None:
        g = pad_reads(g, dX)
    x = {a.name: a for a in _reduction_form(stage_ops(g)[1][dW])[2]}.get("x")
    if x is None or x.extent <= factor or x.extent % factor == 0:
        return  # nothing ragged to pad
    if isinstance(axis_padding(stage_ops(g)[1][dW], "x", -(-x.extent // factor) * factor), str):
        return  # strided reads: space_to_depth comes first (test_padded_lanes_equal_evaluate_on_random_convolutions)
    g = rfactor(g, dW, factor, "x", True, pad=True)
    for a, b in zip(pa.evaluate(g, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_padded_split_is_made_once_and_its_operands_can_be_scheduled(monkeypatch):
    """prepare splits each rfactored stage once (the check of the schedule uses that graph), and a stage
    schedule may name what the split makes: its partials and its zero-padded operand copies."""
    import polyad.schedule.graph as graph_module

    grads, feeds = _conv_grads(21, 1, 0, 1, k=3)  # dW over x of 19: 8 lanes need 24 columns
    dW = grads[1].name
    spec = RFactor(8, "x", True, pad=True)
    g, _ = prepare(grads, Schedule("lanes", rfactor={dW: spec}))
    made = sorted(n for n, op in stage_ops(g)[1].items() if op.attrs.get("pad_of") == dW)
    assert made
    calls = []
    real = graph_module.rfactor
    monkeypatch.setattr(graph_module, "rfactor",  # the padded split (a padded split then splits its copies)
                        lambda *a, **k: (len(a) > 5 and a[5] and calls.append(a[1])) or real(*a, **k))
    sched = Schedule("lanes", rfactor={dW: spec},
                     stages={made[0]: StageSchedule(tile=(1, 1, 1, 8)), f"{dW}_rf": StageSchedule(tile=(1, 1, 1, 1, 8))})
    graph_module._decided.cache_clear()  # else the first prepare's graph is taken, split no more
    g2, _ = prepare(grads, sched)
    assert calls == [dW]
    for a, b in zip(pa.evaluate(g2, feeds), pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    with pytest.raises(pa.ScheduleError, match="does not have"):
        prepare(grads, Schedule("lanes", stages={made[0]: StageSchedule()}))  # no split: no copy to name


@pytest.mark.opencl
def test_a_strided_forward_reads_a_copy_in_vector_blocks_and_builds_equal_to_evaluate(opencl):
    """strided_windows: conv2d_5x5_s3's forward 14.6 ms on its padding against 3.6 ms on the copy (docs)."""
    outs, feeds = _conv_forward(32, 3, 1, 1, k=5, c_in=5, c_out=6)
    s = auto_schedule(outs, device=ZEN5)
    name = outs[0].name
    assert s.space_to_depth == {name} and s.stages[name] == StageSchedule(tile=(1, 1, 8, 8), vectorize=4)  # rows of 10
    gpu = DeviceModel.load(auto_golden.DEVICES / "gpu-former-constants.json")
    assert not auto_schedule(outs, device=gpu).space_to_depth  # measured on a CPU only
    ins = list(feeds)
    got = pa.build(outs, ins, schedule=s)(*[feeds[t] for t in ins])
    np.testing.assert_allclose(got[0], pa.evaluate(outs, feeds)[0], rtol=1e-4, atol=1e-4)


def test_two_stages_that_read_the_same_values_de_interleaved_share_one_copy(opencl):
    """A stride-2 transposed convolution's data and weight gradients both read its output gradient at the stride,
    each through its own zero-padded copy: one de-interleaved copy serves both (a second, the same values, took
    2.3 ms of the backward's 10.6 at 16x32x56x56), and the gradients equal pa.evaluate."""
    ins, grads = _transposed_conv_grads(7, 4, 3)
    sched = Schedule("s2d", pad=_TRANSPOSED, space_to_depth=_TRANSPOSED)  # what auto takes at the bench_ops shape
    graph = apply_graph_schedule(grads, sched)[0]
    copies = [op for op in walk_ops(graph) if "space_to_depth_of" in getattr(op, "attrs", {})]
    readers = {op.name for op in walk_ops(graph) if not isinstance(op, PlaceholderOp)
               for t in op.input_tensors if copies and t.op is copies[0]}
    assert len(copies) == 1 and len(readers) == 2, ([c.name for c in copies], readers)
    _assert_built_equals_evaluate(grads, ins, sched, 1)
