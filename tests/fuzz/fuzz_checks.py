"""The fuzzer's oracles: finite differences for gradients, pa.evaluate for built OpenCL.

``check_gradient(spec, seed)``: ``pa.differentiate(Y, inputs, H)`` evaluated in float64 against central
differences of ``sum(H * Y)``.  Points where the function is not differentiable (relu/abs/max/min kinks,
ties of a max, floor/round/sign jumps, a data-dependent ``where``) are recognised per element, where the
forward and backward one-sided differences disagree, and left out there.

``check_opencl(spec, seed, schedules)``: the forward and the gradients built together in one module per
schedule, run, and compared with ``pa.evaluate`` of the float64 twin of the graph on the same numbers.
"""

import numpy as np
import pytest

import polyad as pa
from fuzz_graphs import FLOATS, make, random_array

EPS = 1e-6


def _feed(ctx, arrays):
    return {t: a for (t, _), a in zip(ctx.inputs, arrays)}


def expect_rejection(spec):
    """A spec whose last step polyad rejects: the error is a PolyadError (never a raw numpy/isl one)."""
    with pytest.raises(pa.PolyadError):
        make(spec, "float64" if spec.dtype in FLOATS else None)


def check_gradient(spec, seed=0, rtol=1e-4, atol=1e-5):
    if spec.expect_error:
        return expect_rejection(spec)
    if spec.dtype not in FLOATS:
        Y, ctx = make(spec)
        H = pa.placeholder(Y.shape, dtype=Y.dtype, name="H")
        with pytest.raises(pa.DtypeError):  # integer outputs have no gradient: a clear error
            pa.differentiate(Y, [ctx.inputs[0][0]], H)
        return
    Y, ctx = make(spec, "float64")
    wrt = ctx.float_inputs()
    H = pa.placeholder(Y.shape, dtype="float64", name="H")
    grads = list(pa.differentiate(Y, wrt, H))
    rng = np.random.default_rng(seed)
    arrays = ctx.data(seed)
    h = random_array(rng, Y.shape, "float64")
    feed = _feed(ctx, arrays)
    got = pa.evaluate(grads, {**feed, H: h})
    # the unsimplified gradients (optimize=False: no isl) give the same numbers
    plain = pa.evaluate(list(pa.differentiate(Y, wrt, H, optimize=False)), {**feed, H: h})
    for x, g, p in zip(wrt, got, plain):
        np.testing.assert_allclose(g, p, rtol=1e-9, atol=1e-12, err_msg=f"d/d{x.name}: optimize=True vs False\n{spec!r}")

    def f(fd):
        return float(np.sum(h * pa.evaluate([Y], fd)[0]))

    f0 = f(feed)
    for x, g in zip(wrt, got):
        assert g.shape == x.shape, (x.name, g.shape, x.shape)
        base = feed[x]
        fp, fm = np.empty(base.shape), np.empty(base.shape)
        for idx in np.ndindex(base.shape):
            for sign, out in ((1, fp), (-1, fm)):
                xs = base.copy()
                xs[idx] += sign * EPS
                out[idx] = f({**feed, x: xs})
        central = (fp - fm) / (2 * EPS)
        one_sided_gap = np.abs((fp - f0) - (f0 - fm)) / EPS
        # at a kink the one-sided slopes differ by O(1); on a smooth function by EPS * f'' (plus rounding)
        smooth = one_sided_gap <= 1e-4 * (1 + np.abs(central)) + 1e-8 * max(1.0, abs(f0))
        scale = max(1.0, float(np.abs(central[smooth]).max(initial=0.0)))
        bad = smooth & ~np.isclose(g, central, rtol=rtol, atol=atol * scale)
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(
                f"d sum(H*Y)/d {x.name}{list(idx)}: differentiate gives {g[idx]!r}, finite differences "
                f"{central[idx]!r} ({int(bad.sum())} of {int(smooth.sum())} smooth points differ)\n"
                f"{spec!r}\n{pa.show(grads)}"
            )
    return grads


def reference(spec, seed):
    """(outputs, inputs, arrays in spec.dtype, float64 reference values) of the forward and its gradients."""
    Y, ctx = make(spec)
    floats = spec.dtype in FLOATS
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name="H") if floats else None
    outs = [Y] + (list(pa.differentiate(Y, ctx.float_inputs(), H)) if floats else [])
    ins = [t for t, _ in ctx.inputs] + ([H] if floats else [])
    rng = np.random.default_rng(seed)
    arrays = ctx.data(seed) + ([random_array(rng, Y.shape, Y.dtype)] if floats else [])
    if spec.dtype == "float32":  # the oracle: the float64 twin on the same (float32-exact) numbers
        Y64, ctx64 = make(spec, "float64")
        H64 = pa.placeholder(Y64.shape, dtype="float64", name="H")
        outs64 = [Y64] + list(pa.differentiate(Y64, ctx64.float_inputs(), H64))
        ins64 = [t for t, _ in ctx64.inputs] + [H64]
        ref = pa.evaluate(outs64, dict(zip(ins64, [a.astype(np.float64) if a.dtype == np.float32 else a
                                                   for a in arrays])))
    else:
        ref = pa.evaluate(outs, dict(zip(ins, arrays)))
    return outs, ins, arrays, ref


def compare(got, ref, dtype, what):
    for k, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape, (what, k, g.shape, r.shape)
        if dtype not in FLOATS:
            np.testing.assert_array_equal(g, r, err_msg=f"{what}: output {k}")
            continue
        tol = 2e-4 if dtype == "float32" else 1e-9
        scale = max(1.0, float(np.abs(r).max(initial=0.0)))
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * scale, err_msg=f"{what}: output {k}")


def random_schedule(draw, outs):
    """A schedule drawn from ``candidate_space``: some inlines and rfactors, then a candidate per stage."""
    from hypothesis import strategies as st

    from polyad.schedule import Schedule, candidate_space

    space = candidate_space(outs)
    inline = frozenset(n for n in space.inline if draw(st.booleans()))
    rfactor = {}
    for n, fs in sorted(space.rfactor.items()):
        f = draw(st.sampled_from([None] + list(fs)))
        if f is not None:
            rfactor[n] = f
    graph = Schedule("graph", inline=inline, rfactor=rfactor)
    stages = {}
    for n, cands in sorted(candidate_space(outs, schedule=graph).stages.items()):
        if cands and draw(st.booleans()):
            stages[n] = draw(st.sampled_from(cands))
    return Schedule("fuzz", stages=stages, inline=inline, rfactor=rfactor)


def check_opencl(spec, seed=0, schedules=("naive", "auto")):
    """Build forward and gradients under each schedule (a name, a Schedule, or a function outs -> Schedule)."""
    outs, ins, arrays, ref = reference(spec, seed)
    for sched in schedules:
        if callable(sched):
            sched = sched(outs)
        what = f"schedule {sched if isinstance(sched, str) else sched.to_json()}\n{spec!r}"
        mod = pa.build(outs, ins, schedule=sched)
        got = mod(*arrays)
        got = got if isinstance(got, list) else [got]
        compare(got, ref, spec.dtype, what)
