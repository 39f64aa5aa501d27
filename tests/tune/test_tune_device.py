"""The tuner on the device at tiny shapes: measured trials, outputs checked, a compiler crash costs one candidate,
the log applied by pa.tuned / pa.tuning_log / $POLYAD_TUNING_LOG, the CLI, and a Dask LocalCluster."""

import dataclasses
import json
import re
import warnings

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import select_device
from polyad.runtime.device import is_gpu
from polyad.schedule.tuning import read_log
from polyad.tuner import CONFIRM_TOP, STAGES_TOP
from polyad.tuner.configs import ConfigSpace
from polyad.tuner.measure import LocalMeasurer

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def _dense_backward(names=("X", "W", "H"), n=24):
    X = pa.placeholder((8, n), name=names[0])
    W = pa.placeholder((16, n), name=names[1])
    Y = pa.nn.relu(pa.nn.dense(X, W))
    H = pa.placeholder(Y.shape, name=names[2])
    return list(pa.differentiate(Y, [X, W], H)), [X, W, H]


def _arrays(ins, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype("float32") for t in ins]


def test_a_tuning_run_measures_checks_logs_and_its_result_builds(tmp_path):
    from polyad.schedule.tuning import config_key

    outs, ins = _dense_backward()
    log = tmp_path / "dense.jsonl"
    res = pa.tune(outs, ins, trials=6, log=log, workers=2, seed=0, name="dense", repeat=3)
    assert res.trials == 6 and res.time <= res.auto_time
    recs = read_log(log)
    # auto and the (up to 3) fastest candidates again, with the (up to 2) fastest by their stages' medians, 5 rounds
    # in a rotating order
    confirm = [r for r in recs if r.candidate == "confirm"]
    n = len({r.config for r in confirm})
    assert (not confirm or 2 <= n <= 1 + CONFIRM_TOP + STAGES_TOP) and len(confirm) == 5 * n
    if confirm:
        assert confirm[0].config == recs[0].config  # auto opens the first round, ...
        rounds = [[r.config for r in confirm[i:i + n]] for i in range(0, 5 * n, n)]
        assert all(rd[1:] + rd[:1] == nxt for rd, nxt in zip(rounds, rounds[1:]))  # ... then each in turn
        assert res.schedule.name == "auto" or config_key(res.schedule) in {r.config for r in confirm}
    # every run was timed beside a run of the measurer's own auto module, kept from its reference trial; auto's
    # trial in the search is its own reference, its fresh modules in the check are paired like the candidates'
    assert all(len(r.ref_times) == len(r.times) > 0 and r.relative > 0 for r in recs)
    holdout = [r for r in recs if r.candidate == "holdout"]
    assert all(r.ref_times == r.times for r in recs
               if r.config == recs[0].config and r.candidate not in ("confirm", "holdout"))
    assert all(r.ref_times != r.times for r in confirm + holdout)
    assert any(r.ref_times != r.times for r in recs)
    # where the check chose a candidate, it and auto again, 5 rounds in alternating order: the speed-up reported
    assert len(holdout) in (0, 10)
    if holdout:
        chosen = holdout[1].config
        pairs = [[recs[0].config, chosen], [chosen, recs[0].config]] * 2 + [[recs[0].config, chosen]]
        assert [r.config for r in holdout] == [c for p in pairs for c in p]
        assert chosen in {r.config for r in confirm} and chosen != recs[0].config
        assert res.schedule.name == "auto" or config_key(res.schedule) == chosen
    else:
        assert res.schedule.name == "auto"
    # the race measures the search's fastest (only when more beat auto than the check takes) once more
    race = [r for r in recs if r.candidate == "race"]
    recs = [r for r in recs if r.candidate not in ("confirm", "race", "holdout")]
    assert len(race) in (0, 4, 5) and {r.config for r in race} <= {r.config for r in recs[1:]}
    assert len(recs) == 6 and recs[0].candidate == "auto" and all(r.name == "dense" for r in recs)
    assert all(r.error is None and r.time > 0 for r in recs)
    assert all(e["time"] is not None and e["time"] > 0 for r in recs for e in r.stages.values())
    assert res.wall["codegen"] > 0 and res.wall["compile"] > 0 and res.wall["measure"] > 0
    # the result, applied three ways, computes the gradient
    a = _arrays(ins)
    ref = pa.evaluate(outs, dict(zip(ins, a)))
    for sched in (res.schedule, pa.tuned(log)):
        got = pa.build(outs, ins, schedule=sched)(*a)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_pa_tuned_applies_the_best_whole_schedule_of_the_graph(tmp_path):
    from polyad.pipeline import resolve_schedule

    outs, ins = _dense_backward()
    log = tmp_path / "log.jsonl"
    res = pa.tune(outs, ins, trials=5, log=log, workers=2, repeat=3)
    got = resolve_schedule(outs, pa.tuned(log), inputs=ins)
    # the log applies what the tuner chose: where it checked its best against auto side by side (records
    # "confirm"), that check decides; else the fastest record
    assert (got.stages, got.inline, got.rfactor, got.pad) == (res.schedule.stages, res.schedule.inline,
                                                               res.schedule.rfactor, res.schedule.pad)
    assert got.name == "tuned" and "tuning log" in got.notes[0]


def test_stage_records_apply_to_another_graph_with_the_same_stages(tmp_path, monkeypatch):
    """Keys are structural: a graph with other names gets the logged stages, and pa.show says so."""
    outs, ins = _dense_backward()
    log = tmp_path / "log.jsonl"
    pa.tune(outs, ins, trials=3, log=log, workers=2, repeat=3)
    outs2, ins2 = _dense_backward(names=("A", "B", "G"))
    with pa.tuning_log(log):
        text = pa.show(outs2, schedule="auto")
    assert "from the tuning log" in text
    monkeypatch.setenv("POLYAD_TUNING_LOG", str(log))
    text = pa.show(outs2, schedule="auto")
    assert "from the tuning log" in text
    monkeypatch.delenv("POLYAD_TUNING_LOG")
    assert "from the tuning log" not in pa.show(outs2, schedule="auto")


def test_pa_tuned_on_a_graph_without_records_falls_back_to_auto_and_says_so(tmp_path):
    outs, ins = _dense_backward()
    log = tmp_path / "log.jsonl"
    pa.tune(outs, ins, trials=2, log=log, workers=1, repeat=2)
    X = pa.placeholder((5, 7), name="X")
    Y = pa.compute((5,), lambda i: X[i, 0] * 3.0, name="Y")
    with pytest.warns(RuntimeWarning, match="no record of the graph of Y, or of any of its stages") as rec:
        mod = pa.build(Y, [X], schedule=pa.tuned(log))
    assert [w.filename for w in rec if "no record" in str(w.message)] == [__file__]  # the caller's line
    x = np.arange(35, dtype="float32").reshape(5, 7)
    np.testing.assert_allclose(mod(x), x[:, 0] * 3.0)
    # pa.show says it too (it printed a plain "schedule 'auto'")
    assert "the tuning log has no record of this graph or of any of its stages" in pa.show(Y, schedule=pa.tuned(log))


def test_pa_vjp_with_a_log_of_its_backward_warns_only_where_neither_module_has_records(tmp_path):
    """`polyad tune --workload` and the bench tune pa.vjp's backward: its forward is auto's as meant, unsaid.
    A log of neither module says so once, naming both."""
    X, W = pa.placeholder((8, 24), name="X"), pa.placeholder((16, 24), name="W")
    Y = pa.nn.relu(pa.nn.dense(X, W))
    H = pa.placeholder(Y.shape, name="d_Y")
    grads = list(pa.differentiate(Y, [X, W], H))
    saved = pa.residuals(grads, [H], save="reductions")
    order = [Y] + [r for r in saved if r is not Y]  # pa.vjp's backward graph (the bench's backward_graph)
    log = tmp_path / "bwd.jsonl"
    pa.tune(grads, [X, W, H] + order, trials=2, log=log, workers=1, repeat=2)
    x, w, h = _arrays([X, W, H])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fwd, bwd = pa.vjp(Y, [X, W], schedule=pa.tuned(log))
        y, res = fwd(x, w)
        dx, dw = bwd(res, h)
    fwd_a, bwd_a = pa.vjp(Y, [X, W])
    y_a, res_a = fwd_a(x, w)
    np.testing.assert_allclose(y, y_a, rtol=1e-5)
    for g, g_a in zip((dx, dw), bwd_a(res_a, h)):
        np.testing.assert_allclose(g, g_a, rtol=1e-4, atol=1e-5)

    X2 = pa.placeholder((5, 7), name="X2")
    Y2 = pa.compute((5,), lambda i: pa.exp(X2[i, 0]) * 3.0, name="Y2")
    with pytest.warns(RuntimeWarning, match="no record of") as rec:
        pa.vjp(Y2, [X2], schedule=pa.tuned(log))
    missed = [w for w in rec if "no record of" in str(w.message)]
    assert len(missed) == 1 and missed[0].filename == __file__
    assert "pa.vjp's forward (Y2" in str(missed[0].message) and "backward (d_X2" in str(missed[0].message)


class _Altered(LocalMeasurer):
    """Every candidate's program but the reference's altered by ``alter(program)`` (wherever it was generated:
    here or in the code generation workers)."""

    def _programs(self, schedules, timeout):
        return [p if isinstance(p, str) or s.name == "auto" or not p.kernels else self.alter(p)
                for s, p in zip(schedules, super()._programs(schedules, timeout))]


class _Crashing(_Altered):
    """Every candidate but the reference gets a kernel that takes the compiler's process down at its trial
    launch (as an LLVM abort would)."""

    def alter(self, p):
        head, sep, rest = p.source.partition("__kernel")
        brace = rest.index("{") + 1
        return dataclasses.replace(p, source=head + sep + rest[:brace] + " __builtin_trap();" + rest[brace:])


def test_a_candidate_whose_compile_aborts_costs_one_trial_not_the_run(tmp_path):
    outs, ins = _dense_backward(n=20)
    m = _Crashing(outs, ins, workers=2, repeat=2)
    log = tmp_path / "log.jsonl"
    res = pa.tune(outs, ins, trials=4, log=log, measurer=m)
    recs = read_log(log)
    assert recs[0].error is None
    crashed = [r for r in recs[1:] if r.error]
    # a CPU's process goes down at the trial launch; a GPU's compiler may refuse the trap (NVIDIA's OpenCL
    # did), or the launch fails (a LaunchFailure, a CompilerCrash too)
    gpu = is_gpu(select_device(None))
    assert crashed and all("CompilerCrash" in r.error or "LaunchFailure" in r.error
                           or (gpu and "BuildError" in r.error) for r in crashed), [r.error for r in crashed]
    assert res.schedule.name == "auto" and res.time == res.auto_time


def test_a_wrong_result_is_an_error_never_chosen(tmp_path):
    outs, ins = _dense_backward(n=20)

    class Wrong(_Altered):
        def alter(self, p):
            # every accumulator starts at 1 instead of 0 (scalar and vector initialisations)
            return dataclasses.replace(p, source=p.source.replace(" = 0.0f;", " = 1.0f;").replace("(0.0f)", "(1.0f)"))

    res = pa.tune(outs, ins, trials=4, measurer=Wrong(outs, ins, workers=2, repeat=2), log=tmp_path / "l.jsonl")
    recs = read_log(tmp_path / "l.jsonl")
    assert any(r.error and r.error.startswith("wrong result") for r in recs), [r.error for r in recs]
    from polyad.schedule.tuning import config_key

    assert config_key(res.schedule) not in {r.config for r in recs if r.error}


def test_the_cli_tunes_a_workload_and_prints_the_schedule_and_table(tmp_path, capsys):
    from polyad.cli import main

    log = tmp_path / "cli.jsonl"
    rc = main(["tune", "--workload", "softmax", "--shapes", "tiny", "--trials", "4", "--log", str(log),
               "--workers", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "schedule 'auto'" in out or "schedule 'tuned'" in out
    assert "speed-up" in out and "total (one run, median)" in out and "trials" in out
    assert len([r for r in read_log(log) if r.candidate not in ("confirm", "holdout")]) == 4
    rc = main(["tune", "--workload", "nope", "--shapes", "tiny", "--no-progress"])
    assert rc == 2 and "unknown workload" in capsys.readouterr().err


def test_dask_local_cluster_builds_and_measures_on_its_workers(tmp_path):
    distributed = pytest.importorskip("distributed")
    outs, ins = _dense_backward(n=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
                distributed.Client(c) as client:
            res = pa.tune(outs, ins, trials=4, workers=client, log=tmp_path / "dask.jsonl", repeat=2)
    recs = [r for r in read_log(tmp_path / "dask.jsonl") if r.candidate not in ("confirm", "holdout")]
    assert len(recs) == 4 and all(r.error is None for r in recs), [r.error for r in recs]
    assert all(r.device == res.device for r in recs)
    assert res.time <= res.auto_time
    assert json.loads(res.schedule.to_json())


def test_a_candidate_over_its_time_limit_is_stopped_after_one_run(tmp_path):
    outs, ins = _dense_backward(n=20)
    m = LocalMeasurer(outs, ins, workers=1, repeat=2)
    m.timeout = 1e-9  # every run from now on is over it, auto's too: nothing to report, and tune says why
    with pytest.raises(pa.PolyadError, match="auto schedule did not run: too slow"):
        pa.tune(outs, ins, trials=3, measurer=m, log=tmp_path / "l.jsonl", resume=False)
    recs = read_log(tmp_path / "l.jsonl")
    # auto's program is cached: it runs and is cut; the others' compiles are over the same timeout
    assert recs[0].error.startswith("too slow: one run took") and "the timeout" in recs[0].error, recs[0].error
    assert all(r.error.startswith(("too slow", "CompilerCrash: the OpenCL compiler did not finish")) for r in recs)
    assert all(r.time is None for r in recs)


def test_a_batch_timeout_under_the_measurers_own_cuts_its_candidates():
    """The tuner passes what is left of its budget as a batch's timeout: a compile over it is an error, and the
    next batch has the measurer's own timeout again."""
    outs, ins = _dense_backward(n=20)
    m = LocalMeasurer(outs, ins, workers=1, repeat=2)
    try:
        ctx = m.context()
        # a schedule other than auto's, whatever auto is on this device (naive loops on some: dense's 8x20 is small)
        space = ConfigSpace(ctx.outputs, ctx.model, ctx.auto)
        other = space.schedule((0, (1,) + (0,) * (len(space.variants[0].stages) - 1)))
        assert other.stages != ctx.auto.stages
        [cut] = m.measure([other], timeout=1e-9)
        assert cut.error and ("did not finish" in cut.error or "too slow" in cut.error), cut.error
        [again] = m.measure([ctx.auto])
        assert again.ok, again.error
    finally:
        m.close()


def test_a_build_without_kernels_is_measured_once(tmp_path):
    """flatten's gradient is a bitcast of H: no kernel, so no schedule changes anything."""
    X = pa.placeholder((2, 3, 4), name="X")
    Y = pa.nn.flatten(X)
    H = pa.placeholder(Y.shape, name="H")
    [dX] = pa.differentiate(Y, [X], H)
    res = pa.tune([dX], [H], trials=20, log=tmp_path / "l.jsonl")
    assert res.trials == 1 and res.schedule.name == "auto"


def test_a_logged_schedule_of_the_same_structure_with_other_stage_names_applies_by_stage_keys(tmp_path):
    """Keys are structural, a schedule names stages: the benchmark's recompute graph has the vjp graph's key
    but its head (and the padded copy of it) has another name. The build takes the logged stages by key."""
    from polyad.pipeline import resolve_schedule

    def conv(head):
        X = pa.placeholder((1, 2, 10, 10), name="X")
        W = pa.placeholder((4, 2, 3, 3), name="W")
        Y = pa.nn.conv2d(X, W)
        H = pa.placeholder(Y.shape, name=head)
        return list(pa.differentiate(Y, [X, W], H)), [X, W, H]

    outs, ins = conv("H")
    log = tmp_path / "conv.jsonl"
    pa.tune(outs, ins, trials=4, log=log, workers=2, repeat=2, confirm=0)
    # a record naming H_pad (the padded copy of the head), the fastest by far: the graph's best whole schedule
    from polyad.pipeline import build_graph, select_device
    from polyad.runtime.device import device_key
    from polyad.schedule.tuning import Record, TuningLog, workload_key

    padded = pa.Schedule("mine", stages={"H_pad": pa.StageSchedule(tile=(1, 1, 2, 2))}, pad=frozenset({"d_X_from_conv2d"}))
    with TuningLog(log) as w:
        w.append(Record.of(padded, workload_key(build_graph(outs), ins), device_key(select_device()), trial=99,
                           candidate="hand", times=[1e-9]))
    got = resolve_schedule(outs, pa.tuned(log), inputs=ins)
    assert "H_pad" in got.stages  # it fits the graph it was tuned on
    outs2, ins2 = conv("G")
    got2 = resolve_schedule(outs2, pa.tuned(log), inputs=ins2)
    assert got2.name == "tuned" and "does not fit it" in got2.notes[0]
    a = _arrays(ins2)
    for g, r in zip(pa.build(outs2, ins2, schedule=pa.tuned(log))(*a), pa.evaluate(outs2, dict(zip(ins2, a)))):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_a_logged_schedule_is_not_applied_by_name_to_a_graph_whose_stage_names_are_permuted(tmp_path):
    """Two graphs of one structure, stages A and C swapped: one workload key, and the schedule of the first fits
    the second by name, so its blocks went to the other stages. The record's stage keys tell them apart."""
    from polyad.pipeline import build_graph, resolve_schedule, select_device
    from polyad.runtime.device import device_key
    from polyad.schedule.graph import validate
    from polyad.schedule.tuning import Record, TuningLog, stage_key, workload_key

    def graph(a, c):
        X = pa.placeholder((8, 12), name="X")
        A = pa.compute((8, 12), lambda i, j: pa.exp(X[i, j]) * 0.5, name=a)
        k = pa.reduce_axis((0, 12), name="k")
        B = pa.compute((8,), lambda i: pa.sum(A[i, k], axis=k), name="B")
        C = pa.compute((8, 12), lambda i, j: A[i, j] / B[i], name=c)
        return [pa.compute((8, 12), lambda i, j: pa.tanh(C[i, j]) + X[i, j], name="D")], [X]

    outs, ins = graph("A", "C")
    mine = pa.Schedule("mine", stages={"A": pa.StageSchedule(tile=(2, 4), vectorize=4),
                                       "C": pa.StageSchedule(tile=(8, 12))})
    prepared = validate(build_graph(outs), mine)  # the stages records key: before inlining
    entries = {op.name: (stage_key(op), mine.stages.get(op.name, mine.default), 1e-9)
               for op in pa.te.walk_ops(prepared) if not isinstance(op, pa.te.PlaceholderOp)}
    log = tmp_path / "swap.jsonl"
    with TuningLog(log) as w:
        w.append(Record.of(mine, workload_key(build_graph(outs), ins), device_key(select_device()), trial=1,
                           candidate="hand", stages=entries, times=[1e-9]))
    assert resolve_schedule(outs, pa.tuned(log), inputs=ins).stages["A"].vectorize == 4  # its own graph
    outs2, ins2 = graph("C", "A")
    assert workload_key(build_graph(outs2), ins2) == workload_key(build_graph(outs), ins)
    got = resolve_schedule(outs2, pa.tuned(log), inputs=ins2)
    assert re.search(r"does not fit it \(its stage '[AC]' is another stage in this graph\)", got.notes[0]), got.notes
    assert got.stages.get("A") != mine.stages["A"]  # the exp stage's block does not go to the division here


def test_a_logged_schedule_of_every_graph_variant_applies_to_its_own_graph(tmp_path):
    """The records key their stages before inlining (as the auto-scheduler's lookups do): the check that a whole
    schedule names the stages it was measured on must compare those, or an inlining variant never applied."""
    from polyad.pipeline import resolve_schedule, select_device
    from polyad.runtime.device import device_key
    from polyad.schedule.tuning import Record, TuningLog, stage_key

    outs, ins = _dense_backward()
    ctx = LocalMeasurer(outs, ins, workers=1, repeat=1).context()
    space = ConfigSpace(ctx.outputs, ctx.model, ctx.auto)
    assert any(v.inline for v in (space.schedule((i, (0,) * len(var.stages))) for i, var in
                                  enumerate(space.variants)))
    for i, var in enumerate(space.variants):
        c = (i, (0,) * len(var.stages))
        sched = space.schedule(c)
        log = tmp_path / f"v{i}.jsonl"
        with TuningLog(log) as w:
            w.append(Record.of(sched, ctx.workload, device_key(select_device()), trial=1, candidate="evolve",
                               stages={ch.name: (stage_key(ch.op), ss, 1e-6) for ch, ss in space.stage_pairs(c)},
                               times=[1e-6]))
        got = resolve_schedule(outs, pa.tuned(log), inputs=ins)
        assert "does not fit" not in got.notes[0], (i, got.notes[0])
        assert (got.stages, got.inline) == (sched.stages, sched.inline), i


def test_the_tuner_measures_the_program_pa_build_compiles(monkeypatch):
    """Candidates are measured as the build compiles them, index width included: the tuner once generated
    32-bit-index kernels while builds ran 64-bit ones, and ranked schedules by kernels nobody ran."""
    from polyad.pipeline import capabilities

    outs, ins = _dense_backward()
    m = LocalMeasurer(outs, ins, workers=1, repeat=1)
    auto = m.context().auto
    built = pa.build(outs, ins, schedule=auto)
    assert m._program(auto).source == built.program.source
    dev = select_device(None)
    if not is_gpu(dev) and capabilities(dev).index64:  # on this CPU the build asks for 64-bit indices
        assert "long" in built.program.source


def test_the_cli_shows_the_tuned_schedule_on_the_graph_as_tuned(tmp_path, capsys, monkeypatch):
    """A workload's backward is fed its forward's residuals: the schedule names the stages of the graph cut
    there. Shown on the uncut graph, a forward stage took a backward stage's name (lenet_step's ``relu_1``,
    a 4-d forward relu against the 2-d backward stage the tile was for) and the CLI died after tuning."""
    from polyad.bench import tuning as bench_tuning
    from polyad.cli import main
    from polyad.pipeline import build_graph
    from polyad.te.graph import cut
    from polyad.tuner import TuneResult

    X = pa.placeholder((4, 6, 3), name="X")
    R0 = pa.compute((4, 6, 3), lambda i, j, k: pa.max(X[i, j, k], 0.0), name="relu")  # forward, not fed
    R = pa.compute((4, 6, 3), lambda i, j, k: pa.max(R0[i, j, k], 0.0), name="relu")  # forward, fed as data
    H = pa.placeholder((4, 6, 3), name="H")
    G = pa.compute((4, 6), lambda i, j: R[i, j, 0] * H[i, j, 0], name="relu")  # a backward stage, also "relu"
    outs, ins = [G], [X, H, R]
    g = bench_tuning.TuningGraph("fake", outs, ins, [np.ones(t.shape, np.float32) for t in ins])
    monkeypatch.setattr(bench_tuning, "backward_graph", lambda *a, **k: g)
    tuned_name = build_graph(cut(outs, ins)[0])[0].name  # as the tuner names it: relu_1, after the fed relu
    sched = pa.Schedule("tuned", stages={tuned_name: pa.StageSchedule(tile=(2, 3))})

    def fake_tune(*a, **k):
        return TuneResult(sched, 1e-3, 2e-3, 1, wall={"compile": 0.0, "measure": 0.0, "search": 0.0, "total": 0.0})

    monkeypatch.setattr(pa, "tune", fake_tune)
    rc = main(["tune", "--workload", "softmax", "--shapes", "tiny", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "tile 2x3" in out.out


def test_a_candidate_that_changes_one_stage_compiles_one_kernel(tmp_path, monkeypatch):
    """Each kernel is its own program to the tuner: a candidate compiles only the stages it changes (the other
    kernels come from the cache), and runs them as pa.build's whole program does."""
    from polyad.runtime import cache

    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    outs, ins = _dense_backward(names=("Xk", "Wk", "Hk"), n=20)
    m = LocalMeasurer(outs, ins, data=_arrays(ins), repeat=3)
    try:
        auto = m.context().auto
        names = [k.stage.name for k in m._program(auto).kernels]
        assert len(names) >= 2
        one = names[0]
        tile = (2, 1) if auto.for_stage(one).tile != (2, 1) else (1, 2)
        other = dataclasses.replace(auto, stages=dict(auto.stages, **{one: pa.StageSchedule(tile=tile)}))
        before = cache.STATS.compiles
        [t] = m.measure([other])
        assert t.ok, t.error
        assert cache.STATS.compiles - before == 1  # that stage's kernel, not the program
        assert set(t.stages) == set(m.measure([auto])[0].stages)
    finally:
        m.close()
    got = pa.build(outs, ins, schedule=other)(*_arrays(ins))
    want = pa.evaluate(outs, dict(zip(ins, _arrays(ins))))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_a_clear_loser_is_timed_twice_and_no_further(monkeypatch):
    """A candidate whose first two timed runs each take LOSES times auto's is ranked on those two runs."""
    from polyad.tuner import measure

    outs, ins = _dense_backward(names=("Xl", "Wl", "Hl"), n=12)
    m = LocalMeasurer(outs, ins, data=_arrays(ins), repeat=4)
    try:
        auto = m.context().auto
        [normal] = m.measure([auto])
        assert normal.ok and len(normal.times) >= 4
        monkeypatch.setattr(measure, "LOSES", 1e-9)  # every run now "loses" against auto's median
        [lost] = m.measure([auto])
        assert lost.ok and len(lost.times) == 2 and lost.time == pytest.approx(sum(lost.times) / 2)
        assert lost.stages and all(t > 0 for t in lost.stages.values())  # still profiled, for the cost model
    finally:
        m.close()


def test_the_end_check_pairs_fresh_modules_of_auto_like_the_candidates():
    """In the search auto again is its own measure (ratio 1); with ``pair_same`` (the end check) a fresh module of
    auto is timed beside the kept one, run by run, so that the kept module's own reading cancels from the choice."""
    outs, ins = _dense_backward(names=("Xq", "Wq", "Hq"), n=12)
    m = LocalMeasurer(outs, ins, data=_arrays(ins), repeat=3)
    try:
        auto = m.context().auto
        [again] = m.measure([auto])
        assert again.ok and again.ref_times == again.times and again.relative == 1.0
        [fresh] = m.measure([auto], pair_same=True)
        assert fresh.ok and len(fresh.ref_times) == len(fresh.times) >= 3
        assert fresh.ref_times != fresh.times and fresh.relative > 0
    finally:
        m.close()


def test_a_graph_the_workers_cannot_take_is_generated_here(monkeypatch):
    """When the graph does not pickle (chain's backward), the measurer generates its candidates itself."""
    from polyad.tuner import generate

    def refuse(self, *a, **k):
        raise generate.GraphNotSent("the graph cannot be sent to code generation workers: RecursionError")

    monkeypatch.setattr(generate.GeneratorPool, "__init__", refuse)
    outs, ins = _dense_backward(n=20)
    m = LocalMeasurer(outs, ins, workers=2, repeat=2)
    try:
        auto = m.context().auto
        naive = pa.Schedule("naive")
        trials = m.measure([auto, naive])
        assert all(t.ok for t in trials), [t.error for t in trials]
        assert m._generators is False
    finally:
        m.close()


def test_the_next_round_is_bred_while_the_batch_compiles_and_its_time_is_not_compile_time():
    """``meanwhile`` runs once per batch, in the caller's thread, before any timed run, as the compiler processes
    work; its time is not counted as the compile's: a batch with nothing to compile (its kernels on disk) reads no
    compile time for a breeding of 0.4 s."""
    import random
    import threading
    import time

    outs, ins = _dense_backward(names=("Xm", "Wm", "Hm"), n=12)
    m = LocalMeasurer(outs, ins, data=_arrays(ins), workers=2, repeat=2)
    calls = []

    def breed():
        calls.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.4)

    try:
        space = ConfigSpace(m.context().outputs, m.context().model, m.context().auto)
        rng = random.Random(0)
        fresh = [space.schedule(space.mutate(space.auto_config(), rng)) for _ in range(2)]
        got = m.measure(fresh, meanwhile=breed)
        assert calls == [True] and any(t.ok for t in got)
        t0 = time.perf_counter()
        again = m.measure(fresh, meanwhile=breed)  # compiled above: nothing to compile now
        assert calls == [True, True] and time.perf_counter() - t0 >= 0.4
        assert all(t.compile_s < 0.1 for t in again)
        assert m.measure([m.context().auto])[0].ok and calls == [True, True]  # not given: not called
    finally:
        m.close()


def test_the_tuners_own_data_gives_integer_inputs_two_values():
    # zeros alone made the check against auto's outputs empty on index-driven graphs: every read at index 0
    from polyad.tuner.measure import default_data

    ins = [pa.placeholder((64,), "int32", name="I"), pa.placeholder((8, 8), "bool", name="M"),
           pa.placeholder((4,), name="X")]
    i, m, x = default_data(ins)
    assert set(np.unique(i)) == {0, 1} and set(np.unique(m)) == {False, True}
    assert i.dtype == np.int32 and m.dtype == np.bool_ and x.dtype == np.float32
    assert all(np.array_equal(a, b) for a, b in zip(default_data(ins), (i, m, x)))  # reproducible
