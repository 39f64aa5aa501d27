"""Reads outside their tensor at build time (polyad.poly.bounds): proven ones are errors, unproven ones guarded.

Structural checks on the rewritten graph, then built modules against ``pa.evaluate``: a read at an index loaded
from data once segfaulted the user's process, and an affine one past the edge returned the next buffer's bytes."""

import numpy as np
import pytest

import polyad as pa
from polyad.poly.bounds import guarded_reads
from polyad.te.visit import post_order


def _selects(t):
    return sum(1 for n in post_order(tuple(t.op.body)) if getattr(n, "op", None) == "select")


@pytest.mark.parametrize("body, where", [
    (lambda X: pa.compute((4, 5), lambda i, j: X[i, j + 1], name="V"),
     "axis 1 index j + 1 is outside [0, 5) where i=0, j=4"),
    (lambda X: pa.compute((4, 5), lambda i, j: X[i - 1, j], name="V"), "axis 0 index i - 1 is outside [0, 4) where i=0"),
    (lambda X: pa.compute((4,), lambda i: pa.sum(X[i, (k := pa.reduce_axis((0, 6), name="k"))], axis=k), name="V"),
     "axis 1 index k is outside [0, 5) where i=0, k=5"),
    # a select's true branch over a bound that does not keep the read inside: read where j = 4
    (lambda X: pa.compute((4, 5), lambda i, j: pa.select(j < 5, X[i, j + 1], 0.0), name="V"), "where i=0, j=4"),
    (lambda X: pa.compute((4, 5), lambda i, j: X[i, (i * 2 + j) // 2], name="V"), "axis 1"),
])
def test_a_read_isl_proves_outside_is_an_error_naming_stage_tensor_axis_and_point(body, where):
    X = pa.placeholder((4, 5), name="X")
    V = body(X)
    with pytest.raises(pa.OutOfBoundsError, match="stage 'V': read of tensor 'X' at ") as e:
        guarded_reads([V])
    assert where in str(e.value)
    with pytest.raises(pa.OutOfBoundsError):  # pa.evaluate agrees: the read is made
        pa.evaluate(V, {X: np.zeros((4, 5), "float32")})


def test_reads_under_conditions_that_keep_them_inside_are_left_as_they_are():
    """``{ [i, j] : j < 4 }`` keeps ``X[i, j + 1]`` inside, a reduction's ``where`` its source's reads, the second
    operand of an ``and`` its first's."""
    X = pa.placeholder((4, 5), name="X")
    k = pa.reduce_axis((0, 6), name="k")
    outs = [pa.compute((4, 5), lambda i, j: pa.select(j < 4, X[i, j + 1], X[i, j]), name="A"),
            pa.compute((4,), lambda i: pa.sum(X[i, k], axis=k, where=k < 5), name="B"),
            pa.compute((4, 5), lambda i, j: pa.select(pa.logical_and(j > 0, X[i, j - 1] > 0), 1.0, 0.0), name="C")]
    assert all(a is b for a, b in zip(guarded_reads(outs), outs))


def test_a_data_dependent_read_is_clamped_and_nan_outside():
    """``X[I[i], j]`` becomes ``select(0 <= I[i] < 4, X[min(max(I[i], 0), 3), j], nan)``; a clamp that bounds the
    index (``take``'s clip and wrap) needs no guard."""
    X = pa.placeholder((4, 5), name="X")
    I = pa.placeholder((3,), dtype="int32", name="I")
    G = pa.compute((3, 5), lambda i, j: X[I[i], j], name="G")
    (g,) = guarded_reads([G])
    assert g is not G and _selects(g) == 1
    assert "G[i, j] = select(I[i] >= 0 and I[i] < 4, X[min(max(I[i], 0), 3), j], nan)" in pa.show(g)
    for mode in ("clip", "wrap"):
        T = pa.ops.take(X, I, axis=0, mode=mode)
        assert guarded_reads([T])[0] is T
    # the stages after a guarded one read the new one
    S = pa.compute((3,), lambda i: pa.sum(G[i, (k := pa.reduce_axis((0, 5), name="k"))], axis=k), name="S")
    (s,) = guarded_reads([S])
    assert s is not S and s.op.input_tensors[0] is not G and s.op.input_tensors[0].name == "G"


def test_an_integer_read_at_an_unbounded_index_is_an_indexing_error_saying_how_to_bound_it():
    P = pa.placeholder((4,), dtype="int32", name="P")
    I = pa.placeholder((4,), dtype="int32", name="I")
    with pytest.raises(pa.IndexingError, match=r"stage 'Z': read of int32 tensor 'P' .* pa.ops.take"):
        guarded_reads([pa.compute((4,), lambda i: P[I[i]], name="Z")])
    Z = pa.compute((4,), lambda i: P[pa.min(pa.max(I[i], 0), 3)], name="Z")
    assert guarded_reads([Z])[0] is Z


def test_built_reads_at_bad_data_indices_are_nan_and_never_leave_the_buffer():
    """The forward (a ComputeOp) and a gradient stage (a PolyOp reading ``X[I[i]]``) alike."""
    X = pa.placeholder((6,), name="X")
    W = pa.placeholder((6,), name="W")
    I = pa.placeholder((4,), dtype="int32", name="I")
    H = pa.placeholder((4,), name="H")
    Y = pa.compute((4,), lambda i: X[I[i]] * W[I[i]], name="Y")
    (dW,) = pa.differentiate(Y, [W], H)
    m = pa.build([Y, dW], [X, W, I, H])
    x, w, h = np.arange(6, dtype="float32"), np.full(6, 2.0, "float32"), np.ones(4, "float32")
    good = np.array([0, 1, 5, 2], "int32")
    ref = pa.evaluate([Y, dW], {X: x, W: w, I: good, H: h})
    for got, want in zip(m(x, w, good, h), ref):
        np.testing.assert_allclose(got, want)
    y, dw = m(x, w, np.array([0, 100000, -5000000, 2], "int32"), h)
    np.testing.assert_array_equal(np.isnan(y), [False, True, True, False])
    np.testing.assert_allclose(y[[0, 3]], [0.0, 4.0])
    np.testing.assert_allclose(dw, [0, 0, 2, 0, 0, 0])  # no row matches an index out of range


def test_a_build_of_a_read_past_the_edge_is_an_error():
    X = pa.placeholder((3, 4), name="X")
    with pytest.raises(pa.OutOfBoundsError, match="stage 'C'.*where i=2"):
        pa.build(pa.compute((3,), lambda i: X[i, i + 2], name="C"), [X])


def test_a_read_shared_under_many_nested_conditions_is_checked_where_it_is_read_in_linear_time():
    """30 nested selects reach ``XI[i, j + 1]`` by 2^30 paths.  The check is a dataflow over the expression's DAG
    (each node's points the union of its parents'), not a walk of the paths: a walk capped at 20000 steps lost
    the conditions past 12 selects and took this valid int read for an unbounded one."""
    import time

    XI = pa.placeholder((4, 5), dtype="int32", name="XI")

    def body(i, j):
        s = pa.select(j < 4, XI[i, j + 1], 0)  # inside wherever it is read
        for k in range(30):
            s = pa.select(i + j > k % 7, s + 1, s * 2)
        return s

    V = pa.compute((4, 5), body, name="V")
    t = time.perf_counter()
    assert guarded_reads([V])[0] is V
    assert time.perf_counter() - t < 5
    bad = pa.compute((4, 5), lambda i, j: pa.select(i + j > 2, XI[i, j + 1], body(i, j)), name="W")
    with pytest.raises(pa.OutOfBoundsError, match=r"stage 'W'.*axis 1 index j \+ 1 .* where i=\d, j=4"):
        guarded_reads([bad])


@pytest.mark.parametrize("index", [
    lambda i, j: pa.abs(i - 3), lambda i, j: pa.sign(i), lambda i, j: pa.floormod(i, j + 1),
    lambda i, j: pa.floordiv(i, j + 1), lambda i, j: pa.cast(i == 3, "int32"),
], ids=["abs", "sign", "mod-by-variable", "div-by-variable", "cast-of-bool"])
def test_integer_reads_at_indices_bounded_by_their_intervals_build(index):
    XI = pa.placeholder((4, 5), dtype="int32", name="XI")
    V = pa.compute((4, 5), lambda i, j: XI[index(i, j), j], name="V")
    assert guarded_reads([V])[0] is V


def test_a_narrowing_cast_in_an_index_is_not_taken_for_exact_arithmetic():
    """``int32(i + 2^32)`` wraps around to ``i`` in ``pa.evaluate``: isl's exact arithmetic proved it outside.  It is
    read guarded, at the index the code computes (64-bit index code computes an int32 as a long: NaN there, never
    another element)."""
    X = pa.placeholder((4, 5), name="X")
    W = pa.compute((4, 5), lambda i, j: X[pa.cast(i + 2 ** 32, "int32"), j], name="W")
    (w,) = guarded_reads([W])
    assert _selects(w) == 1
    x = np.arange(20, dtype="float32").reshape(4, 5)
    np.testing.assert_array_equal(pa.evaluate(W, {X: x}), x)
    got = pa.build(W, [X])(x)
    assert (np.isnan(got) | (got == x)).all(), got


def test_the_generated_source_is_the_guarded_graphs_and_a_proven_read_stops_it():
    """``pipeline.generate`` (``polyad show``'s OpenCL) generates what ``pa.build`` compiles."""
    from polyad.pipeline import generate

    X = pa.placeholder((4, 5), name="X")
    I = pa.placeholder((3,), dtype="int32", name="I")
    src = generate([pa.compute((3, 5), lambda i, j: X[I[i], j], name="G")], [X, I]).source
    assert "NAN" in src and "min(" in src
    with pytest.raises(pa.OutOfBoundsError, match="stage 'V'"):
        generate([pa.compute((4, 5), lambda i, j: X[i, j + 1], name="V")], [X])


def test_an_affine_conjunct_beside_a_loaded_one_still_bounds_the_read():
    """``M[i, j // 2] == j % 2 and j < 14`` holds only where ``j < 14``, where ``H[i, j // 2 + 1]`` is inside (a
    max-pool gradient's shape): no guard.  Its negation's false branch is the same set; a condition on loaded
    values alone bounds nothing, and the read past the edge is guarded."""
    M = pa.placeholder((4, 8), "int32", name="M")
    H = pa.placeholder((4, 8), name="H")
    both = lambda i, j: pa.logical_and(M[i, j // 2] == j % 2, j < 14)  # noqa: E731
    outs = [pa.compute((4, 16), lambda i, j: pa.select(both(i, j), H[i, j // 2 + 1], 0.0), name="A"),
            pa.compute((4, 16), lambda i, j: pa.select(pa.logical_not(both(i, j)), 0.0, H[i, j // 2 + 1]), name="B")]
    assert all(a is b for a, b in zip(guarded_reads(outs), outs))
    C = pa.compute((4, 16), lambda i, j: pa.select(M[i, j // 2] == j % 2, H[i, j // 2 + 1], 0.0), name="C")
    (c,) = guarded_reads([C])
    assert _selects(c) == 2  # the stage's and the guard's


def test_differentiating_a_forward_that_reads_past_an_edge_is_an_error():
    """Its gradient was that of its part inside, without a word (the sum's gradient needs none of its values, so
    no build of the gradient looked at the forward's reads)."""
    X = pa.placeholder((3, 4), name="X")
    kb = pa.reduce_axis((0, 5), "kb")
    OB = pa.compute((3,), lambda i: pa.sum(X[i, kb], axis=kb), name="OB")
    with pytest.raises(pa.OutOfBoundsError, match="stage 'OB': read of tensor 'X' at axis 1 index kb .* kb=4"):
        pa.differentiate(OB, [X], pa.placeholder((3,), name="H"))
    # reads only data could take out of range are the build's to guard, not an error here
    I = pa.placeholder((3,), dtype="int32", name="I")
    XI = pa.placeholder((4,), dtype="int32", name="XI")
    G = pa.compute((3,), lambda i: X[i, I[i]] * pa.cast(XI[I[i]], "float32"), name="G")
    (dX,) = pa.differentiate(G, [X], pa.placeholder((3,), name="H"))
    assert dX.shape == (3, 4)
