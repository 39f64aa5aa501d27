"""The tuning log and database (issue 11): structural keys, JSON-lines records, torn and corrupt lines,
resume, the fastest record per workload/device and per stage, and the process's active database."""

import json
import os

import pytest

import polyad as pa
from polyad.schedule import Schedule, StageSchedule
from polyad.schedule import tuning
from polyad.schedule.tuning import (
    SCHEMA, Record, TuningDatabase, TuningLog, Tuned, active_database, config_key, measured, read_log, stage_entries,
    stage_key, tuned, tuning_log, workload_key,
)
from polyad.te.tensor import PlaceholderOp, walk_ops

DEV = "PoCL|cpu"
GPU = "NVIDIA|H100"


def _graph(names=("X", "W", "k", "T", "R"), n=12, dtype="float32", bias=1.0):
    x, w, k, t, r = names
    X = pa.placeholder((6, n), dtype=dtype, name=x)
    W = pa.placeholder((5, n), dtype=dtype, name=w)
    kk = pa.reduce_axis((0, n), name=k)
    T = pa.compute((6, 5), lambda i, j: pa.sum(X[i, kk] * W[j, kk], axis=kk), name=t)
    R = pa.compute((6, 5), lambda a, b: pa.max(T[a, b] + bias, 0.0), name=r)
    return X, W, T, R


OTHER = ("inp", "weights", "red", "prod", "act")


# ---------------------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------------------
def test_stage_key_ignores_names_and_sees_structure():
    X, W, T, R = _graph()
    X2, W2, T2, R2 = _graph(OTHER)
    assert stage_key(T.op) == stage_key(T2.op) and stage_key(R.op) == stage_key(R2.op)
    assert stage_key(T.op) != stage_key(R.op)
    assert len(stage_key(T.op)) >= 16 and int(stage_key(T.op), 16) >= 0
    assert stage_key(R.op) != stage_key(_graph(bias=2.0)[3].op)  # a constant
    assert stage_key(T.op) != stage_key(_graph(n=13)[2].op)  # a reduction extent and the input shapes
    assert stage_key(T.op) != stage_key(_graph(dtype="float64")[2].op)  # a dtype


def test_stage_key_sees_which_input_is_read_where():
    A = pa.placeholder((4, 4), name="A")
    B = pa.placeholder((4, 4), name="B")
    C = pa.placeholder((4, 8), name="C")
    ab = pa.compute((4, 4), lambda i, j: A[i, j] - B[j, i], name="s")
    ba = pa.compute((4, 4), lambda i, j: B[i, j] - A[j, i], name="s")  # the same up to input names
    tr = pa.compute((4, 4), lambda i, j: A[j, i] - B[i, j], name="s")  # transposed reads: another stage
    ac = pa.compute((4, 4), lambda i, j: A[i, j] - C[j, i], name="s")  # an input of another shape
    assert stage_key(ab.op) == stage_key(ba.op)
    assert len({stage_key(ab.op), stage_key(tr.op), stage_key(ac.op)}) == 3


def test_stage_key_of_poly_stages_ignores_names():
    def grads(x, w, h, scale=2.0):
        X = pa.placeholder((8, 10), name=x)
        W = pa.placeholder((4, 10), name=w)
        Y = pa.ops.concatenate([pa.nn.relu(pa.ops.matmul(X, pa.ops.transpose(W))), X * scale], axis=1)
        H = pa.placeholder(Y.shape, name=h)
        return list(pa.differentiate(Y, [X, W], head=H))

    def keys(outs):
        ops = [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]
        return ops, sorted(stage_key(op) for op in ops)

    ops, k1 = keys(grads("X", "W", "H"))
    _, k2 = keys(grads("a", "b", "c"))
    assert k1 == k2
    assert any(hasattr(op, "statements") for op in ops)  # the simplifier's stages are keyed too
    assert keys(grads("X", "W", "H", scale=3.0))[1] != k1
    with pytest.raises(pa.PolyadError, match="no stage key"):
        stage_key(pa.placeholder((2,), name="P").op)


def test_workload_key_ignores_names_and_sees_graph_and_inputs():
    X, W, T, R = _graph()
    X2, W2, T2, R2 = _graph(OTHER)
    assert workload_key([R], [X, W]) == workload_key(R2, [X2, W2])
    # not the inputs' order: the schedule does not depend on it, and a build given wrt + [H] missed the whole
    # schedule pa.show and `polyad tune FILE.py:FUNC` logged with the inputs in the order the graph reaches them
    assert workload_key([R], [X, W]) == workload_key([R], [W, X])
    assert workload_key([R], [X, W, pa.placeholder((3,), name="U")]) == workload_key([R], [pa.placeholder((3,)), W, X])
    assert workload_key([R], [X, W]) != workload_key([T], [X, W])
    assert workload_key([R], [X, W]) != workload_key([R, T], [X, W])
    assert workload_key([R], [X, W]) != workload_key([R], [X, W, T])  # T fed as data: another graph
    assert workload_key([R], [X, W]) != workload_key(_graph(bias=0.5)[3], [X, W])


def test_workload_key_is_the_same_before_and_after_renaming():
    # pa.build looks a graph up in the tuning log before it renames repeated stage names (a warm build
    # never renames): that holds because renaming changes no key
    from polyad.schedule.graph import uniquely_named

    X, W, T, R = _graph(("X", "W", "k", "S", "S"))
    renamed = uniquely_named([R])
    assert [op.name for op in walk_ops(renamed) if not isinstance(op, PlaceholderOp)] == ["S", "S_1"]
    assert workload_key(renamed, [X, W]) == workload_key([R], [X, W])


def test_config_key_is_the_decisions_not_the_name():
    a = Schedule("auto", stages={"T": StageSchedule(tile=(2, 4))}, notes=("why",))
    b = Schedule("evolve", stages={"T": StageSchedule(tile=(2, 4))})
    c = Schedule("auto", stages={"T": StageSchedule(tile=(2, 2))})
    assert config_key(a) == config_key(b) == config_key(b.to_dict()) != config_key(c)


# ---------------------------------------------------------------------------------------------------
# records and the log file
# ---------------------------------------------------------------------------------------------------
def _record(trial=0, time=1e-3, device=DEV, workload="w1", tile=(2, 4), stage_time=None, key="k1", error=None,
            **kw):
    s = Schedule("evolve", stages={"T": StageSchedule(tile=tile)})
    stages = {"T": (key, s.stages["T"], stage_time)}
    times = () if time is None else (time * 1.1, time, time * 0.9)
    return Record.of(s, workload, device, trial=trial, candidate="evolve", name="dense", stages=stages,
                     times=times, error=error, **kw)


def test_record_round_trip_and_schema():
    r = _record(trial=3, stage_time=2e-4)
    assert r.time == pytest.approx(1e-3) and r.error is None and r.usable and r.stale is None
    line = r.to_json()
    data = json.loads(line)
    assert list(data) == ["schema", "polyad", "workload", "name", "device", "config", "trial", "candidate",
                          "schedule", "stages", "time", "times", "error", "timestamp"]
    assert data["schema"] == SCHEMA == 1 and data["polyad"] == pa.__version__
    assert data["config"] == config_key(r.schedule_object())
    assert data["stages"]["T"] == {"key": "k1", "schedule": StageSchedule(tile=(2, 4)).to_dict(), "time": 2e-4}
    assert Record.from_dict(data) == r and Record.from_dict(data).to_json() == line
    failed = _record(time=None, error="BuildError: no")
    assert failed.time is None and not failed.usable


@pytest.mark.parametrize("field,value,msg", [
    ("trial", "3", "'trial'"), ("time", -1.0, "'time'"), ("times", 1.0, "'times'"), ("schedule", [], "'schedule'"),
    ("stages", {"T": {"key": 1}}, "stage 'T'"), ("device", None, "'device'"),
])
def test_record_fields_are_checked(field, value, msg):
    data = json.loads(_record().to_json())
    data[field] = value
    with pytest.raises(pa.TuningLogError, match=f"here: .*{msg}"):
        Record.from_dict(data, "here")
    del data[field]
    with pytest.raises(pa.TuningLogError, match="lacks the fields"):
        Record.from_dict(data, "here")


def test_append_then_read(tmp_path):
    path = tmp_path / "sub" / "log.jsonl"
    with TuningLog(path) as log:
        for i in range(3):
            log.append(_record(trial=i))
    assert log.closed
    with pytest.raises(pa.TuningLogError, match="closed"):
        log.append(_record())
    with TuningLog(path) as log:  # reopened: appends
        log.append(_record(trial=3))
    recs = read_log(path)
    assert [r.trial for r in recs] == [0, 1, 2, 3]
    assert recs[2].source == str(path) and recs[2].line == 3
    assert path.read_text().count("\n") == 4


def test_torn_last_line_is_skipped_with_a_warning_and_the_next_record_starts_a_line(tmp_path):
    path = tmp_path / "log.jsonl"
    with TuningLog(path) as log:
        log.append(_record(trial=0))
        log.append(_record(trial=1))
    full = path.read_bytes()
    path.write_bytes(full[: len(full) - 40])  # a crash in the middle of the second write
    with pytest.warns(RuntimeWarning, match="log.jsonl.*line 2.*torn"):
        assert [r.trial for r in read_log(path)] == [0]
    with TuningLog(path) as log:  # resumed: the torn line stays, the record gets a line of its own
        log.append(_record(trial=2))
    with pytest.warns(RuntimeWarning, match="line 2.*torn"):
        assert [r.trial for r in read_log(path)] == [0, 2]


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "log.jsonl"
    good = _record().to_json()
    path.write_text("\n".join([good, "this is not json", good, ""]))
    with pytest.raises(pa.TuningLogError, match=r"log\.jsonl.*line 2.*not JSON"):
        read_log(path)
    with pytest.warns(RuntimeWarning, match=r"log\.jsonl.*line 2.*skipped"):
        assert len(read_log(path, strict=False)) == 2
    path.write_text("\n".join([good, "[" * 100000 + "]" * 100000, good, ""]))  # a RecursionError from json
    with pytest.raises(pa.TuningLogError, match=r"line 2: nested deeper than any record"):
        read_log(path)
    with pytest.warns(RuntimeWarning, match=r"line 2: nested deeper than any record; the line is skipped"):
        assert len(read_log(path, strict=False)) == 2
    data = json.loads(good)
    del data["config"]
    path.write_text("\n".join([good, good, json.dumps(data), ""]))
    with pytest.raises(pa.TuningLogError, match=r"line 3.*lacks the fields \['config'\]"):
        read_log(path)
    path.write_text(good + "\n[1, 2]\n")
    with pytest.raises(pa.TuningLogError, match=r"line 2.*JSON object"):
        read_log(path)
    with pytest.raises(pa.TuningLogError, match="nope.jsonl.*does not exist"):
        read_log(tmp_path / "nope.jsonl")


def test_other_versions_are_kept_flagged_and_ignored_by_the_database(tmp_path):
    path = tmp_path / "log.jsonl"
    old = json.loads(_record(trial=1, time=1e-4).to_json())
    old["polyad"] = "0.0.1"
    future = {"schema": 2, "polyad": "9.0", "workload": "w1", "device": DEV, "something": "new"}
    with TuningLog(path) as log:
        log.append(_record(trial=0, time=1e-3))
        log.append(Record.from_dict(old))
        log.append(Record.from_dict(future))
    recs = read_log(path)
    assert [r.stale for r in recs] == [
        None, f"polyad 0.0.1 (this is {pa.__version__})", "schema 2 (this polyad reads 1)"]
    assert json.loads(recs[2].to_json()) == future  # kept as written
    db = TuningDatabase.from_logs(path)
    assert len(db) == 1 and db.ignored == 2
    assert db.best_schedule("w1", DEV)[1].trial == 0  # not the faster record of 0.0.1
    assert measured(recs, "w1", DEV) == {recs[0].config}


# ---------------------------------------------------------------------------------------------------
# the database
# ---------------------------------------------------------------------------------------------------
def _log(tmp_path, records, name="log.jsonl"):
    path = tmp_path / name
    with TuningLog(path) as log:
        for r in records:
            log.append(r)
    return path


def test_best_schedule_and_best_stage_pick_the_fastest_usable_record_of_the_device(tmp_path):
    path = _log(tmp_path, [
        _record(trial=0, time=3e-3, tile=(1, 1), stage_time=2e-3),
        _record(trial=1, time=2e-3, tile=(2, 4), stage_time=1e-3),
        _record(trial=2, time=None, tile=(4, 4), error="BuildError: too big"),
        _record(trial=3, time=1e-4, tile=(8, 8), stage_time=1e-5, device=GPU),
        _record(trial=4, time=2.5e-3, tile=(3, 1), stage_time=2.13e-4, workload="w2"),  # same stage, other graph
    ])
    db = TuningDatabase.from_logs([path])
    s, rec = db.best_schedule("w1", DEV)
    assert rec.trial == 1 and s == rec.schedule_object() and s.stages["T"].tile == (2, 4)
    assert db.best_schedule("w1", GPU)[1].trial == 3
    assert db.best_schedule("w3", DEV) is None
    ss, where = db.best_stage("k1", DEV)
    assert ss == StageSchedule(tile=(3, 1)) and where == "log.jsonl, trial 4, 0.213 ms"
    assert db.best_stage("k1", GPU)[0].tile == (8, 8)
    assert db.best_stage("k1", "other") is None and db.best_stage("nope", DEV) is None
    assert rec.where() == "log.jsonl, trial 1, 2 ms"
    # with auto's runs beside its own, the ratio the tuner decided by (a raw time is the machine's mode then)
    paired = _record(trial=5, time=2e-3, ref_times=(2.5e-3, 2.5e-3, 2.5e-3))
    assert paired.where() == "a record, trial 5, 2 ms (0.80 of auto's time beside it)"
    d = db.digest()
    assert d == TuningDatabase.from_logs(path).digest()
    with TuningLog(path) as log:
        log.append(_record(trial=5, time=1e-3))
    assert TuningDatabase.from_logs(path).digest() != d


def test_the_digest_of_a_log_is_that_of_its_records_and_sees_an_edited_line(tmp_path):
    # read from a log, a record is digested as its line: the same digest as the records made here
    records = [_record(trial=0, time=3e-3, tile=(1, 1)), _record(trial=1, time=2e-3, tile=(2, 4))]
    path = _log(tmp_path, records)
    assert [r.text for r in read_log(path)] == [r.to_json() for r in records]
    d = TuningDatabase.from_logs(path).digest()
    assert d == TuningDatabase(records).digest()
    text = open(path).read()
    with open(path, "w") as f:  # an edit that keeps the config key: the schedule is another
        f.write(text.replace('"tile": [2, 4]', '"tile": [2, 2]'))
    assert TuningDatabase.from_logs(path).records[1].schedule["stages"]["T"]["tile"] == [2, 2]
    assert TuningDatabase.from_logs(path).digest() != d


def test_measured_lists_the_configurations_to_skip_on_resume(tmp_path):
    path = _log(tmp_path, [_record(trial=0, tile=(1, 1)), _record(trial=1, tile=(2, 4), time=None, error="x"),
                           _record(trial=2, tile=(4, 4), device=GPU), _record(trial=3, tile=(8, 8), workload="w2")])
    recs = read_log(path)
    want = {config_key(Schedule("any", stages={"T": StageSchedule(tile=t)})) for t in [(1, 1), (2, 4)]}
    assert measured(recs, "w1", DEV) == want


def test_lookup_for_finds_a_stage_by_structure(tmp_path):
    X, W, T, R = _graph()
    X2, W2, T2, R2 = _graph(OTHER)
    s = Schedule("evolve", stages={"T": StageSchedule(tile=(2, 5), unroll=4)})
    entries = stage_entries(walk_ops([R]), s, times={"T": 5e-6})
    assert set(entries) == {"T", "R"} and entries["R"]["time"] is None
    path = _log(tmp_path, [Record.of(s, workload_key(R, [X, W]), DEV, stages=entries, times=[1e-5])])
    look = TuningDatabase.from_logs(path).lookup_for(DEV)
    ss, where = look(T2.op)  # the stage of another graph, named otherwise
    assert ss == StageSchedule(tile=(2, 5), unroll=4) and "trial 0" in where
    assert look(T2.op) is look(T2.op)  # memoised
    assert look(R2.op) is None  # recorded without its own time
    assert look(_graph(n=7)[2].op) is None  # an unknown stage
    assert look(X.op) is None  # not a stage at all
    assert TuningDatabase.from_logs(path).lookup_for(GPU)(T.op) is None


# ---------------------------------------------------------------------------------------------------
# the active database and pa.tuned
# ---------------------------------------------------------------------------------------------------
def test_tuning_log_context_and_environment_select_the_active_database(tmp_path, monkeypatch):
    monkeypatch.delenv("POLYAD_TUNING_LOG", raising=False)
    a = _log(tmp_path, [_record(trial=0)], "a.jsonl")
    b = _log(tmp_path, [_record(trial=1), _record(trial=2, time=1e-5)], "b.jsonl")
    assert active_database() is None
    monkeypatch.setenv("POLYAD_TUNING_LOG", str(a))
    env_db = active_database()
    assert len(env_db) == 1 and active_database() is env_db  # cached while the file is unchanged
    with tuning_log(b) as db:
        assert active_database() is db and db.best_schedule("w1", DEV)[1].trial == 2
        with tuning_log([a, b]):
            assert len(active_database()) == 3
        assert active_database() is db
    assert active_database() is env_db
    with TuningLog(a) as log:  # the log grows: read again
        log.append(_record(trial=5, time=1e-7))
        os.utime(a, ns=(os.stat(a).st_mtime_ns + 10**9,) * 2)
    assert active_database().best_schedule("w1", DEV)[1].trial == 5
    monkeypatch.setenv("POLYAD_TUNING_LOG", str(tmp_path / "missing.jsonl"))
    with pytest.warns(RuntimeWarning, match="POLYAD_TUNING_LOG.*missing.jsonl"):
        assert active_database() is None
    with pytest.raises(pa.TuningLogError, match="missing.jsonl"):
        with tuning_log(tmp_path / "missing.jsonl"):
            pass


def test_tuned_names_its_logs_and_reads_them_when_asked(tmp_path):
    path = _log(tmp_path, [_record(trial=0), _record(trial=1, time=1e-5)])
    t = tuned(str(path))
    assert isinstance(t, Tuned) and t == Tuned((str(path),))
    assert repr(t) == f"pa.tuned({str(path)!r})"
    assert json.loads(t.to_json()) == {"tuned": [str(path)], "strict": False}
    assert t.database().best_schedule("w1", DEV)[1].trial == 1
    with pytest.raises(pa.TuningLogError, match="does not exist"):
        tuned(tmp_path / "x.jsonl").database()


def test_public_callables_are_documented():
    from tests.docs.test_docstrings import problems

    for name in tuning.__all__:
        obj = getattr(tuning, name)
        if callable(obj):
            assert not problems(obj), (name, problems(obj))
    for meth in ("of", "from_dict", "to_json", "to_dict", "schedule_object", "where"):
        assert not problems(getattr(Record, meth)), meth
    for meth in ("from_logs", "best_schedule", "best_stage", "lookup_for", "digest"):
        assert not problems(getattr(TuningDatabase, meth)), meth
    assert not problems(TuningLog.append) and not problems(Tuned.database)
    assert "schema" in tuning.__doc__ and '"stages"' in tuning.__doc__


def test_a_configuration_counts_with_its_median_and_the_tuners_check_decides():
    """One lucky run does not pick a configuration; where the tuner re-measured its best against auto side by
    side (candidate "confirm"), those records decide."""
    from polyad.schedule import Schedule, StageSchedule
    from polyad.schedule.tuning import Record, TuningDatabase

    a = Schedule("auto", stages={"S": StageSchedule(tile=(4,))})
    b = Schedule("tuned", stages={"S": StageSchedule(tile=(8,))})
    c = Schedule("tuned", stages={"S": StageSchedule(tile=(16,))})

    def rec(s, t, cand="evolutionary"):
        return Record.of(s, "w", "dev", candidate=cand, times=[t])

    db = TuningDatabase([rec(a, 3.0), rec(b, 1.0), rec(b, 5.0), rec(b, 6.0), rec(c, 2.0)])
    assert db.best_schedule("w", "dev")[0].stages == c.stages  # b's median is 5
    db = TuningDatabase([rec(a, 3.0), rec(b, 1.0), rec(c, 0.5), rec(a, 2.0, "confirm"), rec(b, 1.5, "confirm")])
    assert db.best_schedule("w", "dev")[0].stages == b.stages  # c was never checked against auto
    db = TuningDatabase([rec(b, 1.0), rec(a, 2.0, "confirm"), rec(b, 2.5, "confirm")])
    assert db.best_schedule("w", "dev")[0].stages == a.stages  # the check found auto faster


def test_the_tuners_held_out_rounds_can_turn_its_checks_choice_down():
    """After its check, the tuner measures the choice and auto again (candidate "holdout"): where the choice is not
    faster there, the database applies auto, as the tuner's result does; where it is, the check's choice.  Holdout
    records do not count in the check's medians, and records of another choice than the check's do not veto it."""
    from polyad.schedule import Schedule, StageSchedule
    from polyad.schedule.tuning import Record, TuningDatabase, holdout_veto

    a = Schedule("auto", stages={"S": StageSchedule(tile=(4,))})
    b = Schedule("tuned", stages={"S": StageSchedule(tile=(8,))})
    c = Schedule("tuned", stages={"S": StageSchedule(tile=(16,))})

    def rec(s, t, cand):
        return Record.of(s, "w", "dev", candidate=cand, times=[t, t], ref_times=[2.0, 2.0])

    check = [rec(a, 2.0, "auto"), rec(a, 2.0, "confirm"), rec(b, 1.6, "confirm"), rec(c, 1.8, "confirm")]
    assert TuningDatabase(check).best_schedule("w", "dev")[0].stages == b.stages
    slower = [rec(a, 2.0, "holdout"), rec(b, 2.1, "holdout")] * 3
    assert TuningDatabase(check + slower).best_schedule("w", "dev")[0].stages == a.stages
    faster = [rec(a, 2.0, "holdout"), rec(b, 1.9, "holdout")] * 3
    assert TuningDatabase(check + faster).best_schedule("w", "dev")[0].stages == b.stages
    other = [rec(a, 2.0, "holdout"), rec(c, 3.0, "holdout")] * 3  # c was not the check's choice
    assert TuningDatabase(check + other).best_schedule("w", "dev")[0].stages == b.stages
    broke = Record.of(b, "w", "dev", candidate="holdout", error="BuildError: it failed once")
    assert TuningDatabase(check + faster + [broke]).best_schedule("w", "dev")[0].stages == a.stages  # as the tuner
    assert holdout_veto(1.0, 1.0) and holdout_veto(1.01, 1.0) and not holdout_veto(0.99, 1.0)


def test_the_ratio_to_auto_is_the_median_of_each_run_over_the_auto_run_beside_it():
    """The machine switches between two speeds 2x apart from one run to the next.  Every run of this candidate
    takes what the auto run beside it takes, except two that ran in the fast mode beside auto runs in the slow
    one: its runs' ratios say 1.0, the median over the median (1 / 2) would say it is twice as fast."""
    from polyad.schedule import Schedule, StageSchedule
    from polyad.schedule.tuning import Record, relative_to
    from polyad.tuner.measure import Trial

    times, ref = (1.0, 1.0, 1.0, 2.0, 2.0), (2.0, 2.0, 1.0, 2.0, 2.0)
    assert relative_to(times, ref) == 1.0
    r = Record.of(Schedule("tuned", stages={"S": StageSchedule(tile=(8,))}), "w", "dev", times=times, ref_times=ref)
    assert r.time == 1.0 and r.relative == 1.0
    assert Trial(1.0, times, ref_times=ref).relative == 1.0
    assert relative_to(times, ()) is None and relative_to((), ref) is None and relative_to(times, (0.0,) * 5) is None
    assert relative_to((3.0, 1.0, 2.0), (4.0,)) == 0.5  # counts that do not pair: the median over the median


def test_records_with_the_auto_runs_beside_them_rank_by_the_ratio():
    """``ref_times`` (auto's runs, each timed beside one of ``times``) is optional in the file; where every
    record of a workload has it, the database ranks by time over it: b ran in a slow moment (auto took 4 beside
    it) and is the fastest, though c's raw time is lower."""
    from polyad.schedule import Schedule, StageSchedule
    from polyad.schedule.tuning import Record, TuningDatabase

    a = Schedule("auto", stages={"S": StageSchedule(tile=(4,))})
    b = Schedule("tuned", stages={"S": StageSchedule(tile=(8,))})
    c = Schedule("tuned", stages={"S": StageSchedule(tile=(16,))})

    def rec(s, t, ref, cand="evolutionary"):
        return Record.of(s, "w", "dev", candidate=cand, times=[t, t], ref_times=[ref, ref] if ref else ())

    r = rec(b, 3.0, 4.0)
    data = json.loads(r.to_json())
    assert data["ref_times"] == [4.0, 4.0] and r.relative == 0.75
    assert Record.from_dict(data) == r
    assert "ref_times" not in json.loads(rec(b, 3.0, None).to_json()) and rec(b, 3.0, None).relative is None
    data["ref_times"] = 4.0
    with pytest.raises(pa.TuningLogError, match="here: 'ref_times' must be a list"):
        Record.from_dict(data, "here")
    data["ref_times"] = [-1.0]
    with pytest.raises(pa.TuningLogError, match="here: 'ref_times'"):
        Record.from_dict(data, "here")
    db = TuningDatabase([rec(a, 2.0, 2.0), rec(b, 3.0, 4.0), rec(c, 1.8, 2.0)])
    assert db.best_schedule("w", "dev")[0].stages == b.stages  # 0.75 against 0.9 and 1.0
    db = TuningDatabase([rec(a, 2.0, 2.0), rec(b, 3.0, 4.0), rec(c, 1.8, None)])
    assert db.best_schedule("w", "dev")[0].stages == c.stages  # one record unpaired: raw times, as before
    db = TuningDatabase([rec(a, 2.0, 2.0, "confirm"), rec(b, 2.2, 2.0, "confirm"), rec(c, 1.0, 2.0)])
    assert db.best_schedule("w", "dev")[0].stages == a.stages  # the check decides, by ratio: auto


@pytest.mark.parametrize("log", [None, 3, [None], []])
def test_tuned_without_a_path_is_a_tuning_log_error(log):
    """``pa.tuned(None)`` raised iterating None."""
    with pytest.raises(pa.TuningLogError, match="a tuning log is a path or a list of paths|no tuning log given"):
        pa.tuned(log)


def test_the_latest_check_decides_and_a_check_of_auto_alone_is_none():
    """A resumed run's check scored its candidates against its own auto runs: pooled with the first run's (auto
    slower then), it chose c, which neither run had chosen (the first chose b, the second auto).  Ctrl-C in the
    check's first round left auto's records alone: the log applied auto where ``pa.tune`` reported its search's
    fastest."""
    from polyad.schedule import Schedule, StageSchedule
    from polyad.schedule.tuning import Record, TuningDatabase

    a, b, c = (Schedule("s", stages={"S": StageSchedule(tile=(t,))}) for t in (4, 8, 16))

    def rec(s, t, cand="evolutionary"):
        return Record.of(s, "w", "dev", candidate=cand, times=[t])

    first = [rec(a, 2.2, "auto"), rec(b, 2.0), rec(b, 2.1, "race")] + [rec(a, 2.2, "confirm")] * 3 \
        + [rec(b, 2.1, "confirm")] * 3
    assert TuningDatabase(first).best_schedule("w", "dev")[0].stages == b.stages
    second = [rec(c, 1.7), rec(c, 1.75, "race")] + [rec(a, 1.8, "confirm")] * 2 + [rec(c, 1.78, "confirm")] * 3
    assert TuningDatabase(first + second).best_schedule("w", "dev")[0].stages == a.stages  # 1.78 > 0.98 * 1.8
    interrupted = [rec(a, 2.2, "auto"), rec(b, 1.5), rec(c, 1.9), rec(a, 2.1, "confirm")]
    assert TuningDatabase(interrupted).best_schedule("w", "dev")[0].stages == b.stages
