"""Deep graphs build: bounded expressions in the source, capped inlining, built == pa.evaluate.

A 2000-deep elementwise chain inlined into one expression nested 4000 brackets deep (clang
rejects more than 256: the build fell back to the naive schedule, one kernel per stage, a minute).
"""

import warnings

import numpy as np
import pytest

import polyad as pa
from polyad.codegen.opencl import MAX_EXPR_NESTING, nesting
from polyad.pipeline import generate
from polyad.schedule import DeviceModel, Schedule, StageSchedule, auto_schedule, prepare
from polyad.schedule.auto import INLINE_MAX_DEPTH, INLINE_MAX_SIZE
from polyad.te.expr import Load
from polyad.te.tensor import ComputeOp, PlaceholderOp, walk_ops
from polyad.te.visit import post_order

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")


def _chain(n, shape=(64,), body=lambda y, ix: y[ix] * 1.001 + 0.001):
    X = pa.placeholder(shape, name="X")
    Y = X
    for i in range(n):
        Y = pa.compute(shape, lambda *ix, Y=Y: body(Y, ix), name=f"Y{i}")
    return X, Y


def _quadratic(y, ix):
    # the gradient reads every forward stage again: d Y[i+1] / d Y[i] = 1 + 0.0004 * Y[i]
    return y[ix] + y[ix] * y[ix] * 0.0002


def _shifted(y, ix):
    # a read that is valid only under its guard: X[r, j - k] deep inside k nested selects
    r, j = ix
    return pa.select(j >= 1, y[r, j - 1] * 1.001, pa.const(0.5)) + 0.001


def _check_nesting(src):
    deepest = max(nesting(line) for line in src.splitlines())
    assert deepest <= MAX_EXPR_NESTING, f"a statement nests {deepest} brackets deep"
    # the braces of the kernel, its loops and blocks on top: still far below clang's 256
    assert nesting(src) <= MAX_EXPR_NESTING + 16


def _inline_all(Y, **stages):
    names = [op.name for op in walk_ops([Y]) if not isinstance(op, PlaceholderOp) and op is not Y.op]
    return Schedule("inline-all", inline=frozenset(names), stages=stages)


@pytest.mark.parametrize("vec", [1, 4])
def test_a_1000_deep_inlined_chain_prints_as_short_statements(vec):
    X, Y = _chain(1000)
    stages = {"Y999": StageSchedule(tile=(16,), vectorize=vec)} if vec > 1 else {}
    prog = generate(Y, [X], _inline_all(Y, **stages))
    n_kernels = len(prog.kernels)
    assert n_kernels == 1  # one expression of 2000 operations, as the schedule asks
    _check_nesting(prog.source)
    n_temps = prog.source.count("const float")
    assert n_temps >= 2000 // 40  # bound to temporaries along the way (two operations: a bracket each)


@pytest.mark.parametrize("vec", [1, 4])
def test_a_deep_conditional_chain_is_bound_with_clamped_reads(vec):
    X, Y = _chain(150, (4, 64), _shifted)
    stages = {"Y149": StageSchedule(tile=(2, 8), vectorize=vec)} if vec > 1 else {}
    src = generate(Y, [X], _inline_all(Y, **stages)).source
    _check_nesting(src)
    assert "min(max(" in src  # the bound conditional reads of X are clamped into X


def _expression_measure(op):
    """(depth, size) in operations of a built stage's expression, as codegen gets it."""
    roots = op.body if isinstance(op, ComputeOp) else tuple(v for st in op.statements for v in st.values)
    depth, size = {}, 0
    for n in post_order(tuple(roots)):
        kids = n.children()
        d = max((depth[id(c)] for c in kids), default=0)
        if kids or isinstance(n, Load):
            d, size = d + 1, size + 1
        depth[id(n)] = d
    return max(depth[id(r)] for r in roots), size


@pytest.mark.parametrize("what", ["forward", "gradient"])
def test_auto_caps_the_expressions_it_inlines(what):
    X, Y = _chain(2000, body=_quadratic)
    outs = [Y]
    if what == "gradient":
        H = pa.placeholder(Y.shape, name="H")
        outs = list(pa.differentiate(Y, [X], H))
    sched = auto_schedule(outs, device=ZEN5)
    g, _ = prepare(outs, sched)
    stages = [op for op in walk_ops(g) if not isinstance(op, PlaceholderOp)]
    for op in stages:
        d, s = _expression_measure(op)
        assert d <= INLINE_MAX_DEPTH and s <= INLINE_MAX_SIZE, (op.name, d, s)
    # and not cut finer than needed: a kernel every few hundred operations, not every stage
    # (3 operations per forward stage, about 8 per forward and gradient stage pair)
    n_stages, ops = len(stages), (3 if what == "forward" else 8) * 2000
    assert n_stages <= 4 * ops // INLINE_MAX_DEPTH
    assert any(n.startswith("materialise") and "caps" in n for n in sched.notes)


@pytest.mark.parametrize("body", [None, _quadratic], ids=["affine", "quadratic"])
@pytest.mark.parametrize("what", ["forward", "gradient"])
@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_a_2000_deep_chain_builds_with_auto_and_equals_evaluate(what, body):
    if what == "gradient" and body is _quadratic:
        n = 600  # its gradient recomputes the forward segments: more code for PoCL per stage
    else:
        n = 2000
    X, Y = _chain(n, body=body or (lambda y, ix: y[ix] * 1.001 + 0.001))
    ins, outs = [X], Y
    if what == "gradient":
        H = pa.placeholder(Y.shape, name="H")
        (outs,) = pa.differentiate(Y, [X], H)
        ins = [X, H]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the naive schedule (it warns)
        mod = pa.build(outs, ins, schedule="auto")
    # a kernel every few hundred operations (3 per forward stage, about 8 per gradient stage),
    # not one per stage as the naive fallback had
    n_kernels, ops = len(mod.program.kernels), (3 if what == "forward" else 8) * n
    assert n_kernels <= 4 * ops // INLINE_MAX_DEPTH + 4
    rng = np.random.default_rng(3)
    feed = {t: rng.random(t.shape).astype("float32") for t in ins}
    got = mod(*[feed[t] for t in ins])
    ref = pa.evaluate(outs, feed)
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("vec", [1, 4])
@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_a_deep_conditional_chain_built_equals_evaluate(vec):
    X, Y = _chain(150, (4, 64), _shifted)
    stages = {"Y149": StageSchedule(tile=(2, 8), vectorize=vec)} if vec > 1 else {}
    mod = pa.build(Y, [X], schedule=_inline_all(Y, **stages))
    x = np.random.default_rng(5).random((4, 64)).astype("float32")
    np.testing.assert_allclose(mod(x), pa.evaluate(Y, {X: x}), rtol=1e-5, atol=1e-6)


def test_chained_selects_printed_lane_by_lane_stay_linear():
    # a select's lanes were printed before it was bound to a vector temporary, and every user of it then repeated
    # its whole text: 12 chained select stages (inlined by auto) made 26.7 MB of source and a 35 s build
    X = pa.placeholder((64, 64), name="X")
    T = X
    for s in range(12):
        T = pa.compute((64, 64), lambda i, j, T=T, s=s: pa.select(T[i, j] > 0.01 * s, T[i, j] * 0.5, T[i, j] + 0.1),
                       name=f"st{s}")
    mod = pa.build(T, [X], schedule="auto")
    assert len(mod.source) < 50000
    x = np.random.default_rng(8).standard_normal((64, 64)).astype("float32")
    np.testing.assert_allclose(mod(x), pa.evaluate(T, {X: x}), rtol=1e-6)
