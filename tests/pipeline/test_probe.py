"""The capability probe: a child that aborts or raises is a "no" for that family, not a crash of the
caller; the probe record is checksummed; every family is a graph ``pa.evaluate`` runs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import probe

HERE = Path(__file__).resolve().parent


def _hooks_on_path(monkeypatch):
    """The probe's children import the hooks of this directory."""
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(HERE) + (os.pathsep + old if old else ""))


def _probe_records(root):
    return sorted(Path(root).rglob("probe-*.json"))


@pytest.mark.opencl
def test_a_probe_child_that_aborts_is_a_no_for_that_family(device, tmp_path, monkeypatch):
    _hooks_on_path(monkeypatch)
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(tmp_path / "devices"))
    caps = probe.capabilities(device, hook="pipeline_probe_hooks:abort_on_float8")
    # this process is still here; a fresh child went on with the families after the one that died
    assert caps.widths == (1, 2, 4, 16)
    assert "float8" in caps.failures and "SIGABRT" in caps.failures["float8"], caps.failures
    assert set(caps.failures) == {"float8"}, caps.failures
    assert caps.usable is True and caps.passes is False
    assert caps.source == "probed now"
    assert "float8" in caps.describe() and "SIGABRT" in caps.describe()
    # a hooked probe is a test's fault injection: never written where a real build would read it
    assert _probe_records(tmp_path) == []


@pytest.mark.opencl
def test_a_probe_hook_that_raises_is_a_failure_message(device, tmp_path, monkeypatch):
    _hooks_on_path(monkeypatch)
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(tmp_path / "devices"))
    caps = probe.capabilities(device, hook="pipeline_probe_hooks:raise_on_float16")
    assert caps.widths == (1, 2, 4, 8)
    assert set(caps.failures) == {"float16"}, caps.failures
    why = caps.failures["float16"]
    assert isinstance(why, str) and "float16 refused" in why, why
    assert caps.usable and not caps.passes and caps.index64
    assert _probe_records(tmp_path) == []


@pytest.mark.opencl
def test_a_probe_child_missing_a_module_is_an_install_error_and_records_nothing(device, tmp_path, monkeypatch,
                                                                                children_without):
    """Seen on a GPU machine whose pyopencl lacked platformdirs (it imports it when it first builds): every
    family failed with ModuleNotFoundError, the device was recorded as computing nothing, and the doctor
    advised installing PoCL."""
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(tmp_path / "devices"))
    children_without("platformdirs")
    with pytest.raises(pa.InstallError, match="platformdirs") as info:
        probe.capabilities(device)
    assert "not the OpenCL device" in str(info.value)
    assert _probe_records(tmp_path) == []  # nothing recorded: the next process probes afresh


@pytest.mark.opencl
def test_a_probe_child_that_dies_of_an_import_error_is_an_install_error(device, tmp_path, monkeypatch):
    _hooks_on_path(monkeypatch)
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(tmp_path / "devices"))
    with pytest.raises(pa.InstallError, match="islpy"):
        probe.capabilities(device, hook="pipeline_probe_hooks:missing_module_on_float2")


def test_a_child_imports_the_polyad_its_parent_imported_from_a_checkout_on_sys_path(tmp_path):
    """A script that puts a checkout on sys.path (polyad not installed): the probe's, the compile workers' and
    the code generation workers' children must import that polyad.  Without child_env they imported none, and
    every device was recorded as failing its probe."""
    checkout = tmp_path / "checkout"
    shutil.copytree(Path(pa.__file__).parent, checkout / "polyad", ignore=shutil.ignore_patterns("__pycache__"))
    script = (f"import subprocess, sys; sys.path.insert(0, {str(checkout)!r}); import polyad\n"
              "from polyad.runtime.builder import child_env\n"
              "print(polyad.__file__)\n"
              "print(subprocess.run([sys.executable, '-c', 'import polyad; print(polyad.__file__)'], env=child_env(),"
              " capture_output=True, text=True, check=True).stdout.strip())\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    parent, child = r.stdout.split()
    assert parent == child == str(checkout / "polyad" / "__init__.py"), r.stdout


def test_only_a_child_that_ends_on_an_import_error_is_an_install_error():
    from polyad.runtime.builder import import_failure

    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'islpy'\n"
    assert import_failure(tb) == "ModuleNotFoundError: No module named 'islpy'"
    # a warning that mentions an import, then an LLVM abort: the compiler's crash, not the environment
    assert import_failure("UserWarning: ImportError: no compiler cache\nLLVM ERROR: Cannot select: 0x55\n") is None
    assert import_failure("(exit status 1): ImportError: cannot import name 'x'") is not None
    assert import_failure("") is None


def test_child_env_leaves_an_installed_polyad_to_the_childs_own_site_packages(monkeypatch):
    import site

    from polyad.runtime.builder import child_env

    root = str(Path(pa.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(site, "getsitepackages", lambda: [root])
    assert child_env(X="1")["PYTHONPATH"] == "/elsewhere"  # site-packages never go before the stdlib
    monkeypatch.setattr(site, "getsitepackages", lambda: [])
    env = child_env(X="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [root, "/elsewhere"] and env["X"] == "1"


def test_capabilities_round_trip_and_describe_lists_failures():
    caps = probe.Capabilities("platform|device|1.0", (1, 2, 4), True, None,
                              {"float8": "build failed: error: no float8", "float16": "the compiler crashed (SIGABRT)"},
                              "probed now", 3.25)
    back = probe.Capabilities.from_dict(json.loads(json.dumps(caps.to_dict())))
    assert back.widths == (1, 2, 4) and back.device == caps.device and back.index64 and back.fp64 is None
    assert back.failures == caps.failures and back.seconds == 3.25
    assert back.source == "cached"
    assert back.usable and not back.passes
    text = caps.describe()
    assert "1/2/4" in text
    assert "float8: build failed: error: no float8" in text
    assert "float16: the compiler crashed (SIGABRT)" in text
    ok = probe.Capabilities("d", (1, 2, 4, 8, 16), True, True, {})
    assert ok.passes and probe.Capabilities.from_dict(ok.to_dict()).fp64 is True
    assert probe.Capabilities.from_dict(ok.to_dict()).nontemporal is None  # not tried (a GPU)
    # nontemporal stores are a speed-up where they work: without them the device still passes
    no_nt = probe.Capabilities("d", (1, 2, 4, 8, 16), True, True, {"nontemporal": "build failed: x"},
                               nontemporal=False)
    assert no_nt.passes and probe.Capabilities.from_dict(no_nt.to_dict()).nontemporal is False
    assert "nontemporal stores: no" in no_nt.describe()
    assert not probe.Capabilities("d", (2, 4), True, None, {"float1": "x"}).usable
    with pytest.raises(ValueError):
        probe.Capabilities.from_dict(dict(caps.to_dict(), format="polyad-probe-0"))


@pytest.mark.opencl
def test_an_edited_probe_record_fails_its_checksum_and_is_probed_again(device, tmp_path, monkeypatch):
    root = tmp_path / "devices"
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", str(root))
    calls = []
    real = probe._measure

    def counting(*args, **kwargs):
        calls.append(args[1:3])
        return real(*args, **kwargs)

    monkeypatch.setattr(probe, "_measure", counting)
    first = probe.capabilities(device)  # really probes: the cache directory is empty
    assert first.source == "probed now" and first.usable
    from polyad.runtime.device import is_gpu

    assert (first.nontemporal is None) == is_gpu(device)  # tried on CPUs alone
    (path,) = _probe_records(root)
    assert len(calls) == 1
    assert probe.capabilities(device).source == "cached" and len(calls) == 1  # read back, not measured
    doc = json.loads(path.read_text())
    assert doc["payload"]["widths"] == list(first.widths)
    doc["payload"]["widths"] = [w for w in first.widths if w != 4] + [32]  # a width edited by hand
    path.write_text(json.dumps(doc))
    with pytest.warns(RuntimeWarning, match="checksum"):
        again = probe.capabilities(device)
    assert len(calls) == 2, "the edited record was trusted instead of probing again"
    assert again.source == "probed now" and again.widths == first.widths
    # the fresh answer replaced the edited record
    assert probe.capabilities(device).widths == first.widths and len(calls) == 2


@pytest.mark.parametrize("family", probe.FAMILIES)
def test_every_probe_family_is_a_graph_evaluate_runs(family):
    outs, ins, sched, wide = probe.family_graph(family)
    assert wide == (family == "index64")
    n = {"index64": 4, "fp64": 4, "nontemporal": 8}.get(family) or int(family[5:])
    assert {ss.vectorize for ss in sched.stages.values()} == {n}
    # the nontemporal family is the float8 one with nontemporal stores: every stage stores so
    assert {ss.nontemporal_stores(t.shape) for t in outs for ss in [sched.for_stage(t.op.name)]} == {
        family == "nontemporal"}
    arrays = probe.family_inputs(ins)
    assert [a.shape for a in arrays] == [t.shape for t in ins]
    assert [str(a.dtype) for a in arrays] == [t.dtype for t in ins]
    got = pa.evaluate(outs, dict(zip(ins, arrays)))
    assert len(got) == len(outs)
    for t, g in zip(outs, got):
        g = np.asarray(g)
        assert g.shape == tuple(t.shape)
        assert np.all(np.isfinite(g.astype("float64"))), t.name
    # the inputs are exact: the same seed gives the same arrays
    again = probe.family_inputs(ins)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, again))
