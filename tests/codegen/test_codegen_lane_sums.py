"""Lane sums (codegen/tree.py ``lane_sums``): an rfactor's sum of a point's vectors of partials runs in the partials'
kernel, whose final statements add each vector's lanes in halves into the sum's output; the partials get no buffer.

    S_rf[r, ri] = sum_{ro} X[r, 16*ro + ri] * X[r, 16*ro + ri]      tile (1, 16), vectorize 16: one vector a row
    S[r]        = sum_{ri} S_rf[r, ri]                               no kernel: r8 = acc.lo + acc.hi ... -> S[r]
"""

import numpy as np
import pytest

import polyad as pa
from polyad.codegen import tree
from polyad.pipeline import generate
from polyad.schedule import RFactor, Schedule, StageSchedule


def _row_sums(rows=24, n=128):
    X = pa.placeholder((rows, n), name="X")
    k = pa.reduce_axis((0, n), name="k")
    S = pa.compute((rows,), lambda r: pa.sum(X[r, k] * X[r, k], axis=k), name="S")
    Y = pa.compute((rows, n), lambda r, c: X[r, c] * S[r], name="Y")
    return X, S, Y


def _schedule(tile=(1, 16), vec=16, factor=16):
    return Schedule("lanes", rfactor={"S": factor}, stages={"S_rf": StageSchedule(tile=tile, vectorize=vec)})


def test_the_partials_kernel_writes_the_sum_and_the_partials_get_no_buffer():
    X, S, Y = _row_sums()
    p = generate([Y], [X], _schedule())
    assert [k.name for k in p.kernels] == ["S_rf", "Y"]
    (rf,) = [k for k in p.kernels if k.name == "S_rf"]
    assert [t.name for t in rf.written()] == ["S"]
    assert [t.name for t in p.intermediates] == ["S"]  # no S_rf buffer
    src = p.kernel_source("S_rf")
    assert ".lo + " in src and "S_rf[" not in src and "__global float *restrict S)" in src
    assert "lane sum S: in S_rf's kernel, each point's 16 partials added in halves" in pa.show([Y], schedule=_schedule())


def test_only_whole_rows_of_partials_in_whole_blocks_are_summed_in_their_kernel(monkeypatch):
    X, S, Y = _row_sums()
    # two vectors a row (tile 32 of float16): summed, the second vector added to the first's sum
    two = generate([Y], [X], _schedule((1, 32), 16, 32))
    src = two.source
    assert "S" not in [k.name for k in two.kernels]
    assert src.count("] = r1;") == 1 and src.count("] + r1;") == 1
    # half a row of partials a block (tile 16 of 32): the sum keeps its kernel
    assert "S" in [k.name for k in generate([Y], [X], _schedule((1, 16), 16, 32)).kernels]
    # rows a tile does not divide (24 rows in blocks of 5): partial blocks' scalar finals; the sum keeps its kernel
    assert "S" in [k.name for k in generate([Y], [X], _schedule((5, 16), 16)).kernels]
    # the partials read by another stage too
    X2 = pa.placeholder((24, 128), name="X")
    k = pa.reduce_axis((0, 128), name="k")
    S2 = pa.compute((24,), lambda r: pa.sum(X2[r, k], axis=k), name="S")
    from polyad.schedule.graph import rfactor

    S2r, = rfactor([S2], "S", 16)
    P = S2r.op.body[0].source[0].tensor
    Z = pa.compute((24, 16), lambda r, c: P[r, c] * 2.0, name="Z")
    sched = Schedule("s", stages={"S_rf": StageSchedule(tile=(1, 16), vectorize=16)})
    assert "S" in [k.name for k in generate([S2r, Z], [X2], sched).kernels]
    # a sum that is a max: its kernel stays (only sums are added in halves)
    M = pa.compute((24,), lambda r: pa.max(X2[r, k], axis=k), name="S")
    assert "S" in [k.name for k in generate([M], [X2], _schedule()).kernels]
    # switched off
    monkeypatch.setattr(tree, "LANE_SUMS", False)
    assert "S" in [k.name for k in generate([Y], [X], _schedule()).kernels]


@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("tile,vec", [((1, 16), 16), ((4, 16), 16), ((2, 8), 8), ((1, 32), 8), ((3, 40), 8)])
def test_lane_sums_equal_evaluate_and_the_separate_sum(tile, vec, monkeypatch):
    X, S, Y = _row_sums(n=120 if tile[-1] == 40 else 128)
    x = np.random.default_rng(7).standard_normal(X.shape).astype(np.float32)
    sched = _schedule(tile, vec, tile[-1])
    got = np.asarray(pa.build([Y, S], [X], schedule=sched)(x)[1])
    want = pa.evaluate([S], {X: x})[0]
    np.testing.assert_allclose(got, want, rtol=2e-6)
    monkeypatch.setattr(tree, "LANE_SUMS", False)
    sep = np.asarray(pa.build([Y, S], [X], schedule=sched)(x)[1])
    np.testing.assert_allclose(got, sep, rtol=2e-6)


@pytest.mark.usefixtures("opencl")
def test_a_layer_norm_backward_sums_its_rows_in_the_partials_kernels():
    """Its two row sums of partials (auto's rfactor_rows, one float16 a row) run in their partials' kernels: three
    kernels where there were five (0.91x the backward, 0.64-0.69x a dense or softmax forward, in alternating rounds)."""
    R, C = 64, 256
    X = pa.placeholder((R, C), name="X")
    k = pa.reduce_axis((0, C), name="k")
    total = pa.compute((R,), lambda r: pa.sum(X[r, k], axis=k), name="total")
    dev = pa.compute((R, C), lambda r, c: X[r, c] - total[r] * (1.0 / C), name="centred")
    j = pa.reduce_axis((0, C), name="j")
    sq = pa.compute((R,), lambda r: pa.sum(dev[r, j] * dev[r, j], axis=j), name="squares")
    Y = pa.compute((R, C), lambda r, c: dev[r, c] * pa.rsqrt(sq[r] * (1.0 / C) + 1e-5), name="layer_norm")
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], head=H)
    m = pa.build([dX], [X, H])
    summed = [k for k in m.program.kernels if k.name.endswith("_rf") and not any(
        t.name.endswith("_rf") for t in k.written())]
    assert len(summed) >= 2, [k.name for k in m.program.kernels]
    rng = np.random.default_rng(3)
    x, h = (rng.standard_normal((R, C)).astype(np.float32) for _ in range(2))
    want = pa.evaluate([dX], {X: x, H: h})[0]
    np.testing.assert_allclose(np.asarray(m(x, h)[0]), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.usefixtures("opencl")
def test_ragged_lanes_of_interleaved_partials_are_summed_too():
    """Rows of 120 in 16 interleaved partials (graph.rfactor's guarded form: lanes 8-15 sum one term fewer): every
    point is still the one reduction statement's, so the block's final holds the whole vector."""
    X, S, Y = _row_sums(n=120)
    sched = Schedule("lanes", rfactor={"S": RFactor(16, "k", True)},
                     stages={"S_rf": StageSchedule(tile=(1, 16), vectorize=16)})
    p = generate([Y], [X], sched)
    assert "S" not in [k.name for k in p.kernels]
    x = np.random.default_rng(9).standard_normal(X.shape).astype(np.float32)
    got = np.asarray(pa.build([Y, S], [X], schedule=sched)(x)[1])
    np.testing.assert_allclose(got, pa.evaluate([S], {X: x})[0], rtol=2e-6)


def test_only_one_reduction_over_its_whole_box_has_its_lanes_summed():
    """A stage with a statement besides its reduction (a zero fill where a sum has no terms) would leave points a
    lane sum misses: such partials keep their sum's kernel."""
    from polyad.codegen.tree import _one_reduction_over_its_box
    from polyad.schedule import prepare
    from polyad.te.tensor import PlaceholderOp, walk_ops

    X, S, Y = _row_sums()
    outs, sched = prepare([Y], _schedule())
    ops = {op.name: op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)}
    assert _one_reduction_over_its_box(ops["S_rf"]) and not _one_reduction_over_its_box(ops["Y"])
    # a triangle: T[i] = sum_{j < i} X[i, j] has no terms at i = 0
    j = pa.reduce_axis((0, 128), name="j")
    T = pa.compute((24,), lambda i: pa.sum(X[i, j], axis=j, where=j < i), name="T")
    (tri,) = [op for op in walk_ops(prepare([T], "naive")[0]) if op.name == "T"]
    assert not _one_reduction_over_its_box(tri)
