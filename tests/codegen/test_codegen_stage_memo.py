"""The memos under a tuner's candidates: the graph decisions applied once per graph (``schedule.graph._decided``)
and each tiled stage's isl statements and schedule built once per stage, names and tiling (``tree._TILED``).

A candidate differs from its neighbours in a stage or three; both memos hand it the objects they built for an
earlier one.  What they hand out must be what building afresh gives: programs equal source for source with the
memos cleared, and every stage schedule checked on a hit as on a miss.  No OpenCL here: codegen alone.
"""

import random

import pytest

import polyad as pa
from polyad.codegen import generate, tree
from polyad.errors import ScheduleError
from polyad.schedule import DeviceModel, Schedule, StageSchedule, prepare
from polyad.schedule import graph as graph_mod
from polyad.tuner.configs import ConfigSpace
from polyad.tuner.measure import graph_context

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")


def _clear():
    graph_mod._decided.cache_clear()
    tree._TILED.clear()


def _program(outs, ins, sched):
    g, loop = prepare(outs, sched)
    return generate(g, ins, loop, wide=True)


@pytest.mark.parametrize("name", ["lenet_step", "conv2d_dilated"])
def test_programs_built_with_the_memos_equal_programs_built_afresh(name):
    from polyad.bench.tuning import TINY, backward_graph

    g = backward_graph(name, dict(TINY[name]))
    ctx = graph_context(g.outputs, g.inputs, ZEN5)
    space = ConfigSpace(ctx.outputs, ZEN5, ctx.auto, max_variants=4)
    rng = random.Random(3)
    configs = [space.auto_config()]
    for _ in range(7):  # neighbours of neighbours: same graph variant mostly, now and then another
        configs.append(space.mutate(configs[-1], rng, p_variant=0.25))
    _clear()
    warm = []
    for c in configs:
        try:
            warm.append((c, _program(ctx.outputs, ctx.inputs, space.schedule(c))))
        except pa.PolyadError:
            continue
    assert len(warm) >= 5 and len({c[0] for c, _ in warm}) >= 2
    assert len(tree._TILED._table) < sum(len(p.kernels) for _, p in warm)  # stages were taken, not built again
    for c, got in warm:
        _clear()
        fresh = _program(ctx.outputs, ctx.inputs, space.schedule(c))
        assert got.source == fresh.source, space.variants[c[0]].why
        assert [k.global_size for k in got.kernels] == [k.global_size for k in fresh.kernels]


def _graph():
    X = pa.placeholder((8, 12), name="X")
    P = pa.compute((8, 12), lambda i, k: pa.exp(X[i, k]), name="P")
    k = pa.reduce_axis((0, 12), name="k")
    A = pa.compute((8, 8), lambda i, j: pa.sum(P[i, k] * X[j, k], axis=k), name="A")
    return [A], [X]


def test_schedules_with_the_same_graph_decisions_share_the_transformed_graph():
    outs, _ = _graph()
    _clear()
    a, _ = prepare(outs, Schedule("a", stages={"A": StageSchedule(tile=(2, 4))}, rfactor={"A": 4}))
    b, _ = prepare(outs, Schedule("b", stages={"A": StageSchedule(tile=(4, 4), vectorize=4)}, rfactor={"A": 4}))
    c, _ = prepare(outs, Schedule("c", rfactor={"A": 3}))
    d, _ = prepare(outs, Schedule("d", rfactor={"A": 4}, inline=frozenset({"P"})))
    assert a[0].op is b[0].op  # the stage schedules do not change the graph
    assert c[0].op is not a[0].op and d[0].op is not a[0].op
    ops = {op.name for op in pa.te.tensor.walk_ops(d)}
    assert "P" not in ops and "A_rf" in ops


@pytest.mark.parametrize("bad, match", [
    (dict(stages={"A": StageSchedule(tile=(2, 2, 2))}), "tile .* has 3 sizes"),
    (dict(stages={"A_rf": StageSchedule(tile=(2, 2, 3), vectorize=2)}), "vectorize 2 does not divide"),
    (dict(stages={"P": StageSchedule(tile=(2, 4))}, inline=frozenset({"P"})), "'P' is inlined"),
    (dict(stages={"B": StageSchedule()}), "does not have"),
])
def test_a_remembered_graph_still_checks_every_stage_schedule(bad, match):
    """The same graph decisions as a schedule built before (a memo hit): its stage schedules are checked all the
    same, and the error names the stage."""
    outs, _ = _graph()
    decisions = dict(rfactor={"A": 4}, inline=bad.get("inline", frozenset()))
    _clear()
    prepare(outs, Schedule("good", **decisions))
    with pytest.raises(ScheduleError, match=match):
        prepare(outs, Schedule("bad", **dict(decisions, stages=bad["stages"])))


def test_the_tiled_stage_memo_keys_the_unrolling_mode(monkeypatch):
    """``tree.UNROLL_IN_PRINTER`` changes a tiled stage's schedule (a points mark, or isl's unroll option): a stage
    built in one mode is not handed out in the other."""
    outs, ins = _graph()
    sched = Schedule("s", stages={"A": StageSchedule(tile=(4, 4), vectorize=4)})
    _clear()
    printer = _program(outs, ins, sched)
    monkeypatch.setattr(tree, "UNROLL_IN_PRINTER", False)
    by_isl = _program(outs, ins, sched)
    _clear()
    assert by_isl.source == _program(outs, ins, sched).source
    monkeypatch.setattr(tree, "UNROLL_IN_PRINTER", True)
    assert printer.source == _program(outs, ins, sched).source


def test_a_stages_phased_statements_are_built_once_per_phase():
    """The phased statements are isl work every build of a candidate asked for again: the same objects for the
    same stage, statements and phase, other ones for another phase."""
    from polyad.codegen import phase
    from polyad.poly.stage import statements_of

    X = pa.placeholder((1, 2, 9, 9), name="X")
    W = pa.placeholder((2, 2, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=3)
    H = pa.placeholder(Y.shape, name="H")
    dX = pa.differentiate(Y, [X], H)[0]
    op, stmts = dX.op, statements_of(dX.op)
    a = phase.phase_statements(op, stmts, (1, 1, 3, 3))
    assert len(a) >= 9 and all(x is y for x, y in zip(a, phase.phase_statements(op, stmts, (1, 1, 3, 3))))
    b = phase.phase_statements(op, stmts, (1, 1, 3, 1))
    assert len(b) < len(a) and not {id(x) for x in b} & {id(x) for x in a}
