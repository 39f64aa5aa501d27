"""Reads outside their tensor, before code generation: proven ones are errors, unproven ones are guarded.

``pa.evaluate`` checks every read it makes; compiled code cannot, so a build looks at each read of each stage:

* an index isl proves outside its axis at a point the stage computes is an :class:`OutOfBoundsError`
  (``X[i, j + 1]`` over ``j < 5`` of a 5-wide ``X``: the points ``{ [i, j] : j = 4 }`` read column 5);
* an index nothing proves inside (one loaded from data, ``X[I[i]]``, or one outside the quasi-affine fragment,
  ``X[i * j]``) is read at its clamped position, and a float read out of range gives NaN:
  ``select(0 <= I[i] < n, X[min(max(I[i], 0), n - 1)], nan)``.  A wrong index then shows as NaN in the
  result (as a label out of range does in ``nn.cross_entropy``), never as another element's value, and the
  kernel never reads outside its buffer: it once segfaulted the user's process.  An integer or bool tensor has
  no NaN: such a read is an :class:`IndexingError` that says how to bound the index.

A read is proven inside by isl over the points where it is made (the stage's domain, a reduction's ``where``,
the conditions of the ``select``/``and``/``or`` branches it sits under), or, for an index outside isl's fragment,
by its interval (``min(max(I[i], 0), n - 1)``, ``floormod(I[i], n)``: ``take``'s clip and wrap modes).
"""

import islpy as isl

from ..errors import IndexingError, OutOfBoundsError
from ..te import dtype as dt
from ..te.construct import binary, select
from ..te.expr import Call, Const, Load, Reduce, Var
from ..te.graph import map_values
from ..te.tensor import ComputeOp, walk_ops
from .convert import NotAffine, ToIsl

__all__ = ["guarded_reads"]

_INF = float("inf")
# (node, guard) pairs walked before the paths to a shared node stop counting apart: a node under n nested selects of
# affine conditions is reached under up to 2^n guards
_MAX_VISITS = 20000


def guarded_reads(outputs):
    """The graph of ``outputs`` (a list of tensors) with every read that nothing proves inside its tensor guarded
    (see the module docstring): the same list when there is none.

    A gradient's stages (``PolyOp``) are isl's own: their quasi-affine reads are inside by construction, and only
    the others (at an index loaded from data, as a gather's gradient reads the forward's) are looked at.

    :raises OutOfBoundsError: a read isl proves outside its tensor, naming the stage, the tensor, the axis and a
        point.
    :raises IndexingError: an integer or bool tensor read at an index nothing bounds.
    """
    tmap = {}  # id(old tensor) -> new tensor
    keep = []  # the old tensors, so that their ids stay unique while tmap lives
    for op in walk_ops(outputs):
        if isinstance(op, ComputeOp):
            guarded = _compute_reads(op)
        elif hasattr(op, "statements"):
            guarded = {}
            for st in op.statements:
                guarded.update(_statement_reads(op, st))
        else:
            continue

        def fn(node, rebuilt, guarded=guarded):
            if isinstance(node, Load):
                nt = tmap.get(id(node.tensor))
                if nt is not None:
                    rebuilt = Load(nt, rebuilt.indices)
                if id(node) in guarded:
                    return _guard(rebuilt, guarded[id(node)])
                return rebuilt if rebuilt is not node else None
            return None

        new = map_values(op, fn) if guarded or any(id(t) in tmap for t in op.input_tensors) else op
        if new is not op:
            for i in range(op.num_outputs):
                keep.append(op.output(i))
                tmap[id(op.output(i))] = new.output(i)
    if not tmap:
        return list(outputs)
    return [tmap.get(id(t), t) for t in outputs]


def _compute_reads(op):
    body = op.body[0]
    vars_ = tuple(op.axis) + (tuple(body.axis) if isinstance(body, Reduce) else ())
    reads = _Reads(op.name, vars_, None, trust_affine=False)
    for e in op.body:
        if isinstance(e, Reduce):
            reads.walk(e.condition, reads.domain, True)
            t, _, exact = reads.cond(e.condition)
            for s in e.source:
                reads.walk(s, reads.domain.intersect(t), exact)
        else:
            reads.walk(e, reads.domain, True)
    return reads.out


def _statement_reads(op, st):
    try:
        reads = _Reads(op.name, st.vars, st.domain.reset_tuple_id(), trust_affine=True)
    except isl.Error:  # a domain in another space than its variables': no ranges (every unbounded index guarded)
        reads = _Reads(op.name, st.vars, isl.Set.universe(ToIsl(st.vars).space), trust_affine=True)
    for v in st.values:
        reads.walk(v, reads.domain, True)
    return reads.out


class _Reads:
    """A stage's reads (or one statement's), each with the points where it is made: ``out`` maps id(Load) to
    the axes whose index nothing bounds, for each read that needs a guard.

    ``domain``: the points (an isl set over ``vars_``), or None for the box of the IterVars' ranges;
    ``trust_affine``: quasi-affine indices are inside (isl made them), only the others are bounded."""

    def __init__(self, name, vars_, domain, trust_affine):
        self.name, self.vars, self.trust_affine = name, tuple(vars_), trust_affine
        self.conv = ToIsl(self.vars)
        if domain is None:
            domain = self.conv.univ
            for v in self.vars:
                a = self.conv.aff(v)
                domain = domain.intersect(a.ge_set(self.conv.const(v.lo))).intersect(
                    a.le_set(self.conv.const(v.hi - 1)))
        else:
            domain = self.conv.univ.intersect(domain)
        self.domain = domain
        self.out = {}
        self._seen, self._guards = set(), []
        self._conds = {}  # id(condition) -> cond(); the conditions are the stage's, alive while it is
        self._ranges = {}

    def cond(self, c):
        """``(T, F, exact)``: sets holding every point where ``c`` holds (``T``) and where it does not (``F``),
        exactly when ``exact``.  A conjunct outside isl's fragment (a loaded value) still leaves the others:
        ``M[i, j // 2] == j % 2 and j < 14`` holds only where ``j < 14``."""
        got = self._conds.get(id(c))
        if got is None:
            got = self._conds[id(c)] = self._cond(c)
        return got

    def _cond(self, c):
        univ = self.conv.univ
        s = self.conv.try_set(c)
        if s is not None:
            return s, univ.subtract(s), True
        if isinstance(c, Call) and c.op in ("and", "or"):
            (ta, fa, _), (tb, fb, _) = self.cond(c.args[0]), self.cond(c.args[1])
            if c.op == "and":  # not (a and b) = not a or not b
                return ta.intersect(tb), fa.union(fb), False
            return ta.union(tb), fa.intersect(fb), False
        if isinstance(c, Call) and c.op == "not":
            t, f, e = self.cond(c.args[0])
            return f, t, e
        return univ, univ, False

    def walk(self, e, guard, exact):
        """Every read under ``e``, made at the points ``guard`` (all of them when ``exact``, else some)."""
        if len(self._seen) > _MAX_VISITS:  # many paths to shared nodes: each once more, over all the points
            guard, exact = self.domain, False
        key = (id(e), id(guard))
        if key in self._seen or isinstance(e, (Const, Var)):
            return
        self._seen.add(key)
        self._guards.append(guard)  # alive, so that its id names it while the walk lasts
        if isinstance(e, Load):
            for ix in e.indices:
                self.walk(ix, guard, exact)
            self._read(e, guard, exact)
            return
        if isinstance(e, Call) and e.op in ("select", "and", "or"):
            a = e.args
            self.walk(a[0], guard, exact)
            t, f, known = self.cond(a[0])
            yes, no = guard.intersect(t), guard.intersect(f)
            if e.op == "select":
                self.walk(a[1], yes, exact and known)
                self.walk(a[2], no, exact and known)
            else:
                self.walk(a[1], yes if e.op == "and" else no, exact and known)
            return
        for ch in e.children():
            self.walk(ch, guard, exact)

    def _read(self, load, guard, exact):
        t = load.tensor
        unbounded = []
        for ax, (ix, n) in enumerate(zip(load.indices, t.shape)):
            try:
                a = self.conv.aff(ix)
            except NotAffine:
                lo, hi = _interval(ix, self._range)
                if not (lo >= 0 and hi <= n - 1):
                    unbounded.append(ax)
                continue
            if self.trust_affine:
                continue
            outside = a.lt_set(self.conv.const(0)).union(a.gt_set(self.conv.const(n - 1)))
            bad = guard.intersect(outside)
            if bad.is_empty():
                continue
            if exact:
                raise OutOfBoundsError(_proven(self.name, load, ax, ix, bad, self.vars))
            unbounded.append(ax)
        if not unbounded:
            return
        if not dt.is_float(t.dtype):
            raise IndexingError(
                f"stage {self.name!r}: read of {t.dtype} tensor {t.name!r} at axis {unbounded[0]} index "
                f"{load.indices[unbounded[0]]} that nothing bounds within [0, {t.shape[unbounded[0]]}): compiled "
                f"code cannot check it, and an integer has no NaN to show a wrong index; bound it "
                f"(pa.min/pa.max, or pa.ops.take with mode='clip')")
        prev = self.out.get(id(load), ())
        self.out[id(load)] = tuple(sorted(set(prev) | set(unbounded)))

    def _range(self, v):
        """(lo, hi) of variable ``v`` over the domain (infinite where isl finds no constant bound)."""
        r = self._ranges.get(id(v))
        if r is None:
            d = self.conv.pos.get(id(v))
            r = (-_INF, _INF)
            if d is not None and not self.domain.is_empty():
                lo, hi = self.domain.dim_min(d), self.domain.dim_max(d)
                if lo.is_cst() and hi.is_cst():
                    r = (_cst(lo, min), _cst(hi, max))
            self._ranges[id(v)] = r
        return r


def _cst(pw, pick):
    vals = []
    pw.foreach_piece(lambda _, aff: vals.append(aff.get_constant_val().to_python()))
    return pick(vals) if vals else (-_INF if pick is min else _INF)


def _proven(name, load, ax, ix, bad, vars_):
    point = bad.sample_point()
    at = ", ".join(f"{v.name}={point.get_coordinate_val(isl.dim_type.set, d).to_python()}"
                   for d, v in enumerate(vars_))
    return (f"stage {name!r}: read of tensor {load.tensor.name!r} at axis {ax} index {ix} is outside "
            f"[0, {load.tensor.shape[ax]}) where {at} (indices {', '.join(str(i) for i in load.indices)})")


def _guard(load, axes):
    """``load`` at its indices clamped on ``axes``, NaN where one of them is outside."""
    idx, ok = list(load.indices), None
    for ax in axes:
        ix, n = idx[ax], load.tensor.shape[ax]
        inside = binary("and", binary("ge", ix, 0), binary("lt", ix, n))
        ok = inside if ok is None else binary("and", ok, inside)
        idx[ax] = binary("min", binary("max", ix, 0), n - 1)
    return select(ok, Load(load.tensor, tuple(idx)), float("nan"))


def _interval(e, var_range):
    """(lo, hi) bounds of integer expression ``e`` (infinite where nothing bounds it); ``var_range(v)``: a
    variable's."""
    if isinstance(e, Const):
        return (e.value, e.value) if dt.is_int(e.dtype) or dt.is_bool(e.dtype) else (-_INF, _INF)
    if isinstance(e, Var):
        return var_range(e)
    if isinstance(e, Load):
        return (0, 1) if dt.is_bool(e.dtype) else (-_INF, _INF)
    if not isinstance(e, Call):
        return -_INF, _INF
    op, a = e.op, e.args
    if op in ("add", "sub", "mul", "min", "max"):
        (l0, h0), (l1, h1) = _interval(a[0], var_range), _interval(a[1], var_range)
        if op == "add":
            return l0 + l1, h0 + h1
        if op == "sub":
            return l0 - h1, h0 - l1
        if op == "min":
            return min(l0, l1), min(h0, h1)
        if op == "max":
            return max(l0, l1), max(h0, h1)
        ends = [0 if 0 in (x, y) else x * y for x in (l0, h0) for y in (l1, h1)]  # 0 * inf is 0 here
        return min(ends), max(ends)
    if op == "neg":
        lo, hi = _interval(a[0], var_range)
        return -hi, -lo
    if op == "floormod" and isinstance(a[1], Const) and a[1].value > 0:
        return 0, a[1].value - 1
    if op == "floordiv" and isinstance(a[1], Const) and a[1].value > 0:
        lo, hi = _interval(a[0], var_range)
        return lo // a[1].value if lo != -_INF else lo, hi // a[1].value if hi != _INF else hi
    if op == "select":
        (l1, h1), (l2, h2) = _interval(a[1], var_range), _interval(a[2], var_range)
        return min(l1, l2), max(h1, h2)
    if op == "cast" and dt.is_int(e.dtype):
        return _interval(a[0], var_range)
    return -_INF, _INF
