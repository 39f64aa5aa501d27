"""The building block of reverse mode: one consumer's adjoint contribution to one input.

For a consumer ``Y[o] = body(o)`` (a sum reduction over ``r``, or no
reduction) reading ``X`` through loads ``X[f_l(o, r)]``, the contribution is::

    dX[p, j] = sum over fresh axes (o', r') of
               sum_l select(cond(o', r') and f_l(o', r') == j, H[p, o'] * d body / d X[f_l] (o', r'), 0)

``cond`` is the reduction's ``where=`` and the conditions of the selects the
load sits under (lifted out of the derivative where that is exact).  This is
the form the ISL simplifier (polyad/poly) rewrites.  ``optimize=True`` also
does the exact trivial cases without ISL: an index that is a plain axis
variable of the consumer is substituted (``v := j``) instead of being summed
over with an equality, so elementwise ops, transposes, broadcasts and the
plain axes of reductions (dense) need no select at all.

Reductions other than sum go through a helper stage:

* ``prod``: ``Excl[o, r'] = prod over r != r'`` (no division, so exact when an
  element is 0); ``d Y / d src(o, r') = Excl[o, r']``;
* ``max``/``min``: an arg-extremum stage (a tuple reduction of (flat index,
  value)) picks the FIRST extremum in iteration order; the term gets the guard
  ``lin(r') == Arg[o']``;
* any other combiner (tuple reducers included): a forward-mode Jacobian stage
  ``J[o, j]``, a tuple reduction of (value, derivative) pairs through the
  combiner's partial derivatives, then ``dX[p, j] = sum_o' H[p, o'] J[o', j]``.
"""

import math
import weakref

from ..errors import DtypeError, NotDifferentiableError, PolyadError, ShapeError
from ..te import dtype as dt
from ..te.construct import as_expr, cast, const, select
from ..te.expr import Const, IterVar, Reduce, Var
from ..te.reduce import ReducerFactory, arg_combiner, arg_identity, comm_reducer, reduce_axis, sum as te_sum
from ..te.tensor import ComputeOp, Tensor, compute, is_stop_gradient
from ..te.visit import substitute
from .rules import TRUE, float_loads, scalar_adjoints, split_guard

IDENTITY_TAG = "autodiff.identity"

# op -> {key: ...}: the derivative of a body is computed once per op, whatever the input.
_PARTIALS = weakref.WeakKeyDictionary()
_HELPERS = weakref.WeakKeyDictionary()


def _safe(name):
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def identity_head(out):
    """The identity adjoint of ``out``: ``I[p, o] = (p == o)``, of shape out.shape * 2."""
    n = out.ndim

    def f(*idx):
        cond = TRUE
        for a, b in zip(idx[:n], idx[n:]):
            cond = cond & (a == b)
        return select(cond, const(1, out.dtype), const(0, out.dtype))

    return compute(out.shape + out.shape, f, name=f"{_safe(out.name)}_identity", tag=IDENTITY_TAG)


def zeros(shape, dtype, name):
    """A tensor of zeros (the gradient of an input the output does not depend on)."""
    return compute(shape, lambda *i: const(0, dtype), name=name, tag="autodiff.zeros")


def _is_identity_head(head, out):
    return (
        isinstance(head.op, ComputeOp) and head.op.tag == IDENTITY_TAG
        and head.shape == out.shape + out.shape and head.dtype == out.dtype
    )


def _cached(table, op, key, make):
    d = table.setdefault(op, {})
    if key not in d:
        d[key] = make()
    return d[key]


def _partials(op, key, expr, seed_dtype):
    """(seed Var g, [(load, guard, value)]) for every float load in ``expr``, memoised per op."""

    def make():
        g = Var("g", seed_dtype)
        res = []
        for load, adj in scalar_adjoints(expr, g, float_loads).values():
            cond, val = split_guard(adj)
            res.append((load, cond, val))
        return g, res

    return _cached(_PARTIALS, op, key, make)


def check_head(out, head, what="head"):
    """The prefix shape of ``head`` (a tensor of shape prefix + out.shape), or a PolyadError."""
    if not isinstance(head, Tensor):
        raise PolyadError(f"{what} for {out.name!r} must be a tensor, got {head!r}")
    n = out.ndim
    if head.ndim < n or tuple(head.shape[head.ndim - n:]) != tuple(out.shape):
        raise ShapeError(
            f"{what} {head.name!r} has shape {head.shape}, but the output {out.name!r} has shape {out.shape}: "
            f"the head's shape must be a prefix followed by {out.shape}"
        )
    if head.dtype != out.dtype:
        raise DtypeError(f"{what} {head.name!r} has dtype {head.dtype}, but the output {out.name!r} is {out.dtype}")
    return tuple(head.shape[: head.ndim - n])


def diff_building_block(out, inp, head, optimize=True, simplifier=None):
    """The adjoint contribution of the consumer ``out`` to its immediate input ``inp``.

    ``head`` has shape ``prefix + out.shape`` (the adjoint of ``out``); the
    result has shape ``prefix + inp.shape``.  This is the default ``fdiff`` of
    :func:`polyad.differentiate`; ``simplifier`` is its simplifier, which a
    polyhedral stage's reverse pass (a gradient of a gradient) applies too.
    """
    if not isinstance(out, Tensor) or not isinstance(inp, Tensor):
        raise PolyadError(f"diff_building_block needs tensors, got {out!r} and {inp!r}")
    prefix = check_head(out, head)
    shape = prefix + inp.shape
    name = f"d_{_safe(inp.name)}_from_{_safe(out.name)}"
    op = out.op
    if not isinstance(op, ComputeOp) and hasattr(op, "as_compute"):
        # a simplified (polyhedral) stage: differentiate its plain-compute equivalent
        from .reverse import differentiate

        if not any(t is inp for t in op.input_tensors):
            return zeros(shape, inp.dtype, name)
        # only the reads of inp by this stage count: the stage's other inputs are constants here
        cut = {t: ([], lambda o, ins, h: []) for t in op.input_tensors if t is not inp}
        return differentiate(op.as_compute(), [inp], head, override=cut, optimize=optimize,
                             simplifier=simplifier)[0]
    if not isinstance(op, ComputeOp):
        raise NotDifferentiableError(
            f"tensor {out.name!r} is defined by a {type(op).__name__}, which has no derivative; "
            "give it a custom gradient with override="
        )
    if (not (dt.is_float(out.dtype) and dt.is_float(inp.dtype)) or not any(t is inp for t in op.input_tensors)
            or is_stop_gradient(op)):
        return zeros(shape, inp.dtype, name)
    body = op.body[out.value_index]
    ident = optimize and _is_identity_head(head, out)
    if not isinstance(body, Reduce):
        g, terms = _partials(op, ("body", out.value_index), body, out.dtype)
        return _assemble(out, inp, head, prefix, name, g, terms, (), TRUE, None, None, ident, optimize)
    kind = body.combiner.kind()
    src = body.source[0]
    if kind in ("sum", "prod", "max", "min"):
        g, terms = _partials(op, ("src", 0), src, out.dtype)
        factor = guard = None
        if kind == "prod" and math.prod(a.extent for a in body.axis) <= EXCLUSIVE_MAX:
            excl = _cached(_HELPERS, op, "excl", lambda: _exclusive(out, body))
            factor = lambda o, r: excl[tuple(o) + tuple(v - a.lo for v, a in zip(r, body.axis))]  # noqa: E731
        elif kind == "prod":
            nz, zeros_ = _cached(_HELPERS, op, "nzprod", lambda: _nonzero_product(out, body))
            factor = lambda o, r: _divided(out, body, nz, zeros_, o, r)  # noqa: E731
        elif kind in ("max", "min"):
            arg = _cached(_HELPERS, op, kind, lambda: _arg_extremum(out, body, kind))
            guard = lambda o, r: _flat_index(r, body.axis) == arg[tuple(o)]  # noqa: E731
        return _assemble(out, inp, head, prefix, name, g, terms, body.axis, body.condition,
                         factor, guard, ident, optimize)
    return _general(out, inp, head, prefix, name, body, ident)


def _var_plan(load, summed_ids):
    """Which index dims of ``load`` are a plain summed variable: {dim: var}, first use of a var only."""
    plan, used = {}, set()
    for d, ix in enumerate(load.indices):
        if isinstance(ix, IterVar) and id(ix) in summed_ids and id(ix) not in used:
            used.add(id(ix))
            plan[d] = ix
    return plan


def _assemble(out, inp, head, prefix, name, g, terms, red_axes, red_cond, factor, guard, ident, optimize):
    """Build the contribution of ``terms`` (loads of ``inp``) in the form of the module docstring."""
    op = out.op
    o_vars, r_vars = tuple(op.axis), tuple(red_axes)
    terms = [t for t in terms if t[0].tensor is inp]
    if not terms:
        return zeros(prefix + inp.shape, inp.dtype, name)
    np_, nx = len(prefix), inp.ndim
    summed_ids = {id(v) for v in (r_vars if ident else o_vars + r_vars)}
    # Per term: the index dims substituted by a variable (optimize) or compared with j (raw form).
    groups = {}
    for t in terms:
        plan = _var_plan(t[0], summed_ids) if optimize else {}
        key = frozenset(id(v) for v in plan.values())
        groups.setdefault(key, []).append((t, plan))
    parts = list(groups.items())

    def build(members, key, stage_name):
        def f(*idx):
            P, J = idx[:np_], idx[np_:]
            fresh, summed = {}, []
            for i, v in enumerate(o_vars):
                if ident:
                    fresh[id(v)] = P[i]
                elif id(v) not in key:
                    a = reduce_axis((v.lo, v.hi), v.name)
                    summed.append(a)
                    fresh[id(v)] = a
            for v in r_vars:
                if id(v) not in key:
                    a = reduce_axis((v.lo, v.hi), v.name)
                    summed.append(a)
                    fresh[id(v)] = a
            total = None
            for (load, cond, val), plan in members:
                mapping = dict(fresh)
                rng = TRUE
                for d, v in plan.items():
                    mapping[id(v)] = J[d]
                    if v.lo > 0:
                        rng = rng & (J[d] >= v.lo)
                    if v.hi < inp.shape[d]:
                        rng = rng & (J[d] < v.hi)
                m = {v: mapping[id(v)] for v in o_vars + r_vars}
                o_new = tuple(m[v] for v in o_vars)
                r_new = tuple(m[v] for v in r_vars)
                seed = const(1, out.dtype) if ident else head[tuple(P) + o_new]
                if factor is not None:
                    seed = seed * factor(o_new, r_new)
                m[g] = seed
                full = red_cond if guard is None else red_cond & guard(o_vars, r_vars)
                full = full & cond
                eqs = tuple(load.indices[d] for d in range(nx) if d not in plan)
                subst = substitute((full, val) + eqs, m)
                c = rng & subst[0]
                for d, e in zip((d for d in range(nx) if d not in plan), subst[2:]):
                    c = c & (e == J[d])
                term = select(c, subst[1], const(0, inp.dtype))
                total = term if total is None else total + term
            return te_sum(total, axis=summed) if summed else total

        return compute(prefix + inp.shape, f, name=stage_name)

    if len(parts) == 1:
        return build(parts[0][1], parts[0][0], name)
    return add_tensors([build(m, k, f"{name}_t{n}") for n, (k, m) in enumerate(parts)], name)


def add_tensors(tensors, name):
    """Elementwise sum of tensors of one shape: one stage, however many."""
    shape = tensors[0].shape

    def f(*idx):
        total = tensors[0][idx]
        for t in tensors[1:]:
            total = total + t[idx]
        return total

    return compute(shape, f, name=name, tag="autodiff.add")


def _flat_index(r, axes):
    """Row-major position of the reduce point ``r`` (iteration order), as an int32/int64 expression."""
    total = 1
    for a in axes:
        total *= a.extent
    idt = "int32" if total < 2**31 - 1 else "int64"
    lin = const(0, idt)
    for v, a in zip(r, axes):
        lin = lin * a.extent + (as_expr(v) - a.lo)
    return lin


def _rebind(out, body, o_new, r_new, exprs):
    m = {v: e for v, e in zip(out.op.axis, o_new)}
    m.update({v: e for v, e in zip(body.axis, r_new)})
    return substitute(tuple(exprs), m)


def _arg_extremum(out, body, kind):
    """Arg[o] = flat index of the FIRST max (min) of the reduction's source, in iteration order."""
    # NaN first: the forward's max (min) is NaN where the source has one, and its gradient goes to the first
    # (the rule without NaN sent it to the largest other value in numpy and, by the order the device reduced
    # in, elsewhere in compiled code)
    reducer = comm_reducer(arg_combiner("gt" if kind == "max" else "lt"), arg_identity(kind), name=f"arg{kind}")

    def f(*o):
        r = tuple(reduce_axis((a.lo, a.hi), a.name) for a in body.axis)
        src, cond = _rebind(out, body, o, r, (body.source[0], body.condition))
        return reducer((_flat_index(r, body.axis), src), axis=r, where=cond)

    idx, _ = compute(out.shape, f, name=f"{_safe(out.name)}_arg{kind}", tag="autodiff.argext")
    return idx


#: a product over at most this many points differentiates through its exclusive products (exact, no division:
#: the window's points for each point); a longer one through the product of its nonzero points and its count of
#: zeros, O(n) (16x32x28x28's product over 784 points: its exclusive products took 75-130 ms, its forward 0.13)
EXCLUSIVE_MAX = 32


def _nonzero_product(out, body):
    """(NZ[o], Zeros[o]): the product of the reduction's nonzero points (its combiner's, so its identity too) and
    how many of its points are zero."""
    one, zero = const(1, out.dtype), const(0, out.dtype)

    def at(o):
        r = tuple(reduce_axis((a.lo, a.hi), a.name) for a in body.axis)
        src, cond = _rebind(out, body, o, r, (body.source[0], body.condition))
        return src, cond, r

    def nz(*o):
        src, cond, r = at(o)
        return body.combiner(select(src != zero, src, one), r, cond)

    def count(*o):
        src, cond, r = at(o)
        return te_sum(select(src == zero, one, zero), axis=r, where=cond)

    return (compute(out.shape, nz, name=f"{_safe(out.name)}_nzprod", tag="autodiff.nzprod"),
            compute(out.shape, count, name=f"{_safe(out.name)}_zeros", tag="autodiff.zeros"))


def _divided(out, body, nz, zeros_, o, r):
    """The product of the points other than ``r``, from :func:`_nonzero_product`: ``NZ / x`` without zeros, ``NZ``
    at the one zero, else 0 (exact where a point is 0, as PyTorch's; a point of inf or NaN makes it NaN there)."""
    (x,) = _rebind(out, body, o, r, (body.source[0],))
    n, z, zero = nz[tuple(o)], zeros_[tuple(o)], const(0, out.dtype)
    return select(z == zero, n / x, select((z == const(1, out.dtype)) & (x == zero), n, zero))


def _exclusive(out, body):
    """Excl[o, r'] = the product over the reduce points other than r' (no division)."""
    no = out.ndim

    def f(*idx):
        o, rp = idx[:no], idx[no:]
        r = tuple(reduce_axis((a.lo, a.hi), a.name) for a in body.axis)
        src, cond = _rebind(out, body, o, r, (body.source[0], body.condition))
        other = Const(False, "bool")
        for v, q, a in zip(r, rp, body.axis):
            other = other | (v != q + a.lo)
        return body.combiner(src, r, cond & other)

    shape = out.shape + tuple(a.extent for a in body.axis)
    return compute(shape, f, name=f"{_safe(out.name)}_excl", tag="autodiff.excl")


def _pair_reducer(comb):
    """The reducer of (values..., derivatives of the float values...) pairs of a combiner."""
    n = len(comb.result)
    fl = [w for w in range(n) if dt.is_float(comb.dtypes[w])]
    leaves = {id(v) for v in comb.lhs + comb.rhs}
    # partial derivatives of each float result w.r.t. each float lhs/rhs value
    parts = []
    for u in fl:
        adj = scalar_adjoints(comb.result[u], const(1, comb.dtypes[u]), lambda e: id(e) in leaves)
        parts.append({k: a for k, (_, a) in adj.items()})

    def fcombine(x, y):
        m = {v: e for v, e in zip(comb.lhs + comb.rhs, tuple(x[:n]) + tuple(y[:n]))}
        vals = substitute(comb.result, m)
        ders = []
        for k, u in enumerate(fl):
            d = const(0, comb.dtypes[u])
            for i, w in enumerate(fl):
                for var, dv in ((comb.lhs[w], x[n + i]), (comb.rhs[w], y[n + i])):
                    p = parts[k].get(id(var))
                    if p is not None:
                        d = d + substitute(p, m) * dv
            ders.append(d)
        return tuple(vals) + tuple(ders)

    def fidentity(*dtypes):
        return tuple(comb.identity) + tuple(const(0, comb.dtypes[u]) for u in fl)

    # not checked for the laws: a combiner's partials at a tie are one-sided (a max's goes to one operand), so the
    # pairs of a lawful combiner can break associativity at ties (their derivative there is the tie rule's)
    return ReducerFactory(fcombine, fidentity, name=f"d_{comb.name}", check_laws=False), fl


def _general(out, inp, head, prefix, name, body, ident):
    """Any other combiner: a forward-mode Jacobian stage through the combiner's partials."""
    op = out.op
    comb = body.combiner
    if out.value_index not in [w for w in range(len(comb.result)) if dt.is_float(comb.dtypes[w])]:
        return zeros(prefix + inp.shape, inp.dtype, name)

    def make():
        reducer, fl = _pair_reducer(comb)
        no = out.ndim
        srcs_terms = [_partials(op, ("src", w), body.source[w], comb.dtypes[w]) for w in fl]

        def f(*idx):
            o, J = idx[:no], idx[no:]
            r = tuple(reduce_axis((a.lo, a.hi), a.name) for a in body.axis)
            m = {v: e for v, e in zip(op.axis, o)}
            m.update({v: e for v, e in zip(body.axis, r)})
            vals = substitute(tuple(body.source) + (body.condition,), m)
            ders = []
            for w, (g, terms) in zip(fl, srcs_terms):
                mm = dict(m)
                mm[g] = const(1, comb.dtypes[w])
                d = const(0, comb.dtypes[w])
                for load, cond, val in terms:
                    if load.tensor is not inp:
                        continue
                    s = substitute((cond, val) + tuple(load.indices), mm)
                    c = s[0]
                    for e, j in zip(s[2:], J):
                        c = c & (e == j)
                    d = d + select(c, cast(s[1], comb.dtypes[w]), const(0, comb.dtypes[w]))
                ders.append(d)
            return reducer(tuple(vals[:-1]) + tuple(ders), axis=r, where=vals[-1])

        outs = compute(out.shape + inp.shape, f, name=f"{_safe(out.name)}_jac_{_safe(inp.name)}", tag="autodiff.jac")
        return outs, fl

    outs, fl = _cached(_HELPERS, op, ("jac", id(inp), inp), make)
    jac = outs[len(comb.result) + fl.index(out.value_index)]
    if ident:
        return compute(prefix + inp.shape, lambda *idx: cast(jac[idx], inp.dtype), name=name)
    np_ = len(prefix)

    def g(*idx):
        P, J = idx[:np_], idx[np_:]
        o = tuple(reduce_axis((0, n), a.name) for n, a in zip(out.shape, op.axis))
        v = cast(head[tuple(P) + o] * jac[o + tuple(J)], inp.dtype)
        return te_sum(v, axis=o) if o else v

    return compute(prefix + inp.shape, g, name=name)
