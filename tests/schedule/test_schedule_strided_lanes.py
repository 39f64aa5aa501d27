"""Rule ``strided_lanes``: a box reduction that reads its rows at a stride (an unpadded pool's ``X[.., 2*x + kw]``)
runs one float4 a work-item on a CPU.  Measured (PoCL 3.1, the Zen 5 VM; docs/scheduling.md): the max_pool workload's
forward 16.2-17.1 ms in auto's former 1x1x8x32/float16 blocks, 2.66-2.89 in 1x1x1x4/float4, 23-25 in float8 or
float16 vectors of one row; the lanes two apart load as one wide load and a shuffle in float4 only."""

import numpy as np
import pytest

import polyad as pa
from polyad.schedule import DeviceModel
from polyad.schedule.auto import auto_schedule
from polyad.schedule.space import _lane_stride

import auto_golden  # noqa: E402 - tests/schedule is on the path (conftest)

ZEN5 = DeviceModel.load(auto_golden.DEVICES / "zen5-calibrated.json")
GPU = DeviceModel.load(auto_golden.DEVICES / "h200-calibrated.json")


def _pool(kernel=2, stride=2, pad=0, kind="max", shape=(2, 3, 20, 20)):
    X = pa.placeholder(shape, name="X")
    return X, pa.nn.pool2d(X, kernel, stride, pad, kind)


def test_the_lane_stride_is_the_last_indexs_scale_of_the_last_output_variable():
    _, Y = _pool()
    assert _lane_stride(Y.op) == 2
    _, Y3 = _pool(kernel=3, stride=3)
    assert _lane_stride(Y3.op) == 3
    X = pa.placeholder((8, 16), name="X")
    W = pa.placeholder((12, 16), name="W")
    assert _lane_stride(pa.nn.dense(X, W).op) is None  # W[j, k]: the lanes j are rows apart, not a scaled index


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_an_unpadded_strided_pool_runs_one_float4_a_work_item_and_computes_what_evaluate_does(kind):
    X, Y = _pool(kind=kind)
    s = auto_schedule([Y], device=ZEN5)
    stage = "pool2d" if kind == "max" else "pool2d_sum"
    assert s.stages[stage].tile == (1, 1, 1, 4) and s.stages[stage].vectorize == 4
    assert any(n.startswith(f"{stage}: ") and "reads its rows 2 apart" in n for n in s.notes)
    x = np.random.default_rng(0).standard_normal(X.shape).astype(np.float32)
    got = pa.build(Y, [X], schedule=s)(x)
    np.testing.assert_allclose(got, pa.evaluate(Y, {X: x}), rtol=1e-6, atol=1e-6)


def test_not_a_padded_pools_clipped_window_nor_a_gpu():
    """A 3x3/2/1 max pool's clipped window (regions) kept the model's whole rows in float2 (0.55 ms against the
    rule's 2.39 at 16x32x56x56); a GPU's model has no CPU vectors to shape."""
    _, Y = _pool(kernel=3, stride=2, pad=1, shape=(2, 3, 56, 56))
    assert _lane_stride(Y.op) == 2
    assert not any("apart" in n for n in auto_schedule([Y], device=ZEN5).notes)  # the model chose
    _, Y = _pool()
    assert not any("apart" in n for n in auto_schedule([Y], device=GPU).notes)
