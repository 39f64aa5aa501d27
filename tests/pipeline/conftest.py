"""Fixtures of the build-driver tests: a per-session kernel cache (the device measured once), an OpenCL gate.

As in tests/codegen: POLYAD_CACHE_DIR points at a fresh directory for the session (cold kernel and
program caches), while POLYAD_DEVICE_CACHE_DIR keeps pointing at the machine's device records (the
probe and the calibration run once per machine, not once per test session).  Tests that need a cold
device cache set their own temporary POLYAD_DEVICE_CACHE_DIR with monkeypatch.
"""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_kernel_cache(tmp_path_factory):
    """Point POLYAD_CACHE_DIR at a fresh directory for this test session (cold cache, shared by tests)."""
    from polyad.runtime.records import cache_dir

    old = {k: os.environ.get(k) for k in ("POLYAD_CACHE_DIR", "POLYAD_DEVICE_CACHE_DIR")}
    # the device is probed and calibrated once per machine, not once per test session
    os.environ.setdefault("POLYAD_DEVICE_CACHE_DIR", os.path.join(cache_dir(), "devices"))
    os.environ["POLYAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("polyad-kernel-cache"))
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def device(opencl):
    """The default device (chosen before any test points the device cache elsewhere)."""
    from polyad.pipeline import select_device

    return select_device()


@pytest.fixture
def private_denials(tmp_path, monkeypatch):
    """Widths a fallback denies are recorded under tmp_path, not in the machine's device cache; the
    process's models and once-per-process warnings start afresh (and are restored afterwards)."""
    import polyad.pipeline as pipeline

    path = tmp_path / "denied" / "denied-widths.json"
    monkeypatch.setattr(pipeline, "_denied_path", lambda key: str(path))
    monkeypatch.setattr(pipeline, "_MODELS", {})
    monkeypatch.setattr(pipeline, "_WARNED", set())
    return path
