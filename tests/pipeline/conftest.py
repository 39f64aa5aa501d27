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


_BLOCKER = '''import builtins

_real = builtins.__import__


def _blocked(name, *args, **kwargs):
    if name == {name!r} or name.startswith({name!r} + "."):
        raise ModuleNotFoundError("No module named " + repr(name))
    return _real(name, *args, **kwargs)


builtins.__import__ = _blocked
'''


@pytest.fixture
def children_without(tmp_path, monkeypatch):
    """``children_without(name)``: the Python processes started from then on cannot import ``name`` (a
    ``sitecustomize`` first on their PYTHONPATH), as in an environment that lacks it; this one still can."""
    import os

    def block(name):
        site = tmp_path / f"without-{name}"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_BLOCKER.format(name=name))
        old = os.environ.get("PYTHONPATH")
        monkeypatch.setenv("PYTHONPATH", str(site) + (os.pathsep + old if old else ""))

    return block
