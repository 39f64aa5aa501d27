"""Property: random legal schedules (rfactor, inline, tile, vectorize, unroll, grid) of random small
gradients build to the values pa.evaluate gives."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyad as pa
from polyad.schedule import Schedule, StageSchedule, prepare
from polyad.schedule.graph import _reduction_form, inlinable, stage_ops, uniquely_named
from polyad.errors import ScheduleError


def _forward(kind, X, W):
    if kind == "dense_relu":
        return pa.nn.relu(pa.nn.dense(X, W))
    if kind == "tanh_sum":
        return pa.ops.sum(pa.nn.tanh(X) * X, axis=1)
    if kind == "softmax":
        return pa.nn.softmax(pa.nn.dense(X, W))
    if kind == "transpose_mul":
        return pa.ops.transpose(X, (1, 0)) * 2.0 + pa.ops.exp(pa.ops.transpose(X, (1, 0)))
    raise AssertionError(kind)


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["dense_relu", "tanh_sum", "softmax", "transpose_mul"]))
    a, b, c = draw(st.integers(1, 7)), draw(st.integers(2, 13)), draw(st.integers(1, 9))
    X = pa.placeholder((a, b), name="X")
    W = pa.placeholder((c, b), name="W")
    Y = _forward(kind, X, W)
    H = pa.placeholder(Y.shape, name="H")
    wrt = [X, W] if kind in ("dense_relu", "softmax") else [X]
    grads = uniquely_named(list(pa.differentiate(Y, wrt, head=H)))
    ins = [X, W, H] if len(wrt) == 2 else [X, H]
    # graph level: rfactor some reductions, inline some stages of the result
    ops, _ = stage_ops(grads)
    rf = {}
    for op in ops:
        try:
            _, _, red = _reduction_form(op)
        except ScheduleError:
            continue
        ext = max(r.extent for r in red)
        if ext >= 3 and draw(st.booleans()):
            rf[op.name] = draw(st.integers(2, ext - 1))
    g, _ = prepare(grads, Schedule(rfactor=rf))
    ops, _ = stage_ops(g)
    outs = {id(t.op) for t in g}
    inl = {op.name for op in ops if id(op) not in outs and inlinable(op) is None and draw(st.booleans())}
    stages = {}
    for op in ops:
        if op.name in inl or not op.shape or not draw(st.booleans()):
            continue
        tile = tuple(draw(st.sampled_from([1, 2, 3, 4, 8])) for _ in op.shape)
        vec = draw(st.sampled_from([v for v in (1, 2, 4, 8) if tile[-1] % v == 0]))
        stages[op.name] = StageSchedule(
            tile=tile, vectorize=vec, unroll=draw(st.sampled_from([1, 2, 3, 4])), grid_dims=draw(st.integers(1, 3)))
    return grads, ins, Schedule("random", stages=stages, inline=frozenset(inl), rfactor=rf)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.integers(0, 2**31 - 1))
def test_random_legal_schedules_match_evaluate(case, seed):
    grads, ins, sched = case
    sched = Schedule.from_json(sched.to_json())  # as data
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in ins]
    ref = pa.evaluate(grads, dict(zip(ins, arrays)))
    got = pa.build(grads, ins, schedule=sched)(*arrays)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(r).max())))
