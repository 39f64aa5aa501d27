"""Programs of a tuning space's candidates written with a code generation switch of ``polyad.codegen.tree`` on and
off (``UNROLL_IN_PRINTER``, ``SPLIT_GUARDED``: ways to print that must give the same programs).  No OpenCL, but in
``same_numbers``, which builds and runs a pair whose texts cannot be compared."""

import random

import polyad as pa
from polyad.codegen import generate, tree
from polyad.schedule import prepare
from polyad.tuner.configs import ConfigSpace
from polyad.tuner.measure import graph_context


def workload(name, data=False):
    """A benchmark workload's backward at the test shapes (the tuner's graphs), and with ``data`` its arrays."""
    from polyad.bench.tuning import TINY, backward_graph

    g = backward_graph(name, dict(TINY[name]))
    return (g.outputs, g.inputs) + ((g.data,) if data else ())


def same_numbers(name, a, b):
    """Programs ``a`` and ``b`` of workload ``name``'s backward (``both_ways``' pair), built and run on its arrays:
    their outputs bit for bit the same.  For kernels whose texts differ beyond guards: isl splits a partial block
    into cases, each with its own copy of the shared points, where the printer guards each point once; or isl
    folds the block coordinate its guard fixes (``i2 = 4L`` under ``gid1 == 0L``, the printer's ``8 * gid1 + 4L``)."""
    import numpy as np

    from polyad.pipeline import select_device
    from polyad.runtime.module import Module

    _, ins, data = workload(name, data=True)
    dev = select_device(None)
    outs = [Module(p, dev, inputs=ins)(*data) for p in (a, b)]
    outs = [o if isinstance(o, list) else [o] for o in outs]
    return len(outs[0]) == len(outs[1]) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(*outs))


def program(outs, ins, sched, memo=None):
    g, loop = prepare(outs, sched)
    return generate(g, ins, loop, wide=True, kernels=memo)


def both_ways(name, model, monkeypatch, switch, *, seed, mutants, p_variant, max_variants):
    """``(why, program with tree.<switch> True, program with it False)`` for auto and ``mutants`` neighbours of it
    (those that build)."""
    outs, ins = workload(name)
    ctx = graph_context(outs, ins, model)
    space = ConfigSpace(ctx.outputs, model, ctx.auto, max_variants=max_variants)
    rng = random.Random(seed)
    configs = [space.auto_config()] + [space.mutate(space.auto_config(), rng, p_variant=p_variant)
                                       for _ in range(mutants)]
    out = []
    for c in configs:
        sched = space.schedule(c)
        try:
            on = program(ctx.outputs, ctx.inputs, sched)
        except pa.PolyadError:
            continue
        monkeypatch.setattr(tree, switch, False)
        off = program(ctx.outputs, ctx.inputs, sched)
        monkeypatch.setattr(tree, switch, True)
        out.append((space.variants[c[0]].why, on, off))
    return out


def unguarded(src):
    """A kernel's lines without its guards (``if``, ``else``) and the braces around blocks."""
    lines = (line.strip() for line in src.splitlines())
    return [t for t in lines if not t.startswith("if (") and t not in ("{", "}", "else")]
