"""Which stages a stride-phase decomposition (``StageSchedule.phase``) applies to, read off isl.

:func:`phase_strides` finds, per output dimension, the stride ``s`` whose phases ``x mod s`` make a
stage's loops affine; codegen/phase.py does the decomposition.  Two sources, both from the isl form
of the stage's statements, never from op names:

* the domain: a constraint that couples a reduction variable ``r`` with coefficient ``c_r`` to an
  output dimension ``x`` with coefficient ``c_x`` (a stride-3 convolution's data gradient:
  ``x - 4 <= 3*r <= x``; a dilation-2 one: ``x - 29 <= 2*r <= x``) gives
  ``s = |c_r| / gcd(c_r, c_x)``: with ``x = s*q + p`` and ``p`` fixed the bound on ``r`` is affine in
  ``q``.  Existentially quantified variables (isl divs) in the domain count the same way, with their
  denominator as the coefficient;
* the values: every quasi-affine index or condition (``H[x // 2]``, ``x % 2 == a[..]`` in a pool's
  gradient) converted to an isl piecewise affine function; a floor division ``floor(e / m)`` in it
  whose ``e`` involves ``x`` with coefficient ``c`` gives ``s = m / gcd(m, c)``.

Several sources combine by their least common multiple; a stride larger than the dimension's extent
is dropped (a phase needs a point per remainder).
"""

import itertools
from math import gcd

import islpy as isl

from ..poly.convert import bounding_box, count, pieces

_dt = isl.dim_type

__all__ = ["phase_strides", "phase_domain", "phase_boxes"]


def _lcm(a, b):
    return a * b // gcd(a, b)


def _frac(v):
    from fractions import Fraction

    return Fraction(str(v))


def phase_strides(op):
    """Per output dimension (outermost first) the stride-phase ``s`` that makes ``op``'s loops affine, or None.

    :param op: a stage operation (a compute or a polyhedral stage: anything ``poly.stage.statements_of`` takes).
    :returns: a tuple of positive ints, one per output dimension (1: no phase there), ready for
        ``StageSchedule(phase=...)``; None when no dimension has a stride above 1 (a stride-1 convolution's
        data gradient, a dense layer) or the stage has no statement form.
    """
    from ..errors import PolyadError
    from ..poly.stage import statements_of

    try:
        stmts = statements_of(op)
    except PolyadError:
        return None
    n = len(op.shape)
    out = [1] * n
    for st in stmts:
        if st.n_out != n:
            continue
        for d, s in enumerate(_domain_strides(st)):
            out[d] = _lcm(out[d], s)
        for d, s in enumerate(_value_strides(st)):
            out[d] = _lcm(out[d], s)
    out = [s if s <= ext else 1 for s, ext in zip(out, op.shape)]
    return tuple(out) if any(s > 1 for s in out) else None


def phase_domain(domain, n_out, strides, offsets):
    """One phase of a statement's domain, counted from its ``q``: ``(Dp, skew)``, or None where the phase has no
    point.

    ``Dp`` is the isl set ``{ [pa_q.., pa_s..] }`` of the phase ``x = strides*q + offsets``, each reduction
    variable ``r_j = s_j + sum_d skew[j][d] * q_d`` counted from the ``q`` it slides with (:func:`_skews`):
    ``{ [x, r] : x - 4 <= 3*r <= x }`` in phase ``x = 3*q`` is ``{ [q, s] : -1 <= s <= 0 }``, with skew 1.
    codegen/phase.py builds its statements on it; :func:`phase_boxes` its bounding boxes.
    """
    n, m = n_out, domain.dim(_dt.set) - n_out
    xs = [f"pa_x{d}" for d in range(n)] + [f"pa_r{j}" for j in range(m)]
    qs = [f"pa_q{d}" for d in range(n)] + xs[n:]
    D = domain.reset_tuple_id()
    for i, nm in enumerate(xs):
        D = D.set_dim_name(_dt.set, i, nm)
    cons = " and ".join(f"pa_x{d} = {s}*pa_q{d} + {p}" for d, (s, p) in enumerate(zip(strides, offsets))) or "true"
    Dq = D.apply(isl.Map(f"{{ [{', '.join(xs)}] -> [{', '.join(qs)}] : {cons} }}"))
    if Dq.is_empty():
        return None
    skew = _skews(Dq, n, m, strides)
    ss = qs[:n] + [f"pa_s{j}" for j in range(m)]
    to_s = isl.Map(f"{{ [{', '.join(qs)}] -> [{', '.join(ss)}] : "
                   + (" and ".join(f"pa_r{j} = {e}" for j, e in enumerate(_sums(skew))) or "true") + " }")
    return Dq.apply(to_s).coalesce(), skew


def _sums(skew):
    """``r_j`` in terms of the skewed variables: ``pa_s{j} + a*pa_q{d}..``."""
    return [" + ".join([f"pa_s{j}"] + [f"{a}*pa_q{d}" for d, a in enumerate(row) if a]) for j, row in enumerate(skew)]


def phase_boxes(domain, n_out, strides):
    """The union over the phases of ``strides`` of each phase's skewed domain's bounding box, in the domain's own
    coordinates (unnamed tuple): what ``domain`` would be were no phase clipped but by boxes.

    A stride-2 convolution's data gradient (3 taps, padding 1, 28 rows of the output gradient ``H``) reads
    ``H[y]`` over ``{ [x, y] : x - 1 <= 2*y <= x + 1 and 0 <= x < 56 and 0 <= y < 28 }``: its odd phase
    ``x = 2*q + 1`` runs ``y = q + s`` for ``s`` in ``[0, 1]`` but at ``q = 27``, where ``H`` ends.  Its
    phase boxes drop that clip, ``0 <= y < 28`` becomes ``0 <= y <= 28``: every phase a box, one more row read.
    None when a phase has no point or is unbounded.
    """
    n, m = n_out, domain.dim(_dt.set) - n_out
    dims = [d for d in range(n) if strides[d] > 1]
    out = None
    for combo in itertools.product(*[range(strides[d]) for d in dims]):
        offs = [0] * n
        for d, p in zip(dims, combo):
            offs[d] = p
        found = phase_domain(domain, n, strides, offs)
        if found is None or not found[0].is_bounded():
            return None
        Dp, skew = found
        box = bounding_box(Dp)[1]
        qs = [f"pa_q{d}" for d in range(n)] + [f"pa_s{j}" for j in range(m)]
        xs = [f"pa_x{d}" for d in range(n)] + [f"pa_r{j}" for j in range(m)]
        back = " and ".join([f"pa_x{d} = {s}*pa_q{d} + {p}" for d, (s, p) in enumerate(zip(strides, offs))]
                            + [f"pa_r{j} = {e}" for j, e in enumerate(_sums(skew))])
        got = box.apply(isl.Map(f"{{ [{', '.join(qs)}] -> [{', '.join(xs)}] : {back} }}"))
        out = got if out is None else out.union(got)
    return out.coalesce()


def _domain_strides(st):
    """Strides from the constraints of a statement's domain (reduction coefficients against output ones)."""
    n, m = st.n_out, len(st.vars) - st.n_out
    out = [1] * n
    for b in st.domain.get_basic_sets():
        divs = [_known_div(b, k) for k in range(b.dim(_dt.div))]
        for c in b.get_constraints():
            co = [int(_frac(c.get_coefficient_val(_dt.set, d))) for d in range(n)]
            cr = [abs(int(_frac(c.get_coefficient_val(_dt.set, n + j)))) for j in range(m)]
            for k, dv in enumerate(divs):
                if dv is not None and _frac(c.get_coefficient_val(_dt.div, k)):
                    # an existential q = floor(e / den): the constraint relates x to den*q
                    for d, s in enumerate(_aff_strides(dv, n)):
                        out[d] = _lcm(out[d], s)
            red = max(cr, default=0)
            if red > 1:
                for d in range(n):
                    if co[d]:
                        out[d] = _lcm(out[d], red // gcd(red, abs(co[d])))
    return out


def _known_div(b, k):
    """Div ``k`` of basic set ``b``, or None where isl does not know it as ``floor(e / den)``: a division of an
    existential, ``{ [i0, i] : exists e0 : 5*floor((-1 - i0 + 2e0)/5) <= -4 - i0 + 2e0 and ... }`` in the gradient
    of ``sum(X[3k] * X[(i + 2k) % 5])``, raised isl's "some divs are unknown" out of ``pa.build``."""
    try:
        return b.get_div(k)
    except isl.Error:
        return None


def _aff_strides(aff, n):
    """Strides of the output dimensions in an isl Aff ``floor(e / den)`` (a div): den / gcd(den, coefficient)."""
    den = int(_frac(aff.get_denominator_val()))
    out = [1] * n
    if den <= 1:
        return out
    for d in range(min(n, aff.dim(_dt.in_))):
        c = int(_frac(aff.get_coefficient_val(_dt.in_, d)) * den)
        if c:
            out[d] = den // gcd(den, abs(c))
    return out


def _value_strides(st):
    """Strides from the floor divisions of the quasi-affine indices and conditions in a statement's values."""
    from ..poly.convert import NotAffine, ToIsl, pieces
    from ..te import dtype as dt
    from ..te.expr import Call, Load
    from ..te.visit import post_order

    n = st.n_out
    out = [1] * n
    to_isl = ToIsl(st.vars)
    roots = []
    for nd in post_order(tuple(st.values)):
        if isinstance(nd, Load):
            roots.extend(nd.indices)
        elif isinstance(nd, Call) and nd.op in ("floordiv", "floormod") and dt.is_int(nd.dtype):
            roots.append(nd)
    for e in roots:
        try:
            pw = to_isl.aff(e)
        except NotAffine:
            continue
        for s, aff in pieces(pw):
            for k in range(aff.dim(_dt.div)):
                if _frac(aff.get_coefficient_val(_dt.div, k)):
                    for d, x in enumerate(_aff_strides(aff.get_div(k), n)):
                        out[d] = _lcm(out[d], x)
            for b in s.get_basic_sets():
                for k in range(b.dim(_dt.div)):
                    for d, x in enumerate(_aff_strides(b.get_div(k), n)):
                        out[d] = _lcm(out[d], x)
    return out


def _skews(Dq, n, m, strides):
    """Per reduction variable, per output dimension, the coefficient ``a`` of ``q_d`` in ``r = r' + a*q_d``.

    Read off isl: the lexmin and lexmax of ``r_j`` as functions of the output point ``q`` over the
    phase's domain, on their largest pieces (the interior).  Where both move with ``q_d`` by the same
    integer coefficient, ``r_j``'s window slides with ``q_d`` and is re-counted from it; otherwise
    (a box-bounded variable: a stride-1 convolution's kernel offset) ``a = 0``.  Only phased
    dimensions are skewed.
    """
    out = []
    for j in range(m):
        row = [0] * n
        M = isl.Map.from_range(Dq.project_out(_dt.set, n + j + 1, m - j - 1).project_out(_dt.set, n, j))
        M = M.move_dims(_dt.in_, 0, _dt.out, 0, n)
        lo, hi = _main_piece(M.lexmin_pw_multi_aff()), _main_piece(M.lexmax_pw_multi_aff())
        if lo is not None and hi is not None:
            for d in range(n):
                if strides[d] <= 1:
                    continue
                a, b = _coef(lo, d), _coef(hi, d)
                if a == b and a is not None:
                    row[d] = a
        out.append(row)
    return out


def _main_piece(pma):
    best, best_n = None, -1
    for s, ma in pieces(pma):
        try:
            c = count(s)
        except Exception:  # noqa: BLE001 - an unbounded or odd piece: not the interior
            continue
        if c > best_n:
            best, best_n = ma.get_at(0), c
    return best


def _coef(aff, d):
    if aff.dim(_dt.div):
        for k in range(aff.dim(_dt.div)):
            if not aff.get_coefficient_val(_dt.div, k).is_zero():
                return None
    v = aff.get_coefficient_val(_dt.in_, d)
    if not v.is_int():
        return None
    return int(v.to_python())
