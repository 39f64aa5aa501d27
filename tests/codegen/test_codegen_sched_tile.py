"""Loop schedules (tile, vectorize, unroll, local_size, grid_dims) build code that equals pa.evaluate.

One OpenCL program per build, small shapes; sizes are chosen not to divide the
tiles so that full tiles (unrolled, vectorized) and partial tiles (exact isl
loops) both run.  The exhaustive grid is marked slow.
"""

import itertools

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import generate, select_device
from polyad.runtime.cache import get_program
from polyad.errors import ScheduleError
from polyad.schedule import Schedule, StageSchedule
from polyad.te.tensor import PlaceholderOp, walk_ops

from codegen_polyops import band_fill_accumulate, strided_conv_dx, triangular_cumsum

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def _rand(t, rng, lo=-2.0, hi=2.0):
    if t.dtype == "bool":
        return rng.random(t.shape) < 0.5
    if t.dtype.startswith("int"):
        return rng.integers(-9, 10, size=t.shape).astype(t.dtype)
    return rng.uniform(lo, hi, size=t.shape).astype(t.dtype)


def _stages(outs):
    return [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]


def _schedule(outs, tile=None, vec=1, unroll=1, **kw):
    """The same loop schedule for every stage; ``tile(rank)`` gives each stage's tile."""
    stages = {}
    for op in _stages(outs):
        n = len(op.shape)
        t = tile(n) if callable(tile) else tile
        v = vec if n and (t is None or t[-1] % vec == 0) else 1
        stages[op.name] = StageSchedule(tile=t, vectorize=v, unroll=unroll, **kw)
    return Schedule("test", stages=stages)


def _check(outs, ins, sched, arrays=None, rtol=2e-5, atol=2e-5, seed=0):
    rng = np.random.default_rng(seed)
    arrays = arrays or [_rand(t, rng) for t in ins]
    mod = pa.build(outs, ins, schedule=sched)
    got = mod(*arrays)
    got = [got] if not isinstance(got, list) else got
    want = pa.evaluate(outs, dict(zip(ins, arrays)))
    want = [want] if not isinstance(want, list) else want
    for t, g, w in zip(outs if isinstance(outs, list) else [outs], got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, t.name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{t.name}\n{mod.source}")
    return mod


# -- workloads -------------------------------------------------------------------------------------
def dense(b=5, n=10, m=7):
    X = pa.placeholder((b, m), name="X")
    W = pa.placeholder((m, n), name="W")
    k = pa.reduce_axis((0, m), name="k")
    T = pa.compute((b, n), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="T")
    return T, [X, W]


def elementwise(n=5, m=11):
    A = pa.placeholder((n, m), name="A")
    B = pa.placeholder((m,), name="B")
    C = pa.placeholder((m, n), name="C")

    def body(i, j):
        a = A[i, j]
        pos = pa.select(j > i, pa.exp(a) * B[j], pa.tanh(a) - a * a)
        return pos + C[j, i] / (pa.abs(B[j]) + 1.0) + pa.cast(j, "float32") - pa.sigmoid(a)

    Y = pa.compute((n, m), body, name="Y")
    return Y, [A, B, C]


def strided_conv(n=2, ci=3, size=9, co=4, k=3, stride=2, pad=1):
    X = pa.placeholder((n, ci, size, size), name="X")
    W = pa.placeholder((co, ci, k, k), name="W")
    so = (size + 2 * pad - k) // stride + 1
    rc = pa.reduce_axis((0, ci), name="rc")
    ky = pa.reduce_axis((0, k), name="ky")
    kx = pa.reduce_axis((0, k), name="kx")

    def body(b, c, y, x):
        iy, ix = stride * y + ky - pad, stride * x + kx - pad
        inside = (iy >= 0) & (iy < size) & (ix >= 0) & (ix < size)
        return pa.sum(pa.select(inside, X[b, rc, iy, ix], pa.const(0.0)) * W[c, rc, ky, kx], axis=[rc, ky, kx])

    Y = pa.compute((n, co, so, so), body, name="Y")
    return Y, [X, W]


# -- dense: full and partial tiles, vectors, unroll ------------------------------------------------
@pytest.mark.parametrize(
    "tile,vec,unroll",
    [((2, 8), 4, 2), ((3, 4), 1, 1), ((1, 16), 16, 1), ((4, 4), 2, 3), ((2, 8), 8, 4)],
)
def test_dense_tiles_equal_evaluate(tile, vec, unroll):
    T, ins = dense()
    _check(T, ins, _schedule([T], tile, vec, unroll))


def test_dense_source_is_register_blocked_and_vectorized():
    T, ins = dense(b=4, n=16, m=7)
    src = generate([T], ins, _schedule([T], (2, 16), 8, 1)).source
    # one float8 accumulator per block point (2 rows x 2 vectors), loads and stores as vectors
    assert "float8 acc0_0_b[4]" in src
    assert "vload8(0, W + " in src and "vstore8(acc0_0_b[3], 0, T + " in src
    assert "fma(" not in src
    # the sizes divide the tile: no partial-tile code at all
    assert "acc0_0 =" not in src
    # unroll-and-jam: the 4 accumulators are updated in the one reduction loop
    loop = src[src.index("for (int c0"):]
    assert all(f"acc0_0_b[{p}] = acc0_0_b[{p}] + (X[" in loop for p in range(4))  # one expression: an FMA


def test_unroll_splits_the_reduction_loop():
    T, ins = dense(b=2, n=8, m=12)
    src = generate([T], ins, _schedule([T], (2, 8), 8, 4)).source
    # 12 = 3 * 4 iterations: the chunk loop runs 3 times over 4 unrolled copies, no remainder guard
    assert "c0 <= 2" in src and src.count("acc0_0_b[0] = acc0_0_b[0] + (") == 4


# -- other stage shapes --------------------------------------------------------------------------
@pytest.mark.parametrize("tile,vec", [((2, 8), 8), ((3, 3), 1), ((1, 4), 4)])
def test_elementwise_selects_gathers_casts(tile, vec):
    Y, ins = elementwise()
    mod = _check(Y, ins, _schedule([Y], tile, vec))
    if vec > 1:
        assert f"vstore{vec}(" in mod.source


def test_strided_padded_conv_tiles():
    Y, ins = strided_conv()
    _check(Y, ins, _schedule([Y], (1, 2, 2, 4), 4, 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("head", [False, True])
def test_conv_gradient_polyops_tiles(head):
    """pa.differentiate's simplified conv gradients (non-rectangular domains, zero fills) under tiling.

    The identity head gives rank-8 Jacobians: many grid dims fused, tiles that never fill.
    """
    X = pa.placeholder((1, 2, 7, 7), name="X")
    W = pa.placeholder((3, 2, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=2, padding=1)
    H = pa.placeholder(Y.shape, name="H") if head else None
    outs = list(pa.differentiate(Y, [X, W], head=H))
    ins = [X, W] + ([H] if head else [])
    _check(outs, ins, _schedule(outs, lambda r: (1,) * (r - 2) + (2, 4) if r >= 2 else None, 4, 2),
           rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("make", [triangular_cumsum, band_fill_accumulate, strided_conv_dx])
def test_polyop_statements_tiles(make):
    T, ins, ref = make()
    rng = np.random.default_rng(3)
    arrays = [_rand(t, rng) for t in ins]
    mod = pa.build(T, ins, schedule=_schedule([T], lambda r: (2,) * (r - 1) + (4,), 4, 2))
    np.testing.assert_allclose(mod(*arrays), ref(*arrays), rtol=1e-5, atol=1e-5)


def test_tuple_reduction_argmax_vectorized():
    X = pa.placeholder((6, 9, 5), name="X")
    A = pa.ops.argmax(X, axis=2)
    arrays = [np.random.default_rng(1).integers(-3, 4, size=(6, 9, 5)).astype("float32")]  # ties: first index
    mod = _check(A, [X], _schedule([A], lambda r: (1,) * (r - 1) + (4,) if r else None, 4, 2), arrays=arrays)
    # a tuple reducer compares its new value more than once: bound to a temporary, not repeated in the update
    assert "const float4 y1 = " in mod.source


def test_max_reduction_with_condition_vectorized():
    X = pa.placeholder((5, 13), name="X")
    k = pa.reduce_axis((0, 13), name="k")
    Y = pa.compute((13,), lambda j: pa.max(X[k % 5, j] * pa.cast(k, "float32"), axis=k, where=k >= j), name="Y")
    mod = _check(Y, [X], _schedule([Y], (8,), 8, 3))
    assert "float8 acc0_0_b[1]" in mod.source


def test_int_stage_vectorized():
    A = pa.placeholder((4, 10), name="A", dtype="int32")
    k = pa.reduce_axis((0, 4), name="k")
    Y = pa.compute((10,), lambda j: pa.sum(A[k, j] * (j + 1), axis=k), name="Y")
    mod = _check(Y, [A], _schedule([Y], (4,), 4))
    # int32 is computed as long with 64-bit indices (CPU builds), stored back as int
    assert ("long4 acc0_0_b[1]" if mod.program.wide_index else "int4 acc0_0_b[1]") in mod.source


def test_scalar_output_unrolled():
    A = pa.placeholder((11,), name="A")
    k = pa.reduce_axis((0, 11), name="k")
    Y = pa.compute((), lambda: pa.sum(A[k], axis=k), name="Y")
    _check(Y, [A], _schedule([Y], (), 1, 4))


def test_tiles_compose_with_local_size_and_grid_dims():
    Y, ins = strided_conv(n=3, ci=2, size=8, co=5)
    _check(Y, ins, _schedule([Y], (1, 2, 2, 4), 4, 1, local_size=(2, 2), grid_dims=2), rtol=1e-4, atol=1e-4)


def test_block_count_is_the_ndrange():
    T, ins = dense(b=5, n=10)
    prog = generate([T], ins, _schedule([T], (2, 8), 4))
    assert prog.kernels[0].global_size == (2, 3)  # ceil(10/8) x ceil(5/2), innermost first


# -- errors --------------------------------------------------------------------------------------
def test_tile_rank_mismatch_names_the_stage():
    T, ins = dense()
    with pytest.raises(ScheduleError, match="'T'"):
        generate([T], ins, Schedule("x", stages={"T": StageSchedule(tile=(2, 2, 2))}))


def test_vectorize_must_divide_the_tile_names_the_axis():
    T, ins = dense()
    with pytest.raises(ScheduleError, match=r"'T'.*vectoriz"):
        generate([T], ins, Schedule("x", stages={"T": StageSchedule(tile=(2, 6), vectorize=4)}))


def test_bool_outputs_cannot_be_vectorized():
    A = pa.placeholder((8,), name="A")
    Y = pa.compute((8,), lambda i: A[i] > 0.0, name="Y")
    with pytest.raises(ScheduleError, match="'Y'"):
        generate([Y], [A], Schedule("x", stages={"Y": StageSchedule(vectorize=4)}))


# -- the exhaustive grid ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "tile,vec,unroll",
    [(t, v, u) for t, v, u in itertools.product([(1, 1), (2, 4), (3, 8), (4, 16)], [1, 2, 4, 8, 16], [1, 3])
     if t[1] % v == 0],
)
def test_grid_dense_and_elementwise(tile, vec, unroll):
    T, ins = dense(b=7, n=19, m=9)
    Y, yins = elementwise(n=7, m=19)
    outs = [T, Y]
    _check(outs, ins + yins, _schedule(outs, tile, vec, unroll))


@pytest.mark.slow
@pytest.mark.parametrize("tile,vec,unroll", [((1, 1, 1, 1), 1, 2), ((1, 3, 2, 2), 2, 1), ((2, 1, 3, 8), 8, 3)])
def test_grid_conv_and_polyops(tile, vec, unroll):
    Y, ins = strided_conv()
    _check(Y, ins, _schedule([Y], tile, vec, unroll), rtol=1e-4, atol=1e-4)
    for make in (triangular_cumsum, band_fill_accumulate, strided_conv_dx):
        T, tins, ref = make()
        rng = np.random.default_rng(5)
        arrays = [_rand(t, rng) for t in tins]
        mod = pa.build(T, tins, schedule=_schedule([T], lambda r: tile[len(tile) - r:], vec, unroll))
        np.testing.assert_allclose(mod(*arrays), ref(*arrays), rtol=1e-5, atol=1e-5)


# -- legality --------------------------------------------------------------------------------------
def test_legality_check_rejects_reordered_reductions():
    """check_legality accepts the built schedule and catches ones that break the per-point chains."""
    import islpy as isl

    from polyad.codegen.tree import _insert_band, _tiled_stage, check_legality, tuple_names
    from polyad.poly.stage import statements_of

    X = pa.placeholder((6, 5), name="X")
    op = pa.ops.argmax(X, axis=1).op  # a tuple reduction: the order of the reduction points matters
    stmts = statements_of(op)
    ists, good = _tiled_stage(op, stmts, [f"A_{st.name}" for st in stmts], (4,), 4, 1, 3)
    assert {x.role for x in ists} == {"init", "update", "final"}
    check_legality(op, ists, good)
    dom = isl.UnionSet(ists[0].domain)
    for ist in ists[1:]:
        dom = dom.union(isl.UnionSet(ist.domain))
    with pytest.raises(ScheduleError, match="reorder dependent"):  # no order at all
        check_legality(op, ists, isl.Schedule.from_domain(dom))
    # init, updates, final in order, but the reduction loop runs backwards
    rank = {"init": 0, "update": 1, "final": 2}
    rev = _insert_band(isl.Schedule.from_domain(dom), ists,
                       lambda x: [f"-{tuple_names(x)[-1]}" if x.role == "update" else "0"])
    rev = _insert_band(rev, ists, lambda x: [str(rank[x.role])])
    with pytest.raises(ScheduleError, match="reorder dependent"):
        check_legality(op, ists, rev)
    with pytest.raises(ScheduleError, match="reorder dependent"):  # a failure is not remembered as a pass
        check_legality(op, ists, rev)
    check_legality(op, ists, good)


def test_unchanged_stages_reuse_their_ast_tile_split_and_legality_check(monkeypatch):
    """A tuner's candidate changes one stage and regenerates all: the other stages' kernel ASTs, full/partial tile
    splits and legality checks are taken from memory, and the source is the one a generation without memory
    gives."""
    import sys

    from polyad.codegen import tree

    lower = sys.modules["polyad.codegen.lower"]  # the package's ``lower`` is the function of that name

    X = pa.placeholder((16, 12), name="X")
    W = pa.placeholder((12, 16), name="W")
    k = pa.reduce_axis((0, 12), name="k")
    T = pa.compute((16, 16), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="T")
    U = pa.compute((16, 16), lambda i, j: pa.tanh(T[i, j]) * 2.0, name="U")

    def sched(t):
        return Schedule("s", stages={"T": StageSchedule(tile=t, vectorize=4), "U": StageSchedule(tile=(2, 8))})

    calls = {"ast": 0, "legal": 0, "split": 0}
    real_lower, real_check, real_split = lower.lower_kernel, tree._check_legality, tree._split_tiles

    def counting_lower(spec, node):
        calls["ast"] += 1
        return real_lower(spec, node)

    def counting_check(op, ists, s):
        calls["legal"] += 1
        return real_check(op, ists, s)

    def counting_split(st, tile, vec, narrower=(), extent=None):
        calls["split"] += 1
        return real_split(st, tile, vec, narrower, extent)

    def forget():
        for mod, name in ((lower, "_MEMO"), (tree, "_LEGAL"), (tree, "_SPLIT")):
            monkeypatch.setattr(mod, name, type(getattr(mod, name))())

    monkeypatch.setattr(lower, "lower_kernel", counting_lower)
    monkeypatch.setattr(tree, "_check_legality", counting_check)
    monkeypatch.setattr(tree, "_split_tiles", counting_split)
    forget()
    first = generate([U], [X, W], sched((2, 8)))
    assert calls == {"ast": 2, "legal": 2, "split": 2}
    again = generate([U], [X, W], sched((4, 8)))  # T changed, U did not
    assert calls == {"ast": 3, "legal": 3, "split": 3}
    assert generate([U], [X, W], sched((2, 8))).source == first.source
    assert calls == {"ast": 3, "legal": 3, "split": 3}
    forget()
    assert generate([U], [X, W], sched((4, 8))).source == again.source  # from scratch: the same code


def test_wide_index_tiles_compile_without_allocating():
    n = 2**31 + 7  # never allocated: the build only compiles
    X = pa.placeholder((n,), name="X")
    k = pa.reduce_axis((0, 3), name="k")
    Y = pa.compute((n // 3,), lambda i: pa.sum(X[3 * i + k], axis=k), name="Y")
    prog = generate([Y], [X], Schedule("w", stages={"Y": StageSchedule(tile=(16,), vectorize=8, unroll=3)}))
    assert prog.wide_index and "long8 acc0_0_b[2]" not in prog.source  # float accumulators, long indices
    assert "float8 acc0_0_b[2]" in prog.source and "long const gid0" in prog.source
    assert prog.kernels[0].global_size == (-(-(n // 3) // 16),)
    # compiled (no launch: nothing allocated); pa.build would say X is over the device's largest buffer
    assert get_program(prog.source, select_device()) is not None


def test_edge_groups_keep_the_jammed_code():
    """Blocks that are not full still run unroll-and-jam per whole group; only ragged lanes go scalar."""
    T, ins, ref = triangular_cumsum(n=6)  # every point reduces over its own range: no block is full
    sched = _schedule([T], (4,), 1, 1)
    src = generate([T], ins, sched).source
    assert "acc0_0_b[3] = acc0_0_b[3] + (" in src and "acc0_0 =" not in src  # guarded, jammed, no scalar path
    T2, ins2 = dense(b=5, n=10)  # row 4 (5 = 2*2 + 1) runs as vector groups; columns 8-9 as one float2 group
    src2 = generate([T2], ins2, _schedule([T2], (2, 8), 4)).source
    assert src2.count("vstore4(") >= 2 and "vstore2(acc0_0_b2[" in src2 and "acc0_0 = " not in src2
    _check([T2], ins2, _schedule([T2], (2, 8), 4))
    arrays = [np.random.default_rng(2).standard_normal(t.shape).astype("float32") for t in ins]
    np.testing.assert_allclose(pa.build(T, ins, schedule=sched)(*arrays), ref(*arrays), rtol=1e-5, atol=1e-5)


def test_max_pool_gradient_ragged_vector_groups():
    """Padded max-pool's gradient: window reductions whose sets differ per lane at the borders.

    Ragged groups update the shared points as vectors and the rest lane by lane, in
    reduction order (the arg-max tie rule depends on it); ties are made likely.
    """
    X = pa.placeholder((2, 3, 9, 11), name="X")
    Y = pa.nn.pool2d(X, (3, 3), (2, 2), (1, 1), "max")
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], head=H)
    rng = np.random.default_rng(4)
    arrays = [rng.integers(-2, 3, size=X.shape).astype("float32"), rng.standard_normal(H.shape).astype("float32")]
    mod = _check([dX], [X, H], _schedule([dX], lambda r: (1,) * (r - 2) + (2, 8) if r >= 2 else None, 4, 2),
                 arrays=arrays)
    assert "vstore4(" in mod.source


@pytest.mark.parametrize("vec", [1, 4])
def test_a_point_loop_the_printer_cannot_unroll_is_printed_as_a_loop_and_computes_the_same(vec, monkeypatch):
    """Full tiles' point loops are unrolled by the printer where their bounds are literals (always, so far); a loop
    whose unrolling it cannot prove whole (here: a block extent it is told too small) stays a loop, and the
    kernel still computes the same."""
    from polyad.codegen.opencl import KernelWriter

    X = pa.placeholder((10, 12), name="X")
    W = pa.placeholder((12, 16), name="W")
    k = pa.reduce_axis((0, 12), name="k")
    Y = pa.compute((10, 16), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="Y")
    sched = Schedule("s", stages={"Y": StageSchedule(tile=(2, 8), vectorize=vec)})
    rng = np.random.default_rng(0)
    x, w = _rand(X, rng), _rand(W, rng)
    ref = pa.evaluate(Y, {X: x, W: w})
    from polyad.runtime.module import Module

    dev = select_device(None)
    unrolled = generate([Y], [X, W], sched)
    monkeypatch.setattr(KernelWriter, "_point_extent", lambda self, nd, it: (1, True))
    looped = generate([Y], [X, W], sched)
    assert looped.source != unrolled.source and "for (" in looped.source.split("// kernel Y")[1]
    for prog in (unrolled, looped):
        np.testing.assert_allclose(Module(prog, dev, inputs=[X, W])(x, w)[0], ref, rtol=1e-5, atol=1e-5)


def test_partial_blocks_the_printer_guards_compute_as_evaluate(monkeypatch):
    """Candidates of conv2d_5x5_s3's backward (the tuner's first mutations, test shapes) whose partial blocks the
    printer unrolls with its own guards (their source differs from isl's unrolling, in guards alone: the
    comparison in test_codegen_kernel_memo.py): built and run, they equal pa.evaluate."""
    import random

    from polyad.bench.tuning import TINY, backward_graph
    from polyad.codegen import tree
    from polyad.pipeline import program_of
    from polyad.schedule import DeviceModel
    from polyad.tuner.configs import ConfigSpace
    from polyad.tuner.measure import graph_context

    g = backward_graph("conv2d_5x5_s3", dict(TINY["conv2d_5x5_s3"]))
    model = DeviceModel.of(select_device(None))
    ctx = graph_context(g.outputs, g.inputs, model)
    space = ConfigSpace(ctx.outputs, model, ctx.auto, max_variants=3)
    rng = random.Random(1)
    want = pa.evaluate(ctx.outputs, dict(zip(ctx.inputs, g.data)))
    checked = 0
    for c in [space.mutate(space.auto_config(), rng, p_variant=0.3) for _ in range(6)]:
        sched = space.schedule(c)
        try:
            mine = program_of(ctx.outputs, ctx.inputs, sched, None)
        except pa.PolyadError:
            continue
        monkeypatch.setattr(tree, "UNROLL_IN_PRINTER", False)
        isls = program_of(ctx.outputs, ctx.inputs, sched, None)
        monkeypatch.setattr(tree, "UNROLL_IN_PRINTER", True)
        if mine.source == isls.source:
            continue
        got = pa.build(ctx.outputs, ctx.inputs, schedule=sched)(*g.data)
        for t, a, b in zip(ctx.outputs, got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=t.name)
        checked += 1
    assert checked >= 1


def test_which_reductions_the_printer_unrolls_inside_the_loop():
    """``{ S[b, l, r] }``: block b, point l, reduction point r.  Where every point of a block reduces over the same
    r, the printer unrolls the points inside the reduction loop; where the points an r updates depend on it (a
    strided convolution's data gradient), isl does."""
    from types import SimpleNamespace

    import islpy as isl

    from polyad.codegen.tree import _points_span_every_reduction

    def ist(dom):
        return SimpleNamespace(domain=isl.Set(dom), stmt=SimpleNamespace(vars=(0, 0), n_out=1))

    box = "0 <= b < 3 and 0 <= l < 4"
    assert _points_span_every_reduction(ist(f"{{ S[b, l, r] : {box} and 4b + l < 10 and 0 <= r < 5 }}"), 1)
    assert _points_span_every_reduction(ist(f"{{ S[b, l, r] : {box} and 0 <= r < 5 + b }}"), 1)
    assert not _points_span_every_reduction(ist(f"{{ S[b, l, r] : {box} and l <= r < l + 2 }}"), 1)
