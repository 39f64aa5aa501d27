"""schedule="auto": its decisions, its space, and every workload gradient built with it equals pa.evaluate."""

import time

import numpy as np
import pytest

import polyad as pa
from polyad.bench.workloads import WORKLOADS
from polyad.schedule import DeviceModel, Schedule, StageSchedule, auto_schedule, candidate_space, prepare
from polyad.schedule.auto import stage_cost, stage_info
from polyad.schedule.space import _row_factor
from polyad.te.tensor import PlaceholderOp, walk_ops

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")  # the figures the decisions were measured with
GPU = DeviceModel.load(_DEVICES / "gpu-former-constants.json")



def _dense_grads(batch=32, n_in=1000, n_out=1000):
    X = pa.placeholder((batch, n_in), name="X")
    W = pa.placeholder((n_out, n_in), name="W")
    B = pa.placeholder((n_out,), name="B")
    Y = pa.nn.relu(pa.nn.dense(X, W, B))
    H = pa.placeholder(Y.shape, name="H")
    return [X, W, B, H], list(pa.differentiate(Y, [X, W, B], head=H))


def test_auto_on_dense_backward_inlines_movement_and_blocks_the_matmuls():
    ins, grads = _dense_grads()
    t0 = time.perf_counter()
    s = auto_schedule(grads, device=ZEN5)
    assert time.perf_counter() - t0 < 1.0
    assert "d_dense_matmul_from_dense" in s.inline  # a pure copy
    assert "d_dense_from_relu" not in s.inline  # read 1000 times per point by the matmuls
    assert "dense" in s.inline  # read once per point by the relu mask
    for name in ("d_X_from_dense_matmul", "d_W_from_dense_matmul"):
        ss = s.stages[name]
        assert ss.vectorize >= 4 and ss.tile[-1] % ss.vectorize == 0
        assert np.prod(ss.tile) // ss.vectorize >= 4  # several vector accumulators: register blocking
    text = s.describe()
    assert "inline" in text and "d_X_from_dense_matmul: tile" in text and "why:" in text
    assert Schedule.from_json(s.to_json()) == s


def test_auto_rfactors_small_outputs_of_long_reductions():
    X = pa.placeholder((3, 50000), name="X")
    k = pa.reduce_axis((0, 50000), name="k")
    T = pa.compute((3,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="T")
    s = auto_schedule([T], device=ZEN5)
    assert "T" in s.rfactor and any("rfactor T" in n for n in s.notes)
    f = s.rfactor["T"]
    assert 3 * -(-50000 // f) >= ZEN5.min_parallel
    # a large output does not need it
    k2 = pa.reduce_axis((0, 256), name="k2")
    Y = pa.compute((8192,), lambda i: pa.sum(X[i % 3, k2 + i], axis=k2), name="Y")
    assert "Y" not in auto_schedule([Y], device=ZEN5).rfactor
    x = np.random.default_rng(0).standard_normal((3, 50000)).astype(np.float32)
    np.testing.assert_allclose(pa.build(T, [X])(x), pa.evaluate([T], {X: x})[0], rtol=1e-4)


def test_candidate_space_is_enumerable_and_contains_the_choice():
    ins, grads = _dense_grads(8, 64, 48)
    s = auto_schedule(grads, device=ZEN5)
    space = candidate_space(grads, schedule=s, device=ZEN5)
    assert "d_dense_matmul_from_dense" in space.inline
    assert set(space.stages) == {n for n in space.stages}  # names of the scheduled graph
    for name, ss in s.stages.items():
        assert ss in space.stages[name]
    assert space.size() > 1000
    # every candidate is legal for its stage
    g, _ = prepare(grads, Schedule(inline=s.inline, rfactor=s.rfactor))
    ops = {op.name: op for op in walk_ops(g) if not isinstance(op, PlaceholderOp)}
    for name, cands in space.stages.items():
        for ss in cands:
            if ss.tile:
                assert len(ss.tile) == len(ops[name].shape) and ss.tile[-1] % ss.vectorize == 0


def test_cost_model_prefers_vectors_and_accumulators_on_a_matmul_and_gpu_differs():
    ins, grads = _dense_grads()
    op = [o for o in walk_ops(grads) if o.name == "d_W_from_dense_matmul"][0]
    info = stage_info(op)
    cpu = ZEN5
    naive = stage_cost(info, StageSchedule(), cpu)
    vec = stage_cost(info, StageSchedule(tile=(1, 16), vectorize=16), cpu)
    blocked = stage_cost(info, StageSchedule(tile=(4, 32), vectorize=16), cpu)
    assert blocked < vec < naive
    gpu = auto_schedule(grads, device=GPU)
    assert all(ss.vectorize == 1 for ss in gpu.stages.values())


SMALL = {
    "dense": dict(batch=3, n_in=40, n_out=24),
    "dense_big": dict(batch=3, n_in=70, n_out=20),
    "conv2d_3x3": dict(batch=2, c_in=3, size=10, c_out=4),
    "conv2d_5x5_s3": dict(batch=2, c_in=3, size=16, c_out=4),
    "conv2d_dilated": dict(batch=2, c_in=3, size=12, c_out=4),
    "avg_pool": dict(batch=2, channels=3, size=20),
    "max_pool": dict(batch=2, channels=3, size=12),
    "softmax": dict(batch=3, n_in=30, n_out=20),
    "softmax_homebrew": dict(batch=3, n_in=30, n_out=20),
    "flatten": dict(batch=2, c=3, h=4, w=5),
    "chain": dict(n=37, depth=20),
    "mlp_step": dict(batch=4, sizes=(20, 16, 12, 10)),
    "lenet_step": dict(batch=2),
}


def test_every_workload_is_covered():
    assert set(SMALL) == set(WORKLOADS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_workload_gradient_with_auto_equals_evaluate(name):
    case = WORKLOADS[name].instantiate(**SMALL[name])
    ph = {i.name: pa.placeholder(i.shape, i.dtype, name=i.name) for i in case.inputs}
    Y = case.forward_te(ph)
    H = pa.placeholder(Y.shape, name="H")
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], head=H))
    rng = np.random.default_rng(7)
    arrays = {i.name: i.draw(rng) for i in case.inputs}
    h = rng.standard_normal(Y.shape).astype(np.float32)
    inputs = [ph[i.name] for i in case.inputs] + [H]
    feeds = {ph[k]: v for k, v in arrays.items()}
    feeds[H] = h
    ref = pa.evaluate(grads, feeds)
    mod = pa.build(grads, inputs)  # the default: auto
    got = mod(*[arrays[i.name] for i in case.inputs], h)
    for g, r in zip(got, ref):
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * scale)


def test_partial_tiles_of_non_rectangular_domains_count_as_naive():
    X = pa.placeholder((2, 3, 12, 12), name="X")
    W = pa.placeholder((4, 3, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, 1, 0, 1)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], head=H)
    from polyad.schedule.auto import full_fraction

    info = stage_info(dX.op)
    (w, inner, outer), = info.regions  # one statement; its reduction is whole only away from the borders
    assert inner[2:] == ((2, 9), (2, 9)) and outer[2:] == ((0, 11), (0, 11))
    assert full_fraction(info, (1, 1, 1, 1)) == pytest.approx(64 / 144)
    assert full_fraction(info, (1, 1, 1, 4)) == pytest.approx(8 / 12 * 4 / 12)  # only the block [4, 8) of the last axis
    assert full_fraction(info, (1, 1, 12, 12)) == 0.0


def test_auto_rfactor_of_softmax_rows_builds_exactly():
    T = pa.placeholder((2, 20000), name="T")
    Y = pa.nn.softmax(T)
    H = pa.placeholder(Y.shape, name="H")
    (dT,) = pa.differentiate(Y, [T], head=H)
    s = auto_schedule([dT], device=ZEN5)
    assert s.rfactor  # two rows cannot keep the cores busy: the row reductions are split
    rng = np.random.default_rng(3)
    t = rng.standard_normal((2, 20000)).astype(np.float32)
    h = rng.standard_normal((2, 20000)).astype(np.float32)
    ref = pa.evaluate([dT], {T: t, H: h})[0]
    got = pa.build(dT, [T, H])(t, h)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_strided_conv_data_gradient_gets_stride_cell_blocks():
    # stride 3: every input point has its own reduction slice, so no block is a full tile; partial
    # blocks measured 1.4-1.5x slower than the naive loops (conv2d_5x5_s3 dX: 44 -> 66 ms when tiled),
    # except blocks of one 3x3 stride cell, which fix each lane's bounds (44 -> 28 ms)
    X = pa.placeholder((2, 3, 17, 17), name="X")
    W = pa.placeholder((4, 3, 5, 5), name="W")
    Y = pa.nn.conv2d(X, W, 3, 1, 1)
    H = pa.placeholder(Y.shape, name="H")
    grads = list(pa.differentiate(Y, [X, W], head=H))
    s = auto_schedule(grads, device=ZEN5)
    from polyad.schedule.graph import apply_graph_schedule, stage_ops, uniquely_named
    from polyad.schedule import Schedule as S

    g, _ = apply_graph_schedule(uniquely_named(grads), S("g", inline=s.inline, rfactor=s.rfactor, fold=s.fold))
    ops = {op.name: op for op in stage_ops(g)[0]}
    dx = [n for n, op in ops.items() if stage_info(op).regions and stage_info(op).reduction]
    assert dx, "the data gradient is a polyhedral stage"
    cpu = ZEN5
    for n in dx:
        info = stage_info(ops[n])
        naive = stage_cost(info, StageSchedule(), cpu)
        assert info.strided and info.strides[2:] == (3, 3)
        assert stage_cost(info, StageSchedule(tile=(1, 1, 8, 2), unroll=2), cpu) > naive
        assert s.stages[n].tile[2:] == (3, 3) and s.stages[n].vectorize == 1
    assert any(n not in dx for n in s.stages)  # the weight gradient still gets a block
    rng = np.random.default_rng(5)
    x = rng.standard_normal(X.shape).astype(np.float32)
    w = rng.standard_normal(W.shape).astype(np.float32)
    h = rng.standard_normal(Y.shape).astype(np.float32)
    ref = pa.evaluate(grads, {X: x, W: w, H: h})
    got = pa.build(grads, [X, W, H])(x, w, h)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * float(np.abs(r).max()))


def test_conv_data_gradient_lane_sharing_and_strides():
    # stride 1: neighbouring input points share most output positions they reduce over, and no bound
    # is scaled: vector blocks pay off (ragged vector groups); stride 3: every reduction bound is a
    # floor division of the point's index (partial blocks measured 1.4x slower than naive loops)
    X = pa.placeholder((2, 8, 16, 16), name="X")
    W = pa.placeholder((4, 8, 3, 3), name="W")
    H1 = pa.placeholder((2, 4, 14, 14), name="H")
    (dx1,) = pa.differentiate(pa.nn.conv2d(X, W, 1, 0, 1), [X], head=H1)
    i1 = stage_info(dx1.op)
    assert not i1.strided and i1.shared > 0.9
    s = auto_schedule([dx1], device=ZEN5)
    assert s.stages[dx1.op.name].vectorize > 1
    W5 = pa.placeholder((4, 8, 5, 5), name="W5")
    Y3 = pa.nn.conv2d(X, W5, 3, 0, 1)
    (dx3,) = pa.differentiate(Y3, [X], head=pa.placeholder(Y3.shape, name="H"))
    assert stage_info(dx3.op).strided
    # a stride equal to the kernel (each point gets one tap): nothing scaled, not strided
    (dxk,) = pa.differentiate(pa.nn.conv2d(X, W, 3, 0, 1), [X], head=pa.placeholder((2, 4, 5, 5), name="H"))
    assert not stage_info(dxk.op).strided
    # a box (the weight gradient) has no regions: nothing of the above applies
    (dw,) = pa.differentiate(pa.nn.conv2d(X, W, 1, 0, 1), [W], head=H1)
    assert not stage_info(dw.op).strided


def test_gathered_matmul_gets_wide_vector_blocks():
    # Y = X.W^T vectorised along j reads W[j, k] lane by lane (a gather); measured on softmax's dense
    # recompute (60x1000x1000): 6x32/float16 blocks 2x faster than 6x8/float4 ones
    X = pa.placeholder((60, 200), name="X")
    W = pa.placeholder((300, 200), name="W")
    k = pa.reduce_axis(200, name="k")
    Y = pa.compute((60, 300), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="xwt")
    info = stage_info(Y.op)
    assert any(not contig and 1 in used for used, contig in info.loads)  # W is gathered along j
    ss = auto_schedule([Y], device=ZEN5).stages["xwt"]
    assert ss.vectorize == 16 and ss.tile[-1] == 32 and ss.tile[0] >= 6
    cpu = ZEN5
    assert stage_cost(info, ss, cpu) < stage_cost(info, StageSchedule(tile=(6, 8), vectorize=4), cpu)


def test_max_pool_gradient_gets_window_blocks_and_avg_pool_stays_naive():
    # the max-pool gradient compares i % 2 with the window's argmax: 2x2 blocks make that block-constant
    # (max_pool bwd 41 -> 20 ms); the avg-pool gradient only divides read indices (naive loops measured best)
    X = pa.placeholder((2, 3, 8, 32), name="X")
    for kind, cell in (("max", True), ("avg", False)):
        Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, kind)
        H = pa.placeholder(Y.shape, name="H")
        (dX,) = pa.differentiate(Y, [X], head=H)
        s = auto_schedule([dX], device=ZEN5)
        stage = s.stages.get(dX.op.name)
        if cell:
            assert stage is not None and stage.tile == (1, 1, 2, 2) and stage.vectorize == 1
        else:
            assert stage is None or stage.tile != (1, 1, 2, 2)
        rng = np.random.default_rng(7)
        x = rng.standard_normal(X.shape).astype(np.float32)
        h = rng.standard_normal(Y.shape).astype(np.float32)
        ref = pa.evaluate([dX], {X: x, H: h})[0]
        np.testing.assert_allclose(pa.build(dX, [X, H])(x, h), ref, rtol=1e-5, atol=1e-6)


def test_max_pool_argmax_recompute_gets_last_dimension_blocks():
    # the recomputed argmax (a tuple reducer run through selects): blocks along the last dimension only
    # (measured on max_pool: 2x faster than 4x1x2x2, 3x faster than 1x1x2x8); its reads two apart take one
    # float4 a work-item (rule strided_lanes: 5.6 ms against 2x1x1x32/float4's 13.2 at 32x64x100x100)
    X = pa.placeholder((8, 16, 64, 64), name="X")
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "max")
    (dX,) = pa.differentiate(Y, [X], head=pa.placeholder(Y.shape, name="H"))
    s = auto_schedule([dX], device=ZEN5)
    (arg,) = [n for n in s.stages if n.endswith("argmax")]
    assert (s.stages[arg].tile, s.stages[arg].vectorize) == ((1, 1, 1, 4), 4)


def test_auto_rfactors_row_reductions_into_interleaved_vector_partials():
    # softmax rows: 24 outputs each reduce 800 contiguous elements; the rows' stages get 16 interleaved
    # partials per row (the fewest whole vectors dividing 800), the matmul-like stage does not
    X = pa.placeholder((24, 800), name="X")
    Y = pa.nn.softmax(X)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], head=H)
    s = auto_schedule([dX], device=ZEN5)
    rows = [n for n in s.rfactor if any(f"rfactor {n} by" in t and "interleaved" in t for t in s.notes)]
    assert rows and all(s.rfactor[n] == 16 for n in rows)
    # whole vectors first, fewest first; else a multiple of half a vector (rows of 1000: no multiple of 16 up
    # to 64 divides them); at least min_steps (4) steps a row
    assert [_row_factor(e, ZEN5) for e in (800, 512, 1000, 96, 40, 100)] == [16, 16, 40, 16, 8, None]
    assert any(ss.vectorize >= 8 for n, ss in s.stages.items() if n.endswith("_rf"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((24, 800)).astype(np.float32)
    h = rng.standard_normal((24, 800)).astype(np.float32)
    ref = pa.evaluate([dX], {X: x, H: h})[0]
    got = pa.build(dX, [X, H])(x, h)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    # operands reused across outputs (a matmul) keep their register blocks
    W = pa.placeholder((10, 800), name="W")
    k = pa.reduce_axis((0, 800), name="k")
    M = pa.compute((24, 10), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="M")
    assert "M" not in auto_schedule([M], device=ZEN5).rfactor


def test_auto_vectorizes_a_conv_weight_gradient_along_its_contiguous_reduction_axis():
    """dW[co, ci, kh, kw] = sum_{b, y, x} H[b, co, y, x] * X[b, ci, y + kh, x + kw]: the innermost output
    (kw, 3) is too narrow for vectors, so auto interleaves partial sums over x (13 = 3*4 + 1: one ragged
    lane) and each partial's lanes load H's row and X's shifted row as vectors."""
    from polyad.schedule import RFactor

    X = pa.placeholder((8, 3, 15, 15), name="X")
    W = pa.placeholder((5, 3, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W)
    H = pa.placeholder(Y.shape, name="H")
    dX, dW = pa.differentiate(Y, [X, W], head=H)
    s = auto_schedule([dX, dW], device=ZEN5)
    spec = s.rfactor[dW.name]
    assert spec == RFactor(4, "x", True), spec
    part = s.stages[dW.name + "_rf"]
    assert part.vectorize == 4 and part.tile[-1] == 4 and part.tile[-3:-1] == (3, 3)
    assert any("over x, interleaved" in n for n in s.notes)
    mod = pa.build([dX, dW], [X, W, H], schedule=s)  # the recorded CPU's schedule, whatever device runs it
    src = mod.source.split("__kernel void " + dW.name + "_rf(")[1].split("__kernel")[0]
    assert src.count("vload4(0, H +") and src.count("vload4(0, X +")  # both operands as vectors, no gather
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 3, 15, 15), dtype=np.float32), rng.standard_normal((5, 3, 3, 3), dtype=np.float32)
    h = rng.standard_normal(Y.shape, dtype=np.float32)
    got = mod(x, w, h)
    ref = pa.evaluate([dX, dW], {X: x, W: w, H: h})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_lane_rfactor_keeps_off_small_outputs_and_wide_rows():
    X = pa.placeholder((3, 50000), name="X")
    k = pa.reduce_axis((0, 50000), name="k")
    T = pa.compute((3,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="T")  # 3 outputs: blocked partials
    assert isinstance(auto_schedule([T], device=ZEN5).rfactor["T"], int)
    A = pa.placeholder((64, 4096), name="A")
    B = pa.placeholder((64, 4096), name="B")
    k2 = pa.reduce_axis((0, 4096), name="k2")
    M = pa.compute((64, 64), lambda i, j: pa.sum(A[i, k2] * B[j, k2], axis=k2), name="M")
    # wide rows are not rfactor_lanes'; B[j, k2] read a row apart along j makes them rfactor_gathered's (PoCL,
    # Zen 5, Module.profile: 1.03 ms in 8x32/float16 blocks along j, 0.20 ms in lanes over k2)
    notes = auto_schedule([M], device=ZEN5).notes
    assert not any("too narrow for vectors" in n for n in notes)
    assert any(n.startswith("rfactor M by 16 over k2, interleaved: every read along its innermost output gathers")
               for n in notes), notes


def test_a_stage_that_absorbs_inlined_producers_is_costed_as_it_is_built():
    """Max-pool's gradient through a relu and a bias: the relu mask and the bias add are inlined into the
    pool's gradient stage, which then reads the argmax and the pooled gradient at { [b, c, y, x] -> [b, c,
    floor(y/2), floor(x/2)] }: a 2x2 block reads them once.  Costed unfused, every block looked alike and
    the stage kept naive loops (lenet_step at batch 64: 0.15 ms; in 2x2 blocks 0.09)."""
    from polyad.schedule.graph import stage_ops
    from polyad.schedule.space import graph_decisions
    from polyad.schedule.graph import uniquely_named

    X = pa.placeholder((4, 3, 12, 12), name="X")
    B = pa.placeholder((3,), name="B")
    Y = pa.nn.pool2d(pa.nn.relu(pa.nn.bias_add(X, B, axis=1)), (2, 2), (2, 2), 0, "max")
    H = pa.placeholder(Y.shape, name="H")
    (g,) = pa.differentiate(Y, [X], H)
    s = auto_schedule([g], device=ZEN5)
    graph = graph_decisions(uniquely_named([g]), ZEN5)
    name = g.op.name  # d_X_from_bias_add: the relu mask and the pool's gradient are inlined into it
    assert {t.op.name for t in stage_ops(graph.outputs)[1][name].input_tensors} <= graph.inline
    assert s.stages[name].tile[-2:] == (2, 2), s.stages.get(name)
    fused = prepare([g], s)[0]
    assert graph.infos[name] == stage_info(stage_ops(fused)[1][name])  # the cost the rules saw: the built stage's
    from polyad.schedule.space import given_graph

    assert given_graph(uniquely_named([g]), s, ZEN5).infos[name] == graph.infos[name]  # the tuner's view too
    rng = np.random.default_rng(0)
    feeds = {t: rng.standard_normal(t.shape).astype(np.float32) for t in (X, B, H)}
    np.testing.assert_allclose(pa.build(g, [X, B, H], schedule=s)(feeds[X], feeds[B], feeds[H]),
                               pa.evaluate(g, feeds), rtol=1e-6)


def test_the_model_charges_a_box_stages_edge_groups_as_vectors():
    """Codegen runs the whole vector groups of edge blocks as vectors and a reduction's remainder in narrower
    groups (tests/codegen/test_codegen_remainder.py); the model charged every point outside full tiles as the naive
    loops: a 1000-wide matmul in 8x32/float16 tiles 1.28x its 1024-wide twin, which measured 1.9x faster before the
    narrower groups and as fast after."""
    from polyad.schedule.cost import box_groups

    every = (1, 2, 4, 8, 16)
    assert box_groups((32, 1000), (8, 32), 16, every, True) == pytest.approx(8 / 1000)  # one float8 group a row
    assert box_groups((32, 1000), (8, 32), 16, (1, 4, 16), True) == pytest.approx(8 / 1000)  # two float4 groups
    assert box_groups((32, 1000), (8, 32), 16, (1, 16), True, moved=False) == 0.0  # nothing narrower: scalar
    assert box_groups((32, 1000), (8, 32), 16, every, False, moved=False) == 0.0  # an assignment's scalar remainder
    assert box_groups((60, 1024), (8, 32), 16, (1, 16), True) == pytest.approx(4 / 60)  # edge rows: whole groups
    assert box_groups((1, 45), (1, 32), 16, every, True, moved=False) == pytest.approx(12 / 45)  # 8 + 4, a scalar
    # a remainder taking more groups than a tile's two vectors: the last tile moved back, 32 points charged
    assert box_groups((32, 1000), (8, 32), 16, (1, 16), True) == pytest.approx(32 / 1000)
    assert box_groups((32, 1000), (8, 32), 16, every, False) == pytest.approx(32 / 1000)
    assert box_groups((1, 45), (1, 32), 16, every, True) == pytest.approx(32 / 45)
    # rows of 28 in 3x16 tiles: the full rows' last tile moved, the edge rows' rest (28 % 3 = 1) in float8 and float4
    assert box_groups((28, 28), (3, 16), 16, every, True) == pytest.approx(1 / 28 * 16 / 28 + 27 / 28 * 16 / 28
                                                                           + 1 / 28 * 12 / 28)

    def matmul(n):
        A = pa.placeholder((32, 1000), name="A")
        B = pa.placeholder((1000, n), name="B")
        k = pa.reduce_axis(1000, name="k")
        return stage_info(pa.compute((32, n), lambda i, j: pa.sum(A[i, k] * B[k, j], axis=k), name="C").op)

    ss = StageSchedule(tile=(8, 32), vectorize=16)
    assert stage_cost(matmul(1000), ss, ZEN5) < stage_cost(matmul(1024), ss, ZEN5)


def test_a_folded_row_max_is_split_into_interleaved_vector_partials_as_a_compute_is(opencl):
    """fold makes softmax's row max a polyhedral stage (the stop-gradient copy computes it); the rows rule read
    computes only, so its vectors ran along the rows, 8 lanes gathered 1000 apart: 512x1000, 0.3-0.5 ms, split
    0.08 ms."""
    X = pa.placeholder((512, 1000), name="X")
    Y = pa.nn.softmax(X)
    s = auto_schedule([Y], device=ZEN5)
    assert "softmax_max_stopgrad" in s.fold and s.rfactor.get("softmax_max_stopgrad") == 40, s.describe()
    x = np.random.default_rng(6).standard_normal((512, 1000)).astype(np.float32)
    np.testing.assert_allclose(pa.build(Y, [X], schedule=s)(x), pa.evaluate(Y, {X: x}), rtol=1e-5, atol=1e-7)


def test_a_copy_whose_inlined_producers_are_copies_takes_whole_rows(opencl):
    """concatenate(split(X)[::-1]): the pieces, inlined, are copies too; copy_rows refused any inlined producer
    (one brings arithmetic), and the concatenation kept naive loops: 16x32x56x56, 1.03 ms, rows 0.17-0.23."""
    X = pa.placeholder((4, 32, 12, 56), name="X")
    Y = pa.ops.concatenate(pa.ops.split(X, 4, axis=1)[::-1], axis=1)
    s = auto_schedule([Y], device=ZEN5)
    ss = s.stages.get(Y.op.name)
    assert ss is not None and ss.tile[-1] == 56 and ss.vectorize == 8, s.describe()
    x = np.random.default_rng(7).standard_normal(X.shape).astype(np.float32)
    np.testing.assert_array_equal(pa.build(Y, [X], schedule=s)(x), pa.evaluate(Y, {X: x}))


def test_a_transpose_a_reduction_reads_is_materialised(opencl):
    """matmul(A, transpose(B)): inlined, every vector load of B^T along j gathers 512 apart (auto 3.8-6.5 ms for
    512x512x512); materialised, the copy and the same matmul blocks take 1.5-1.7 (rule materialise_transposes).
    A copy that keeps its source's rows is still inlined."""
    A = pa.placeholder((64, 48), name="A")
    B = pa.placeholder((40, 48), name="B")
    Y = pa.ops.matmul(A, pa.ops.transpose(B, (1, 0)))
    s = auto_schedule([Y], device=ZEN5)
    assert not s.inline and any("materialise transpose: a transpose read by a reduction" in n for n in s.notes), \
        s.describe()
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(A.shape).astype(np.float32), rng.standard_normal(B.shape).astype(np.float32)
    np.testing.assert_allclose(pa.build(Y, [A, B], schedule=s)(a, b), a @ b.T, rtol=1e-4, atol=1e-4)
    B2 = pa.placeholder((50, 40), name="B2")
    C = pa.compute((48, 40), lambda k, j: B2[k + 1, j], name="C")  # a crop keeps its source's rows
    s2 = auto_schedule([pa.ops.matmul(A, C)], device=ZEN5)
    assert "C" in s2.inline and "materialise C" not in " ".join(s2.notes), s2.describe()
