"""The polyhedral stage form: the interface between poly/ (which produces it) and codegen/.

A stage computes one tensor ``T`` of shape ``(s0, ..., s_{n-1})`` by a list of
statements executed in order.  A statement has

* ``vars``: ``n`` output variables followed by ``m >= 0`` reduction variables
  (``IterVar``\\ s; the names of ``domain``'s set dimensions are these names);
* ``domain``: an ``isl.Set`` over exactly those variables, in that order, named
  by the statement (``{ S0[i, j, k] : 0 <= i < 32 and ... }``), no parameters;
* ``values``: TE expressions over ``vars`` (and tensor reads), one per output
  of the stage (several only for tuple reductions such as argmax);
* ``combiner``: ``None`` for an assignment (``m`` must be 0), else a
  ``CommReducer`` and ``T[o]`` becomes the reduction of ``values`` over
  ``{r : (o, r) in domain}``;
* ``accumulate``: when true, the statement combines into the value ``T[o]``
  already holds instead of starting from the combiner's identity.

Semantics, for each output point ``o`` in the projection of ``domain`` onto
its first ``n`` dimensions::

    assign:                 T[o] = value(o)
    reduce:                 T[o] = identity (+) value(o, r1) (+) value(o, r2) ...
    reduce, accumulate:     T[o] = T[o]     (+) value(o, r1) (+) ...

with the reduction points in lexicographic order.  Every output point must be
written by at least one non-accumulating statement before an accumulating one
reads it (a zero-fill statement covers the region no contribution reaches).

``statements_of(op)`` gives the statements of a plain ``ComputeOp`` (one
statement whose domain is the full box); ``PolyOp`` is the operation whose
tensors are defined by a statement list (what the simplifier produces).
"""

import zlib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import islpy as isl

from ..errors import PolyadError
from ..te.construct import select
from ..te.expr import CommReducer, Const, Reduce
from ..te.names import fresh_name
from ..te.tensor import ComputeOp, Operation, Tensor, check_shape
from ..te.visit import input_tensors

_CTX = isl.DEFAULT_CONTEXT


@dataclass(frozen=True, eq=False)
class Statement:
    name: str
    vars: tuple
    n_out: int
    domain: object  # isl.Set
    values: tuple  # of Expr, one per output
    combiner: CommReducer = None
    accumulate: bool = False

    @property
    def out_vars(self):
        return self.vars[: self.n_out]

    @property
    def red_vars(self):
        return self.vars[self.n_out:]

    @property
    def out_domain(self):
        """The output points the statement writes (its domain with the reduction dimensions projected out), unnamed."""
        return self.domain.reset_tuple_id().project_out(isl.dim_type.set, self.n_out, len(self.vars) - self.n_out)

    __hash__ = object.__hash__


# words isl's parser reads as keywords or values: a dimension named "min" is a syntax error,
# one named "NaN" silently empties the set (checked with islpy 2026.2, case-insensitively to be safe)
ISL_WORDS = frozenset((
    "exists", "and", "or", "implies", "not", "xor", "mod", "max", "min", "rat", "true", "false",
    "ceild", "floord", "ceil", "floor", "infty", "nan", "inf",
))


# the longest identifier made from a name: a longer one keeps its start and a checksum of the whole
MAX_NAME = 64


def safe_name(name, used, taboo=None):
    """An identifier from ``name``: ASCII, at most ``MAX_NAME`` characters before a suffix, not an isl keyword (nor
    ``taboo(base)``: a ``_`` is appended), not in ``used`` (``_1``, ``_2`` ... appended); added to ``used``."""
    base = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name) or "v"
    if len(base) > MAX_NAME:  # PoCL's linker failed a kernel named by a 250-character stage name
        base = f"{base[:MAX_NAME - 9]}_{zlib.crc32(name.encode()):08x}"
    if base[0].isdigit():
        base = "v" + base
    if base.lower() in ISL_WORDS or (taboo is not None and taboo(base)):
        base += "_"
    nm = fresh_name(base, used)
    used.add(nm)
    return nm


def dim_names(vars_):
    """isl-safe (ASCII, no isl keyword), unique names for a statement's variables, in order."""
    used = set()
    return [safe_name(v.name, used) for v in vars_]


def box_set(name, vars_):
    """``{ name[v0, ...] : lo0 <= v0 < hi0 and ... }`` for IterVars with ranges."""
    names = dim_names(vars_)
    cons = " and ".join(f"{v.lo} <= {n} < {v.hi}" for v, n in zip(vars_, names))
    return _parsed_set(f"{{ {name}[{', '.join(names)}] : {cons} }}" if cons else f"{{ {name}[] }}")


@lru_cache(maxsize=4096)
def _parsed_set(text):
    # isl sets are values (every operation returns a new one): one parse per text serves every stage,
    # and parsing was the largest single cost of differentiating lenet_step (0.37 ms a box)
    return isl.Set(text, context=_CTX)


def statements_of(op):
    """The statement list of any stage operation (a ComputeOp gives one box statement)."""
    if isinstance(op, PolyOp):
        return op.statements
    if not isinstance(op, ComputeOp):
        raise PolyadError(f"stage {op.name!r}: a {type(op).__name__} has no statement form (only computes and PolyOps)")
    body = op.body[0]
    if isinstance(body, Reduce):
        vars_ = tuple(op.axis) + tuple(body.axis)
        srcs = body.source
        cond = body.condition
        if not (isinstance(cond, Const) and cond.value):
            # combining with the identity is a no-op: the condition stays a guard until poly/ lifts it
            srcs = tuple(select(cond, s, i) for s, i in zip(srcs, body.combiner.identity))
        return (Statement("S0", vars_, len(op.axis), box_set("S0", vars_), tuple(srcs), body.combiner),)
    vars_ = tuple(op.axis)
    return (Statement("S0", vars_, len(vars_), box_set("S0", vars_), tuple(op.body)),)


@dataclass(frozen=True, eq=False)
class PolyOp(Operation):
    """A stage defined by statements over isl domains (see the module docstring)."""

    name: str
    shape: tuple
    dtypes: tuple  # one per output
    statements: tuple
    attrs: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape, f"stage {self.name!r}"))

    @property
    def num_outputs(self):
        return len(self.dtypes)

    def output_dtype(self, i):
        return self.dtypes[i]

    @cached_property
    def _outputs(self):
        return tuple(Tensor(self, i) for i in range(len(self.dtypes)))

    @cached_property
    def input_tensors(self):
        out = input_tensors(tuple(v for s in self.statements for v in s.values))
        return [t for t in out if t.op is not self]

    def evaluate_numpy(self, values):
        """The output arrays, given the arrays of the inputs (``pa.evaluate``'s hook)."""
        from .numpy_eval import evaluate_polyop

        return evaluate_polyop(self, values)

    def as_compute(self):
        """An equivalent plain-compute graph (autodiff differentiates it: gradients of gradients).

        Built once per stage, so differentiating w.r.t. several inputs shares its derivative work.
        """
        return self._as_compute

    @cached_property
    def _as_compute(self):
        from .to_compute import as_compute

        return as_compute(self)

    def show_lines(self, printer, name, **kwargs):
        """Readable lines for ``pa.show``: one per statement, domains beyond the box shown."""
        from .numpy_eval import show_polyop

        return show_polyop(self, printer, name)

    __hash__ = object.__hash__
