"""pa.show: short and stable."""

import polyad as pa


def test_show_dense():
    X = pa.placeholder((32, 100), name="X")
    W = pa.placeholder((10, 100), name="W")
    k = pa.reduce_axis((0, 100), name="k")
    T = pa.compute((32, 10), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    assert pa.show(T) == (
        "placeholder X: float32[32, 100]\n"
        "placeholder W: float32[10, 100]\n"
        "compute T: float32[32, 10]  (i < 32, j < 10)\n"
        "  T[i, j] = sum(X[i, k]*W[j, k], axis=[k in [0, 100)])"
    )


def test_show_uniquifies_names_and_prints_conditions_and_precedence():
    X = pa.placeholder((4,), name="X")
    A = pa.compute((4,), lambda i: (X[i] + 1.0) * 2.0, name="A")
    B = pa.compute((4,), lambda i: A[i] - (X[i] - A[i]), name="A")
    k = pa.reduce_axis((0, 4), "k")
    C = pa.compute((4,), lambda i: pa.max(B[k], axis=k, where=k % 2 == i // 2), name="C")
    text = pa.show(C)
    assert "  A[i] = (X[i] + 1.0)*2.0" in text
    assert "compute A_1: float32[4]" in text
    assert "  A_1[i] = A[i] - (X[i] - A[i])" in text
    assert "  C[i] = max(A_1[k], axis=[k in [0, 4)], where=k%2 == i//2)" in text


def test_show_tuple_outputs_and_casts():
    X = pa.placeholder((3, 5), dtype="float64", name="X")
    k = pa.reduce_axis((0, 5), "k")
    amax = pa.comm_reducer(
        lambda x, y: (pa.select(x[1] >= y[1], x[0], y[0]), pa.max(x[1], y[1])),
        lambda a, b: (pa.const(-1, a), pa.const(-1e30, b)),
        name="argmax",
    )
    i_, v_ = pa.compute((3,), lambda i: amax((k, X[i, k]), axis=k), name="M")
    Y = pa.compute((3,), lambda i: pa.cast(i_[i], "float64") + v_[i], name="Y")
    text = pa.show(Y)
    assert "compute M: float64, int32[3]  (i < 3)" in text
    assert "  M.v0[i] = argmax((k, X[i, k]), axis=[k in [0, 5)])[0]" in text
    assert "  Y[i] = float64(M.v0[i]) + M.v1[i]" in text


def test_an_expression_hundreds_of_levels_deep_prints():
    """chain's backward, its 600 stages inlined into one expression, took the printer past Python's recursion
    limit (a RecursionError at the end of ``polyad tune --workload chain``): it prints children first."""
    X = pa.placeholder((4,), name="X")
    e = X[0]
    for _ in range(3000):
        e = e * 1.01 + 0.5
    Y = pa.compute((4,), lambda i: e + X[i], name="Y")
    text = pa.show(Y)
    assert text.count("1.01") == 3000 and "X[i]" in text


def test_a_shared_subexpression_is_printed_once_and_named():
    # a select that reuses its value in its condition and both branches, nested 150 deep, was 3**150 characters
    # of text (the process ran out of memory); a long subexpression used twice is now named once
    X = pa.placeholder((8,), name="X")

    def body(i):
        e = X[i]
        for s in range(300):
            e = pa.tanh(e) * 0.9 + 0.01 if s % 2 else pa.select(e > 0, e, e * 0.5)
        return e

    text = pa.show(pa.compute((8,), body, name="D"))
    assert len(text) < 100000
    lines = text.splitlines()
    assert lines[2].startswith("  _0 = ") and lines[-1].startswith("  D[i] = ")
    assert sum(ln.startswith("  _") for ln in lines) > 40
    small = pa.compute((8,), lambda i: pa.select(X[i] > 0, X[i], X[i] * 0.5), name="S")
    assert pa.show(small).splitlines()[-1] == "  S[i] = select(X[i] > 0.0, X[i], X[i]*0.5)"  # short: as before
