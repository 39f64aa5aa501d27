"""Graph rule ``filters_innermost`` and stage rule ``channel_lane_blocks``: a convolution whose rows are shorter than
a vector runs with its output channels innermost, ``[n, y, x, k]``, vectors along the channels.

Measured on the Zen 5 VM (thirty-second session, torch in brackets): a 3x3/1/1 conv2d 16x128x14x14 -> 128,
forward 4.47 -> 2.32 ms (2.02), backward 9.47 -> 7.26 (4.26, its data gradient moved too); a 3x3/2/1 one from
16x64x28x28 (14x14 outputs) 2.49 -> 1.17 (1.16).
"""

import numpy as np
import pytest

import polyad as pa
from polyad.schedule import DeviceModel, Schedule, StageSchedule
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import scheduled_graph, stage_ops
from polyad.schedule.space import RULE, graph_decisions

import auto_golden  # noqa: E402 - tests/schedule is on the path (conftest)
from test_auto_golden import MODELS

ZEN5 = DeviceModel.load(auto_golden.DEVICES / "zen5-calibrated.json")  # float16 best: 16 lanes


def _conv(n=16, c=128, size=14, k=128, stride=1, groups=1):
    X = pa.placeholder((n, c, size, size), name="X")
    W = pa.placeholder((k, c // groups, 3, 3), name="W")
    return pa.nn.conv2d(X, W, strides=stride, padding=1, groups=groups), X, W


def test_a_convolution_on_rows_shorter_than_a_vector_runs_with_its_channels_innermost():
    Y, _, _ = _conv()
    s = auto_schedule([Y], device=ZEN5)
    assert s.innermost == {"conv2d": 1}, s.notes
    assert any(n.startswith("innermost conv2d: its rows (14) are shorter than a vector of 16") for n in s.notes)
    assert s.stages["conv2d_t"] == StageSchedule(tile=(2, 2, 3, 32), vectorize=16)  # channel_lane_blocks
    g = graph_decisions(scheduled_graph([Y]), ZEN5)
    ops = {op.name: op for op in stage_ops(g.outputs)[0]}
    assert ops["conv2d_t"].shape == (16, 14, 14, 128) and "W_t" in ops  # the weight, channels last


def test_its_gradients_move_too_and_a_strided_forward_reads_no_de_interleaved_copy():
    """The data gradient is a convolution on rows of 14; the weight gradient ``dW[k, c, r, s]`` one on rows of 3,
    along ``c``, its output gradient one value for all lanes: blocks of filters by a kernel row, not an rfactor
    over ``x`` (2.0 ms against 4.3)."""
    Y, X, W = _conv()
    H = pa.placeholder(Y.shape, name="H")
    s = auto_schedule(list(pa.differentiate(Y, [X, W], H)), device=ZEN5)
    assert s.innermost == {"d_X_from_conv2d_pad": 1, "d_W_from_conv2d": 1} and "d_W_from_conv2d" not in s.rfactor
    assert s.stages["d_W_from_conv2d_t"] == StageSchedule(tile=(4, 1, 3, 32), vectorize=16)
    Y2, _, _ = _conv(c=64, size=28, stride=2)  # 14x14 outputs: channels innermost read the input as one value
    s = auto_schedule([Y2], device=ZEN5)
    assert s.innermost == {"conv2d": 1} and not s.space_to_depth, s.notes


def test_a_strided_data_gradient_whose_phases_rows_are_short_moves_its_channels_and_keeps_its_phases():
    """A 3x3/2/1 conv2d from 16x64x28x28: its data gradient's rows of 28 are two phases of 14; with the channels
    innermost the phases run along the rows before them (1x2x2x1).  Measured: the stage 4.93 -> 1.85 ms, the
    backward 6.47 -> 3.86 (torch 2.65)."""
    Y, X, _ = _conv(c=64, size=28, stride=2)
    H = pa.placeholder(Y.shape, name="H")
    s = auto_schedule([pa.differentiate(Y, [X], H)[0]], device=ZEN5)
    assert s.innermost == {"d_X_from_conv2d_pad": 1}, s.notes
    assert any("its rows (14) are shorter" in n for n in s.notes)
    assert s.stages["d_X_from_conv2d_pad_t"] == StageSchedule(tile=(4, 1, 3, 32), vectorize=16, phase=(1, 2, 2, 1))


@pytest.mark.parametrize("why, kw, dm", [
    ("rows of 28 fill vectors", dict(size=28), ZEN5),
    ("channels no vector divides", dict(k=120), ZEN5),
    ("channels under a vector", dict(k=8), ZEN5),
    ("a GPU", {}, MODELS["gpu-former-constants"]),
    ("a depthwise conv: every operand reads the channels", dict(k=128, groups=128), ZEN5),
])
def test_not_where_vectors_along_the_rows_fill_or_the_channels_do_not(why, kw, dm):
    Y, _, _ = _conv(**kw)
    s = auto_schedule([Y], device=dm)
    assert "conv2d" not in s.innermost, (why, s.notes)


def test_the_rules_constants_and_measurements_sit_in_the_table():
    assert RULE["filters_innermost"].constants == {"min_vectors": 1, "min_iterations": 1 << 20}
    assert "16x128x14x14" in RULE["filters_innermost"].measured
    assert RULE["channel_lane_blocks"].constants == {"accumulators": (16, 24), "sizes": (1, 2, 3, 4, 6, 8)}


@pytest.mark.opencl
def test_channels_innermost_builds_equal_to_evaluate(opencl):
    """Tiny convolutions under the rule's schedule (the stage moved, its blocks, the weight's copy and the copy
    back): a forward, and a data gradient back to 32 channels."""
    rng = np.random.default_rng(0)
    blocks = StageSchedule(tile=(1, 2, 4, 32), vectorize=16)
    X = pa.placeholder((2, 4, 6, 6), name="X")
    W = pa.placeholder((32, 4, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, padding=1)
    x, w = (rng.standard_normal(t.shape).astype("float32") for t in (X, W))
    fwd = Schedule("moved", innermost={"conv2d": 1}, stages={"conv2d_t": blocks})
    (got,) = pa.build([Y], [X, W], schedule=fwd)(x, w)
    np.testing.assert_allclose(got, pa.evaluate([Y], {X: x, W: w})[0], rtol=1e-5, atol=1e-5)
    X2 = pa.placeholder((2, 32, 6, 6), name="X2")
    W2 = pa.placeholder((4, 32, 3, 3), name="W2")
    Y2 = pa.nn.conv2d(X2, W2, padding=1)
    H2 = pa.placeholder(Y2.shape, name="H2")
    (dX2,) = pa.differentiate(Y2, [X2], H2)
    name = next(op.name for op in stage_ops(scheduled_graph([dX2]))[0] if op.name.startswith("d_conv2d_pad"))
    bwd = Schedule("moved", innermost={name: 1}, stages={f"{name}_t": blocks})
    w2, h2 = rng.standard_normal(W2.shape).astype("float32"), rng.standard_normal(H2.shape).astype("float32")
    (got,) = pa.build([dX2], [W2, H2], schedule=bwd)(w2, h2)
    np.testing.assert_allclose(got, pa.evaluate([dX2], {W2: w2, H2: h2})[0], rtol=1e-5, atol=1e-5)
    (dW2,) = pa.differentiate(Y2, [W2], H2)
    wgt = Schedule("moved", innermost={"d_W2_from_conv2d": 1},
                   stages={"d_W2_from_conv2d_t": StageSchedule(tile=(4, 1, 3, 32), vectorize=16)})
    x2 = rng.standard_normal(X2.shape).astype("float32")
    (got,) = pa.build([dW2], [X2, H2], schedule=wgt)(x2, h2)
    np.testing.assert_allclose(got, pa.evaluate([dW2], {X2: x2, H2: h2})[0], rtol=1e-4, atol=1e-4)
    Y3 = pa.nn.conv2d(X2, W2, strides=2, padding=1)  # a phased data gradient, channels innermost
    H3 = pa.placeholder(Y3.shape, name="H3")
    (dX3,) = pa.differentiate(Y3, [X2], H3)
    name = next(op.name for op in stage_ops(scheduled_graph([dX3]))[0] if op.name.startswith("d_conv2d_pad"))
    ph = Schedule("moved", innermost={name: 1},
                  stages={f"{name}_t": StageSchedule(tile=(1, 2, 2, 32), vectorize=16, phase=(1, 2, 2, 1))})
    h3 = rng.standard_normal(H3.shape).astype("float32")
    (got,) = pa.build([dX3], [W2, H3], schedule=ph)(w2, h3)
    np.testing.assert_allclose(got, pa.evaluate([dX3], {W2: w2, H3: h3})[0], rtol=1e-4, atol=1e-4)
