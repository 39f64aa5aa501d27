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

A read is proven inside by isl over the points where it may be made (the stage's domain, a reduction's ``where``,
the conditions of the ``select``/``and``/``or`` branches it sits under, a condition on loaded values by its affine
conjuncts), or, for an index outside isl's fragment, by its interval (``min(max(I[i], 0), n - 1)``,
``floormod(I[i], n)``: ``take``'s clip and wrap modes).  It is an error only where it is surely made outside: under
affine conditions alone.
"""

import islpy as isl
import numpy as np

from ..errors import IndexingError, OutOfBoundsError
from ..te import dtype as dt
from ..te.construct import binary, select
from ..te.expr import Call, Const, Load, Reduce, Var
from ..te.graph import map_values, redirected
from ..te.tensor import ComputeOp, walk_ops
from ..te.visit import post_order
from .convert import NotAffine, ToIsl, box

__all__ = ["check_reads", "guarded_reads"]

_INF = float("inf")


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

        def fn(node, rebuilt, guarded=guarded, redirect=redirected(tmap)):
            new = redirect(node, rebuilt)
            if isinstance(node, Load) and id(node) in guarded:
                return _guard(rebuilt if new is None else new, guarded[id(node)])
            return new

        new = map_values(op, fn) if guarded or any(id(t) in tmap for t in op.input_tensors) else op
        if new is not op:
            for i in range(op.num_outputs):
                keep.append(op.output(i))
                tmap[id(op.output(i))] = new.output(i)
    if not tmap:
        return list(outputs)
    return [tmap.get(id(t), t) for t in outputs]


def check_reads(outputs):
    """Raises where a stage of ``outputs``' graph surely reads outside a tensor (the first half of
    :func:`guarded_reads`, which ``pa.differentiate`` runs on the graph it is given: the gradient of a forward that
    reads past an edge was that of its part inside, without a word).

    :raises OutOfBoundsError: a read isl proves outside its tensor, naming the stage, the tensor, the axis and a
        point.
    """
    for op in walk_ops(outputs):
        if isinstance(op, ComputeOp):
            _compute_reads(op, ints=False)


def _compute_reads(op, ints=True):
    body = op.body[0]
    vars_ = tuple(op.axis) + (tuple(body.axis) if isinstance(body, Reduce) else ())
    reads = _Reads(op.name, vars_, None, trust_affine=False, ints=ints)
    dom, roots = reads.domain, []
    for e in op.body:
        if isinstance(e, Reduce):
            t, _, exact = reads.cond(e.condition)
            roots.append((e.condition, dom, dom))
            roots += [(s, dom.intersect(t), dom.intersect(t) if exact else reads.empty) for s in e.source]
        else:
            roots.append((e, dom, dom))
    reads.reach(roots)
    return reads.out


def _statement_reads(op, st):
    try:
        reads = _Reads(op.name, st.vars, st.domain.reset_tuple_id(), trust_affine=True)
    except isl.Error:  # a domain in another space than its variables': no ranges (every unbounded index guarded)
        reads = _Reads(op.name, st.vars, isl.Set.universe(ToIsl(st.vars).space), trust_affine=True)
    reads.reach([(v, reads.domain, reads.domain) for v in st.values])
    return reads.out


class _Reads:
    """A stage's reads (or one statement's), each with the points where it is made: ``out`` maps id(Load) to
    the axes whose index nothing bounds, for each read that needs a guard.

    ``domain``: the points (an isl set over ``vars_``), or None for the box of the IterVars' ranges;
    ``trust_affine``: quasi-affine indices are inside (isl made them), only the others are bounded; ``ints``: an
    integer tensor read at an unbounded index is an IndexingError (else only proven reads raise)."""

    def __init__(self, name, vars_, domain, trust_affine, ints=True):
        self.name, self.vars, self.trust_affine, self.ints = name, tuple(vars_), trust_affine, ints
        self.conv = ToIsl(self.vars)
        self.domain = self.conv.univ.intersect(box(self.vars) if domain is None else domain)
        self.empty = isl.Set.empty(self.conv.space)
        self.out = {}
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

    def reach(self, roots):
        """Where each node under ``roots`` (``(expr, over, under)``) is evaluated, and each read checked there.

        Per node, two sets: ``over`` holds every point where it may be evaluated, ``under`` only points where it
        surely is.  A node's are the unions over its parents of theirs, narrowed by the condition on the way (a
        ``select``'s branch, an ``and``'s second operand): a dataflow over the expression's DAG, each edge once.
        (A walk of every path took 2^n for a node shared under n nested selects.)"""
        over, under = {}, {}

        def add(n, o, u):
            if isinstance(n, (Const, Var)):
                return
            k = id(n)
            if k in over:
                over[k], under[k] = over[k].union(o), under[k].union(u)
            else:
                over[k], under[k] = o, u

        for e, o, u in roots:
            add(e, o, u)
        for n in reversed(post_order(tuple(e for e, _, _ in roots))):  # every parent before its children
            k = id(n)
            if k not in over:
                continue
            o, u = over[k].coalesce(), under[k].coalesce()
            if isinstance(n, Load):
                self._read(n, o, u)
            if isinstance(n, Call) and n.op in ("select", "and", "or"):
                a = n.args
                add(a[0], o, u)
                t, f, exact = self.cond(a[0])
                yes = (o.intersect(t), u.intersect(t) if exact else self.empty)
                no = (o.intersect(f), u.intersect(f) if exact else self.empty)
                if n.op == "select":
                    add(a[1], *yes)
                    add(a[2], *no)
                else:
                    add(a[1], *(yes if n.op == "and" else no))
                continue
            for ch in n.children():
                add(ch, o, u)

    def _read(self, load, over, under):
        """Checks a read made at points ``over`` (surely at ``under``): raises where it is surely outside, notes
        the axes to guard where it may be."""
        t = load.tensor
        unbounded = []
        for ax, (ix, n) in enumerate(zip(load.indices, t.shape)):
            try:
                if _narrowing_cast(ix):  # isl computes without the wrap-around of the cast
                    raise NotAffine(ix)
                a = self.conv.aff(ix)
            except NotAffine:
                lo, hi = interval(ix, self._range)
                if not (lo >= 0 and hi <= n - 1):
                    unbounded.append(ax)
                continue
            if self.trust_affine:
                continue
            outside = self.conv.outside(a, n)
            sure = under.intersect(outside)
            if not sure.is_empty():
                raise OutOfBoundsError(_proven(self.name, load, ax, ix, sure, self.vars))
            if not over.intersect(outside).is_empty():
                unbounded.append(ax)
        if not unbounded or not self.ints:
            return
        if not dt.is_float(t.dtype):
            raise IndexingError(
                f"stage {self.name!r}: read of {t.dtype} tensor {t.name!r} at axis {unbounded[0]} index "
                f"{load.indices[unbounded[0]]}, which nothing proves within [0, {t.shape[unbounded[0]]}) where it is "
                f"read: compiled code cannot check it, and an integer has no NaN to show a wrong index; bound it "
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
    point = bad.lexmin().sample_point()  # the first bad point in iteration order, whatever form isl keeps the set in
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


def _narrowing_cast(e):
    """True when ``e`` casts an integer to a narrower one somewhere (it wraps around where isl would not)."""
    return any(isinstance(n, Call) and n.op == "cast" and dt.is_int(n.dtype) and dt.is_int(n.args[0].dtype)
               and np.iinfo(n.dtype).bits < np.iinfo(n.args[0].dtype).bits for n in post_order(e))


def _floordiv(x, y):
    if abs(x) == _INF:
        return x if y > 0 else -x
    return x // y


def interval(e, var_range, memo=None):
    """(lo, hi) bounds of integer expression ``e`` (infinite where nothing bounds it); ``var_range(v)``: a
    variable's.  ``memo`` (id of a node -> its bounds) is shared by calls on the nodes of one expression."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is None:
        hit = memo[id(e)] = _interval(e, var_range, memo)
    return hit


def _interval(e, var_range, memo):
    def iv(x):
        return interval(x, var_range, memo)

    if isinstance(e, Const):
        return (e.value, e.value) if dt.is_int(e.dtype) or dt.is_bool(e.dtype) else (-_INF, _INF)
    if isinstance(e, Var):
        return var_range(e)
    if dt.is_bool(e.dtype):
        return 0, 1
    if isinstance(e, Load) or not isinstance(e, Call):
        return -_INF, _INF
    op, a = e.op, e.args
    if op in ("add", "sub", "mul", "min", "max"):
        (l0, h0), (l1, h1) = iv(a[0]), iv(a[1])
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
        lo, hi = iv(a[0])
        return -hi, -lo
    if op == "abs":
        lo, hi = iv(a[0])
        return (max(lo, -hi, 0) if not lo <= 0 <= hi else 0), max(abs(lo), abs(hi))
    if op == "sign":
        lo, hi = iv(a[0])
        return (1 if lo > 0 else 0 if lo == 0 else -1), (-1 if hi < 0 else 0 if hi == 0 else 1)
    if op in ("floordiv", "floormod"):
        (lo, hi), (bl, bh) = iv(a[0]), iv(a[1])
        if not (bl >= 1 or bh <= -1):  # a divisor that may be 0 (the helpers give 0) or of either sign
            return -_INF, _INF
        if op == "floormod":  # and a non-negative dividend's remainder is at most the dividend
            return (0, min(bh - 1, hi) if lo >= 0 else bh - 1) if bl >= 1 else (bl + 1, 0)
        ends = [_floordiv(x, y) for x in (lo, hi) for y in (bl, bh)]  # monotone in each, the sign of y fixed
        return min(ends), max(ends)
    if op == "select":
        (l1, h1), (l2, h2) = iv(a[1]), iv(a[2])
        return min(l1, l2), max(h1, h2)
    if op == "cast" and dt.is_int(e.dtype):
        lo, hi = iv(a[0])
        info = np.iinfo(e.dtype)
        return (lo, hi) if info.min <= lo and hi <= info.max else (-_INF, _INF)  # else it wraps around
    return -_INF, _INF
