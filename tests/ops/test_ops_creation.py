"""pa.ops creation ops (full zeros ones and *_like) against numpy, through pa.evaluate."""

import numpy as np
import pytest

import polyad as pa
from polyad import ops


def check(got, ref):
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("shape,value,dtype,ref_dtype", [
    ((2, 3), 7, None, "int32"),  # Python scalars: polyad's defaults (int32, float32, bool)
    ((2, 3), 1.5, None, "float32"),
    (3, True, None, "bool"),
    ((2, 1, 2), 2**40, None, "int64"),
    ((4,), np.float64(1.25), None, "float64"),  # numpy scalars keep their dtype
    ((4,), np.int64(-3), None, "int64"),
    ((2, 2), 2.7, "int32", "int32"),  # converted as numpy's astype: truncation
    ((2, 2), -2.7, np.int64, "int64"),
    ((3,), 0.0, "bool", "bool"),
    ((3,), 5, "float64", "float64"),
    ((), 3.0, None, "float32"),
])
def test_full(shape, value, dtype, ref_dtype):
    T = ops.full(shape, value, dtype)
    assert T.op.name == "full" and T.op.tag == "elementwise" and T.op.input_tensors == []
    assert T.dtype == ref_dtype
    check(pa.evaluate(T, {}), np.full(shape, value).astype(ref_dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_zeros_ones(dtype):
    for shape in [(3,), (2, 1, 4), ()]:
        check(pa.evaluate(ops.zeros(shape, dtype), {}), np.zeros(shape, dtype))
        check(pa.evaluate(ops.ones(shape, dtype), {}), np.ones(shape, dtype))
    assert ops.zeros((2,)).dtype == "float32" and ops.ones(2).dtype == "float32"


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_like_ops_take_the_prototype_shape_and_dtype(dtype):
    X = pa.placeholder((2, 1, 3), dtype, name="X")
    check(pa.evaluate(ops.zeros_like(X), {}), np.zeros((2, 1, 3), dtype))
    check(pa.evaluate(ops.ones_like(X), {}), np.ones((2, 1, 3), dtype))
    check(pa.evaluate(ops.full_like(X, 2.5), {}), np.full_like(np.zeros((2, 1, 3), dtype), 2.5))
    check(pa.evaluate(ops.full_like(X, 2, dtype="float64"), {}), np.full((2, 1, 3), 2, "float64"))
    check(pa.evaluate(ops.zeros_like(X, "int64"), {}), np.zeros((2, 1, 3), "int64"))
    for T, name in [(ops.zeros_like(X), "zeros_like"), (ops.ones_like(X), "ones_like"), (ops.full_like(X, 1), "full_like")]:
        assert T.op.name == name and T.op.input_tensors == []


def test_created_tensors_compose_with_other_ops():
    X = pa.placeholder((3, 4), name="X")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    T = ops.multiply(ops.add(X, ops.ones_like(X)), ops.full((4,), 2.0))
    np.testing.assert_allclose(pa.evaluate(T, {X: x}), (x + 1) * 2, rtol=1e-6)


def test_bad_shapes_name_the_op_and_axis():
    with pytest.raises(pa.ShapeError, match="zeros.*axis 1.*size 0"):
        ops.zeros((2, 0))
    with pytest.raises(pa.ShapeError, match="full.*axis 0.*size -1"):
        ops.full((-1, 2), 1.0)
    with pytest.raises(pa.ShapeError, match="ones.*axis 1.*non-integer"):
        ops.ones((2, 1.5))


def test_bad_dtypes_and_values():
    with pytest.raises(pa.DtypeError, match="zeros.*float16"):
        ops.zeros((2,), "float16")
    with pytest.raises(pa.DtypeError, match="does not fit in int32"):
        ops.full((2,), 2**40, "int32")
    with pytest.raises(pa.DtypeError, match="nan"):
        ops.full((2,), float("nan"), "int32")
    with pytest.raises(pa.DtypeError, match="full.*numpy array"):
        ops.full((2,), np.ones(2))
    X = pa.placeholder((2,), name="X")
    with pytest.raises(pa.DtypeError, match="full.*scalar"):
        ops.full((2,), X)
    with pytest.raises(pa.DtypeError, match="zeros_like.*tensor"):
        ops.zeros_like(np.ones(2))
    with pytest.raises(pa.DtypeError, match="full_like.*uint8"):
        ops.full_like(X, 1, dtype="uint8")
