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

from math import gcd

import islpy as isl

_dt = isl.dim_type

__all__ = ["phase_strides"]


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
