"""Bad input raises PolyadError subclasses that name the tensor and the axis."""

import numpy as np
import pytest

import polyad as pa


@pytest.fixture
def X():
    return pa.placeholder((4, 5), name="X")


def test_wrong_rank_read_names_the_tensor(X):
    with pytest.raises(pa.IndexingError, match=r"'X' has 2 dimensions .* 1 indices"):
        pa.compute((4,), lambda i: X[i], name="T")


def test_non_integer_index_names_tensor_and_axis(X):
    with pytest.raises(pa.IndexingError, match=r"'X', axis 1: .*float32"):
        X[0, pa.const(1.5)]
    with pytest.raises(pa.IndexingError, match=r"'X', axis 0"):
        pa.compute((4,), lambda i: X[X[i, 0], 0])


def test_constant_index_out_of_range(X):
    with pytest.raises(pa.OutOfBoundsError, match=r"'X', axis 1: constant index 5"):
        X[0, 5]


@pytest.mark.parametrize("shape, axis, size", [((3, 0), 1, 0), ((-2,), 0, -2), ((2, 3, -1), 2, -1)])
def test_non_positive_sizes(shape, axis, size):
    with pytest.raises(pa.ShapeError, match=rf"'P': axis {axis} has size {size}"):
        pa.placeholder(shape, name="P")
    with pytest.raises(pa.ShapeError, match=rf"'C': axis {axis} has size {size}"):
        pa.compute(shape, lambda *i: pa.const(0.0), name="C")


def test_non_integer_size():
    with pytest.raises(pa.ShapeError, match="'P': axis 1 has a non-integer size"):
        pa.placeholder((2, 2.5), name="P")


def test_reduce_axis_outside_its_reduction(X):
    k = pa.reduce_axis((0, 5), "k")
    with pytest.raises(pa.AxisError, match=r"compute 'T': reduce axis 'k' is used outside its reduction"):
        pa.compute((4,), lambda i: X[i, k] * 2.0, name="T")
    with pytest.raises(pa.AxisError, match="reduce axis 'k'"):
        pa.compute((4,), lambda i: pa.select(k > 0, X[i, 0], 0.0), name="T")


def test_foreign_data_axis(X):
    Y = pa.compute((4,), lambda i: X[i, 0])
    i_other = Y.op.axis[0]
    with pytest.raises(pa.AxisError, match="variable 'i' is not an axis"):
        pa.compute((4,), lambda j: X[i_other, 0] + X[j, 0], name="Z")


def test_wrong_arity(X):
    with pytest.raises(pa.ArityError, match=r"'T': fcompute takes 1 index argument but the shape \(4, 5\) has 2 axes"):
        pa.compute((4, 5), lambda i: X[i, 0], name="T")
    with pytest.raises(pa.ArityError, match="takes 3 index arguments"):
        pa.compute((4, 5), lambda i, j, k: X[i, j], name="T")


def test_mixing_dtypes_names_both_operands(X):
    D = pa.placeholder((4,), dtype="float64", name="D")
    with pytest.raises(pa.DtypeError, match=r"float32 \(X\[i, 0\]\) and float64 \(D\[i\]\)"):
        pa.compute((4,), lambda i: X[i, 0] + D[i])


def test_bad_dtype_name():
    with pytest.raises(pa.DtypeError, match="float16"):
        pa.placeholder((2,), dtype="float16")
    with pytest.raises(pa.DtypeError, match="unknown dtype"):
        pa.placeholder((2,), dtype="banana")


def test_reduction_errors(X):
    k = pa.reduce_axis((0, 5), "k")
    with pytest.raises(pa.AxisError, match="not a reduce axis"):
        pa.compute((4,), lambda i: pa.sum(X[i, 0], axis=i))
    with pytest.raises(pa.AxisError, match="appears twice"):
        pa.compute((4,), lambda i: pa.sum(X[i, k], axis=[k, k]))
    with pytest.raises(pa.AxisError, match="empty range"):
        pa.reduce_axis((3, 3), "r")
    with pytest.raises(pa.AxisError, match=r"reduce_axis 'r': the range must be \(lo, hi\) integers, got \(0, 2.5\)"):
        pa.reduce_axis((0, 2.5), "r")  # not silently truncated to (0, 2)
    with pytest.raises(pa.DtypeError, match="where="):
        pa.compute((4,), lambda i: pa.sum(X[i, k], axis=k, where=k))
    with pytest.raises(pa.PolyadError, match="reduction must be the whole body"):
        pa.compute((4,), lambda i: pa.exp(pa.sum(X[i, k], axis=k)))


def test_python_truthiness_is_refused(X):
    with pytest.raises(pa.PolyadError, match="truth value"):
        pa.compute((4,), lambda i: X[i, 0] if i > 0 else 0.0)


def test_evaluate_feed_errors(X):
    Y = pa.compute((4,), lambda i: X[i, 0] * 2.0, name="Y")
    with pytest.raises(pa.EvaluationError, match=r"no value fed for input tensor 'X'"):
        pa.evaluate(Y, {})
    with pytest.raises(pa.EvaluationError, match=r"'X' has shape \(4, 5\), but the fed array has shape \(5, 4\)"):
        pa.evaluate(Y, {X: np.zeros((5, 4), "float32")})
    with pytest.raises(pa.EvaluationError, match=r"'X' has dtype float32, but the fed array has dtype float64"):
        pa.evaluate(Y, {X: np.zeros((4, 5))})
    with pytest.raises(pa.EvaluationError, match="feed keys must be tensors"):
        pa.evaluate(Y, {"X": np.zeros((4, 5), "float32")})
    with pytest.raises(pa.EvaluationError, match="the feed must be a dict"):
        pa.evaluate(Y, [(X, np.zeros((4, 5), "float32"))])
    Z = pa.placeholder((3,), name="Z")  # fed, not read: checked all the same
    with pytest.raises(pa.EvaluationError, match=r"'Z' has shape \(3,\), but the fed array has shape \(4,\)"):
        pa.evaluate(Y, {X: np.zeros((4, 5), "float32"), Z: np.zeros(4, "float32")})


def test_evaluate_out_of_memory_in_a_stage_names_the_stage(monkeypatch):
    import sys

    def no_memory(*args):
        raise MemoryError()

    # a reduction of 10**9 points per output element is one block: numpy runs out of memory there
    monkeypatch.setattr(sys.modules["polyad.evaluate"], "_eval_block", no_memory)
    Y = pa.compute((2,), lambda i: pa.const(1.0) * i.astype("float32"), name="Y")
    with pytest.raises(pa.EvaluationError, match=r"stage 'Y' \[2\]: out of memory"):
        pa.evaluate(Y, {})


def test_evaluate_of_a_stage_too_large_for_numpy_names_the_stage():
    Z = pa.ops.full((10**6,) * 4, 1.0, dtype="float32")
    with pytest.raises(pa.EvaluationError, match=r"stage 'full': its float32\[1000000, 1000000, 1000000, 1000000\]"):
        pa.evaluate(Z, {})


def test_out_of_bounds_read_at_evaluation_names_tensor_axis_and_index(X):
    Y = pa.compute((4,), lambda i: X[i, i + 2], name="Y")
    with pytest.raises(pa.OutOfBoundsError, match=r"stage 'Y': read of tensor 'X' at axis 1 index 5 is outside \[0, 5\)"):
        pa.evaluate(Y, {X: np.zeros((4, 5), "float32")})


def test_errors_are_also_builtin_exceptions(X):
    with pytest.raises(ValueError):
        pa.placeholder((0,))
    with pytest.raises(TypeError):
        pa.compute((4, 5), lambda i: X[i, 0])
    with pytest.raises(IndexError):
        X[0]
