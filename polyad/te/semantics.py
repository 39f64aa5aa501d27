"""The numpy meaning of each operator of :data:`~polyad.te.expr.OPS`.

``pa.evaluate`` computes with this table, and so does :func:`values`, which evaluates an expression of
variables and constants alone (a reducer's combiner on sample points: ``te.reduce`` checks its laws with it).
Integer ``//`` and ``%`` floor, as Python and isl do.
"""

import math

import numpy as np

from . import dtype as dt
from .expr import Call, Const, Var


def _floordiv(a, b):
    return np.floor_divide(a, b)  # floats too: Python's, from fmod (1.0 // 0.1 is 9), as compiled code's helper


def _floormod(a, b):
    return np.mod(a, b)


def _power(a, b):
    if not np.issubdtype(np.result_type(a, b), np.integer):
        return np.power(a, b)
    # a negative exponent: 1 / a**-b truncated, as compiled code's pa_ipow (numpy raises)
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(np.asarray(b) % 2 == 1, -1, 1), 0))
    return np.where(np.asarray(b) < 0, neg, np.power(a, np.maximum(b, 0)))


def pow_chain(c):
    """How ``pow(x, c)`` with a constant float exponent is computed: ``(m, q, negative)`` for ``|c| = m + q/4``
    (``|c| <= 4``; not 0, 1 nor a non-multiple of 1/4), else None (``pow`` itself).

    ``x ** m`` is multiplied out and the quarters are square roots (``sqrt``, ``sqrt(sqrt)`` or their product), of
    ``x + 0.0`` where there are any (``pow(-0.0, 0.75)`` is +0); a negative exponent takes the reciprocal.  The
    results are IEEE ``pow``'s within rounding, but for ``-inf`` with quarters: NaN, as for any other negative base
    (``pow`` gives inf there).  PoCL's ``pow`` took 86 ms for a million float32s, the square roots 0.3 ms.
    """
    if isinstance(c, bool) or not isinstance(c, (int, float, np.integer, np.floating)) or not math.isfinite(c):
        return None
    quarters = abs(float(c)) * 4
    if quarters != int(quarters) or quarters > 16:
        return None
    m, q = divmod(int(quarters), 4)
    if q == 0 and m < 2 and c > 0:  # x ** 1 and x ** 0 are folded or are pow's business
        return None
    if m == 0 and q == 0:
        return None
    return m, q, c < 0


def pow_by_chain(x, chain):
    """``pow(x, c)`` computed as :func:`pow_chain` says (numpy), what compiled code computes."""
    m, q, negative = chain
    x = np.asarray(x)
    base = x + x.dtype.type(0) if q else x
    r = None
    for _ in range(m):
        r = base if r is None else r * base
    if q:
        root = np.sqrt(base)
        quarter = {1: np.sqrt(root), 2: root, 3: root * np.sqrt(root)}[q]
        r = quarter if r is None else r * quarter
    return x.dtype.type(1) / r if negative else r


def _sigmoid(x):
    return np.exp(-np.logaddexp(np.zeros((), x.dtype), -x))


def cast(x, dtype):
    """``x`` as ``dtype``: a float truncates toward zero into an integer, saturating to its range, and NaN gives 0
    (OpenCL's ``convert_int_sat_rtz``, what compiled code does; numpy's own is platform-defined there); other
    casts as numpy's ``astype`` (integers narrow by wrapping)."""
    x = np.asarray(x)
    target = np.dtype(dtype)
    if x.dtype.kind != "f" or target.kind not in "iu":
        return x.astype(target)
    info = np.iinfo(target)
    lo, hi = x.dtype.type(info.min), x.dtype.type(info.max)  # hi may round up out of the range: 2**31 in float32
    inside = (x >= lo) & (x < hi)
    r = np.where(inside, x, 0).astype(target)
    return np.where(x >= hi, info.max, np.where(x < lo, info.min, r)).astype(target, copy=False)


_erf = np.frompyfunc(math.erf, 1, 1)

#: op name -> numpy implementation (the same names as te.expr.OPS; select and cast are the evaluators' own)
NUMPY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": _floordiv, "floormod": _floormod, "min": np.minimum, "max": np.maximum,
    "pow": _power,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
    "shl": np.left_shift, "shr": np.right_shift,
    "exp": np.exp, "log": np.log, "log2": np.log2, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
    "sin": np.sin, "cos": np.cos, "erf": lambda x: np.asarray(_erf(x), dtype=np.asarray(x).dtype),
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "neg": np.negative, "abs": np.abs, "sign": np.sign,
}


#: int32 arithmetic is computed in 64 bits and wraps where it is stored (or cast), as compiled code on CPUs
#: computes it: index arithmetic such as ``(i * 1000000 + j) % 7`` is then exact, as isl takes it
COMPUTED = {"int32": "int64"}


def call_value(e, args):
    """The value of operator node ``e`` from its operands' values ``args`` (arrays), as compiled code computes it:
    a select of a 0-d condition takes one branch, a pow by a constant multiple of 1/4 is :func:`pow_by_chain`'s,
    and an int32 result stays in 64 bits (:data:`COMPUTED`)."""
    op = e.op
    if op == "select":
        c = args[0]
        return (args[1] if c else args[2]) if np.ndim(c) == 0 else np.where(*args)
    if op == "cast":
        return cast(args[0], e.dtype)
    chain = op == "pow" and dt.is_float(e.dtype) and isinstance(e.args[1], Const) and pow_chain(e.args[1].value)
    if chain:
        return np.asarray(pow_by_chain(args[0], chain)).astype(e.dtype, copy=False)
    return np.asarray(NUMPY_OPS[op](*args)).astype(COMPUTED.get(e.dtype, e.dtype), copy=False)


def values(exprs, env):
    """The values of ``exprs`` (expressions of variables, constants and operators: no loads, no reductions).

    :param exprs: a tuple of expressions.
    :param env: ``id(var)`` -> an array (all broadcastable together).
    :returns: a tuple of arrays, or None when an expression holds something else (a load, a reduction, a variable
        without a value).
    """
    from .visit import post_order

    memo = {}
    for e in post_order(tuple(exprs)):
        if isinstance(e, Const):
            v = np.asarray(e.value, dtype=e.dtype)
        elif isinstance(e, Var) and id(e) in env:
            v = env[id(e)]
        elif isinstance(e, Call):
            v = call_value(e, [memo[id(a)] for a in e.args])
        else:
            return None
        memo[id(e)] = v
    return tuple(memo[id(e)] for e in exprs)
