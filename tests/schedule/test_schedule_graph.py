"""inline and rfactor are pure graph rewrites that keep the values (checked with pa.evaluate)."""

import dataclasses
import time

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.schedule import DeviceModel
from polyad.schedule import inline, rfactor
from polyad.te.tensor import ComputeOp, PlaceholderOp, walk_ops

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")  # the figures the decisions were measured with



def _stages(outs):
    return [op.name for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]


def _same(a, b, feeds, rtol=1e-5):
    ra, rb = pa.evaluate(a, feeds), pa.evaluate(b, feeds)
    for x, y in zip(ra, rb):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol)


RNG = np.random.default_rng(1)


def test_inline_elementwise_into_reduction_and_shifted_reads():
    X = pa.placeholder((7, 9), name="X")
    A = pa.compute((7, 9), lambda i, j: pa.exp(X[i, j]) - 1.0, name="A")
    B = pa.compute((7, 9), lambda i, j: A[i, j] * A[i, j] + A[(i + 1) % 7, j], name="B")
    k = pa.reduce_axis((0, 9), name="k")
    C = pa.compute((7,), lambda i: pa.sum(B[i, k] * X[i, k], axis=k), name="C")
    before = pa.show([C])
    g = inline([C], {"A", "B"})
    assert _stages(g) == ["C"]
    assert pa.show([C]) == before  # the input graph is untouched
    x = RNG.standard_normal((7, 9)).astype(np.float32)
    _same([C], g, {X: x})
    assert g[0].shape == C.shape and g[0].name == "C"


def test_inline_polyop_single_assignment_but_not_region_wise_ones():
    X = pa.placeholder((2, 3, 4, 5), name="X")
    F = pa.nn.flatten(X)
    Z = pa.compute(F.shape, lambda a, b: F[a, b] * 3.0, name="Z")
    H = pa.placeholder(Z.shape, name="H")
    (dX,) = pa.differentiate(Z, [X], head=H)
    L = pa.compute(dX.shape, lambda *i: dX(*i) + 1.0, name="L")
    names = _stages([L])
    poly = [op for op in walk_ops([L]) if op.name == "d_X_from_flatten"]
    assert poly and not isinstance(poly[0], ComputeOp)  # the simplifier's statement form
    g = inline([L], set(names) - {"L"})
    assert _stages(g) == ["L"]
    x = RNG.standard_normal(X.shape).astype(np.float32)
    h = RNG.standard_normal(H.shape).astype(np.float32)
    _same([L], g, {X: x, H: h})
    # average pooling's gradient is two statements (zero fill of the uncovered column): it stays
    P = pa.nn.pool2d(X, (2, 2), (2, 2), (0, 0), "avg")
    H2 = pa.placeholder(P.shape, name="H2")
    (dP,) = pa.differentiate(P, [X], head=H2)
    M = pa.compute(dP.shape, lambda *i: dP(*i) * 2.0, name="M")
    with pytest.raises(pa.ScheduleError, match=r"stage 'd_X_from_pool2d_sum'.*2 statements"):
        inline([M], {"d_X_from_pool2d_sum"})


@pytest.mark.parametrize("depth", [30, 300])
def test_inline_long_chain_is_linear(depth):
    x = pa.placeholder((50,), name="x")
    y = x
    for d in range(depth):
        y = pa.compute((50,), lambda i, y=y: x[i] * y[i] + 0.5, name=f"y{d}")
    H = pa.placeholder((50,), name="H")
    (dx,) = pa.differentiate(y, [x], head=H)
    names = set(_stages([dx])) - {dx.op.name}
    t0 = time.perf_counter()
    g = inline([dx], names)
    assert time.perf_counter() - t0 < 1.5
    assert _stages(g) == [dx.op.name]
    if depth > 100:
        return  # pa.evaluate recurses on the depth of an expression
    xv = RNG.uniform(0.9, 1.0, 50).astype(np.float32)
    hv = RNG.standard_normal(50).astype(np.float32)
    _same([dx], g, {x: xv, H: hv}, rtol=1e-4)


@pytest.mark.parametrize("interleave", [None, False])
@pytest.mark.parametrize("factor", [2, 5, 16, 40])
def test_rfactor_sum_with_condition_and_two_axes(factor, interleave):
    X = pa.placeholder((3, 40, 4), name="X")
    r = pa.reduce_axis((0, 40), name="r")
    s = pa.reduce_axis((0, 4), name="s")
    T = pa.compute((3,), lambda i: pa.sum(X[i, r, s] * 2.0, axis=[r, s], where=(r + s) % 3 != 1), name="T")
    U = pa.compute((3,), lambda i: T[i] + 1.0, name="U")
    g = rfactor([U], "T", factor, interleave=interleave)
    assert _stages(g) == ["T_rf", "T", "U"]
    rf = [op for op in walk_ops(g) if op.name == "T_rf"][0]
    # a sum interleaves by default where ``factor`` divides the extent: ``factor`` partials per point;
    # blocked (asked for, or 16 not dividing 40): one per block of ``factor``; 40, the whole axis: a
    # partial per element of r (interleaved: the lanes of a vector) or one block
    inter = interleave is None and 40 % factor == 0
    assert rf.shape == (3, factor if inter else -(-40 // factor))
    _same([U], g, {X: RNG.standard_normal(X.shape).astype(np.float32)})


def test_rfactor_max_is_exact_and_picks_the_named_axis():
    X = pa.placeholder((5, 30, 6), name="X")
    r = pa.reduce_axis((0, 30), name="r")
    s = pa.reduce_axis((0, 6), name="s")
    T = pa.compute((5,), lambda i: pa.max(X[i, r, s], axis=[r, s]), name="T")
    x = RNG.standard_normal(X.shape).astype(np.float32)
    for axis, interleave, parts in [(None, False, 8), ("s", False, 2), (None, True, 4), ("s", None, 2),
                                    (None, None, 8)]:  # 4 does not divide 30: blocked
        g = rfactor([T], "T", 4, axis=axis, interleave=interleave)
        rf = [op for op in walk_ops(g) if op.name == "T_rf"][0]
        assert rf.shape == (5, parts)
        assert np.array_equal(pa.evaluate(g, {X: x})[0], pa.evaluate([T], {X: x})[0])


def test_rfactor_tuple_reduction_keeps_the_first_argmax():
    def first_max(a, b):
        take_b = (b[1] > a[1]) | ((b[1] == a[1]) & (b[0] < a[0]))
        return pa.select(take_b, b[0], a[0]), pa.select(take_b, b[1], a[1])

    argmax = pa.comm_reducer(first_max, lambda t0, t1: (pa.const(-1, t0), pa.const(float("-inf"), t1)), "argmax")
    X = pa.placeholder((4, 33), name="X")
    k = pa.reduce_axis((0, 33), name="k")
    idx, val = pa.compute((4,), lambda i: argmax((k, X[i, k]), axis=k), name="A")
    x = np.round(RNG.standard_normal((4, 33)), 0).astype(np.float32)  # ties
    g = rfactor([idx, val], "A", 5)
    for a, b in zip(pa.evaluate(g, {X: x}), pa.evaluate([idx, val], {X: x})):
        assert np.array_equal(a, b)
    assert np.array_equal(pa.evaluate(g, {X: x})[0], np.argmax(x, axis=1))


def test_rfactor_interleaved_partials_read_contiguous_elements():
    # T_rf[i, ri] = sum_ro X[i, ro*8 + ri]: the partials' last axis walks X's last axis with unit stride
    X = pa.placeholder((4, 60), name="X")
    k = pa.reduce_axis((0, 60), name="k")
    T = pa.compute((4,), lambda i: pa.sum(X[i, k], axis=k), name="T")
    assert [op for op in walk_ops(rfactor([T], "T", 8)) if op.name == "T_rf"][0].shape == (4, 8)  # blocked
    g = rfactor([T], "T", 8, interleave=True)
    rf = [op for op in walk_ops(g) if op.name == "T_rf"][0]
    assert rf.shape == (4, 8)
    from polyad.poly.stage import statements_of

    # the guard k < 60 is the statement's domain (4 rows x 60 elements), not a select per lane
    (st,) = statements_of(rf)
    assert st.domain.count_val().to_python() == 4 * 60
    assert "select" not in pa.show(rf.output(0))
    x = RNG.standard_normal((4, 60)).astype(np.float32)
    (part,) = pa.evaluate([rf.output(0)], {X: x})
    ref = np.zeros((4, 8), np.float32)
    for r in range(8):
        ref[:, r] = x[:, r::8].sum(axis=1)  # 60 is not a multiple of 8: the guard drops k >= 60
    np.testing.assert_allclose(part, ref, rtol=1e-5)
    _same([T], g, {X: x})
    # and compiled, the guarded partials (ragged lanes) give the same sums
    from polyad.schedule import Schedule, StageSchedule

    mod = pa.build(g, [X], schedule=Schedule("rows", stages={"T_rf": StageSchedule(tile=(1, 8), vectorize=8)}))
    np.testing.assert_allclose(mod(x)[0], x.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_rfactor_interleave_refuses_tuple_reducers():
    argmax = pa.comm_reducer(lambda a, b: (pa.select(b[1] > a[1], b[0], a[0]), pa.max(a[1], b[1])),
                             lambda t0, t1: (pa.const(-1, t0), pa.const(float("-inf"), t1)), "argmax")
    X = pa.placeholder((4, 33), name="X")
    k = pa.reduce_axis((0, 33), name="k")
    idx, val = pa.compute((4,), lambda i: argmax((k, X[i, k]), axis=k), name="A")
    with pytest.raises(pa.ScheduleError, match="'A'.*interleave"):
        rfactor([idx, val], "A", 4, interleave=True)
    rf = [op for op in walk_ops(rfactor([idx, val], "A", 4)) if op.name == "A_rf"][0]
    assert rf.shape == (4, 9)  # blocked by default: the first argmax stays first


def test_rfactor_of_a_simplified_reduction_stage():
    X = pa.placeholder((64, 8), name="X")
    W = pa.placeholder((5, 8), name="W")
    Y = pa.nn.dense(X, W)
    H = pa.placeholder(Y.shape, name="H")
    (dW,) = pa.differentiate(Y, [W], head=H)
    g = rfactor([dW], dW.op.name, 8)
    assert len(_stages(g)) == len(_stages([dW])) + 1
    feeds = {X: RNG.standard_normal((64, 8)).astype(np.float32), H: RNG.standard_normal((64, 5)).astype(np.float32)}
    _same([dW], g, feeds, rtol=1e-4)


def test_rfactor_errors_name_the_stage():
    X = pa.placeholder((4, 10), name="X")
    k = pa.reduce_axis((0, 10), name="k")
    T = pa.compute((4,), lambda i: pa.sum(X[i, k], axis=k), name="T")
    E = pa.compute((4,), lambda i: T[i] * 2.0, name="E")
    with pytest.raises(pa.ScheduleError, match="stage 'E' is not a reduction"):
        rfactor([E], "E", 2)
    with pytest.raises(pa.ScheduleError, match="no stage 'Z'"):
        rfactor([E], "Z", 2)
    with pytest.raises(pa.ScheduleError, match="stage 'T'.*extent 10; the factor 11 must not be larger"):
        rfactor([E], "T", 11)
    with pytest.raises(pa.ScheduleError, match="stage 'T'.*no reduction axis 'q'"):
        rfactor([E], "T", 2, axis="q")


# ------------------------------------------------------------------------------------ pad_reads

def _conv_dx(size=14, stride=1, dilation=1, padding=0):
    X = pa.placeholder((2, 3, size, size), name="X")
    W = pa.placeholder((4, 3, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=stride, padding=padding, dilation=dilation)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    feeds = {W: RNG.standard_normal(W.shape).astype(np.float32), H: RNG.standard_normal(H.shape).astype(np.float32)}
    return dX, H, W, feeds


def test_pad_reads_turns_a_clipped_conv_data_gradient_into_a_box_sum_on_a_padded_head():
    """dX = sum over { [n, c, h, w, f, rh, rw] : 0 <= h - rh < 12 and 0 <= w - rw < 12 } (the box clipped by
    H's bounds) becomes a box sum reading H_pad[n, f, h - rh + 2, w - rw + 2] (H zero-padded by 2)."""
    from polyad.schedule.graph import pad_reads, paddable, uniquely_named

    dX, H, W, feeds = _conv_dx()
    (g,) = pad_reads(uniquely_named([dX]), dX.name)
    assert isinstance(g.op, ComputeOp) and g.op.tag == "padded" and g.shape == dX.shape
    red = g.op.body[0]
    assert red.condition.value is True and [a.extent for a in red.axis] == [4, 3, 3]  # a box, no guard
    (hp,) = [t for t in g.op.input_tensors if t.name == "H_pad"]
    assert hp.shape == (2, 4, 16, 16) and len(hp.op.statements) == 2  # the copy and the zero border
    assert paddable(hp.op) is None and paddable(g.op) is None
    _same([g], [dX], feeds)


def test_pad_reads_keeps_dilated_gradients_and_refuses_strided_ones():
    from polyad.schedule.graph import pad_reads, paddable, uniquely_named

    dX, H, W, feeds = _conv_dx(size=12, dilation=2, padding=1)
    outs = uniquely_named([dX])
    padded = [op.name for op in walk_ops(outs) if not isinstance(op, PlaceholderOp) and paddable(op)]
    assert padded  # the padded input's gradient: clipped by H's bounds only
    _same(pad_reads(outs, padded[0]), [dX], feeds)
    dS, *_ = _conv_dx(size=13, stride=3)
    outs = uniquely_named([dS])
    assert not [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp) and paddable(op)]  # divisibility
    with pytest.raises(pa.ScheduleError, match=f"pad_reads: stage '{dS.name}' is not a sum"):
        pad_reads(outs, dS.name)


def test_pad_reads_runs_a_strided_data_gradient_over_its_phases_boxes():
    """A 3x3/2/1 conv2d's data gradient (after the crop is folded in) sums over
    ``{ [n, c, h, w, f, y, x] : h - 1 <= 2y <= h + 1 and w - 1 <= 2x <= w + 1 and 0 <= y, x < 7 and ... }``: its
    box is no use (it is clipped by W's taps too), but each stride phase is a box clipped by H's last row and
    column.  Over the phases' boxes (``y, x <= 7``) on H zero-padded by one row and column, every phase is a box,
    the statement and its values the same."""
    from polyad.poly.stage import PolyOp
    from polyad.schedule.graph import fold, foldable, pad_reads, paddable, stage_ops, uniquely_named
    from polyad.schedule.phase import phase_domain, phase_strides

    dX, H, W, feeds = _conv_dx(size=14, stride=2, padding=1)
    outs = uniquely_named([dX])
    (crop,) = [op.name for op in stage_ops(outs)[0] if foldable(outs, op) is None]
    outs = fold(outs, crop)
    op = stage_ops(outs)[1][crop]
    found = paddable(op)
    assert found.box is None and found.load.tensor is H
    assert found.domain.is_equal(isl.Set(
        "{ [n, c, h, w, f, y, x] : 0 <= n < 2 and 0 <= c < 3 and 0 <= h < 14 and 0 <= w < 14 and 0 <= f < 4 "
        "and h - 1 <= 2y <= h + 1 and w - 1 <= 2x <= w + 1 }"))  # y, x <= 7: one past H's end
    (g,) = pad_reads(outs, crop)
    assert isinstance(g.op, PolyOp) and len(g.op.statements) == 1 and phase_strides(g.op) == (1, 1, 2, 2)
    (hp,) = [t for t in g.op.input_tensors if t.name == "H_pad"]
    assert hp.shape == (2, 4, 8, 8)
    assert paddable(g.op).load.tensor is W  # only its box clipped by W's taps is left: 28x the terms, refused
    st = g.op.statements[0]
    for p in ((0, 0), (0, 1), (1, 0), (1, 1)):
        Dp, _ = phase_domain(st.domain, 4, (1, 1, 2, 2), (0, 0) + p)
        assert Dp.is_box()  # each phase a box (counted from its q)
    _same([g], [dX], feeds)


def test_a_phase_isl_cannot_bound_leaves_the_sum_clipped(monkeypatch):
    """paddable is a heuristic: where isl fails on a phase's boxes, the strided sum stays as it is (no padding over
    its phases), and no isl error reaches the build."""
    import polyad.schedule.phase as phase_mod
    from polyad.schedule.graph import fold, foldable, paddable, stage_ops, uniquely_named

    def fails(*args):
        raise isl.Error("some divs are unknown")

    def folded():  # a new graph each time: paddable's answer is remembered per op
        dX, *_ = _conv_dx(size=14, stride=2, padding=1)
        outs = uniquely_named([dX])
        (crop,) = [op.name for op in stage_ops(outs)[0] if foldable(outs, op) is None]
        return stage_ops(fold(outs, crop))[1][crop]

    assert paddable(folded()).box is None
    monkeypatch.setattr(phase_mod, "phase_boxes", fails)
    found = paddable(folded())
    assert found is None or found.box is not None  # W's box, or nothing: never the phases'


def test_auto_pads_a_strided_data_gradient_and_the_build_matches_evaluate(opencl):
    """Auto pads a 3x3/2/1 conv2d's data gradient over its phases' boxes (16 filters: 36 terms a point); built in
    auto's block and phased, it equals pa.evaluate's unpadded gradient."""
    from polyad.schedule import StageSchedule, auto_schedule

    X = pa.placeholder((2, 8, 14, 14), name="X")
    W = pa.placeholder((16, 8, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=2, padding=1)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    s = auto_schedule([dX], device=ZEN5)
    (n,) = s.pad
    assert any(f"pad_reads {n}" in w and "over its phases' boxes" in w for w in s.notes)
    feeds = {W: RNG.standard_normal(W.shape).astype(np.float32), H: RNG.standard_normal(H.shape).astype(np.float32)}
    want = pa.evaluate(dX, feeds)
    phased = dataclasses.replace(s, stages={**s.stages, n: StageSchedule(phase=(1, 1, 2, 2), tile=(1, 4, 2, 4),
                                                                         vectorize=4)})
    for sched in (s, phased):  # auto's block at this shape, and phases of 7 in moved float4 tiles
        got = pa.build(dX, [W, H], schedule=sched)(feeds[W], feeds[H])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_auto_pads_a_conv_data_gradient_and_the_build_matches_evaluate():
    from polyad.schedule import Schedule, StageSchedule, auto_schedule

    dX, H, W, feeds = _conv_dx(size=16)
    s = auto_schedule([dX], device=ZEN5)
    assert s.pad == {dX.name} and any("pad_reads" in n for n in s.notes)
    assert s.stages[dX.name] == StageSchedule(tile=(1, 1, 2, 16), vectorize=16)  # two whole rows as vectors
    assert Schedule.from_json(s.to_json()) == s and "pad_reads " + dX.name in s.describe()
    got = pa.build(dX, [W, H])(feeds[W], feeds[H])
    np.testing.assert_allclose(got, pa.evaluate(dX, feeds), rtol=1e-4, atol=1e-4)
    with pytest.raises(pa.ScheduleError, match="pad: there is no stage 'nope'"):
        pa.build(dX, [W, H], schedule=Schedule(pad={"nope"}))


def test_candidate_space_of_a_padded_gradient_holds_the_auto_choice():
    from polyad.schedule import auto_schedule, candidate_space

    dX, *_ = _conv_dx(size=16)
    s = auto_schedule([dX], device=ZEN5)
    space = candidate_space([dX], schedule=s, device=ZEN5)
    assert s.stages[dX.name] in space.stages[dX.name] and "H_pad" in space.stages
