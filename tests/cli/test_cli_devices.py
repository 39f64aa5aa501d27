"""The paths a fresh user's machine takes: pip's PoCL alone, another LLVM target, `polyad devices --calibrate`.

Each runs in a subprocess, so that a driver that aborts shows up as a signal in the return
code: the assertion is that it never does.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.opencl

ROOT = Path(__file__).resolve().parents[2]


def _run(args, env_extra, timeout=600):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_demo_with_only_pips_pocl_prints_ok_or_a_device_error_never_a_signal(tmp_path):
    """OCL_ICD_VENDORS at an empty directory hides the system's OpenCL drivers: pip's PoCL is left alone,
    as on a fresh machine without root (on a Zen 4 it aborted inside LLVM; on a Zen 5 it compiles nothing)."""
    empty = tmp_path / "no-icds"
    empty.mkdir()
    r = _run(["-m", "polyad.cli", "demo", "--batch", "4", "--n-in", "64", "--n-out", "32"],
             {"OCL_ICD_VENDORS": str(empty), "POLYAD_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode >= 0, f"killed by signal {-r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    out = r.stdout + r.stderr
    if r.returncode == 0:
        assert out.rstrip().endswith("OK")
    else:  # no device passes: a DeviceError saying what to install
        assert "DeviceError" in out or "no OpenCL device" in out, out[-3000:]
        assert "pocl" in out.lower()
        assert "Traceback" not in r.stderr, r.stderr[-3000:]


def test_a_representative_opencl_subset_under_an_avx2_cpu_target(tmp_path):
    """POCL_LLVM_CPU_NAME=haswell asks PoCL for AVX2 code (PoCL versions that read it; the device key holds
    it, so probe, calibration and kernels are cached apart). Built gradients must still match evaluate."""
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
              "tests/codegen/test_runtime_build.py", "tests/schedule/test_schedule_opgrads.py"],
             {"POCL_LLVM_CPU_NAME": "haswell", "POLYAD_CACHE_DIR": str(tmp_path / "cache")}, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout


def test_devices_calibrate_prints_the_figures_and_where_they_are_cached(tmp_path):
    env = {"POLYAD_DEVICE_CACHE_DIR": str(tmp_path / "devices")}
    first = _run(["-m", "polyad.cli", "devices", "--calibrate"], env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "probed now" in first.stdout and "measured now" in first.stdout
    assert "multiply-add GFLOP/s" in first.stdout and "stream" in first.stdout
    assert "a work-item's cache: " in first.stdout and "KiB, refilled at" in first.stdout  # a CPU's refill figures
    assert str(tmp_path / "devices") in first.stdout
    again = _run(["-m", "polyad.cli", "devices", "--calibrate"], env)
    assert again.returncode == 0
    assert "probed now" not in again.stdout and "(cached)" in again.stdout


def test_devices_says_why_no_device_is_the_default(monkeypatch):
    """``POLYAD_DEVICE`` naming nothing listed every device unmarked, under the legend of the default."""
    from polyad.pipeline import list_devices

    monkeypatch.setenv("POLYAD_DEVICE", "no such device")
    lines = list_devices()
    assert not any(line.startswith("* ") for line in lines)
    assert lines[-1] == "  no default device: $POLYAD_DEVICE='no such device' names none of them"
    monkeypatch.delenv("POLYAD_DEVICE")
    assert sum(line.startswith("* ") for line in list_devices()) == 1
