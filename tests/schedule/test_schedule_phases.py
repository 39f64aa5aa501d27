"""The ``stride_phases`` rule (issue 12): the space proposes stride phases (``StageSchedule.phase``) where
``phase_strides`` finds strides, the model ranks them on strided reductions, and auto picks the measured
phased block for a strided convolution's data gradient at the benchmark shapes, nowhere else.

docs/scheduling.md (stride phases) has the measurements: conv2d_5x5_s3 dX 18.3 -> 6.55 ms with phase
1x1x3x3 + tile 1x17x1x4/4; max_pool dX no gain; the dilated convolution is padded.
"""

import dataclasses
import pathlib
import sys

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.bench.workloads import WORKLOADS
from polyad.codegen.phase import phase_shape
from polyad.schedule import DeviceModel, StageSchedule, prepare
from polyad.schedule.auto import auto_schedule
from polyad.schedule.cost import phase_build_s, stage_cost, stage_features, stage_info
from polyad.schedule.graph import fold, stage_ops, uniquely_named
from polyad.schedule.phase import phase_boxes, phase_domain, phase_strides
from polyad.schedule.space import RULE, graph_decisions, phase_options, stage_space
from polyad.te.tensor import PlaceholderOp, walk_ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402

ZEN5 = DeviceModel.load(auto_golden.DEVICES / "zen5-former-constants.json")
ZEN5_CALIBRATED = DeviceModel.load(auto_golden.DEVICES / "zen5-calibrated.json")
GPU = DeviceModel.load(auto_golden.DEVICES / "gpu-former-constants.json")
# the workloads whose auto backward gets a phased stage at the benchmark shapes (zen5-former-constants); the
# tiny-shape builds below check each against pa.evaluate
PHASED = {"conv2d_5x5_s3": {"d_X_from_conv2d_pad_t": StageSchedule(phase=(1, 3, 3, 1), tile=(8, 1, 1, 32),
                                                                    vectorize=16)}}
# ... computed with the batch innermost (batch_lanes; the hand-written gradient's conv_dX too)
INNER = {"conv2d_5x5_s3": {"d_X_from_conv2d_pad": 0}}


def _conv_dx(stride, size=14, c_in=2, c_out=3, k=5, pad=1, dil=1):
    X = pa.placeholder((1, c_in, size, size), name="X")
    W = pa.placeholder((c_out, c_in, k, k), name="W")
    Y = pa.nn.conv2d(X, W, strides=stride, padding=pad, dilation=dil)
    H = pa.placeholder(Y.shape, name="H")
    return [pa.differentiate(Y, [X], head=H)[0]]


def _stages(outs, dm=ZEN5):
    g = graph_decisions(uniquely_named(outs), dm)
    return g, [op for op in stage_ops(g.outputs)[0] if op.name not in g.inline]


def _phased_candidates(op, g, dm=ZEN5):
    return [c for c in stage_space(op, dm, g, g.infos[op.name]).candidates if c.rule.startswith("stride_phases")]


def test_phases_are_proposed_only_where_phase_strides_finds_strides():
    for stride, want in ((1, None), (3, (1, 1, 3, 3))):
        g, ops = _stages(_conv_dx(stride))
        found = {op.name: phase_strides(op) for op in ops}
        assert any(v == want for v in found.values()) if want else all(v is None for v in found.values())
        for op in ops:
            cands = _phased_candidates(op, g)
            if found[op.name] is None:
                assert not cands and not g.infos[op.name].phased, (stride, op.name)
            else:
                assert cands, (stride, op.name)
                assert {c.schedule.phase for c in cands} == {found[op.name]}
                assert all(c.ranked for c in cands)  # a strided sum on a CPU: the model ranks them
                assert not any(c.ranked for c in _phased_candidates(op, g, GPU))  # never measured on a GPU
    # divisions of nothing a phase makes dense: a grouped convolution's f // 6, a flatten's i // 20
    lenet = WORKLOADS["lenet_step"].instantiate(batch=1)
    flat = WORKLOADS["flatten"].instantiate(batch=1, c=4, h=4, w=5)
    for case, name in ((lenet, "conv2d"), (flat, "flatten")):
        op = next(op for op in walk_ops([case.forward_te(case.placeholders())]) if op.name == name)
        assert phase_strides(op) is not None
        assert phase_options(op, stage_info(op)) == [] and not stage_info(op).phased


def test_pool_gradients_phase_without_vectors_along_a_phased_dimension():
    for kind in ("max", "avg"):
        X = pa.placeholder((1, 2, 16, 16), name="X")
        Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, kind)
        H = pa.placeholder(Y.shape, name="H")
        g, ops = _stages([pa.differentiate(Y, [X], head=H)[0]])
        cands = [c for op in ops for c in _phased_candidates(op, g)]
        assert cands, kind
        phases = {c.schedule.phase for c in cands}
        assert phases == {(1, 1, 2, 2), (1, 1, 2, 1)}, kind  # the innermost unphased: vectors along x
        for c in cands:
            assert not c.ranked  # reduction-free: for the tuner (max_pool measured no gain)
            if c.schedule.vectorize > 1:
                assert c.schedule.phase[-1] == 1, (kind, c.schedule)


def test_phased_cost_follows_the_measurements_at_the_bench_shape():
    """The model's costs of phased NCHW blocks (batch_lanes now runs this stage with the batch innermost)."""
    grads = uniquely_named(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"])
    op = stage_ops(fold(grads, "d_X_from_conv2d_pad"))[1]["d_X_from_conv2d_pad"]  # the crop, folded: the dX
    info = stage_info(op)
    assert info.strided and [ph for ph, _ in info.phased] == [(1, 1, 3, 3)]
    p = info.phase_info((1, 1, 3, 3))
    assert not p.strided and p.shape == phase_shape(info.shape, (1, 1, 3, 3)) and p.phases == 9
    assert p.iterations == info.iterations and p.flops == info.flops

    def cost(**kw):
        return stage_cost(info, StageSchedule(**kw), ZEN5_CALIBRATED)

    ph = (1, 1, 3, 3)
    # measured on the Zen 5 VM whose calibration that is (thirty-first session, one process, medians of 5 profiles):
    # 1x17x1x16/16 2.92 ms, 1x17x1x4/4 3.09, 1x17x1x8/8 3.19, 1x17x1x2/2 4.08, 1x17x1x1 11.0, the stride cell
    # 2x1x3x3 (unrolled 2x) 22.6; on the Zen 4 (8 lanes, 16 registers): 1x17x1x4/4 6.55, 1x17x1x2/2 9.4, 1x17x1x8/8
    # 11.0 (spills), the stride cell 18.3, the phase alone 33.6
    best = cost(phase=ph, tile=(1, 17, 1, 16), vectorize=16)
    two, scalar = cost(phase=ph, tile=(1, 17, 1, 2), vectorize=2), cost(phase=ph, tile=(1, 17, 1, 1))
    assert best < cost(phase=ph, tile=(1, 17, 1, 4), vectorize=4) < two < scalar < cost(tile=(2, 1, 3, 3), unroll=2)
    assert best < cost(phase=ph, tile=(1, 17, 1, 8), vectorize=8) < two
    assert cost(phase=ph) > scalar
    # the build term: phases x block statements
    assert phase_build_s(StageSchedule(phase=ph, tile=(1, 17, 1, 4), vectorize=4)) == pytest.approx(
        9 * 17 * RULE["stride_phases"].constants["build_s_per_statement"]
        / RULE["stride_phases"].constants["amortised_runs"])
    assert phase_build_s(StageSchedule(tile=(1, 17, 1, 4), vectorize=4)) == 0.0
    f = stage_features(info, StageSchedule(phase=ph, tile=(1, 17, 1, 16), vectorize=16), ZEN5_CALIBRATED)
    assert f["phases"] == 9 and f["cost_s"] == best and f["stride_cell"] == 0.0


def test_full_width_accumulators_past_the_registers_are_charged_what_they_spill():
    """A 3x3/2/1 conv2d's phased data gradient (16x32x56x56 -> 64) on the Zen 5 VM (thirty-second session, medians
    of 7 profiles): 1x8x2x16/float16 (16 accumulators) 3.75 ms, 1x32x1x16 (32, and the operands: 34 live in 32
    registers) 6.62; a spilled full-width register is a 64-byte store and load each step (a slope of 1 a register
    over).  Narrower vectors keep the slope of 4: on the Zen 4 (AVX2), 17 float4 accumulators ran best."""
    X = pa.placeholder((16, 32, 56, 56), name="X")
    W = pa.placeholder((64, 32, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=2, padding=1)
    H = pa.placeholder(Y.shape, name="H")
    grads = uniquely_named([pa.differentiate(Y, [X], head=H)[0]])
    op = stage_ops(fold(grads, "d_X_from_conv2d_pad"))[1]["d_X_from_conv2d_pad"]
    info = stage_info(op)

    def cost(tile):
        return stage_cost(info, StageSchedule(phase=(1, 1, 2, 2), tile=tile, vectorize=16), ZEN5_CALIBRATED)

    assert cost((1, 8, 2, 16)) < cost((1, 32, 1, 16)) / 1.3
    s = auto_schedule(grads, device=ZEN5_CALIBRATED)
    ss = s.stages["d_X_from_conv2d_pad"]
    assert ss == StageSchedule(tile=(1, 8, 2, 16), vectorize=16, phase=(1, 1, 2, 2)), ss  # 16 accumulators


def test_auto_picks_phases_for_the_strided_conv_data_gradient_only():
    got = {}
    for name in sorted(WORKLOADS):
        for kind, outs in auto_golden.graphs(name, None):
            s = auto_schedule(outs, device=ZEN5)
            for n, ss in s.stages.items():
                if ss.phase is not None:
                    got.setdefault(name, {})[kind, n] = ss
    want = {name: {("bwd", n): ss for n, ss in st.items()} for name, st in PHASED.items()}
    want["conv2d_5x5_s3"]["hand", "conv_dX_t"] = PHASED["conv2d_5x5_s3"]["d_X_from_conv2d_pad_t"]
    assert got == want
    # not where phases measured no gain or cannot pay: max_pool's dX (stride cells), the dilated convolution
    # (padded), tiny shapes (the build outweighs microseconds)
    for name, shape in (("max_pool", None), ("conv2d_dilated", None), ("conv2d_5x5_s3", auto_golden.TINY["conv2d_5x5_s3"]),
                        ("conv2d_dilated", auto_golden.TINY["conv2d_dilated"])):
        s = auto_schedule(dict(auto_golden.graphs(name, shape))["bwd"], device=ZEN5)
        assert all(ss.phase is None for ss in s.stages.values()), name
    s = auto_schedule(dict(auto_golden.graphs("conv2d_5x5_s3", None))["bwd"], device=ZEN5)
    assert s.innermost == INNER["conv2d_5x5_s3"]
    assert any("phase 1x3x3x1, tile 8x1x1x32, vectorize 16" in n for n in s.notes)


def _fit(ss, shape):
    q = phase_shape(shape, ss.phase)
    tile = tuple(max(1, min(t, n)) for t, n in zip(ss.tile, q))
    vec = ss.vectorize
    while vec > 1 and tile[-1] % vec:
        vec //= 2
    return StageSchedule(phase=ss.phase, tile=tile, vectorize=vec, unroll=ss.unroll)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("name", sorted(PHASED))
def test_the_phased_auto_stages_compute_the_gradient_at_tiny_shapes(name):
    """The auto schedule (tiny shapes) with its bench-shape phased stages (fitted to one phase's points)
    equals pa.evaluate."""
    case = WORKLOADS[name].instantiate(**auto_golden.TINY[name])
    ph = case.placeholders()
    Y = case.forward_te(ph)
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name="H")
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], H))
    ins = [ph[i.name] for i in case.inputs] + [H]
    auto = auto_schedule(grads, device=ZEN5)
    auto = dataclasses.replace(auto, innermost={**auto.innermost, **INNER[name]})
    g, _ = prepare(grads, auto)
    ops = {op.name: op for op in walk_ops(g) if not isinstance(op, PlaceholderOp)}
    stages = dict(auto.stages)
    for n, ss in PHASED[name].items():
        assert phase_strides(ops[n]) == ss.phase
        stages[n] = _fit(ss, ops[n].shape)
    sched = dataclasses.replace(auto, name="phased", stages=stages)
    data = case.data(seed=3)
    arrays = [data[t.name] for t in ins]
    mod = pa.build(grads, ins, schedule=sched)
    got = mod(*arrays)
    got = got if isinstance(got, list) else [got]
    want = pa.evaluate(grads, dict(zip(ins, arrays)))
    for t, a, b in zip(grads, got, want):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)


def _pool_dx(size, k=3, s=2, pad=1, n=1, c=2):
    """A max pool's data gradient with the argmax fed, as pa.vjp's backward builds it."""
    from polyad.te.graph import cut

    X = pa.placeholder((n, c, size, size), name="X")
    fwd, bwd = pa.vjp(pa.nn.pool2d(X, k, s, pad, "max"), [X], [X])
    outs, ins = cut(list(bwd.grads), [X] + list(bwd.heads) + list(fwd.saved))
    return fwd, outs, ins


def test_overlapping_strided_pool_gradients_run_as_phased_gathers_where_the_phases_are_equal():
    """phased_gathers: a 3x3/2/1 max pool's gradient over 56x56 (phases of 28) is the phased gather, a phase's row
    in seven float4 (measured 0.76-0.80x the scatter); over 55x55 (phases of 28 and 27, 1.4-2.5x slower phased)
    and on a GPU it stays what it was; a 2x2/2 pool's (no overlap: no reduction) is not this rule's."""
    for dm in (ZEN5, ZEN5_CALIBRATED):
        _, outs, _ = _pool_dx(56, n=16, c=32)
        s = auto_schedule(outs, device=dm)
        assert s.stages["d_X_from_pool2d"] == StageSchedule(phase=(1, 1, 2, 2), tile=(1, 1, 1, 28), vectorize=4)
        assert any("phased gather" in t for t in s.notes)
        _, outs, _ = _pool_dx(112, n=8, c=64)
        assert auto_schedule(outs, device=dm).stages["d_X_from_pool2d"] == StageSchedule(
            phase=(1, 1, 2, 2), tile=(1, 1, 1, 56), vectorize=8)
        _, outs, _ = _pool_dx(55, pad=0, n=16, c=32)
        assert "d_X_from_pool2d" not in auto_schedule(outs, device=dm).stages  # the scatter's naive loops
        _, outs, _ = _pool_dx(100, k=2, pad=0, n=4, c=8)
        assert (auto_schedule(outs, device=dm).stages.get("d_X_from_pool2d") or StageSchedule()).phase is None
    _, outs, _ = _pool_dx(56, n=16, c=32)
    assert (auto_schedule(outs, device=GPU).stages.get("d_X_from_pool2d") or StageSchedule()).phase is None


def test_the_phased_pool_gather_adds_what_the_scatter_adds(opencl):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    x[0, 0, :4, :4] = 1.0  # ties: the argmax keeps the first
    fwd, outs, ins = _pool_dx(16, c=3)
    feeds = dict(zip([t.name for t in fwd.saved], [np.asarray(a) for a in fwd.module(x)]), X=x)
    feeds["d_pool2d"] = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    args = [feeds[t.name] for t in ins]
    assert auto_schedule(outs).stages["d_X_from_pool2d"].phase == (1, 1, 2, 2)  # rows of 8 in one vector
    got = np.asarray(pa.build(outs, ins)(*args)[0])
    assert np.array_equal(got, np.asarray(pa.build(outs, ins, schedule="naive")(*args)[0]))  # the scatter
    np.testing.assert_allclose(got, pa.evaluate(outs, dict(zip(ins, args)))[0], rtol=1e-6, atol=1e-6)


def test_a_phase_is_counted_from_its_q_and_its_boxes_drop_the_clip_of_a_strided_window():
    """A stride-2 window of 3 taps (padding 1) over 28 rows: the even phase ``x = 2q`` reads ``y = q``, the odd
    one ``y = q + s``, ``s`` in ``[0, 1]``, except at ``q = 27`` where the rows end.  Over the phases' boxes the
    domain is the window with ``y <= 28``: what pad_reads runs on a zero-padded operand."""
    D = isl.Set("{ [x, y] : x - 1 <= 2y <= x + 1 and 0 <= x < 56 and 0 <= y < 28 }")
    even, skew = phase_domain(D, 1, (2,), (0,))
    assert skew == [[1]] and even.is_equal(isl.Set("{ [q, s] : 0 <= q <= 27 and s = 0 }"))
    odd, skew = phase_domain(D, 1, (2,), (1,))
    assert skew == [[1]] and odd.is_equal(isl.Set("{ [q, s] : 0 <= q <= 27 and 0 <= s <= 1 and q + s <= 27 }"))
    boxes = phase_boxes(D, 1, (2,))
    assert boxes.is_equal(isl.Set("{ [x, y] : x - 1 <= 2y <= x + 1 and 0 <= x < 56 and 0 <= y <= 28 }"))
    evens = isl.Set("{ [x, y] : x = 2y and 0 <= x < 8 }")  # no point in the odd phase: no boxes
    assert phase_domain(evens, 1, (2,), (1,)) is None and phase_boxes(evens, 1, (2,)) is None
    # a stride-3 window of 5 taps: 9 phases' boxes, each at most 2 taps, the clip at both ends dropped
    D3 = isl.Set("{ [x, y] : x - 2 <= 3y <= x + 2 and 0 <= x < 57 and 0 <= y < 19 }")
    assert phase_boxes(D3, 1, (3,)).is_equal(isl.Set("{ [x, y] : x - 2 <= 3y <= x + 2 and 0 <= x < 57 }"))

