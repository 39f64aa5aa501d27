"""Graphs the fuzzer (test_fuzz.py) found failing, minimised by hand, one named test each."""

import numpy as np
import pytest

import polyad as pa


def test_evaluate_erf_of_a_scalar_tensor():
    # pa.evaluate's erf called .astype on the Python float np.frompyfunc returns for a 0-d input
    X = pa.placeholder((1,), dtype="float64", name="X")
    Y = pa.ops.erf(pa.ops.take(X, 0))  # shape ()
    (y,) = pa.evaluate([Y], {X: np.array([0.5])})
    assert y.shape == () and y.dtype == np.float64
    np.testing.assert_allclose(y, 0.5204998778130465)


def test_evaluate_polyhedral_gradient_of_a_scalar_input():
    # l2_normalize over every axis sums into a 0-d stage; the adjoint of that stage is a polyhedral stage
    # with a 0-d output, which numpy_eval wrote into outs[k][()], a scalar copy, not a view
    X = pa.placeholder((1, 2), dtype="float64", name="X")
    Y = pa.nn.l2_normalize(X, axis=None)
    H = pa.placeholder(Y.shape, dtype="float64", name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    x, h = np.array([[0.6, -0.8]]), np.array([[1.0, 2.0]])
    (dx,) = pa.evaluate([dX], {X: x, H: h})
    n = np.linalg.norm(x)
    np.testing.assert_allclose(dx, h / n - x * np.sum(h * x) / n**3)
