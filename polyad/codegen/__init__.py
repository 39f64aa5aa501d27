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
from ..te.memo import Recent
from .lower import lower
from .opencl import Context, KernelWriter, kernel_source, needs_wide_index, program_source
from .tree import build_tree, c_identifier


@dataclass(frozen=True, eq=False)
class KernelLaunch:
    name: str
    stage: object  # the operation (None in a program restored from data: pipeline.programs)
    args: tuple  # tensors, in kernel argument order
    global_size: tuple  # OpenCL order: innermost first
    local_size: tuple  # None: the implementation's choice
    writes: tuple = None  # the args the kernel writes (its stage's outputs); None: unknown, any of them
    stage_name: str = None  # the stage's name, kept where the operation is not (the tuner times stages by it)

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
    tree: object  # the tree.ModuleTree it came from
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


def generate(outputs, inputs, schedule=None, wide=None, kernels=None, widths=None):
    """The :class:`Program` computing the prepared graph of ``outputs`` from ``inputs`` under ``schedule``.

    ``schedule``: a :class:`~polyad.schedule.Schedule` whose graph-level decisions
    are already applied to the graph (None: naive).  ``wide``: True forces 64-bit
    index arithmetic (the capability probe tests it on small buffers); None
    decides from the sizes.  ``kernels``: a :class:`KernelMemo` shared by the
    programs of a tuner's candidates: a kernel written before with everything its
    text is a function of equal is not written again (a candidate changes a stage
    or three of dozens).  ``widths``: the vector widths the device compiles (its
    probe's), which a tiled reduction's remainder may take narrower groups in
    besides the schedule's own (None: every width of ``schedule.VECTOR_WIDTHS``).
    """
    outs, ins = _check_io(outputs, inputs)
    sched = naive() if schedule is None else schedule
    if not isinstance(sched, Schedule):
        raise TypeError(f"codegen.generate takes a prepared Schedule, got {type(schedule).__name__}; "
                        "polyad.pipeline.generate resolves names such as 'auto'")
    stages = [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]
    aliases = input_aliases(stages, ins, outs)
    kernel_stages = [op for op in stages if id(op.output(0)) not in aliases]
    # every output a bitcast of an input (flatten's gradient alone): a program without kernels
    tree = build_tree(kernel_stages, sched, widths, outs) if kernel_stages else None
    lowered = lower(tree) if kernel_stages else []
    # buffers: every placeholder and every stage output gets one unique C name
    names, used = {}, set()
    tensors = list(ins) + [t for op in stages for t in op.outputs]
    for t in tensors:
        names[id(t)] = c_identifier(t.name, used)
    statements = [st for op in kernel_stages for st in statements_of(op)]
    ctx = Context(bool(wide) or needs_wide_index(tensors, statements))
    launches, sources = [], []
    for lk in lowered:
        k, w = _kernel(ctx, lk, names, tree.statements, kernels)
        for h in k.helpers:  # as if written with the program's context: helpers in order of first use
            if h not in ctx.helpers:
                ctx.helpers.append(h)
        ctx.fp64 |= k.fp64
        sources.append(k.source)
        size = tuple(s for _, s in reversed(lk.grid_box)) or (1,)
        launches.append(KernelLaunch(lk.spec.name, lk.spec.stage, tuple(w.args), size, lk.spec.local_size,
                                     tuple(w.outputs), lk.spec.stage.name))
    source = program_source(ctx, sources)
    if aliases:  # say where the bitcast tensors are, since no kernel shows them
        notes = "".join(
            f"// {names[id(t)]}: {t.dtype}{list(t.shape)} is {names[id(aliases[id(t)])]}'s buffer read in "
            f"its own shape (a bitcast: no kernel, no copy)\n"
            for op in stages for t in op.outputs if id(t) in aliases)
        head, _, rest = source.partition("\n")
        source = f"{head}\n{notes}{rest}"
    out_ids = {id(t) for t in outs}
    # partials summed in their own kernel's registers (tree.lane_sums) need no buffer
    unstored = {id(t) for k in (tree.kernels if tree else ()) if k.lane_sum is not None for t in k.stage.outputs}
    inter = tuple(t for op in stages for t in op.outputs if id(t) not in out_ids and id(t) not in unstored)
    return Program(source, tuple(launches), tuple(ins), tuple(outs), inter, names, ctx.wide, ctx.fp64, tree, aliases)


@dataclass(frozen=True, eq=False)
class _Written:
    """One kernel's C text and what writing it told the program: the helpers it calls (in order of first use)
    and whether it needs fp64."""

    source: str
    helpers: tuple
    fp64: bool


class KernelMemo:
    """Written kernels by :meth:`~polyad.codegen.opencl.KernelWriter.memo_key` (everything the C text is a
    function of, names included), held by its SHA-256 (a key holds the kernel's isl schedule: up to 100 KB of
    text): kernels of another program, or another graph's, are taken where their keys are equal.  Holds the
    ``size`` most recently used (a kernel's text is up to a few hundred KB, a GPU's scalar blocks).

    ``store``: where the memo also reads and writes, which processes share (``read(name)`` -> a JSON payload or None,
    ``write(name, payload)``; :class:`polyad.tuner.generate.Programs` gives its workers a folder of checksummed
    records).  The tuner's code generation workers, each with its own memo, wrote kernels the other had written
    (conv2d_3x3: 143 kernels lowered by two workers where one process lowered 112), and isl's AST of a padded copy
    takes up to 1.5 s.  A kernel taken from the store is not lowered at all
    (:class:`~polyad.codegen.lower.LoweredKernel`'s AST is built when printed)."""

    def __init__(self, size=512, store=None):
        self._recent = Recent(size)
        self.store = store
        self.hits = self.misses = 0

    @staticmethod
    def _digest(key):
        import hashlib

        return hashlib.sha256(key.encode()).digest()

    def get(self, key):
        digest = self._digest(key)
        hit = self._recent.get(digest)
        if hit is None and self.store is not None:
            d = self.store.read(digest.hex())
            if d is not None:
                hit = self._recent.put(digest, _Written(d["source"], tuple(d["helpers"]), bool(d["fp64"])))
        if hit is None:
            self.misses += 1
        else:
            self.hits += 1
        return hit

    def put(self, key, written):
        digest = self._digest(key)
        if self.store is not None:
            self.store.write(digest.hex(), {"source": written.source, "helpers": list(written.helpers),
                                            "fp64": written.fp64})
        return self._recent.put(digest, written)


def _kernel(ctx, lk, names, statements, memo):
    """The C text of the kernel of ``lk`` (a :class:`_Written`) and its writer, which knows its arguments; the text
    is taken from ``memo`` where it holds it.  Each kernel is written with a context of its own, whose helpers and
    fp64 the program merges in kernel order: the same program as one context shared by all (a context only
    collects them)."""
    own = Context(ctx.wide)
    w = KernelWriter(own, lk, names, statements)  # the arguments; nothing is printed yet
    key = w.memo_key() if memo is not None else None
    hit = memo.get(key) if key is not None else None
    if hit is not None:
        return hit, w
    out = _Written(str(w.generate()), tuple(own.helpers), own.fp64)
    return (out if key is None else memo.put(key, out)), w


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


__all__ = ["generate", "Program", "KernelLaunch", "KernelMemo", "input_aliases"]
