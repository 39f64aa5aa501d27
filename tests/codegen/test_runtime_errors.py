"""Errors of the runtime: build failures, missing devices, bad arguments to a Module."""

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import select_device
from polyad.runtime import cache, device


def test_no_platform_raises_device_error_with_install_hint(monkeypatch):
    import pyopencl as cl

    def none():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", none)
    X = pa.placeholder((3,), name="X")
    Y = pa.compute((3,), lambda i: X[i] + 1.0, name="Y")
    with pytest.raises(pa.DeviceError, match="pip install pocl-binary-distribution"):
        pa.build(Y, [X])
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    with pytest.raises(pa.DeviceError, match="no OpenCL platform"):
        select_device()


def test_unknown_device_name_lists_the_devices():
    with pytest.raises(pa.DeviceError, match="no OpenCL device matches 'no-such-gpu-xyz'"):
        select_device("no-such-gpu-xyz")


def test_polyad_device_env_picks_by_substring(monkeypatch):
    pairs = device.all_devices()
    p, d = pairs[-1]
    monkeypatch.setenv("POLYAD_DEVICE", d.name.strip()[-6:])
    assert select_device() == [dd for pp, dd in pairs if d.name.strip()[-6:].lower() in
                                      f"{pp.name} | {dd.name}".lower()][0]


def test_cli_devices_lists_the_default(capsys):
    from polyad.cli import main

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    marked = [ln for ln in out.splitlines() if ln.startswith("* ")]
    assert len(marked) == 1 and "compute units" in marked[0]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_build_failure_carries_source_and_log():
    dev = select_device()
    src = "__kernel void broken(__global float *a) { a[0] = undeclared_thing; }\n"
    with pytest.raises(pa.BuildError) as info:
        cache.compile_source(src, device.device_state(dev).context, dev)
    err = info.value
    assert err.source == src and "undeclared_thing" in err.log
    assert "undeclared_thing" in str(err) and "   1  __kernel void broken" in str(err)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_module_argument_errors_name_the_tensor():
    X = pa.placeholder((2, 3), name="X")
    N = pa.placeholder((3,), dtype="int32", name="N")
    Y = pa.compute((2, 3), lambda i, j: X[i, j] * pa.cast(N[j], "float32"), name="Y")
    mod = pa.build(Y, [X, N])
    x, n = np.ones((2, 3), np.float32), np.arange(3, dtype=np.int32)
    with pytest.raises(pa.ArityError, match=r"takes 2 arrays \(X, N\), got 1"):
        mod(x)
    with pytest.raises(pa.ShapeError, match=r"'X' has shape \(2, 3\).*\(3, 2\)"):
        mod(x.T.copy(), n)
    with pytest.raises(pa.DtypeError, match=r"'N' has dtype int32.*int64"):
        mod(x, n.astype(np.int64))
    with pytest.raises(pa.DtypeError, match=r"'X' has dtype float32.*float64"):
        mod(x.astype(np.float64), n)
    bufs = mod.to_device(x, n)
    with pytest.raises(pa.ArityError, match="run takes 3 buffers"):
        mod.run(*bufs[:2])
    import pyopencl as cl

    small = cl.Buffer(mod.context, cl.mem_flags.READ_WRITE, size=4)
    with pytest.raises(pa.ShapeError, match="'Y'.*needs 24 bytes"):
        mod.run(bufs[0], bufs[1], small)
    np.testing.assert_allclose(mod(x, n), x * n)


def test_float64_on_a_device_without_fp64_is_a_clear_error(monkeypatch):
    from polyad.runtime import module

    monkeypatch.setattr(module, "supports_fp64", lambda d: False)
    X = pa.placeholder((3,), dtype="float64", name="X64")
    Y = pa.compute((3,), lambda i: X[i] * 2.0, name="Y64")
    with pytest.raises(pa.DeviceError, match=r"\['X64', 'Y64'\] are float64 .* no double precision"):
        pa.build(Y, [X])


def test_unicode_and_isl_keyword_names_build():
    """Tensor and axis names are user text: non-ASCII letters and isl keywords must not reach C or isl raw."""
    X = pa.placeholder((3, 4), name="ℓ")
    Y = pa.compute((3, 4), lambda min, mod: X[min, mod] * 2.0, name="floor")
    x = np.arange(12, dtype="float32").reshape(3, 4)
    for schedule in ("naive", "auto"):
        mod = pa.build(Y, [X], schedule=schedule)
        np.testing.assert_array_equal(mod(x), 2 * x)
        assert all(ord(ch) < 128 for ch in mod.source)


def test_run_checks_a_device_arrays_dtype_and_shape_as_a_call_checks_an_arrays():
    """A ``pyopencl.array.Array`` says what it holds; a float64 one given for a float32 tensor ran on its bytes and
    returned wrong numbers, and one of another shape ran too."""
    import pyopencl.array as cla

    X = pa.placeholder((3, 5), name="X")
    W = pa.placeholder((2, 5), name="W")
    m = pa.build(pa.nn.dense(X, W), [X, W])
    x = np.random.default_rng(0).random((3, 5), dtype=np.float32)
    w = np.random.default_rng(1).random((2, 5), dtype=np.float32)
    aw, ao = cla.to_device(m.queue, w), cla.empty(m.queue, (3, 2), np.float32)
    with pytest.raises(pa.DtypeError, match="tensor 'X' is float32, the device array given for it is float64"):
        m.run(cla.to_device(m.queue, x.astype(np.float64)), aw, ao)
    with pytest.raises(pa.ShapeError, match=r"tensor 'X' has shape \[3, 5\], the device array given for it \[5, 3\]"):
        m.run(cla.to_device(m.queue, np.ascontiguousarray(x.T)), aw, ao)
    m.run(cla.to_device(m.queue, x), aw, ao)
    np.testing.assert_allclose(ao.get(), x @ w.T, rtol=1e-5)
