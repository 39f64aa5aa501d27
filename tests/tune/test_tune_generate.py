"""The tuner's code generation workers: the programs they send back are the ones generated here, and a worker that
dies, hangs or raises costs its candidate, not the run (nothing here compiles)."""

import dataclasses
import pathlib

import pytest

import polyad as pa
from polyad.codegen import generate as codegen
from polyad.schedule import DeviceModel, Schedule, StageSchedule, prepare
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import uniquely_named
from polyad.tuner.generate import GeneratorPool

ZEN5 = DeviceModel.load(pathlib.Path(__file__).resolve().parents[1] / "data" / "devices" / "zen5-former-constants.json")


def _graph():
    X = pa.placeholder((8, 12), name="X")
    W = pa.placeholder((6, 12), name="W")
    Y = pa.nn.softmax(pa.nn.dense(X, W))
    H = pa.placeholder(Y.shape, name="H")
    return uniquely_named(list(pa.differentiate(Y, [X, W], H))), [X, W, H]


def _schedules(outs):
    auto = auto_schedule(outs, device=ZEN5, renamed=True)
    stage = next(iter(prepare(outs, auto)[1].stages), None) or outs[0].op.name
    other = dataclasses.replace(auto, name="tuned", stages=dict(auto.stages, **{stage: StageSchedule(tile=(2, 2))}))
    return [auto, other, Schedule("naive")]


@pytest.fixture
def pool_and_graph():
    outs, ins = _graph()
    pool = GeneratorPool(outs, ins, wide=None, workers=2)
    yield pool, outs, ins
    pool.close()


def test_the_workers_programs_are_the_ones_generated_here(pool_and_graph):
    pool, outs, ins = pool_and_graph
    scheds = _schedules(outs)
    got = pool.programs(scheds, timeout=120)
    for s, p in zip(scheds, got):
        assert not isinstance(p, str), p
        g, loop = prepare(outs, s)
        want = codegen(g, ins, loop)
        assert p.source == want.source and p.tree is None
        assert [(k.name, k.stage_name, k.global_size, k.local_size, [t.name for t in k.args]) for k in p.kernels] == \
            [(k.name, k.stage_name, k.global_size, k.local_size, [t.name for t in k.args]) for k in want.kernels]
        assert all(any(t is i for i in ins) for k in p.kernels for t in k.args if t.name in ("X", "W", "H"))


def test_an_error_a_hang_and_a_dead_worker_cost_one_candidate_each(pool_and_graph):
    pool, outs, ins = pool_and_graph
    auto = _schedules(outs)[0]
    bad = Schedule("bad", stages={outs[0].op.name: StageSchedule(tile=(2, 2, 2, 2, 2))})
    got = pool.programs([bad, auto], timeout=120)
    assert isinstance(got[0], str) and got[0].startswith("ScheduleError") and outs[0].op.name in got[0]
    assert not isinstance(got[1], str)
    # a generation over its time limit is stopped (the worker with it), and the next request starts a fresh one
    got = pool.programs([auto, Schedule("naive")], timeout=1e-4)
    assert all(isinstance(p, str) and "did not finish" in p for p in got)
    # a worker killed between requests (as if isl had aborted it) is started again with the graph
    for w in pool._workers:
        if w.proc is not None:
            w.proc.kill()
            w.proc.wait()
    got = pool.programs([auto, Schedule("naive")], timeout=120)
    assert not any(isinstance(p, str) for p in got), got


def test_ctrl_c_while_generating_ends_the_workers(pool_and_graph, monkeypatch):
    """A KeyboardInterrupt while a batch is being generated reaches the caller (the tuner keeps its log and reports
    the best so far) and the workers are ended, not left to finish the batch."""
    from polyad.tuner import generate

    pool, outs, ins = pool_and_graph
    auto = _schedules(outs)[0]
    pool.programs([auto, auto], timeout=120)  # both workers started
    real = generate._Worker.program

    def interrupted(self, schedule_json, timeout):
        if '"naive"' in schedule_json:
            raise KeyboardInterrupt
        return real(self, schedule_json, timeout)

    monkeypatch.setattr(generate._Worker, "program", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pool.programs([Schedule("naive"), auto], timeout=120)
    assert all(w.proc is None for w in pool._workers)


def test_a_graph_too_deep_to_pickle_is_not_sent():
    """chain's backward is deeper than pickle's recursion limit: the pool says so (GraphNotSent, a PolyadError),
    and the tuner's measurer then generates code in its own process (tests/tune/test_tune_device.py)."""
    from polyad.tuner.generate import GraphNotSent

    X = pa.placeholder((4,), name="X")
    t = X
    for i in range(600):
        t = pa.compute((4,), lambda j, t=t: t[j] * 1.01 + 0.5, name=f"y{i}")
    with pytest.raises(GraphNotSent, match="cannot be sent"):
        GeneratorPool([t], [X], wide=None, workers=2)


def test_a_graph_too_deep_to_pickle_is_a_clear_error_for_dask():
    """Dask needs the graph on its workers: one that does not pickle is a PolyadError saying so, before anything
    is sent (it was a RecursionError from deep inside pickle)."""
    pytest.importorskip("distributed")
    from polyad.tuner.cluster import DaskMeasurer

    class FakeClient:
        def scheduler_info(self):
            return {"workers": {"tcp://w1": {}}}

        def submit(self, *a, **k):
            raise AssertionError("nothing should be sent")

    X = pa.placeholder((4,), name="X")
    t = X
    for i in range(600):
        t = pa.compute((4,), lambda j, t=t: t[j] * 1.01 + 0.5, name=f"y{i}")
    with pytest.raises(pa.PolyadError, match="cannot be sent to the Dask workers"):
        DaskMeasurer([t], [X], FakeClient())


@pytest.mark.parametrize("name", ["max_pool", "lenet_step"])
def test_the_workers_generate_a_workloads_candidates_as_here(name):
    """Polyhedral stages (isl sets, pickled to the workers) and a whole training step: the search's first
    candidates, generated by the workers and here, are the same programs."""
    import random

    from polyad.bench.tuning import TINY, backward_graph
    from polyad.tuner.configs import ConfigSpace
    from polyad.tuner.measure import graph_context
    from polyad.tuner.search import POLICIES

    g = backward_graph(name, dict(TINY.get(name, {})), seed=0)
    ctx = graph_context(g.outputs, g.inputs, ZEN5)
    space = ConfigSpace(ctx.outputs, ctx.model, ctx.auto)
    scheds = [space.schedule(c) for c in POLICIES["evolutionary"](space, random.Random(1), ZEN5).propose(4, set())]
    pool = GeneratorPool(ctx.outputs, ctx.inputs, wide=True, workers=2)
    try:
        got = pool.programs(scheds, timeout=120)
    finally:
        pool.close()
    for s, p in zip(scheds, got):
        assert not isinstance(p, str), p
        g2, loop = prepare(ctx.outputs, s)
        want = codegen(g2, ctx.inputs, loop, wide=True)
        assert p.source == want.source
        assert [[t.name for t in k.args] for k in p.kernels] == [[t.name for t in k.args] for k in want.kernels]


def test_a_worker_that_dies_mid_generation_costs_its_candidate():
    """A worker killed while it generates (as if isl aborted it: conv2d_3x3's dX in 1x2x6x8 scalar blocks, eight
    copies, takes seconds) answers its candidate as a crash naming the signal; the next batch starts it again."""
    import signal
    import threading
    import time

    from polyad.bench.tuning import backward_graph
    from polyad.te.graph import cut

    g = backward_graph("conv2d_3x3")
    outs, ins = cut(g.outputs, g.inputs)
    outs = uniquely_named(outs)
    slow = Schedule("slow", stages={"d_X_from_conv2d": StageSchedule(tile=(1, 2, 6, 8))})
    pool = GeneratorPool(outs, list(ins), wide=None, workers=1)
    try:
        assert not isinstance(pool.programs([Schedule("naive")], timeout=120)[0], str)  # started, graph loaded
        proc = pool._workers[0].proc

        def kill_soon():
            time.sleep(0.5)
            proc.send_signal(signal.SIGKILL)

        threading.Thread(target=kill_soon).start()
        [got] = pool.programs([slow], timeout=120)
        assert isinstance(got, str) and got.startswith("code generation crashed its process (SIGKILL)"), got
        assert not isinstance(pool.programs([Schedule("naive")], timeout=120)[0], str)
    finally:
        pool.close()


def test_processes_share_written_kernels_through_a_folder_and_skip_isl_for_them(tmp_path, monkeypatch):
    """Two ``Programs`` (two workers' memos) on one folder: the second takes every kernel the first wrote, prints
    the same program, and builds no isl AST for them (the AST is built when a kernel is printed).  A torn record
    is a miss, warned about as every polyad cache's: the kernel is written again, the same."""
    import importlib

    from polyad.te.memo import Recent
    from polyad.tuner.generate import Programs

    lower = importlib.import_module("polyad.codegen.lower")  # the module; the package's name is its function

    outs, ins = _graph()
    scheds = _schedules(outs)
    built = []
    node = lower._Ast.node.fget

    def counted(self):
        if self._node is None:
            built.append(1)
        return node(self)

    monkeypatch.setattr(lower._Ast, "node", property(counted))
    monkeypatch.setattr(lower, "_MEMO", Recent(256))
    first = [Programs(outs, ins, None, str(tmp_path))(s).source for s in scheds]
    assert built and len(list(tmp_path.glob("*.json"))) >= len(built)  # a file per kernel (kernels may share an AST)
    built.clear()
    monkeypatch.setattr(lower, "_MEMO", Recent(256))  # another process: nothing lowered here yet
    second = Programs(outs, ins, None, str(tmp_path))
    assert [second(s).source for s in scheds] == first and not built
    assert second.kernels.misses == 0
    for f in list(tmp_path.glob("*.json"))[:2]:
        f.write_text('{"source": "__kernel void tor')
    monkeypatch.setattr(lower, "_MEMO", Recent(256))
    third = Programs(outs, ins, None, str(tmp_path))
    with pytest.warns(RuntimeWarning, match="written kernel .* is malformed"):
        again = [third(s).source for s in scheds]
    assert again == first and len(built) >= 1 and third.kernels.misses >= 1
    assert all(f.read_text().endswith("}") for f in tmp_path.glob("*.json"))  # written whole again


def test_a_pools_workers_share_a_folder_that_closing_removes(pool_and_graph):
    pool, outs, ins = pool_and_graph
    folder = pathlib.Path(pool.kernel_dir)
    got = pool.programs(_schedules(outs), timeout=120)
    assert all(not isinstance(p, str) for p in got) and list(folder.glob("*.json"))
    pool.close()
    assert not folder.exists() and pool.kernel_dir is None
