"""pa.ops elementwise ops against numpy, through pa.evaluate: values, dtypes, broadcasting, errors."""

import math

import numpy as np
import pytest

import polyad as pa
from polyad import ops

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")


def rand(shape, dtype, seed, lo=-5, hi=6):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        return np.asarray(rng.integers(lo, hi, size=shape)).astype(dtype)
    return np.asarray(rng.standard_normal(shape)).astype(dtype)


def check(got, ref):
    """Same dtype, shape and values (floats within their precision, NaN equal to NaN)."""
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype.kind == "f":
        tol = 2e-6 if ref.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, ref)


def ev(tensor, feed):
    return pa.evaluate(tensor, feed)


# ---------------------------------------------------------------------------------------------
# binary ops: every dtype combination numpy keeps within polyad's dtypes, broadcasting shapes
# ---------------------------------------------------------------------------------------------

NUMERIC_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide,
    "floor_divide": np.floor_divide, "mod": np.mod, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
}
BOOL_REFUSED = ("subtract", "floor_divide", "mod", "power")
DTYPE_PAIRS = [
    ("float32", "float32"), ("float64", "float64"), ("int32", "int32"), ("int64", "int32"),
    ("float32", "int32"), ("float32", "float64"), ("bool", "bool"), ("bool", "int32"), ("int64", "float64"),
]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((2, 1, 4), (3, 1)), ((4,), (3, 1)), ((), (2, 3)), ((1, 1), (1,))]


def binary_inputs(op, d1, d2, s1, s2, seed):
    a, b = rand(s1, d1, seed), rand(s2, d2, seed + 1)
    if op in ("divide", "floor_divide", "mod"):
        # division by zero is undefined for integers on devices; both orders are tested
        a, b = (np.where(v == 0, v.dtype.type(3), v) if v.dtype.kind != "b" else np.ones_like(v) for v in (a, b))
    if op == "power":
        a = np.abs(a) + (a.dtype.type(0.5) if a.dtype.kind == "f" else a.dtype.type(1))
        if b.dtype.kind in "iu":
            b = np.abs(b) % b.dtype.type(4)  # numpy refuses negative integer exponents
    if op in ("logical_and", "logical_or") and a.dtype.kind != "b":
        a = np.where(np.abs(a) < 1, a.dtype.type(0), a)  # zeros: truthiness matters
    return a, b


# bool-only operands of BOOL_REFUSED raise: test_bool_arithmetic_that_numpy_would_make_int8_raises
BINARY_CASES = [(op, d1, d2) for op in sorted(NUMERIC_BINARY) for d1, d2 in DTYPE_PAIRS
                if not (op in BOOL_REFUSED and d1 == d2 == "bool")]


@pytest.mark.parametrize("op,d1,d2", BINARY_CASES)
def test_binary_matches_numpy(op, d1, d2):
    for n, (s1, s2) in enumerate(SHAPE_PAIRS):
        A = pa.placeholder(s1, d1, name="A")
        B = pa.placeholder(s2, d2, name="B")
        a, b = binary_inputs(op, d1, d2, s1, s2, seed=10 * n)
        T = getattr(ops, op)(A, B)
        assert T.op.name == op
        assert T.op.tag == ("elementwise" if s1 == s2 else "broadcast")
        check(ev(T, {A: a, B: b}), NUMERIC_BINARY[op](a, b))
        # the same op with the operands swapped (broadcasting is symmetric, dtypes too)
        if op not in ("power",):
            check(ev(getattr(ops, op)(B, A), {A: a, B: b}), NUMERIC_BINARY[op](b, a))


@pytest.mark.parametrize("op", BOOL_REFUSED + ("negative", "sign"))
def test_bool_arithmetic_that_numpy_would_make_int8_raises(op):
    P = pa.placeholder((2, 3), "bool", name="P")
    Q = pa.placeholder((3,), "bool", name="Q")
    args = (P,) if op in ("negative", "sign") else (P, Q)
    with pytest.raises(pa.DtypeError, match="'P'"):
        getattr(ops, op)(*args)


def test_floor_semantics_of_integer_and_float_division():
    A = pa.placeholder((8,), "int32", name="A")
    B = pa.placeholder((8,), "int32", name="B")
    a = np.array([-7, -7, 7, 7, -1, 0, 9, -9], "int32")
    b = np.array([2, -2, 2, -2, 3, 5, -4, 4], "int32")
    check(ev(ops.floor_divide(A, B), {A: a, B: b}), a // b)
    check(ev(ops.mod(A, B), {A: a, B: b}), a % b)
    F = pa.placeholder((8,), "float64", name="F")
    f = a.astype("float64") + 0.5
    check(ev(ops.mod(F, 2.0), {F: f}), np.mod(f, 2.0))
    check(ev(ops.floor_divide(F, -2.0), {F: f}), np.floor_divide(f, -2.0))


# ---------------------------------------------------------------------------------------------
# scalars: Python scalars are weak (take the tensor's dtype), numpy scalars are strong
# ---------------------------------------------------------------------------------------------

SCALAR_CASES = [
    ("add", "float32", 2.5), ("add", "int32", 1.5), ("multiply", "int32", 3), ("add", "bool", 1),
    ("add", "bool", True), ("subtract", "float32", np.float64(2.0)), ("multiply", "int32", np.int64(2)),
    ("divide", "int32", 2), ("divide", "float32", 4), ("power", "float64", 2), ("maximum", "int64", 0),
    ("minimum", "float32", 0.25), ("greater", "int32", 0.5), ("equal", "int32", 2), ("mod", "float32", 1.5),
    ("floor_divide", "int64", 2), ("logical_and", "float64", 1.0), ("left_shift", "int32", 2),
]


@pytest.mark.parametrize("op,dtype,scalar", SCALAR_CASES)
def test_scalar_operands_promote_as_numpy(op, dtype, scalar):
    A = pa.placeholder((2, 3), dtype, name="A")
    a = rand((2, 3), dtype, seed=3, lo=0 if op in ("power", "left_shift") else -5)
    if op == "power" and dtype in FLOATS:
        a = np.abs(a)
    ref_op = getattr(np, op) if op != "divide" else np.true_divide
    check(ev(getattr(ops, op)(A, scalar), {A: a}), ref_op(a, scalar))
    if op not in ("left_shift",):
        check(ev(getattr(ops, op)(scalar, A), {A: a}), ref_op(scalar, a))


def test_scalar_only_operands_give_a_0d_tensor():
    T = ops.add(1, 2.5)
    assert T.shape == () and T.dtype == "float64"
    check(ev(T, {}), np.add(1, 2.5))


def test_tensor_operators_use_the_ops():
    A = pa.placeholder((3, 1), "float64", name="A")
    B = pa.placeholder((4,), "float64", name="B")
    a, b = rand((3, 1), "float64", 1), np.abs(rand((4,), "float64", 2)) + 0.5
    cases = [
        (A + B, "add", a + b), (1 - A, "subtract", 1 - a), (A * 2, "multiply", a * 2),
        (A / B, "divide", a / b), (2.0 / B, "divide", 2.0 / b), (A // B, "floor_divide", a // b),
        (A % B, "mod", a % b), (B ** 2, "power", b ** 2), (2 ** B, "power", 2 ** b),
        (3.0 // B, "floor_divide", 3.0 // b), (3.0 % B, "mod", 3.0 % b),
        (-A, "negative", -a), (abs(A), "abs", np.abs(a)),
        (A < B, "less", a < b), (A <= 0.1, "less_equal", a <= 0.1), (A > B, "greater", a > b),
        (0.5 <= B, "greater_equal", 0.5 <= b),
    ]
    for T, name, ref in cases:
        assert T.op.name == name
        check(ev(T, {A: a, B: b}), ref)


def test_logical_and_shift_operators_on_tensors_are_numpys():
    # they raised Python's raw TypeError; & | ~ are numpy's logical ones on bools, and integers have no bitwise ops
    P = pa.placeholder((3,), "bool", name="P")
    Q = pa.placeholder((3,), "bool", name="Q")
    I = pa.placeholder((3,), "int32", name="I")
    p, q, i = np.array([True, False, True]), np.array([True, True, False]), np.array([1, -2, 3], "int32")
    feed = {P: p, Q: q, I: i}
    for T, ref in [(P & Q, p & q), (P | Q, p | q), (~P, ~p), (True & P, True & p), (I << 2, i << 2),
                   (1 << I, np.left_shift(1, i)), (I >> 1, i >> 1)]:
        check(ev(T, feed), ref)
    for bad in (lambda: I & I, lambda: ~I, lambda: P | I):
        with pytest.raises(pa.DtypeError, match=r"logical .* of bool tensors.*'I' of int32.*no bitwise"):
            bad()


def test_scalar_that_does_not_fit_the_tensor_dtype_raises():
    A = pa.placeholder((2,), "int32", name="A")
    with pytest.raises(pa.DtypeError, match="does not fit in int32"):
        ops.add(A, 2**40)


@pytest.mark.parametrize("bad", [np.ones(3), "x", [1, 2], np.float16(1.0), None])
def test_operands_that_are_not_tensors_or_scalars_raise(bad):
    A = pa.placeholder((3,), name="A")
    with pytest.raises(pa.DtypeError, match="'A'"):
        ops.multiply(A, bad)


def test_non_broadcastable_shapes_name_both_tensors_and_the_axes():
    A = pa.placeholder((2, 3), name="A")
    B = pa.placeholder((4,), name="B")
    with pytest.raises(pa.ShapeError) as e:
        ops.add(A, B)
    msg = str(e.value)
    assert "'A'" in msg and "'B'" in msg and "axis 1 of tensor 'A' has size 3" in msg and "axis 0 of tensor 'B'" in msg
    C = pa.placeholder((5, 1, 4), name="C")
    with pytest.raises(pa.ShapeError, match="'C'"):
        ops.where(ops.greater(C, 0.0), C, A)


# ---------------------------------------------------------------------------------------------
# unary ops
# ---------------------------------------------------------------------------------------------

def _erf(a):
    return np.vectorize(math.erf, otypes=[a.dtype])(a)


UNARY = {
    "negative": np.negative, "abs": np.abs, "sign": np.sign,
    "exp": np.exp, "log": np.log, "log2": np.log2, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda a: (1 / np.sqrt(a)).astype(a.dtype), "tanh": np.tanh,
    "sigmoid": lambda a: (1 / (1 + np.exp(-a))).astype(a.dtype), "sin": np.sin, "cos": np.cos, "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "logical_not": np.logical_not,
}
FLOAT_MATH = ("exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf")
POSITIVE = ("log", "log2", "sqrt", "rsqrt", "log1p")


# bool operands of float math, negative, sign and round raise: test_unary_bool_refusals
UNARY_CASES = [(op, d) for op in sorted(UNARY) for d in FLOATS + INTS + ("bool",)
               if not (d == "bool" and op in FLOAT_MATH + ("negative", "sign", "round"))]


@pytest.mark.parametrize("op,dtype", UNARY_CASES)
def test_unary_matches_numpy(op, dtype):
    A = pa.placeholder((3, 5), dtype, name="A")
    a = rand((3, 5), dtype, seed=7, lo=1 if op in POSITIVE else -5)
    if op in POSITIVE and dtype in FLOATS:
        a = np.abs(a) + a.dtype.type(0.1)
    if op in ("round", "floor", "ceil", "trunc") and dtype in FLOATS:
        a = a * a.dtype.type(3)
    T = getattr(ops, op)(A)
    assert T.op.name == op and T.op.tag == "elementwise"
    # integer tensors: float math computes in float64, as numpy does
    ref_in = a.astype("float64") if op in FLOAT_MATH and dtype in INTS else a
    ref = UNARY[op](ref_in)
    check(ev(T, {A: a}), ref)


@pytest.mark.parametrize("op", FLOAT_MATH + ("round",))
def test_unary_bool_refusals(op):
    P = pa.placeholder((2,), "bool", name="P")
    with pytest.raises(pa.DtypeError, match="'P'"):
        getattr(ops, op)(P)


def test_float_math_on_integers_is_float64_like_numpy():
    N = pa.placeholder((4,), "int32", name="N")
    n = np.array([0, 1, 2, 3], "int32")
    for op in ("exp", "sin", "sqrt"):
        T = getattr(ops, op)(N)
        assert T.dtype == "float64"
        check(ev(T, {N: n}), getattr(np, op)(n))


@pytest.mark.parametrize("dtype", FLOATS)
def test_round_is_half_to_even(dtype):
    A = pa.placeholder((8,), dtype, name="A")
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49], dtype)
    got = ev(ops.round(A), {A: a})
    check(got, np.array([-2, -2, -0, 0, 2, 2, 4, -0], dtype))


def test_nan_and_inf_follow_numpy():
    A = pa.placeholder((5,), "float64", name="A")
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    for op in ("sign", "abs", "floor", "exp", "tanh", "negative"):
        check(ev(getattr(ops, op)(A), {A: a}), UNARY[op](a))
    check(ev(ops.maximum(A, 1.0), {A: a}), np.maximum(a, 1.0))
    check(ev(ops.less(A, 1.0), {A: a}), np.less(a, 1.0))


# ---------------------------------------------------------------------------------------------
# shifts, clip, where, cast
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d1,d2", [("int32", "int32"), ("int64", "int32"), ("int32", "int64")])
def test_shifts_match_numpy(d1, d2):
    A = pa.placeholder((3, 4), d1, name="A")
    S = pa.placeholder((4,), d2, name="S")
    a = rand((3, 4), d1, seed=5, lo=-100, hi=100)
    s = np.array([0, 1, 3, 7], d2)
    check(ev(ops.left_shift(A, S), {A: a, S: s}), np.left_shift(a, s))
    check(ev(ops.right_shift(A, S), {A: a, S: s}), np.right_shift(a, s))


@pytest.mark.parametrize("dtype", FLOATS)
def test_shifts_refuse_non_integers(dtype):
    A = pa.placeholder((3,), dtype, name="A")
    with pytest.raises(pa.DtypeError, match="'A'.*integer"):
        ops.left_shift(A, 1)


def test_shifts_of_bools_follow_numpy():
    P = pa.placeholder((3,), "bool", name="P")
    p = np.array([True, False, True])
    check(ev(ops.left_shift(P, 2), {P: p}), np.left_shift(p, 2))  # weak int: int64
    with pytest.raises(pa.DtypeError, match="'P'.*integer"):  # numpy: int8
        ops.right_shift(P, P)


def test_clip_matches_numpy():
    X = pa.placeholder((3, 4), "float32", name="X")
    Lo = pa.placeholder((4,), "float32", name="Lo")
    N = pa.placeholder((3, 4), "int32", name="N")
    x, lo = rand((3, 4), "float32", 1), rand((4,), "float32", 2) - np.float32(0.5)
    n = rand((3, 4), "int32", 3)
    feed = {X: x, Lo: lo, N: n}
    check(ev(ops.clip(X, -0.5, 0.5), feed), np.clip(x, -0.5, 0.5))
    check(ev(ops.clip(X, Lo, 0.5), feed), np.clip(x, lo, 0.5))
    check(ev(ops.clip(X, None, Lo), feed), np.clip(x, None, lo))
    check(ev(ops.clip(X, 0.0), feed), np.clip(x, 0.0, None))
    check(ev(ops.clip(N, -2, 3), feed), np.clip(n, -2, 3))
    check(ev(ops.clip(N, -1.5, 2.5), feed), np.clip(n, -1.5, 2.5))  # weak floats with ints: float64
    assert ops.clip(X, Lo, None).op.tag == "broadcast"
    T = ops.clip(X, -1, 1)
    assert T.op.name == "clip" and T.op.tag == "elementwise"


def test_where_matches_numpy():
    C = pa.placeholder((3, 1), "bool", name="C")
    X = pa.placeholder((1, 4), "float32", name="X")
    Y = pa.placeholder((3, 4), "int32", name="Y")
    F = pa.placeholder((4,), "float64", name="F")
    c = np.array([[True], [False], [True]])
    x, y = rand((1, 4), "float32", 1), rand((3, 4), "int32", 2)
    f = np.array([0.0, 1.5, -0.0, np.nan])
    feed = {C: c, X: x, Y: y, F: f}
    check(ev(ops.where(C, X, 0.0), feed), np.where(c, x, np.float32(0.0)))
    check(ev(ops.where(C, X, Y), feed), np.where(c, x, y))  # float32 with int32: float64
    check(ev(ops.where(F, Y, -1), feed), np.where(f, y, -1))  # nonzero (and NaN) counts as true
    T = ops.where(C, X, 0.0)
    assert T.op.name == "where" and T.op.tag == "broadcast" and T.shape == (3, 4)
    with pytest.raises(pa.ArityError):
        ops.where(C)


@pytest.mark.parametrize("src,dst", [
    ("float32", "int32"), ("float64", "float32"), ("int32", "float32"), ("float32", "bool"),
    ("bool", "float32"), ("int64", "int32"), ("int32", "bool"), ("bool", "int64"), ("float32", "float64"),
])
def test_cast_matches_astype(src, dst):
    A = pa.placeholder((2, 5), src, name="A")
    a = rand((2, 5), src, seed=9, lo=-2, hi=3)
    if src in FLOATS:
        a = a * a.dtype.type(4)
        a[0, 0] = 0
        a[0, 1] = -0.0
    T = ops.cast(A, dst)
    assert T.dtype == dst and T.op.name == "cast"
    check(ev(T, {A: a}), a.astype(dst))
    assert ops.cast(A, np.dtype(dst)).dtype == dst


def test_cast_to_an_unsupported_dtype_names_the_tensor():
    A = pa.placeholder((2,), name="A")
    with pytest.raises(pa.DtypeError, match="'A'.*float16"):
        ops.cast(A, "float16")


def test_logical_ops_use_truthiness_of_numbers():
    A = pa.placeholder((6,), "float32", name="A")
    B = pa.placeholder((6,), "int32", name="B")
    a = np.array([0.0, 1.5, 0.0, -2.0, np.nan, 0.0], "float32")
    b = np.array([0, 0, 3, -1, 0, 7], "int32")
    feed = {A: a, B: b}
    check(ev(ops.logical_and(A, B), feed), np.logical_and(a, b))
    check(ev(ops.logical_or(A, B), feed), np.logical_or(a, b))
    check(ev(ops.logical_not(A), feed), np.logical_not(a))
    check(ev(ops.logical_not(B), feed), np.logical_not(b))


def test_random_shapes_broadcast_exactly_when_numpy_does():
    rng = np.random.default_rng(42)
    agree = refuse = 0
    for _ in range(60):
        s1 = tuple(int(v) for v in rng.choice([1, 2, 3], size=rng.integers(0, 4)))
        s2 = tuple(int(v) for v in rng.choice([1, 2, 3], size=rng.integers(0, 4)))
        A = pa.placeholder(s1, "float64", name="A")
        B = pa.placeholder(s2, "float64", name="B")
        try:
            np.broadcast_shapes(s1, s2)
        except ValueError:
            with pytest.raises(pa.ShapeError, match="'A'.*'B'"):
                ops.subtract(A, B)
            refuse += 1
            continue
        a, b = rand(s1, "float64", 1), rand(s2, "float64", 2)
        check(ev(ops.subtract(A, B), {A: a, B: b}), a - b)
        agree += 1
    assert agree > 10 and refuse > 10  # both branches were exercised
