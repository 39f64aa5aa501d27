"""The polyad command: demo (small shapes), doctor, devices."""

import subprocess
import sys

import pytest

from polyad.cli import main
from polyad.demo import run

pytestmark = pytest.mark.opencl


def test_demo_differentiates_builds_and_checks_a_small_dense_layer():
    lines = []
    assert run(batch=3, n_in=7, n_out=5, out=lines.append) == 0
    text = "\n".join(lines)
    assert "d_W_from_dense_matmul[i0, i1] = sum(" in text  # the simplified gradient is shown
    assert "iterations" in text and "flops" in text  # with its estimate
    for name in ("Y", "dX", "dW", "dB"):
        assert any(ln.strip().startswith(name) and ln.endswith("ok") for ln in lines), name
    assert lines[-1] == "OK"


def test_a_polyad_error_in_any_command_is_one_line_and_status_1_not_a_traceback(capsys):
    assert main(["demo", "--schedule", "bogus", "--batch", "2", "--n-in", "4", "--n-out", "3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("polyad demo: ScheduleError: unknown schedule 'bogus'"), err


def test_doctor_reports_a_device_that_compiles(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "doctor: OK" in out and out.startswith("ok ")


def test_doctor_checks_the_device_polyad_device_picks(capsys, monkeypatch):
    # it said OK about the other devices while every pa.build raised a DeviceError
    monkeypatch.setenv("POLYAD_DEVICE", "no such device anywhere")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "doctor: POLYAD_DEVICE='no such device anywhere': no OpenCL device matches" in out
    assert "doctor: OK" not in out


def test_devices_lists_the_default_first_marker(capsys):
    assert main(["devices"]) == 0
    assert "* " in capsys.readouterr().out


def test_console_entry_point_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "polyad.cli", "demo", "--batch", "2", "--n-in", "4", "--n-out", "3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("OK")


def test_show_prints_the_simplified_gradient_and_its_opencl(tmp_path, capsys):
    f = tmp_path / "model.py"
    f.write_text(
        "import polyad as pa\n"
        "def flat():\n"
        "    X = pa.placeholder((2, 3, 4, 5), name='X')\n"
        "    return pa.nn.flatten(X), [X]\n"
    )
    assert main(["show", f"{f}:flat"]) == 0
    out = capsys.readouterr().out
    assert "[i0, i1, i2, i3] = H[i0, 20*i1 + 5*i2 + i3]" in out  # one index expression, no select
    # flatten's gradient reads H in its own shape: no kernel at all, and the source says so
    assert "d_X_from_flatten: float32[2, 3, 4, 5] is H's buffer read in its own shape" in out
    assert "__kernel" not in out and "select" not in out


def test_show_takes_one_tensor_to_differentiate_wrt_bare(tmp_path, capsys):
    """``return Y, X``, as ``pa.differentiate(Y, X)`` takes it: ``list(X)`` of a 2-D tensor was empty (its rows
    stop at the first index error), and the gradient of nothing printed without a word."""
    f = tmp_path / "bare.py"
    f.write_text("import polyad as pa\ndef f():\n    X = pa.placeholder((4, 8), name='X')\n    return X * 2, X\n")
    assert main(["show", f"{f}:f"]) == 0
    assert "d_X_from_" in capsys.readouterr().out


def test_show_reports_a_bad_target(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nope.py:f")]) == 2
    assert "no file" in capsys.readouterr().err


@pytest.mark.parametrize("text,expected", [
    ("def f(:\n    pass\n", r"bad\.py:1: syntax error"),
    ("import polyad as pa\nraise RuntimeError('at import')\n", r"running .*bad\.py raised RuntimeError: at import \(at .*bad\.py:2\)"),
    ("def f():\n    return {}['x']\n", r"f\(\) in .*bad\.py raised KeyError: 'x' \(at .*bad\.py:2\)"),
    ("import polyad as pa\ndef f():\n    X = pa.placeholder((3,), name='X')\n    return X[0, 1], [X]\n",
     r"f\(\) in .*bad\.py: IndexingError: tensor 'X'"),
    ("import polyad as pa\ndef f():\n    X = pa.placeholder((4, 8), name='X')\n    return [X * 2], [X]\n",
     r"must return \(output tensor, \[input tensors .*; it returned \(list, list\)"),
    ("import polyad as pa\ndef f():\n    X = pa.placeholder((4, 8), name='X')\n    return X * 2, None\n",
     r"it returned \(Tensor, NoneType\)"),
    ("import polyad as pa\ndef f():\n    X = pa.placeholder((4, 8), name='X')\n    return X * 2, []\n",
     r"it returned no tensor to differentiate w\.r\.t\."),
    ("import sys\nsys.exit(3)\n", r"running .*bad\.py raised SystemExit: 3 \(at .*bad\.py:2\)"),
    ("import sys\ndef f():\n    sys.exit('stop')\n", r"f\(\) in .*bad\.py raised SystemExit: stop \(at .*bad\.py:3\)"),
], ids=["syntax", "import-raises", "function-raises", "polyad-error", "list-output", "none-wrt", "empty-wrt",
        "import-exits", "function-exits"])
def test_show_reports_what_went_wrong_in_the_users_file_without_a_traceback(tmp_path, capsys, text, expected):
    import re

    f = tmp_path / "bad.py"
    f.write_text(text)
    assert main(["show", f"{f}:f"]) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert "Traceback" not in err


def test_a_demo_too_large_for_the_machine_says_so_without_a_traceback(capsys):
    # numpy's _ArrayMemoryError came out as a traceback
    assert main(["demo", "--batch", "2", "--n-in", "400000", "--n-out", "400000"]) == 1
    err = capsys.readouterr().err
    assert "the demo's arrays do not fit this machine's memory (W alone is 400000 x 400000)" in err
    assert "Traceback" not in err


def test_show_says_which_stages_scatter(tmp_path, capsys, opencl):
    (tmp_path / "emb.py").write_text(
        "import polyad as pa\n"
        "def embedding():\n"
        "    W = pa.placeholder((100, 8), name='W')\n"
        "    I = pa.placeholder((16,), name='I', dtype='int32')\n"
        "    return pa.ops.take(W, I, axis=0), [W]\n")
    assert main(["show", f"{tmp_path / 'emb.py'}:embedding", "--schedule", "naive"]) == 0
    out = capsys.readouterr().out
    assert "  scatter d_W_from_take: d_W_from_take[pa_a0, i1] += H[i0_1, i1] where pa_a0 = " in out
    assert "d_W_from_take[i0 * 8 + i1] = 0.0f;" in out
