"""TE expressions <-> isl objects, for the quasi-affine part of the language.

To isl: integer index expressions built from variables, integer constants,
``+ - *`` (one side constant), ``//`` and ``%`` by constants, ``min``/``max``
and ``select`` on affine conditions become ``isl.PwAff``; comparisons and
``and``/``or``/``not`` of them become ``isl.Set``.  Anything else (a tensor
read, a product of variables, a float) raises :class:`NotAffine`, and the
caller keeps that part as an opaque guard.

From isl: ``isl.Aff`` (as found in the pieces of a ``PwMultiAff``) and the
constraints of a set come back as TE expressions with exact floor division
and modulo, cleaned up with the help of a context set (``j // 500``, not
``(499 + 499*j)//500``; ``m % 25``, not ``m - 25*(m//25)``).
"""

from fractions import Fraction
from math import floor as _ifloor

import islpy as isl

from ..te import dtype as dt
from ..te.construct import binary
from ..te.expr import Call, Const, IterVar, Var
from .stage import box_set, dim_names

_CTX = isl.DEFAULT_CONTEXT
_dt = isl.dim_type


class NotAffine(Exception):
    """Internal: an expression outside the quasi-affine fragment."""


# ---------------------------------------------------------------------------
# spaces
# ---------------------------------------------------------------------------

def set_space(vars_, name=None):
    sp = isl.Space.create_from_names(_CTX, set=dim_names(vars_))
    if name:
        sp = sp.set_tuple_name(_dt.set, name)
    return sp


def box(vars_, name=None):
    """The rectangle of the variables' ranges, as an isl set (unnamed tuple unless ``name``)."""
    return box_set(name or "", vars_)


def rename(s, vars_, name=None):
    """``s`` (a set over len(vars_) dims) with the dims and the tuple named after ``vars_``."""
    for d, nm in enumerate(dim_names(vars_)):
        s = s.set_dim_name(_dt.set, d, nm)
    return s.set_tuple_name(name) if name else s.reset_tuple_id()


# ---------------------------------------------------------------------------
# TE -> isl
# ---------------------------------------------------------------------------

class ToIsl:
    """Converts expressions over ``vars_`` (in order: isl dims 0..n-1), memoised."""

    def __init__(self, vars_):
        self.vars = tuple(vars_)
        self.pos = {id(v): d for d, v in enumerate(self.vars)}
        self.space = set_space(self.vars)
        self.ls = isl.LocalSpace.from_space(self.space)
        self.univ = isl.Set.universe(self.space)
        self.memo = {}

    def const(self, value):
        return isl.PwAff.from_aff(isl.Aff.zero_on_domain(self.ls).set_constant_val(isl.Val(int(value))))

    def aff(self, e):
        """An integer expression as an isl.PwAff (raises NotAffine)."""
        key = ("a", id(e))
        if key not in self.memo:
            self.memo[key] = (e, self._aff(e))
        return self.memo[key][1]

    def set(self, c):
        """A bool expression as an isl.Set (raises NotAffine)."""
        key = ("s", id(c))
        if key not in self.memo:
            self.memo[key] = (c, self._set(c))
        return self.memo[key][1]

    def try_set(self, c):
        try:
            return self.set(c)
        except NotAffine:
            return None

    def inside(self, load):
        """Where ``load`` reads inside its tensor, as an isl.Set over the variables (raises NotAffine):
        ``{ [v] : 0 <= index_d(v) < shape_d for every d }``."""
        inb = self.univ
        for ix, n in zip(load.indices, load.tensor.shape):
            a = self.aff(ix)
            inb = inb.intersect(a.ge_set(self.const(0))).intersect(a.le_set(self.const(n - 1)))
        return inb

    def outside(self, index, n):
        """Where the PwAff ``index`` is outside ``[0, n)``: one axis of the complement of :meth:`inside`."""
        return index.lt_set(self.const(0)).union(index.gt_set(self.const(n - 1)))

    def _aff(self, e):
        if isinstance(e, Const):
            if not dt.is_int(e.dtype):
                raise NotAffine(e)
            return self.const(e.value)
        if isinstance(e, Var):
            d = self.pos.get(id(e))
            if d is None or not dt.is_int(e.dtype):
                raise NotAffine(e)
            return isl.PwAff.from_aff(isl.Aff.var_on_domain(self.ls, _dt.set, d))
        if not isinstance(e, Call) or not (dt.is_int(e.dtype) or e.op == "select"):
            raise NotAffine(e)
        op, a = e.op, e.args
        if op == "add":
            return self.aff(a[0]).add(self.aff(a[1]))
        if op == "sub":
            return self.aff(a[0]).sub(self.aff(a[1]))
        if op == "neg":
            return self.aff(a[0]).neg()
        if op == "mul":
            x, y = self.aff(a[0]), self.aff(a[1])
            if not (x.is_cst() or y.is_cst()):
                raise NotAffine(e)
            return x.mul(y)
        if op in ("floordiv", "floormod"):
            if not (isinstance(a[1], Const) and a[1].value != 0):
                raise NotAffine(e)
            x, d = self.aff(a[0]), int(a[1].value)
            q = x.div(self.const(d)).floor()
            return q if op == "floordiv" else x.sub(q.mul(self.const(d)))
        if op == "min":
            return self.aff(a[0]).min(self.aff(a[1]))
        if op == "max":
            return self.aff(a[0]).max(self.aff(a[1]))
        if op == "select" and dt.is_int(e.dtype):
            c = self.set(a[0])
            return self.aff(a[1]).intersect_domain(c).union_add(self.aff(a[2]).intersect_domain(self.univ.subtract(c)))
        if op == "cast" and dt.is_int(a[0].dtype):
            return self.aff(a[0])
        raise NotAffine(e)

    def _set(self, c):
        if isinstance(c, Const) and dt.is_bool(c.dtype):
            return self.univ if c.value else isl.Set.empty(self.space)
        if not isinstance(c, Call) or not dt.is_bool(c.dtype):
            raise NotAffine(c)
        op, a = c.op, c.args
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            if not dt.is_int(a[0].dtype):
                raise NotAffine(c)
            x, y = self.aff(a[0]), self.aff(a[1])
            return getattr(x, op + "_set")(y)
        if op == "and":
            return self.set(a[0]).intersect(self.set(a[1]))
        if op == "or":
            return self.set(a[0]).union(self.set(a[1])).coalesce()
        if op == "not":
            return self.univ.subtract(self.set(a[0])).coalesce()
        raise NotAffine(c)


# ---------------------------------------------------------------------------
# isl -> TE: integer linear forms with floor-divisions, cleaned up
# ---------------------------------------------------------------------------

def _frac(val):
    return Fraction(str(val))


class Lin:
    """``sum(coef * term) + const`` with integer coefficients.

    A term is ``("v", d)`` (variable d) or ``("f", lin_key, den)`` for
    ``floor(lin / den)``.
    """

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms = {k: c for k, c in (terms or {}).items() if c}
        self.const = const

    def key(self):
        return (tuple(sorted(self.terms.items(), key=lambda kv: repr(kv[0]))), self.const)

    def scaled(self, k):
        return Lin({t: c * k for t, c in self.terms.items()}, self.const * k)

    def plus(self, other, k=1):
        terms = dict(self.terms)
        for t, c in other.terms.items():
            terms[t] = terms.get(t, 0) + k * c
        return Lin(terms, self.const + k * other.const)


def _lin_from_key(key):
    terms, const = key
    return Lin(dict(terms), const)


class FromIsl:
    """Turns isl affine objects over ``vars_`` into TE expressions.

    ``context`` (an isl set over the same dims, or None) is where the result
    must be exact; it lets floor-divisions whose remainder part is constant on
    the context collapse (``(499 + 499*j)//500 -> j`` for ``0 <= j < 500``).
    """

    def __init__(self, vars_, context=None):
        self.vars = tuple(vars_)
        self.context = None if context is None else context.reset_tuple_id()
        self.to_isl = ToIsl(self.vars)
        itypes = [v.dtype for v in self.vars if dt.is_int(v.dtype)]
        self.idtype = "int64" if "int64" in itypes else "int32"

    # -- reading isl ---------------------------------------------------------
    def lin_of_aff(self, aff):
        """(Lin numerator, denominator) of an isl.Aff; divs become floor terms."""
        n = aff.dim(_dt.in_)
        if n != len(self.vars):
            raise NotAffine(aff)
        den = _frac(aff.get_denominator_val())
        terms = {}
        for d in range(n):
            c = _frac(aff.get_coefficient_val(_dt.in_, d)) * den
            if c:
                terms[("v", d)] = int(c)
        for k in range(aff.dim(_dt.div)):
            c = _frac(aff.get_coefficient_val(_dt.div, k)) * den
            if c:
                t = self._div_term(aff.get_div(k))  # recursive: compute it once
                terms[t] = terms.get(t, 0) + int(c)
        const = int(_frac(aff.get_constant_val()) * den)
        return Lin(terms, const), int(den)

    def _div_term(self, div_aff):
        lin, den = self.lin_of_aff(div_aff)
        return self._floor_term(lin, den)

    def _floor_term(self, lin, den):
        g = _gcd_all(list(lin.terms.values()) + [den])
        if g > 1:  # floor((g*a + c)/(g*d)) = floor((a + floor(c/g))/d)
            lin = Lin({t: c // g for t, c in lin.terms.items()}, _ifloor(Fraction(lin.const, g)))
            den //= g
        return ("f", lin.key(), den)

    def lin_of_constraint(self, c):
        n = c.dim(_dt.set)
        terms = {}
        for d in range(n):
            v = int(_frac(c.get_coefficient_val(_dt.set, d)))
            if v:
                terms[("v", d)] = v
        for k in range(c.dim(_dt.div)):
            v = int(_frac(c.get_coefficient_val(_dt.div, k)))
            if v:
                t = self._div_term(c.get_div(k))
                terms[t] = terms.get(t, 0) + v
        return Lin(terms, int(_frac(c.get_constant_val())))

    # -- cleaning ------------------------------------------------------------
    def _range(self, lin):
        """(min, max) of an integer Lin over the context, or None if unknown/unbounded."""
        if self.context is None:
            return None
        try:
            pa = self.to_isl.aff(self.lin_expr(lin, clean=False))
            a = pa.as_aff() if pa.isa_aff() else pa
            lo, hi = _frac(self.context.min_val(a)), _frac(self.context.max_val(a))
        except (ValueError, NotAffine, isl.Error):  # unbounded (infty/NaN) or not convertible: no information
            return None
        if lo.denominator != 1 or hi.denominator != 1:
            return None
        return int(lo), int(hi)

    def clean_floor(self, lin, den):
        """floor(lin/den) as a Lin (q + constant when the remainder part is fixed on the context)."""
        if den == 1:
            return lin
        if den < 0:
            lin, den = lin.scaled(-1), -den
        if all(c % den == 0 for c in lin.terms.values()):
            return Lin({t: c // den for t, c in lin.terms.items()}, _ifloor(Fraction(lin.const, den)))
        for mode in ("floor", "ceil", "near"):
            q, r = {}, {}
            for t, c in lin.terms.items():
                qq = c // den if mode == "floor" else -((-c) // den) if mode == "ceil" else round(Fraction(c, den))
                q[t], r[t] = qq, c - qq * den
            rng = self._range(Lin(r, lin.const))
            if rng is not None and _ifloor(Fraction(rng[0], den)) == _ifloor(Fraction(rng[1], den)):
                return Lin(q, _ifloor(Fraction(rng[0], den)))
        if lin.terms and all(c < 0 for c in lin.terms.values()):
            # floor((c - x)/d) == -floor((x - c + d - 1)/d): a numerator with positive terms reads better
            inner = lin.scaled(-1)
            inner.const += den - 1
            return self._plain_floor(inner, den).scaled(-1)
        return self._plain_floor(lin, den)

    def _plain_floor(self, lin, den):
        """floor(lin/den) with the constant of the numerator in [0, den): floor((x + 7)/5) = floor((x + 2)/5) + 1."""
        q, c = divmod(lin.const, den)
        return Lin({self._floor_term(Lin(lin.terms, c), den): 1}, q)

    # -- TE output -----------------------------------------------------------
    def _v(self, d):
        return self.vars[d]

    def _c(self, v):
        return Const(v, self.idtype)

    def lin_expr(self, lin, clean=True):
        """A Lin as a TE integer expression (mod patterns recognised)."""
        terms = dict(lin.terms)
        const = lin.const
        mods = []
        if clean:
            # k*a - k*d*floor(a/d) == k*(a % d)
            for t in sorted((t for t in terms if t[0] == "f"), key=repr):
                c = terms.get(t, 0)
                _, key, den = t
                if not c or c % den:
                    continue
                k = -c // den
                inner = _lin_from_key(key)
                if inner.terms and all(terms.get(u, 0) == k * cu for u, cu in inner.terms.items()):
                    for u in inner.terms:
                        del terms[u]
                    del terms[t]
                    const -= k * inner.const
                    mods.append((k, inner, den))
        pos, neg = [], []
        order = sorted(terms, key=lambda t: (0, t[1]) if t[0] == "v" else (1, repr(t)))
        for t in order:
            c = terms[t]
            x = self._v(t[1]) if t[0] == "v" else self._floor_expr(t, clean)
            (pos if c > 0 else neg).append((abs(c), x))
        for k, inner, den in mods:
            x = binary("floormod", self.lin_expr(inner, clean), self._c(den))
            (pos if k > 0 else neg).append((abs(k), x))
        out = None
        for c, x in pos:
            term = x if c == 1 else binary("mul", self._c(c), x)
            out = term if out is None else binary("add", out, term)
        if out is None:
            if not neg:
                return self._c(const)
            out = self._c(const)
            const = 0
        for c, x in neg:
            term = x if c == 1 else binary("mul", self._c(c), x)
            out = binary("sub", out, term)
        if const > 0:
            out = binary("add", out, self._c(const))
        elif const < 0:
            out = binary("sub", out, self._c(-const))
        return out

    def _floor_expr(self, t, clean):
        _, key, den = t
        return binary("floordiv", self.lin_expr(_lin_from_key(key), clean), self._c(den))

    def aff_expr(self, aff):
        """An isl.Aff (integer valued on the context) as a clean TE expression."""
        lin, den = self.lin_of_aff(aff)
        lin = self._clean_lin(lin)
        return self.lin_expr(self.clean_floor(lin, den))

    def _clean_lin(self, lin):
        """Clean every floor term of a Lin against the context (innermost first)."""
        out = Lin({}, lin.const)
        for t, c in lin.terms.items():
            if t[0] == "v":
                out = out.plus(Lin({t: c}))
            else:
                inner = self._clean_lin(_lin_from_key(t[1]))
                out = out.plus(self.clean_floor(inner, t[2]), c)
        return out

    def cond_of_set(self, s):
        """A bool TE expression true exactly on the points of ``s`` (constraints as written by isl)."""
        s = s.compute_divs() if s.dim(_dt.div) or any(b.dim(_dt.div) for b in s.get_basic_sets()) else s
        disj = None
        for bset in s.get_basic_sets():
            conj = None
            for c in bset.get_constraints():
                if isl.BasicSet.universe(bset.get_space()).add_constraint(c).is_universe():
                    continue  # what a div's definition says alone: a <= 3*floor(a/3) + 2
                e = self.constraint_expr(c)
                conj = e if conj is None else binary("and", conj, e)
            if conj is None:
                conj = Const(True, "bool")
            disj = conj if disj is None else binary("or", disj, conj)
        return Const(False, "bool") if disj is None else disj

    def constraint_expr(self, c):
        lin = self._clean_lin(self.lin_of_constraint(c))
        if c.is_equality() and not lin.terms:
            return Const(lin.const == 0, "bool")
        # a mod pattern as an equality: a - d*floor(a/d) == 0  ->  a % d == 0
        neg = Lin({t: -v for t, v in lin.terms.items() if v < 0})
        pos = Lin({t: v for t, v in lin.terms.items() if v > 0})
        if c.is_equality():
            for cand in (lin, lin.scaled(-1)):
                e = self.lin_expr(cand)
                if isinstance(e, Call) and (e.op == "floormod" or e.op == "mul" and e.args[1].op == "floormod"):
                    return binary("eq", e, self._c(0))
            # write  a == b  with positive coefficients on both sides
            if lin.const > 0:
                pos.const = lin.const
            else:
                neg.const = -lin.const
            return binary("eq", self.lin_expr(pos), self.lin_expr(neg))
        # pos + const >= neg
        if not neg.terms:
            return binary("ge", self.lin_expr(pos), self._c(-lin.const))
        if not pos.terms:
            return binary("le", self.lin_expr(neg), self._c(lin.const))
        if lin.const == -1:  # neg + 1 <= pos  is  neg < pos
            return binary("lt", self.lin_expr(neg), self.lin_expr(pos))
        if lin.const >= 0:
            pos.const = lin.const
        else:
            neg.const = -lin.const
        return binary("le", self.lin_expr(neg), self.lin_expr(pos))


def reparametrised(dom, vars_, k, aff, scale=1, suffix="_at"):
    """``vars_[k]`` replaced by a new variable ``p`` with ``scale * p = aff`` (``aff``: an isl Aff over ``vars_`` in
    which ``vars_[k]`` has coefficient +-1): ``(domain, variables, expression of vars_[k] over them)``.

    The domain is ``dom``'s preimage under ``vars_[k] = ±(scale * p - rest)``, ``p`` an ``IterVar`` named after
    ``vars_[k]`` with ``suffix``, over the values it takes there (``{ [i, r] : 0 <= i - r < 8 }`` with
    ``aff = i - r`` is ``{ [i, p] : 0 <= p < 8 }``, ``r = i - p``)."""
    sign = 1 if aff.get_coefficient_val(_dt.in_, k).is_one() else -1
    rest = aff.set_coefficient_val(_dt.in_, k, 0)
    p_aff = isl.Aff.var_on_domain(isl.LocalSpace.from_space(rest.get_domain_space()), _dt.set, k)
    r_aff = p_aff.scale_val(isl.Val(scale)).sub(rest)
    r_aff = r_aff if sign == 1 else r_aff.neg()
    ma = isl.MultiAff.identity(isl.Space.map_from_set(rest.get_domain_space())).set_aff(k, r_aff)
    dom = dom.reset_tuple_id().preimage_multi_aff(ma).coalesce()
    lo, hi = bounds(dom)[k]
    p = IterVar(vars_[k].name + suffix, vars_[k].dtype, lo=lo, extent=hi - lo + 1, kind="reduce")
    moved = vars_[:k] + (p,) + vars_[k + 1:]
    return dom, moved, FromIsl(moved, dom).aff_expr(r_aff)


def _gcd_all(xs):
    from math import gcd

    g = 0
    for x in xs:
        g = gcd(g, abs(int(x)))
    return g


def pieces(pw):
    """The (set, affine) pieces of an isl PwAff / PwMultiAff."""
    out = []
    pw.foreach_piece(lambda s, a: out.append((s, a)))
    return out


def bounds(s):
    """Per-dimension (min, max) integers of a bounded, non-empty set."""
    out = []
    for d in range(s.dim(_dt.set)):
        lo, hi = s.dim_min_val(d), s.dim_max_val(d)
        out.append((int(_frac(lo)), int(_frac(hi))))
    return out


def bounding_box(s):
    """(:func:`bounds` of a bounded, non-empty set, the box they span in its space)."""
    bb = bounds(s)
    box = isl.Set.universe(s.get_space())
    for d, (lo, hi) in enumerate(bb):
        box = box.lower_bound_val(_dt.set, d, isl.Val(lo)).upper_bound_val(_dt.set, d, isl.Val(hi))
    return bb, box


def count(s):
    """The number of integer points of a bounded set.

    isl's ``count_val`` enumerates, which is hopeless on a 5-d box of 10^11
    points; so each basic set (made disjoint) is split into groups of
    dimensions that share no constraint, each group is counted on its own,
    and the counts are multiplied.
    """
    s = s.reset_tuple_id()
    total = 0
    for bset in s.make_disjoint().get_basic_sets():
        total += _count_basic(bset)
    return total


def _count_basic(bset):
    n = bset.dim(_dt.set)
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def div_dims(k, seen=()):
        aff = bset.get_div(k)
        dims = [d for d in range(n) if _frac(aff.get_coefficient_val(_dt.in_, d))]
        for j in range(aff.dim(_dt.div)):
            if _frac(aff.get_coefficient_val(_dt.div, j)) and j not in seen:
                dims += div_dims(j, seen + (k,))
        return dims

    ndiv = bset.dim(_dt.div)
    try:
        divs = [div_dims(k) for k in range(ndiv)]
    except Exception:  # noqa: BLE001 - divs without an explicit expression: count as one group
        return int(_frac(isl.Set.from_basic_set(bset).count_val()))
    for c in bset.get_constraints():
        dims = [d for d in range(n) if _frac(c.get_coefficient_val(_dt.set, d))]
        for k in range(ndiv):
            if _frac(c.get_coefficient_val(_dt.div, k)):
                dims += divs[k]
        for d in dims[1:]:
            parent[find(d)] = find(dims[0])
    groups = {}
    for d in range(n):
        groups.setdefault(find(d), []).append(d)
    if len(groups) <= 1:
        return int(_frac(isl.Set.from_basic_set(bset).count_val()))
    result = 1
    whole = isl.Set.from_basic_set(bset)
    for dims in groups.values():
        part = whole
        for d in reversed(range(n)):
            if d not in dims:
                part = part.project_out(_dt.set, d, 1)
        c = int(_frac(part.count_val()))
        if c == 0:
            return 0
        result *= c
    return result


__all__ = ["NotAffine", "ToIsl", "FromIsl", "Lin", "box", "rename", "pieces", "bounds", "count", "reparametrised",
           "set_space"]
