"""Stride-phase decomposition (``StageSchedule.phase``, codegen/phase.py, schedule/phase.py).

A phase stride ``s`` on an output dimension runs it as ``x = s*q + p``, one dense sub-stage per
phase ``p``: the phased build must equal ``pa.evaluate`` for any stage (strided and dilated
convolutions' gradients, pools, hand-made polyhedral stages with zero fills and accumulation), the
field must survive JSON and be checked against the graph, ``phase_strides`` must find the strides
from isl, and the phased kernels' loops must have no floor division in their bounds.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

import polyad as pa
from polyad.errors import ScheduleError
from polyad.schedule import Schedule, StageSchedule, prepare, validate
from polyad.schedule.graph import uniquely_named
from polyad.schedule.phase import phase_strides
from polyad.te.tensor import PlaceholderOp, walk_ops

from codegen_polyops import band_fill_accumulate, strided_conv_dx, triangular_cumsum

opencl = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def _stages(outs):
    return [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]


def _by_name(outs):
    return {op.name: op for op in _stages(uniquely_named(outs))}


def _conv_grads(n=1, c_in=2, size=(7, 7), c_out=2, k=(3, 3), stride=1, pad=0, dil=1, wrt=("X", "W")):
    X = pa.placeholder((n, c_in) + tuple(size), name="X")
    W = pa.placeholder((c_out, c_in) + tuple(k), name="W")
    Y = pa.nn.conv2d(X, W, strides=stride, padding=pad, dilation=dil)
    H = pa.placeholder(Y.shape, name="H")
    ph = {"X": X, "W": W}
    return list(pa.differentiate(Y, [ph[w] for w in wrt], head=H)), [X, W, H]


def _pool_grad(kind, size=(8, 8)):
    X = pa.placeholder((1, 2) + tuple(size), name="X")
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, kind)
    H = pa.placeholder(Y.shape, name="H")
    return list(pa.differentiate(Y, [X], head=H)), [X, H]


def _phased_stages(outs):
    """name -> (op, strides) of the prepared graph's stages phase_strides finds strides in."""
    g, _ = prepare(outs, "naive")
    return {op.name: (op, phase_strides(op)) for op in _stages(g) if phase_strides(op)}


def _check(outs, ins, sched, seed=0, tol=1e-4):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in ins]
    mod = pa.build(outs, ins, schedule=sched)
    got = mod(*arrays)
    got = got if isinstance(got, list) else [got]
    want = pa.evaluate(outs, dict(zip(ins, arrays)))
    want = want if isinstance(want, list) else [want]
    for t, g, w in zip(outs, got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{t.name}\n{sched.describe()}\n{mod.source}")
    return mod


def _q(shape, phase):
    return [-(-n // s) for n, s in zip(shape, phase)]


def _fit(shape, phase, tile, vec):
    """``tile`` (a pattern over the last dimensions) clipped to one phase's points, and a vector width dividing it."""
    if tile is None:
        return None, 1
    q = _q(shape, phase)
    t = [1] * (len(shape) - len(tile)) + list(tile)
    t = [max(1, min(a, b)) for a, b in zip(t, q)]
    while vec > 1 and t[-1] % vec:
        vec //= 2
    return tuple(t), vec


# -- (a) random small convolution gradients, phased, against the numpy oracle ------------------------------
_TILES = [(None, 1), ((1, 2), 2), ((2, 4), 4), ((2, 2, 4), 4), ((1, 3), 1)]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    stride=hst.tuples(hst.integers(1, 3), hst.integers(1, 3)),
    dil=hst.tuples(hst.integers(1, 3), hst.integers(1, 3)),
    k=hst.tuples(hst.integers(1, 3), hst.integers(2, 3)),
    pad_frac=hst.tuples(hst.floats(0, 0.99), hst.floats(0, 0.99)),
    size=hst.tuples(hst.sampled_from([7, 9, 11]), hst.sampled_from([7, 9])),
    tiling=hst.sampled_from(range(len(_TILES))),
)
def test_phased_conv2d_gradients_equal_evaluate(stride, dil, k, pad_frac, size, tiling):
    pad = tuple(int(f * kk) for f, kk in zip(pad_frac, k))  # 0 .. k-1
    if any(sz + 2 * p < d * (kk - 1) + 1 for sz, p, d, kk in zip(size, pad, dil, k)):
        return  # no output
    outs, ins = _conv_grads(size=size, k=k, stride=stride, pad=pad, dil=dil)
    g, _ = prepare(outs, "naive")
    stages = {}
    for op in _stages(g):
        ph = phase_strides(op)
        if ph is None and len(op.shape) == 4 and any("H" == t.name for t in op.input_tensors):
            ph = (1, 1, min(2, op.shape[2]), 1)  # a phase is legal on any stage: phase a stride-1 gradient too
        if ph is None:
            continue
        tile, vec = _fit(op.shape, ph, *_TILES[tiling])
        stages[op.name] = StageSchedule(phase=ph, tile=tile, vectorize=vec)
    assert stages
    _check(outs, ins, Schedule("phased", stages=stages))


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("phase, tile, vec", [
    ((1, 1, 2, 2), None, 1), ((1, 1, 2, 2), (1, 1, 2, 4), 4), ((1, 1, 2, 1), (1, 1, 1, 8), 4), ((1, 1, 3, 2), (1, 2, 1, 2), 2),
])
def test_phased_pool_gradients_equal_evaluate(kind, phase, tile, vec):
    outs, ins = _pool_grad(kind, size=(9, 10))
    (name, _), = _phased_stages(outs).items()
    _check(outs, ins, Schedule("phased", stages={name: StageSchedule(phase=phase, tile=tile, vectorize=vec)}))


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_phased_argmax_stage_keeps_the_first_maximum():
    """A tuple reduction (max-pool's argmax) phased: the reduction order, hence ties, is kept."""
    X = pa.placeholder((1, 2, 8, 10), name="X")
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "max")
    H = pa.placeholder(Y.shape, name="H")
    outs = list(pa.differentiate(Y, [X], head=H))
    names = _by_name(outs)
    arg = next(n for n in names if "argmax" in n)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, X.shape).astype("float32")  # many ties
    h = rng.standard_normal(H.shape).astype("float32")
    sched = Schedule("phased", stages={arg: StageSchedule(phase=(1, 1, 2, 3), tile=(1, 1, 2, 2), vectorize=2)})
    got = pa.build(outs, [X, H], schedule=sched)(x, h)
    got = got[0] if isinstance(got, list) else got
    np.testing.assert_array_equal(got, pa.evaluate(outs[0], {X: x, H: h}))


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("make, phase, tile, vec", [
    (lambda: band_fill_accumulate(9, 13), (2, 3), (2, 4), 2),  # zero fill + assignment + accumulating sum
    (lambda: band_fill_accumulate(9, 13), (3, 1), None, 1),
    (lambda: strided_conv_dx(), (3,), (4,), 2),
    (lambda: strided_conv_dx(29, 5, 2, 2), (2,), (4,), 4),
    (lambda: triangular_cumsum(11), (3,), (2,), 2),  # a triangle: no window to skew by
])
def test_phased_polyops_equal_their_reference(make, phase, tile, vec):
    T, ins, ref = make()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    sched = Schedule("phased", stages={T.op.name: StageSchedule(phase=phase, tile=tile, vectorize=vec)})
    mod = pa.build(T, ins, schedule=sched)
    got = mod(*arrays)
    got = got[0] if isinstance(got, list) else got
    np.testing.assert_allclose(got, ref(*arrays), rtol=1e-5, atol=1e-5, err_msg=mod.source)


# -- (b) the field as data: JSON, describe, checks ---------------------------------------------------------
def test_phase_round_trips_through_json_and_old_json_reads_as_none():
    ss = StageSchedule(tile=(1, 2, 1, 8), vectorize=8, phase=(1, 1, 3, 3))
    s = Schedule("mine", stages={"dX": ss})
    text = s.to_json()
    assert '"phase": [1, 1, 3, 3]' in text
    back = Schedule.from_json(text)
    assert back == s and back.stages["dX"].phase == (1, 1, 3, 3)
    assert StageSchedule.from_dict(ss.to_dict()) == ss
    # a schedule without phases writes the JSON it wrote before the field existed, and reads back as None
    plain = Schedule("mine", stages={"dX": StageSchedule(tile=(1, 8), vectorize=8)})
    assert "phase" not in plain.to_json()
    old = ('{"format": "polyad-schedule", "version": 1, "stages": {"dX": {"grid_dims": 3, "local_size": null, '
           '"tile": [1, 8], "unroll": 1, "vectorize": 8}}}')
    assert Schedule.from_json(old).stages["dX"].phase is None
    assert "phase 1x1x3x3" in s.describe()


@pytest.mark.parametrize("bad", [(0, 3), (1, -2), (1.5, 2), "33", 3, (True, 2)])
def test_phase_values_are_positive_int_lists(bad):
    with pytest.raises(ScheduleError, match="phase"):
        StageSchedule(phase=bad)
    with pytest.raises(ScheduleError, match="stage 'T'"):
        Schedule.from_json('{"format": "polyad-schedule", "version": 1, "stages": {"T": {"phase": %s}}}'
                           % (__import__("json").dumps(list(bad) if isinstance(bad, tuple) else bad)))


def test_phase_is_checked_against_the_graph():
    outs, _ = _conv_grads(size=(11, 11), k=(5, 5), stride=3, pad=1, wrt=("X",))
    names = _by_name(outs)
    dx = next(n for n, (op, s) in _phased_stages(outs).items())
    shape = names[dx].shape  # (1, 2, 13, 13)
    validate(uniquely_named(outs), Schedule("ok", stages={dx: StageSchedule(phase=(1, 1, 3, 3), tile=(1, 2, 5, 5))}))
    cases = [
        (StageSchedule(phase=(3, 3)), rf"stage '{dx}': phase \(3, 3\) has 2 strides .* 4 output"),
        (StageSchedule(phase=(1, 3, 3, 3)), rf"stage '{dx}': phase stride 3 on dimension 1 .* exceeds its extent 2"),
        (StageSchedule(phase=(1, 1, 3, 3), tile=(1, 1, 1, 6)),
         rf"stage '{dx}': tile 6 on dimension 3 .* exceeds the 5 points of one phase"),
        (StageSchedule(phase=(1, 1, 3, 3), tile=(1, 1, 1, 4), vectorize=8), rf"stage '{dx}': vectorize 8"),
    ]
    assert shape[2] == 13
    for ss, msg in cases:
        with pytest.raises(ScheduleError, match=msg):
            validate(uniquely_named(outs), Schedule("bad", stages={dx: ss}))


# -- (c) phase_strides reads the strides off isl -----------------------------------------------------------
def _strides_of(outs):
    return {n: s for n, (op, s) in _phased_stages(outs).items()}


def test_phase_strides_of_a_stride3_conv_data_gradient():
    outs, _ = _conv_grads(size=(11, 11), k=(5, 5), stride=3, pad=1)
    assert list(_strides_of(outs).values()) == [(1, 1, 3, 3)]  # dX only; dW reads X[3y + kh]: no division


def test_phase_strides_of_mixed_stride_and_dilation():
    outs, _ = _conv_grads(size=(11, 11), k=(3, 3), stride=(2, 1), pad=1, dil=(1, 3))
    assert list(_strides_of(outs).values()) == [(1, 1, 2, 3)]


def test_phase_strides_of_a_dilated_conv_data_gradient():
    outs, _ = _conv_grads(size=(11, 11), k=(3, 3), stride=1, pad=1, dil=2)
    assert list(_strides_of(outs).values()) == [(1, 1, 2, 2)]


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_phase_strides_of_a_pool_gradient(kind):
    outs, _ = _pool_grad(kind)
    assert list(_strides_of(outs).values()) == [(1, 1, 2, 2)]


def test_phase_strides_none_on_stride1_and_dense():
    outs, _ = _conv_grads(size=(9, 9), k=(3, 3), stride=1, pad=1)
    g, _ = prepare(outs, "naive")
    assert [phase_strides(op) for op in _stages(g)] == [None] * len(_stages(g))
    X, W = pa.placeholder((4, 6), name="X"), pa.placeholder((5, 6), name="W")
    Y = pa.nn.dense(X, W)
    H = pa.placeholder(Y.shape, name="H")
    g, _ = prepare(list(pa.differentiate(Y, [X, W], head=H)), "naive")
    assert all(phase_strides(op) is None for op in _stages(g))


def test_phase_strides_drops_strides_longer_than_the_dimension():
    import islpy as isl

    from codegen_polyops import ivar
    from polyad.poly.stage import PolyOp, Statement
    from polyad.te.reduce import sum_reducer

    def stage(n):  # a 1-d stride-3 data gradient over n points: T[x] = sum_{o : 0 <= x - 3o + 2 < 5} H[o]
        H = pa.placeholder((2,), name="H")
        x, o = ivar("x", n), ivar("o", 2, "reduce")
        dom = isl.Set(f"{{ S0[x, o] : 0 <= x < {n} and 0 <= o < 2 and 0 <= x - 3*o + 2 < 5 }}")
        return PolyOp("T", (n,), ("float32",), (Statement("S0", (x, o), 1, dom, (H[o],), sum_reducer("float32")),))

    assert phase_strides(stage(4)) == (3,)
    assert phase_strides(stage(2)) is None  # 2 points cannot have 3 phases


# -- (d) structure: no floor division in the phased loops' bounds ------------------------------------------
def _for_headers(source, kernel):
    body = source[source.index(f"void {kernel}("):]
    return re.findall(r"for \(([^;]*;[^;]*);", body)


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("tile, vec", [(None, 1), ((1, 2, 2, 4), 4)])
def test_phased_kernel_loops_have_no_division(tile, vec):
    outs, ins = _conv_grads(size=(26, 26), k=(5, 5), stride=3, pad=1, wrt=("X",))
    (dx, (op, ph)), = _phased_stages(outs).items()
    kernel = dx  # the kernel is named after the stage
    naive = pa.build(outs, ins, schedule="naive")
    heads = _for_headers(naive.source, kernel)
    assert any("/" in h or "%" in h for h in heads), heads  # the control: naive bounds divide by 3
    mod = _check(outs, ins, Schedule("phased", stages={dx: StageSchedule(phase=ph, tile=tile, vectorize=vec)}))
    heads = _for_headers(mod.source, kernel)
    assert heads and not any("/" in h or "%" in h for h in heads), heads
    if vec > 1:  # the vector runs over q: H is read as vectors, unit stride
        assert f"vload{vec}(0, H + " in mod.source


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_phases_as_ndrange_slices_equal_evaluate(monkeypatch):
    """The other placement of the phases (tree.PHASE_IN_GRID: one NDRange slice per phase), kept for devices that
    want more work-items, builds the same values (a shape of its own: the program cache does not key the switch)."""
    from polyad.codegen import tree

    monkeypatch.setattr(tree, "PHASE_IN_GRID", True)
    outs, ins = _conv_grads(size=(13, 11), k=(5, 3), stride=(3, 2), pad=(1, 1), wrt=("X",))
    (dx, (op, ph)), = _phased_stages(outs).items()
    assert ph == (1, 1, 3, 2)
    for tile, vec in [(None, 1), ((1, 2, 2, 2), 2)]:
        mod = _check(outs, ins, Schedule("phased", stages={dx: StageSchedule(phase=ph, tile=tile, vectorize=vec)}))
        launch = next(k for k in mod.program.kernels if k.name == dx)
        fused = op.shape[0] * -(-op.shape[1] // (tile or (1, 1))[1])  # batch x channel blocks
        assert launch.global_size[-1] == 6 * fused  # the outermost grid dimension holds the 3 x 2 phases


def test_a_domain_with_an_unknown_division_has_no_strides_from_it_and_builds():
    """The gradient of ``sum(X[3k] * X[(i + 2k) % 5])`` has a statement whose division is of an existential
    (``exists e0 : 5*floor((-1 - i0 + 2e0)/5) <= ...``): isl cannot give it as ``floor(e / den)``, and
    ``pa.build`` raised isl's "some divs are unknown" from the phase strides."""
    X = pa.placeholder((9,), name="X")
    k = pa.reduce_axis((0, 3), "k")
    Y = pa.compute((2,), lambda i: pa.sum(X[3 * k] * X[(i + 2 * k) % 5], axis=k), name="Y")
    H = pa.placeholder((2,), name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    phase_strides(uniquely_named([dX])[0].op)  # raised isl.Error; the unknown division now adds no stride
    x, h = np.random.default_rng(0).random(9, dtype=np.float32), np.ones(2, np.float32)
    np.testing.assert_allclose(pa.build(dX, [X, H])(x, h), pa.evaluate(dX, {X: x, H: h}), rtol=1e-6)
