"""Floor division/modulo by positive constants (shift/mask, corrected truncation) and branch-free and/or."""

import re

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import generate

pytestmark = pytest.mark.opencl

DIVISORS = (1, 2, 3, 4, 7, 8, 16)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_floor_by_constant_matches_python_on_negative_and_positive_values(opencl, dtype):
    V = pa.placeholder((61,), dtype, name="V")
    v = np.arange(-30, 31).astype(dtype)
    outs = []
    for b in DIVISORS:
        outs.append(pa.compute((61,), lambda i, b=b: V[i] // b, name=f"q{b}"))
        outs.append(pa.compute((61,), lambda i, b=b: V[i] % b, name=f"r{b}"))
    mod = pa.build(outs, [V], schedule="naive")
    assert "pa_floordiv" not in mod.source and "pa_floormod" not in mod.source
    got = mod(v)
    for k, b in enumerate(DIVISORS):
        np.testing.assert_array_equal(got[2 * k], v // b)
        np.testing.assert_array_equal(got[2 * k + 1], v % b)


def test_negative_and_variable_divisors_keep_the_general_helper(opencl):
    V = pa.placeholder((9,), "int32", name="V")
    D = pa.placeholder((9,), "int32", name="D")
    Q = pa.compute((9,), lambda i: V[i] // -3 + V[i] % D[i], name="Q")
    mod = pa.build(Q, [V, D], schedule="naive")
    bits = "i64" if mod.program.wide_index else "i32"  # int32 is computed as long with 64-bit indices (CPUs)
    assert f"pa_floordiv_{bits}" in mod.source and f"pa_floormod_{bits}" in mod.source
    v = np.arange(-4, 5, dtype="int32")
    d = np.array([3, -2, 5, 1, 2, -3, 4, 7, -1], dtype="int32")
    np.testing.assert_array_equal(mod(v, d), v // -3 + v % d)


def test_and_or_do_not_short_circuit_and_guarded_reads_are_clamped():
    X = pa.placeholder((5,), name="X")
    A = pa.compute((5,), lambda i: pa.select(pa.logical_and(i > 0, i < 4), X[i], 0.0), name="A")
    B = pa.compute((5,), lambda i: pa.select(pa.logical_and(i > 0, X[i - 1] > 0.0), 1.0, 0.0), name="B")
    a_src = generate(A, [X], "naive").source
    a_body = a_src[a_src.index("__kernel"):]
    assert "&&" not in a_body and " & " in a_body  # no branch for a guard without reads
    b_src = generate(B, [X], "naive").source
    b_body = b_src[b_src.index("__kernel"):]
    # X[i - 1] is out of range at i == 0: it is read always, clamped into X, and the guard drops its value
    assert "&&" not in b_body and re.search(r"X\[min\(max\(i - 1, 0\), 4\)\]", b_body), b_body
    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0], np.float32)
    for T in (A, B):
        np.testing.assert_array_equal(pa.build(T, [X])(x), pa.evaluate(T, {X: x}))
