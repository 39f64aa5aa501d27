"""The OpenCL gate every OpenCL test uses: fail, naming the platform's error, when no device compiles
(skip instead with POLYAD_ALLOW_NO_OPENCL=1); and a fresh kernel cache for the folders that ask for one."""

import os

import pytest


_PROBE = {}


def opencl_problem():
    """None when the default device compiles a trivial kernel, else why not (an environment problem)."""
    if "r" not in _PROBE:
        try:
            import pyopencl as cl

            from polyad.pipeline import select_device
            from polyad.runtime.device import device_state

            dev = select_device()
            cl.Program(device_state(dev).context, "__kernel void probe(__global int *a) { a[0] = 1; }").build()
            _PROBE["r"] = None
        except Exception as e:  # noqa: BLE001 - report whatever the platform says
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            errs = [ln for ln in lines if "error" in ln.lower() and "clBuildProgram" not in ln]
            _PROBE["r"] = f"{type(e).__name__}: {(errs or lines or ['?'])[0]}"
    return _PROBE["r"]


@pytest.fixture
def opencl():
    """Fail (or skip with POLYAD_ALLOW_NO_OPENCL=1), naming the platform's error, when no OpenCL device compiles."""
    why = opencl_problem()
    if why is not None:
        msg = f"the default OpenCL device cannot compile even a trivial kernel here: {why}"
        if os.environ.get("POLYAD_ALLOW_NO_OPENCL"):
            pytest.skip(msg)
        # CI must not pass by skipping: `python -m polyad.runtime.doctor --fix` makes a device work
        pytest.fail(msg + " (set POLYAD_ALLOW_NO_OPENCL=1 to skip the OpenCL tests instead)")


@pytest.fixture(scope="session")
def session_kernel_cache(tmp_path_factory):
    """Point POLYAD_CACHE_DIR at a fresh directory for this test session (cold cache, shared by tests).

    POLYAD_DEVICE_CACHE_DIR keeps pointing at the machine's device records: the probe and the
    calibration run once per machine, not once per test session.  Folders whose tests must build
    cold request it from an autouse fixture of their conftest.
    """
    from polyad.runtime.records import cache_dir

    old = {k: os.environ.get(k) for k in ("POLYAD_CACHE_DIR", "POLYAD_DEVICE_CACHE_DIR")}
    os.environ.setdefault("POLYAD_DEVICE_CACHE_DIR", os.path.join(cache_dir(), "devices"))
    os.environ["POLYAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("polyad-kernel-cache"))
    yield os.environ["POLYAD_CACHE_DIR"]
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
