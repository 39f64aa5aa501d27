"""Fixtures of the build-driver tests: a fresh kernel cache (the device measured once, tests/conftest.py),
the default device, private records of denied widths.  Tests that need a cold device cache set their
own temporary POLYAD_DEVICE_CACHE_DIR with monkeypatch.
"""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _cold_kernel_cache(session_kernel_cache):
    """Every test here builds into this session's fresh kernel cache (tests/conftest.py)."""
    return session_kernel_cache


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
