"""The single-op benchmark against PyTorch (polyad/bench/bench_ops.py), at its quick shapes."""

import sys

import pytest

import polyad as pa
from polyad.bench import bench_ops


def test_every_op_matches_torch_forward_and_backward(opencl, capsys):
    pytest.importorskip("torch")
    rows = bench_ops.main(["--quick", "--rounds", "1", "--repeat", "1"])
    assert [r["op"] for r in rows] == list(bench_ops.OPS)
    for r in rows:
        assert r["err"] < 1e-5, r
        assert all(r[k] > 0 for k in ("pa_fwd", "torch_fwd", "pa_bwd", "torch_bwd")), r
    out = capsys.readouterr().out
    assert out.startswith("| op | sizes | fwd ms |") and "| embedding | V=50 C=8 K=30 |" in out


def test_without_torch_it_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(pa.PolyadError, match="compares with PyTorch, which is not installed"):
        bench_ops.main(["--quick", "--ops", "embedding"])
