"""Code generation: stages + schedule -> isl schedule tree -> isl AST -> OpenCL C.

``generate(outputs, inputs, schedule)`` gives a :class:`Program`: the OpenCL
source of all kernels of a build (one program, compiled once) and how to launch
them.  It takes the graph as :func:`polyad.schedule.prepare` leaves it (the
schedule's graph-level decisions applied) and reads the schedule's loop-level
decisions; resolving a schedule and the order of the passes belong to the
build driver (:mod:`polyad.pipeline`).  Here: :func:`tree.build_tree` (the isl
schedule tree), :func:`lower.lower` (one isl AST per kernel, grid dims bound
to the NDRange), :mod:`vectorize` (the vector IR of vectorised full tiles)
and :mod:`opencl` (the C text).
"""

from dataclasses import dataclass, field

from ..errors import PolyadError
from ..poly.bitcast import bitcast_source
from ..poly.stage import statements_of
from ..schedule import Schedule, naive
from ..te.graph import cut
from ..te.tensor import PlaceholderOp, Tensor, as_tensor_list, walk_ops
from .lower import lower
from .opencl import Context, KernelWriter, kernel_source, needs_wide_index, program_source
from .tree import build_tree, c_identifier


@dataclass(frozen=True, eq=False)
class KernelLaunch:
    name: str
    stage: object  # the operation
    args: tuple  # tensors, in kernel argument order
    global_size: tuple  # OpenCL order: innermost first
    local_size: tuple  # None: the implementation's choice
    writes: tuple = None  # the args the kernel writes (its stage's outputs); None: unknown, any of them

    def written(self):
        """The tensors the kernel may write: ``writes``, or every argument where that is not known."""
        return self.args if self.writes is None else self.writes


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
    tree: object  # the tree.ModuleTree it came from (None: made from a plan, program_from_plan)
    # id(Tensor) -> the input whose buffer it is (a bitcast: flatten, reshape, squeeze; no kernel)
    aliases: dict = field(default_factory=dict)

    def kernel_source(self, name):
        """The source of kernel ``name`` as a program of its own: the pragmas, the helpers and that kernel
        (the tuner compiles kernels apart). None when the program has no such kernel."""
        return kernel_source(self.source, name)


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
    sched = naive() if schedule is None else schedule
    if not isinstance(sched, Schedule):
        raise TypeError(f"codegen.generate takes a prepared Schedule, got {type(schedule).__name__}; "
                        "polyad.pipeline.generate resolves names such as 'auto'")
    lay = _Layout.of(outputs, inputs)
    # every output a bitcast of an input (flatten's gradient alone): a program without kernels
    tree = build_tree(lay.kernel_stages, sched) if lay.kernel_stages else None
    lowered = lower(tree) if lay.kernel_stages else []
    statements = [st for op in lay.kernel_stages for st in statements_of(op)]
    ctx = Context(bool(wide) or needs_wide_index(lay.tensors, statements))
    launches, sources = [], []
    for lk in lowered:
        w = KernelWriter(ctx, lk, lay.names, tree.statements)
        sources.append(w.generate())
        size = tuple(s for _, s in reversed(lk.grid_box)) or (1,)
        launches.append(KernelLaunch(lk.spec.name, lk.spec.stage, tuple(w.args), size, lk.spec.local_size,
                                     tuple(w.outputs)))
    source = program_source(ctx, sources)
    if lay.aliases:  # say where the bitcast tensors are, since no kernel shows them
        names, aliases = lay.names, lay.aliases
        notes = "".join(
            f"// {names[id(t)]}: {t.dtype}{list(t.shape)} is {names[id(aliases[id(t)])]}'s buffer read in "
            f"its own shape (a bitcast: no kernel, no copy)\n"
            for op in lay.stages for t in op.outputs if id(t) in aliases)
        head, _, rest = source.partition("\n")
        source = f"{head}\n{notes}{rest}"
    return lay.program(source, tuple(launches), ctx.wide, ctx.fp64, tree)


@dataclass(frozen=True)
class _Layout:
    """What a program's buffers are, read off the graph alone (cheap next to code generation): the checked
    outputs and inputs, the stages in order, the bitcast aliases, and every buffer's unique C name."""

    outs: list
    ins: list
    stages: list
    aliases: dict
    kernel_stages: list
    names: dict  # id(Tensor) -> C name
    tensors: list

    @classmethod
    def of(cls, outputs, inputs):
        outs, ins = _check_io(outputs, inputs)
        stages = [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]
        aliases = input_aliases(stages, ins, outs)
        kernel_stages = [op for op in stages if id(op.output(0)) not in aliases]
        # buffers: every placeholder and every stage output gets one unique C name
        names, used = {}, set()
        tensors = list(ins) + [t for op in stages for t in op.outputs]
        for t in tensors:
            names[id(t)] = c_identifier(t.name, used)
        return cls(outs, ins, stages, aliases, kernel_stages, names, tensors)

    def program(self, source, launches, wide, fp64, tree):
        out_ids = {id(t) for t in self.outs}
        inter = tuple(t for op in self.stages for t in op.outputs if id(t) not in out_ids)
        return Program(source, launches, tuple(self.ins), tuple(self.outs), inter, self.names, wide, fp64, tree,
                       self.aliases)


def program_plan(program):
    """``program`` as plain data (JSON-ready): its source, index width and launches, each tensor named by its
    buffer's C name.  :func:`program_from_plan` binds it to the tensors of another copy of the graph: a
    process that generated the code sends this back (the tuner's code generation workers)."""
    cname = program.buffer_names
    return {"source": program.source, "wide": program.wide_index, "fp64": program.fp64,
            "kernels": [[k.name, k.stage.name, [cname[id(t)] for t in k.args], list(k.global_size),
                         None if k.local_size is None else list(k.local_size),
                         None if k.writes is None else [cname[id(t)] for t in k.writes]] for k in program.kernels]}


def program_from_plan(plan, outputs, inputs):
    """The :class:`Program` a :func:`program_plan` describes, for the prepared graph of ``outputs`` here: the same
    graph as the one the plan was generated from, in another process (its tensors matched by C name, its stages
    by name).  The program has no ``tree``.

    :raises PolyadError: when a kernel's stage or argument is not in this graph (the plan is of another graph).
    """
    lay = _Layout.of(outputs, inputs)
    by_cname = {lay.names[id(t)]: t for t in lay.tensors}
    ops = {op.name: op for op in lay.kernel_stages}
    launches = []
    for name, stage, args, size, local, writes in plan["kernels"]:
        try:
            launches.append(KernelLaunch(name, ops[stage], tuple(by_cname[a] for a in args), tuple(size),
                                         None if local is None else tuple(local),
                                         None if writes is None else tuple(by_cname[a] for a in writes)))
        except KeyError as e:
            raise PolyadError(f"code generation plan: kernel {name!r} names {e.args[0]!r}, which this graph "
                              "does not have (the plan is of another graph)") from None
    return lay.program(plan["source"], tuple(launches), plan["wide"], plan["fp64"], None)


def input_aliases(stages, inputs, outputs):
    """id(tensor) -> input placeholder, for the stages that are a bitcast of an input (poly.bitcast).

    Such a stage needs no kernel: its buffer is the input's, which no kernel writes (so the aliases
    only ever read, and ``restrict`` holds).  A chain of bitcasts resolves to the input; an output may
    alias an input only if no other output does (each output its own buffer).  Bitcasts of computed
    stages keep their copy kernel.
    """
    given = {id(t) for t in inputs}
    out_ids = {id(t) for t in outputs}
    root, claimed = {}, set()
    for op in stages:
        src = bitcast_source(op)
        if src is None:
            continue
        src = root.get(id(src), src)
        if id(src) not in given:
            continue
        t = op.output(0)
        if id(t) in out_ids:
            if id(src) in claimed:
                continue
            claimed.add(id(src))
        root[id(t)] = src
    return root


__all__ = ["generate", "Program", "KernelLaunch", "input_aliases", "program_plan", "program_from_plan"]
