"""Gradient simplification: raw select-sum stages -> polyhedral statements.

A raw reverse-mode gradient of a consumer ``Y[o] = sum_r g(o, r)`` with
respect to ``X`` reads::

    dX[p, j] = sum_{o', r'} select(f(o', r') == j and guards, H[p, o'] * v(o', r'), 0) + ...

over a rectangle much larger than the set of points that contribute.  The
rewrite, per stage:

1. *peel* the body into terms ``(conditions, value)``: one per select, with
   nested selects and products distributed (``select(c, a, 0) * b`` is
   ``select(c, a*b, 0)``) and the reduction's ``where=`` added to each;
2. *lift* every quasi-affine condition into an isl domain over the output
   and reduction variables; the rest stay opaque guards kept in the value;
3. *eliminate* reduction variables: where the domain makes one of them a
   function of the others (``Map.is_single_valued``), it is replaced by that
   function (``Map.as_pw_multi_aff``, one statement per piece) and projected
   out; the others keep the exact bounds of the domain;
4. *gist*: conditions left in the value that the domain implies (or
   excludes) are folded away;
5. the output region that no term reaches gets a zero-fill statement.

A stage where nothing is lifted is left as it is; so is any stage the
conversion fails on (the rewrite never changes a value).
"""

import weakref

import islpy as isl

from ..errors import PolyadError
from ..te import dtype as dt
from ..te.construct import binary, select, unary
from ..te.expr import Call, Const, IterVar, Load, Reduce, Var
from ..te.reduce import sum_reducer
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor, as_tensor_list, walk_ops
from ..te.visit import post_order, substitute, transform
from .convert import FromIsl, NotAffine, ToIsl, bounds, box, pieces, rename, reparametrised
from .stage import PolyOp, Statement

_dt = isl.dim_type

#: at most this many pieces when a reduction variable is solved piecewise
MAX_PIECES = 4
#: at most this many terms after distributing products of sums
MAX_TERMS = 16

_MEMO = weakref.WeakKeyDictionary()
_LIFTED = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------------------
# graph rewrite
# ---------------------------------------------------------------------------

def simplify(tensors):
    """Rewrite every raw-form gradient stage that ``tensors`` depend on as a :class:`PolyOp`.

    Returns the tensors of the rewritten graph (one tensor for one tensor, a
    list for a list).  Stages that are not of the raw form, or about which
    nothing can be proven, are kept (rebuilt only when an input changed).
    """
    return _rewritten(tensors, simplify_op, "simplify")


def lift_where(tensors):
    """The graph of ``tensors`` with every reduction's quasi-affine ``where=`` conditions in its statement domain.

    A guard in the value is evaluated at every point of the reduction's box; in the domain, isl gives the
    blocks inside it no guard at all and the borders exact bounds.  A 3x3 max pool with padding 1 read each
    element of its vector blocks under a guard of its own (16x32x56x56: 7.0 ms, 2.1-3.1 lifted, best of runs).
    A sum is rewritten as a gradient stage is (:func:`simplify_op`: ``conv2d_transpose``'s strided windows are
    solved away); any other reducer (max, min, products, tuples such as argmax) keeps its value, its
    non-affine conditions as a guard, and the outputs no point reaches get the identity.
    """
    return _rewritten(tensors, _lift_op, "lift_where")


def _rewritten(tensors, rewrite, what):
    single = isinstance(tensors, Tensor)
    outs = as_tensor_list(tensors, what)
    mapping = {}  # id(old op) -> new op
    for op in walk_ops(outs):
        if isinstance(op, PlaceholderOp):
            continue
        new = _rebind_inputs(op, mapping)
        if isinstance(new, ComputeOp):
            new = rewrite(new) or new
        if new is not op:
            mapping[id(op)] = new
    res = [mapping[id(t.op)].output(t.value_index) if id(t.op) in mapping else t for t in outs]
    return res[0] if single else res


def _lift_op(op):
    """The PolyOp of a reduction ``op`` with its ``where=`` lifted (:func:`lift_where`), or None."""
    body = op.body[0] if op.body else None
    if not isinstance(body, Reduce) or not _conjuncts(body.condition):
        return None
    if body.combiner.kind() == "sum" and len(op.body) == 1:
        return simplify_op(op)
    try:
        return _LIFTED[op]
    except KeyError:
        pass
    try:
        res = _lifted(op, body)
    except (NotAffine, isl.Error, PolyadError):
        res = None
    _LIFTED[op] = res
    return res


def _lifted(op, body):
    comb, out_vars = body.combiner, tuple(op.axis)
    n, vars_ = len(out_vars), tuple(op.axis) + tuple(body.axis)
    conv, conds = ToIsl(vars_), _conjuncts(body.condition)
    dom, opaque = box(vars_), []
    for c in conds:
        s = conv.try_set(c)
        if s is None:
            opaque.append(c)
        else:
            dom = dom.intersect(s)
    if len(opaque) == len(conds):
        return None
    dom = dom.coalesce()
    values = body.source
    if opaque:
        guard = _and_all(opaque)
        values = tuple(select(guard, v, i) for v, i in zip(values, comb.identity))
    stmts, out_box = [], box(out_vars)
    if not dom.is_empty():
        # reduction variables over the exact bounding box of the domain
        red = tuple(IterVar(v.name, v.dtype, lo=lo, extent=hi - lo + 1, kind="reduce")
                    for v, (lo, hi) in zip(vars_[n:], bounds(dom)[n:]))
        svars = out_vars + red
        values = tuple(substitute(fold_conditions(v, dom, vars_), dict(zip(vars_[n:], red))) for v in values)
        stmts.append(Statement("S0", svars, n, rename(dom, svars, "S0"), values, comb))
        reached = dom.project_out(_dt.set, n, len(red)).reset_tuple_id()
    else:
        reached = out_box.subtract(out_box)
    rest = out_box.subtract(reached).coalesce()
    if not rest.is_empty():  # outputs whose windows lie wholly outside: the identity, as the guard gave
        stmts.append(Statement("Z", out_vars, n, rename(rest, out_vars, "Z"), tuple(comb.identity)))
    return PolyOp(op.name, op.shape, tuple(b.dtype for b in op.body), tuple(stmts), {})


def _rebind_inputs(op, mapping):
    """``op`` reading the rewritten versions of its inputs (itself when none changed)."""
    if not any(id(t.op) in mapping for t in op.input_tensors):
        return op

    def fn(node, rebuilt):
        if isinstance(node, Load) and id(node.tensor.op) in mapping:
            return Load(mapping[id(node.tensor.op)].output(node.tensor.value_index), rebuilt.indices)
        return None

    if isinstance(op, ComputeOp):
        body = transform(op.body, fn)
        return ComputeOp(op.name, op.axis, tuple(body), op.tag, dict(op.attrs))
    if isinstance(op, PolyOp):
        stmts = tuple(
            Statement(s.name, s.vars, s.n_out, s.domain, tuple(transform(s.values, fn)), s.combiner, s.accumulate)
            for s in op.statements
        )
        return PolyOp(op.name, op.shape, op.dtypes, stmts, dict(op.attrs))
    raise PolyadError(f"stage {op.name!r}: cannot rebuild a {type(op).__name__}")


def simplify_op(op):
    """The PolyOp of one raw-form gradient stage, or None when the rewrite proves nothing.

    Memoised per operation: the isl work is done once.
    """
    try:
        return _MEMO[op]
    except KeyError:
        pass
    try:
        res = _simplify_op(op)
    except (NotAffine, isl.Error, PolyadError):
        res = None  # nothing proven: the stage stays as it is
    _MEMO[op] = res
    return res


# ---------------------------------------------------------------------------
# one stage
# ---------------------------------------------------------------------------

#: a piecewise stage read whole is inlined as its pieces when it has at most this many statements
MAX_READ_PIECES = 4


def _pieces_read(value, out_vars):
    """``value`` (elementwise over ``out_vars``) with each read ``P[o]`` of a polyhedral stage of assignments, at
    exactly the output point, replaced by its pieces: ``select(in S1, v1, select(in S0, v0, ...))``, the later
    statement winning as it overwrites.

    An adjoint adds its consumers' contributions: split's were four full-size stages, each its quarter of H and
    zeros, and a stage adding them (16x32x56x56: 4.7 ms, against 0.15 ms for its forward).  Read as pieces, the
    simplifier gives each quarter its own statement of one stage.
    """
    n = len(out_vars)

    def inlined(node, rebuilt):
        if not isinstance(node, Load) or len(node.indices) != n or \
                not all(a is b for a, b in zip(node.indices, out_vars)):
            return None
        op = node.tensor.op
        if not isinstance(op, PolyOp) or op.num_outputs != 1 or tuple(op.shape) != tuple(v.extent for v in out_vars) \
                or len(op.statements) > MAX_READ_PIECES or any(
                    st.combiner is not None or st.n_out != n or len(st.vars) != n for st in op.statements):
            return None
        back = FromIsl(out_vars)
        out = None
        for st in op.statements:
            v = substitute(st.values[0], dict(zip(st.vars, out_vars)))
            c = back.cond_of_set(rename(st.domain, out_vars))
            out = v if out is None else select(c, v, out)
        return out

    return transform(value, inlined)


def _is_zero(e):
    return isinstance(e, Const) and not dt.is_bool(e.dtype) and e.value == 0


def _and_all(conds):
    out = Const(True, "bool")
    for c in conds:
        out = binary("and", out, c)
    return out


def _conjuncts(c):
    if isinstance(c, Call) and c.op == "and":
        return _conjuncts(c.args[0]) + _conjuncts(c.args[1])
    if isinstance(c, Const) and c.value:
        return ()
    return (c,)


def _peel(e, conv, memo=None):
    """Terms ``[(conditions, value)]`` whose sum is ``e`` (zero terms dropped).

    Memoised by node: bodies are DAGs, and an unmemoised walk is exponential in their depth.  Each node's
    peeling is a generator that asks for its operands' terms (``yield operand``), driven from an explicit stack:
    a body 300 selects deep was a RecursionError.
    """
    memo = {} if memo is None else memo
    stack = [(e, _peel_node(e, conv))]
    terms = None
    while stack:
        node, gen = stack[-1]
        try:
            child = gen.send(terms)
        except StopIteration as done:
            memo[id(node)] = (node, done.value)
            stack.pop()
            terms = done.value
            continue
        hit = memo.get(id(child))
        if hit is not None:
            terms = hit[1]
        else:
            stack.append((child, _peel_node(child, conv)))
            terms = None
    return terms


def _peel_node(e, conv):
    if _is_zero(e):
        return []
    out = None
    if isinstance(e, Call):
        op, a = e.op, e.args
        if op == "select":
            c, x, y = a
            if _is_zero(y):
                out = [(_conjuncts(c) + cs, v) for cs, v in (yield x)]
            elif _is_zero(x):
                out = [(_conjuncts(unary("not", c)) + cs, v) for cs, v in (yield y)]
            elif conv.try_set(c) is not None:
                nc = unary("not", c)
                out = [(_conjuncts(c) + cs, v) for cs, v in (yield x)]
                out += [(_conjuncts(nc) + cs, v) for cs, v in (yield y)]
        elif op == "add":
            out = (yield a[0]) + (yield a[1])
        elif op == "sub":
            out = (yield a[0]) + [(cs, unary("neg", v)) for cs, v in (yield a[1])]
        elif op == "neg":
            out = [(cs, unary("neg", v)) for cs, v in (yield a[0])]
        elif op == "mul":
            pa, pb = (yield a[0]), (yield a[1])
            if len(pa) * len(pb) <= MAX_TERMS:
                out = [(ca + cb, binary("mul", va, vb)) for ca, va in pa for cb, vb in pb]
        elif op == "div":
            out = [(cs, binary("div", v, a[1])) for cs, v in (yield a[0])]
    if out is None or all(not cs for cs, _ in out):
        return [((), e)]
    return out


def _merge(terms):
    """Terms with the same conditions become one (their values added)."""
    out, index = [], {}
    for cs, v in terms:
        key = tuple(sorted(id(c) for c in set(cs)))
        if key in index:
            k = index[key]
            out[k] = (out[k][0], binary("add", out[k][1], v))
        else:
            index[key] = len(out)
            out.append((tuple({id(c): c for c in cs}.values()), v))
    return out


def _simplify_op(op):
    if not isinstance(op, ComputeOp) or len(op.body) != 1:
        return None
    body = op.body[0]
    out_vars = tuple(op.axis)
    if isinstance(body, Reduce):
        if body.combiner.kind() != "sum":
            return None
        red_vars = tuple(body.axis)
        src, where = body.source[0], _conjuncts(body.condition)
    else:
        red_vars, src, where = (), _pieces_read(body, out_vars), ()
    all_vars = out_vars + red_vars
    conv = ToIsl(all_vars)
    full = box(all_vars)
    if not (where or any(v.extent == 1 for v in red_vars)
            or any(isinstance(n, Call) and n.op == "select" for n in post_order(src))):
        return None  # no condition anywhere and no trivial reduction axis: nothing to do
    terms = _merge([(cs + where, v) for cs, v in _peel(src, conv)])

    lifted = False
    cases = []  # (domain over out + remaining red vars, those vars, value)
    kept = []  # the non-affine conditions, for pa.show
    for conds, value in terms:
        dom, opaque = full, []
        for c in conds:
            s = conv.try_set(c)
            if s is None:
                opaque.append(c)
                kept.append(c)
            else:
                lifted = True
                dom = dom.intersect(s)
        dom = dom.coalesce()
        if dom.is_empty():
            continue
        if opaque:
            value = select(_and_all(opaque), value, Const(0, value.dtype))
        dom, qvars, value = _quotients(dom, all_vars, len(out_vars), value)
        for d, vars_, subst in _eliminate(dom, qvars, len(out_vars), ()):
            lifted = lifted or bool(subst)
            v = value
            for var, e in subst:
                v = substitute(v, {var: e})
            cases.append((d, vars_, v))
    if not lifted:
        return None
    res = _build(op, out_vars, cases)
    if kept:
        guards = [n.args[0] for st in res.statements for n in post_order(st.values)
                  if isinstance(n, Call) and n.op == "select"]
        example = f" (e.g. {guards[0]})" if guards else ""
        res.attrs["fallback"] = f"non-affine condition kept as a mask in the value{example}, over the statement domain"
    return res


def _quotients(dom, vars_, n, value):
    """(domain, variables, value) with each reduction variable ``r`` that the value reads as an exact quotient,
    ``(e ± r)//s`` where the domain implies ``s | e ± r`` (``e`` free of ``r``), replaced by that quotient ``q``:
    ``r = ±(s*q - e)``.

    A transposed convolution gathers ``X[(y + 1 - rh)//2]*W[rh]`` over ``{ rh : (y + 1 - rh) mod 2 = 0 }``: its
    domain keeps one ``rh`` in two, a stride no block runs along, and the model priced it as naive loops (110 ms
    for 16x32x56x56 -> 16x16x111x111, torch 9.7).  Over ``q`` it reads ``X[q]*W[y + 1 - 2*q]`` for
    ``y - 1 <= 2*q <= y + 1``, a strided convolution's data gradient, which the scheduler runs in phases.
    """
    conv = ToIsl(vars_)
    for nd in post_order(value):
        if not (isinstance(nd, Call) and nd.op == "floordiv" and isinstance(nd.args[1], Const)
                and dt.is_int(nd.dtype) and nd.args[1].value > 1):
            continue
        s = int(nd.args[1].value)
        try:
            pcs = pieces(conv.aff(nd.args[0]))
            exact = conv.set(binary("eq", binary("floormod", nd.args[0], nd.args[1]), Const(0, nd.dtype)))
        except (NotAffine, isl.Error):
            continue
        if len(pcs) != 1 or not dom.is_subset(exact):
            continue
        aff = pcs[0][1]
        if aff.dim(_dt.div):
            continue
        for k in range(n, len(vars_)):
            c = aff.get_coefficient_val(_dt.in_, k)
            if c.is_one() or c.is_negone():
                break
        else:
            continue
        new_dom, qvars, r_expr = reparametrised(dom, vars_, k, aff, scale=s, suffix="q")
        return _quotients(new_dom, qvars, n, substitute(value, {vars_[k]: r_expr}))
    return dom, vars_, value


def _eliminate(dom, vars_, n, subst):
    """Solve reduction variables the domain fixes: [(domain, remaining vars, substitutions)].

    Among the variables that are functions of the others, the one with the
    simplest solution goes first (fewest pieces, then no division): for a
    strided convolution that solves the kernel offset ``r = x - 3o + 1`` and
    keeps ``o`` with exact bounds, rather than ``o = (x - r + 1)/3``.
    """
    best = None
    for k in range(n, len(vars_)):
        m = isl.Map.from_domain(dom).move_dims(_dt.out, 0, _dt.in_, k, 1)
        if not m.is_single_valued():
            continue
        pcs = pieces(m.as_pw_multi_aff().coalesce())
        if len(pcs) > MAX_PIECES:
            continue
        divs = 0
        for _, ma in pcs:
            aff = ma.get_aff(0)
            divs += aff.dim(_dt.div) + (0 if str(aff.get_denominator_val()) == "1" else 1)
        score = (len(pcs), divs, k)
        if best is None or score < best[0]:
            best = (score, k, pcs)
    if best is None:
        return [(dom, vars_, subst)]
    _, k, pcs = best
    rest = vars_[:k] + vars_[k + 1:]
    res = []
    for piece_dom, ma in pcs:
        piece_dom = piece_dom.coalesce()
        e = FromIsl(rest, piece_dom).aff_expr(ma.get_aff(0))
        res += _eliminate(piece_dom, rest, n, subst + ((vars_[k], e),))
    return res


def fold_conditions(value, dom, vars_):
    """Fold the affine conditions inside ``value`` that ``dom`` decides (isl gist)."""
    conv = ToIsl(vars_)
    dom = dom.reset_tuple_id()

    back = FromIsl(vars_, dom)

    def clean_index(e):
        """An index rewritten by isl on the domain, when that makes it smaller."""
        if isinstance(e, (Const, Var)):
            return e
        try:
            pcs = pieces(conv.aff(e).gist(dom).coalesce())
            if len(pcs) != 1:
                return e
            new = back.aff_expr(pcs[0][1])
        except NotAffine:
            return e
        return new if len(post_order(new)) < len(post_order(e)) else e

    def decide(c):
        s = conv.try_set(c)
        if s is None:
            return None
        if dom.is_subset(s):
            return Const(True, "bool")
        if dom.intersect(s).is_empty():
            return Const(False, "bool")
        return None

    def fn(node, rebuilt):
        if not isinstance(node, Call):
            return None
        if dt.is_int(node.dtype) and node.op != "select":
            new = clean_index(rebuilt)
            if new is not rebuilt:
                return new
        if node.dtype == "bool" and node.op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not"):
            d = decide(rebuilt)
            if d is not None:
                return d
        if rebuilt is node:
            return None
        a = rebuilt.args
        if rebuilt.op == "select":
            return select(*a)
        if rebuilt.op in ("and", "or"):
            return binary(rebuilt.op, *a)
        if rebuilt.op == "not":
            return unary("not", a[0])
        return None

    return transform(value, fn)


def _rebased(dom, vars_, n, value):
    """(domain, value) with each reduction variable ``r`` that runs over ``[lo(o), lo(o) + c]`` at every output point
    ``o`` (``lo`` one quasi-affine piece of the output point alone, ``c`` a constant) replaced by ``r - lo(o)``, over
    ``[0, c]``.

    A grouped convolution's data gradient sums over its group's channels, ``8*(i1//8) <= f <= 8*(i1//8) + 7``: as
    ``f = 8*(i1//8) + f'`` its domain is a box along ``f'``, which the model, ``pad_reads`` and codegen's full tiles
    see (the model priced every block of it as naive loops: 8.6 ms, against 0.67 ms in a 1x1x2x28/float4 block).
    Variables clipped by the output point (a border's window) have several pieces and stay as they are.
    """
    total = len(vars_)
    for k in range(n, total):
        own = dom
        for j in reversed(range(n, total)):
            if j != k:
                own = own.project_out(_dt.set, j, 1)
        m = isl.Map.from_domain(own).move_dims(_dt.out, 0, _dt.in_, n, 1)
        lo = m.lexmin_pw_multi_aff()
        pcs = pieces(lo)
        if len(pcs) != 1 or pcs[0][1].get_aff(0).is_cst():
            continue
        ext = pieces(m.lexmax_pw_multi_aff().get_pw_aff(0).sub(lo.get_pw_aff(0)))
        if len({str(a) for _, a in ext}) != 1 or not ext[0][1].is_cst():
            continue
        aff = pcs[0][1].get_aff(0)
        shifted = aff.add_dims(_dt.in_, total - n)  # over the whole domain's space, the output dimensions first
        shifted = shifted.add(isl.Aff.var_on_domain(isl.LocalSpace.from_space(shifted.get_domain_space()),
                                                    _dt.set, k))
        ma = isl.MultiAff.identity(isl.Space.map_from_set(dom.get_space())).set_aff(k, shifted)
        lo_expr = FromIsl(vars_[:n], dom.project_out(_dt.set, n, total - n)).aff_expr(aff)
        dom = dom.preimage_multi_aff(ma)
        value = substitute(value, {vars_[k]: lo_expr + vars_[k]})
    return dom, value


def _build(op, out_vars, cases):
    n = len(out_vars)
    dtype = op.body[0].dtype
    zero = Const(0, dtype)
    comb = op.body[0].combiner if isinstance(op.body[0], Reduce) else sum_reducer(dtype)
    out_box = box(out_vars)
    covered = out_box.subtract(out_box)  # empty, in the output space
    stmts = []
    for dom, vars_, value in _merge_cases(cases, n):
        m = len(vars_) - n
        dom, value = _rebased(dom, vars_, n, value)
        value = fold_conditions(value, dom, vars_)
        if _is_zero(value):
            continue
        # fresh reduction variables with the exact bounding box of the domain
        new_red = []
        bb = bounds(dom)
        for v, (lo, hi) in zip(vars_[n:], bb[n:]):
            new_red.append(IterVar(v.name, v.dtype, lo=lo, extent=hi - lo + 1, kind="reduce"))
        if new_red:
            value = substitute(value, dict(zip(vars_[n:], new_red)))
        svars = tuple(out_vars) + tuple(new_red)
        proj = dom.project_out(_dt.set, n, m) if m else dom
        proj = proj.reset_tuple_id()
        overlap = covered.intersect(proj)
        parts = []
        if overlap.is_empty():
            parts.append((dom, False))
        else:
            lifted = overlap.insert_dims(_dt.set, n, m) if m else overlap
            acc = _intersect(dom, lifted)
            fresh = _subtract(dom, lifted)
            if not fresh.is_empty():
                parts.append((fresh, False))
            if not acc.is_empty():
                parts.append((acc, True))
        covered = covered.union(proj).coalesce()
        for d, accumulate in parts:
            name = f"S{len(stmts)}"
            dom_named = rename(d.coalesce(), svars, name)
            c = comb if (m or accumulate) else None
            stmts.append(Statement(name, svars, n, dom_named, (value,), c, accumulate))
    rest = out_box.subtract(covered).coalesce()
    if not rest.is_empty():
        stmts.append(Statement("Z", tuple(out_vars), n, rename(rest, out_vars, "Z"), (zero,)))
    # no reference back to op: _MEMO is weak in op, a value holding it would keep it (and its graph) alive
    return PolyOp(op.name, op.shape, (dtype,), tuple(stmts), {})


#: at most this many disjoint pieces from overlapping assignment cases (beyond: accumulating statements)
MAX_ASSIGN_PIECES = 16


def _merge_cases(cases, n):
    """Assignment cases (no reduction left) become disjoint pieces, each the sum of the values that cover it:
    ``A where b <= 7`` and ``B`` everywhere are ``A + B where b <= 7`` and ``B where b >= 8``.  Overlapping, the
    later one was an accumulating statement without a reduction, which no tiled schedule of codegen's keeps in
    order (a ScheduleError); split's adjoint summed its pieces so."""
    assigns, out = [], []
    for dom, vars_, value in cases:
        if len(vars_) != n:
            out.append((dom, vars_, value))
            continue
        pieces_, rest = [], dom
        for d2, v2, val2 in assigns:
            both = _intersect(d2, dom)
            if both.is_empty():
                pieces_.append((d2, v2, val2))
                continue
            only = _subtract(d2, dom)
            if not only.is_empty():
                pieces_.append((only, v2, val2))
            pieces_.append((both, v2, binary("add", val2, value)))
            rest = _subtract(rest, d2)
        if not rest.is_empty():
            pieces_.append((rest, vars_, value))
        if len(pieces_) > MAX_ASSIGN_PIECES:
            return _equal_merged(cases, n)
        assigns = pieces_
    return assigns + out


def _equal_merged(cases, n):
    """Assignment cases over equal domains become one: their values added (the rest stay apart)."""
    out = []
    for dom, vars_, value in cases:
        if len(vars_) == n:
            for k, (d2, v2, val2) in enumerate(out):
                if len(v2) == n and d2.is_equal(dom):
                    out[k] = (d2, v2, binary("add", val2, value))
                    break
            else:
                out.append((dom, vars_, value))
        else:
            out.append((dom, vars_, value))
    return out


def _intersect(a, b):
    return a.reset_tuple_id().intersect(b.reset_tuple_id())


def _subtract(a, b):
    return a.reset_tuple_id().subtract(b.reset_tuple_id())


__all__ = ["simplify", "simplify_op"]
