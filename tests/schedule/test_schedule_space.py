"""The space beyond the model's ranking (whole rows, channel tiles, unroll 16, work-group sizes, rfactor forms):
its candidates are legal and build to pa.evaluate's values; stage_features is a fixed, cheap feature vector."""

import math

import numpy as np
import pytest

import polyad as pa
from polyad.schedule import DeviceModel, RFactor, Schedule, StageSchedule
from polyad.schedule.auto import auto_schedule, candidate_space
from polyad.schedule.cost import FEATURES, stage_cost, stage_features, stage_info
from polyad.schedule.graph import stage_ops, uniquely_named
from polyad.schedule.space import graph_decisions, stage_space

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")
GPU = DeviceModel.load(_DEVICES / "gpu-former-constants.json")
H200 = DeviceModel.load(_DEVICES / "h200-calibrated.json")


def _close(got, ref):
    for g, r in zip(got if isinstance(got, list) else [got], ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(r).max())))


def _conv(stride=1, k=3, size=12, batch=2):
    X = pa.placeholder((batch, 3, size, size), name="X")
    W = pa.placeholder((4, 3, k, k), name="W")
    Y = pa.nn.conv2d(X, W, stride, 0, 1)
    H = pa.placeholder(Y.shape, name="H")
    rng = np.random.default_rng(1)
    feeds = {t: rng.standard_normal(t.shape).astype(np.float32) for t in (X, W, H)}
    return list(pa.differentiate(Y, [X, W], head=H)), [X, W, H], feeds


def test_stage_features_have_fixed_keys_and_are_deterministic():
    grads, _, _ = _conv(stride=3, k=5)
    T = pa.compute((), lambda: pa.const(1.0), name="T")  # rank 0
    ops = [op for op in stage_ops(uniquely_named(grads + [T]))[0]]
    for op in ops:
        info = stage_info(op)
        for dm in (ZEN5, GPU):
            cands = stage_space(op, dm).candidates
            for c in cands[:: max(1, len(cands) // 25)]:
                f = stage_features(info, c.schedule, dm)
                assert tuple(f) == FEATURES
                assert all(type(v) is float and math.isfinite(v) for v in f.values()), f
                assert f == stage_features(info, c.schedule, dm)
                assert f["cost_s"] == stage_cost(info, c.schedule, dm)
                assert f["naive_s"] == stage_cost(info, StageSchedule(), dm)
                assert f["vectorize"] == c.schedule.vectorize and f["unroll"] == c.schedule.unroll
    strided = [stage_info(op) for op in ops if stage_info(op).strided]
    assert strided
    cell = StageSchedule(tile=(1, 1, 3, 3))
    assert stage_features(strided[0], cell, ZEN5)["stride_cell"] == 1.0


def test_whole_rows_are_proposed_for_reduction_free_stages_and_build():
    X = pa.placeholder((2, 8, 20, 25), name="X")
    Y = pa.nn.relu(X)
    space = candidate_space([Y], device=ZEN5)
    rows = [c for c in space.candidates[Y.name] if c.rule == "whole_rows"]
    assert rows and all(not c.ranked for c in rows)  # for the tuner: the model does not rank them
    assert rows[0].schedule.tile == (1, 2, 20, 25)  # two rows of 500: the fewest that hold 512 elements
    assert auto_schedule([Y], device=ZEN5).stages.get(Y.name) not in [c.schedule for c in rows]
    x = np.random.default_rng(0).standard_normal(X.shape).astype(np.float32)
    mod = pa.build(Y, [X], schedule=Schedule(stages={Y.name: rows[0].schedule}))
    np.testing.assert_array_equal(mod(x), np.maximum(x, 0))


def test_channel_tiles_and_more_unrolls_are_legal_and_build():
    grads, ins, feeds = _conv()
    ref = pa.evaluate(grads, feeds)
    auto = auto_schedule(grads, device=ZEN5)
    space = candidate_space(grads, device=ZEN5)
    built = set()
    for rule in ("channel_tiles", "more_unrolls"):
        for n, cands in sorted(space.candidates.items()):
            mine = [c.schedule for c in cands if c.rule == rule]
            if mine:
                s = Schedule(stages={**auto.stages, n: mine[len(mine) // 2]}, inline=auto.inline, rfactor=auto.rfactor,
                             pad=auto.pad)
                _close(pa.build(grads, ins, schedule=s)(*[feeds[t] for t in ins]), ref)
                built.add(rule)
                break
    assert built == {"channel_tiles", "more_unrolls"}


def test_rfactor_forms_of_the_space_are_legal_and_build():
    kinds = set()
    for size in (12, 18):  # dW reduces over y and x of 10 (8 and 4 do not divide it) or 16 (they do)
        grads, ins, feeds = _conv(size=size, batch=8)  # 8: dW's lanes along the batch (axis_last) too
        ref = pa.evaluate(grads, feeds)
        space = candidate_space(grads, device=ZEN5)
        forms = {}
        for n, fs in space.rfactor.items():
            for f in fs:
                if isinstance(f, RFactor):
                    forms.setdefault((f.axis, f.interleave, bool(f.axis_last)), (n, f))
        assert len({axis for axis, _, _ in forms}) >= 2  # other axes than the largest
        kinds |= {form[1:] for form in forms}
        for n, f in forms.values():  # the options of a paddable stage are those of its padded sum
            s = Schedule(rfactor={n: f}, pad={n} if n in space.pad else ())
            _close(pa.build(grads, ins, schedule=s)(*[feeds[t] for t in ins]), ref)
    assert kinds == {(True, False), (False, False), (None, False), (True, True)}


def _blocks(info, ss):
    return math.prod(-(-s // t) for s, t in zip(info.shape, ss.tile or (1,) * len(info.shape)))


def test_gpu_work_group_sizes_vary_each_block_and_the_model_ranks_one():
    X = pa.placeholder((512, 512), name="X")
    W = pa.placeholder((256, 512), name="W")
    B = pa.placeholder((256,), name="B")
    Y = pa.nn.dense(X, W, B)  # on the GPU model: the matmul gets a work-group size
    g = graph_decisions(uniquely_named([Y]), GPU)
    s = auto_schedule([Y], device=GPU)
    name = "dense_matmul"
    assert s.stages[name].local_size
    op = next(op for op in stage_ops(g.outputs)[0] if op.name == name)
    sp = stage_space(op, GPU, g)
    plain = [c for c in sp.candidates if c.schedule.local_size is None]
    sized = [c for c in sp.candidates if c.schedule.local_size is not None]
    assert len(sized) == len(GPU.local_sizes) * len(plain)
    assert all(c.rule.endswith("+gpu_local_sizes") for c in sized)
    info = g.infos[name]
    occupied = [c for c in plain if c.rule == "grid" and _blocks(info, c.schedule) >= GPU.min_parallel]
    assert len(occupied) > 1 and len(sp.ranked()) == len(occupied)  # one work-group size per occupying block
    assert s.stages[name] in sp.ranked()
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(t.shape).astype(np.float32) for t in (X, W, B))
    ss = next(c.schedule for c in sized if c.schedule.local_size == (64,) and c.schedule.tile)
    sched = Schedule(stages={name: ss}, inline=s.inline)
    np.testing.assert_allclose(pa.build(Y, [X, W, B], schedule=sched)(x, w, b), x @ w.T + b, rtol=1e-4, atol=1e-3)


def test_candidate_space_for_a_given_schedule_credits_matching_rfactors_only():
    grads, _, _ = _conv(size=15, batch=8)
    auto = auto_schedule(grads, device=ZEN5)
    assert auto.rfactor  # the weight gradient's lanes
    (n, spec), = auto.rfactor.items()
    same = candidate_space(grads, device=ZEN5, schedule=auto)
    assert any(c.rule == "lane_partials" for c in same.candidates[n + "_rf"])
    other = candidate_space(grads, device=ZEN5, schedule=Schedule(rfactor={n: RFactor(spec.factor * 2, spec.axis)}))
    assert not any(c.rule == "lane_partials" for c in other.candidates[n + "_rf"])
    g = graph_decisions(uniquely_named(grads), ZEN5)
    assert g.rule_of("rfactor", n) == "rfactor_lanes"
    with pytest.raises(pa.ScheduleError):
        candidate_space(grads, device=ZEN5, schedule=Schedule(inline=frozenset({n})))


# the machine the lane_partials and padded_rows blocks were measured on: 8-lane vectors, 32 accumulators
ZEN4 = __import__("dataclasses").replace(ZEN5, vector_width=8, fma_slots=32)


@pytest.mark.parametrize("shape,block", [
    ((19, 17, 5, 5, 8), (4, 1, 1, 5)),  # conv2d_5x5_s3 dW: 2.52 ms against the former 1x1x5x5's 3.84
    ((19, 17, 3, 3, 8), (2, 1, 3, 3)),  # conv2d_3x3 dW: 1.69 against 1x1x3x3's 2.08 (19 co: a ragged last 2)
])
def test_lane_partial_blocks_share_loads_as_measured(shape, block):
    """dW_rf[co, ci, kh, kw, lane] reads H[.., co, ..] (dimension 0) and X[.., ci, kh.., kw..] (1, 2, 3): a block
    of co reuses every X load, a block of taps every H load."""
    from polyad.schedule.space import _lane_tile

    loads = ((frozenset({0, 4}), True), (frozenset({1, 2, 3, 4}), True))
    assert _lane_tile(shape, loads, ZEN4) == block + (8,)
    small = _lane_tile(shape, loads, ZEN5)  # 16 FMA slots: at most 12 accumulators
    assert math.prod(small[:-1]) <= 12 and small[0] > 1
    for tile in (_lane_tile(shape, loads, m) for m in (ZEN4, ZEN5)):
        assert all(n % t == 0 for n, t in zip(shape[1:-1], tile[1:-1]))  # ragged only along co


@pytest.mark.parametrize("dm,lanes", [(ZEN4, 8), (ZEN5, 8)])
def test_a_bias_gradient_of_few_channels_sums_rows_in_vectors_of_partials(dm, lanes):
    """``db[c] = sum_{n, y, x} D[n, c, y, x]`` (lenet_step's first conv, 6 channels): too few outputs for the
    cores, yet no operand is reused across them, so its partials are vectors along the contiguous x (one per
    channel), not lanes along the batch, each a gather 3456 floats apart (0.11-0.14 ms -> 0.03-0.04 ms at
    batch 64). A matmul's few outputs reuse X and keep the split for work-items."""
    D = pa.placeholder((32, 6, 24, 24), name="D")
    n, y, x = (pa.reduce_axis((0, e), name=v) for e, v in ((32, "n"), (24, "y"), (24, "x")))
    db = pa.compute((6,), lambda c: pa.sum(D[n, c, y, x], axis=[n, y, x]), name="db")
    g = graph_decisions(uniquely_named([db]), dm)
    assert g.made_by["rfactor"]["db"] == "rfactor_lanes"
    assert RFactor.of(g.rfactor["db"]) == RFactor(lanes, "x", True)
    X = pa.placeholder((32, 4096), name="X")
    W = pa.placeholder((6, 4096), name="W")
    k = pa.reduce_axis((0, 4096), name="k")
    i = pa.reduce_axis((0, 32), name="i")
    T = pa.compute((6,), lambda j: pa.sum(X[i, k] * W[j, k], axis=[i, k]), name="T")
    assert graph_decisions(uniquely_named([T]), dm).made_by["rfactor"].get("T") != "rfactor_lanes"
    d = np.random.default_rng(0).standard_normal(D.shape).astype(np.float32)
    got = pa.build(db, [D], schedule=auto_schedule([db], device=dm))(d)
    np.testing.assert_allclose(got, d.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)


def test_auto_blocks_conv_weight_partials_and_padded_data_gradients_at_the_benchmark_shapes():
    """Auto's blocks at the benchmark shapes on the 8-lane model: the dW partials block output channels (they
    share X's loads), the dilated dX's padded box blocks input channels (they share H's row vectors)."""
    import auto_golden

    got = {}
    for name in ("conv2d_3x3", "conv2d_5x5_s3", "conv2d_dilated"):
        s = auto_schedule(dict(auto_golden.graphs(name, None))["bwd"], device=ZEN4)
        got[name] = s.stages
    assert got["conv2d_5x5_s3"]["d_W_from_conv2d_rf"] == StageSchedule(tile=(4, 1, 1, 5, 8), vectorize=8)
    assert got["conv2d_3x3"]["d_W_from_conv2d_rf"] == StageSchedule(tile=(2, 1, 3, 3, 8), vectorize=8)
    dil = got["conv2d_dilated"]
    assert dil["d_X_from_conv2d_pad"] == StageSchedule(tile=(1, 4, 1, 32), vectorize=8)
    # its 16 channels innermost (filters_innermost): filters x a kernel row, 24 accumulators
    assert dil["d_W_from_conv2d_t"] == StageSchedule(tile=(4, 1, 3, 16), vectorize=8)


def test_cpu_operand_groups_put_the_blocks_sharing_a_strip_of_the_dominant_operand_in_one_group():
    """dense's dX at softmax's shapes, dX[i, k] = sum_j H[i, j] * W[j, k]: W (4 MB against H's 240 KB) is read
    without i, so the 10 row blocks of a 32-column strip go in one work-group, (1, 10) in OpenCL order, and the
    32 strips are the groups.  dW (X and H alike in size) and GPUs (their own work-group rule) get none."""
    from polyad.schedule.space import _operand_group

    H = pa.placeholder((60, 1000), name="H")
    W = pa.placeholder((1000, 1000), name="W")
    X = pa.placeholder((60, 1000), name="X")
    j, i = pa.reduce_axis((0, 1000), "j"), pa.reduce_axis((0, 60), "i")
    dX = pa.compute((60, 1000), lambda a, k: pa.sum(H[a, j] * W[j, k], axis=j), name="dX")
    dW = pa.compute((1000, 1000), lambda r, k: pa.sum(H[i, r] * X[i, k], axis=i), name="dW")
    assert _operand_group(dX.op, StageSchedule(tile=(6, 32), vectorize=8), ZEN4) == (1, 10)
    assert _operand_group(dX.op, StageSchedule(tile=(6, 128), vectorize=8), ZEN4) is None  # 8 strips: too few
    assert _operand_group(dW.op, StageSchedule(tile=(8, 16), vectorize=8), ZEN4) is None
    # W' (5 MB) read without the rows, but 500 row blocks of 6: more than a group may hold
    T, Wide = pa.placeholder((3000, 64), name="T"), pa.placeholder((64, 20000), name="Wide")
    j2 = pa.reduce_axis((0, 64), "j")
    tall = pa.compute((3000, 20000), lambda a, k: pa.sum(T[a, j2] * Wide[j2, k], axis=j2), name="tall")
    assert _operand_group(tall.op, StageSchedule(tile=(6, 32), vectorize=8), ZEN4) is None
    assert _operand_group(tall.op, StageSchedule(tile=(12, 32), vectorize=8), ZEN4) == (1, 250)
    s = auto_schedule([dX, dW], device=ZEN4)
    assert s.stages["dX"].local_size == _operand_group(dX.op, s.stages["dX"], ZEN4) is not None
    assert s.stages["dW"].local_size is None
    assert all(ss.local_size is None or len(ss.local_size) == 1 for ss in auto_schedule([dX], device=GPU).stages.values())


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_built_operand_groups_equal_evaluate():
    """A group that does not divide the blocks (7 row blocks of 3 rows in groups of 4) runs the NDRange
    rounded up to 8: the extra work-items do nothing."""
    H = pa.placeholder((20, 64), name="H")
    W = pa.placeholder((64, 256), name="W")
    j = pa.reduce_axis((0, 64), "j")
    dX = pa.compute((20, 256), lambda a, k: pa.sum(H[a, j] * W[j, k], axis=j), name="dX")
    rng = np.random.default_rng(0)
    h, w = rng.standard_normal((20, 64)).astype("float32"), rng.standard_normal((64, 256)).astype("float32")
    s = Schedule("groups", stages={"dX": StageSchedule(tile=(3, 8), vectorize=8, local_size=(1, 4))})
    np.testing.assert_allclose(pa.build(dX, [H, W], schedule=s)(h, w), h @ w, rtol=1e-4, atol=1e-4)


def test_register_blocks_prefer_rows_32_floats_wide_among_near_best_blocks():
    """The model ties dense dW's 8x16/float8 and 4x32/float8 (8 lanes): the 32-float rows win (0.60 against
    0.67 ms measured); on 16 lanes that is 2 vectors (8x32/float16), as before."""
    from polyad.schedule.auto import _shape_key

    assert _shape_key(StageSchedule(tile=(4, 32), vectorize=8)) < _shape_key(StageSchedule(tile=(8, 16), vectorize=8))
    assert _shape_key(StageSchedule(tile=(8, 32), vectorize=16)) < _shape_key(StageSchedule(tile=(8, 16), vectorize=16))
    assert _shape_key(StageSchedule(tile=(8, 32), vectorize=8)) < _shape_key(StageSchedule(tile=(4, 32), vectorize=8))
    H = pa.placeholder((60, 1000), name="H")
    X = pa.placeholder((60, 1000), name="X")
    i = pa.reduce_axis((0, 60), "i")
    dW = pa.compute((1000, 1000), lambda r, k: pa.sum(H[i, r] * X[i, k], axis=i), name="dW")
    assert auto_schedule([dW], device=ZEN4).stages["dW"].tile[-1] == 32


def _lenet_conv1():
    X = pa.placeholder((64, 1, 28, 28), name="X")
    W = pa.placeholder((6, 1, 5, 5), name="W")
    Y = pa.nn.conv2d(X, W, 1, 0, 1)
    return pa.differentiate(Y, [W], head=pa.placeholder(Y.shape, name="H"))[0]


def test_gpu_blocks_leave_as_many_work_items_as_the_naive_loops_or_the_device_wants():
    """gpu_occupancy: on the H200 lenet's conv1 weight gradient (150 outputs) ran 5.06 ms in the 10
    work-items of 4x1x1x5 blocks, 0.86 naive; a CPU model still ranks such blocks (a core runs each)."""
    dW = _lenet_conv1()
    op = dW.op
    info = stage_info(op)
    gpu = stage_space(op, H200)
    assert {c.schedule.tile for c in gpu.candidates if c.ranked} == {None}  # 150 outputs: no block leaves 150
    assert any(c.schedule.tile for c in gpu.candidates)  # the tuner still has them
    assert any(_blocks(info, ss) < 150 for ss in stage_space(op, ZEN5).ranked())
    # a large stage: blocks, but none leaving fewer than min_parallel work-items
    X = pa.placeholder((1024, 256), name="X")
    W = pa.placeholder((512, 256), name="W")
    mm = pa.nn.dense(X, W)
    info = stage_info(mm.op)
    ranked = stage_space(mm.op, H200).ranked()
    assert any(ss.tile for ss in ranked) and all(_blocks(info, ss) >= H200.min_parallel for ss in ranked)
    assert any(_blocks(info, ss) < H200.min_parallel for ss in stage_space(mm.op, ZEN5).ranked())


def test_gpu_splits_reductions_whose_outputs_fill_under_a_quarter_of_it():
    """rfactor_small_outputs on the H200: a convolution's weight gradient splits over the batch, each partial
    summing the rest of the image (lenet's conv1 is a PolyOp in its backward: its reduction box is read off
    its isl domain); dense's data gradient, 32000 outputs for 33792 work-items, stays whole (split 256 ways it
    ran 10x slower)."""
    from polyad.bench.tuning import backward_graph

    outs = uniquely_named(backward_graph("conv2d_3x3").outputs)
    g = graph_decisions(outs, H200)
    assert g.rfactor == {"d_W_from_conv2d": 8} and g.rule_of("rfactor", "d_W_from_conv2d") == "rfactor_small_outputs"
    assert graph_decisions(outs, ZEN5).rule_of("rfactor", "d_W_from_conv2d") != "rfactor_small_outputs"  # fills a CPU
    outs = uniquely_named(backward_graph("lenet_step").outputs)
    (cw1,) = [op for op in stage_ops(outs)[0] if op.name == "d_cw1_from_conv2d"]
    assert type(cw1).__name__ == "PolyOp"
    assert graph_decisions(outs, H200).rfactor["d_cw1_from_conv2d"] == 32
    Xd = pa.placeholder((32, 1000), name="X")
    Wd = pa.placeholder((1000, 1000), name="W")
    Yd = pa.nn.dense(Xd, Wd)
    dX = pa.differentiate(Yd, [Xd], head=pa.placeholder(Yd.shape, name="H"))[0]
    assert graph_decisions(uniquely_named([dX]), H200).rfactor == {}
    # a row sum of 60 outputs does split, and the split graph computes the same
    R = pa.placeholder((60, 1000), name="R")
    k = pa.reduce_axis((0, 1000), name="k")
    S = pa.compute((60,), lambda i: pa.sum(R[i, k], axis=k), name="S")
    (rs,) = graph_decisions(uniquely_named([S]), H200).rfactor.items()
    assert rs[0] == "S" and rs[1] >= 8
    r = np.random.default_rng(0).standard_normal((60, 1000)).astype(np.float32)
    sched = auto_schedule([S], device=H200)
    np.testing.assert_allclose(pa.build(S, [R], schedule=sched)(r), r.sum(1), rtol=1e-4)


def test_no_candidate_emits_more_statements_than_the_block_code_cap():
    """A 4x1x8x64/float2 block unrolled 4 of lenet's pooled gradient (a reduction) took isl 18 s to generate, and
    on the H200 lenet's dW2 in 8x32 scalar blocks unrolled 2 (512 statements, but four copies: 84x120 divides
    neither way) was 334 KB of OpenCL C: the space caps the statements a block emits (reductions; on a GPU every
    stage, its blocks scalars) and those its code holds, copies counted (every stage: a CPU copy of conv2d_5x5_s3
    in 1x8x1x1x8x32 blocks of float2, 1024 statements in 8 copies, did not compile in 50 s), for the model and the
    tuner alike."""
    from polyad.bench.tuning import backward_graph
    from polyad.schedule.space import RULE, _blocked_shape, block_statements

    cap, code = RULE["block_code"].constants["max_statements"], RULE["block_code"].constants["max_code"]
    assert block_statements(StageSchedule(tile=(4, 1, 8, 64), vectorize=2, unroll=4)) == 4096 > code
    dw2 = StageSchedule(tile=(8, 32), unroll=2)
    assert block_statements(dw2) == 512 == cap and block_statements(dw2, (84, 120)) == 2048 > code
    assert block_statements(dw2, (88, 128)) == 512 and block_statements(dw2, (84, 128)) == 1024 == code
    copy = StageSchedule(tile=(1, 8, 1, 1, 8, 32), vectorize=2)
    assert block_statements(copy) == 1024 and block_statements(copy, (32, 17, 3, 3, 20, 36)) == 8192 > code
    outs = uniquely_named(backward_graph("lenet_step").outputs)
    for dm, every_stage in ((ZEN5, False), (H200, True)):
        g = graph_decisions(outs, dm)
        ops = [op for op in stage_ops(g.outputs)[0] if op.name not in g.inline]
        sizes = {op.name: [(block_statements(c.schedule),
                            block_statements(c.schedule, _blocked_shape(g.infos[op.name], c.schedule)))
                           for c in stage_space(op, dm, g, g.infos[op.name]).candidates] for op in ops}
        capped = [n for op in ops if every_stage or g.infos[op.name].reduction for n in sizes[op.name]]
        assert len(capped) > 500 and max(a for a, _ in capped) <= cap and max(b for _, b in capped) <= code
        assert any(b > code // 2 for _, b in capped)
        free = [b for op in ops if not g.infos[op.name].reduction for _, b in sizes[op.name]]
        assert free and max(free) <= code  # a CPU's reduction-free blocks: their code alone is capped


def test_the_stage_space_key_carries_what_the_rules_read_of_the_graph():
    """``stage_space_key`` (the tuner computes each distinct key's candidates once) differs where a rule's
    proposals do: a copy whose producer is inlined is no plain copy for ``copy_rows``, and an rfactor partial's
    blocks depend on the graph rule that made the rfactor."""
    from polyad.schedule.space import GraphChoice, stage_space_key

    X = pa.placeholder((8, 64), name="X")
    A = pa.compute((8, 64), lambda i, j: X[i, j] * 2.0, name="A")
    B = pa.compute((8, 32), lambda i, j: A[i, j + 16], name="B")  # a crop: a plain copy
    (b,) = [op for op in stage_ops(uniquely_named([B]))[0] if op.name == "B"]
    info = stage_info(b)
    plain, fused = GraphChoice(outputs=[B]), GraphChoice(outputs=[B], inline=frozenset({"A"}))
    assert stage_space_key(b, info, plain) != stage_space_key(b, info, fused)
    assert stage_space_key(b, info, plain) == stage_space_key(b, info, GraphChoice(outputs=[B]))
    rules = {c.rule for c in stage_space(b, ZEN5, plain, info).candidates}
    assert "copy_rows" in rules and "copy_rows" not in {c.rule for c in stage_space(b, ZEN5, fused, info).candidates}

    # an rfactor partial (named ``<stage>_rf``): its blocks depend on the rule that made the rfactor
    by_rows = GraphChoice(outputs=[B], made_by={"rfactor": {"C": "rfactor_rows"}})
    by_lanes = GraphChoice(outputs=[B], made_by={"rfactor": {"C": "rfactor_lanes"}})
    rf = pa.compute((8, 32), lambda i, j: X[i, j], name="C_rf")
    assert stage_space_key(rf.op, stage_info(rf.op), by_rows) != stage_space_key(rf.op, stage_info(rf.op), by_lanes)


def test_row_sums_of_exp_over_60_rows_of_1000_run_in_vectors_of_partials():
    """softmax_homebrew's ``S[i, 0] = sum_j exp(T[i, j])`` (keepdims): 60000 iterations, which ran as 8 scalar
    work-items (the rule's floor was 65536); in lanes along j its forward ran 0.89x and its backward 0.93x.  A
    quarter of it (15 rows) stays under the floor."""
    for rows, split in ((60, True), (15, False)):
        T = pa.placeholder((rows, 1000), name="T")
        S = pa.ops.sum(pa.ops.exp(T), axis=-1, keepdims=True)
        g = graph_decisions(uniquely_named([S]), ZEN5)
        S = S.op.name
        assert (g.made_by["rfactor"].get(S) == "rfactor_lanes") == split, (rows, g.made_by)
        if split:
            assert RFactor.of(g.rfactor[S]).factor == 16
