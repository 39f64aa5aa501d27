"""One-hot sums, which codegen runs as scatters.

A data-dependent read ``Y[k, c] = W[I[k], c]`` has the adjoint isl cannot solve (DESIGN.md, non-affine
indices): a gather over the consumer's domain, one comparison per output point and reduction point::

    dW[v, c] = sum_k select(I[k] == v, H[k, c], 0)          { S0[v, c, k] : 0 <= v < V and 0 <= c < C and ... }

Its output dimension ``v`` appears only in the comparison, so for each ``(c, k)`` exactly one ``v`` (or none) gets
a contribution.  The same sum, with the same additions in the same order at every output point, is::

    dW[:, c] = 0;  for k: { j = I[k]; if 0 <= j < V: dW[j, c] += H[k, c] }     { S0[c, k] : 0 <= c < C and ... }

|C| |K| iterations and a store per point instead of |V| |C| |K| comparisons (an embedding table's gradient: 10000
times fewer).  Several output dimensions can be picked so: the gradient of ``take`` from a flattened table
compares ``I[k] // C`` with one and ``I[k] % C`` with the other, and each ``k`` adds at one point.

:func:`scatter_form` recognises the stages that allow it; ``codegen/tree.py`` builds them that way under the
schedules :func:`blocks` allows (the naive loops, and blocks of the other output dimensions), and the cost model
prices them so (``schedule/cost.py``).
"""

import math
import weakref
from dataclasses import dataclass

import islpy as isl

from ..te import dtype as dt
from ..te.expr import Call, Const, Var
from ..te.visit import free_vars
from .stage import Statement, dim_names, statements_of

#: dtypes a scatter accumulates in memory exactly as the gather's register does: the type code computes in is
#: the storage type (with 64-bit indices an int32 sum accumulates in a ``long`` register, and stored at every
#: step it would wrap differently)
_DTYPES = frozenset(("float32", "float64", "int64"))


@dataclass(frozen=True, eq=False)
class Scatter:
    """How a one-hot sum scatters: ``T[o with o[d] := E_d for the picked d] += value`` over ``domain``.

    :param steps: the condition's conjuncts in its order, each ``(d, E_d)`` for a comparison that picks output
        dimension ``d`` (``v`` above; ``E_d``: ``I[k]``) or ``(None, c)`` for another conjunct.  Code tests them in
        this order, an index inside ``[0, extent)``: each reads only where the gather's condition read it.
    :param value: the select's value, added where every step holds.
    :param domain: the isl set over the statement's variables but the picked dimensions (named as the statement's).
    :param names: the isl names of those variables, in order.
    """

    steps: tuple
    value: object
    domain: object
    names: tuple

    @property
    def dims(self):
        """The picked output dimensions, in the condition's order."""
        return tuple(d for d, _ in self.steps if d is not None)

    def loop_vars(self, stmt):
        """The statement's variables the scatter loops over: all but the picked output dimensions."""
        return tuple(v for i, v in enumerate(stmt.vars) if i not in self.dims)

    def blocks(self, ss, n_out):
        """:func:`blocks` of this scatter's picked dimensions."""
        return blocks(self.dims, ss, n_out)

    def loop_statement(self, stmt):
        """The scatter's loop nest as a statement: per point of the other output dimensions, a sum of ``value``
        over the reduction points (what it costs, less the zeroing)."""
        return Statement(stmt.name, self.loop_vars(stmt), stmt.n_out - len(self.dims),
                         self.domain.set_tuple_name(stmt.name), (self.value,), stmt.combiner)


def blocks(dims, ss, n_out):
    """The blocks a stage schedule ``ss`` builds a one-hot sum picking output dimensions ``dims`` in as a scatter,
    one size per output dimension (1 along ``dims``), or None where ``ss`` builds the gather: tiles that are 1
    along ``dims``, no vectors, unrolling nor phase.  Each work-item scatters into a block of the other output
    dimensions, whose points are the innermost loop (contiguous: LLVM vectorises it; an embedding table's 64-wide
    rows took 0.38 ms a column a work-item, 0.05 ms a row, on the Zen 5 VM)."""
    if ss.vectorize != 1 or ss.unroll != 1 or (ss.phase is not None and any(x > 1 for x in ss.phase)):
        return None
    tile = tuple(ss.tile) if ss.tile is not None else (1,) * n_out
    return tile if len(tile) == n_out and all(tile[d] == 1 for d in dims) else None


_FORMS = weakref.WeakKeyDictionary()


def scatter_form(op):
    """The :class:`Scatter` of a stage that is one one-hot sum, else None (remembered per stage).

    That is a stage of one float32, float64 or int64 output and one statement: a sum (identity +0, not
    accumulating) of ``select(c1 and ... and (E == v) and ..., X, 0)`` where ``v`` is an output variable that
    nothing else reads (not ``E``, ``X``, the other conjuncts nor the other picks' indices) and the domain is
    ``[0, extent)`` in ``v`` whatever the other variables are (``{ S[v, c, k] }`` the product of ``v``'s range and
    a set over ``(c, k)``).  Every such comparison picks its dimension.
    """
    try:
        return _FORMS[op]
    except KeyError:
        pass
    form = _scatter_form(op)
    _FORMS[op] = form
    return form


def _conjuncts(e):
    if isinstance(e, Call) and e.op == "and":
        return _conjuncts(e.args[0]) + _conjuncts(e.args[1])
    return [e]


def _variable(e):
    """The variable ``e`` is, cast to an integer type or not (``I[k] == int64(v)``), else None."""
    if isinstance(e, Call) and e.op == "cast" and dt.is_int(e.dtype):
        e = e.args[0]
    return e if isinstance(e, Var) else None


def _pick(part, st, shape):
    """``(d, E)`` when the conjunct ``part`` is ``E == v`` for the output variable ``v`` of dimension ``d`` (cast or
    not, to a type that holds its range) and ``E`` an integer expression that does not read ``v``; else None."""
    if not (isinstance(part, Call) and part.op == "eq"):
        return None
    for side in range(2):
        v, e = _variable(part.args[side]), part.args[1 - side]
        d = next((i for i, w in enumerate(st.out_vars) if w is v), None) if v is not None else None
        if d is None or not dt.is_int(e.dtype) or dt.max_value(part.args[side].dtype) < shape[d] - 1:
            continue
        if not any(w is v for w in free_vars(e)):
            return d, e
    return None


def _scatter_form(op):
    if op.num_outputs != 1 or op.output_dtype(0) not in _DTYPES:
        return None
    stmts = statements_of(op)
    if len(stmts) != 1:
        return None
    st = stmts[0]
    comb = st.combiner
    if comb is None or st.accumulate or comb.kind() != "sum" or len(st.vars) == st.n_out:
        return None
    if math.copysign(1.0, comb.identity[0].value) < 0:  # from -0.0, the gather's first added +0.0 makes +0.0
        return None
    [value] = st.values
    if not (isinstance(value, Call) and value.op == "select" and value.dtype == op.output_dtype(0)):
        return None
    cond, x, zero = value.args
    if not (isinstance(zero, Const) and zero.value == 0):
        return None
    steps = []
    for part in _conjuncts(cond):
        pick = _pick(part, st, op.shape)
        steps.append(pick if pick is not None and pick[0] not in {d for d, _ in steps} else (None, part))
    picked = {id(st.out_vars[d]) for d, _ in steps if d is not None}
    if not picked:
        return None
    # what reads a picked variable is not a scatter's: each must be known before its store, from the data alone
    if any(id(w) in picked for _, e in steps for w in free_vars(e)) or any(id(w) in picked for w in free_vars(x)):
        return None
    domain = st.domain.reset_tuple_id()
    for d in sorted((d for d, _ in steps if d is not None), reverse=True):
        domain = _without(domain, d, op.shape[d])
        if domain is None:
            return None
    names = tuple(nm for i, nm in enumerate(dim_names(st.vars)) if id(st.vars[i]) not in picked)
    return Scatter(tuple(steps), x, domain, names)


def _without(domain, d, extent):
    """``domain`` without its dimension ``d`` when it is ``[0, extent)`` there times the rest, else None.

    ``{ S[v, c, k] : 0 <= v < 10 and 0 <= c < 4 and k <= c + 3 and ... }`` is, in ``v``;
    ``{ S[v, c, k] : ... and k <= c + v }`` is not (which ``k`` reach ``v`` depends on ``v``)."""
    n = domain.dim(isl.dim_type.set)
    rest = domain.project_out(isl.dim_type.set, d, 1)
    line = isl.Set(f"{{ [x] : 0 <= x < {extent} }}", context=domain.get_ctx())
    line = line.insert_dims(isl.dim_type.set, 0, d).insert_dims(isl.dim_type.set, d + 1, n - d - 1)
    return rest if rest.insert_dims(isl.dim_type.set, d, 1).intersect(line).is_equal(domain.reset_tuple_id()) else None


__all__ = ["Scatter", "scatter_form", "blocks"]
