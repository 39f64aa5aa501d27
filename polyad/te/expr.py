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

Build expressions with the operator overloads and the helpers of this module
(:func:`call`, :func:`select`, :func:`cast`, ...): they check dtypes and fold
trivial algebra (``x*1``, ``x+0``, constant operands).  The raw constructors
do no checking and are for transformations that already know the types.
"""

import builtins
import itertools
import math
import weakref
from dataclasses import dataclass, field, fields

import numpy as np

from ..errors import AxisError, DtypeError, PolyadError
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
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        return binary("mul", self, o)

    def __rmul__(self, o):
        return binary("mul", o, self)

    def __truediv__(self, o):
        return binary("div", self, o)

    def __rtruediv__(self, o):
        return binary("div", o, self)

    def __floordiv__(self, o):
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return binary("floordiv", o, self)

    def __mod__(self, o):
        return binary("floormod", self, o)

    def __rmod__(self, o):
        return binary("floormod", o, self)

    def __pow__(self, o):
        return binary("pow", self, o)

    def __rpow__(self, o):
        return binary("pow", o, self)

    def __neg__(self):
        return unary("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return unary("abs", self)

    def __lt__(self, o):
        return binary("lt", self, o)

    def __le__(self, o):
        return binary("le", self, o)

    def __gt__(self, o):
        return binary("gt", self, o)

    def __ge__(self, o):
        return binary("ge", self, o)

    def __eq__(self, o):
        try:
            return binary("eq", self, o)
        except PolyadError:
            return NotImplemented

    def __ne__(self, o):
        try:
            return binary("ne", self, o)
        except PolyadError:
            return NotImplemented

    def __and__(self, o):
        return binary("and", self, o)

    def __rand__(self, o):
        return binary("and", o, self)

    def __or__(self, o):
        return binary("or", self, o)

    def __ror__(self, o):
        return binary("or", o, self)

    def __invert__(self):
        return unary("not", self)

    def __lshift__(self, o):
        return binary("shl", self, o)

    def __rshift__(self, o):
        return binary("shr", self, o)

    def astype(self, dtype):
        return cast(self, dtype)

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
        return make_reduce(self, source, axis, where)

    def kind(self):
        """'sum' | 'prod' | 'max' | 'min' for the four standard combiners, else None."""
        if len(self.result) != 1:
            return None
        r, x, y = self.result[0], self.lhs[0], self.rhs[0]
        if isinstance(r, Call) and len(r.args) == 2 and {id(a) for a in r.args} == {id(x), id(y)}:
            return {"add": "sum", "mul": "prod", "max": "max", "min": "min"}.get(r.op)
        return None

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


def as_expr(value, dtype=None):
    """Convert a Python/numpy scalar to a Const (of ``dtype`` if given); pass Exprs through."""
    if isinstance(value, Expr):
        return value
    if _is_tensor(value):
        if len(value.shape) == 0:
            return value[()]
        raise PolyadError(
            f"tensor {value.name!r} of shape {value.shape} used as a scalar: index it, e.g. {value.name}[i, ...]"
        )
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        if dtype is None:
            dtype = dt.const_dtype(value)
        if dt.is_int(dtype) and isinstance(value, (float, np.floating)):
            if not float(value).is_integer():
                raise DtypeError(f"cannot use the float constant {value!r} with an {dtype} expression without a cast")
        if dt.is_int(dtype) and not _fits(value, dtype):
            raise DtypeError(f"the constant {value!r} does not fit in {dtype}")
        return Const(value, dtype)
    raise DtypeError(f"cannot use {value!r} (type {type(value).__name__}) in an expression")


def _fits(value, dtype):
    """Whether an integral value is in the range of the integer dtype."""
    return dt.min_value(dtype) <= int(value) <= dt.max_value(dtype)


def const(value, dtype=None):
    """``pa.const``: a constant of the given dtype (default by the value's Python type).

    :param value: a Python or numpy scalar (bool, int or float), or a 0-d numpy array.
    :param dtype: the dtype; None takes bool, int32 (int64 when the value does not fit) or float32 by the value's
        type.
    :returns: the constant expression.
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports, ``value`` is not a scalar, a non-integral
        float is given an integer dtype, or an integer does not fit ``dtype``.
    """
    return as_expr(value, None if dtype is None else dt.canonical(dtype))


def _coerce_pair(a, b):
    """Convert Python scalars against the other operand's dtype."""
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = _scalar_like(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = _scalar_like(a, b.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    return a, b


def _scalar_like(value, dtype):
    if _is_tensor(value):
        return as_expr(value)
    if isinstance(value, (bool, np.bool_)):
        return as_expr(value, dtype if dt.is_bool(dtype) else None)
    if isinstance(value, (float, np.floating)) and not dt.is_float(dtype):
        return as_expr(value)  # a float literal next to an integer: dtype check decides
    if isinstance(value, (int, np.integer)) and dt.is_int(dtype) and not _fits(value, dtype):
        return as_expr(int(value))  # too large for the other operand: int64, and the operation widens
    if isinstance(value, (int, np.integer, float, np.floating)) and not dt.is_bool(dtype):
        return as_expr(value, dtype)
    return as_expr(value)


def _is_const(e, v=None):
    return isinstance(e, Const) and (v is None or e.value == v)


_NP_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "min": builtins.min,
    "max": builtins.max,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
}


def binary(op, a, b):
    """Build ``op(a, b)`` with dtype checking and trivial folding."""
    a, b = _coerce_pair(a, b)
    kind = OPS[op][0]
    if kind == "arith":
        for x in (a, b):
            if dt.is_bool(x.dtype):
                raise DtypeError(f"{op} of a bool expression ({x}); cast it first")
        rdt = _promote(a, b, op)
        if op == "div" and not dt.is_float(rdt):
            raise DtypeError(f"'/' of integer expressions ({a} / {b}): use // (pa.floordiv) or cast to a float")
        a, b = _widen(a, rdt), _widen(b, rdt)
    elif kind == "compare":
        rdt = "bool"
        if dt.is_bool(a.dtype) != dt.is_bool(b.dtype):
            raise DtypeError(f"cannot compare {a.dtype} with {b.dtype} ({a} vs {b})")
        if not dt.is_bool(a.dtype):
            t = _promote(a, b, op)
            a, b = _widen(a, t), _widen(b, t)
    elif kind == "logic":
        for x in (a, b):
            if not dt.is_bool(x.dtype):
                raise DtypeError(f"logical {op} needs bool operands, got {x.dtype} ({x})")
        rdt = "bool"
    elif kind == "int":
        for x in (a, b):
            if not dt.is_int(x.dtype):
                raise DtypeError(f"{op} needs integer operands, got {x.dtype} ({x})")
        rdt = dt.promote(a.dtype, b.dtype, op)
        a, b = _widen(a, rdt), _widen(b, rdt)
    else:
        raise PolyadError(f"{op} is not a binary operator")
    folded = _fold(op, a, b, rdt)
    return Call(op, (a, b), rdt) if folded is None else folded


def _promote(a, b, op):
    if a.dtype == b.dtype:
        return a.dtype
    try:
        return dt.promote(a.dtype, b.dtype, op)
    except DtypeError:
        raise DtypeError(
            f"cannot mix {a.dtype} ({a}) and {b.dtype} ({b}) in {op} without a cast: use pa.cast(x, dtype)"
        ) from None


def _widen(x, dtype):
    if x.dtype == dtype:
        return x
    if isinstance(x, Const):
        return Const(x.value, dtype)
    return Call("cast", (x,), dtype)


def _fold(op, a, b, rdt):
    """Trivial algebra: constant folding and neutral/absorbing elements."""
    ca, cb = isinstance(a, Const), isinstance(b, Const)
    if ca and cb and op in _NP_FOLD:
        v = _NP_FOLD[op](a.value, b.value)
        return Const(v, rdt) if not dt.is_int(rdt) or _fits(v, rdt) else None  # overflow: the target wraps
    if ca and cb and op in ("floordiv", "floormod") and dt.is_int(rdt) and b.value != 0:
        return Const(a.value // b.value if op == "floordiv" else a.value % b.value, rdt)
    if op in ("add", "sub") and cb and dt.is_int(rdt) and isinstance(a, Call) and a.op in ("add", "sub") \
            and isinstance(a.args[1], Const):
        # integer offsets reassociate exactly: (x + c1) - c2 -> x + (c1 - c2)
        c = (a.args[1].value if a.op == "add" else -a.args[1].value) + (b.value if op == "add" else -b.value)
        if _fits(abs(c), rdt):
            return binary("add", a.args[0], c) if c >= 0 else binary("sub", a.args[0], -c)
    if op == "add":
        if _is_const(b, 0):
            return a
        if _is_const(a, 0):
            return b
    elif op == "sub":
        if _is_const(b, 0):
            return a
        if a is b and not dt.is_float(rdt):
            return Const(0, rdt)
        if _is_const(a, 0):
            return unary("neg", b)
    elif op == "mul":
        if _is_const(b, 1):
            return a
        if _is_const(a, 1):
            return b
        if _is_const(a, 0) or _is_const(b, 0):
            return Const(0, rdt)
    elif op in ("div", "floordiv"):
        if _is_const(b, 1):
            return a
        if _is_const(a, 0) and not _is_const(b, 0):
            return Const(0, rdt)
    elif op == "floormod":
        if _is_const(b, 1) and dt.is_int(rdt):
            return Const(0, rdt)
    elif op in ("min", "max") and a is b:
        return a
    elif op == "and":
        if _is_const(a):
            return b if a.value else a
        if _is_const(b):
            return a if b.value else b
        if a is b:
            return a
    elif op == "or":
        if _is_const(a):
            return a if a.value else b
        if _is_const(b):
            return b if b.value else a
        if a is b:
            return a
    elif op in ("eq", "le", "ge") and a is b and not dt.is_float(a.dtype):
        return Const(True, "bool")
    elif op in ("ne", "lt", "gt") and a is b and not dt.is_float(a.dtype):
        return Const(False, "bool")
    return None


_UNARY_FOLD = {
    "neg": lambda v: -v,
    "abs": abs,
    "not": lambda v: not v,
    "exp": math.exp,
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else None,
    "floor": math.floor,
    "ceil": math.ceil,
}


def unary(op, x):
    x = as_expr(x)
    kind = OPS[op][0]
    if kind == "math":
        if not dt.is_float(x.dtype):
            raise DtypeError(f"{op} needs a float operand, got {x.dtype} ({x}); use pa.cast(x, 'float32')")
        rdt = x.dtype
    elif kind == "unary":
        if dt.is_bool(x.dtype):
            raise DtypeError(f"{op} of a bool expression ({x}); cast it first")
        rdt = x.dtype
    elif kind == "logic":
        if not dt.is_bool(x.dtype):
            raise DtypeError(f"logical not needs a bool operand, got {x.dtype} ({x})")
        rdt = "bool"
    else:
        raise PolyadError(f"{op} is not a unary operator")
    if isinstance(x, Const) and op in _UNARY_FOLD:
        v = _UNARY_FOLD[op](x.value)
        if v is not None:
            return Const(v, rdt)
    if op == "neg" and isinstance(x, Call) and x.op == "neg":
        return x.args[0]
    if op == "not" and isinstance(x, Call) and x.op == "not":
        return x.args[0]
    return Call(op, (x,), rdt)


def call(op, *args):
    """Build any operator of :data:`OPS` by name (``cast`` excepted: use :func:`cast`)."""
    if op not in OPS:
        raise PolyadError(f"unknown operator {op!r}")
    arity = OPS[op][1]
    if len(args) != arity:
        raise PolyadError(f"{op} takes {arity} operands, got {len(args)}")
    if op == "select":
        return select(*args)
    if op == "cast":
        raise PolyadError("use pa.cast(x, dtype)")
    return unary(op, *args) if arity == 1 else binary(op, *args)


def select(cond, true_value, false_value):
    """``pa.select(cond, a, b)``: a where cond holds, else b (both are evaluated).

    :param cond: a bool scalar expression.
    :param true_value: the value where ``cond`` holds: an expression or a Python/numpy scalar.
    :param false_value: the value elsewhere, of ``true_value``'s dtype (two integer dtypes widen to int64).
    :returns: the expression ``select(cond, true_value, false_value)`` (just one branch when ``cond`` is a
        constant).
    :raises DtypeError: when ``cond`` is not bool, or the two values have dtypes that do not mix without a cast.
    """
    cond = as_expr(cond)
    if not dt.is_bool(cond.dtype):
        raise DtypeError(f"select condition must be bool, got {cond.dtype} ({cond})")
    a, b = _coerce_pair(true_value, false_value)
    if a.dtype != b.dtype:
        t = dt.promote(a.dtype, b.dtype, "select")
        a, b = _widen(a, t), _widen(b, t)
    if isinstance(cond, Const):
        return a if cond.value else b
    if a is b:
        return a
    return Call("select", (cond, a, b), a.dtype)


def cast(x, dtype):
    """``pa.cast(x, dtype)``: convert (float -> int truncates toward zero, as C and numpy).

    :param x: a scalar expression or a Python/numpy scalar.
    :param dtype: the target dtype (``"float32"``, ``"float64"``, ``"int32"``, ``"int64"``, ``"bool"``, or a numpy
        dtype).
    :returns: the converted expression (``x`` itself when it already has ``dtype``).
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports, or ``x`` is not a scalar expression.
    """
    dtype = dt.canonical(dtype)
    x = as_expr(x)
    if x.dtype == dtype:
        return x
    if isinstance(x, Const):
        v = x.value
        if dt.is_int(dtype) and isinstance(v, float):
            if not math.isfinite(v):
                return Call("cast", (x,), dtype)
            v = math.trunc(v)
        if dt.is_int(dtype) and not _fits(v, dtype):
            return Call("cast", (x,), dtype)  # out of range: no folded constant, the target decides
        return Const(v, dtype)
    return Call("cast", (x,), dtype)


def floordiv(a, b):
    """Floor division (Python/isl semantics, not C truncation).

    :param a: the dividend: a scalar expression or a Python/numpy number.
    :param b: the divisor, of ``a``'s dtype (two integer dtypes widen to int64).
    :returns: the expression ``floordiv(a, b)`` (folded when both are constants).
    :raises DtypeError: when an operand is bool, or the operands' dtypes do not mix without a cast.
    """
    return binary("floordiv", a, b)


def floormod(a, b):
    """Remainder of floor division: the sign follows the divisor.

    :param a: the dividend: a scalar expression or a Python/numpy number.
    :param b: the divisor, of ``a``'s dtype (two integer dtypes widen to int64).
    :returns: the expression ``floormod(a, b)`` (folded when both are constants).
    :raises DtypeError: when an operand is bool, or the operands' dtypes do not mix without a cast.
    """
    return binary("floormod", a, b)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

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


class ReducerFactory:
    """The object ``pa.comm_reducer`` returns: instantiated per source dtype(s), like TVM's."""

    def __init__(self, fcombine, fidentity, name=None):
        self.fcombine, self.fidentity = fcombine, fidentity
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
    if _is_reduction_call(b, axis):
        return _max(a, axis if axis is not None else b, where)
    if b is None:
        raise AxisError("pa.max needs axis= (reduction) or a second operand (binary max)")
    return binary("max", a, b)


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
    if _is_reduction_call(b, axis):
        return _min(a, axis if axis is not None else b, where)
    if b is None:
        raise AxisError("pa.min needs axis= (reduction) or a second operand (binary min)")
    return binary("min", a, b)


def sum_reducer(dtype):
    return _sum.instantiate((dtype,))


def max_reducer(dtype):
    return _max.instantiate((dtype,))


def min_reducer(dtype):
    return _min.instantiate((dtype,))


def prod_reducer(dtype):
    return _prod.instantiate((dtype,))
