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
