"""One-hot sums, which codegen runs as scatters.

A data-dependent read ``Y[k, c] = W[I[k], c]`` has the adjoint isl cannot solve (DESIGN.md, non-affine
indices): a gather over the consumer's domain, one comparison per output point and reduction point::

    dW[v, c] = sum_k select(I[k] == v, H[k, c], 0)          { S0[v, c, k] : 0 <= v < V and 0 <= c < C and ... }

Its output dimension ``v`` appears only in the comparison, so for each ``(c, k)`` exactly one ``v`` (or none) gets
a contribution.  The same sum, with the same additions in the same order at every output point, is::

    dW[:, c] = 0;  for k: { j = I[k]; if 0 <= j < V: dW[j, c] += H[k, c] }     { S0[c, k] : 0 <= c < C and ... }

|C| |K| iterations and a store per point instead of |V| |C| |K| comparisons (an embedding table's gradient: 10000
times fewer).  In general each value compared (``a = I[k]``) is a variable, and isl solves the output coordinates
the comparisons read from the ``a``'s and the other variables: ``v = a`` where ``0 <= a < V``; the gradient of
``take`` from a flattened table, ``I[k] // C == v and I[k] % C == c``, picks both coordinates; a strided max
pool's, ``A[n, c, y, x] == 3*i + j - 6*y - 2*x + 4``, picks ``i = 2*y + a//3 - 1`` and ``j = 2*x + a%3 - 1``.

:func:`scatter_form` recognises the stages that allow it; ``codegen/tree.py`` builds them that way under the
schedules :func:`blocks` allows (the naive loops, and blocks of the other output dimensions), and the cost model
prices them so (``schedule/cost.py``).
"""

import math
import weakref
from dataclasses import dataclass

import islpy as isl

from ..te import dtype as dt
from ..te.construct import cast
from ..te.expr import Call, Const, Load, Var
from ..te.visit import free_vars, post_order, substitute
from .convert import FromIsl, NotAffine, ToIsl, bounds, pieces, rename, reparametrised
from .simplify import fold_conditions
from .stage import Statement, dim_names, statements_of

#: dtypes a scatter accumulates in memory exactly as the gather's register does: the type code computes in is
#: the storage type (with 64-bit indices an int32 sum accumulates in a ``long`` register, and stored at every
#: step it would wrap differently)
_DTYPES = frozenset(("float32", "float64", "int64"))

#: the values a compared expression may take for a scatter (index-sized: the check's arithmetic on them stays far
#: from int64's limits)
_INDEX_RANGE = 2**31


@dataclass(frozen=True, eq=False)
class Scatter:
    """How a one-hot sum scatters: ``T[o with o[d] := pick_d] += value`` over ``domain``.

    :param index: the position of the sum among the stage's statements (the others store +0).
    :param steps: the condition's conjuncts, in its order: ``(a, E)`` binds the variable ``a`` (an
        int64 ``Var``) to the value ``E`` a comparison ``E == L(o, r)`` reads (``I[k]``), ``(None, c)`` is another
        conjunct.  Code runs them in this order, testing each conjunct: each reads only where the gather's
        condition read it.
    :param ranges: ``((a, lo, hi), ...)``: the values each comparison's affine side takes; code tests each ``a``
        there as it binds it (no arithmetic on an ``a`` outside them: they are index-sized).
    :param check: where the values bound select an output point (an int64 condition over the loop variables and
        the ``a``'s: ``0 <= a <= 9999``), or None when they always do.
    :param picks: ``((d, pick_d), ...)``: each picked output dimension, solved from the ``a``'s (``v = a``; a max
        pool's ``2*y - 1 + a // 3``) over the loop variables, in dimension order.
    :param value: the select's value, added at the picked point.
    :param domain: the isl set over the loop variables.
    :param names: the isl names of the loop variables, in order.
    :param loop: the loop variables: the output variables not picked, then the reduction variables, the
        statement's or the positions that replaced them (:func:`_over_positions`).
    :param order: per reduction variable of ``loop``, 1 where its loop runs up, -1 down: the gather's order of the
        reduction points, as the statement's variables ran.
    """

    index: int
    steps: tuple
    ranges: tuple
    check: object
    picks: tuple
    value: object
    domain: object
    names: tuple
    loop: tuple
    order: tuple

    @property
    def dims(self):
        """The picked output dimensions, in order."""
        return tuple(d for d, _ in self.picks)

    def blocks(self, ss, n_out):
        """:func:`blocks` of this scatter's picked dimensions."""
        return blocks(self.dims, ss, n_out)

    def loop_statement(self, stmt):
        """The scatter's loop nest as a statement: per point of the other output dimensions, a sum of ``value``
        over the reduction points (what it costs, less the zeroing)."""
        return Statement(stmt.name, self.loop, stmt.n_out - len(self.dims),
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
    accumulating) of ``select(c1 and ... and c_m, X, 0)`` whose conjuncts include comparisons ``E == L`` of a value
    ``E`` read from data with an affine ``L`` of the variables, such that the output variables the ``L``'s read
    (the picked ones) are a function of the other variables and the ``E``'s over the domain (isl says so and gives
    it), and nothing else reads them: neither ``X``, the ``E``'s nor the conjuncts that read data.  Affine conjuncts
    join the domain.  ``I[k] == v`` picks ``v = a``; a strided max pool's gradient, ``A[n, c, y, x] == 3*i + j - 6*y
    - 2*x + 4`` over ``{ [..., i, j, y, x] : 2*y - 1 <= i <= 2*y + 1 and ... }``, picks ``i = 2*y - 1 + a // 3`` and
    ``j = 2*x - 1 + a % 3``.
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


def _affine(tis, e):
    try:
        return tis.aff(e)
    except NotAffine:
        return None


def _comparison(part, tis, outs):
    """``(E, L)`` when the conjunct ``part`` compares an integer value ``E`` that is not affine with an affine ``L``
    that reads an output variable, else None."""
    if not (isinstance(part, Call) and part.op == "eq" and dt.is_int(part.args[0].dtype)):
        return None
    for side in range(2):
        e, lin = part.args[1 - side], part.args[side]
        if any(id(w) in outs for w in free_vars(lin)) and _affine(tis, lin) is not None and _affine(tis, e) is None:
            return e, lin
    return None


def _scatter_form(op):
    if op.num_outputs != 1 or op.output_dtype(0) not in _DTYPES:
        return None
    stmts = statements_of(op)
    # one sum, and maybe zero fills of the points it has no reduction points for (lift_where's "Z"): the
    # scatter's zeroing writes them
    sums = [i for i, st in enumerate(stmts) if st.combiner is not None]
    if len(sums) != 1 or any(not (i in sums or _zero_fill(st)) for i, st in enumerate(stmts)):
        return None
    index = sums[0]
    st = stmts[index]
    comb = st.combiner
    if st.accumulate or comb.kind() != "sum" or len(st.vars) == st.n_out:
        return None
    if math.copysign(1.0, comb.identity[0].value) < 0:  # from -0.0, the gather's first added +0.0 makes +0.0
        return None
    [value] = st.values
    if not (isinstance(value, Call) and value.op == "select" and value.dtype == op.output_dtype(0)):
        return None
    if not (isinstance(value.args[2], Const) and value.args[2].value == 0):
        return None
    n = st.n_out
    form = _form(index, st, tuple(st.vars), st.domain.reset_tuple_id(), value, (1,) * (len(st.vars) - n))
    if form is None:  # over the positions the compared data is read at (a stride-1 max pool's gradient)
        moved = _over_positions(st, value)
        form = None if moved is None else _form(index, st, *moved)
    return form


def _form(index, st, vars_, domain, value, order):
    """The Scatter of the sum ``st`` written over ``vars_`` (its output variables first), ``domain`` and ``value``
    (the same sum, maybe over other reduction variables: ``order`` says which way each must run), or None."""
    n = st.n_out
    out_vars = vars_[:n]
    cond, x, _ = value.args
    parts = _conjuncts(cond)
    outs = {id(v) for v in out_vars}
    tis = ToIsl(vars_)
    found = [_comparison(part, tis, outs) for part in parts]
    if not any(found):
        return None
    read = {id(w) for f in found if f is not None for w in free_vars(f[1])}
    picked = [d for d, v in enumerate(out_vars) if id(v) in read]
    pids = {id(out_vars[d]) for d in picked}
    avars = tuple(Var(f"pa_a{i}", "int64") for i in range(sum(1 for f in found if f)))
    every = vars_ + avars
    tis = ToIsl(every)
    space = rename(domain.add_dims(isl.dim_type.set, len(avars)), every)
    steps, it, tested, deferred = [], iter(avars), tis.univ, False
    region = space  # the domain: where the steps' reads were in their buffers, less the conjuncts that guard them
    for part, f in zip(parts, found):
        # a read after a conjunct only the check can test (it reads a picked variable: i >= r over the positions
        # i - r_at, which guarded A[i - r]) must be in its buffer without it
        if deferred and not _reads_inside(f[0] if f is not None else part, tis, region.intersect(tested)):
            return None
        if f is not None:
            a, (e, lin) = next(it), f
            space = space.intersect(tis.aff(a).eq_set(tis.aff(lin)))
            steps.append((a, e if e.dtype == "int64" else cast(e, "int64")))
            continue
        c = tis.try_set(part)
        if c is not None:
            space = space.intersect(c)
        # tested where it was written, unless only the check can (it reads a picked variable): an affine
        # conjunct may be what keeps a later read in its buffer (k < 30 and I[k] == v, with I of 30)
        if c is None or not any(id(w) in pids for w in free_vars(part)):
            steps.append((None, part))
            tested = tested if c is None else tested.intersect(c)
        else:
            deferred = True
    if any(id(w) in pids for _, e in steps for w in free_vars(e)) or any(id(w) in pids for w in free_vars(x)):
        return None  # each must be known before the store, from the data and the other variables
    # each a within the values its comparison's affine side takes: code tests that first, so that no arithmetic
    # on a wraps (2*a == b with a near the int64 limits: a helper found one) and a side that does not fit an
    # index (2**62 * v: the gather wraps it) is no scatter
    ranges = []
    for i, a in enumerate(avars):
        line = space.project_out(isl.dim_type.set, 0, len(vars_) + i).project_out(isl.dim_type.set, 1,
                                                                                     len(avars) - i - 1)
        if line.is_empty() or not line.is_bounded():
            return None
        [(lo, hi)] = bounds(line)
        if not -_INDEX_RANGE <= lo <= hi <= _INDEX_RANGE:
            return None
        ranges.append((a, lo, hi))
        tested = tested.intersect(tis.aff(a).ge_set(tis.const(lo))).intersect(tis.aff(a).le_set(tis.const(hi)))
    # the picked dimensions as a function of the others and the a's: move them to the map's range, in order
    m = isl.Map.from_domain(space)
    for d in reversed(picked):
        m = m.move_dims(isl.dim_type.out, 0, isl.dim_type.in_, d, 1)
    if not m.is_single_valued():
        return None
    pw = m.as_pw_multi_aff().coalesce()
    if pw.n_piece() != 1:
        return None
    [(_, solved)] = pieces(pw)
    loop = tuple(v for d, v in enumerate(vars_) if d not in picked)
    for d in reversed(picked):
        domain = domain.project_out(isl.dim_type.set, d, 1)
        tested = tested.project_out(isl.dim_type.set, d, 1)
    # what the check need not test again: the loop's domain, and the affine conjuncts the steps test
    known = rename(domain.add_dims(isl.dim_type.set, len(avars)), loop + avars).intersect(rename(tested, loop + avars))
    check = rename(m.domain(), loop + avars).gist(known)
    back = FromIsl(loop + avars, context=check.intersect(known))
    picks = tuple((d, back.aff_expr(solved.get_aff(i))) for i, d in enumerate(picked))
    test = None if check.plain_is_universe() else back.cond_of_set(check)
    names = tuple(nm for i, nm in enumerate(dim_names(vars_)) if i not in picked)
    for d, nm in enumerate(names):  # the positions' names too (a preimage keeps the replaced variables')
        domain = domain.set_dim_name(isl.dim_type.set, d, nm)
    return Scatter(index, tuple(steps), tuple(ranges), test, picks, x, domain, names, loop, order)


def _reads_inside(e, tis, region):
    """Whether every read of ``e`` is inside its tensor wherever ``region`` holds (isl; a read whose index is not
    affine: no)."""
    for ld in (nd for nd in post_order(e) if isinstance(nd, Load)):
        try:
            if not region.is_subset(tis.inside(ld)):
                return False
        except NotAffine:
            return False
    return True


def _over_positions(st, value):
    """``(vars, domain, value, order)``: the sum ``st`` over the positions its compared data is read at, or None.

    Each reduction variable ``r`` that a compared value's read index takes with output variables, ``idx = ±r +
    rest``, is replaced by that position ``p = idx`` (``r = ±(p - rest)``, the domain's preimage), where ``r`` had
    coefficient -1 its loop runs down (the gather's order).  A stride-1 max pool's gradient compares
    ``A[n, c, i - rh, j - rw] == 2*rh + rw``: over ``y = i - rh`` and ``x = j - rw`` it compares ``A[n, c, y, x]
    == 2*i - 2*y + j - x``, which picks ``i`` and ``j``.
    """
    n = st.n_out
    vars_, dom, order, done = tuple(st.vars), st.domain.reset_tuple_id(), [1] * (len(st.vars) - n), set()
    while (found := _position(value, vars_, n, done)) is not None:
        k, sign, aff = found
        dom, moved, r_expr = reparametrised(dom, vars_, k, aff)
        # the reads' indices written afresh by isl (i - (i - rh_at) is rh_at)
        value = fold_conditions(substitute(value, {vars_[k]: r_expr}), dom, moved)
        vars_, order[k - n] = moved, order[k - n] * sign
        done.add(k)
    return None if not done else (vars_, dom, value, tuple(order))


def _position(value, vars_, n, done):
    """``(k, sign, aff)`` for a reduction variable ``vars_[k]`` (not in ``done``) that an index of a read in a
    compared value takes alone among the reduction variables, with coefficient ``sign`` (±1), beside an output
    variable (``aff``: that index, an isl Aff over ``vars_``); else None."""
    tis = ToIsl(vars_)
    for part in _conjuncts(value.args[0]):
        if not (isinstance(part, Call) and part.op == "eq"):
            continue
        for side in part.args:
            if _affine(tis, side) is not None:
                continue
            for ld in (nd for nd in post_order(side) if isinstance(nd, Load)):
                for ix in ld.indices:
                    pw = _affine(tis, ix)
                    pcs = pieces(pw) if pw is not None else ()
                    if len(pcs) != 1 or pcs[0][1].dim(isl.dim_type.div):
                        continue
                    aff = pcs[0][1]
                    coef = [aff.get_coefficient_val(isl.dim_type.in_, d) for d in range(len(vars_))]
                    red = [d for d in range(n, len(vars_)) if not coef[d].is_zero()]
                    if (len(red) == 1 and red[0] not in done and (coef[red[0]].is_one() or coef[red[0]].is_negone())
                            and any(not coef[d].is_zero() for d in range(n))):
                        return red[0], 1 if coef[red[0]].is_one() else -1, aff
    return None


def _zero_fill(st):
    """A statement that stores +0 (an identity a scatter's zeroing writes anyway)."""
    [v] = st.values if len(st.values) == 1 else [None]
    return (st.combiner is None and isinstance(v, Const) and v.value == 0
            and math.copysign(1.0, v.value) > 0)


__all__ = ["Scatter", "scatter_form", "blocks"]
