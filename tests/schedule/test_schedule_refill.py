"""The model's refill term: a block whose reads over its reduction outgrow the work-item's cache brings its
footprint in from the next level, once per block (``cost.block_footprint``, ``DeviceModel.l1_bytes``/``fill_gbs``).

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
from polyad.schedule.graph import scheduled_graph, stage_ops
from polyad.schedule.space import graph_decisions

from test_auto_golden import MODELS  # noqa: F401 - the recorded models (tests/data/devices)

ZEN5 = MODELS["zen5-former-constants"]
# the recorded model with the refill figures this VM's calibration measured (32 KiB, 251-263 GB/s of lines)
REFILL = dataclasses.replace(ZEN5, l1_bytes=32768, fill_gbs=260.0)


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
    assert cost.stage_cost(info, batch, ZEN5) < cost.stage_cost(info, batch, REFILL)
    roomy = dataclasses.replace(REFILL, l1_bytes=1 << 20)  # 244 KB fits: neighbours find their rows
    assert cost.stage_cost(info, batch, roomy) == cost.stage_cost(info, batch, ZEN5)


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
    assert old[0] > 1 and old[1] == 1, old  # what the roofline terms chose


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
