"""Generated programs cached by a structural key of the build, in memory and on disk.

Generating a program (auto-scheduling, isl schedule trees, AST generation, C
printing) costs far more than a warm build may (milliseconds).  The key is a
hash of everything the program depends on: the stages of the graph
(structure, names, shapes, dtypes, domains and bodies; variables by their
position, not their process-local ids), the inputs' order, the schedule as
given (``"auto"`` included: the auto-scheduler is deterministic for a graph
and a device), the device and the source of the polyad packages that generate
code.  A cached entry is the OpenCL source and the launch plan, with every
tensor named by its role (input i, output i, intermediate i), so that it
applies to any graph with the same key.  Unreadable entries are ignored with
a warning and regenerated.
"""

import dataclasses
import hashlib
import os
import warnings
from functools import lru_cache
from pathlib import Path

from ..runtime.records import read, record_path, write
from ..te.expr import CommReducer, Const, Expr, IterVar, Load, Reduce, Var
from ..te.memo import graph_memo, op_memo
from ..te.tensor import ComputeOp, PlaceholderOp, as_tensor_list, placeholder, walk_ops
from ..te.visit import post_order

_FORMAT = "polyad-program-5"  # 3: aliases (bitcast outputs and intermediates); 4: what each kernel writes;
# 5: each kernel's stage name
_MEMORY = {}
_PACKAGES = ("codegen", "schedule", "poly", "te", "autodiff", "ops")


@lru_cache(maxsize=1)
def code_version():
    """A hash of the polyad sources that decide what a program looks like (a code change invalidates)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


class _OpText:
    """One stage serialised on its own: a line per node, nodes numbered by first visit.

    What is not the op's own is left as a reference, for :func:`program_key` to resolve in the whole
    graph: variables (``var N``, by first use) and the tensors it reads (``read N``).  Variables are
    the only nodes that are not hash-consed, so one shared between stages (a reduce axis reused) is
    told from two equal ones only by those references.
    """

    def __init__(self):
        self.ids = {}
        self.lines = []
        self.vars = []  # the Var objects, in the order of their references
        self.reads = []  # the tensors read, likewise
        self._read_ids = {}

    def _new(self, obj, line):
        self.ids[id(obj)] = len(self.ids)
        self.lines.append(line)

    def _read(self, t):
        n = self._read_ids.get(id(t))
        if n is None:
            n = self._read_ids[id(t)] = len(self.reads)
            self.reads.append(t)
        return n

    def combiner(self, c):
        if id(c) not in self.ids:
            self.exprs(tuple(c.lhs) + tuple(c.rhs) + tuple(c.result) + tuple(c.identity))
            refs = [" ".join(str(self.ids[id(x)]) for x in grp) for grp in (c.lhs, c.rhs, c.result, c.identity)]
            self._new(c, f"comb {c.name} | " + " | ".join(refs))
        return self.ids[id(c)]

    def exprs(self, roots):
        for nd in post_order(tuple(roots)):
            if id(nd) in self.ids:
                continue
            kids = " ".join(str(self.ids[id(ch)]) for ch in nd.children())
            if isinstance(nd, Const):
                line = f"const {nd.dtype} {nd.value!r}"
            elif isinstance(nd, Var):  # an IterVar too
                self.vars.append(nd)
                if isinstance(nd, IterVar):
                    line = f"itervar {nd.name} {nd.dtype} {nd.lo} {nd.extent} {nd.kind} var {len(self.vars) - 1}"
                else:
                    line = f"var {nd.name} {nd.dtype} var {len(self.vars) - 1}"
            elif isinstance(nd, Load):
                line = f"load read {self._read(nd.tensor)} {kids}"
            elif isinstance(nd, Reduce):
                self.exprs(nd.axis)
                axis = " ".join(str(self.ids[id(a)]) for a in nd.axis)
                line = f"reduce c{self.combiner(nd.combiner)} axis {axis} v{nd.value_index} {kids}"
            else:
                extra = [
                    f"{f.name}={getattr(nd, f.name)!r}" for f in dataclasses.fields(nd)
                    if not isinstance(getattr(nd, f.name), (Expr, tuple, CommReducer))
                ]
                line = f"{type(nd).__name__} {' '.join(extra)} {kids}"
            self._new(nd, line)

    def op(self, op):
        if isinstance(op, ComputeOp):
            self.exprs(tuple(op.axis) + tuple(op.body))
            axis = " ".join(str(self.ids[id(a)]) for a in op.axis)
            body = " ".join(str(self.ids[id(b)]) for b in op.body)
            self.lines.append(f"compute {op.name} axis {axis} body {body} tag {op.tag!r} attrs {sorted(op.attrs)!r}")
        elif hasattr(op, "statements"):  # poly.stage.PolyOp
            parts = [f"poly {op.name} {op.shape} {op.dtypes}"]
            for st in op.statements:
                self.exprs(tuple(st.vars) + tuple(st.values))
                comb = self.combiner(st.combiner) if st.combiner is not None else None
                vars_ = " ".join(str(self.ids[id(v)]) for v in st.vars)
                vals = " ".join(str(self.ids[id(v)]) for v in st.values)
                parts.append(f"st {st.name} {vars_} n{st.n_out} {st.domain} = {vals} c{comb} a{int(st.accumulate)}")
            self.lines.append(" || ".join(parts))
        else:
            raise TypeError(type(op).__name__)


@op_memo
def _op_text(op):
    """(digest of the op's own text, its variables, the tensors it reads): memoised, since a warm build of a
    large graph (a 200-deep chain's gradient) spent most of its time serialising stages."""
    w = _OpText()
    w.op(op)
    return hashlib.sha256("\n".join(w.lines).encode()).hexdigest(), tuple(w.vars), tuple(w.reads)


class _Keyer:
    """Serialises a tensor graph structurally: a line per stage (its own text's digest, then which
    variables and which earlier stages' outputs it refers to, numbered by first visit)."""

    def __init__(self):
        self.ops = {}  # id(op) -> position
        self.vars = {}  # id(Var) -> number
        self.lines = []

    def tensor(self, t):
        return f"T{self.ops[id(t.op)]}.{t.value_index}"

    def op(self, op):
        if isinstance(op, PlaceholderOp):
            line = f"placeholder {op.name} {op.shape} {op.dtype}"
        else:
            digest, vars_, reads = _op_text(op)
            vs = " ".join(str(self.vars.setdefault(id(v), len(self.vars))) for v in vars_)
            rs = " ".join(self.tensor(t) for t in reads)
            line = f"{digest} vars {vs} reads {rs}"
        self.ops[id(op)] = len(self.ops)
        self.lines.append(line)


def _schedule_token(schedule):
    if isinstance(schedule, str) or schedule is None:
        return f"str:{schedule}"
    if hasattr(schedule, "to_json"):
        return "json:" + schedule.to_json()
    return None


@graph_memo(32)  # a warm build keys its graph again (chain's 400 stages: 3.5 ms a build)
def _graph_text(outs, ins, single):
    k = _Keyer()
    for op in walk_ops(outs):
        k.op(op)
    for t in ins:
        if id(t.op) not in k.ops:
            k.op(t.op)
    k.lines.append("inputs " + " ".join(k.tensor(t) for t in ins))
    k.lines.append("outputs " + " ".join(k.tensor(t) for t in outs))
    k.lines.append("single " + str(single))
    return "\n".join(k.lines)


def program_key(outputs, inputs, schedule, device_key):
    """The cache key of a build, or None when it cannot be keyed (then nothing is cached)."""
    token = _schedule_token(schedule)
    if token is None:
        return None
    try:
        outs = as_tensor_list(outputs, "build outputs")
        ins = as_tensor_list(inputs, "build inputs")
        graph = _graph_text(tuple(outs), tuple(ins), not isinstance(outputs, (list, tuple)))
    except (TypeError, KeyError, AttributeError):
        return None
    h = hashlib.sha256()
    for part in (_FORMAT, code_version(), token, device_key, graph):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def program_data(program):
    """The program with its tensors named by role (JSON-ready): what the cache stores, and what the tuner's code
    generation workers send back (:mod:`polyad.tuner.generate`).  :func:`program_from_data` binds it to a graph's
    outputs and inputs."""
    roles = {}
    for i, t in enumerate(program.inputs):
        roles[id(t)] = ["in", i]
    for i, t in enumerate(program.outputs):
        roles[id(t)] = ["out", i]
    for i, t in enumerate(program.intermediates):
        roles[id(t)] = ["mid", i]
    return {
        "format": _FORMAT,
        "source": program.source,
        "kernels": [
            {"name": k.name, "stage": k.stage_name, "args": [roles[id(t)] for t in k.args],
             "global": list(k.global_size),
             "local": list(k.local_size) if k.local_size is not None else None,
             "writes": None if k.writes is None else [roles[id(t)] for t in k.writes]}
            for k in program.kernels
        ],
        "intermediates": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in program.intermediates],
        "names": [[roles[i], n] for i, n in program.buffer_names.items() if i in roles],
        "wide": program.wide_index,
        "fp64": program.fp64,
        "aliases": [[roles[i], roles[id(src)]] for i, src in program.aliases.items()],
    }


def program_from_data(data, outputs, inputs):
    """The :class:`~polyad.codegen.Program` of :func:`program_data`'s ``data`` on ``outputs`` and ``inputs`` (those of
    the graph it was generated for, or of a copy of it): its intermediates are new placeholders, its kernels keep
    their stages' names but not the operations, and it has no ``tree``."""
    from ..codegen import KernelLaunch, Program

    outs = tuple(as_tensor_list(outputs, "build outputs"))
    ins = tuple(as_tensor_list(inputs, "build inputs"))
    mids = tuple(placeholder(tuple(m["shape"]), m["dtype"], m["name"]) for m in data["intermediates"])
    table = {"in": ins, "out": outs, "mid": mids}

    def tensor(role):
        return table[role[0]][role[1]]

    kernels = tuple(
        KernelLaunch(k["name"], None, tuple(tensor(r) for r in k["args"]), tuple(k["global"]),
                     tuple(k["local"]) if k["local"] is not None else None,
                     None if k.get("writes") is None else tuple(tensor(r) for r in k["writes"]), k.get("stage"))
        for k in data["kernels"]
    )
    names = {id(tensor(r)): n for r, n in data["names"]}
    aliases = {id(tensor(a)): tensor(src) for a, src in data["aliases"]}
    return Program(data["source"], kernels, ins, outs, mids, names, data["wide"], data["fp64"], None, aliases)


def _disk_path(key):
    return record_path("programs", key)


def load_program(key, outputs, inputs):
    """The cached Program of ``key`` for this graph's tensors, or None.

    Entries are checksummed records (:mod:`polyad.runtime.records`): an edited
    source or launch plan fails its checksum and is regenerated, never run.
    """
    data = _MEMORY.get(key)
    if data is None:
        data = read(_disk_path(key), "program")
        if data is None:
            return None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return None
        _MEMORY[key] = data
    try:
        return program_from_data(data, outputs, inputs)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        warnings.warn(f"polyad: ignoring a malformed cached program ({type(e).__name__}: {e}); regenerating it",
                      RuntimeWarning, stacklevel=3)
        forget_program(key)
        return None


def store_program(key, program):
    """Remember ``program`` under ``key`` (memory, and disk when writable)."""
    data = program_data(program)
    _MEMORY[key] = data
    write(_disk_path(key), data, "program")


def forget_program(key):
    """Drop ``key`` from the caches (a cached program that no longer builds is regenerated)."""
    _MEMORY.pop(key, None)
    try:
        os.unlink(_disk_path(key))
    except OSError:
        pass


def clear_memory():
    """Forget the programs cached in this process (tests use it to exercise the disk cache)."""
    _MEMORY.clear()
