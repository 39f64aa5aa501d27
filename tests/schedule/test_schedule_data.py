"""Schedules are data: JSON round trips, validation errors name the stage, hand-written schedules build."""

import json

import numpy as np
import pytest

import polyad as pa
from polyad.schedule import Schedule, StageSchedule, prepare, validate
from polyad.schedule.graph import uniquely_named


def _graph():
    X = pa.placeholder((6, 12), name="X")
    W = pa.placeholder((5, 12), name="W")
    k = pa.reduce_axis((0, 12), name="k")
    T = pa.compute((6, 5), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    R = pa.compute((6, 5), lambda i, j: pa.max(T[i, j], 0.0), name="R")
    S = pa.compute((6, 5), lambda i, j: R[i, j] * 2.0 + 1.0, name="S")
    return X, W, T, R, S


def _full():
    return Schedule(
        "mine",
        stages={"T": StageSchedule(tile=(2, 4), vectorize=4, unroll=2), "S": StageSchedule(grid_dims=1, local_size=(8,))},
        default=StageSchedule(grid_dims=2),
        inline=frozenset({"R"}),
        rfactor={"T": 4},
        notes=("by hand",),
    )


def test_json_round_trip_is_stable_and_versioned():
    s = _full()
    text = s.to_json()
    data = json.loads(text)
    assert data["format"] == "polyad-schedule" and data["version"] == 1
    back = Schedule.from_json(text)
    assert back == s and back.to_json() == text
    assert back.stages["T"].tile == (2, 4) and back.stages["S"].local_size == (8,)
    # equal schedules give the same text whatever the insertion order
    s2 = Schedule("mine", stages=dict(reversed(list(s.stages.items()))), default=s.default,
                  inline=s.inline, rfactor=s.rfactor, notes=s.notes)
    assert s2.to_json() == text
    assert Schedule.from_json(Schedule().to_json()) == Schedule()


@pytest.mark.parametrize("text, msg", [
    ("not json", "does not parse"),
    ('{"format": "other", "version": 1}', "not a polyad schedule"),
    ('{"format": "polyad-schedule", "version": 99}', "version 99"),
    ('{"format": "polyad-schedule", "version": 1, "colour": 1}', "unknown fields"),
    ('{"format": "polyad-schedule", "version": 1, "stages": {"T": {"tile": [0, 2]}}}', "stage 'T'"),
    ('{"format": "polyad-schedule", "version": 1, "stages": {"T": {"vectorise": 4}}}', "stage 'T'"),
    ('{"format": "polyad-schedule", "version": 1, "rfactor": {"T": 1}}', "'T'"),
])
def test_bad_json_raises_schedule_error(text, msg):
    with pytest.raises(pa.ScheduleError, match=msg):
        Schedule.from_json(text)


@pytest.mark.parametrize("kw, msg", [
    ({"tile": 3}, "tile must be a list of positive integers, got 3"),
    ({"tile": "ab"}, "tile must be a list"),
    ({"local_size": 8}, "local_size must be a list of positive integers, got 8"),
    ({"tile": (True, 4)}, "tile sizes must be positive integers"),
    ({"unroll": True}, "unroll must be a positive integer"),
    ({"vectorize": True}, "vectorize must be 1, 2, 4, 8 or 16"),
])
def test_a_stage_schedule_of_the_wrong_type_is_a_schedule_error(kw, msg):
    """``tile=3`` raised ``tuple()``'s TypeError; a bool was taken for 1.  numpy's integers are integers."""
    with pytest.raises(pa.ScheduleError, match=msg):
        StageSchedule(**kw)
    ss = StageSchedule(tile=(np.int64(2), 4), vectorize=np.int32(4), unroll=np.int64(2))
    assert ss == StageSchedule(tile=(2, 4), vectorize=4, unroll=2)
    assert StageSchedule.from_dict(json.loads(json.dumps(ss.to_dict()))) == ss


@pytest.mark.parametrize("sched, msg", [
    (Schedule(stages={"Q": StageSchedule()}), "stage 'Q'"),
    (Schedule(stages={"T": StageSchedule(tile=(2,))}), r"stage 'T'.*1 sizes.*2 output"),
    (Schedule(stages={"T": StageSchedule(tile=(2, 6), vectorize=4)}), r"stage 'T'.*vectorize 4.*6"),
    (Schedule(stages={"T": StageSchedule(vectorize=4)}), r"stage 'T'.*vectorize 4"),
    (Schedule(inline=frozenset({"T"})), r"stage 'T'.*reduction"),
    (Schedule(inline=frozenset({"S"})), r"stage 'S'.*output"),
    (Schedule(inline=frozenset({"nope"})), r"stage 'nope'"),
    (Schedule(rfactor={"R": 2}), r"stage 'R' is not a reduction"),
    (Schedule(rfactor={"T": 13}), r"stage 'T'.*extent 12; the factor 13"),
    (Schedule(inline=frozenset({"R"}), stages={"R": StageSchedule(unroll=2)}), r"stage 'R' is inlined"),
    (Schedule(default=StageSchedule(tile=(1, 1, 1))), r"stage 'T'.*3 sizes"),
])
def test_bad_schedules_name_the_stage(sched, msg):
    *_, S = _graph()
    with pytest.raises(pa.ScheduleError, match=msg):
        prepare([S], sched)


def test_unknown_schedule_name():
    *_, S = _graph()
    with pytest.raises(pa.ScheduleError, match="unknown schedule 'fast'"):
        prepare([S], "fast")


def test_describe_lists_every_decision():
    text = _full().describe()
    for piece in ("schedule 'mine'", "inline (1): R", "rfactor T by 4", "stage T: tile 2x4, vectorize 4, unroll 2",
                  "stage S: grid_dims 1, local_size 8", "default: grid_dims 2", "by hand"):
        assert piece in text, piece


def test_hand_written_schedule_builds_and_matches_evaluate():
    X, W, T, R, S = _graph()
    sched = Schedule.from_json(Schedule(
        "hand", stages={"T": StageSchedule(tile=(2, 4), vectorize=4, unroll=2), "T_rf": StageSchedule(unroll=3)},
        inline=frozenset({"R"}), rfactor={"T": 5}).to_json())
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 12), dtype=np.float32), rng.standard_normal((5, 12), dtype=np.float32)
    mod = pa.build([S, T], [X, W], schedule=sched)
    s, t = mod(x, w)
    rs, rt = pa.evaluate([S, T], {X: x, W: w})
    np.testing.assert_allclose(s, rs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t, rt, rtol=1e-5, atol=1e-5)
    # R was inlined into S; T was split into T_rf and T: three kernels
    assert [k.name for k in mod.program.kernels] == ["T_rf", "T", "S"]


def test_duplicate_stage_names_are_keyed_as_show_prints_them():
    X = pa.placeholder((4,), name="X")
    A = pa.compute((4,), lambda i: X[i] + 1.0, name="A")
    B = pa.compute((4,), lambda i: A[i] * 2.0, name="A")
    outs = uniquely_named([B])
    assert sorted(op.name for op in pa.te.tensor.walk_ops(outs)) == ["A", "A_1", "X"]
    assert "compute A_1" in pa.show(outs) and "compute A_1" in pa.show([B])
    validate(outs, Schedule(inline=frozenset({"A"})))
    g, _ = prepare([B], Schedule(inline=frozenset({"A"})))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(pa.evaluate(g, {X: x})[0], (x + 1) * 2)


def test_show_prints_the_decisions_and_the_scheduled_graph():
    X, W, T, R, S = _graph()
    from polyad.schedule import show

    text = show([S])
    assert text.startswith("schedule 'auto'") and "inline (1): R" in text
    assert "compute S" in text and "compute R" not in text  # R was inlined into S
    assert "compute R" in show([S], "naive")


def test_pa_show_with_a_schedule_prints_the_decisions_and_the_scheduled_graph():
    X = pa.placeholder((8, 16), name="X")
    A = pa.compute((8, 16), lambda i, j: X[i, j] * 2.0, name="A")
    k = pa.reduce_axis((0, 16), "k")
    B = pa.compute((8,), lambda i: pa.sum(A[i, k], axis=k), name="B")
    text = pa.show(B, schedule="auto")
    assert text.startswith("schedule 'auto'") and "inline (1): A" in text  # the decisions, with reasons
    assert "compute A" not in text and "B[i] = sum(X[i, k]*2.0" in text  # the graph codegen gets
    assert pa.show(B).count("compute") == 2  # without a schedule: the graph as written


def test_pa_show_with_a_schedule_works_right_after_import_polyad():
    import subprocess
    import sys

    code = (
        "import polyad as pa\n"
        "X = pa.placeholder((4,), name='X')\n"
        "Y = pa.compute((4,), lambda i: X[i] + 1.0, name='Y')\n"
        "print(pa.show(Y, schedule='naive'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "schedule 'naive'" in r.stdout


def test_rfactor_with_axis_and_form_round_trips_and_builds():
    """``RFactor(factor, axis, interleave)``: the axis by name; JSON keeps a bare factor for the default form."""
    from polyad.schedule import RFactor

    X, W, T, R, S = _graph()
    s = Schedule("ax", rfactor={"T": RFactor(5, "k", True)}, stages={"T_rf": StageSchedule(tile=(1, 1, 5))})
    data = json.loads(s.to_json())
    assert data["rfactor"] == {"T": {"factor": 5, "axis": "k", "interleave": True}}
    assert Schedule.from_json(s.to_json()) == s
    assert json.loads(Schedule(rfactor={"T": RFactor(4)}).to_json())["rfactor"] == {"T": 4}
    assert "rfactor T by 5 over k, interleaved" in s.describe()
    g, _ = prepare([T], s)
    # 12 = 2*5 + 2: interleaved partials T_rf[i, j, k_i], the last two lanes guarded in the statement's domain
    assert g[0].op.input_tensors[0].shape == (6, 5, 5)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((6, 12), dtype=np.float32), rng.standard_normal((5, 12), dtype=np.float32)
    np.testing.assert_allclose(pa.build(T, [X, W], schedule=s)(x, w), x @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec, msg", [
    ({"factor": 1}, "factor >= 2"),
    ({"factor": 4, "axis": 3}, "axis"),
    ({"factor": 4, "interleave": "yes"}, "interleave"),
    ({"factor": 4, "colour": 1}, "expected"),
    ({"axis": "k"}, "expected"),
])
def test_bad_rfactor_specs_name_the_stage(spec, msg):
    with pytest.raises(pa.ScheduleError, match=f"'T'.*{msg}"):
        Schedule(rfactor={"T": spec})


def test_rfactor_over_an_unknown_axis_names_it():
    from polyad.schedule import RFactor

    *_, S = _graph()
    with pytest.raises(pa.ScheduleError, match=r"stage 'T' has no reduction axis 'q'"):
        prepare([S], Schedule(rfactor={"T": RFactor(4, "q")}))


def test_pa_show_with_a_schedule_shows_the_graph_pa_build_generates(opencl):
    """A where= clipped sum is a polyhedral stage in the graph builds generate (lift_where), which a schedule may
    pad; pa.show applied that schedule to the graph as written, where the stage is a compute: a ScheduleError."""
    n = 12
    X = pa.placeholder((n,), name="X")
    W = pa.placeholder((3,), name="W")
    r = pa.reduce_axis((0, 3), "r")
    T = pa.compute((n,), lambda i: pa.sum(X[i + r - 1] * W[r], axis=r, where=(i + r - 1 >= 0) & (i + r - 1 < n)),
                   name="T")
    s = Schedule(pad=frozenset({"T"}))
    text = pa.show(T, schedule=s)
    assert "pad_reads T" in text and "poly X_pad" in text and "T[i] = sum(X_pad[i + r]*W[r]" in text
    x, w = np.arange(n, dtype=np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(pa.build(T, [X, W], schedule=s)(x, w), pa.evaluate(T, {X: x, W: w}))
