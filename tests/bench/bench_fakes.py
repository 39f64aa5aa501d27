"""Fakes for the benchmark tests: a benchmark result for the report tests (test_bench_harness, test_bench_html),
a pa.vjp that records what the runner does with it, and the workloads' tiny shapes of tests/pipeline."""

import importlib.util
from pathlib import Path

from polyad.bench import runner
from polyad.bench.runner import NOT_A_STEP, Cell


def fake_result():
    """A benchmark result of two rows with every kind of cell (a number, a note, a missing value, a
    training step's columns and a workload that is none)."""
    rows = [{"workload": "dense", "schedule": "naive", "fwd_ms": Cell(1.0), "bwd_ms": Cell(2.5, note="3 runs (x)"),
             "bwd_over_fwd": Cell(2.5), "bwd_recompute_ms": Cell(7.25),
             "hand_ms": Cell.missing("pa.build is being written; " + "long " * 20),
             "numpy_ms": Cell(1.25), "vs_numpy": Cell(2.0), "err": Cell(2e-7), "torch_err": Cell(5e-3),
             "torch_ms": Cell(2.0), "vs_torch": Cell(1.25), "recompute_vs_torch": Cell(3.625),
             **dict.fromkeys(("step_ms", "step_recompute_ms", "torch_step_ms", "step_vs_torch",
                              "step_recompute_vs_torch"), Cell.missing(NOT_A_STEP)),
             "residuals": "dense, softmax_max", "hand_residuals": "none"},
            {"workload": "mlp_step", "schedule": "naive", "fwd_ms": Cell(1.0), "bwd_ms": Cell(1.5),
             "bwd_recompute_ms": Cell(4.5), "torch_ms": Cell(1.0), "vs_torch": Cell(1.5),
             "recompute_vs_torch": Cell(4.5),
             "step_ms": Cell(3.0), "step_recompute_ms": Cell(6.0), "torch_step_ms": Cell(2.0),
             "step_vs_torch": Cell(1.5), "step_recompute_vs_torch": Cell(3.0)}]
    machine = {"date_utc": "2026-01-01 00:00 UTC", "cpu": "Test CPU", "cpus": 2, "commit": "abc", "polyad": "0.1.0"}
    options = {"schedules": ["naive"], "backward": ["vjp", "recompute"], "batch": None, "repeat": 5,
               "time_budget": 30.0}
    return {"machine": machine, "options": options, "backward": dict(runner.BACKWARD_NAMES), "rows": rows}


class SpyVJP:
    """``evaluate_api``'s vjp (numpy stand-ins of pa.vjp's two modules), recording what the runner does:
    ``calls`` lists ("vjp" | "fwd" | "bwd" | "bwd.time", detail) in order; the backward's gradients
    are ``scale`` times the right ones, so that an error column shows whose results it reports."""

    def __init__(self, scale=1.0):
        self.calls, self.scale = [], scale
        self.api = runner.evaluate_api()
        self._vjp = self.api.vjp
        self.api.vjp = self

    def __call__(self, output, inputs, wrt=None, **kw):
        self.calls.append(("vjp", kw))
        fwd, bwd = self._vjp(output, inputs, wrt, **kw)
        spy = self

        class Forward(type(fwd)):
            def __call__(self, *arrays):
                y, res = super().__call__(*arrays)
                spy.calls.append(("fwd", res))
                return y, res

        class Backward(type(bwd)):
            def __call__(self, res, *heads):
                spy.calls.append(("bwd", res))
                return [g * spy.scale for g in super().__call__(res, *heads)]

            def time(self, res, *heads, repeat=1):
                spy.calls.append(("bwd.time", res))
                return super().time(res, *heads, repeat=repeat)

        fwd.__class__, bwd.__class__ = Forward, Backward
        return fwd, bwd


def tiny_shapes():
    """The workloads' tiny shapes (tests/pipeline/workload_shapes.py: each builds in about a second)."""
    path = Path(__file__).resolve().parents[1] / "pipeline" / "workload_shapes.py"
    spec = importlib.util.spec_from_file_location("workload_shapes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TINY
