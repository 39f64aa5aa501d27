"""The device model from a calibration, and the auto-scheduler keeping to it (no OpenCL needed)."""

import json
from pathlib import Path

import pytest

import polyad as pa
from polyad.schedule import DeviceModel, auto_schedule

DEVICES = Path(__file__).resolve().parents[1] / "data" / "devices"
RECORDED = sorted(DEVICES.glob("*.json"))

# an AVX2 CPU as PoCL runs it: float16 exists but spills (two float8 halves and register pressure)
AVX2 = {
    "format": "polyad-calibration-1", "kind": "cpu", "compute_units": 2,
    "gflops": {"1": 20, "2": 40, "4": 90, "8": 180, "16": 100},
    "accumulators": {"4": 90, "8": 170, "16": 180, "32": 110}, "accumulator_width": 8,
    "stream_gbs": 30.0, "cache_gbs": 400.0, "launch_s": 2e-5,
}
# a GPU: one lane per work-item is as fast as four; work-groups of 128 or 256 moved data fastest
GPU = {
    "format": "polyad-calibration-1", "kind": "gpu", "compute_units": 132,
    "gflops": {"1": 50000, "4": 50000},
    "accumulators": {"4": 50000, "8": 50000, "16": 49000, "32": 40000}, "accumulator_width": 1,
    "stream_gbs": 2500.0, "cache_gbs": 20000.0, "launch_s": 5e-6, "local_sizes": [128, 256],
}


def _models():
    return [pytest.param(DeviceModel.load(p), id=p.stem) for p in RECORDED] + [
        pytest.param(DeviceModel.from_calibration(AVX2, source="avx2-like"), id="avx2-like"),
        pytest.param(DeviceModel.from_calibration(AVX2, widths=(1, 2, 4), source="avx2-like, no float8"),
                     id="avx2-like-1-2-4"),
    ]


def _dense_backward(batch, n_in, n_out):
    X = pa.placeholder((batch, n_in), name="X")
    W = pa.placeholder((n_out, n_in), name="W")
    Y = pa.nn.dense(X, W)
    return list(pa.differentiate(Y, [X, W], pa.placeholder(Y.shape, name="H")))


def _workload_backward(name, **tiny):
    from polyad.bench.workloads import WORKLOADS

    case = WORKLOADS[name].instantiate(**tiny)
    ph = case.placeholders()
    Y = case.forward_te(ph)
    return list(pa.differentiate(Y, [ph[n] for n in case.wrt], ph["H"]))


def test_the_recorded_models_are_there():
    assert {p.name for p in RECORDED} >= {"zen5-former-constants.json", "gpu-former-constants.json"}


def test_an_avx2_like_calibration():
    m = DeviceModel.from_calibration(AVX2, source="avx2-like")
    assert m.kind == "cpu" and m.cores == 2 and m.widths == (1, 2, 4, 8, 16)
    assert m.vector_width == 8  # float16 spills: float8 is the fastest
    assert m.fma_slots == 16  # the most accumulators within 95% of the best rate
    assert m.registers == 16  # the most within 75%: 32 accumulators spill
    assert m.local_sizes == () and m.min_parallel == 8
    assert m.gflops_at(8) == 180.0 and m.peak_gflops == 180.0 and m.gflops_at(32) == 20.0
    assert m.source == "avx2-like" and "avx2-like" in m.describe()
    narrow = DeviceModel.from_calibration(AVX2, widths=(1, 2, 4))
    assert narrow.widths == (1, 2, 4) and narrow.vector_width == 4
    assert dict(narrow.gflops) == {1: 20.0, 2: 40.0, 4: 90.0}
    # a width the probe passed that the calibration did not time is not offered either
    assert DeviceModel.from_calibration(AVX2, widths=(1, 2, 4, 32)).widths == (1, 2, 4)


def test_a_gpu_like_calibration():
    g = DeviceModel.from_calibration(GPU)
    assert g.kind == "gpu" and g.widths == (1, 4)
    assert g.vector_width == 1  # the narrowest within 5% of the fastest
    assert g.min_parallel == 132 * 256
    assert g.local_sizes == (128, 256)
    assert "work-group sizes: 128, 256" in g.describe()


@pytest.mark.parametrize("shape", [(64, 256, 128), (64, 4096, 128)], ids=["64x256x128", "64x4096x128"])
def test_the_gpu_model_schedules_work_groups_and_no_vectors(shape):
    g = DeviceModel.from_calibration(GPU)
    s = auto_schedule(_dense_backward(*shape), device=g)
    for name, ss in s.stages.items():
        assert ss.vectorize == 1, (name, ss)
        if ss.tile is not None:  # a blocked stage: work-groups of the calibration's sizes
            assert ss.local_size is not None and ss.local_size[0] in g.local_sizes, (name, ss)
    assert s.default.vectorize == 1
    if shape[1] == 4096:  # large enough to block: every stage is blocked, in work-groups
        assert s.stages and all(ss.tile is not None and ss.local_size for ss in s.stages.values()), s.describe()


_GRAPHS = {
    "dense-small": lambda: _dense_backward(8, 64, 48),
    "dense-medium": lambda: _dense_backward(32, 256, 256),
    "conv2d_5x5_s3-small": lambda: _workload_backward("conv2d_5x5_s3", batch=1, c_in=3, size=20, c_out=4),
    "conv2d_5x5_s3-medium": lambda: _workload_backward("conv2d_5x5_s3", batch=2, c_in=4, size=40, c_out=8),
}


@pytest.mark.parametrize("model", _models())
@pytest.mark.parametrize("graph", sorted(_GRAPHS))
def test_auto_schedules_use_only_the_widths_of_the_model(model, graph):
    s = auto_schedule(_GRAPHS[graph](), device=model)
    for name, ss in s.stages.items():
        assert ss.vectorize in model.widths and ss.vectorize <= model.vector_width, (name, ss, model.source)
        if ss.tile is not None:
            assert ss.tile[-1] % ss.vectorize == 0, (name, ss)
    assert s.default.vectorize in model.widths and s.default.vectorize <= model.vector_width


def test_a_model_round_trips_through_its_dict():
    for m in [DeviceModel.from_calibration(AVX2, source="x"), DeviceModel.from_calibration(GPU)] + [
            DeviceModel.load(p) for p in RECORDED]:
        d = json.loads(json.dumps(m.to_dict()))
        assert d["format"] == "polyad-device-model-1"
        assert DeviceModel.from_dict(d) == m
        assert DeviceModel.of(d) == m and DeviceModel.of(m) is m


@pytest.mark.parametrize("bad", [
    {"format": "nope"},
    "not a dict",
    None,
    {"format": "polyad-device-model-1"},  # no fields
    {"format": "polyad-device-model-1", "kind": "cpu", "cores": 2, "widths": [2, 4], "gflops": {"2": 1.0},
     "vector_width": 2, "fma_slots": 1, "registers": 1, "cache_gbs": 1.0, "dram_gbs": 1.0, "load_rate": 1.0,
     "launch_s": 0.0, "min_parallel": 1},  # no scalar width
    {"format": "polyad-device-model-1", "kind": "cpu", "cores": 2, "widths": ["one"], "gflops": {"1": 1.0},
     "vector_width": 1, "fma_slots": 1, "registers": 1, "cache_gbs": 1.0, "dram_gbs": 1.0, "load_rate": 1.0,
     "launch_s": 0.0, "min_parallel": 1},  # a width that is no number
], ids=["format", "string", "none", "empty", "no-scalar", "bad-width"])
def test_a_malformed_model_is_a_device_error(bad):
    with pytest.raises(pa.DeviceError):
        DeviceModel.from_dict(bad)


def test_an_unreadable_model_file_is_a_device_error(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text("{ not json")
    with pytest.raises(pa.DeviceError, match="broken.json"):
        DeviceModel.load(p)
    with pytest.raises(pa.DeviceError):
        DeviceModel.load(tmp_path / "missing.json")
