"""Fixtures of the codegen/runtime tests: a per-session kernel cache, an OpenCL probe."""

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
