"""The heuristic auto-scheduler: ``schedule="auto"``.

Li et al. 2018's rules for gradient pipelines first, then a per-stage choice
from an enumerable space ranked by an analytic cost model:

1. rfactor reductions whose output is too small to keep the device busy
   (fewer output points than ``DeviceModel.min_parallel``) and whose
   reduction is long; and on CPUs, row reductions (softmax's max and
   exp-sum, a few thousand outputs at most, each reducing a long contiguous
   row, no operand reused across outputs) into interleaved partials, one
   row's partials per work-item as contiguous vectors;
2. inline every reduction-free stage whose points are evaluated at most once
   per point by the kernels it ends up in (elementwise chains collapse into
   their consumer), and pure data movement (no arithmetic) always;
   materialise the rest (a stage read many times by a reduction stays a buffer), and
   whatever would make a kernel's expression deeper or larger than INLINE_MAX_DEPTH /
   INLINE_MAX_SIZE operations (deep chains and their gradients get a buffer every few
   hundred operations);
3. per materialised stage, pick (tile, vectorize, unroll) from
   :func:`candidate_space` minimising :func:`stage_cost`: a roofline of
   isl-counted flops against vector lanes, independent accumulators
   (register blocking) and register pressure, bytes moved per block from
   cache and DRAM, and how many work-items keep the cores busy.

CPU (PoCL) and GPU use the same model with their own :class:`DeviceModel`,
measured on the device (:mod:`polyad.schedule.model`).  Every decision is recorded in ``Schedule.notes``.
"""

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from ..poly.estimate import statement_cost
from ..poly.stage import statements_of
from ..te.expr import Call, Const, Load, Reduce
from ..te.tensor import ComputeOp, PlaceholderOp, as_tensor_list
from ..te.visit import post_order
from . import RFactor, Schedule, StageSchedule
from ..errors import ScheduleError
from .graph import _reduction_form, inlinable, pad_reads, paddable, rfactor, stage_ops, uniquely_named
from .model import DeviceModel

__all__ = ["DeviceModel", "auto_schedule", "candidate_space", "stage_cost", "Space"]


# ---------------------------------------------------------------------------------------------
# what the model reads off a stage
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageInfo:
    name: str
    shape: tuple
    iterations: int  # isl count of the statement instances
    flops: int
    reduction: bool
    itemsize: int
    loads: tuple  # per distinct Load: (frozenset of output dims its indices use, contiguous in the last dim)
    regions: tuple = ()  # per statement: (iterations, interior intervals or None, output intervals)
    simple: bool = True  # no tuple/custom combiner (those reduce through selects, lane by lane)
    shared: float = 1.0  # fraction of reduction iterations a point shares with its neighbour along the last dim
    strided: bool = False  # a reduction bound has a coefficient other than +-1 (a strided convolution's dX)
    strides: tuple = ()  # per output dimension, the largest such coefficient in its constraints (1: none)
    vectors: bool = True  # False for a stage with a bool output: OpenCL has no bool vectors


def _strides(st):
    """Per output dimension, the largest coefficient of a reduction variable in a constraint that also
    bounds the dimension (``0 <= x + 1 - 3*ow <= 4``: 3 for x); each point's reduction bounds are then
    floor divisions of its index."""
    import islpy as isl

    n, m = st.n_out, len(st.vars) - st.n_out
    out = [1] * n
    for b in st.domain.get_basic_sets():
        for c in b.get_constraints():
            red = max((abs(c.get_coefficient_val(isl.dim_type.set, k).to_python()) for k in range(n, n + m)),
                      default=0)
            if red > 1:
                for d in range(n):
                    if c.get_coefficient_val(isl.dim_type.set, d).to_python() != 0:
                        out[d] = max(out[d], red)
    return out


def _lane_shared(st):
    """Fraction of a statement's iterations (out, red) whose reduction point ``red`` is also one of the
    next point's (out + 1 along the last dimension): what ragged vector groups can run as vectors.
    A stride-1 convolution's data gradient shares almost all; a stride-3 one, none."""
    import islpy as isl

    from ..poly.convert import count

    n, m = st.n_out, len(st.vars) - st.n_out
    if n == 0 or m == 0:
        return None
    D = st.domain.reset_tuple_id()
    names = [f"d{i}" for i in range(n + m)]
    moved = list(names)
    moved[n - 1] = f"d{n - 1} - 1"
    T = isl.Map("{ [" + ", ".join(names) + "] -> [" + ", ".join(moved) + "] }")
    total = count(D)
    if not total:
        return None
    return count(D.apply(T).intersect(D)) / total


def _regions(st):
    """(interior, outer) per-dimension intervals of a statement's output points.

    codegen runs a block through the fast (unrolled, vector) path only when it
    is a full tile: all its points in the statement's output domain, all with
    the same reduction points.  ``interior`` bounds the points whose
    reduction slice is the whole reduction box (None: no such point); blocks
    outside it take the naive path.
    """
    import islpy as isl

    from ..poly.convert import bounds

    n, m = st.n_out, len(st.vars) - st.n_out
    D = st.domain.reset_tuple_id()
    if D.is_empty() or n == 0:
        return None, None
    O = D.project_out(isl.dim_type.set, n, m)
    if m:
        bb = bounds(D)[n:]
        names = [f"d{i}" for i in range(n + m)]
        R = isl.Set("{ [" + ", ".join(names) + "] : " + " and ".join(
            f"{lo} <= {names[n + k]} <= {hi}" for k, (lo, hi) in enumerate(bb)) + " }")
        full = O.insert_dims(isl.dim_type.set, n, m).intersect(R)
        U = O.subtract(full.subtract(D).project_out(isl.dim_type.set, n, m))
    else:
        U = O
    return (None if U.is_empty() else tuple(bounds(U))), tuple(bounds(O))


def full_fraction(info, tile):
    """The fraction of a stage's iterations in full tiles of ``tile`` (the rest runs naive loops)."""
    if not tile:
        return 1.0
    if not info.regions:  # a box: only the blocks cut by the upper bounds are partial
        return math.prod((n // t) * t / n for n, t in zip(info.shape, tile))
    tot = full = 0
    for w, inner, outer in info.regions:
        tot += w
        if inner is None:
            continue
        f = 1.0
        for (a, b), (lo, hi), t in zip(inner, outer, tile):
            blocks = max(0, (b + 1) // t - (-(-a // t)))
            f *= min(1.0, blocks * t / max(1, hi - lo + 1))
        full += w * f
    return full / tot if tot else 1.0


def _contiguous(index, var):
    """True if ``index`` is ``var`` plus something free of ``var`` (unit stride)."""
    if index is var:
        return True
    if isinstance(index, Call) and index.op in ("add", "sub") and len(index.args) == 2:
        a, b = index.args
        if a is var or (_contiguous(a, var) and not _uses(b, var)):
            return not _uses(b, var)
        if index.op == "add" and (b is var or _contiguous(b, var)):
            return not _uses(a, var)
    return False


def _uses(e, var):
    return any(n is var for n in post_order(e))


def stage_info(op):
    import numpy as np

    it = fl = 0
    loads, red, regions, plain, shared, strides = [], False, [], True, [], []
    simple = not hasattr(op, "statements")  # a compute: one statement over the whole box
    for st in statements_of(op):
        i, f = statement_cost(st)
        it += i
        fl += f
        if not simple:
            inner, outer = _regions(st)
            if outer is not None:
                regions.append((i, inner, outer))
            if st.combiner is not None:
                strides = [max(a, b) for a, b in zip(strides or [1] * st.n_out, _strides(st))]
            sh = _lane_shared(st) if st.combiner is not None else None
            if sh is not None:
                shared.append((i, sh))
        divs = _divisors(st)
        if divs:
            strides = [max(a, b) for a, b in zip(strides or [1] * st.n_out, divs)]
        red |= st.combiner is not None
        plain &= st.combiner is None or st.combiner.kind() is not None
        outs = st.out_vars
        for n in post_order(tuple(st.values)):
            if isinstance(n, Load):
                used = frozenset(d for d, v in enumerate(outs) if any(_uses(ix, v) for ix in n.indices))
                last = outs[-1] if outs else None
                contig = bool(outs) and len(n.indices) > 0 and _contiguous(n.indices[-1], last) and not any(
                    _uses(ix, last) for ix in n.indices[:-1])
                loads.append((used, contig))
    info = StageInfo(op.name, tuple(op.shape), max(it, 1), fl, red, np.dtype(op.output_dtype(0)).itemsize,
                     tuple(loads), tuple(regions), plain,
                     sum(i * f for i, f in shared) / max(1, sum(i for i, _ in shared)) if shared else 1.0)
    # strides matter where most points' bounds or indices are divisions (stride-3 conv dX: no point has the
    # whole reduction box), not where only the borders are (dilated conv dX keeps its vector blocks)
    import dataclasses

    if any(x > 1 for x in strides) and (not red or full_fraction(info, (1,) * len(info.shape)) < 0.5):
        info = dataclasses.replace(info, strided=True, strides=tuple(strides))
    if any(op.output_dtype(i) == "bool" for i in range(op.num_outputs)):
        info = dataclasses.replace(info, vectors=False)
    return info


def _divisors(st):
    """Per output dimension, the largest constant it is floor-divided by in the statement's indices (a
    2x2/2 pool's gradient reads argmax[i // 2]); None if none."""
    outs = st.out_vars
    out = [1] * len(outs)
    # only divisions whose results are compared or computed with (the pool's argmax test i % 2 == ...):
    # divided read indices alone (an avg-pool gradient's H[i // 2]) measured fastest as naive loops
    in_index = {id(m) for n in post_order(tuple(st.values)) if isinstance(n, Load)
                for m in post_order(tuple(n.indices))}
    for n in post_order(tuple(st.values)):
        if id(n) in in_index:
            continue
        if isinstance(n, Call) and n.op in ("floordiv", "floormod") and isinstance(n.args[1], Const):
            c = int(n.args[1].value)
            if c > 1:
                for d, v in enumerate(outs):
                    if _uses(n.args[0], v):
                        out[d] = max(out[d], c)
    return out if any(x > 1 for x in out) else None


# ---------------------------------------------------------------------------------------------
# the space and the cost model
# ---------------------------------------------------------------------------------------------
def _tile_options(extent, sizes):
    # the whole extent too when it is small (a 3x3 kernel is one 3x3 block: no partial tiles)
    out = sorted({s for s in sizes if s <= max(extent, 1)} | ({extent} if extent <= max(sizes) else set()))
    return out or [1]


def stage_candidates(info, dm, channels=False):
    """Every (tile, vectorize, unroll) StageSchedule the auto-scheduler and the tuner consider for a stage.

    ``channels``: tile the second dimension too (a padded NCHW data gradient, whose channels share the rows
    of H they read; on a weight gradient the same tiles measured 2.4x slower: conv2d_5x5_s3 dW 1x4x5x1
    29 ms against 2x1x5x4/float4 12 ms)."""
    rank = len(info.shape)
    if rank == 0:
        return [StageSchedule()]
    V = dm.vector_width
    st = info.strides or (1,) * rank  # stride cells (below) are options too
    inner = _tile_options(info.shape[-1], {1, 2, 4, 8, 16, 32, 64, st[-1]} | {V, 2 * V, 4 * V})
    outer = _tile_options(info.shape[-2], {1, 2, 3, 4, 6, 8, st[-2]}) if rank >= 2 else [None]
    unrolls = (1, 2, 4, 8) if info.reduction else (1,)
    # for rank >= 3 the outermost dimension too (conv weight gradients: output channels), and for rank >= 4
    # the second instead (NCHW data gradients: channels share the rows of H they read)
    heads = [(tf,) + (1,) * (rank - 3) for tf in _tile_options(info.shape[0], {1, 2, 4})] if rank >= 3 else [()]
    if rank >= 4 and channels:
        heads += [(1, tc) + (1,) * (rank - 4) for tc in _tile_options(info.shape[1], {2, 4, 8}) if tc > 1]
    out = []
    for head in heads:
        for to in outer:
            for ti in inner:
                tile = head + ((to,) if to is not None else ()) + (ti,)
                for vec in dm.widths if info.vectors else (1,):
                    if vec > max(V, 1) or ti % vec or (vec > 1 and ti < vec):
                        continue
                    for u in unrolls:
                        if all(t == 1 for t in tile):
                            out.append(StageSchedule(unroll=u))
                        else:
                            out.append(StageSchedule(tile=tile, vectorize=vec, unroll=u))
    return out


def stage_cost(info, ss, dm):
    """Estimated seconds of one stage under ``ss`` on ``dm`` (a model: it ranks, it does not predict).

    Blocks that are not full tiles run the naive loops: their share costs what the naive schedule costs.
    """
    if info.strided:
        # measured (conv2d 5x5 stride 3 dX, 2x2/2 max-pool dX): a block of exactly one stride cell along the
        # strided dimensions fixes each lane's reduction bounds (conv dX 35 -> 18 ms, pool dX ~30 -> ~6 ms);
        # the naive loops and any other block evaluate floor-division bounds per point (2x the model)
        # (scalar: 1x1x2x2/float2 blocks of the pool gradient measured 1.6x slower than scalar ones)
        if ss.tile and ss.vectorize == 1 and all(t == s for t, s in zip(ss.tile, info.strides) if s > 1):
            return _blocked_cost(info, ss, dm)
        return _STRIDED_NAIVE * _unstrided_cost(info, ss, dm)
    return _unstrided_cost(info, ss, dm)


_STRIDED_NAIVE = 2.0


def _unstrided_cost(info, ss, dm):
    frac = full_fraction(info, ss.tile) if ss.tile else 1.0
    t = _blocked_cost(info, ss, dm)
    if frac < 1.0:
        # measured: on strided domains (conv2d 5x5 stride 3 and dilated dX) the per-point loops of partial
        # blocks run 1.4-1.5x slower than the naive schedule's (per-point floor-division bounds, guards, no
        # unrolling); elsewhere (boxes' edge blocks, stride-1 convolution borders) as fast as naive loops
        pen = _PARTIAL_PENALTY if info.strided else 1.0
        naive = pen * _blocked_cost(info, StageSchedule(unroll=1 if info.strided else ss.unroll), dm)
        # codegen's ragged vector groups run the vector update over the reduction points their lanes share
        # (V lanes share about 1 - (V - 1) * (1 - shared) of them); measured, that pays only where most
        # points have the whole reduction box (conv2d 3x3 dX: float8 blocks 2x faster than scalar ones),
        # not on a stride-3 data gradient, where no point has it (vector blocks 1.6-2.5x slower than naive)
        lanes = 0.0
        if ss.vectorize > 1 and info.regions:
            q = full_fraction(info, (1,) * len(info.shape))
            lanes = max(0.0, 1.0 - (ss.vectorize - 1) * (1.0 - info.shared)) * min(1.0, q / 0.5)
        t = frac * t + (1.0 - frac) * (lanes * t + (1.0 - lanes) * naive)
        return t
    return t


_PARTIAL_PENALTY = 1.4


def _rate(vec, dm):
    """FLOP/s of a block's multiply-add chains at ``vec`` lanes: the device's measured rate at that width
    (scalar where it lacks the width)."""
    return dm.gflops_at(vec if vec <= dm.vector_width else 1) * 1e9


def _blocked_cost(info, ss, dm):
    rank = len(info.shape)
    tile = ss.tile or (1,) * rank
    points = max(1, math.prod(info.shape))
    block = max(1, math.prod(tile))
    blocks = math.prod(-(-s // t) for s, t in zip(info.shape, tile)) if rank else 1
    red = max(1.0, info.iterations / points)
    vec = ss.vectorize
    acc = max(1, block // vec)  # independent (vector) accumulators per work-item
    # LLVM overlaps a few iterations of a single accumulator chain: at least 3 in flight
    # (a reduction of one point per output, such as a stride-2 2x2 pool's gradient, has no chain)
    ilp = min(1.0, max(acc, 3) / dm.fma_slots) if info.reduction and red >= 2 else 1.0
    gathers = any(rank - 1 in used and not contig for used, contig in info.loads)
    # select-based combiners run lane by lane: vectors do not speed them up; gathered operands cost a
    # scalar load per lane (below), not a slower chain (measured, softmax's dense recompute X.W^T along j:
    # 6x32/float16 blocks 2x faster than 6x8/float4)
    compute = info.flops / (_rate(1 if not info.simple else vec, dm) * ilp)
    live = acc + (tile[-2] if rank >= 2 else 1) + (max(1, tile[-1] // vec) if rank else 1)
    if live > dm.registers:
        compute *= 1 + (live - dm.registers) / 4  # spills
    # loads per reduction step of a block: elements of each read that the block touches
    per_step = issue = 0.0  # elements a block reads per reduction step; load instructions it issues
    for used, contig in info.loads:
        n = math.prod(tile[d] for d in used) if used else 1
        per_step += n
        if vec > 1 and rank - 1 in used:
            issue += n / vec if contig else n  # vloadN, or a scalar load per gathered lane
        else:
            issue += n  # scalar loads and broadcasts
    steps = info.iterations / block
    cache_bytes = steps * per_step * info.itemsize
    dram_bytes = points * info.itemsize * (1 + len(info.loads))
    mem = cache_bytes / (dm.cache_gbs * 1e9) + dram_bytes / (dm.dram_gbs * 1e9)
    loads = steps * issue / (dm.load_rate * 1e9) if dm.kind == "cpu" else 0.0
    t = max(compute, mem, loads)
    if ss.unroll > 1 and info.reduction:
        t *= 0.97 if red >= 4 * ss.unroll else 1.1
    busy = min(blocks, dm.min_parallel) / dm.min_parallel
    t /= max(busy, 1e-3)
    return t + dm.launch_s


@dataclass(frozen=True)
class Space:
    """The choices of a build: graph-level candidates and per-stage loop candidates."""

    inline: tuple  # stage names that may be inlined
    rfactor: dict  # stage name -> candidate factors
    stages: dict = field(default_factory=dict)  # stage name -> list of StageSchedule

    def size(self):
        n = 2 ** len(self.inline)
        for f in self.rfactor.values():
            n *= len(f) + 1
        for c in self.stages.values():
            n *= len(c)
        return n


def _rfactor_factors(extent):
    return [f for f in (8, 16, 32, 64, 128, 256, 512, 1024) if 2 <= f < extent]


def _reduction_extent(op):
    b = op.body[0] if isinstance(op, ComputeOp) else None
    if isinstance(b, Reduce):
        return max(a.extent for a in b.axis)
    return None


def candidate_space(outputs, device=None, schedule=None):
    """The enumerable space the auto-scheduler chooses from (and the tuner searches).

    Graph-level candidates are those of the graph of ``outputs``; stage
    candidates are those of the graph after ``schedule``'s graph-level
    decisions (default: the auto-scheduler's).

    :param outputs: a tensor or a list of tensors.
    :param device: a ``pyopencl.Device``, a :class:`DeviceModel` or a recorded model (None: the default device),
        see :meth:`DeviceModel.of`.
    :param schedule: the :class:`~polyad.schedule.Schedule` whose graph-level decisions (pad, rfactor, inline)
        shape the stages; None for the auto-scheduler's.
    :returns: a ``Space``: ``inline`` (the stage names that may be inlined), ``rfactor`` (stage name -> candidate
        factors) and ``stages`` (stage name -> list of candidate :class:`StageSchedule`); ``size()`` counts it.
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises DeviceError: when the device's model cannot be had (no usable device, an unreadable recorded model).
    :raises ScheduleError: when ``schedule``'s graph-level decisions do not fit the graph.
    """
    dm = DeviceModel.of(device)
    outs = uniquely_named(outputs)
    ops, _ = stage_ops(outs)
    out_ops = {id(t.op) for t in outs}
    inl = tuple(op.name for op in ops if id(op) not in out_ops and inlinable(op) is None)
    rf = {}
    for op in ops:
        e = _reduction_extent(op)
        if e:
            fs = _rfactor_factors(e)
            if fs:
                rf[op.name] = fs
    if schedule is None:
        schedule = auto_schedule(outs, device=dm, renamed=True)
    from .graph import apply_graph_schedule

    g, _ = apply_graph_schedule(outs, Schedule("graph", inline=schedule.inline, rfactor=schedule.rfactor,
                                               pad=schedule.pad))
    stages = {op.name: stage_candidates(stage_info(op), dm, _padded(op)) for op in stage_ops(g)[0]}
    return Space(inl, rf, stages)


# ---------------------------------------------------------------------------------------------
# the heuristics
# ---------------------------------------------------------------------------------------------
def _consumers(ops):
    """id(op) -> list of (consumer op, number of distinct reads of op's outputs in it)."""
    cons = {id(op): [] for op in ops}
    for op in ops:
        roots = op.body if isinstance(op, ComputeOp) else tuple(v for st in op.statements for v in st.values)
        counts = {}
        for n in post_order(tuple(roots)):
            if isinstance(n, Load) and not isinstance(n.tensor.op, PlaceholderOp):
                counts[id(n.tensor.op)] = counts.get(id(n.tensor.op), 0) + 1
        for pid, k in counts.items():
            if pid in cons:
                cons[pid].append((op, k))
    return cons


def _pure_data_movement(op):
    """A stage that only moves data (reads, selects against zero, casts): inlining it costs nothing."""
    vals = op.body if isinstance(op, ComputeOp) else op.statements[0].values
    for n in post_order(tuple(vals)):
        if isinstance(n, Call) and n.op not in ("select", "cast") and (
                n.dtype.startswith("float") or any(a.dtype.startswith("float") for a in n.args)):
            return False  # arithmetic or comparisons on values
    return True


def _recompute_pays(evals, size, info, dm):
    """Recomputing ``evals - size`` extra points costs less than writing and reading the buffer."""
    per_point = info.flops / max(1, info.iterations)
    # independent elementwise work: scalar code with many independent chains (the calibrated scalar rate)
    extra = (evals - size) * max(per_point, 1) / _rate(1, dm)
    traffic = 2 * size * info.itemsize / (dm.dram_gbs * 1e9)
    return evals <= 16 * size and extra < traffic


# An inlined stage's expression is substituted wherever it is read: down a chain, or where a
# gradient reads a forward stage again, the expression one kernel evaluates grows with the graph
# (a 2000-deep elementwise chain would be one 4000-operation expression).  Past these caps the
# stage is materialised instead: one buffer write and read per point (nanoseconds) against
# compile time and register pressure that grow with the expression.  The ops of pa.ops and pa.nn
# inline into expressions far below the caps (a softmax's or a conv gradient's: under 40
# operations; the 200-deep chain workload's gradient, 273 deep), so they only cut graphs that grow
# without bound.  They are not lower because every kernel costs PoCL about 0.1 s to compile
# whatever its size: a 2000-deep chain cut every 64 operations (65 kernels) took 6.5 s to compile,
# every 512 (8 kernels) 0.7 s.
INLINE_MAX_DEPTH = 512  # operations along the longest path of a kernel's expression
INLINE_MAX_SIZE = 2048  # operations of a kernel's expression


def _expression_roots(op):
    return op.body if isinstance(op, ComputeOp) else tuple(v for st in op.statements for v in st.values)


@dataclass(frozen=True)
class Inlined:
    """What an inlined stage brings into the expression of a kernel that reads it."""

    depth: int  # operations along the longest path of its expression
    own: int  # its operations, less those of the inlined stages it reads pointwise
    points: frozenset  # ids of the inlined stages it reads pointwise, transitively

    def size(self, table):
        """Operations of its whole expression: each stage read pointwise counts once (its reads at the
        point are one hash-consed expression, shared by every reader in the kernel)."""
        return self.own + sum(table[k].own for k in self.points)


def inlined_expression(op, table):
    """The :class:`Inlined` measure of ``op``'s expression with the stages of ``table`` (id(op) ->
    Inlined, the inlined producers) substituted.  A read at the reader's own output point (an
    elementwise chain, a gradient reading its forward stage) shares the producer's expression with
    every other such read; a read elsewhere copies it (counted whole)."""
    axis = tuple(op.axis) if isinstance(op, ComputeOp) else None
    depth, own, points = {}, 0, set()
    for n in post_order(tuple(_expression_roots(op))):
        kids = n.children()
        d = max((depth[id(ch)] for ch in kids), default=0)
        m = table.get(id(n.tensor.op)) if isinstance(n, Load) else None
        if m is not None:
            d += m.depth
            if axis is not None and len(n.indices) == len(axis) and all(a is b for a, b in zip(n.indices, axis)):
                points.add(id(n.tensor.op))
                points |= m.points
            else:
                own += m.size(table)
        elif kids or isinstance(n, Load):
            d, own = d + 1, own + 1
        depth[id(n)] = d
    return Inlined(max((depth[id(r)] for r in _expression_roots(op)), default=0), own, frozenset(points))


def _without(table, gone, keys):
    """``table`` with ``gone`` materialised: out of the table and of the shared stages of ``keys``."""
    out = dict(table)
    del out[gone]
    for k in keys:
        v = out.get(k)
        if v is not None and gone in v.points:
            out[k] = Inlined(v.depth, v.own, v.points - {gone})
    return out


def _cap_inlined(ops, chosen, notes):
    """``chosen`` less the stages to materialise so that no kernel's expression passes the caps.

    Producers first: an op's expression is measured with its inlined producers substituted; while it
    passes a cap, the inlined producer it reads with the largest expression is materialised (a chain
    gets a buffer every INLINE_MAX_DEPTH operations), as long as that shortens the expression: a sum
    of many terms that share their inlined stages (the chain workload's dX sums 200 products of one
    inlined adjoint chain) keeps them, one kernel as large as the graph it reads, rather than a kernel
    per term.  An inlined stage read by several stages gets half the caps: its readers combine it with
    other paths (a gradient stage reads the forward stage and the gradient before it), and a forward
    segment as deep as the cap would leave the gradient's kernels no room (they were cut every few
    stages, each recomputing the forward segment).  Materialising only shortens expressions and lowers
    the evaluations of the stages inlined into the materialised one: the other decisions stay valid
    (the measures of stages already seen only shrink: they are kept as upper bounds)."""
    kept = set(chosen)
    table = {}  # id(op) -> Inlined, for the ops that stay inlined
    by_id = {id(op): op for op in ops}
    readers = {k: len(v) for k, v in _consumers(ops).items()}
    for op in ops:
        share = 2 if op.name in kept and readers.get(id(op), 0) > 1 else 1
        depth_cap, size_cap = INLINE_MAX_DEPTH // share, INLINE_MAX_SIZE // share
        m = inlined_expression(op, table)
        while m.depth > depth_cap or m.size(table) > size_cap:
            reads = {id(x.tensor.op) for x in post_order(tuple(_expression_roots(op)))
                     if isinstance(x, Load) and id(x.tensor.op) in table}
            if not reads:
                break  # its own body is that large: nothing inlined to take out
            worst = max(reads, key=lambda k: (table[k].depth, table[k].size(table)))
            trial = _without(table, worst, reads)
            cut = inlined_expression(op, trial)
            size, new = m.size(table), cut.size(trial)
            if cut.depth >= m.depth and new > size - size // 16:
                notes.append(f"keep {op.name}'s inlined stages: its expression is {m.depth} operations deep, {size} in "
                             "all, and no stage it reads makes it notably smaller materialised")
                break
            kept.discard(by_id[worst].name)
            table = _without(table, worst, table)
            notes.append(f"materialise {by_id[worst].name}: inlined, {op.name}'s expression would be {m.depth} "
                         f"operations deep, {size} in all (caps: {depth_cap} deep, {size_cap} in all"
                         f"{', half: it has several readers' if share > 1 else ''})")
            m = cut
        if op.name in kept:
            table[id(op)] = m
    return frozenset(kept)


def _choose_inline(outs, infos, notes, dm):
    """Li2018: inline reduction-free stages evaluated at most once per point where they end up,
    within the caps on an expression's depth and size."""
    ops, _ = stage_ops(outs)
    return _cap_inlined(ops, _inline_by_evaluations(ops, outs, infos, notes, dm), notes)


def _inline_by_evaluations(ops, outs, infos, notes, dm):
    """The stages Li2018's rule inlines: evaluated at most once per point where they end up, or cheap
    to recompute, or data movement."""
    out_ops = {id(t.op) for t in outs}
    cons = _consumers(ops)
    roots = {}  # id(op) -> {name of materialised stage: (iterations, reads per iteration)}
    chosen = set()
    for op in reversed(ops):
        info = infos[op.name]
        if id(op) in out_ops or inlinable(op) is not None or not cons[id(op)]:
            roots[id(op)] = {op.name: info.iterations}
            continue
        reach = {}
        for c, k in cons[id(op)]:
            for r, it in roots[id(c)].items():
                # reads of the same index in one kernel are one value (hash-consed, emitted once)
                reach[r] = max(reach.get(r, 0), it * (k if id(c) != id(op) else 1))
        evals = sum(reach.values())
        size = max(1, math.prod(op.shape))
        if evals <= size:
            chosen.add(op.name)
            roots[id(op)] = reach
            notes.append(f"inline {op.name}: each point is evaluated once ({evals} evaluations in {', '.join(sorted(reach))})")
        elif _recompute_pays(evals, size, info, dm):
            chosen.add(op.name)
            roots[id(op)] = reach
            notes.append(f"inline {op.name}: recomputing it {evals / size:.1f}x costs less than its buffer's traffic")
        elif _pure_data_movement(op):
            chosen.add(op.name)
            roots[id(op)] = reach
            notes.append(f"inline {op.name}: data movement only, read by {', '.join(sorted(reach))}")
        else:
            roots[id(op)] = {op.name: info.iterations}
            notes.append(f"materialise {op.name}: {evals} evaluations if inlined for {size} points ({info.flops // size} flops each)")
    return frozenset(chosen)


def _interleaves(op):
    """graph.rfactor's choice: sum/max/min stages get interleaved partials (the factor is their count)."""
    b = op.body[0] if isinstance(op, ComputeOp) else None
    return isinstance(b, Reduce) and len(op.body) == 1 and b.combiner.kind() is not None


def _row_axis(op):
    """The reduction axis a single-output sum/max/min reads contiguously (the last index of every
    load that uses it is that axis plus something free of it), or None.  Only pure row reductions:
    every such load uses every output dimension (a matmul's operands are reused across outputs, and
    its register blocks measured faster than interleaved partials: mlp_step's logits 2.67 vs 2.73 ms)."""
    b = op.body[0] if isinstance(op, ComputeOp) else None
    if not isinstance(b, Reduce) or len(op.body) != 1 or b.combiner.kind() is None:
        return None
    ax = max(b.axis, key=lambda a: a.extent)
    seen = False
    for n in post_order(tuple(op.body)):
        if isinstance(n, Load) and any(_uses(ix, ax) for ix in n.indices):
            if not n.indices or not _contiguous(n.indices[-1], ax) or any(_uses(ix, ax) for ix in n.indices[:-1]):
                return None
            if not all(any(_uses(ix, v) for ix in n.indices) for v in op.axis):
                return None
            seen = True
    return ax if seen else None


def _row_factor(e, dm):
    """Partials per output point of an interleaved rfactor: a multiple of half the vector width
    (contiguous lanes) dividing the extent (measured: guarded partials run ragged lanes; conv2d_3x3's dW
    split over x by 8 took 6.5 ms, unsplit 4.1), or None."""
    V = max(dm.vector_width, 1)
    for f in range(4 * V, V // 2 - 1, -max(1, V // 2)):
        if f >= 2 and e % f == 0 and e // f >= 4:
            return f
    return None


_ROW_POINTS = 4096  # outputs up to this size reduce rows too long for a vector across outputs to pay


def _lane_axis(op, dm):
    """The reduction axis a small-output sum reads contiguously, when vectors along its outputs cannot pay.

    A convolution's weight gradient ``dW[co, ci, kh, kw] = sum_{b, y, x} H[b, co, y, x] * X[b, ci, y + kh,
    x + kw]``: its innermost output (kw, 3) is narrower than half a vector, and every load that uses ``x``
    has it, with unit stride, in its last index only.  Interleaving partial sums over ``x`` gives each
    (co, ci, kh, kw) a vector of partials whose lanes load contiguous rows (``vloadN`` of H and of the
    shifted X row).  Returns the axis, or None.
    """
    if isinstance(op, PlaceholderOp) or not op.shape or op.shape[-1] * 2 > max(dm.vector_width, 1):
        return None
    try:
        _, body, _ = _reduction_form(op)  # a compute, or a PolyOp's single box reduction
    except ScheduleError:
        return None
    b = body[0]
    if len(body) != 1 or b.combiner.kind() != "sum":
        return None
    best = None
    for ax in b.axis:
        seen = False
        for n in post_order(tuple(body)):
            if isinstance(n, Load) and any(_uses(ix, ax) for ix in n.indices):
                if not _contiguous(n.indices[-1], ax) or any(_uses(ix, ax) for ix in n.indices[:-1]):
                    seen = False
                    break
                seen = True
        if seen and ax.extent >= 8 and (best is None or ax.extent > best.extent):
            best = ax
    return best


def _lane_factor(e, dm):
    """Lanes of the interleaved partials over an axis of extent ``e``: the vector width (at most the
    device's) with the fewest vector-plus-ragged steps per row (26: 8 lanes, 3 vectors and 2 scalar steps)."""
    V = max(dm.vector_width, 1)
    opts = [f for f in (16, 8, 4) if f <= V and f in dm.widths and f < e]
    return min(opts, key=lambda f: (e // f + e % f, -f)) if opts else None


def _lane_tile(shape, dm):
    """The partial stage's block: whole innermost output dimensions while their accumulators fit the
    FMA slots (dW's 3x3 taps: 9 vectors) and the blocks still fill the device, then the lanes."""
    tile, acc = [1] * (len(shape) - 1), 1
    points = math.prod(shape[:-1])
    for d in range(len(shape) - 2, -1, -1):
        if acc * shape[d] > dm.fma_slots or points // (acc * shape[d]) < dm.min_parallel:
            break
        tile[d] = shape[d]
        acc *= shape[d]
    return tuple(tile) + (shape[-1],)


_PAD_EXTRA = 1.5  # at most this many box iterations per original one


def _choose_pad(outs, dm, notes):
    """Clipped sums (a stride-1 or dilated convolution's data gradient) to run over their bounding box on
    a zero-padded operand: border blocks then vectorise like the interior.  Measured, conv2d_3x3 dX:
    3.5 ms clipped (its best blocks), 1.6 ms padded (16% more multiply-adds, a 2.2 MB copy)."""
    from ..poly.convert import count

    chosen = set()
    for op in stage_ops(outs)[0]:
        found = paddable(op)
        if found is None:
            continue
        st, load, bb = found
        inside = count(st.domain)
        boxed = math.prod(hi - lo + 1 for lo, hi in bb)
        points = max(1, math.prod(op.shape))
        if inside < 16 * points or boxed > _PAD_EXTRA * inside:
            continue  # short reductions (a pad's gradient) or mostly-empty boxes: the border cases pay
        chosen.add(op.name)
        notes.append(f"pad_reads {op.name}: its sum is clipped only by {load.tensor.name}'s bounds; over the "
                     f"bounding box on a zero-padded {load.tensor.name} ({boxed / inside:.2f}x the multiply-adds) "
                     "every block is a full vector block")
    return frozenset(chosen)


def _choose_rfactor(outs, infos, dm, notes):
    """(stage name -> factor or RFactor, names of the row and lane reductions among them)."""
    ops, _ = stage_ops(outs)
    rf, rows = {}, set()
    for op in ops:
        e = _reduction_extent(op)
        info = infos[op.name]
        points = max(1, math.prod(op.shape))
        lanes = dm.kind == "cpu" and points >= dm.min_parallel and info.iterations >= 64 * points
        ax = _lane_axis(op, dm) if lanes else None
        f = _lane_factor(ax.extent, dm) if ax is not None else None
        if f and info.iterations >= 1 << 16:
            rf[op.name] = RFactor(f, ax.name, True)
            rows.add(op.name)
            notes.append(f"rfactor {op.name} by {f} over {ax.name}, interleaved: its innermost output "
                         f"({op.shape[-1]}) is too narrow for vectors; {f} partials per output load "
                         f"contiguous rows along {ax.name} (extent {ax.extent}) as vectors")
            continue
        if (dm.kind == "cpu" and e and e >= 64 and points >= dm.min_parallel
                and points <= _ROW_POINTS and info.iterations >= 1 << 14 and _row_axis(op) is not None):
            f = _row_factor(e, dm)
            if f:
                rf[op.name] = f
                rows.add(op.name)
                notes.append(f"rfactor {op.name} by {f}: {points} outputs each reduce {e} contiguous elements; "
                             f"{f} interleaved partial results per output load them as vectors")
                continue
        if not e or points >= dm.min_parallel or info.iterations < 1 << 15 or e < 64:
            continue
        n_outer = -(-dm.min_parallel // points)
        V = max(dm.vector_width, 1)
        # graph.rfactor interleaves sum/max/min by a factor dividing the extent: ``factor`` partials per
        # point, enough vector blocks for every work-item, each reducing a stride of at least 8 elements
        divs = [f for f in range(8, V * n_outer + 1, 8) if e % f == 0 and e // f >= 8] if _interleaves(op) else []
        if divs:
            factor = divs[-1]
            parts = points * factor
        else:  # blocks of ``factor`` (a power of two; one dividing e would interleave: halve it until not)
            factor = max(8, -(-e // n_outer))
            factor = 1 << (factor.bit_length() - 1)  # a power of two, rounded down: at least n_outer partials
            while _interleaves(op) and factor >= 2 and e % factor == 0:
                factor //= 2
            parts = points * -(-e // factor)
        if factor >= e or factor < 2:
            continue
        rf[op.name] = factor
        notes.append(
            f"rfactor {op.name} by {factor}: {points} output points cannot fill {dm.min_parallel} work-items; "
            f"the partial stage has {parts}"
        )
    return rf, rows


def auto_schedule(outputs, device=None, renamed=False):
    """The auto-scheduler's :class:`~polyad.schedule.Schedule` for the graph of ``outputs``.

    ``device``: a ``pyopencl.Device``, a :class:`DeviceModel` or a recorded
    model (None: the default device), see :meth:`DeviceModel.of`.  The decisions and their reasons are in ``.notes`` and
    ``.describe()``.

    :param outputs: a tensor or a list of tensors.
    :param device: a ``pyopencl.Device``, a :class:`DeviceModel` or a recorded model (None: the default device).
    :param renamed: True when the stages of ``outputs`` already have unique names (as :func:`prepare` makes them);
        False renames them first, as ``pa.show`` names them.
    :returns: the :class:`~polyad.schedule.Schedule` named ``"auto"`` (the same object again for the same tensor
        objects and device model).
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises DeviceError: when the device's model cannot be had (no usable device, an unreadable recorded model).
    """
    dm = DeviceModel.of(device)
    outs = as_tensor_list(outputs, "auto_schedule outputs")
    # a warm build of the same graph (same tensor objects) reuses the decisions
    key = (tuple(id(t) for t in outs), dm, renamed)
    hit = _MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], outs)):
        _MEMO.move_to_end(key)
        return hit[1]
    sched = _auto_schedule(outs, dm, renamed)
    _MEMO[key] = (list(outs), sched)  # holding the tensors keeps their ids unique
    while len(_MEMO) > 64:
        _MEMO.popitem(last=False)
    return sched


_MEMO = OrderedDict()


def _auto_schedule(outs, dm, renamed):
    if not renamed:
        outs = uniquely_named(outs)
    notes = []
    pad = _choose_pad(outs, dm, notes)
    for n in sorted(pad):
        outs = pad_reads(outs, n)
    infos = {op.name: stage_info(op) for op in stage_ops(outs)[0]}
    rf, rows = _choose_rfactor(outs, infos, dm, notes)
    g = outs
    for n in sorted(rf):
        spec = RFactor.of(rf[n])
        g = rfactor(g, n, spec.factor, spec.axis, spec.interleave)
    if rf:
        infos = {op.name: (infos.get(op.name) if op.name not in rf else None) or stage_info(op) for op in stage_ops(g)[0]}
    inline = _choose_inline(g, infos, notes, dm)
    stages = {}
    for op in stage_ops(g)[0]:
        if op.name in inline:
            continue
        info = infos[op.name]
        if op.name.endswith("_rf") and op.name[:-3] in rows:
            # one row's interleaved partials per work-item: F / vec contiguous vector accumulators (measured,
            # softmax bwd: the model's smaller blocks 3.19 ms, these 3.14, no rfactor 3.36; hand TE 3.01)
            f = op.shape[-1]
            vec = max(v for v in dm.widths if v <= max(dm.vector_width, 1) and f % v == 0)
            if isinstance(rf[op.name[:-3]], RFactor):
                # measured, conv2d_3x3 dW: 1x1x3x3x8 2.1 ms (4.0 unsplit), 2x1x3x3x8 2.4-2.7, 1x1x1x3x8 3.9
                best = StageSchedule(tile=_lane_tile(op.shape, dm), vectorize=vec)
                why = "a lane vector per output, the innermost outputs' accumulators in registers"
            else:
                best = StageSchedule(tile=(1,) * (len(op.shape) - 1) + (f,), vectorize=vec)
                why = f"a row's {f} partials, contiguous vectors"
            stages[op.name] = best
            notes.append(f"{op.name}: {best.describe()} ({why})")
            continue
        whole = _padded_rows(op, dm)
        if whole is not None:
            stages[op.name] = whole
            notes.append(f"{op.name}: {whole.describe()} (a padded box reduction: whole rows of "
                         f"{op.shape[-1]} as vectors, no cut blocks)")
            continue
        cands = stage_candidates(info, dm, _padded(op))
        if not info.simple and len(info.shape) >= 2:
            # measured (max-pool's argmax, a tuple reducer run through selects): blocks along the last
            # dimension only, of at least 8 (1x1x1x8..32: 2x faster than 4x1x2x2 and 1x1x1x4, 3x than 1x1x2x8)
            wide = min(8, info.shape[-1])
            cands = [ss for ss in cands if ss.tile and ss.tile[-2] == 1 and ss.tile[-1] >= wide] or cands
        costs = [(stage_cost(info, ss, dm), ss) for ss in cands]
        floor = min(c for c, _ in costs)
        near = [ss for c, ss in costs if c <= floor * 1.03 + 1e-6]
        naive = stage_cost(info, StageSchedule(), dm)
        if info.reduction and floor > 0.9 * naive:
            # the model cannot tell a block from the naive loops apart: keep naive (never slower)
            notes.append(f"{op.name}: naive loops (no block is estimated 10% faster: {floor * 1e3:.3f} ms "
                         f"vs {naive * 1e3:.3f} ms)")
            continue
        if floor - dm.launch_s < 1.8e-5 or not info.reduction:
            # a tiny or elementwise stage: the smallest block wins (less code, faster builds, the same speed)
            best = min(near, key=_size_key)
        else:
            # measured (benchmarks/bench_kernels.py): 6-8 rows by 2 vectors is the best register block
            best = min(near, key=_shape_key)
        if dm.local_sizes and len(op.shape):
            best = _with_local_size(best, info, dm)
        if best != StageSchedule():
            stages[op.name] = best
            notes.append(
                f"{op.name}: {best.describe()} ({info.iterations} iterations, {info.flops} flops, "
                f"model {stage_cost(info, best, dm) * 1e3:.3f} ms)"
            )
    return Schedule("auto", stages=stages, inline=inline, rfactor=rf, notes=tuple(notes), pad=pad)


def _padded(op):
    return getattr(op, "tag", "") == "padded"


def _padded_rows(op, dm):
    """The block of a stage :func:`~polyad.schedule.graph.pad_reads` made a box: two whole rows of
    vectors, when the row splits into vectors of at least 4 (else None: the model chooses).

    Measured, conv2d_3x3 dX on a padded H (32x17x28x28), min of 6 alternating rounds: 1x1x2x28/float4
    1.75 ms, 1x4x1x28 1.6, 2x1x1x28 2.0, and the model's favourites 4x1x4x4 3.1, 4x1x1x28 5.0 (the model
    counts loads per step and cut blocks, and misses what separate rows of H cost).  The dilated
    convolution's 34-wide rows do not split: the model's 1x4x2x32/float16 took 0.49 ms."""
    if not _padded(op) or len(op.shape) < 2 or dm.kind != "cpu":
        return None
    e = op.shape[-1]
    vec = next((v for v in (16, 8, 4) if v <= dm.vector_width and v in dm.widths and e % v == 0), None)
    if vec is None or e > 64:
        return None
    r = 2 if op.shape[-2] >= 2 and 2 * e // vec <= 28 else 1
    return StageSchedule(tile=(1,) * (len(op.shape) - 2) + (r, e), vectorize=vec)


def _shape_key(ss):
    if not ss.tile or len(ss.tile) < 2:
        return (1, 0) + _size_key(ss)
    cols = ss.tile[-1] // ss.vectorize
    return (abs(cols - 2), -min(ss.tile[-2], 8)) + _size_key(ss)


def _size_key(ss):
    # among equal costs prefer smaller blocks and less unrolling (less code)
    return (math.prod(ss.tile) if ss.tile else 1, ss.unroll, -ss.vectorize)


def _with_local_size(ss, info, dm):
    import dataclasses

    tile = ss.tile or (1,) * len(info.shape)
    inner_blocks = -(-info.shape[-1] // tile[-1])
    for ls in sorted(dm.local_sizes, reverse=True):
        if inner_blocks >= ls:
            return dataclasses.replace(ss, local_size=(ls,))
    return ss
