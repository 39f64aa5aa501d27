"""The model's refill term: a block whose reads over its reduction outgrow the work-item's cache brings its
footprint in from the next level, once per block (``cost.block_footprint``, ``DeviceModel.l1_bytes``/``fill_gbs``);
and the lanes of its partial blocks' vector groups that reduce alone (``cost.ragged_share``).

Measured on the Zen 5 VM (docs/scheduling.md, "Refills"): a 3x3/2/1 convolution's 4x1x6x16 batch blocks read 244 KB
each and ran 6.8 ms, its 1x4x4x16 channel blocks 1.76; the roofline terms alone had priced both at 1.1-1.7 ms.
"""

import dataclasses
import json

import numpy as np
import pytest

import polyad as pa
from polyad.schedule import DeviceModel, StageSchedule
from polyad.schedule import cost
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import fold, scheduled_graph, stage_ops
from polyad.schedule.space import graph_decisions

import auto_golden  # noqa: E402 - tests/schedule is on the path (conftest)
from test_auto_golden import MODELS  # the recorded models (tests/data/devices)

ZEN5 = MODELS["zen5-former-constants"]  # no refill figures: the term is off
REFILL = DeviceModel.load(auto_golden.DEVICES / "zen5-calibrated.json")  # 32 KiB, 251 GB/s of lines


def _conv(n=16, c=32, size=56, k=64, kernel=3, stride=2, pad=1):
    X = pa.placeholder((n, c, size, size), name="X")
    W = pa.placeholder((k, c, kernel, kernel), name="W")
    return pa.nn.conv2d(X, W, strides=stride, padding=pad)


def _stage(Y, name, dm):
    g = graph_decisions(scheduled_graph([Y]), dm)
    return next(op for op in stage_ops(g.outputs)[0] if op.name == name), g.infos[name]


def test_a_blocks_footprint_is_each_reads_box_over_the_reduction():
    """``S[b, c, h % 2, w % 2, y + h // 2, x + w // 2]`` over c < 32, h, w < 3: a block of 4 batches, 6 rows and 16
    columns reads 4 x 32 x 2 x 2 x 7 rows of 17 floats; ``W[f, c, h, w]``: 32 x 3 rows of 3 for one filter."""
    _, info = _stage(_conv(), "conv2d", REFILL)
    fp, lines = cost.block_footprint(info, (4, 1, 6, 16))
    assert fp == 4 * 32 * 4 * 7 * 17 * 4 + 32 * 3 * 3 * 4
    # rows at a random offset: 1 + (68 - 4) / 64 lines of the input's, 1 + (12 - 4) / 64 of the weights'
    assert lines == pytest.approx(4 * 32 * 4 * 7 * 2 + 32 * 3 * (1 + 8 / 64))
    # channel blocks share the input's rows: four filters, four rows
    assert cost.block_footprint(info, (1, 4, 4, 16))[0] == 32 * 4 * 5 * 17 * 4 + 4 * 32 * 3 * 3 * 4


def test_a_divided_index_grows_half_a_point_a_point_and_a_gathered_one_spans_its_tensor():
    X = pa.placeholder((4, 64), name="X")
    I = pa.placeholder((8,), name="I", dtype="int32")
    k = pa.reduce_axis((0, 8), name="k")
    Y = pa.compute((4, 32), lambda i, j: pa.sum(X[i, (j + k) // 2] + X[I[k], j], axis=k), name="Y")
    op = scheduled_graph([Y])[0].op
    info = cost.stage_info(op)
    assert set(info.footprints) == {
        (4, ((4, 0, (1.0, 0.0)), (64, 3, (0.0, 0.5)))),  # X[i, (j + k) // 2]: 4 values over k < 8, half a j
        (4, ((4, 3, (0.0, 0.0)), (64, 0, (0.0, 1.0)))),  # X[I[k], j]: any row
        (4, ((8, 7, (0.0, 0.0)),)),  # I[k]
    }
    # 16 columns: (j + k) // 2 in [0, 11]; 4 rows of 16; 8 indices
    assert cost.block_footprint(info, (1, 16))[0] == (12 + 4 * 16 + 8) * 4


def test_no_refill_without_the_figures_or_within_the_cache():
    _, info = _stage(_conv(), "conv2d", REFILL)
    batch = StageSchedule(tile=(4, 1, 6, 16), vectorize=16)
    off = dataclasses.replace(REFILL, l1_bytes=0, fill_gbs=0.0)
    assert cost.stage_cost(info, batch, off) < cost.stage_cost(info, batch, REFILL)
    roomy = dataclasses.replace(REFILL, l1_bytes=1 << 20)  # 244 KB fits: neighbours find their rows
    assert cost.stage_cost(info, batch, roomy) == cost.stage_cost(info, batch, off)


@pytest.mark.parametrize("conv", [
    dict(stride=2, pad=1),  # measured: 4x1x6x16 6.8 ms -> 1x8x3x16 3.2 ms (torch 1.24)
    dict(size=28, c=64, k=128, kernel=1, stride=1, pad=0),  # 2x1x8x16 3.3 ms -> 1x8x3x16 1.0 (torch 0.99)
    dict(size=28, c=32, k=32, kernel=5, stride=1, pad=2),  # 4x1x6x16 3.0 ms -> 1x4x6x16 2.1 (torch 1.33)
], ids=["3x3s2", "1x1", "5x5"])
def test_with_the_refill_term_auto_blocks_a_convolutions_filters_not_its_batch(conv):
    Y = _conv(**conv)
    tile = auto_schedule([Y], device=REFILL).stages["conv2d"].tile
    assert tile[0] == 1 and tile[1] > 1, tile
    old = auto_schedule([Y], device=ZEN5).stages["conv2d"].tile
    # what the roofline terms chose: no filter blocks; batch blocks, or the 1x1's rows of 28 (its last tile moved)
    assert old[1] == 1 and (old[0] > 1 if conv.get("kernel") != 1 else old == (1, 1, 6, 16)), old


def test_the_refill_figures_come_from_a_cpus_calibration_only():
    cal = {"format": "polyad-calibration-2", "kind": "cpu", "compute_units": 2,
           "gflops": {"1": 20, "8": 180}, "accumulators": {"4": 90, "8": 170, "16": 180, "32": 110},
           "accumulator_width": 8, "stream_gbs": 30.0, "cache_gbs": 400.0, "launch_s": 2e-5,
           "l1_bytes": 32768, "fill_gbs": 250.0}
    m = DeviceModel.from_calibration(cal)
    assert (m.l1_bytes, m.fill_gbs) == (32768, 250.0)
    assert "a work-item's cache: 32 KiB, refilled at 250 GB/s" in m.describe()
    assert DeviceModel.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    g = DeviceModel.from_calibration(dict(cal, kind="gpu", gflops={"1": 5e4}))
    assert (g.l1_bytes, g.fill_gbs) == (0, 0.0) and "refilled" not in g.describe()
    old = {k: v for k, v in cal.items() if k not in ("l1_bytes", "fill_gbs")}  # a model recorded before
    assert (DeviceModel.from_calibration(old).l1_bytes, DeviceModel.from_calibration(old).fill_gbs) == (0, 0.0)


def test_the_calibration_measures_the_refill(opencl):
    from polyad.pipeline import select_device
    from polyad.runtime.calibrate import _L1_SLICES, measure

    cal = measure(select_device(), [1, 4])
    assert cal["l1_bytes"] in _L1_SLICES
    assert 0 < cal["fill_gbs"]
    assert np.isfinite(cal["fill_gbs"])


def _clipped_gradient(n):
    """``dX[i] = sum(H[i - k] * W[k])`` over ``0 <= i - k < n - 2``, k < 3: a 3-tap window clipped at both ends."""
    X = pa.placeholder((n,), name="X")
    W = pa.placeholder((3,), name="W")
    k = pa.reduce_axis((0, 3), name="k")
    Y = pa.compute((n - 2,), lambda x: pa.sum(X[x + k] * W[k], axis=k), name="Y")
    (dX,) = pa.differentiate(Y, [X], pa.placeholder((n - 2,), name="H"))
    return cost.stage_info(dX.op)


def test_the_ragged_lanes_of_a_clipped_window_are_counted_group_by_group():
    """16 points, 42 iterations (points 0, 1 and 14, 15 lose taps).  In groups of 4 from 0, the first group's lanes
    1-3 have taps lane 0 lacks (3 + 2 iterations), the last group's likewise (2 + 3): 10 ragged.  In pairs: one
    lane of the first and of the last pair.  One group of 16: every iteration is some lane's alone."""
    info = _clipped_gradient(16)
    assert info.iterations == 42 and len(info.domains) == 1
    widths = (1, 2, 4, 8, 16)
    assert cost.ragged_share(info, 4, 4, widths) == (10 / 42, 0.0)
    assert cost.ragged_share(info, 8, 4, widths) == (10 / 42, 0.0)  # the blocks' size leaves the groups alike
    assert cost.ragged_share(info, 2, 2, widths) == (2 / 42, 0.0)
    assert cost.ragged_share(info, 16, 16, widths) == (1.0, 0.0)
    assert cost.ragged_share(info, 4, 1, widths) is None  # scalar blocks have no groups


def test_a_rows_rest_runs_in_narrower_groups_and_its_last_points_alone():
    """15 points in float4 blocks: 12 in full tiles, then a float2 group (12, 13: point 13 lacks tap 0, one ragged
    iteration besides the first group's 5) and point 14 alone (its one tap)."""
    info = _clipped_gradient(15)
    assert info.iterations == 39
    assert cost.ragged_share(info, 4, 4, (1, 2, 4, 8, 16)) == (6 / 39, 1 / 39)
    assert cost.ragged_share(info, 4, 4, (1, 4, 8, 16)) == (5 / 39, 6 / 39)  # no float2: 12-14 alone


def test_phased_vector_blocks_of_a_strided_convolutions_data_gradient_are_priced_by_their_ragged_lanes():
    """A 3x3/2/1 conv2d's data gradient (16x32x56x56 from 64 filters), phased 1x1x2x2: measured on the Zen 5 VM
    (one process, medians of 5), 1x8x1x16/float16 3.3-3.4 ms, 1x16x1x16 3.65-3.8, 1x8x2x16 3.8-4.0, 1x32x1x16
    4.7-5.1 (32 accumulators: auto's), 1x8x2x8/float8 4.8, 1x32x1x4/float4 8.8-13 (auto's before).  The border
    column's clipped window is 3.6% of the iterations, in its rows' last float4 group; one neighbour's lost points
    times 15 lanes had priced 54%."""
    X = pa.placeholder((16, 32, 56, 56), name="X")
    W = pa.placeholder((64, 32, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=2, padding=1)
    grads = pa.differentiate(Y, [X, W], pa.placeholder(Y.shape, name="H"))
    g = graph_decisions(scheduled_graph(list(grads)), REFILL)
    assert g.pad == {"d_X_from_conv2d_pad"}  # auto runs it over its phases' boxes: the border cases are not priced
    folded = fold(scheduled_graph(list(grads)), "d_X_from_conv2d_pad")
    info = cost.stage_info(stage_ops(folded)[1]["d_X_from_conv2d_pad"])
    ph = (1, 1, 2, 2)
    assert cost.ragged_share(info.phase_info(ph), 16, 16, REFILL.widths) == pytest.approx((3 / 83, 0.0))

    def c(tile, vec):
        return cost.stage_cost(info, StageSchedule(phase=ph, tile=tile, vectorize=vec), REFILL)

    sixteen = min(c((1, 8, 1, 16), 16), c((1, 16, 1, 16), 16), c((1, 8, 2, 16), 16))
    assert sixteen < c((1, 8, 2, 8), 8) < c((1, 32, 1, 4), 4)
    assert auto_schedule(list(grads), device=REFILL).stages["d_X_from_conv2d_pad"].vectorize == 16


def test_the_learned_models_features_carry_the_footprint_the_refill_and_the_ragged_lanes():
    _, info = _stage(_conv(), "conv2d", REFILL)
    batch = cost.stage_features(info, StageSchedule(tile=(4, 1, 6, 16), vectorize=16), REFILL)
    assert list(batch) == list(cost.FEATURES)
    assert batch["footprint_bytes"] == cost.block_footprint(info, (4, 1, 6, 16))[0]
    assert 0 < batch["refill_s"] < batch["mem_s"]
    assert batch["ragged"] == batch["odd"] == 0.0  # a box has no regions: no groups are ragged
    channels = cost.stage_features(info, StageSchedule(tile=(1, 8, 2, 16), vectorize=16), REFILL)
    assert channels["refill_s"] < batch["refill_s"] / 2  # the filters share the rows the block reads
    clipped = _clipped_gradient(15)
    f = cost.stage_features(clipped, StageSchedule(tile=(4,), vectorize=4), REFILL)
    assert (f["ragged"], f["odd"]) == (6 / 39, 1 / 39)
