"""Scalar expression nodes: frozen, hash-consed dataclasses.

Hash-consing makes structurally equal expressions the same Python object, so
equality of subexpressions is identity (``a is b``), memoisation by ``id`` is
exact, and a DAG is shared for free.  Variables (``Var``/``IterVar``) are the
exception: each one created is distinct, whatever its name.

The node kinds are few on purpose:

* ``Const(value, dtype)``
* ``Var`` / ``IterVar`` (a loop variable with a range ``[lo, lo + extent)``)
* ``Call(op, args, dtype)``: every scalar operator, from ``add`` to ``select``
  and ``cast``; the op names are the keys of :data:`OPS`, and the tables of the
  other layers (numpy evaluation, derivative rules, OpenCL printing) are keyed
  by the same names.
* ``Load(tensor, indices)``: a read of a tensor element.
* ``Reduce(combiner, source, axis, condition, value_index)``: a commutative
  reduction over reduce axes; only at the top of a compute body.

This module holds the nodes and the operator table only.  Build expressions with
the operator overloads and the constructors of :mod:`polyad.te.construct`
(:func:`~polyad.te.construct.call`, ``select``, ``cast``, ...), which check
dtypes, promote and fold trivial algebra (``x*1``, ``x+0``, constant operands);
reductions with :mod:`polyad.te.reduce`.  The raw node constructors do no
checking and are for transformations that already know the types.
"""

import itertools
import weakref
from dataclasses import dataclass, field, fields

from ..errors import PolyadError
from . import dtype as dt

_TABLE = weakref.WeakValueDictionary()
_uid = itertools.count()


def _key_part(v):
    if isinstance(v, (Expr, CommReducer)) or _is_tensor(v):
        return ("#", id(v))
    if isinstance(v, tuple):
        return tuple(_key_part(x) for x in v)
    if isinstance(v, float):
        return ("f", v.hex())
    return (type(v).__name__, v)


def _is_tensor(v):
    return type(v).__name__ == "Tensor"


class _HashConsed(type):
    """Metaclass: constructing a node returns the existing equal node, if any."""

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        if not cls.__dict__.get("_hashcons", True):
            return obj
        names = cls.__dict__.get("_field_names")
        if names is None:
            names = tuple(f.name for f in fields(obj))
            cls._field_names = names
        key = (cls,) + tuple(_key_part(getattr(obj, n)) for n in names)
        found = _TABLE.get(key)
        if found is not None:
            return found
        _TABLE[key] = obj
        return obj


class Expr(metaclass=_HashConsed):
    """Base of scalar expressions.  Python operators build new expressions."""

    __hash__ = object.__hash__

    # -- structure ---------------------------------------------------------
    def children(self):
        return ()

    def with_children(self, children):
        return self

    # -- truthiness: only identity comparisons and constants have one ------
    def __bool__(self):
        raise PolyadError(
            f"the truth value of the expression {self} is not known while building; "
            "use pa.select(cond, a, b) or where= instead of Python if/and/or"
        )

    # -- operators ---------------------------------------------------------
    def __add__(self, o):
        return _construct.binary("add", self, o)

    def __radd__(self, o):
        return _construct.binary("add", o, self)

    def __sub__(self, o):
        return _construct.binary("sub", self, o)

    def __rsub__(self, o):
        return _construct.binary("sub", o, self)

    def __mul__(self, o):
        return _construct.binary("mul", self, o)

    def __rmul__(self, o):
        return _construct.binary("mul", o, self)

    def __truediv__(self, o):
        return _construct.binary("div", self, o)

    def __rtruediv__(self, o):
        return _construct.binary("div", o, self)

    def __floordiv__(self, o):
        return _construct.binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return _construct.binary("floordiv", o, self)

    def __mod__(self, o):
        return _construct.binary("floormod", self, o)

    def __rmod__(self, o):
        return _construct.binary("floormod", o, self)

    def __pow__(self, o):
        return _construct.binary("pow", self, o)

    def __rpow__(self, o):
        return _construct.binary("pow", o, self)

    def __neg__(self):
        return _construct.unary("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _construct.unary("abs", self)

    def __lt__(self, o):
        return _construct.binary("lt", self, o)

    def __le__(self, o):
        return _construct.binary("le", self, o)

    def __gt__(self, o):
        return _construct.binary("gt", self, o)

    def __ge__(self, o):
        return _construct.binary("ge", self, o)

    def __eq__(self, o):
        try:
            return _construct.binary("eq", self, o)
        except PolyadError:
            return NotImplemented

    def __ne__(self, o):
        try:
            return _construct.binary("ne", self, o)
        except PolyadError:
            return NotImplemented

    def __and__(self, o):
        return _construct.binary("and", self, o)

    def __rand__(self, o):
        return _construct.binary("and", o, self)

    def __or__(self, o):
        return _construct.binary("or", self, o)

    def __ror__(self, o):
        return _construct.binary("or", o, self)

    def __invert__(self):
        return _construct.unary("not", self)

    def __lshift__(self, o):
        return _construct.binary("shl", self, o)

    def __rshift__(self, o):
        return _construct.binary("shr", self, o)

    def astype(self, dtype):
        return _construct.cast(self, dtype)

    def __str__(self):
        from .printer import expr_str

        return expr_str(self)

    def __repr__(self):
        return f"<{type(self).__name__} {self}>"


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    value: object
    dtype: str

    def __post_init__(self):
        v = self.value
        if dt.is_float(self.dtype):
            v = float(v)
        elif dt.is_int(self.dtype):
            v = int(v)
        elif dt.is_bool(self.dtype):
            v = bool(v)
        object.__setattr__(self, "value", v)

    def __bool__(self):
        return bool(self.value)


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable.  Every Var is distinct, whatever its name."""

    _hashcons = False
    name: str
    dtype: str = "int32"
    uid: int = field(default_factory=lambda: next(_uid))


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Var):
    """A loop variable ranging over ``[lo, lo + extent)``.

    ``kind`` is ``"data"`` for the axes of a compute and ``"reduce"`` for
    reduction axes made by :func:`reduce_axis`.
    """

    _hashcons = False
    lo: int = 0
    extent: int = 1
    kind: str = "data"

    @property
    def hi(self):
        return self.lo + self.extent

    @property
    def dom(self):
        return (self.lo, self.hi)


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    op: str
    args: tuple
    dtype: str

    def children(self):
        return self.args

    def with_children(self, children):
        children = tuple(children)
        if all(a is b for a, b in zip(children, self.args)):
            return self
        return Call(self.op, children, self.dtype)

    def __bool__(self):
        # ``a == b`` between expressions is identity, as in TVM; nothing else has a truth value.
        if self.op in ("eq", "ne") and len(self.args) == 2:
            same = self.args[0] is self.args[1]
            return same if self.op == "eq" else not same
        return Expr.__bool__(self)


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    tensor: object
    indices: tuple

    @property
    def dtype(self):
        return self.tensor.dtype

    def children(self):
        return self.indices

    def with_children(self, children):
        children = tuple(children)
        if all(a is b for a, b in zip(children, self.indices)):
            return self
        return Load(self.tensor, children)


@dataclass(frozen=True, eq=False)
class CommReducer(metaclass=_HashConsed):
    """A commutative reducer: ``result(lhs, rhs)`` combines, ``identity`` starts.

    ``lhs``/``rhs``/``result``/``identity`` are tuples, one entry per value of
    a tuple reduction (argmax reduces (index, value) pairs).
    """

    lhs: tuple
    rhs: tuple
    result: tuple
    identity: tuple
    name: str = "reduce"

    __hash__ = object.__hash__

    @property
    def dtypes(self):
        return tuple(e.dtype for e in self.result)

    def __call__(self, source, axis, where=None):
        from .reduce import make_reduce

        return make_reduce(self, source, axis, where)

    def kind(self):
        """'sum' | 'prod' | 'max' | 'min' for the four standard combiners with their neutral identity (0, 1, the
        dtype's lowest, its highest), else None: a sum starting from 5 is a custom reducer (whose laws are
        checked), not a sum (whose empty windows were filled with 0 where ``pa.evaluate`` gave 5)."""
        if len(self.result) != 1:
            return None
        r, x, y = self.result[0], self.lhs[0], self.rhs[0]
        if not (isinstance(r, Call) and len(r.args) == 2 and {id(a) for a in r.args} == {id(x), id(y)}):
            return None
        k = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}.get(r.op)
        i, d = self.identity[0], r.dtype
        neutral = {"sum": 0, "prod": 1, "max": dt.min_value(d), "min": dt.max_value(d)}.get(k)
        return k if k is not None and isinstance(i, Const) and i.value == neutral else None

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"<CommReducer {self.name}>"


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    combiner: CommReducer
    source: tuple
    axis: tuple
    condition: Expr
    value_index: int = 0

    @property
    def dtype(self):
        return self.source[self.value_index].dtype

    def children(self):
        return self.source + (self.condition,)

    def with_children(self, children):
        children = tuple(children)
        if all(a is b for a, b in zip(children, self.children())):
            return self
        return Reduce(self.combiner, children[:-1], self.axis, children[-1], self.value_index)


# ---------------------------------------------------------------------------
# The operator table.  kind decides the typing rule:
#   arith: numeric operands promote; compare: -> bool; logic: bool operands;
#   int: integer operands; math: float operand, float result; unary: numeric.
# ---------------------------------------------------------------------------
OPS = {
    **{op: ("arith", 2) for op in ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max", "pow")},
    **{op: ("compare", 2) for op in ("lt", "le", "gt", "ge", "eq", "ne")},
    "and": ("logic", 2),
    "or": ("logic", 2),
    "not": ("logic", 1),
    "shl": ("int", 2),
    "shr": ("int", 2),
    **{
        op: ("math", 1)
        for op in (
            "exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
            "sin", "cos", "erf", "floor", "ceil", "round", "trunc",
        )
    },
    **{op: ("unary", 1) for op in ("neg", "abs", "sign")},
    "select": ("select", 3),
    "cast": ("cast", 1),
}

COMMUTATIVE = frozenset(("add", "mul", "min", "max", "eq", "ne", "and", "or"))


# the operators build through the constructors, which build these nodes: imported last, as a module, so that either
# module may be imported first
from . import construct as _construct  # noqa: E402
