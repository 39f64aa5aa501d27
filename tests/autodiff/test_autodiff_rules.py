"""The derivative table: every scalar operator, checked with finite differences through pa.evaluate."""

import math

import zlib

import numpy as np
import pytest

import polyad as pa
from polyad.autodiff import RULES
from polyad.te.construct import call
from polyad.te.expr import OPS

from autodiff_helpers import check_grad

F = "float64"
N = 5


def test_table_covers_every_operator():
    assert set(RULES) == set(OPS)


# op -> (builder of the body from loads a, b; range of a; range of b)
UNARY_CASES = {
    "exp": (-1, 1), "log": (0.5, 2), "log2": (0.5, 2), "log1p": (-0.5, 2), "sqrt": (0.5, 2),
    "rsqrt": (0.5, 2), "tanh": (-2, 2), "sigmoid": (-3, 3), "sin": (-3, 3), "cos": (-3, 3),
    "erf": (-2, 2), "neg": (-1, 1), "abs": (-1, 1),
}
PIECEWISE_CONSTANT = ("floor", "ceil", "round", "trunc", "sign")


def _inputs(shape=(N,)):
    return pa.placeholder(shape, F, "A"), pa.placeholder(shape, F, "B")


@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary(op):
    A, _ = _inputs()
    lo, hi = UNARY_CASES[op]
    Y = pa.compute((N,), lambda i: call(op, A[i]) * 1.5, name="Y")
    H = pa.placeholder((2, N), F, "H")
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    a = rng.uniform(lo, hi, N)
    if op == "abs":
        a[np.abs(a) < 0.1] = 0.3
    check_grad(Y, [A], {A: a, H: rng.normal(size=(2, N))}, head=H)


@pytest.mark.parametrize("op", PIECEWISE_CONSTANT)
def test_piecewise_constant_ops_have_zero_gradient(op):
    A, _ = _inputs()
    Y = pa.compute((N,), lambda i: call(op, A[i]) + 2.0 * call(op, A[i] * 3.0), name="Y")
    a = np.array([0.2, 1.3, -0.6, 2.1, -1.7])
    (g,) = pa.differentiate(Y, [A])
    np.testing.assert_array_equal(pa.evaluate(g, {A: a}), np.zeros((N, N)))
    check_grad(Y, [A], {A: a})


BINARY_CASES = {
    "add": ((-1, 1), (-1, 1)), "sub": ((-1, 1), (-1, 1)), "mul": ((-1, 1), (-1, 1)),
    "div": ((-1, 1), (0.5, 2)), "pow": ((0.5, 2), (-2, 2)), "min": ((-1, 1), (-1, 1)),
    "max": ((-1, 1), (-1, 1)), "floormod": ((0.1, 0.9), (1.1, 2)), "floordiv": ((0.1, 0.9), (1.1, 2)),
}


@pytest.mark.parametrize("op", sorted(BINARY_CASES))
def test_binary_both_arguments(op):
    A, B = _inputs()
    (la, ha), (lb, hb) = BINARY_CASES[op]
    Y = pa.compute((N,), lambda i: call(op, A[i], B[i]) * (1.5 + A[i]), name="Y")
    rng = np.random.default_rng(7)
    a, b = rng.uniform(la, ha, N), rng.uniform(lb, hb, N)
    if op in ("floormod", "floordiv"):  # stay away from the jumps of floor(a / b)
        a, b = rng.uniform(3.2, 3.8, N), rng.uniform(1.05, 1.1, N)
    check_grad(Y, [A, B], {A: a, B: b})


def test_pow_with_constant_exponent_and_zero_exponent():
    A, B = _inputs()
    Y = pa.compute((N,), lambda i: pa.pow(A[i], 3.0) + pa.pow(A[i], 0.0) * B[i], name="Y")
    a = np.array([0.0, 0.5, -1.0, 2.0, 1.5])
    b = np.linspace(1, 2, N)
    H = pa.placeholder((N,), F, "H")
    gA, gB = pa.evaluate(list(pa.differentiate(Y, [A, B], H)), {A: a, B: b, H: np.ones(N)})
    np.testing.assert_allclose(gA, 3 * a ** 2)  # exact at a = 0 (no 0 * inf) and for a < 0
    np.testing.assert_allclose(gB, np.ones(N))


def test_pow_exponent_derivative_is_zero_for_nonpositive_base():
    A, B = _inputs()
    Y = pa.compute((N,), lambda i: pa.pow(A[i], B[i]), name="Y")
    H = pa.placeholder((N,), F, "H")
    a = np.array([0.0, -2.0, 2.0, 0.5, -0.5])
    b = np.array([2.0, 2.0, 3.0, 1.0, 2.0])
    gA, gB = pa.evaluate(list(pa.differentiate(Y, [A, B], H)), {A: a, B: b, H: np.ones(N)})
    np.testing.assert_allclose(gB, [0.0, 0.0, 8 * math.log(2), 0.5 * math.log(0.5), 0.0])
    np.testing.assert_allclose(gA, b * a ** (b - 1))


@pytest.mark.parametrize("op", ["max", "min"])
def test_min_max_ties_go_to_the_second_operand(op):
    A, B = _inputs()
    Y = pa.compute((N,), lambda i: call(op, A[i], B[i]), name="Y")
    H = pa.placeholder((N,), F, "H")
    a = np.array([1.0, 2.0, -1.0, 0.5, 0.0])
    b = np.array([1.0, 1.0, 0.0, 0.5, 0.0])
    h = np.arange(1.0, N + 1)
    gA, gB = pa.evaluate(list(pa.differentiate(Y, [A, B], H)), {A: a, B: b, H: h})
    wins = a > b if op == "max" else a < b
    np.testing.assert_array_equal(gA, np.where(wins, h, 0))
    np.testing.assert_array_equal(gB, np.where(wins, 0, h))
    np.testing.assert_array_equal(gA + gB, h)


def test_relu_as_max_with_zero_has_zero_derivative_at_zero():
    A, _ = _inputs()
    Y = pa.compute((N,), lambda i: pa.max(A[i], 0.0), name="Y")
    H = pa.placeholder((N,), F, "H")
    a = np.array([0.0, 1.0, -1.0, 0.0, 2.0])
    (g,) = pa.differentiate(Y, [A], H)
    np.testing.assert_array_equal(pa.evaluate(g, {A: a, H: np.ones(N)}), [0, 1, 0, 0, 1])


def test_select_differentiates_branches_not_condition():
    A, B = _inputs()
    Y = pa.compute((N,), lambda i: pa.select(A[i] > B[i], A[i] * A[i], -B[i] * A[i]), name="Y")
    rng = np.random.default_rng(3)
    check_grad(Y, [A, B], {A: rng.normal(size=N), B: rng.normal(size=N)})


def test_comparisons_logic_and_integer_values_have_zero_gradient():
    A, B = _inputs()

    def body(i):
        c = (A[i] < B[i]) | ((A[i] >= B[i]) & ~(A[i] == B[i])) | (A[i] != B[i]) | (A[i] <= 0.0) | (A[i] > 1.0)
        k = pa.cast(A[i] * 4.0, "int32")
        k2 = ((k << 1) >> 1) // 2 + k % 3 + pa.min(k, 2) - pa.max(k, -1) * 2
        return pa.cast(c, F) + pa.cast(k2, F) + pa.cast(pa.cast(B[i], "int64"), F)

    Y = pa.compute((N,), body, name="Y")
    a, b = np.array([0.3, 0.7, -0.4, 1.3, 0.1]), np.array([0.2, 0.9, -0.6, 1.1, 0.4])
    gA, gB = pa.evaluate(list(pa.differentiate(Y, [A, B])), {A: a, B: b})
    assert not gA.any() and not gB.any()
    check_grad(Y, [A, B], {A: a, B: b})


def test_float_casts_pass_the_adjoint_through():
    A = pa.placeholder((N,), "float32", "A")
    Y = pa.compute((N,), lambda i: pa.cast(pa.cast(A[i], F) * 3.0, F) * pa.cast(A[i], F), name="Y")
    H = pa.placeholder((N,), F, "H")
    a = np.linspace(0.5, 1.5, N).astype("float32")
    (g,) = pa.differentiate(Y, [A], H)
    assert g.dtype == "float32"
    np.testing.assert_allclose(pa.evaluate(g, {A: a, H: np.ones(N)}), 6 * a, rtol=1e-6)


def test_shared_subexpressions_are_differentiated_once():
    A, _ = _inputs()

    def body(i):
        e = A[i]
        for _ in range(60):  # a DAG of 60 levels, 2^60 paths
            e = e * e * 0.5 + e
        return e

    Y = pa.compute((N,), body, name="Y")
    H = pa.placeholder((N,), F, "H")
    (g,) = pa.differentiate(Y, [A], H)
    from polyad.te.visit import count_nodes

    assert count_nodes(g.op.body[0]) < 60 * 12


@pytest.mark.parametrize("kind", ["max", "min"])
def test_a_max_reductions_gradient_goes_to_the_first_nan_of_a_row_built_and_evaluated_alike(kind):
    """The forward's max (min) is NaN where a row has one, so its argument is the first NaN (PyTorch's too).  The
    argument's reducer had no NaN order: ``pa.evaluate`` sent a row's gradient to its largest other value or
    nowhere, and compiled code elsewhere, by the order the device reduced in."""
    X = pa.placeholder((3, 4), name="X")
    Y = getattr(pa.ops, kind)(X, axis=1)
    H = pa.placeholder((3,), name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    x = np.array([[np.nan, 1, 2, 0], [1, np.nan, 2, np.nan], [1, 3, 0, 2]], dtype="float32")
    h = np.array([1, 2, 3], dtype="float32")
    want = np.zeros((3, 4), "float32")
    want[0, 0], want[1, 1], want[2, 1 if kind == "max" else 2] = 1, 2, 3
    np.testing.assert_array_equal(pa.evaluate(dX, {X: x, H: h}), want)
    np.testing.assert_array_equal(pa.build(dX, [X, H])(x, h), want)
