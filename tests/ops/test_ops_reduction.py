"""pa.ops reductions against numpy, through pa.evaluate: axes, keepdims, dtypes, ties, NaN, errors."""

import numpy as np
import pytest

import polyad as pa
from polyad import ops

DTYPES = ("float32", "float64", "int32", "int64", "bool")


def rand(shape, dtype, seed, lo=-3, hi=4):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in ("int32", "int64"):
        return np.asarray(rng.integers(lo, hi, size=shape)).astype(dtype)
    return np.asarray(rng.standard_normal(shape)).astype(dtype)


def check(got, ref):
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype.kind == "f":
        tol = 1e-5 if ref.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, ref)


# (shape, axis) cases: None, ints, negative ints, tuples (any order), size-1 axes, 0-d, empty tuple
AXIS_CASES = [
    ((3, 4, 5), None), ((3, 4, 5), 0), ((3, 4, 5), -1), ((3, 4, 5), (0, 2)), ((3, 4, 5), (-1, 0)),
    ((3, 4, 5), (1,)), ((3, 4, 5), ()), ((1, 4), 0), ((1, 4), None), ((5,), 0), ((), None), ((2, 1, 3), [1, 2]),
]
NP_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}


@pytest.mark.parametrize("op", sorted(NP_REDUCE))
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_matches_numpy(op, dtype):
    for n, (shape, axis) in enumerate(AXIS_CASES):
        X = pa.placeholder(shape, dtype, name="X")
        # prod: small integers, so int64 products of 60 factors cannot overflow
        x = rand(shape, dtype, seed=n, lo=-2 if op == "prod" else -3, hi=3 if op == "prod" else 4)
        for keepdims in (False, True):
            T = getattr(ops, op)(X, axis=axis, keepdims=keepdims)
            ref = NP_REDUCE[op](x, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
            check(pa.evaluate(T, {X: x}), ref)
            assert T.op.name == op
            reduced = axis is None or axis != ()
            assert T.op.tag == ("reduction" if reduced and shape else "elementwise")


def test_one_stage_with_one_reduce_axis_per_reduced_dimension():
    X = pa.placeholder((3, 4, 5), name="X")
    for op in ("sum", "prod", "max", "min", "mean"):
        T = getattr(ops, op)(X, axis=(0, -1))
        assert T.op.input_tensors == [X]
        assert [k.extent for k in T.op.reduce_axis] == [3, 5]
        assert T.shape == (4,)


def test_dtype_argument_and_numpy_accumulators():
    N = pa.placeholder((3, 4), "int32", name="N")
    n = rand((3, 4), "int32", 1)
    assert ops.sum(N).dtype == "int64" and ops.prod(N).dtype == "int64" and ops.mean(N).dtype == "float64"
    check(pa.evaluate(ops.sum(N, 0, dtype="float64"), {N: n}), np.sum(n, 0, dtype="float64"))
    check(pa.evaluate(ops.prod(N, 1, dtype="int32"), {N: n}), np.prod(n, 1, dtype="int32"))
    check(pa.evaluate(ops.mean(N, 1, dtype="float32"), {N: n}), np.mean(n, 1, dtype="float32"))
    F = pa.placeholder((3, 4), "float32", name="F")
    f = rand((3, 4), "float32", 2)
    check(pa.evaluate(ops.sum(F, dtype=np.float64), {F: f}), np.sum(f, dtype=np.float64))
    with pytest.raises(pa.DtypeError, match="mean of tensor 'N'.*int32"):
        ops.mean(N, dtype="int32")
    with pytest.raises(pa.DtypeError, match="sum of tensor 'F'.*float16"):
        ops.sum(F, dtype="float16")
    z = np.array([[0, 0, 0, 0], [0, 1.5, 0, 0], [1, 2, 3, -1]], "float32")  # bool: numpy's any and all
    check(pa.evaluate(ops.sum(F, 1, dtype="bool"), {F: z}), np.sum(z, 1, dtype=bool))
    check(pa.evaluate(ops.prod(F, 1, dtype=bool), {F: z}), np.prod(z, 1, dtype=bool))


def test_max_min_propagate_nan_and_handle_infinities():
    X = pa.placeholder((3, 3), "float64", name="X")
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, -1.0]])
    for op in ("max", "min", "sum"):
        check(pa.evaluate(getattr(ops, op)(X, axis=1), {X: x}), NP_REDUCE[op](x, axis=1))


# ---------------------------------------------------------------------------------------------
# argmax / argmin
# ---------------------------------------------------------------------------------------------

ARG_AXES = [None, 0, 1, -1, -3]


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_arg_extremum_matches_numpy_with_ties(op, dtype):
    # few distinct values: many ties, numpy returns the first occurrence
    X = pa.placeholder((3, 4, 5), dtype, name="X")
    x = rand((3, 4, 5), dtype, seed=4, lo=0, hi=3)
    if dtype in ("float32", "float64"):
        x = np.round(x)
    for axis in ARG_AXES:
        for keepdims in (False, True):
            T = getattr(ops, op)(X, axis=axis, keepdims=keepdims)
            assert T.dtype == "int64" and T.op.name == op and T.op.tag == "reduction"
            check(pa.evaluate(T, {X: x}), getattr(np, op)(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_of_size_one_axes_and_0d(op):
    X = pa.placeholder((1, 4), "float32", name="X")
    x = rand((1, 4), "float32", 5)
    for axis in (None, 0, 1):
        check(pa.evaluate(getattr(ops, op)(X, axis), {X: x}), getattr(np, op)(x, axis))
    S = pa.placeholder((), "float32", name="S")
    check(pa.evaluate(getattr(ops, op)(S), {S: np.float32(2.0)}), getattr(np, op)(np.float32(2.0)))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_nan_and_the_identity_values(op):
    X = pa.placeholder((5, 4), "float64", name="X")
    inf = np.inf
    x = np.array([
        [1.0, np.nan, 3.0, np.nan],   # the first NaN wins, as numpy
        [-inf, -inf, -inf, -inf],     # values equal to argmax's identity: index 0
        [inf, inf, inf, inf],         # ... and to argmin's
        [2.0, 5.0, np.nan, 5.0],
        [0.0, -0.0, 0.0, -1.0],
    ])
    check(pa.evaluate(getattr(ops, op)(X, axis=1), {X: x}), getattr(np, op)(x, axis=1))
    check(pa.evaluate(getattr(ops, op)(X), {X: x}), getattr(np, op)(x))
    N = pa.placeholder((2, 3), "int32", name="N")
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    n = np.array([[lo, lo, lo], [hi, hi, hi]], "int32")
    check(pa.evaluate(getattr(ops, op)(N, axis=1), {N: n}), getattr(np, op)(n, axis=1))


def test_argmax_is_a_tuple_reduction_of_index_and_value():
    X = pa.placeholder((3, 4), name="X")
    T = ops.argmax(X, axis=0)
    assert T.op.num_outputs == 2 and T.value_index == 0
    assert [t.dtype for t in T.op.outputs] == ["int64", "float32"]
    assert T.op.body[0].combiner.name == "argmax"


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "argmax", "argmin"])
def test_out_of_range_axis_names_the_tensor_and_the_axis(op):
    X = pa.placeholder((3, 4), name="X")
    for bad in (2, -3):
        with pytest.raises(pa.AxisError, match=f"{op} of tensor 'X'.*axis {bad} is out of range"):
            getattr(ops, op)(X, axis=bad)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean"])
def test_repeated_and_malformed_axes(op):
    X = pa.placeholder((3, 4), name="X")
    with pytest.raises(pa.AxisError, match=f"{op} of tensor 'X'.*repeated axis -2 \\(the same as axis 0\\)"):
        getattr(ops, op)(X, axis=(0, -2))
    with pytest.raises(pa.AxisError, match="'X'.*integer"):
        getattr(ops, op)(X, axis=1.0)
    with pytest.raises(pa.AxisError, match="'X'.*integer"):
        getattr(ops, op)(X, axis=(0, True))
    with pytest.raises(pa.DtypeError, match=f"{op}: expected a tensor"):
        getattr(ops, op)(np.ones((3, 4)))


def test_arg_extremum_takes_one_axis_only():
    X = pa.placeholder((3, 4), name="X")
    with pytest.raises(pa.AxisError, match="argmax of tensor 'X'.*one integer"):
        ops.argmax(X, axis=(0, 1))
