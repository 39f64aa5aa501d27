"""The build driver on devices that cannot do everything: faked capabilities, a probe that aborts,
a compiler that rejects or crashes, every workload built within the widths a device allows."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import polyad as pa
import polyad.pipeline as pipeline
from polyad.errors import BuildError
from polyad.pipeline import probe
from polyad.runtime import builder
from polyad.schedule import DeviceModel, Schedule, StageSchedule

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cold kernel and program cache; the device's records stay where they are (measured once)."""
    from polyad.runtime.records import cache_dir

    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", os.environ.get("POLYAD_DEVICE_CACHE_DIR")
                       or os.path.join(cache_dir(), "devices"))
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path / "cache"))
    from polyad.pipeline import programs
    from polyad.runtime import cache

    programs.clear_memory()
    cache.clear_memory()
    return tmp_path


def _fake_widths(monkeypatch, widths):
    monkeypatch.setattr(pipeline, "_WARNED", set())
    real = pipeline.capabilities

    def fake(device, refresh=False):
        caps = real(device)
        return probe.Capabilities(caps.device, tuple(widths), caps.index64, caps.fp64,
                                  {f"float{w}": "faked: not compiled" for w in (1, 2, 4, 8, 16) if w not in widths})

    monkeypatch.setattr(pipeline, "capabilities", fake)
    monkeypatch.setattr(pipeline, "_MODELS", {})


def _check(mod, outs, ins, arrays):
    got = mod(*arrays)
    ref = pa.evaluate(outs, dict(zip(ins, arrays)))
    for a, r in zip(got if isinstance(got, list) else [got], ref if isinstance(ref, list) else [ref]):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(r).max())))


def _matmul(n=32):
    X = pa.placeholder((4, 8), name="X")
    W = pa.placeholder((8, n), name="W")
    k = pa.reduce_axis((0, 8), name="k")
    T = pa.compute((4, n), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="T")
    rng = np.random.default_rng(0)
    return T, [X, W], [rng.standard_normal(t.shape).astype("float32") for t in (X, W)]


# ---------------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------------
@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_a_probe_child_that_aborts_is_a_no_for_that_family(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    dev = pipeline.select_device()
    caps = probe.capabilities(dev, hook="probe_hooks:abort_on_float8")
    assert caps.widths == (1, 2, 4, 16)  # the next child went on after the one that died
    assert "SIGABRT" in caps.failures["float8"]
    assert caps.usable and not caps.passes
    caps = probe.capabilities(dev, hook="probe_hooks:raise_on_float16")
    assert 16 not in caps.widths and "float16 refused" in caps.failures["float16"]


def test_every_probe_family_is_a_graph_evaluate_runs():
    for fam in probe.FAMILIES:
        outs, ins, sched, wide = probe.family_graph(fam)
        got = pa.evaluate(outs, dict(zip(ins, probe.family_inputs(ins))))
        assert all(np.all(np.isfinite(np.asarray(g, dtype="float64"))) for g in got)
    caps = probe.Capabilities("dev", (1, 2), True, None, {"float4": "x"})
    assert probe.Capabilities.from_dict(caps.to_dict()).widths == (1, 2)
    assert "float4: x" in caps.describe()


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_an_edited_probe_record_fails_its_checksum_and_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(tmp_path))
    dev = pipeline.select_device()
    calls = []
    real = probe._measure
    monkeypatch.setattr(probe, "_measure", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = probe.capabilities(dev)
    (path,) = list(tmp_path.rglob("probe-*.json"))
    doc = json.loads(path.read_text())
    doc["payload"]["widths"] = [1, 2, 4, 8, 16, 32]
    path.write_text(json.dumps(doc))
    with pytest.warns(RuntimeWarning, match="checksum"):
        again = probe.capabilities(dev)
    assert again.widths == first.widths and len(calls) == 2


# ---------------------------------------------------------------------------------------------
# models from calibrations
# ---------------------------------------------------------------------------------------------
def test_models_from_calibrations_keep_to_the_widths_that_passed():
    avx2 = {"kind": "cpu", "compute_units": 2, "gflops": {"1": 20, "2": 40, "4": 90, "8": 180, "16": 100},
            "accumulators": {"4": 90, "8": 170, "16": 180, "32": 110}, "accumulator_width": 8,
            "stream_gbs": 30, "cache_gbs": 400, "launch_s": 2e-5}
    m = DeviceModel.from_calibration(avx2)
    assert (m.vector_width, m.fma_slots, m.registers) == (8, 16, 16)  # float16 spills: float8 is the best
    assert DeviceModel.from_calibration(avx2, widths=(1, 2, 4)).vector_width == 4
    assert DeviceModel.from_dict(m.to_dict()) == m
    with pytest.raises(pa.DeviceError):
        DeviceModel.from_dict({"format": "nope"})
    gpu = {"kind": "gpu", "compute_units": 132, "gflops": {"1": 50000, "4": 50500},
           "accumulators": {"4": 50000, "8": 50000, "16": 49000, "32": 40000}, "accumulator_width": 1,
           "stream_gbs": 2500, "cache_gbs": 20000, "launch_s": 5e-6, "local_sizes": [128, 256]}
    g = DeviceModel.from_calibration(gpu)
    assert g.vector_width == 1 and g.min_parallel == 132 * 256 and g.local_sizes == (128, 256)
    X = pa.placeholder((64, 4096), name="X")
    W = pa.placeholder((128, 4096), name="W")
    Y = pa.nn.dense(X, W)
    grads = list(pa.differentiate(Y, [X, W], pa.placeholder(Y.shape, name="H")))
    for model in (m, DeviceModel.from_calibration(avx2, widths=(1, 2, 4)), g):
        s = pa.schedule.auto_schedule(grads, device=model)
        assert all(ss.vectorize in model.widths and ss.vectorize <= model.vector_width for ss in s.stages.values())
    s = pa.schedule.auto_schedule(grads, device=g)
    assert any(ss.local_size for ss in s.stages.values())  # the GPU path: work-groups from the calibration


# ---------------------------------------------------------------------------------------------
# builds within what the device allows
# ---------------------------------------------------------------------------------------------
_TINY = {
    "dense": dict(batch=2, n_in=24, n_out=16), "dense_big": dict(batch=2, n_in=40, n_out=24),
    "conv2d_3x3": dict(batch=1, c_in=3, size=10, c_out=4), "conv2d_5x5_s3": dict(batch=1, c_in=2, size=16, c_out=3),
    "conv2d_dilated": dict(batch=1, c_in=2, size=12, c_out=3), "avg_pool": dict(batch=1, channels=2, size=8),
    "max_pool": dict(batch=1, channels=2, size=8), "softmax": dict(batch=3, n_in=24, n_out=40),
    "softmax_homebrew": dict(batch=3, n_in=24, n_out=40), "flatten": dict(batch=2, c=3, h=4, w=5),
    "chain": dict(n=16, depth=6), "mlp_step": dict(batch=4, sizes=(20, 16, 12, 10)), "lenet_step": dict(batch=1),
}


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl", "fresh_cache")
@pytest.mark.parametrize("widths", [(1, 2, 4), (1, 2, 4, 8)], ids=["nothing-above-float4", "no-float16"])
def test_every_workload_builds_within_the_widths_a_device_allows(monkeypatch, widths):
    from benchmarks.workloads import WORKLOADS

    _fake_widths(monkeypatch, widths)
    banned = [f"float{w}" for w in (8, 16) if w not in widths]
    names = list(WORKLOADS) if widths == (1, 2, 4) else ["conv2d_3x3", "softmax", "dense", "max_pool"]
    for name in names:
        case = WORKLOADS[name].instantiate(**_TINY[name])
        ph = case.placeholders()
        Y = case.forward_te(ph)
        grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], ph["H"]))
        ins = [ph[i.name] for i in case.inputs] + [ph["H"]]
        mod = pa.build(grads, ins)
        assert not any(b in mod.source for b in banned), (name, [b for b in banned if b in mod.source])
        data = case.data()
        _check(mod, grads, ins, [data[t.name] for t in ins])


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl", "fresh_cache")
def test_a_schedule_asking_for_a_width_the_device_lacks_is_narrowed_with_a_warning(monkeypatch):
    _fake_widths(monkeypatch, (1, 2, 4, 8))
    T, ins, arrays = _matmul()
    sched = Schedule("wide", stages={"T": StageSchedule(tile=(2, 32), vectorize=16)})
    with pytest.warns(RuntimeWarning, match=r"does not compile the vector widths.*'T'"):
        mod = pa.build(T, ins, schedule=sched)
    assert "float16" not in mod.source and "float8" in mod.source
    _check(mod, [T], ins, arrays)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl", "fresh_cache")
@pytest.mark.parametrize("failure", ["rejects", "crashes"])
def test_a_program_that_does_not_build_falls_back_to_narrower_vectors_once(monkeypatch, tmp_path, failure):
    real = builder.compile_isolated

    tries = []

    def fake(job):
        if "float16" in job["source"]:
            tries.append(1)
            cls = BuildError if failure == "rejects" else builder.CompilerCrash
            msg = ("error: fake compiler rejects float16" if failure == "rejects" else
                   "the OpenCL compiler crashed its process (SIGABRT): LLVM ERROR: Do not know how to scalarize")
            raise cls(msg, source=job["source"], log=msg)
        return real(job)

    monkeypatch.setattr(builder, "compile_isolated", fake)
    monkeypatch.setattr(pipeline, "_denied_path", lambda key: str(tmp_path / "denied.json"))
    monkeypatch.setattr(pipeline, "_MODELS", {})
    monkeypatch.setattr(pipeline, "_WARNED", set())
    T, ins, arrays = _matmul()
    sched = Schedule("wide", stages={"T": StageSchedule(tile=(2, 32), vectorize=16)})
    with pytest.warns(RuntimeWarning) as rec:
        mod = pa.build(T, ins, schedule=sched)
    msgs = [str(w.message) for w in rec if "failed on stages" in str(w.message)]
    assert len(msgs) == 1 and "['T']" in msgs[0] and "float16" in msgs[0]
    assert ("fake compiler" if failure == "rejects" else "scalarize") in msgs[0]
    assert "float16" not in mod.source and "float8" in mod.source
    _check(mod, [T], ins, arrays)
    assert 16 in pipeline.denied_widths(pipeline.select_device())
    import warnings

    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        pa.build(T, ins, schedule=sched)  # the width is remembered for the device: never tried again
    assert not [w for w in again if "failed on stages" in str(w.message)]
    assert tries == [1]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl", "fresh_cache")
def test_when_nothing_builds_the_error_has_the_source_and_says_what_was_tried(monkeypatch, tmp_path):
    def fake(job):
        raise BuildError("error: fake compiler rejects everything", source=job["source"], log="error: no")

    monkeypatch.setattr(builder, "compile_isolated", fake)
    monkeypatch.setattr(pipeline, "_denied_path", lambda key: str(tmp_path / "denied.json"))
    T, ins, _ = _matmul()
    sched = Schedule("wide", stages={"T": StageSchedule(tile=(2, 32), vectorize=16)})
    with pytest.raises(BuildError, match="narrower vectors and the naive schedule") as info:
        pa.build(T, ins, schedule=sched)
    assert info.value.source and "__kernel" in info.value.source


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_a_worker_that_dies_is_a_compiler_crash_and_the_next_compile_works():
    from polyad.runtime.device import device_key

    dev = pipeline.select_device()
    w = builder.Worker()
    try:
        job = builder.make_job("__kernel void k(__global float *a) { a[0] = 1.0f; }", device_key(dev),
                               launches=[("k", [(4, "float32")], (1,), None)])
        assert w.compile(job)
        import threading
        import uuid

        # a compile that takes seconds, killed from outside while the worker is in it, as an LLVM abort would
        body = "\n".join(f"  a[{i % 64}] = a[{(i * 7) % 64}] * 1.5f + a[{(i * 3) % 64}];" for i in range(20000))
        slow = builder.make_job(f"// {uuid.uuid4()}\n__kernel void s(__global float *a) {{\n{body}\n}}",
                                device_key(dev))
        threading.Timer(0.5, lambda: w.proc.kill()).start()
        with pytest.raises(builder.CompilerCrash, match="crashed its process"):
            w.compile(slow)
        assert w.compile(job)  # a fresh worker
        missing = builder.make_job(job["source"], device_key(dev), launches=[("absent", [], (1,), None)])
        with pytest.raises(BuildError, match="without its kernels"):
            w.compile(missing)
    finally:
        w.close()
