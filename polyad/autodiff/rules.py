"""Scalar derivative rules: ONE table, keyed by the op names of ``te.expr.OPS``.

Each rule is ``rule(g, y, *args) -> one adjoint contribution per argument``:
``g`` is the adjoint of the node (the derivative of the whole body with
respect to it, times the seed), ``y`` is the node itself (so ``exp`` can reuse
``y`` instead of building ``exp(x)`` again) and ``args`` are its operands.
``None`` means "no contribution" (a zero derivative, or an operand that is not
a float).  The maths is written next to each rule, as in Halide's
Derivative.cpp.

Policy decisions (documented in docs/autodiff.md):

* comparisons, logic, shifts, integer-valued results and the piecewise
  constant ops (floor, ceil, round, trunc, sign, float floordiv) have a zero
  derivative;
* ``select(c, a, b)`` differentiates its branches, never its condition;
* ``max(a, b)`` / ``min(a, b)`` ties give the whole adjoint to the SECOND
  operand, as PyTorch's elementwise ``max(self, other)`` historically does
  (``self`` gets the gradient only where it wins strictly): ``max(x, 0)``
  (relu) has derivative 0 at x = 0, as ``torch.relu``;
* ``pow(a, b)`` w.r.t. the exponent is ``a**b * log(a)`` where ``a > 0`` and
  0 elsewhere (TensorFlow's convention; the real derivative does not exist
  for ``a < 0``); w.r.t. the base it is 0 where ``b == 0`` (as PyTorch).
"""

import math

from ..errors import NotDifferentiableError
from ..te import dtype as dt
from ..te.construct import binary, cast, select, unary
from ..te.expr import OPS, Call, Const, Load
from ..te.visit import post_order


def _exp(x):
    return unary("exp", x)


def _log(x):
    return unary("log", x)


def _zero(n):
    return lambda g, y, *args: (None,) * n


_LN2 = math.log(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

#: op name -> rule(g, y, *args) -> tuple of adjoint contributions (None: zero)
RULES = {
    # d(a + b) = da + db
    "add": lambda g, y, a, b: (g, g),
    # d(a - b) = da - db
    "sub": lambda g, y, a, b: (g, -g),
    # d(a b) = b da + a db
    "mul": lambda g, y, a, b: (g * b, g * a),
    # d(a / b) = da / b - (a / b^2) db = (da - y db) / b
    "div": lambda g, y, a, b: (g / b, -(g * y) / b),
    # floor(a / b) is piecewise constant
    "floordiv": _zero(2),
    # a mod b = a - floor(a / b) b  =>  d = da - floor(a / b) db
    "floormod": lambda g, y, a, b: (g, -(g * unary("floor", a / b))),
    # min(a, b) = a if a < b else b (ties: b)
    "min": lambda g, y, a, b: (select(a < b, g, 0), select(a < b, 0, g)),
    # max(a, b) = a if a > b else b (ties: b)
    "max": lambda g, y, a, b: (select(a > b, g, 0), select(a > b, 0, g)),
    # d(a^b) = b a^(b-1) da + a^b log(a) db   (da-part 0 where b == 0, db-part 0 where a <= 0)
    "pow": lambda g, y, a, b: (
        select(b == 0, 0, g * b * binary("pow", a, b - 1)),
        select(a > 0, g * y * _log(a), 0),
    ),
    # comparisons and logic: bool results, no derivative
    **{op: _zero(2) for op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "shl", "shr")},
    "not": _zero(1),
    # d exp(x) = exp(x) dx
    "exp": lambda g, y, x: (g * y,),
    # d log(x) = dx / x
    "log": lambda g, y, x: (g / x,),
    # d log2(x) = dx / (x ln 2)
    "log2": lambda g, y, x: (g / (x * _LN2),),
    # d log(1 + x) = dx / (1 + x)
    "log1p": lambda g, y, x: (g / (1 + x),),
    # d sqrt(x) = dx / (2 sqrt(x))
    "sqrt": lambda g, y, x: (g * 0.5 / y,),
    # d x^(-1/2) = -1/2 x^(-3/2) dx = -y / (2x) dx
    "rsqrt": lambda g, y, x: (-(g * 0.5 * y) / x,),
    # d tanh(x) = (1 - tanh(x)^2) dx
    "tanh": lambda g, y, x: (g * (1 - y * y),),
    # d sigmoid(x) = sigmoid(x) (1 - sigmoid(x)) dx
    "sigmoid": lambda g, y, x: (g * y * (1 - y),),
    # d sin(x) = cos(x) dx
    "sin": lambda g, y, x: (g * unary("cos", x),),
    # d cos(x) = -sin(x) dx
    "cos": lambda g, y, x: (-(g * unary("sin", x)),),
    # d erf(x) = 2/sqrt(pi) exp(-x^2) dx
    "erf": lambda g, y, x: (g * _TWO_OVER_SQRT_PI * _exp(-(x * x)),),
    # piecewise constant
    **{op: _zero(1) for op in ("floor", "ceil", "round", "trunc", "sign")},
    # d(-x) = -dx
    "neg": lambda g, y, x: (-g,),
    # d|x| = sign(x) dx
    "abs": lambda g, y, x: (g * unary("sign", x),),
    # select(c, a, b): the branches, not the condition
    "select": lambda g, y, c, a, b: (None, select(c, g, 0), select(c, 0, g)),
    # a float -> float cast passes the adjoint through, converted back
    "cast": lambda g, y, x: (cast(g, x.dtype),),
}

assert set(RULES) == set(OPS), "the derivative table must cover every operator"


def _is_zero(e):
    return isinstance(e, Const) and dt.is_float(e.dtype) and e.value == 0


def _add_all(terms):
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def scalar_adjoints(root, seed, is_leaf):
    """Reverse accumulation over one scalar expression DAG.

    Returns ``{id(leaf): (leaf, adjoint)}`` for every node with
    ``is_leaf(node)`` that the float value of ``root`` depends on, where the
    adjoint is the derivative of ``root`` w.r.t. that leaf times ``seed``.
    Leaves are not descended into (the indices of a Load have no derivative).
    Every node is visited once: shared subexpressions are differentiated once.
    """
    order = post_order(root)
    active = set()
    for n in order:
        if is_leaf(n):
            if dt.is_float(n.dtype):
                active.add(id(n))
        elif isinstance(n, Call) and dt.is_float(n.dtype) and any(id(a) in active for a in n.args):
            active.add(id(n))
    out = {}
    if id(root) not in active:
        return out
    pending = {id(root): [seed]}
    for n in reversed(order):
        terms = pending.pop(id(n), None)
        if not terms:
            continue
        g = _add_all(terms)
        if is_leaf(n):
            out[id(n)] = (n, g)
            continue
        rule = RULES.get(n.op) if isinstance(n, Call) else None
        if rule is None:
            raise NotDifferentiableError(f"no derivative rule for {n!r}")
        for a, c in zip(n.args, rule(g, n, *n.args)):
            if c is None or id(a) not in active or _is_zero(c):
                continue
            pending.setdefault(id(a), []).append(c)
    return out


def float_loads(n):
    return isinstance(n, Load) and dt.is_float(n.dtype)


TRUE = Const(True, "bool")


def split_guard(e):
    """``e`` as ``(cond, value)`` with ``e == select(cond, value, 0)``.

    Lifts the conditions of selects whose other branch is zero out through
    products, quotients (numerator), negations and float casts, so the
    adjoint of a load inside ``select(c, ..., 0)`` carries ``c`` as a guard.
    The order of a conjunction is outer first: an inner condition may read
    memory that only the outer one makes valid.
    """
    if isinstance(e, Call):
        op, a = e.op, e.args
        if op == "select":
            if _is_zero(a[2]):
                c, v = split_guard(a[1])
                return a[0] & c, v
            if _is_zero(a[1]):
                c, v = split_guard(a[2])
                return ~a[0] & c, v
        elif op == "mul":
            ca, va = split_guard(a[0])
            cb, vb = split_guard(a[1])
            if ca is TRUE and cb is TRUE:
                return TRUE, e
            return ca & cb, va * vb
        elif op == "div":
            ca, va = split_guard(a[0])
            if ca is not TRUE:
                return ca, va / a[1]
        elif op == "neg":
            ca, va = split_guard(a[0])
            if ca is not TRUE:
                return ca, -va
        elif op == "cast" and dt.is_float(a[0].dtype):
            ca, va = split_guard(a[0])
            if ca is not TRUE:
                return ca, cast(va, e.dtype)
    return TRUE, e
