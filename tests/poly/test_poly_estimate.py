"""pa.estimate: iterations, flops and intermediate memory from isl point counts."""

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.poly import Estimate, estimate, simplify
from polyad.poly.convert import count
from poly_rawforms import raw_grad


def test_plain_computes_count_their_boxes():
    X = pa.placeholder((4, 6), name="X")
    W = pa.placeholder((5, 6), name="W")
    k = pa.reduce_axis((0, 6), "k")
    T = pa.compute((4, 5), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    U = pa.compute((4, 5), lambda i, j: pa.exp(T[i, j]) + 1.0, name="U")
    e = estimate(U)
    assert isinstance(e, Estimate)
    assert e.stage("T").iterations == 4 * 5 * 6 and e.stage("T").flops == 2 * 4 * 5 * 6
    assert e.stage("U").iterations == 20 and e.stage("U").flops == 2 * 20
    assert (e.iterations, e.flops) == (120 + 20, 240 + 40)
    # only T is an intermediate buffer; U is what was asked for
    assert e.memory == 4 * 5 * 4 and e.stage("T").intermediate and not e.stage("U").intermediate
    assert pa.estimate([T, U]).memory == 0
    text = str(e)
    assert "T: 120 iterations, 240 flops" in text and "bytes of intermediates" in text


def test_index_arithmetic_and_shared_subexpressions_are_free():
    X = pa.placeholder((10,), name="X")
    Y = pa.compute((5,), lambda i: X[2 * i + 1] * X[2 * i + 1] + X[2 * i + 1], name="Y")
    assert estimate(Y).flops == 5 * 2  # the read is shared, its index costs nothing


def test_where_condition_is_a_guard_over_the_box():
    X = pa.placeholder((4, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")
    T = pa.compute((4,), lambda i: pa.sum(X[i, k], axis=k, where=k < i), name="T")
    assert estimate(T).iterations == 16 and estimate(T).flops == 2 * 16


def test_simplified_statements_count_their_domains():
    n = 6
    H = pa.placeholder((n, n), name="H")
    # Y[i, r] = X[i + r] for 0 <= i, r < n: dX[j] = sum_{i + r = j} H[i, r]
    raw = raw_grad((2 * n - 1,), (n, n), (), lambda o, r: [((o[0] + o[1],), None, H[o[0], o[1]])])
    s = simplify(raw)
    assert estimate(s).iterations == n * n
    assert estimate(s).flops == n * n
    assert estimate(raw).iterations == (2 * n - 1) * n * n


def test_count_of_large_sets_is_fast_and_exact():
    s = isl.Set("{ [a, b, c, d, e] : 0 <= a < 1000 and 0 <= b < 1000 and 0 <= c < 32 and 0 <= d < 100 and 0 <= e < 100 }")
    assert count(s) == 1000 * 1000 * 32 * 100 * 100
    t = isl.Set("{ [n, x, o] : 0 <= n < 100000 and 0 <= x <= 57 and 0 <= o <= 18 and -3 + x <= 3o <= 1 + x }")
    assert count(t) == 100000 * 94
    u = isl.Set("{ [x, y, m] : 0 <= x < 10 and 0 <= y < 10 and 0 <= m < 40 and (m - x) mod 5 = 0; "
                "[x, y, m] : 0 <= x < 3 and 0 <= y < 30 and 0 <= m < 10 }")
    assert count(u) == u.count_val().to_python()


def test_huge_shapes_count_exactly_beyond_int64():
    X = pa.placeholder((10**6,) * 4, name="X")
    Y = pa.compute(X.shape, lambda *i: X[i] * 2.0, name="Y")
    Z = pa.compute(X.shape, lambda *i: Y[i] + 1.0, name="Z")
    e = estimate(Z)
    assert X.size == 10**24
    assert e.iterations == 2 * 10**24 and e.flops == 2 * 10**24
    assert e.memory == e.stage("Y").bytes == 4 * 10**24  # 4 * 10**24 overflows int64


def test_bad_input():
    with pytest.raises(pa.PolyadError):
        pa.estimate(42)


def test_a_stage_without_statement_form_is_named():
    from polyad.te.tensor import Operation, Tensor

    class Opaque(Operation):
        name, shape, input_tensors = "opaque", (3,), []

        def output_dtype(self, i):
            return "float32"

        _outputs = property(lambda self: (Tensor(self, 0),))

    T = Opaque().output(0)
    Y = pa.compute((3,), lambda i: T[i] * 2.0, name="Y")
    with pytest.raises(pa.PolyadError, match="stage 'opaque': a Opaque has no statement form"):
        pa.estimate(Y)


@pytest.mark.parametrize("name", ["min", "NaN", "Floor", "exists", "ℓ", "a b"])
def test_variable_names_isl_would_misread(name):
    # "min" was an isl syntax error and "NaN" an empty set (0 iterations): names are made isl-safe
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), name)
    Y = pa.compute((3,), lambda i: pa.sum(pa.select(k > i, X[i, k], 0.0), axis=k), name="Y")
    assert estimate(Y).iterations == 12
    g = pa.differentiate(Y, [X])[0]
    assert estimate(g).iterations == 3 * 4 * 3
    expect = np.zeros((3, 3, 4), "float32")
    for i in range(3):
        expect[i, i, i + 1:] = 1.0
    np.testing.assert_array_equal(pa.evaluate(g, {X: np.ones((3, 4), "float32")}), expect)


def test_a_combine_counts_its_own_operations():
    """sum, max and products combine in one operation; an argmax's combine compares the values (NaN first), breaks
    a tie on the index and selects both: the model priced a pool's argmax at a fifth of its work."""
    X = pa.placeholder((4, 6), name="X")
    k = pa.reduce_axis((0, 6), "k")
    S = pa.compute((4,), lambda i: pa.max(X[i, k], axis=k), name="S")
    A = pa.ops.argmax(X, axis=1)
    e = pa.estimate([S, A])
    assert e.stage("S").flops == 24
    arg = next(s for s in e.stages if s.name != "S" and s.iterations == 24)
    assert arg.flops >= 4 * 24, arg
