"""One-hot sums, which codegen's naive loops run as scatters.

A data-dependent read ``Y[k, c] = W[I[k], c]`` has the adjoint isl cannot solve (DESIGN.md, non-affine
indices): a gather over the consumer's domain, one comparison per output point and reduction point::

    dW[v, c] = sum_k select(I[k] == v, H[k, c], 0)          { S0[v, c, k] : 0 <= v < V and 0 <= c < C and ... }

Its output dimension ``v`` appears only in the comparison, so for each ``(c, k)`` exactly one ``v`` (or none) gets
a contribution.  The same sum, with the same additions in the same order at every output point, is::

    dW[:, c] = 0;  for k: { j = I[k]; if 0 <= j < V: dW[j, c] += H[k, c] }     { S0[c, k] : 0 <= c < C and ... }

|C| |K| iterations and a store per point instead of |V| |C| |K| comparisons (an embedding table's gradient: 10000
times fewer).  :func:`scatter_form` recognises the stages that allow it; ``codegen/tree.py`` builds their naive
loops that way, and the cost model prices them so (``schedule/cost.py``).
"""

import functools
import weakref
from dataclasses import dataclass

import islpy as isl

from ..te import dtype as dt
from ..te.construct import binary, select
from ..te.expr import Call, Const, Var
from ..te.visit import free_vars
from .stage import Statement, dim_names, statements_of

#: dtypes a scatter accumulates in memory exactly as the gather's register does: the type code computes in is
#: the storage type (with 64-bit indices an int32 sum accumulates in a ``long`` register, and stored at every
#: step it would wrap differently)
_DTYPES = frozenset(("float32", "float64", "int64"))


@dataclass(frozen=True, eq=False)
class Scatter:
    """How a one-hot sum scatters: ``T[o with o[dim] := index] += value`` over ``domain``.

    :param dim: the output dimension the comparison picks (``v`` above).
    :param index: the expression compared with it (``I[k]``), over the other variables.
    :param value: what is added there: the select's value, under the comparison's other conjuncts.
    :param guard: the conjunction of the condition's conjuncts before the comparison (they guard reading ``index``),
        or None.
    :param domain: the isl set over the statement's variables without ``dim`` (named as the statement's).
    :param names: the isl names of those variables, in order.
    """

    dim: int
    index: object
    value: object
    guard: object
    domain: object
    names: tuple

    def loop_vars(self, stmt):
        """The statement's variables the scatter loops over: all but the output dimension ``dim``."""
        return tuple(v for i, v in enumerate(stmt.vars) if i != self.dim)

    def loop_statement(self, stmt):
        """The scatter's loop nest as a statement: per point of the other output dimensions, a sum of ``value``
        over the reduction points (what it costs, less the zeroing)."""
        return Statement(stmt.name, self.loop_vars(stmt), stmt.n_out - 1, self.domain.set_tuple_name(stmt.name),
                         (self.value,), stmt.combiner)


_FORMS = weakref.WeakKeyDictionary()


def naive_loops(ss):
    """Whether the stage schedule ``ss`` leaves a stage codegen's naive loops (no tile, vectors, unrolling nor
    phase): those of a one-hot sum are its scatter."""
    return ss.tile is None and ss.vectorize == 1 and ss.unroll == 1 and not (
        ss.phase is not None and any(x > 1 for x in ss.phase))


def scatter_form(op):
    """The :class:`Scatter` of a stage that is one one-hot sum, else None (remembered per stage).

    That is a stage of one float32, float64 or int64 output and one statement: a sum (identity 0, not accumulating) of
    ``select(c1 and ... and (E == v) and ..., X, 0)`` where ``v`` is an output variable that nothing else reads
    (not ``E``, ``X`` nor the other conjuncts) and the domain is ``[0, extent)`` in ``v`` whatever the other
    variables are (``{ S[v, c, k] }`` the product of ``v``'s range and a set over ``(c, k)``).
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
    [value] = st.values
    if not (isinstance(value, Call) and value.op == "select" and value.dtype == op.output_dtype(0)):
        return None
    cond, x, zero = value.args
    if not (isinstance(zero, Const) and zero.value == 0):
        return None
    parts = _conjuncts(cond)
    for at, part in enumerate(parts):
        if not (isinstance(part, Call) and part.op == "eq"):
            continue
        for side in range(2):
            v, e = _variable(part.args[side]), part.args[1 - side]
            if v is None or not dt.is_int(e.dtype):
                continue
            d = next((i for i, w in enumerate(st.out_vars) if w is v), None)
            if d is not None and dt.max_value(part.args[side].dtype) < op.shape[d] - 1:
                continue  # a cast that wraps the variable's range
            rest = parts[:at] + parts[at + 1:]
            if d is None or any(w is v for r in [e, x] + rest for w in free_vars(r)):
                continue
            domain = _without(st.domain, d, op.shape[d])
            if domain is None:
                return None
            post = parts[at + 1:]
            guarded = x
            for p in reversed(post):
                guarded = select(p, guarded, zero)
            names = tuple(nm for i, nm in enumerate(dim_names(st.vars)) if i != d)
            guard = functools.reduce(lambda a, b: binary("and", a, b), parts[:at]) if at else None
            return Scatter(d, e, guarded, guard, domain, names)
    return None


def _without(domain, d, extent):
    """``domain`` without its dimension ``d`` when it is ``[0, extent)`` there times the rest, else None.

    ``{ S[v, c, k] : 0 <= v < 10 and 0 <= c < 4 and k <= c + 3 and ... }`` is, in ``v``;
    ``{ S[v, c, k] : ... and k <= c + v }`` is not (which ``k`` reach ``v`` depends on ``v``)."""
    n = domain.dim(isl.dim_type.set)
    rest = domain.project_out(isl.dim_type.set, d, 1)
    line = isl.Set(f"{{ [x] : 0 <= x < {extent} }}", context=domain.get_ctx())
    line = line.insert_dims(isl.dim_type.set, 0, d).insert_dims(isl.dim_type.set, d + 1, n - d - 1)
    return rest if rest.insert_dims(isl.dim_type.set, d, 1).intersect(line).is_equal(domain.reset_tuple_id()) else None


__all__ = ["Scatter", "scatter_form", "naive_loops"]
