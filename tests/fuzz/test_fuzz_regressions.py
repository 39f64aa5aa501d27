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


def test_candidate_space_offers_only_legal_vectors_for_a_bool_stage():
    """candidate_space offered vectorized candidates for a bool stage, which codegen rejects ('bool
    outputs cannot be vectorized'): a bool stage's candidates are scalar."""
    from polyad.schedule import Schedule, candidate_space

    X = pa.placeholder((3, 8), name="X")
    Y = pa.ops.where(pa.ops.greater(X, 0.0), X, 2.0)
    space = candidate_space([Y], schedule=Schedule(inline=frozenset()))  # 'greater' stays a stage
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
    for ss in space.stages["greater"]:
        y = pa.build(Y, [X], schedule=Schedule("s", stages={"greater": ss}))(x)
        np.testing.assert_array_equal(y, np.where(x > 0, x, 2.0))
