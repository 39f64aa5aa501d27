"""Elementwise ops with numpy semantics: ``pa.ops.add(X, Y)``, ``pa.ops.exp(X)``, ...

Every op returns a new tensor defined by one ``compute`` named after the op and
tagged "elementwise" (all tensor operands have the output shape) or
"broadcast" (some operand is broadcast).

Operands are tensors or scalars, broadcast as numpy does.  The result dtype is
numpy's ``np.result_type`` of the operands, with Python scalars weak (they take
the tensor's dtype) and numpy scalars strong; operands are cast explicitly to
it.  Differences with numpy, all raising :class:`pa.DtypeError`, come from
dtypes polyad lacks (numpy would return int8 or float16):

* ``subtract``, ``negative``, ``sign``, ``floor_divide``, ``mod``, ``power``
  and the shifts refuse bool operands (numpy refuses the first three as well);
* float-only math (``exp log log2 log1p sqrt rsqrt tanh sigmoid sin cos erf``)
  on int32/int64 computes in float64, as numpy does; on bool it raises;
* ``floor ceil trunc round`` of integers return them unchanged (as numpy);
  ``round`` of bool raises.

bool ``add``/``multiply``/``maximum``/``minimum`` are logical or/and, as numpy.
"""

from ..errors import ArityError, DtypeError
from ..te import dtype as dt
from ..te.construct import binary, select, unary
from ..te.expr import Const
from ..te.construct import cast as _expr_cast
from ._util import check_operand, describe, map_compute, read_as, result_dtype

__all__ = [
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "power", "maximum", "minimum",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
    "logical_or", "left_shift", "right_shift", "exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh",
    "sigmoid", "sin", "cos", "erf", "floor", "ceil", "round", "trunc", "negative", "abs", "sign",
    "logical_not", "clip", "where", "cast",
]


def _what(name, xs):
    return f"{name} of {' and '.join(describe(x) for x in xs)}"


def _nary(name, xs, dtype_rule, body):
    """The common path: check operands, find the dtype, cast each operand to it, apply ``body``.

    ``dtype_rule(dtype, what)`` returns the dtype operands are cast to (or
    raises); ``body(*scalars)`` builds the element expression.
    """
    what = _what(name, xs)
    xs = [check_operand(x, what) for x in xs]
    what = _what(name, xs)
    t = dtype_rule(result_dtype(xs, what), what)
    return map_compute(name, xs, lambda idx, shape: body(*(read_as(x, t, shape, idx, what) for x in xs)), what)


def _same(t, what):
    return t


def _no_bool(t, what):
    if dt.is_bool(t):
        raise DtypeError(f"{what}: not defined for bool operands (numpy gives int8 or refuses); cast them first")
    return t


def _int_only(t, what):
    if not dt.is_int(t):
        raise DtypeError(f"{what}: needs integer operands, the operands promote to {t}")
    return t


def _truthy(e):
    """numpy truthiness of a scalar element: x != 0 for numbers."""
    return e if dt.is_bool(e.dtype) else binary("ne", e, Const(0, e.dtype))


def _bool_or(op, bool_op):
    """A binary op whose bool form is a logical one (numpy's add/multiply/maximum/minimum on bool)."""
    return lambda a, b: binary(bool_op if dt.is_bool(a.dtype) else op, a, b)


# -- binary arithmetic ---------------------------------------------------------

def add(x1, x2):
    """``x1 + x2`` with numpy broadcasting (logical or for bools).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("add", (x1, x2), _same, _bool_or("add", "or"))


def subtract(x1, x2):
    """``x1 - x2``; bool operands raise DtypeError (as numpy).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        promote to bool.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("subtract", (x1, x2), _no_bool, lambda a, b: binary("sub", a, b))


def multiply(x1, x2):
    """``x1 * x2`` (logical and for bools).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("multiply", (x1, x2), _same, _bool_or("mul", "and"))


def _div_dtype(t, what):
    return t if dt.is_float(t) else "float64"


def divide(x1, x2):
    """True division ``x1 / x2``; integer and bool operands give float64, as numpy.

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted float dtype (float64 for integer and bool
        operands).
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("divide", (x1, x2), _div_dtype, lambda a, b: binary("div", a, b))


def floor_divide(x1, x2):
    """``x1 // x2``: floor division (Python/numpy semantics, not C truncation).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        promote to bool.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("floor_divide", (x1, x2), _no_bool, lambda a, b: binary("floordiv", a, b))


def mod(x1, x2):
    """``x1 % x2``: remainder of floor division, the sign of the divisor (numpy's ``mod``).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        promote to bool.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("mod", (x1, x2), _no_bool, lambda a, b: binary("floormod", a, b))


def power(x1, x2):
    """``x1 ** x2``.

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        promote to bool.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("power", (x1, x2), _no_bool, lambda a, b: binary("pow", a, b))


def maximum(x1, x2):
    """Elementwise maximum (NaN propagates in the numpy oracle).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("maximum", (x1, x2), _same, _bool_or("max", "or"))


def minimum(x1, x2):
    """Elementwise minimum.

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("minimum", (x1, x2), _same, _bool_or("min", "and"))


# -- comparisons and logic -------------------------------------------------------

def _compare(name, op, x1, x2):
    return _nary(name, (x1, x2), _same, lambda a, b: binary(op, a, b))


def equal(x1, x2):
    """``equal(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("equal", "eq", x1, x2)


def not_equal(x1, x2):
    """``not_equal(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("not_equal", "ne", x1, x2)


def greater(x1, x2):
    """``greater(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("greater", "gt", x1, x2)


def greater_equal(x1, x2):
    """``greater_equal(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("greater_equal", "ge", x1, x2)


def less(x1, x2):
    """``less(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("less", "lt", x1, x2)


def less_equal(x1, x2):
    """``less_equal(x1, x2)``: elementwise comparison, a bool tensor (operands promoted first).
    
    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new bool tensor of the broadcast shape.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included),
        the operands have no common dtype polyad supports, or a scalar does not fit the promoted dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _compare("less_equal", "le", x1, x2)


def _logic_body(op):
    return lambda a, b: binary(op, _truthy(a), _truthy(b))


def logical_and(x1, x2):
    """Truth of ``x1 and x2`` elementwise (numbers are true when nonzero).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, bool.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("logical_and", (x1, x2), _same, _logic_body("and"))


def logical_or(x1, x2):
    """Truth of ``x1 or x2`` elementwise.

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, bool.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("logical_or", (x1, x2), _same, _logic_body("or"))


def logical_not(x):
    """Truth of ``not x`` elementwise.

    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape, bool.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included), or its dtype is
        not one polyad supports.
    """
    return _nary("logical_not", (x,), _same, lambda a: unary("not", _truthy(a)))


def left_shift(x1, x2):
    """``x1 << x2`` on integers.

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        do not promote to an integer dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("left_shift", (x1, x2), _int_only, lambda a, b: binary("shl", a, b))


def right_shift(x1, x2):
    """``x1 >> x2`` on integers (arithmetic for signed, as numpy).

    :param x1: the first operand: a tensor, a scalar expression or a Python/numpy scalar.
    :param x2: the second operand, broadcast with ``x1`` as numpy does.
    :returns: a new tensor of the broadcast shape, of the promoted dtype.
    :raises DtypeError: when an operand is not a tensor or a scalar (a numpy array of rank > 0 included), the
        operands have no common dtype polyad supports, or a scalar does not fit the result dtype; when the operands
        do not promote to an integer dtype.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    return _nary("right_shift", (x1, x2), _int_only, lambda a, b: binary("shr", a, b))


# -- unary -------------------------------------------------------------------------

def negative(x):
    """``-x``; bool raises DtypeError (as numpy).

    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape, of ``x``'s dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included), or its dtype is
        not one polyad supports; when ``x`` is bool.
    """
    return _nary("negative", (x,), _no_bool, lambda a: unary("neg", a))


def abs(x):  # noqa: A001 - numpy's name
    """``|x|`` (bools unchanged).

    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape, of ``x``'s dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included), or its dtype is
        not one polyad supports.
    """
    return _nary("abs", (x,), _same, lambda a: a if dt.is_bool(a.dtype) else unary("abs", a))


def sign(x):
    """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN); bool raises DtypeError.

    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape, of ``x``'s dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included), or its dtype is
        not one polyad supports; when ``x`` is bool.
    """
    return _nary("sign", (x,), _no_bool, lambda a: unary("sign", a))


def _float_math_dtype(t, what):
    if dt.is_bool(t):
        raise DtypeError(f"{what}: needs a numeric operand (numpy would give float16, which polyad lacks); cast it")
    return t if dt.is_float(t) else "float64"


def _float_math(op, x):
    return _nary(op, (x,), _float_math_dtype, lambda a: unary(op, a))


def _rounding(op, x):
    def rule(t, what):
        if op == "round" and dt.is_bool(t):
            raise DtypeError(f"{what}: round of bool would be float16 in numpy, which polyad lacks; cast it")
        return t

    return _nary(op, (x,), rule, lambda a: unary(op, a) if dt.is_float(a.dtype) else a)


def exp(x):
    """``exp(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("exp", x)


def log(x):
    """``log(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("log", x)


def log2(x):
    """``log2(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("log2", x)


def log1p(x):
    """``log1p(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("log1p", x)


def sqrt(x):
    """``sqrt(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("sqrt", x)


def rsqrt(x):
    """``rsqrt(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("rsqrt", x)


def tanh(x):
    """``tanh(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("tanh", x)


def sigmoid(x):
    """``sigmoid(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("sigmoid", x)


def sin(x):
    """``sin(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("sin", x)


def cos(x):
    """``cos(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("cos", x)


def erf(x):
    """``erf(x)`` elementwise; integer tensors are computed in float64 (as numpy), bool raises.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape: of ``x``'s dtype for floats, float64 for integers.
    :raises DtypeError: when ``x`` is bool, is not a tensor or a scalar (a numpy array of rank > 0
        included), or its dtype is not one polyad supports.
    """
    return _float_math("erf", x)


def floor(x):
    """``floor(x)`` elementwise; integers are returned unchanged (as numpy).
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included),
        or its dtype is not one polyad supports.
    """
    return _rounding("floor", x)


def ceil(x):
    """``ceil(x)`` elementwise; integers are returned unchanged (as numpy).
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included),
        or its dtype is not one polyad supports.
    """
    return _rounding("ceil", x)


def round(x):  # noqa: A001 - numpy's name
    """``round(x)``: round half to even (numpy's ``round``/``rint``); integers unchanged.
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included), ``x`` is bool,
        or its dtype is not one polyad supports.
    """
    return _rounding("round", x)


def trunc(x):
    """``trunc(x)`` elementwise; integers are returned unchanged (as numpy).
    
    :param x: the operand: a tensor, a scalar expression or a Python/numpy scalar.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises DtypeError: when ``x`` is not a tensor or a scalar (a numpy array of rank > 0 included),
        or its dtype is not one polyad supports.
    """
    return _rounding("trunc", x)


# -- selection, clipping, conversion -------------------------------------------------

def where(condition, x=None, y=None):
    """``x`` where ``condition`` is true (nonzero), else ``y``; all three broadcast together.

    :param condition: the condition: a tensor or a scalar of any dtype (numbers are true when nonzero).
    :param x: the values where ``condition`` is true: a tensor or a scalar.
    :param y: the values where ``condition`` is false: a tensor or a scalar.
    :returns: a new tensor of the broadcast shape of the three, of ``x`` and ``y``'s promoted dtype.
    :raises ArityError: when ``x`` or ``y`` is missing (numpy's one-argument form, ``nonzero``, has no static
        shape).
    :raises DtypeError: when an operand is not a tensor or a scalar, or ``x`` and ``y`` have no common dtype polyad
        supports.
    :raises ShapeError: when the tensor operands' shapes do not broadcast.
    """
    if x is None or y is None:
        raise ArityError("where: needs condition, x and y (the one-argument form, nonzero, has no static shape)")
    what = _what("where", (condition, x, y))
    c, x, y = (check_operand(v, what) for v in (condition, x, y))
    what = _what("where", (c, x, y))
    t = result_dtype((x, y), what)

    def body(idx, shape):
        cond = read_as(c, result_dtype((c,), what), shape, idx, what)
        return select(_truthy(cond), read_as(x, t, shape, idx, what), read_as(y, t, shape, idx, what))

    return map_compute("where", (c, x, y), body, what)


def clip(x, a_min=None, a_max=None):
    """``minimum(maximum(x, a_min), a_max)``; either bound may be None, bounds may be tensors.

    :param x: the tensor (or scalar) to clip.
    :param a_min: the lower bound (a tensor or a scalar, broadcast with ``x``), or None for none.
    :param a_max: the upper bound (a tensor or a scalar, broadcast with ``x``), or None for none.
    :returns: a new tensor of the broadcast shape, of the promoted dtype of ``x`` and the bounds.
    :raises DtypeError: when an operand is not a tensor or a scalar, or the operands have no common dtype polyad
        supports.
    :raises ShapeError: when ``x`` and tensor bounds do not broadcast.
    """
    xs = [x] + [b for b in (a_min, a_max) if b is not None]

    def body(v, *bounds):
        it = iter(bounds)
        if a_min is not None:
            v = _bool_or("max", "or")(v, next(it))
        if a_max is not None:
            v = _bool_or("min", "and")(v, next(it))
        return v

    return _nary("clip", xs, _same, body)


def cast(x, dtype):
    """``x.astype(dtype)``: float -> int truncates toward zero (saturating, NaN -> 0), number -> bool is ``x != 0``.

    :param x: the tensor (or scalar) to convert.
    :param dtype: the target dtype (``"float32"``, ``"float64"``, ``"int32"``, ``"int64"``, ``"bool"``, or a numpy
        dtype).
    :returns: a new tensor of ``x``'s shape and dtype ``dtype``.
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports, or ``x`` is not a tensor or a scalar.
    """
    what = _what("cast", (x,))
    try:
        target = dt.canonical(dtype)
    except DtypeError as e:
        raise DtypeError(f"{what}: {e}") from None

    return _nary("cast", (x,), _same, lambda a: _truthy(a) if dt.is_bool(target) else _expr_cast(a, target))

