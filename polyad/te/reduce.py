"""Reductions: reduce axes, commutative reducers, and ``pa.sum`` / ``prod`` / ``max`` / ``min``.

A reduction is a :class:`~polyad.te.expr.Reduce` node at the top of a compute body: a
:class:`~polyad.te.expr.CommReducer` (its combiner and identity, as TVM's ``comm_reducer``) over the
reduce axes made by :func:`reduce_axis`, with an optional ``where=`` condition.
"""

import numpy as np

from ..errors import AxisError, DtypeError, PolyadError
from . import dtype as dt
from .construct import as_expr, binary, select
from .expr import CommReducer, Const, IterVar, Reduce, Var
from .semantics import values


def reduce_axis(dom, name="k"):
    """``pa.reduce_axis((lo, hi), name)``: a reduction variable over ``[lo, hi)``.

    :param dom: the range: a ``(lo, hi)`` pair of integers, or one integer ``hi`` for ``[0, hi)``.
    :param name: the variable's name, as printed by ``pa.show``.
    :returns: the reduce axis (an ``IterVar`` of kind "reduce"), to pass as ``axis=`` of a reduction.
    :raises AxisError: when the range is not integers, or is empty.
    """
    try:
        lo, hi = (0, dom) if isinstance(dom, (int, np.integer)) else dom
    except (TypeError, ValueError):
        lo = hi = None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in (lo, hi)):
        raise AxisError(f"reduce_axis {name!r}: the range must be (lo, hi) integers, got {dom!r}")
    lo, hi = int(lo), int(hi)
    if hi <= lo:
        raise AxisError(f"reduce_axis {name!r}: empty range [{lo}, {hi})")
    return IterVar(name, "int32", lo=lo, extent=hi - lo, kind="reduce")


def _axis_tuple(axis, what):
    if isinstance(axis, IterVar):
        axis = (axis,)
    try:
        axis = tuple(axis)
    except TypeError:
        raise AxisError(f"{what}: axis must be a reduce_axis or a list of them, got {axis!r}") from None
    if not axis:
        raise AxisError(f"{what}: no reduction axis given")
    for a in axis:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise AxisError(f"{what}: {a!r} is not a reduce axis (make one with pa.reduce_axis)")
    if len({id(a) for a in axis}) != len(axis):
        raise AxisError(f"{what}: a reduce axis appears twice in {[a.name for a in axis]}")
    return axis


def make_reduce(combiner, source, axis, where=None):
    is_tuple = isinstance(source, (tuple, list))
    src = tuple(as_expr(s) for s in (source if is_tuple else (source,)))
    if len(src) != len(combiner.result):
        raise PolyadError(f"reducer {combiner.name} reduces {len(combiner.result)} values, got {len(src)}")
    for s, d in zip(src, combiner.dtypes):
        if s.dtype != d:
            raise DtypeError(f"reducer {combiner.name} of {d} applied to a {s.dtype} expression ({s})")
        if _contains_reduce(s):
            raise PolyadError(f"nested reduction in {combiner.name}: reduce the inner expression in its own compute")
    axis = _axis_tuple(axis, f"reduction {combiner.name}")
    cond = Const(True, "bool") if where is None else as_expr(where)
    if not dt.is_bool(cond.dtype):
        raise DtypeError(f"where= of {combiner.name} must be a bool expression, got {cond.dtype} ({cond})")
    outs = tuple(Reduce(combiner, src, axis, cond, i) for i in range(len(src)))
    return outs if is_tuple else outs[0]


def _contains_reduce(e):
    from .visit import post_order

    return any(isinstance(n, Reduce) for n in post_order(e))


#: the values a combiner's laws are tried at, by kind of dtype (small: exp and products stay finite)
_SAMPLES = {"float": (-2.5, -1.0, -0.25, 0.0, 0.5, 1.5, 3.0), "int": (-3, -1, 0, 1, 2, 7), "bool": (False, True)}
_TRIES = 256


def _check_laws(red):
    """Raise where a combiner is not associative, or its identity is not neutral on both sides, at sample points.

    A build combines a reduction's points in the order its schedule chooses (blocks of rfactor partials, tiles),
    ``pa.evaluate`` pairwise; they agree because ``combine(combine(a, b), c) == combine(a, combine(b, c))`` and
    ``combine(e, a) == a == combine(a, e)``. Commutativity is not asked: custom reducers keep iteration order
    (rfactor blocks them, never interleaves), so TVM's argmax, which keeps the left operand on ties, is lawful.
    A combiner that reads a tensor is not tried.
    """
    if red.kind() is not None:
        return
    rng = np.random.default_rng(0)
    kinds = ["bool" if dt.is_bool(d) else "float" if dt.is_float(d) else "int" for d in red.dtypes]

    def draw():
        return tuple(np.asarray(rng.choice(_SAMPLES[k], _TRIES)).astype(d) for k, d in zip(kinds, red.dtypes))

    def combine(x, y):
        env = {id(v): a for v, a in zip(red.lhs, x)}
        env.update((id(v), b) for v, b in zip(red.rhs, y))
        return values(red.result, env)

    def far(x, d):
        """``x`` with its last lanes farther out (max starting from -10 is neutral on the small samples only):
        -100 and 100 for floats, -1000 and 1000 for integers.  Not the dtype's extremes: TVM's argmax starts from
        -1e30, and a logsumexp combine's exp underflows below -745, neutral identities both."""
        if dt.is_bool(d):
            return x
        x = x.copy()
        x[-2:] = np.array([-100, 100] if dt.is_float(d) else [-1000, 1000]).astype(d)
        return x

    a, b, c = draw(), draw(), draw()
    e = tuple(far(x, d) for x, d in zip(draw(), red.dtypes))  # for the identity laws
    with np.errstate(all="ignore"):
        ab = combine(a, b)
        if ab is None:
            return
        left, right = combine(ab, c), combine(a, combine(b, c))
        ident = tuple(np.broadcast_to(v, (_TRIES,)) for v in values(red.identity, {}) or ())
        laws = [("fcombine is not associative", "combine(combine(a, b), c)", left, "combine(a, combine(b, c))", right,
                 dict(a=a, b=b, c=c))]
        if ident:
            laws += [("fidentity is not neutral", "combine(identity, a)", combine(ident, e), "a", e,
                      dict(a=e)),
                     ("fidentity is not neutral", "combine(a, identity)", combine(e, ident), "a", e,
                      dict(a=e))]
    for what, lname, lv, rname, rv, args in laws:
        bad = np.zeros(_TRIES, bool)
        for x, y in zip(lv, rv):
            bad |= ~(np.isclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True) if x.dtype.kind == "f" else x == y)
        if bad.any():
            j = int(np.argmax(bad))
            where = ", ".join(f"{k} = {_point(v, j)}" for k, v in args.items())
            raise PolyadError(
                f"reducer {red.name}: {what}: {lname} = {_point(lv, j)} but {rname} = {_point(rv, j)} "
                f"at {where}; a reduction's points are combined in the order its schedule chooses, so a "
                f"comm_reducer must be associative with a neutral identity, as in TVM")


def _point(vals, j):
    items = [v[j].item() for v in vals]
    return items[0] if len(items) == 1 else tuple(items)


class ReducerFactory:
    """The object ``pa.comm_reducer`` returns: instantiated per source dtype(s), like TVM's."""

    def __init__(self, fcombine, fidentity, name=None, check_laws=True):
        self.fcombine, self.fidentity, self.check_laws = fcombine, fidentity, check_laws
        self.name = name or getattr(fcombine, "__name__", "reduce")
        self._cache = {}

    def instantiate(self, dtypes):
        dtypes = tuple(dtypes)
        if dtypes in self._cache:
            return self._cache[dtypes]
        n = len(dtypes)
        lhs = tuple(Var(f"x{i}" if n > 1 else "x", d) for i, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}" if n > 1 else "y", d) for i, d in enumerate(dtypes))
        if n == 1:
            result = (self.fcombine(lhs[0], rhs[0]),)
            identity = (self.fidentity(dtypes[0]),)
        else:
            result = tuple(self.fcombine(lhs, rhs))
            identity = self.fidentity(*dtypes)
        result = tuple(as_expr(r) for r in result)
        if not isinstance(identity, (tuple, list)):
            identity = (identity,)
        identity = tuple(as_expr(v, d) for v, d in zip(identity, dtypes))
        if len(result) != n or len(identity) != n:
            raise PolyadError(f"reducer {self.name}: fcombine/fidentity must give {n} values")
        for r, i, d in zip(result, identity, dtypes):
            if r.dtype != d or i.dtype != d:
                raise DtypeError(f"reducer {self.name}: combine/identity dtype {r.dtype}/{i.dtype}, expected {d}")
        red = CommReducer(lhs, rhs, result, identity, self.name)
        if self.check_laws:
            _check_laws(red)
        self._cache[dtypes] = red
        return red

    def __call__(self, source, axis=None, where=None):
        if axis is None:
            raise AxisError(f"reducer {self.name}: axis= is required")
        srcs = tuple(as_expr(s) for s in source) if isinstance(source, (tuple, list)) else (as_expr(source),)
        red = self.instantiate(tuple(s.dtype for s in srcs))
        return make_reduce(red, tuple(srcs) if isinstance(source, (tuple, list)) else srcs[0], axis, where)

    def __repr__(self):
        return f"<comm_reducer {self.name}>"


def comm_reducer(fcombine, fidentity, name=None):
    """``pa.comm_reducer(fcombine, fidentity, name)``, TVM's signature.

    ``fcombine(x, y)`` combines two partial results (tuples of expressions for
    a tuple reducer); ``fidentity(dtype)`` (``fidentity(*dtypes)`` for tuples)
    gives the identity element.

    The reducer is called as ``reducer(source, axis=k, where=cond)``, like ``pa.sum``; it is instantiated per
    source dtype(s) then, which is where a bad ``fcombine``/``fidentity`` is found: a ``PolyadError`` when they
    give the wrong number of values, a ``DtypeError`` when a value has another dtype than the source's.

    :param fcombine: ``fcombine(x, y)`` -> the combination of two partial results (expressions, or tuples of them).
    :param fidentity: ``fidentity(dtype)`` (``fidentity(*dtypes)``) -> the identity element(s), expressions or
        numbers.
    :param name: the reducer's name in printouts; None takes ``fcombine.__name__``.
    :returns: a reducer factory, callable as ``reducer(source, axis=..., where=None)``.
    """
    return ReducerFactory(fcombine, fidentity, name)


_sum = comm_reducer(lambda x, y: x + y, lambda t: Const(0, t), name="sum")
_prod = comm_reducer(lambda x, y: x * y, lambda t: Const(1, t), name="prod")
_max = comm_reducer(lambda x, y: binary("max", x, y), lambda t: Const(dt.min_value(t), t), name="max")
_min = comm_reducer(lambda x, y: binary("min", x, y), lambda t: Const(dt.max_value(t), t), name="min")


def _is_reduction_call(b, axis):
    if axis is not None:
        return True
    if isinstance(b, IterVar) and b.kind == "reduce":
        return True
    return isinstance(b, (list, tuple)) and len(b) > 0 and all(isinstance(x, IterVar) for x in b)


def sum(expr, axis=None, where=None):  # noqa: A001 - the public name, as TVM/numpy
    """``pa.sum(expr, axis=k, where=cond)``.

    :param expr: the scalar expression summed (it reads the reduce axes).
    :param axis: a reduce axis or a list of them (required).
    :param where: a bool expression: only the points where it holds are summed; None for all.
    :returns: the reduction expression, to be the whole body of a ``pa.compute``.
    :raises AxisError: when ``axis`` is missing, empty, not reduce axes (``pa.reduce_axis``), or repeats one.
    :raises DtypeError: when ``expr`` is not a scalar expression (or a number), or ``where`` is not a bool
        expression.
    :raises PolyadError: when ``expr`` contains a reduction itself, or is a tensor of rank > 0 (index it).
    """
    return _sum(expr, axis, where)


def prod(expr, axis=None, where=None):
    """``pa.prod(expr, axis=k, where=cond)``: the product of ``expr`` over the reduce axes.

    :param expr: the scalar expression multiplied (it reads the reduce axes).
    :param axis: a reduce axis or a list of them (required).
    :param where: a bool expression: only the points where it holds are multiplied; None for all.
    :returns: the reduction expression, to be the whole body of a ``pa.compute``.
    :raises AxisError: when ``axis`` is missing, empty, not reduce axes (``pa.reduce_axis``), or repeats one.
    :raises DtypeError: when ``expr`` is not a scalar expression (or a number), or ``where`` is not a bool
        expression.
    :raises PolyadError: when ``expr`` contains a reduction itself, or is a tensor of rank > 0 (index it).
    """
    return _prod(expr, axis, where)


def _reduce_or_binary(op, reducer, a, b, axis, where):
    """``pa.max`` and ``pa.min``: a reduction when given reduce axes (as ``axis`` or ``b``), else the binary op."""
    if _is_reduction_call(b, axis):
        return reducer(a, axis if axis is not None else b, where)
    if b is None:
        raise AxisError(f"pa.{op} needs axis= (reduction) or a second operand (binary {op})")
    return binary(op, a, b)


def max(a, b=None, axis=None, where=None):  # noqa: A001
    """``pa.max(expr, axis=k)`` reduces; ``pa.max(a, b)`` is the binary maximum.

    A reduce axis (or a list of them) as ``b`` is taken as ``axis``, so ``pa.max(expr, k)`` reduces too.

    :param a: the scalar expression (reduced over ``axis``, or the first operand of the binary maximum).
    :param b: the second operand of the binary maximum (an expression or a number), or None to reduce.
    :param axis: a reduce axis or a list of them: reduce ``a`` over them.
    :param where: for the reduction: a bool expression, only the points where it holds count; None for all.
    :returns: the reduction expression (to be the whole body of a ``pa.compute``), or the expression ``max(a, b)``.
    :raises AxisError: when there is neither ``axis`` nor ``b``, or ``axis`` is not reduce axes or repeats one.
    :raises DtypeError: when an operand is bool or the dtypes do not mix without a cast (binary), or ``where`` is
        not bool (reduction).
    :raises PolyadError: when a reduced ``a`` contains a reduction itself.
    """
    return _reduce_or_binary("max", _max, a, b, axis, where)


def min(a, b=None, axis=None, where=None):  # noqa: A001
    """``pa.min(expr, axis=k)`` reduces; ``pa.min(a, b)`` is the binary minimum.

    A reduce axis (or a list of them) as ``b`` is taken as ``axis``, so ``pa.min(expr, k)`` reduces too.

    :param a: the scalar expression (reduced over ``axis``, or the first operand of the binary minimum).
    :param b: the second operand of the binary minimum (an expression or a number), or None to reduce.
    :param axis: a reduce axis or a list of them: reduce ``a`` over them.
    :param where: for the reduction: a bool expression, only the points where it holds count; None for all.
    :returns: the reduction expression (to be the whole body of a ``pa.compute``), or the expression ``min(a, b)``.
    :raises AxisError: when there is neither ``axis`` nor ``b``, or ``axis`` is not reduce axes or repeats one.
    :raises DtypeError: when an operand is bool or the dtypes do not mix without a cast (binary), or ``where`` is
        not bool (reduction).
    :raises PolyadError: when a reduced ``a`` contains a reduction itself.
    """
    return _reduce_or_binary("min", _min, a, b, axis, where)


def sum_reducer(dtype):
    return _sum.instantiate((dtype,))


def max_reducer(dtype):
    return _max.instantiate((dtype,))


def min_reducer(dtype):
    return _min.instantiate((dtype,))


def prod_reducer(dtype):
    return _prod.instantiate((dtype,))


def arg_combiner(op):
    """(index, value) pairs -> the better one under ``op`` (``"gt"``: the maximum), NaN first, the smaller index
    on ties.

    That is the extremum under a total order, so it is commutative and associative whatever order the reduction
    visits the points in.  NaN first, as the max and min reductions take it (a NaN wins there): the argument of
    ``max(X, axis=k)`` is the first NaN of a row that has one, where its gradient goes.
    """

    def fcombine(lhs, rhs):
        (i0, v0), (i1, v1) = lhs, rhs
        better = binary(op, v1, v0)
        tie = binary("eq", v1, v0)
        if dt.is_float(v0.dtype):
            nan0, nan1 = binary("ne", v0, v0), binary("ne", v1, v1)
            better = binary("or", binary("and", nan1, ~nan0), better)
            tie = binary("or", tie, binary("and", nan1, nan0))
        take = binary("or", better, binary("and", tie, binary("lt", i1, i0)))
        return select(take, i1, i0), select(take, v1, v0)

    return fcombine


def arg_identity(kind):
    """The identity of :func:`arg_combiner`'s ``kind`` (``"max"`` or ``"min"``): the largest index loses every tie,
    so a data value equal to the identity's still wins."""
    extreme = dt.min_value if kind == "max" else dt.max_value
    return lambda idt, vdt: (Const(dt.max_value(idt), idt), Const(extreme(vdt), vdt))
