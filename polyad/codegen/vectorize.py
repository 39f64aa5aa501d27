"""Vectorisation as a pass: a full-tile statement of a vectorised stage -> vector IR, before printing.

As Halide's ``VectorizeLoops`` runs before its OpenCL code generator, every vector decision of a
``block`` statement (:class:`polyad.codegen.tree.IslStatement` with ``vec > 1``: ``o_last = t * b +
N * l + lane``) is taken here, once per statement, and written down as data; the OpenCL printer
(:mod:`polyad.codegen.opencl`) only prints it (names, C types, temporaries, brackets).

The IR, small frozen dataclasses over TE nodes (``width`` lanes each):

* :class:`Ramp` -- the vectorised output index: lane k is ``var + k``;
* :class:`VecVar` -- a variable bound to a whole vector (an accumulator, a combiner operand):
  lane k is its component k;
* :class:`VecLoad` -- ``width`` elements of a buffer from a base index (the TE load's indices at
  lane 0, or the block point's output element), ``stride`` apart: contiguous (``stride == 1``) is
  one vector load, otherwise a gather of the lanes;
* :class:`VecOp` -- an elementwise operator applied to whole vectors (arithmetic, math builtins);
* :class:`Convert` -- a cast of a vector;
* :class:`Lanes` -- evaluated lane by lane (scalar code per lane) and assembled into a vector:
  selects, comparisons, helpers, gathers of non-unit-stride reads;
* :class:`VecMask` -- a lane-dependent bool as an OpenCL mask (a lane true: all its bits set): a
  comparison of vectors, ``&``, ``|`` or ``!`` of masks;
* :class:`VecSelect` -- ``select(c, a, b)`` of whole vectors: by the mask of ``c``, both arms evaluated
  (the printer goes lane by lane where an arm reads memory it cannot prove in bounds), or by a lane-free
  ``c``, one arm evaluated;
* :class:`ScalarLanes` -- a lane-dependent bool without a mask form: its users go lane by lane;
* :class:`Broadcast` -- a lane-free value (or the reduction's identity) widened to a vector;
* :class:`VecStore` -- ``width`` elements stored from the block point's output element, ``stride``
  apart (1: one vector store; a phased dimension's stride: lane by lane).

A TE node without an entry in :attr:`VecExprs.forms` does not depend on the lane: it is printed
as scalar code (OpenCL widens a scalar operand where it meets a vector).  :func:`vectorize_block`
is the entry point: an ``IslStatement`` -> :class:`VecBlock`.
"""

from dataclasses import dataclass
from types import MappingProxyType

from ..te import dtype as dt
from ..te.expr import Call, Const, Load, Var
from ..te.semantics import pow_chain
from ..te.visit import post_order

# operators applied to whole OpenCL vectors (scalar operands widen implicitly)
VEC_FLOAT_OPS = frozenset(["add", "sub", "mul", "div", "neg", "exp", "log", "log2", "log1p", "sqrt", "rsqrt",
                           "tanh", "sin", "cos", "erf", "floor", "ceil", "round", "trunc", "sigmoid", "abs",
                           "min", "max"])
VEC_INT_OPS = frozenset(["add", "sub", "mul", "neg", "min", "max"])
COMPARISONS = frozenset(["lt", "le", "gt", "ge", "eq", "ne"])


@dataclass(frozen=True, eq=False)
class Ramp:
    """The vectorised output index ``var``: lane k is ``var + k``."""

    var: object
    width: int


@dataclass(frozen=True, eq=False)
class VecVar:
    """A variable bound to a whole vector (an accumulator, a combiner operand): lane k is component k."""

    var: object
    width: int


@dataclass(frozen=True, eq=False)
class VecLoad:
    """``width`` elements of ``tensor`` from a base index, ``stride`` apart.

    ``indices``: the TE index expressions of ``load`` (the last one read at lane 0), or None for the
    block point's output element (an accumulating reduction's initial value)."""

    tensor: object
    indices: tuple
    width: int
    stride: int = 1
    load: object = None  # the TE Load it vectorises (its reads may be clamped when speculated)

    @property
    def contiguous(self):
        return self.stride == 1


@dataclass(frozen=True, eq=False)
class VecOp:
    """The elementwise operator of ``call`` applied to its operands' vectors."""

    call: object
    width: int


@dataclass(frozen=True, eq=False)
class Convert:
    """``call`` (a cast) of a vector to a vector of ``call.dtype``."""

    call: object
    width: int


@dataclass(frozen=True, eq=False)
class Lanes:
    """``expr`` evaluated lane by lane and assembled into a vector."""

    expr: object
    width: int


@dataclass(frozen=True, eq=False)
class VecMask:
    """A lane-dependent bool ``expr`` as a mask vector: a comparison, or ``and``/``or``/``not`` of masks and
    lane-free bools."""

    expr: object
    width: int


@dataclass(frozen=True, eq=False)
class VecSelect:
    """``call`` (a select of numbers by a VecMask or a lane-free bool) over whole vectors."""

    call: object
    width: int


@dataclass(frozen=True, eq=False)
class ScalarLanes:
    """A lane-dependent bool ``expr``: no vector form; its users evaluate it lane by lane."""

    expr: object
    width: int


@dataclass(frozen=True, eq=False)
class Broadcast:
    """A lane-free value ``expr`` widened to ``width`` lanes."""

    expr: object
    width: int


@dataclass(frozen=True, eq=False)
class VecStore:
    """``width`` elements of ``tensor`` stored from the block point's output element, ``stride`` apart."""

    tensor: object
    width: int
    stride: int = 1

    @property
    def contiguous(self):
        return self.stride == 1


@dataclass(frozen=True, eq=False)
class VecExprs:
    """The vector forms of the nodes of some TE roots: ``forms`` id(node) -> IR node for every
    lane-dependent node (the others are scalar); ``roots`` per root its form, or a Broadcast."""

    width: int
    forms: object  # read-only mapping id(TE node) -> IR node
    roots: tuple


@dataclass(frozen=True, eq=False)
class VecBlock:
    """A full-tile statement, vectorised (``width`` 1: scalar code, no vector forms; stores and init of width 1).

    ``lane``: the Ramp of the last output variable; ``values``: the statement's values; ``stores``
    one VecStore per stage output; ``init`` per output the accumulator's initial vector (a Broadcast
    of the identity, or a VecLoad of the output when the reduction accumulates); ``operands`` the
    combiner's variables (lhs, then rhs) as VecVars and ``combine`` its result."""

    width: int
    lane: object = None
    values: VecExprs = None
    stores: tuple = ()
    init: tuple = ()
    operands: tuple = ()
    combine: VecExprs = None


def vectorize_exprs(roots, vectors, width):
    """The :class:`VecExprs` of ``roots`` when the variables of ``vectors`` (id -> Ramp or VecVar) are
    vectors of ``width`` lanes."""
    forms = {}

    def unit(e):
        """``e`` is ``v + x`` for the Ramp v and a lane-free x, with any nesting of ``+`` and ``-``
        (``(xo*8 + xi) + kw``: a convolution's shifted row)."""
        if isinstance(e, Var):
            return isinstance(vectors.get(id(e)), Ramp)
        if isinstance(e, Call) and e.op in ("add", "sub"):
            a, b = e.args
            if id(b) not in forms:
                return unit(a)
            return e.op == "add" and id(a) not in forms and unit(b)
        return False

    for nd in post_order(tuple(roots)):
        if isinstance(nd, Var) and id(nd) in vectors:
            forms[id(nd)] = vectors[id(nd)]
            continue
        kids = nd.children()
        if not any(id(ch) in forms for ch in kids):
            continue  # lane-free: scalar
        forms[id(nd)] = _form(nd, kids, forms, unit, width)
    return VecExprs(width, MappingProxyType(forms),
                    tuple(forms.get(id(r)) or Broadcast(r, width) for r in roots))


def _form(nd, kids, forms, unit, width):
    if nd.dtype == "bool":
        if isinstance(nd, Call) and not any(isinstance(forms.get(id(ch)), ScalarLanes) for ch in kids):
            if nd.op in COMPARISONS and kids[0].dtype == kids[1].dtype != "bool":
                return VecMask(nd, width)
            if nd.op in ("and", "or", "not"):
                return VecMask(nd, width)
        return ScalarLanes(nd, width)
    if isinstance(nd, Call) and nd.op == "select" and (id(kids[0]) not in forms
                                                       or isinstance(forms.get(id(kids[0])), VecMask)):
        return VecSelect(nd, width)  # by a mask, or by a lane-free bool
    if isinstance(nd, Load):
        ix = nd.indices
        if nd.tensor.dtype != "bool" and ix and not any(id(x) in forms for x in ix[:-1]) and unit(ix[-1]):
            return VecLoad(nd.tensor, tuple(ix), width, 1, nd)
    elif isinstance(nd, Call) and not any(isinstance(forms.get(id(ch)), ScalarLanes) for ch in kids):
        if nd.op == "cast" and kids[0].dtype != "bool":
            return Convert(nd, width)
        ops = VEC_FLOAT_OPS if dt.is_float(nd.dtype) else VEC_INT_OPS
        if nd.op in ops and all(ch.dtype == nd.dtype for ch in kids):
            return VecOp(nd, width)
        if nd.op == "pow" and dt.is_float(nd.dtype) and isinstance(kids[1], Const) and pow_chain(kids[1].value):
            return VecOp(nd, width)  # printed as products and square roots, which vectors have
    return Lanes(nd, width)


def vectorize_block(ist):
    """The :class:`VecBlock` of a full-tile (``block``) isl statement ``ist``: its vector width, the
    vector forms of its values and combiner, its stores and its accumulators' initial values."""
    st, w = ist.stmt, ist.vec
    # a phased stage's vector runs over q: its lanes are ``stride`` apart in the output
    stride = st.strides[-1] if getattr(st, "strides", None) else 1
    outputs = ist.stage.outputs
    stores = tuple(VecStore(t, w, stride) for t in outputs)
    init, operands, combine = (), (), None
    comb = st.combiner
    if ist.role == "init":
        if st.accumulate:
            init = tuple(VecLoad(t, None, w, stride) for t in outputs)
        else:
            init = tuple(Broadcast(i, w) for i in comb.identity)
    if w == 1:  # scalar code: one element per store, load and identity
        return VecBlock(1, stores=stores, init=init)
    lane = Ramp(st.out_vars[-1], w)
    vectors = {id(lane.var): lane}
    values = vectorize_exprs(st.values, vectors, w) if ist.role in ("assign", "update") else None
    if ist.role == "update":
        operands = tuple(VecVar(x, w) for x in tuple(comb.lhs) + tuple(comb.rhs))
        combine = vectorize_exprs(comb.result, {**vectors, **{id(o.var): o for o in operands}}, w)
    return VecBlock(w, lane, values, stores, init, operands, combine)


__all__ = ["vectorize_block", "vectorize_exprs", "VecBlock", "VecExprs", "Ramp", "VecVar", "VecLoad", "VecOp",
           "Convert", "Lanes", "VecMask", "VecSelect", "ScalarLanes", "Broadcast", "VecStore"]
