"""A fake benchmark result for the report tests (test_bench_harness, test_bench_html)."""

from polyad.bench.runner import Cell


def fake_result():
    """A benchmark result of one row with every kind of cell (a number, a note, a missing value)."""
    rows = [{"workload": "dense", "schedule": "naive", "fwd_ms": Cell(1.0), "bwd_ms": Cell(2.5, note="3 runs (x)"),
             "bwd_over_fwd": Cell(2.5), "bwd_recompute_ms": Cell(7.25),
             "hand_ms": Cell.missing("pa.build is being written; " + "long " * 20),
             "numpy_ms": Cell(1.25), "vs_numpy": Cell(2.0), "err": Cell(2e-7), "torch_err": Cell(5e-3),
             "residuals": "dense, softmax_max", "hand_residuals": "none"}]
    machine = {"date_utc": "2026-01-01 00:00 UTC", "cpu": "Test CPU", "cpus": 2, "commit": "abc", "polyad": "0.1.0"}
    options = {"schedules": ["naive"], "batch": None, "repeat": 5, "time_budget": 30.0}
    return {"machine": machine, "options": options, "rows": rows}
