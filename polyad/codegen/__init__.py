"""Code generation: stages + schedule -> isl schedule tree -> isl AST -> OpenCL C.

``generate(outputs, inputs, schedule)`` gives a :class:`Program`: the OpenCL
source of all kernels of a build (one program, compiled once) and how to launch
them.  It takes the graph as :func:`polyad.schedule.prepare` leaves it (the
schedule's graph-level decisions applied) and reads the schedule's loop-level
decisions; resolving a schedule and the order of the passes belong to the
build driver (:mod:`polyad.pipeline`).  Here: :func:`tree.build_tree` (the isl
schedule tree), :func:`lower.lower` (one isl AST per kernel, grid dims bound
to the NDRange) and :mod:`opencl` (the C text).
"""

from dataclasses import dataclass

from ..errors import PolyadError
from ..poly.stage import statements_of
from ..schedule import Schedule, naive
from ..te.graph import cut
from ..te.tensor import PlaceholderOp, Tensor, as_tensor_list, walk_ops
from .lower import lower
from .opencl import Context, KernelWriter, needs_wide_index, program_source
from .tree import build_tree, c_identifier


@dataclass(frozen=True, eq=False)
class KernelLaunch:
    name: str
    stage: object  # the operation
    args: tuple  # tensors, in kernel argument order
    global_size: tuple  # OpenCL order: innermost first
    local_size: tuple  # None: the implementation's choice


@dataclass(frozen=True, eq=False)
class Program:
    """The generated OpenCL program of a build and its launch plan."""

    source: str
    kernels: tuple  # KernelLaunch, in execution order
    inputs: tuple  # placeholder tensors, in the user's order (a fed computed tensor: its placeholder)
    outputs: tuple  # output tensors, in the user's order
    intermediates: tuple  # stage outputs that are neither inputs nor outputs
    buffer_names: dict  # id(Tensor) -> C name
    wide_index: bool
    fp64: bool
    tree: object  # the tree.ModuleTree it came from


def _check_io(outputs, inputs):
    """(outputs, inputs) checked, with computed tensors among ``inputs`` cut into placeholders (``te.graph.cut``)."""
    outs = as_tensor_list(outputs, "build outputs")
    ins = as_tensor_list(inputs, "build inputs")
    outs, ins = cut(outs, ins)  # a fed computed tensor becomes a placeholder: its stages are not built
    if len({id(t) for t in outs}) != len(outs):
        raise PolyadError(f"build outputs list a tensor twice: {[t.name for t in outs]}")
    given = {id(t) for t in ins}
    for op in walk_ops(outs):
        if isinstance(op, PlaceholderOp) and id(op.output(0)) not in given:
            raise PolyadError(f"input tensor {op.name!r} is needed by the outputs but not in the build's inputs")
    for t in outs:
        if isinstance(t.op, PlaceholderOp):
            raise PolyadError(f"build output {t.name!r} is a placeholder: nothing to compute")
    return outs, ins


def generate(outputs, inputs, schedule=None, wide=None):
    """The :class:`Program` computing the prepared graph of ``outputs`` from ``inputs`` under ``schedule``.

    ``schedule``: a :class:`~polyad.schedule.Schedule` whose graph-level decisions
    are already applied to the graph (None: naive).  ``wide``: True forces 64-bit
    index arithmetic (the capability probe tests it on small buffers); None
    decides from the sizes.
    """
    outs, ins = _check_io(outputs, inputs)
    sched = naive() if schedule is None else schedule
    if not isinstance(sched, Schedule):
        raise TypeError(f"codegen.generate takes a prepared Schedule, got {type(schedule).__name__}; "
                        "polyad.pipeline.generate resolves names such as 'auto'")
    stages = [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]
    tree = build_tree(stages, sched)
    lowered = lower(tree)
    # buffers: every placeholder and every stage output gets one unique C name
    names, used = {}, set()
    tensors = list(ins) + [t for op in stages for t in op.outputs]
    for t in tensors:
        names[id(t)] = c_identifier(t.name, used)
    statements = [st for op in stages for st in statements_of(op)]
    ctx = Context(bool(wide) or needs_wide_index(tensors, statements))
    launches, sources = [], []
    for lk in lowered:
        w = KernelWriter(ctx, lk, names, tree.statements)
        sources.append(w.generate())
        size = tuple(s for _, s in reversed(lk.grid_box)) or (1,)
        launches.append(KernelLaunch(lk.spec.name, lk.spec.stage, tuple(w.args), size, lk.spec.local_size))
    source = program_source(ctx, sources)
    out_ids = {id(t) for t in outs}
    inter = tuple(t for op in stages for t in op.outputs if id(t) not in out_ids)
    return Program(source, tuple(launches), tuple(ins), tuple(outs), inter, names, ctx.wide, ctx.fp64, tree)


__all__ = ["generate", "Program", "KernelLaunch"]
