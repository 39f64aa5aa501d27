"""The benchmark harness: timing, n/a cells, ratios, errors, report files, CLI."""

import argparse
import json
import os

import numpy as np
import pytest

import polyad as pa
from polyad.cli import main as polyad_main

from polyad.bench import report, runner, workloads as wl
from polyad.bench.runner import NOT_A_STEP, Cell
from bench_fakes import SpyVJP, fake_result


def _api(build=runner.EvaluateModule, differentiate=None):
    api = runner.evaluate_api(build)
    api.differentiate = differentiate or pa.differentiate
    return api


def _opts(**kw):
    base = dict(workloads=["dense"], schedules=["naive"], batch=None, repeat=2, time_budget=30.0, seed=0,
                torch=True, plot=False)
    base.update(kw)
    return argparse.Namespace(**base)


TINY = {
    "dense": wl.dense(batch=3, n_in=5, n_out=4),
    "max_pool": wl.pool(batch=2, channels=2, size=7, kernel=3, stride=2, pad=1, kind="max"),
    "mlp_step": wl.mlp_step(batch=4, sizes=(6, 5, 4, 3)),
    "softmax": wl.softmax(batch=3, n_in=5, n_out=4),
}

#: what each tiny case's backward is fed (autodiff; hand TE)
RESIDUALS = {  # save="reductions": matmuls, row statistics and window argmaxes; relu, exp and the row max's
    # stop_gradient copy are recomputed (no argmax of the row max: no gradient flows through it)
    "dense": ("none", "none"),
    "max_pool": ("pool2d_argmax.v0", "max_pool.v0"),
    "mlp_step": ("dense_matmul, dense_matmul, dense_matmul, cross_entropy_max, cross_entropy_expsum",
                 "dense, dense, dense, ce_softmax_max, ce_softmax_sum"),
    "softmax": ("dense, softmax_max, softmax_expsum", "dense, softmax_max, softmax_sum"),
}


@pytest.mark.parametrize("name", list(TINY))
def test_row_with_a_working_backend(name):
    pytest.importorskip("torch")
    rows = runner.run_workload(name, TINY[name], _opts(schedules=["naive", "auto"]), _api(), lambda s: None)
    assert [r["schedule"] for r in rows] == ["naive", "auto"]
    for row in rows:
        for key in ("hand_ms", "numpy_ms", "torch_ms", "hand_build_cold_s", "hand_build_warm_s"):
            assert row[key].ok and row[key].value > 0, (key, row[key])
        for key in ("hand_err", "numpy_err", "torch_err"):
            assert row[key].ok and row[key].value < 1e-5, (key, row[key])
        for key in ("fwd_ms", "bwd_ms", "bwd_recompute_ms", "build_cold_s", "build_warm_s", "diff_s",
                    "recompute_build_cold_s", "recompute_build_warm_s"):
            assert row[key].ok and row[key].value > 0, (key, row[key])
        assert (row["residuals"], row["hand_residuals"]) == RESIDUALS[name]
        assert row["err"].value < 1e-5 and row["recompute_err"].value < 1e-5
        assert row["recompute_vs_torch"].value == pytest.approx(row["bwd_recompute_ms"].value / row["torch_ms"].value)
        # the backwards and torch's are timed side by side, each row with its own torch measurement
        # (the hand-written gradient too: timed alone after them, it read 0.67x an identical autodiff program)
        assert all("side by side with torch" in row[k].note
                   for k in ("bwd_ms", "bwd_recompute_ms", "hand_ms", "torch_ms"))
        steps = ("step_ms", "step_recompute_ms", "torch_step_ms", "step_vs_torch", "step_recompute_vs_torch")
        if name == "mlp_step":  # a training step: forward, backward, SGD update, each way
            assert all(row[k].ok and row[k].value > 0 for k in steps), [row[k] for k in steps]
            assert row["step_vs_torch"].value == pytest.approx(row["step_ms"].value / row["torch_step_ms"].value)
        else:
            assert all(row[k].na == NOT_A_STEP for k in steps)
        if row["bwd_ms"].ok and row["hand_ms"].ok:
            assert row["autodiff_over_hand"].value == pytest.approx(row["bwd_ms"].value / row["hand_ms"].value)
        else:
            assert row["autodiff_over_hand"].na.startswith("needs")
        assert row["vs_numpy"].ok == row["bwd_ms"].ok


def test_a_warm_build_is_the_median_of_its_readings(monkeypatch):
    import types

    clock = iter([0.0, 5.0, 10.0, 11.0, 20.0, 22.0])  # readings of 5, 1 and 2 s
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    calls = []
    assert runner._median_of(3, lambda: calls.append(1)).value == 2.0
    assert len(calls) == 3


def test_bwd_ms_times_the_vjp_backward_on_the_residuals_its_forward_returned(monkeypatch):
    monkeypatch.setattr(runner, "WARMUP_S", 0.0)  # one warm-up call (the probe): the calls below are exact
    spy = SpyVJP(scale=1.01)  # pa.vjp's backward gives 1% too much: its error column must show it, no other
    (row,) = runner.run_workload("softmax", TINY["softmax"], _opts(torch=False), spy.api, lambda s: None)
    kinds = [k for k, _ in spy.calls]
    # built (cold), its forward run once, rebuilt (warm, WARM_BUILDS times), the backward checked, then
    # timed (probe, runs)
    assert kinds == ["vjp", "fwd"] + ["vjp"] * runner.WARM_BUILDS + ["bwd", "bwd.time", "bwd.time"], kinds
    assert spy.calls[0][1] == {"schedule": "naive", "save": "reductions"}
    res = spy.calls[1][1]
    assert all(r is res for k, r in spy.calls if k.startswith("bwd"))  # the forward's residuals, not recomputed
    assert [t.name for t in res.tensors] == ["softmax", "dense", "softmax_max", "softmax_expsum"]
    assert row["residuals"] == "dense, softmax_max, softmax_expsum"
    assert row["err"].value == pytest.approx(0.01, rel=1e-3)
    assert row["recompute_err"].value < 1e-6 and row["hand_err"].value < 1e-6
    assert row["bwd_ms"].ok and row["bwd_recompute_ms"].ok and row["bwd_recompute_ms"] is not row["bwd_ms"]
    assert row["bwd_over_fwd"].value == pytest.approx(row["bwd_ms"].value / row["fwd_ms"].value)


def test_a_training_step_runs_forward_backward_and_the_update_with_each_backward(monkeypatch):
    monkeypatch.setattr(runner, "WARMUP_S", 0.0)  # one warm-up call (the probe): the calls below are exact
    spy = SpyVJP()
    (row,) = runner.run_workload("mlp_step", TINY["mlp_step"], _opts(torch=False, repeat=3), spy.api, lambda s: None)
    # the step's forward runs pa.vjp's forward and hands its residuals to the backward: once per step
    # (a warm-up step, then 3), after bwd ms's forward, check, probe and timed runs
    kinds = [k for k, _ in spy.calls]
    first = 5 + runner.WARM_BUILDS  # vjp, fwd, the warm vjps, bwd, bwd.time x2
    assert kinds[first:] == ["fwd", "bwd"] * 4, kinds
    assert all(spy.calls[i + 1][1] is spy.calls[i][1] for i in range(first, len(kinds), 2))
    assert row["step_ms"].ok and row["step_recompute_ms"].ok
    assert row["torch_step_ms"].na == "disabled (--no-torch)" and row["step_vs_torch"].na == "needs torch step"


@pytest.mark.parametrize("backward", ["vjp", "recompute"])
def test_backward_option_measures_one_backward(backward):
    (row,) = runner.run_workload("mlp_step", TINY["mlp_step"], _opts(torch=False, backward=[backward]), _api(),
                                 lambda s: None)
    ran, skipped = ("bwd_ms", "bwd_recompute_ms") if backward == "vjp" else ("bwd_recompute_ms", "bwd_ms")
    step_ran, step_skipped = ("step_ms", "step_recompute_ms") if backward == "vjp" else \
        ("step_recompute_ms", "step_ms")
    assert row[ran].ok and row[step_ran].ok and row["hand_ms"].ok
    assert row[skipped].na == row[step_skipped].na == f"not measured (--backward {backward})"


def test_every_failure_is_an_na_cell_not_a_crash():
    def no_build(outputs, inputs, schedule):
        raise NotImplementedError("pa.build is being written")

    case = wl.dense(batch=2, n_in=3, n_out=2)
    case.forward_te = lambda ph: pa.nn.no_such_op(ph["X"])
    (row,) = runner.run_workload("dense", case, _opts(torch=False), _api(build=no_build), lambda s: None)
    assert row["hand_ms"].na == "pa.build is being written"
    assert row["hand_err"].na == "pa.build is being written"
    assert "no_such_op" in row["fwd_ms"].na and "no_such_op" in row["bwd_ms"].na
    assert "no_such_op" in row["bwd_recompute_ms"].na and row["residuals"].startswith("n/a: ")
    assert row["step_ms"].na == row["step_vs_torch"].na == NOT_A_STEP
    assert row["torch_ms"].na == "disabled (--no-torch)"
    assert row["numpy_ms"].ok and row["numpy_err"].value < 1e-6
    assert row["bwd_over_fwd"].na == "needs bwd and fwd"
    assert row["vs_torch"].na == "needs bwd and torch"


def test_the_torch_column_runs_where_it_is_told_and_waits_for_the_device(monkeypatch):
    torch = pytest.importorskip("torch")
    # a device torch cannot use is an n/a cell (never a crash, never a CPU time under its name)
    (row,) = runner.run_workload("dense", TINY["dense"], _opts(torch_device="cuda:7"), _api(), lambda s: None)
    assert not row["torch_ms"].ok and not row["torch_err"].ok and not row["vs_torch"].ok
    if not torch.cuda.is_available():
        assert "cuda:7" in row["torch_ms"].na
    # CUDA launches return before the kernels have run: each timed call waits for the device
    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: waits.append(1))
    assert runner._synced(lambda: 5, "cuda")() == 5 and waits == [1]
    fn = lambda: 5  # noqa: E731
    assert runner._synced(fn, "cpu") is fn
    o = dict(schedules=["auto"], backward=["vjp"], batch=None, repeat=5, time_budget=30.0)
    assert "torch on cuda" in report._options_line({**o, "torch_device": "cuda"})
    assert "torch on" not in report._options_line(o)


def test_wrong_gradients_show_in_the_error_column():
    case = wl.dense(batch=2, n_in=3, n_out=2)
    right = case.hand_te
    case.hand_te = lambda ph: [pa.compute(g.shape, lambda *i, g=g: g[i] * 1.01, name="off")
                               for g in right(ph)]
    (row,) = runner.run_workload("dense", case, _opts(torch=False), _api(), lambda s: None)
    assert row["hand_err"].value == pytest.approx(0.01, rel=1e-3)
    assert "(!)" in report.fmt(row["hand_err"], "e")


def test_measure_takes_the_median_and_respects_the_time_budget():
    calls = []

    def run_n(n):
        calls.append(n)
        return [0.002, 0.001, 0.004][:n] if n < 3 else [0.003] * (n - 3) + [0.001, 0.002, 0.100]

    c = runner.measure(run_n, repeat=5, budget_s=10)
    # warm-up runs until they add up to WARMUP_S (at most WARMUP_CALLS calls), then the timed ones
    assert calls == [1] * runner.WARMUP_CALLS + [5] and c.value == pytest.approx(3.0) and c.note == ""
    calls.clear()
    runner.measure(lambda n: calls.append(n) or [0.1] * n, repeat=5)
    assert calls == [1, 1, 1, 5]  # 0.3 s of warm-up
    slow = runner.measure(lambda n: [0.4] * n, repeat=5, budget_s=1.0)
    assert slow.value == pytest.approx(400) and slow.note == "2 runs (time budget 1 s)"
    single = runner.measure(lambda n: [2.0] * n, repeat=5, budget_s=1.0)
    assert single.note.startswith("1 run ")
    assert runner.measure(lambda n: 0.25, repeat=3).value == pytest.approx(250)  # a scalar per call


def test_rel_error_and_ratio():
    ref = [np.array([1.0, -4.0]), np.array([[2.0]])]
    assert runner.rel_error([np.array([1.0, -4.4]), np.array([[2.0]])], ref) == pytest.approx(0.1)
    assert runner.rel_error([np.array([1.0, -4.0]), np.array([[3.0]])], ref) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        runner.rel_error(ref[:1], ref)
    assert runner.ratio(Cell(6.0), Cell(2.0)).value == 3.0
    assert runner.ratio(Cell(6.0), Cell.missing("x"), "a", "b").na == "needs b"
    assert runner.ratio(Cell(6.0), Cell(0.0), "a", "b").na == "b is 0"


def test_markdown_and_json(tmp_path):
    res = fake_result()
    md = report.markdown(res)
    header = next(line for line in md.splitlines() if line.startswith("| workload"))
    assert header.count("|") == len(report.COLUMNS) + 1
    row = next(line for line in md.splitlines() if line.startswith("| dense"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:7] == ["dense", "naive", "1", "2.5*", "2.50", "7.25", "n/a: pa.build is being written; long long lo…"]
    # which backward each column measured: pa.vjp's on saved residuals, or the one that recomputes the forward
    assert "| bwd ms (vjp) |" in header and "| bwd ms (recompute) |" in header and "| vs torch (recompute) |" in header
    assert "backward vjp (pa.vjp: bwd on the residuals its forward left on the device) and recompute (" in md
    assert "- dense: autodiff: dense, softmax_max; hand TE: none" in md
    step = next(line for line in md.splitlines() if line.startswith("| mlp_step"))
    steps = [c.strip() for c in step.strip("|").split("|")][13:18]
    assert steps == ["3", "6", "2", "1.50", "3.00"] and cells[13:18] == ["-"] * 5  # dense is no training step
    assert "5.0e-03 (!)" in row and "Test CPU" in md and "3 runs (x)" in md
    assert "- pa.build is being written; long" in md  # the full reason, below the table
    paths = report.write(res, tmp_path, plot=False)
    assert [p.suffix for p in paths] == [".md", ".json", ".html"]
    data = json.loads(paths[1].read_text())
    assert data["rows"][0]["bwd_ms"] == {"value": 2.5, "na": None, "note": "3 runs (x)"}
    assert data["rows"][0]["hand_ms"]["na"].startswith("pa.build is being written")
    assert data["options"]["backward"] == ["vjp", "recompute"] and data["backward"]["vjp"].startswith("vjp (pa.vjp")
    assert paths[0].read_text() == md


def test_bar_chart(tmp_path):
    pytest.importorskip("matplotlib")
    paths = report.write(fake_result(), tmp_path, plot=True)
    png = [p for p in paths if p.suffix == ".png"]  # backward ms, and the ratios
    assert [p.name[len("bench-YYYYmmdd-HHMMSS"):] for p in png] == [".png", "-ratios.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in png)


def test_registry_has_every_workload_with_its_shapes():
    assert list(wl.WORKLOADS) == [
        "dense", "dense_big", "conv2d_3x3", "conv2d_5x5_s3", "conv2d_dilated", "avg_pool", "max_pool", "softmax",
        "softmax_homebrew", "flatten", "chain", "mlp_step", "lenet_step"]
    shapes = {}
    for name, w in wl.WORKLOADS.items():
        c = w.instantiate()
        shapes[name] = ({i.name: i.shape for i in c.inputs}, c.out_shape, c.wrt)
    assert shapes["dense_big"] == ({"X": (32, 10000), "W": (3000, 10000), "B": (3000,)}, (32, 3000), ("W", "B"))
    assert shapes["conv2d_5x5_s3"][1] == (32, 19, 19, 19)
    assert shapes["conv2d_dilated"][1] == (8, 16, 30, 30)  # (32 + 2 - 2·2 - 1) + 1
    assert shapes["avg_pool"][1] == (32, 17, 140, 140) and shapes["max_pool"][1] == (32, 64, 50, 50)
    assert shapes["flatten"][1] == (32, 50000)
    assert shapes["mlp_step"][2] == ("W1", "b1", "W2", "b2", "W3", "b3") and shapes["mlp_step"][1] == ()
    assert shapes["lenet_step"][0]["W1"] == (120, 256) and len(shapes["lenet_step"][2]) == 10
    small = wl.WORKLOADS["conv2d_3x3"].instantiate(batch=2)
    assert small.inputs[0].shape == (2, 17, 28, 28) and small.out_shape == (2, 19, 26, 26)
    assert wl.WORKLOADS["chain"].instantiate(batch=2).out_shape == (1000,)  # no batch axis: unchanged


def test_forward_te_matches_numpy_forward():
    # The forward the autodiff column differentiates is the same function as the baselines'.
    for name in ("dense", "max_pool", "mlp_step"):
        case = TINY[name]
        a = case.data()
        ph = case.placeholders()
        Y = case.forward_te(ph)
        got = pa.evaluate(Y, {p: a[p.name] for p in runner._args_for([Y], a)[0]})
        ref = case.np_forward({k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in a.items()})[0]
        np.testing.assert_allclose(np.asarray(got, np.float64).reshape(np.shape(ref)), ref, rtol=1e-5, atol=1e-6)


def test_cli_bench_writes_the_table(tmp_path, capsys):
    rc = polyad_main(["bench", "--workloads", "flatten", "--batch", "1", "--repeat", "1", "--no-torch",
                      "--no-plot", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| flatten | naive |" in out and f"Report written to {tmp_path.resolve()}/:" in out
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".html", ".json", ".md"]
    with pytest.raises(SystemExit):
        polyad_main(["bench", "--workloads", "no_such_workload"])


def test_evaluate_backend_fills_the_error_columns(tmp_path, capsys):
    rc = runner.main(["--workloads", "dense", "--batch", "1", "--repeat", "1", "--no-torch", "--no-plot",
                      "--backend", "evaluate", "--out", str(tmp_path)])
    assert rc == 0
    (js,) = tmp_path.glob("*.json")
    (row,) = json.loads(js.read_text())["rows"]
    assert row["hand_err"]["value"] < 1e-5 and row["hand_ms"]["value"] > 0
    assert row["bwd_recompute_ms"]["value"] > 0 or row["bwd_recompute_ms"]["na"]
    assert row["err"]["na"] or row["err"]["value"] < 1e-5  # autodiff: a number once it runs
    assert "backend evaluate" in capsys.readouterr().out


def test_workload_budget_skips_the_rest_of_a_slow_workload():
    opts = _opts(torch=False, workload_budget=1e-9)
    (row,) = runner.run_workload("dense", TINY["dense"], opts, _api(), lambda s: None)
    for key in ("numpy_ms", "hand_ms", "fwd_ms"):
        assert row[key].na.startswith("skipped: workload over its 1e-09 s budget"), key
    (row,) = runner.run_workload("dense", TINY["dense"], _opts(torch=False, workload_budget=0), _api(),
                                 lambda s: None)
    assert row["numpy_ms"].ok and row["hand_ms"].ok  # 0: no limit


def test_paired_rounds_keep_the_ratio_where_the_machine_drifts():
    """Two backwards, one twice the other, on a machine whose speed changes 3x between rounds (each run of
    the first moves it): timed side by side the medians keep the ratio 2; fewer rounds where the budget says."""
    speed = [1.0]

    def first(n):
        speed[0] = 4.0 - speed[0]  # 1 <-> 3
        return [2e-3 * speed[0]] * n

    def second(n):
        return [1e-3 * speed[0]] * n

    a, b = runner.paired([first, second], repeat=3, budget_s=1.0, rounds=5)
    assert a.value / b.value == pytest.approx(2.0)
    assert a.note == b.note == "side by side with torch, 5 rounds of 3"
    a, b = runner.paired([first, second], repeat=3, budget_s=0.03, rounds=5)
    assert a.value / b.value == pytest.approx(2.0) and a.note.endswith("(time budget 0.03 s)")


@pytest.mark.parametrize("keep", [False, True])
def test_bench_builds_cold_but_keeps_the_device_records(tmp_path, monkeypatch, keep):
    """A fresh kernel cache per run, but the machine's probe and calibration: calibrated anew, each run
    scheduled tiny stages on its own measurement.  Both variables come back as they were."""
    usual = tmp_path / "usual"
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(usual))
    monkeypatch.delenv("POLYAD_DEVICE_CACHE_DIR", raising=False)
    seen = {}

    def fake_run(opts):
        seen.update({k: os.environ.get(k) for k in ("POLYAD_CACHE_DIR", "POLYAD_DEVICE_CACHE_DIR")})
        return {"machine": {}, "options": {}, "backward": {}, "rows": []}

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(runner, "where_written", lambda paths: "")
    import polyad.bench.report as report
    monkeypatch.setattr(report, "write", lambda *a, **k: [])
    monkeypatch.setattr(report, "markdown", lambda result: "")
    argv = ["--workloads", "flatten", "--no-plot", "--out", str(tmp_path / "out")] + (["--keep-cache"] if keep else [])
    assert runner.main(argv) == 0
    if keep:
        assert seen == {"POLYAD_CACHE_DIR": str(usual), "POLYAD_DEVICE_CACHE_DIR": None}
    else:
        assert seen["POLYAD_CACHE_DIR"] != str(usual)
        assert seen["POLYAD_DEVICE_CACHE_DIR"] == os.path.join(str(usual), "devices")
    assert os.environ["POLYAD_CACHE_DIR"] == str(usual) and "POLYAD_DEVICE_CACHE_DIR" not in os.environ


def test_tuned_against_auto_is_timed_run_by_run_in_alternating_pairs():
    """Each pair runs one of each, the first alternating, and the ratio is the median of the pairs': a machine
    that slows down 3x every other pair does not move it."""
    calls = []

    def run(name, t):
        def run_n(n):
            calls.append(name)
            # bursts: every other pair runs 3x slower (the warm-ups make an even number of calls, so a pair's
            # two runs share their pace)
            return [t * (3.0 if (len(calls) - 1) // 2 % 2 else 1.0)] * n
        return run_n

    cell = runner.interleaved_ratio(run("auto", 2e-6), run("tuned", 1e-6), repeat=4, budget_s=10.0, rounds=3)
    assert cell.value == pytest.approx(0.5) and "12 run-by-run ratios" in cell.note
    timed = calls[-24:]  # after the warm-ups
    assert [timed[i] for i in range(0, 24, 2)] == ["auto", "tuned"] * 6  # the first of a pair alternates
    short = runner.interleaved_ratio(run("auto", 2.0), run("tuned", 1.0), repeat=4, budget_s=10.0, rounds=3)
    assert "time budget" in short.note  # 3 rounds of 4 pairs of 3 s do not fit in 10 s: one round


def test_tuned_against_auto_pairs_every_module_of_one_side_with_every_module_of_the_other():
    """Modules of one program read a few percent apart: with three a side, the 18 pairs go through all nine
    combinations twice, and the first of a pair still alternates."""
    calls = []

    def run(side, i, t):
        def run_n(n):
            calls.append((side, i))
            return [t] * n
        return run_n

    a = [run("a", i, 1e-6 * (1 + i)) for i in range(3)]
    b = [run("b", i, 1e-6) for i in range(3)]
    cell = runner.interleaved_ratio(a, b, repeat=6, budget_s=10.0, rounds=3)
    assert "18 run-by-run ratios over 3 and 3 modules" in cell.note
    assert cell.value == pytest.approx(0.5)  # the ratios 1, 1/2, 1/3, six each
    steps = [calls[k:k + 2] for k in range(len(calls) - 36, len(calls), 2)]  # after the warm-ups
    assert [s[0][0] for s in steps] == ["a", "b"] * 9  # the first of a pair alternates
    timed = [(dict(s)["a"], dict(s)["b"]) for s in steps]
    assert sorted(set(timed)) == [(i, j) for i in range(3) for j in range(3)]
    assert all(timed.count(p) == 2 for p in set(timed))


def test_tuned_over_auto_says_when_both_run_the_same_program():
    from types import SimpleNamespace as NS

    def cols(source):
        return NS(bwd=NS(module=NS(source=source)))

    cell = Cell(1.01, note="median of 50 run-by-run ratios")
    same = runner.same_program_noted(cell, cols("kernel A"), cols("kernel A"))
    assert same.value == 1.01 and same.note.endswith("; tuned and auto run the same backward program")
    assert runner.same_program_noted(cell, cols("kernel A"), cols("kernel B")) is cell
    assert runner.same_program_noted(cell, NS(), NS()) is cell  # a fake without modules says nothing
    missing = Cell.missing("not timed")
    assert runner.same_program_noted(missing, cols("kernel A"), cols("kernel A")) is missing


def test_graphs_the_tuner_does_not_tune_build_without_pa_tuneds_warning():
    """A tuned row's forward, hand-written gradient and SGD update have no record in the log of the backward the
    tuner tuned: the report says they are auto's; pa.tuned's warning is not repeated on every row. Other warnings
    pass."""
    import warnings

    from polyad.bench.runner import untuned

    def build(msg, kind=RuntimeWarning):
        warnings.warn(msg, kind)
        return "module"

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert untuned(build, "polyad: pa.tuned('a.jsonl') has no record of the graph of Y, or of any of its "
                       "stages, on cpu; using the auto schedule") == "module"
        untuned(build, msg="polyad: a cached program no longer builds (x); regenerating it")
    assert [str(w.message) for w in rec] == ["polyad: a cached program no longer builds (x); regenerating it"]
