"""The kernel memo (codegen.KernelMemo): a tuner's candidates share the kernels they did not change.

Every program written with a shared memo must equal, source for source and launch for launch, the program written
without one: across the candidates of a space (tiles, vectors, unrolls, phases, work-groups, graph variants) and
across graphs whose kernels print other names.  No OpenCL here: codegen alone.
"""

import random

import pytest

import polyad as pa
from polyad.codegen import KernelMemo, generate
from polyad.schedule import DeviceModel, Schedule, StageSchedule, prepare
from polyad.tuner.configs import ConfigSpace
from polyad.tuner.measure import graph_context

from codegen_switches import both_ways, program, same_numbers, unguarded, workload

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")
GPU = DeviceModel.load(_DEVICES / "gpu-former-constants.json")


def _launches(p):
    return [(k.name, k.global_size, k.local_size, [t.name for t in k.args], [t.name for t in k.written()],
             k.stage_name) for k in p.kernels]


@pytest.mark.parametrize("name, model", [("conv2d_3x3", ZEN5), ("conv2d_5x5_s3", ZEN5), ("conv2d_5x5_s3", GPU),
                                         ("softmax", ZEN5), ("softmax", GPU)],
                         ids=["conv2d_3x3-cpu", "conv2d_5x5_s3-cpu", "conv2d_5x5_s3-gpu", "softmax-cpu", "softmax-gpu"])
def test_programs_written_with_a_shared_memo_equal_fresh_ones(name, model):
    outs, ins = workload(name)
    ctx = graph_context(outs, ins, model)
    space = ConfigSpace(ctx.outputs, model, ctx.auto, max_variants=6)
    rng = random.Random(0)
    firsts = [space.auto_config()] + [space.random(rng) for _ in range(5)]
    # each followed by two neighbours (one or two stages' candidates changed, or the graph variant)
    configs = [(c, None) for c in firsts] + [(space.mutate(c, rng, p_variant=0.2), c) for c in firsts for _ in range(2)]
    configs.sort(key=lambda x: firsts.index(x[1] or x[0]))  # a neighbour right after its parent
    memo, n, near = KernelMemo(), 0, 0
    for c, parent in configs:
        sched = space.schedule(c)
        try:
            fresh = program(ctx.outputs, ctx.inputs, sched)
        except pa.PolyadError:
            continue  # a candidate that does not build: the tuner logs it; nothing to compare
        hits = memo.hits
        got = program(ctx.outputs, ctx.inputs, sched, memo)
        assert got.source == fresh.source, space.variants[c[0]].why
        assert _launches(got) == _launches(fresh)
        assert (got.wide_index, got.fp64) == (fresh.wide_index, fresh.fp64)
        n += 1
        if parent is not None and parent[0] == c[0]:  # same graph: all but the changed stages' kernels taken
            assert memo.hits - hits >= len(got.kernels) - 2 * max(1, sum(a != b for a, b in zip(c[1], parent[1])))
            near += 1
    assert n >= 10 and near >= 3


def _named(buffer):
    """A graph whose reduction stage's axis is ``j`` and one of whose buffers is named ``buffer``."""
    X = pa.placeholder((6, 8), name="X")
    k = pa.reduce_axis((0, 8), name="k")
    A = pa.compute((6, 6), lambda i, j: pa.sum(X[i, k] * X[j, k], axis=k), name="A")
    B = pa.compute((6, 6), lambda i, j: A[i, j] * 2.0, name=buffer)
    return [B], [X]


def test_a_kernel_that_prints_other_names_in_another_graph_is_written_again():
    """``A``'s kernel is the same stage in both graphs, but where a buffer is named ``j`` its variable ``j`` is
    renamed (C names are unique in a program): the memo must not serve one graph's text to the other."""
    sched = Schedule("s", stages={"A": StageSchedule(tile=(2, 2))})
    memo, sources = KernelMemo(), {}
    for name in ("B", "j", "B", "j"):
        outs, ins = _named(name)
        g, loop = prepare(outs, sched)
        got = sources[name] = generate(g, ins, loop, kernels=memo).source
        assert got == generate(g, ins, loop).source
    assert "j_1" in sources["j"] and "j_1" not in sources["B"]
    assert memo.misses == 4 and memo.hits == 4  # each graph's two kernels written once, then taken


def test_a_stage_whose_producer_is_inlined_in_another_graph_variant_is_written_again():
    """Inlining ``P`` into ``A`` changes ``A``'s body, not its loops (its isl schedule is the same text): the memo
    key has the body, so the inlined variant's kernel is written, not taken."""
    X = pa.placeholder((6, 8), name="X")
    P = pa.compute((6, 8), lambda i, k: pa.exp(X[i, k]), name="P")
    k = pa.reduce_axis((0, 8), name="k")
    A = pa.compute((6, 6), lambda i, j: pa.sum(P[i, k] * X[j, k], axis=k), name="A")
    stages = {"A": StageSchedule(tile=(2, 2))}
    memo = KernelMemo()
    for inline in ((), ("P",), (), ("P",)):
        sched = Schedule("s", stages=stages, inline=frozenset(inline))
        g, loop = prepare([A], sched)
        got = generate(g, [X], loop, kernels=memo).source
        assert got == generate(g, [X], loop).source
        assert ("exp(" in got.split("void A(")[1]) == bool(inline)
    assert memo.misses == 3 and memo.hits == 3  # P's kernel, A's twice (materialised, inlined); then all taken


@pytest.mark.parametrize("tile", [None, (2, 4)])
def test_kernels_of_the_same_names_and_loops_with_other_bodies_are_written_apart(tile):
    """Two graphs alike in every name, shape and loop, one constant apart: the key has the values exactly."""
    memo, texts = KernelMemo(), []
    for c in (2.0, 3.0, 2.0 + 2.0 ** -20):
        X = pa.placeholder((6, 8), name="X")
        A = pa.compute((6, 8), lambda i, j: X[i, j] * c, name="A")
        g, loop = prepare([A], Schedule("s", stages={"A": StageSchedule(tile=tile)} if tile else {}))
        texts.append(generate(g, [X], loop, kernels=memo).source)
        assert texts[-1] == generate(g, [X], loop).source
    assert len(set(texts)) == 3 and memo.hits == 0


@pytest.mark.parametrize("name, model", [("lenet_step", ZEN5), ("conv2d_3x3", GPU), ("max_pool", ZEN5),
                                         ("softmax", GPU)],
                         ids=["lenet_step-cpu", "conv2d_3x3-gpu", "max_pool-cpu", "softmax-gpu"])
def test_the_printer_unrolls_tiles_as_isl_does(name, model, monkeypatch, request):
    """Full tiles' point loops, and partial blocks' accumulators, are unrolled by the printer
    (``tree.UNROLL_IN_PRINTER``: isl's unrolling of them was most of its AST generation).  Over auto and its
    neighbours, each kernel must be the one isl's unrolling gave, source for source, or, where a partial block's
    points are guarded (the printer by each point's loop bounds, isl by conditions it derives), the same
    statements in the same order under other guards; where isl splits a partial block into cases (each with its
    own copy of the points they share), the two programs give the same numbers bit for bit (built and run)."""
    _compare_unrolling(name, model, monkeypatch, request)


def _compare_unrolling(name, model, monkeypatch, request):
    """The comparison; returns how many kernels differ in their guards alone."""
    built = both_ways(name, model, monkeypatch, "UNROLL_IN_PRINTER", seed=1, mutants=4, p_variant=0.3, max_variants=3)
    guarded = 0
    for why, mine, isls in built:
        cases = []
        for k in mine.kernels:
            a, b = mine.kernel_source(k.name), isls.kernel_source(k.name)
            if a != b and unguarded(a) != unguarded(b):
                cases.append(k.name)
            guarded += a != b
        if cases:
            request.getfixturevalue("opencl")
            assert same_numbers(name, mine, isls), (cases, why)
    assert len(built) >= 3
    return guarded


def test_the_printer_unrolls_conv2d_5x5_s3s_tiles_as_isl_does_some_under_other_guards(monkeypatch, request):
    """The comparison above on conv2d_5x5_s3 (CPU), which is not vacuous there: its candidates have kernels whose
    partial blocks the printer guards."""
    assert _compare_unrolling("conv2d_5x5_s3", ZEN5, monkeypatch, request) > 0
