"""Stride-phase decomposition: ``StageSchedule.phase`` applied to a stage's statements.

A phase stride ``s_d`` on output dimension ``d`` writes its index ``x = s*q + p`` with the phase
``p = x mod s`` fixed: every statement ``S`` of the stage becomes one statement per phase
combination ``P`` (the isl map ``{ S[.., x, .., r] -> S_P[.., q, .., r'] : x = s*q + P }``
applied to its domain), in phase-major order.  With ``p`` a constant isl's AST generator writes
affine bounds (no ``floord``), and the quasi-affine index expressions of the body collapse:
``(2*q + 1) // 2`` is ``q``, ``(2*q + 1) % 2`` is ``1`` (``poly.convert`` round trip, exact on
the phase's domain).

A reduction variable ``r`` coupled to a phased dimension (a stride-3 convolution's data gradient:
``x - 4 <= 3*r <= x``, so ``r`` ranges over ``[q - 1, q]`` when ``p = 0``) is counted from ``q``:
``r = r' + a*q`` with ``a`` read off isl's lexmin and lexmax of ``r`` over the phase's domain
(taken on their largest pieces, where both move with ``q`` alike).  In the interior of the
output, ``r'`` then has bounds independent of ``q``: neighbouring ``q`` share the reduction loop,
so a block of them is a full tile (unrolled, vectorised, without guards), and reads such as
``H[r]`` are ``H[q + r']``: unit stride in ``q`` (``vloadN``).

Each phased statement is a :class:`PhasedStatement`: a ``poly.stage.Statement`` over the new
variables, plus what maps them back (codegen stores at ``s*q + p``; the legality check maps
instances back to the stage's points).  Everything downstream (tiling, full-tile splitting, the
grid) treats it as an ordinary statement of a stage whose shape is the ``q`` extents.
"""

import itertools
from dataclasses import dataclass

import islpy as isl

from ..poly.convert import FromIsl, NotAffine, ToIsl, bounds, pieces
from ..poly.stage import Statement, dim_names
from ..schedule.phase import phase_domain
from ..te import dtype as dt
from ..te.expr import Const, IterVar, Load, Var
from ..te.memo import Recent
from ..te.visit import transform, _rebuild_checked

_dt = isl.dim_type


@dataclass(frozen=True, eq=False)
class PhasedStatement(Statement):
    """One phase of a stage statement.

    ``vars`` are the statement's variables after the phase: per output dimension ``q_d`` (a new
    variable where ``strides[d] > 1``, the original one elsewhere), then the reduction variables
    (``r'_j`` where ``skew[j]`` is not all zero).  The stage's point is
    ``x_d = strides[d] * q_d + offsets[d]`` and the original reduction point
    ``r_j = r'_j + sum_d skew[j][d] * q_d``.
    """

    source: Statement = None
    strides: tuple = ()
    offsets: tuple = ()
    skew: tuple = ()  # per reduction variable, per output dimension: the coefficient of q_d in r_j
    phase_index: int = 0  # the phase combination's rank (row-major over the phased dimensions)

    __hash__ = object.__hash__


def active(phase):
    """True when ``phase`` (a StageSchedule.phase) changes anything."""
    return phase is not None and any(s > 1 for s in phase)


def phase_shape(shape, phase):
    """The ``q`` extents: the most points of one phase along each dimension."""
    return tuple(-(-n // s) for n, s in zip(shape, phase))


#: phased statements by (stage, its statements, phase), the objects held (their ids not reused meanwhile): isl
#: work (28 ms for conv2d_5x5_s3's data gradient in 9 phases) that every build of a candidate did again, and whose
#: statements the printer knows by object
_PHASED = Recent(256)


def phase_statements(op, stmts, phase):
    """The PhasedStatements of ``stmts`` (one stage's statements) under ``phase``, phase-major (remembered: the
    same objects for the same stage, statements and phase).

    A statement with no instance in a phase (a zero fill along one border) has no statement there.
    """
    stmts = tuple(stmts)
    key = (id(op), tuple(map(id, stmts)), tuple(phase))
    hit = _PHASED.get(key)
    if hit is None:
        hit = _PHASED.put(key, (op, stmts, tuple(_phase_statements(op, stmts, phase))))
    return list(hit[2])


def _phase_statements(op, stmts, phase):
    n = len(op.shape)
    dims = [d for d in range(n) if phase[d] > 1]
    out = []
    for k, combo in enumerate(itertools.product(*[range(phase[d]) for d in dims])):
        offs = [0] * n
        for d, p in zip(dims, combo):
            offs[d] = p
        tag = "_".join(map(str, combo))
        for st in stmts:
            pst = _phased(st, tuple(phase), tuple(offs), f"{st.name}_ph{tag}", k)
            if pst is not None:
                out.append(pst)
    return out


def _phased(st, strides, offs, name, k):
    n = st.n_out
    found = phase_domain(st.domain, n, strides, offs)
    if found is None:
        return None
    Dp, skew = found
    box = bounds(Dp)
    new_vars, subst = [], {}
    for d, v in enumerate(st.vars):
        lo, hi = box[d]
        if d < n and strides[d] > 1:
            nv = IterVar(f"{v.name}_q", v.dtype, lo=lo, extent=hi - lo + 1, kind="data")
            subst[id(v)] = (v, nv, d)
        elif d >= n and any(skew[d - n]):
            nv = IterVar(f"{v.name}_d", v.dtype, lo=lo, extent=hi - lo + 1, kind="reduce")
            subst[id(v)] = (v, nv, d)
        else:
            nv = v
        new_vars.append(nv)
    new_vars = tuple(new_vars)
    dom = Dp
    for i, nm in enumerate(dim_names(new_vars)):
        dom = dom.set_dim_name(_dt.set, i, nm)
    dom = dom.set_tuple_name(name)
    values = _rewrite(st.values, st, new_vars, subst, strides, offs, skew, dom)
    return PhasedStatement(name, new_vars, n, dom, values, st.combiner, st.accumulate,
                           source=st, strides=strides, offsets=offs, skew=tuple(map(tuple, skew)), phase_index=k)


def _rewrite(values, st, new_vars, subst, strides, offs, skew, context):
    """The statement's values over the phased variables: ``x -> s*q + p``, ``r -> r' + a*q``, and every
    quasi-affine integer subexpression that changed re-derived by isl on the phase's domain (exact there)."""
    n = st.n_out
    q_of = {d: nv for _, nv, d in subst.values() if d < n}
    repl = {}
    for vid, (v, nv, d) in subst.items():
        if d < n:
            e = nv if strides[d] == 1 else _lin(v.dtype, [(strides[d], nv)], offs[d])
        else:
            terms = [(1, nv)] + [(a, q_of.get(dd, new_vars[dd])) for dd, a in enumerate(skew[d - n]) if a]
            e = _lin(v.dtype, terms, 0)
        repl[vid] = e
    to_isl, from_isl = ToIsl(new_vars), FromIsl(new_vars, context)

    def fn(node, rebuilt):
        if isinstance(node, Var):
            return repl.get(id(node))
        if rebuilt is node:
            return None
        checked = _rebuild_checked(rebuilt)
        rebuilt = rebuilt if checked is None else checked
        if isinstance(rebuilt, (Load, Const, Var)) or not dt.is_int(rebuilt.dtype):
            return rebuilt
        try:
            ps = pieces(to_isl.aff(rebuilt))
        except NotAffine:
            return rebuilt
        if len(ps) != 1 or not ps[0][0].plain_is_universe():
            return rebuilt
        e = from_isl.aff_expr(ps[0][1])
        return e if e.dtype == rebuilt.dtype else rebuilt

    return tuple(transform(tuple(values), fn))


def _lin(dtype, terms, const):
    from ..te.construct import binary

    out = None
    for a, v in terms:
        t = v if a == 1 else binary("mul", Const(a, dtype), v)
        out = t if out is None else binary("add", out, t)
    if const:
        out = binary("add", out, Const(const, dtype))
    return out
