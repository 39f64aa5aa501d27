"""float32 ``erf`` as codegen prints it (codegen/erf.py): a polynomial within 3 ulp of erf, in scalars and vectors."""

import math

import numpy as np

import polyad as pa
from polyad.codegen import erf
from polyad.pipeline import generate
from polyad.schedule import Schedule, StageSchedule


def _erf_graph(n, dtype="float32"):
    X = pa.placeholder((n,), name="X", dtype=dtype)
    return X, pa.compute((n,), lambda i: pa.erf(X[i]), name="Y")


def _ulps(got, x):
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)


def test_within_three_ulp_of_erf_in_scalars_and_vectors(opencl):
    n = 200_000
    x = np.concatenate([np.linspace(-5, 5, n - 4000, dtype=np.float32),
                        np.geomspace(1e-38, 6, 2000).astype(np.float32),
                        -np.geomspace(1e-38, 6, 2000).astype(np.float32)])
    X, Y = _erf_graph(n)
    for schedule in ("naive", Schedule("v", stages={"Y": StageSchedule(tile=(16,), vectorize=8)})):
        m = pa.build([Y], [X], schedule=schedule)
        assert "pa_erf_f32" in m.source and " erf(" not in m.source
        assert _ulps(np.asarray(m(x)).reshape(-1), x).max() <= 3.0


def test_special_values_are_erfs(opencl):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 3.9999998, 4.0, -4.0, 3e38, -3e38, 1.0, -1.0],
                 dtype=np.float32)
    X, Y = _erf_graph(len(x))
    for schedule in ("naive", Schedule("v", stages={"Y": StageSchedule(tile=(2,), vectorize=2)})):
        y = np.asarray(pa.build([Y], [X], schedule=schedule)(x)).reshape(-1)
        assert np.isnan(y[0]) and y[1] == 1.0 and y[2] == -1.0
        assert y[3] == 0.0 and np.signbit(y[3]) and not np.signbit(y[4])  # -0.0 stays -0.0
        assert y[5] == x[5] * np.float32(2 / math.sqrt(math.pi)) or abs(y[5]) <= 2e-45
        assert y[8] == 1.0 and y[9] == -1.0 and y[10] == 1.0 and y[11] == -1.0
        assert _ulps(y[[7, 12, 13]], x[[7, 12, 13]]).max() <= 3.0


def test_the_constants_are_what_the_fit_makes_and_float64_keeps_the_library():
    p, r = erf.fit()
    assert np.array_equal(np.float32(p), np.float32(erf.P)) and np.array_equal(np.float32(r), np.float32(erf.R))
    X, Y = _erf_graph(8, "float64")
    src = generate([Y], [X], "naive").source
    assert "pa_erf" not in src and "erf(" in src
