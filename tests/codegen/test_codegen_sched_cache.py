"""The program cache: a known build skips scheduling and code generation; entries are keyed structurally."""

import glob
import os
import time

import numpy as np
import pytest

import polyad as pa
import polyad.codegen as codegen
from polyad.pipeline.programs import clear_memory, program_key
from polyad.schedule import Schedule, StageSchedule

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def graph(n=12, name="T"):
    """A fresh, structurally identical graph on every call (new Var/Tensor objects)."""
    X = pa.placeholder((n, 5), name="X")
    W = pa.placeholder((5, n), name="W")
    k = pa.reduce_axis((0, 5), name="k")
    T = pa.compute((n, n), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name=name)
    U = pa.compute((n, n), lambda i, j: pa.tanh(T[i, j]) + X[i, j % 5], name="U")
    return U, [X, W]


SCHED = Schedule("s", stages={"T": StageSchedule(tile=(2, 8), vectorize=4)})


def _no_generate(*a, **k):
    raise AssertionError("the program should have come from the cache")


def _run(mod, ins, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in ins]
    return mod(*arrays), arrays


def test_warm_build_skips_generation_and_is_fast(monkeypatch):
    U, ins = graph()
    cold = pa.build(U, ins, schedule=SCHED)
    U2, ins2 = graph()  # a new graph object, same structure
    monkeypatch.setattr(codegen, "generate", _no_generate)
    t0 = time.perf_counter()
    warm = pa.build(U2, ins2, schedule=SCHED)
    assert time.perf_counter() - t0 < 0.2
    assert warm.source == cold.source
    # a restored program keeps each kernel's stage name (the tuner times stages by it), not the operation
    assert [k.stage_name for k in warm.program.kernels] == [k.stage_name for k in cold.program.kernels]
    assert {k.stage_name for k in cold.program.kernels} <= {"T", "U"} and all(k.stage is None for k in warm.program.kernels)
    got, arrays = _run(warm, ins2)
    np.testing.assert_allclose(got, pa.evaluate(U2, dict(zip(ins2, arrays))), rtol=2e-5, atol=2e-5)


def test_disk_entry_serves_a_new_process(monkeypatch):
    U, ins = graph(n=9)
    pa.build(U, ins, schedule=SCHED)
    clear_memory()  # as if a new process: only the disk entry is left
    monkeypatch.setattr(codegen, "generate", _no_generate)
    U2, ins2 = graph(n=9)
    got, arrays = _run(pa.build(U2, ins2, schedule=SCHED), ins2)
    np.testing.assert_allclose(got, pa.evaluate(U2, dict(zip(ins2, arrays))), rtol=2e-5, atol=2e-5)


def test_corrupt_entry_is_regenerated_with_a_warning(monkeypatch, tmp_path):
    # a cache of its own: corrupting the session's would hand every later test of this worker a warning
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    U, ins = graph(n=7)
    key = program_key(U, ins, SCHED, "dev")
    pa.build(U, ins, schedule=SCHED)
    clear_memory()
    for path in glob.glob(os.path.join(os.environ["POLYAD_CACHE_DIR"], "programs", "*", "*.json")):
        with open(path, "w") as f:
            f.write("{ not json")
    with pytest.warns(RuntimeWarning, match="cached program .* is malformed"):
        mod = pa.build(U, ins, schedule=SCHED)
    got, arrays = _run(mod, ins)
    np.testing.assert_allclose(got, pa.evaluate(U, dict(zip(ins, arrays))), rtol=2e-5, atol=2e-5)
    assert key is not None


def test_key_separates_what_changes_the_program():
    U, ins = graph()
    base = program_key(U, ins, SCHED, "dev")
    assert base == program_key(*graph(), SCHED, "dev")  # structure, not object identity
    assert base != program_key(*graph(n=13), SCHED, "dev")  # shapes
    assert base != program_key(*graph(name="T2"), SCHED, "dev")  # stage names (schedules refer to them)
    assert base != program_key(U, ins, "naive", "dev")  # schedule
    assert base != program_key(U, ins, Schedule("s", stages={"T": StageSchedule(tile=(2, 8))}), "dev")
    assert base != program_key(U, ins, SCHED, "other device")
    assert base != program_key(U, ins[::-1], SCHED, "dev")  # input order
    assert base != program_key([U], ins, SCHED, "dev")  # a list of outputs returns a list


def _two_sums(shared):
    """Two stages summing over ``k``: one reduce-axis object for both, or two equal ones."""
    X = pa.placeholder((4, 5), name="X")
    k1 = pa.reduce_axis((0, 5), name="k")
    k2 = k1 if shared else pa.reduce_axis((0, 5), name="k")
    A = pa.compute((4,), lambda i: pa.sum(X[i, k1], axis=k1), name="A")
    B = pa.compute((4,), lambda i: pa.sum(X[i, k2] * A[i], axis=k2), name="B")
    return B, [X]


def test_key_tells_a_shared_variable_from_two_equal_ones():
    # stages are serialised one by one (and memoised); a variable is the one node kind that is not
    # hash-consed, so the key says which stages share one object, as a whole-graph serialisation did
    assert program_key(*_two_sums(True), SCHED, "dev") == program_key(*_two_sums(True), SCHED, "dev")
    assert program_key(*_two_sums(True), SCHED, "dev") != program_key(*_two_sums(False), SCHED, "dev")


def test_key_serialises_each_stage_once(monkeypatch):
    from polyad.pipeline import programs

    U, ins = graph()
    calls = []
    real = programs._OpText.op
    monkeypatch.setattr(programs._OpText, "op", lambda self, op: (calls.append(op.name), real(self, op))[1])
    first = program_key(U, ins, SCHED, "dev")
    assert sorted(calls) == ["T", "U"]
    assert program_key(U, ins, "naive", "dev") != first  # the same stages, another build
    assert sorted(calls) == ["T", "U"]


def test_warm_build_neither_renames_nor_generates(monkeypatch):
    # repeated stage names: a cold build renames every stage (U, U_1); a program cache hit needs no renaming
    X = pa.placeholder((6, 5), name="X")
    U1 = pa.compute((6, 5), lambda i, j: X[i, j] * 2, name="U")
    U2 = pa.compute((6, 5), lambda i, j: U1[i, j] + 1, name="U")
    cold = pa.build(U2, [X], schedule="auto")
    import polyad.pipeline as pipeline

    monkeypatch.setattr(pipeline, "build_graph", _no_generate)
    monkeypatch.setattr(codegen, "generate", _no_generate)
    warm = pa.build(U2, [X], schedule="auto")
    got, arrays = _run(warm, [X])
    np.testing.assert_allclose(got, arrays[0] * 2 + 1, rtol=1e-6)
    assert warm.source == cold.source
