"""The cost model: what a stage is (isl counts) and what a schedule of it costs on a device.

Halide's Adams2019 split: features of a stage, read once off its polyhedral statements, then a model
over (features, schedule, device).  The model is a roofline per block of ``tile`` outputs with
``v``-lane vectors and ``u``-fold unrolling::

    t = max(flops / (rate(v) * ilp),  cache bytes / cache_bw + DRAM bytes / dram_bw,  loads / load_rate)
        / busy + launch

``ilp``: independent accumulators (``tile / v``) against the device's FMA slots; ``cache bytes``: the
elements each block reads per reduction step (a read reused along a tiled dimension is loaded once per
block); ``DRAM bytes``: the outputs and each read once, and the outputs again where a plain store first
reads its line from memory (:func:`streams`: outputs the last-level cache cannot hold, on a device whose
nontemporal stores do not); ``busy``: blocks against the work-items that keep the device busy.  Blocks
that are not full tiles of a non-rectangular domain (isl: the interior where a point's reduction slice is
the whole box) run codegen's naive loops and cost what those cost; on strided domains only stride-cell blocks fix each
lane's bounds.  A phased schedule (``StageSchedule.phase``) costs its blocks over ``q`` on the phased
statements' own counts (:meth:`StageInfo.phase_info`), plus lane-by-lane stores along a phased ``q`` and its
build amortised (:func:`phase_build_s`).  It ranks schedules; it does not predict times.  :func:`stage_features` flattens a
(stage, schedule) pair and the model's terms into numbers for a learned model.
"""

import dataclasses
import functools
import math
from dataclasses import dataclass

from ..te.expr import Call, Const, Load
from ..te.memo import Recent
from ..te.visit import post_order
from ..poly.bounds import interval
from ..poly.estimate import statement_cost
from ..poly.scatter import blocks as scatter_blocks, scatter_form
from ..poly.stage import statements_of
from . import VECTOR_WIDTHS, StageSchedule, moved_tile, remainder_widths

__all__ = ["StageInfo", "stage_info", "full_fraction", "block_count", "stage_cost", "stage_features", "phase_build_s",
           "output_bytes", "streams", "FEATURES", "STRIDED_NAIVE", "PARTIAL_PENALTY", "box_groups", "load_issue"]


@dataclass(frozen=True)
class StageInfo:
    """What the model reads off a stage (:func:`stage_info`): isl counts, reads, regions, strides.

    :param name: the stage's name.
    :param shape: its output shape.
    :param iterations: isl count of its statement instances.
    :param flops: its arithmetic operations, counted per instance.
    :param reduction: True when a statement reduces.
    :param itemsize: bytes per output element.
    :param loads: per distinct read: (frozenset of the output dimensions its indices use, contiguous along the
        last dimension).
    :param regions: per statement: (iterations, interior intervals or None, output intervals).
    :param simple: no tuple/custom combiner (those reduce through selects, lane by lane).
    :param shared: fraction of reduction iterations a point shares with its neighbour along the last dimension.
    :param strided: a reduction bound or a compared index divides an output index (a strided convolution's dX).
    :param strides: per output dimension, the largest such divisor (1: none).
    :param vectors: False for a stage with a bool output (OpenCL has no bool vectors).
    :param phases: the phase combinations its statements come from (1; a phased stage's info: the product of
        the strides, its ``shape`` the ``q`` extents).
    :param phased: ``((phase, StageInfo), ...)``: the info of the stage under each phase decomposition the
        ``stride_phases`` rule proposes (empty: none), see :meth:`phase_info`.
    :param divided: a read's last index is the last output index floor-divided (``x // 2``: a pool's upsampled
        gradient), which PoCL's work-item vectoriser does not widen.
    :param outputs: its output tensors (a tuple reducer's argmax has two).
    :param scatter: for a one-hot sum, which codegen runs as a scatter under the schedules
        :func:`~polyad.poly.scatter.blocks` allows, the info of its loop nest after the zeroing: a reduction over
        the reduction points per point of the other output dimensions; else None.
    :param scatter_dims: the output dimensions that scatter picks (``()`` for other stages).
    :param domains: per reducing statement of a stage with regions, ``(output dimensions, its domain as an isl
        string)``: what :func:`ragged_share` reads (not compared).
    :param footprints: per distinct read of a reduction, ``(itemsize, ((size, span, slopes), ...))``, one triple
        per index: the tensor's extent there, the index's span over the reduction alone, and its growth per
        point of each output dimension of a block (:func:`block_footprint`); ``()`` for stages without
        reductions.
    """

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
    phases: int = 1  # phase combinations its statements come from (a phased stage's info: prod of the strides)
    phased: tuple = ()  # ((phase, StageInfo over q), ...) for the phases the stride_phases rule proposes
    divided: bool = False  # a read's last index is the last output index // k (k >= 2): x // 2
    outputs: int = 1  # output tensors
    scatter: object = None  # a one-hot sum (poly/scatter.py): the StageInfo of its scatter's loop
    scatter_dims: tuple = ()  # the output dimensions its scatter picks
    footprints: tuple = ()  # per read of a reduction: (itemsize, ((size, span, slopes), ...)) per index
    domains: tuple = dataclasses.field(default=(), compare=False, repr=False)  # (n_out, isl set) per reduction

    def phase_info(self, phase):
        """The info of the stage under ``phase`` (a ``StageSchedule.phase``), or None when it was not read off.

        :param phase: a tuple of strides, one per output dimension.
        :returns: a :class:`StageInfo` over the ``q`` extents, or None.
        """
        phase = tuple(phase)
        return next((p for ph, p in self.phased if ph == phase), None)


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


def block_count(info, tile):
    """The work-items of a stage in blocks of ``tile`` (None: the naive loops, one a point): a phased info's
    blocks hold every phase, so they tile its ``q`` shape alone."""
    if not info.shape:
        return 1
    return math.prod(-(-s // t) for s, t in zip(info.shape, tile or (1,) * len(info.shape)))


def full_fraction(info, tile):
    """The fraction of a stage's iterations in full tiles of ``tile`` (the rest runs naive loops).

    :param info: the stage's :class:`StageInfo`.
    :param tile: the block, one size per output dimension (None or empty: 1.0).
    :returns: a float in [0, 1].
    """
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


def _plus_free(index, var, core):
    """True if ``index`` is a ``core`` term plus (or minus) something free of ``var``."""
    if core(index):
        return True
    if isinstance(index, Call) and index.op in ("add", "sub") and len(index.args) == 2:
        a, b = index.args
        return (_plus_free(a, var, core) and not _uses(b, var)) or (
            index.op == "add" and _plus_free(b, var, core) and not _uses(a, var))
    return False


def _contiguous(index, var):
    """True if ``index`` is ``var`` plus something free of ``var`` (unit stride)."""
    return _plus_free(index, var, lambda e: e is var)


def _divided(index, var):
    """True if ``index`` is ``var // k`` (k >= 2) plus something free of ``var``: k consecutive points read one
    element."""
    return _plus_free(index, var, lambda e: isinstance(e, Call) and e.op == "floordiv" and len(e.args) == 2
                      and e.args[0] is var and isinstance(e.args[1], Const) and e.args[1].value >= 2)


def scale_of(index, var):
    """``k`` where ``index`` is ``k * var`` (a constant ``k >= 2``) plus something free of ``var``: lanes ``k``
    elements apart (a stride-2 pool's window ``X[.., 2*x + kw]``); None otherwise."""
    found = []

    def core(e):
        if isinstance(e, Call) and e.op == "mul" and len(e.args) == 2 and any(a is var for a in e.args):
            found.extend(a.value for a in e.args if isinstance(a, Const) and isinstance(a.value, int) and a.value >= 2)
            return bool(found)
        return False

    return found[-1] if _plus_free(index, var, core) else None


def _uses(e, var):
    return any(n is var for n in post_order(e))


#: (stage name, tuning.stage_key) -> StageInfo: graph transformations rebuild the stages they leave alone as new
#: ops, and the tuner builds dozens of graph variants (lenet_step's 40 first: 2750 infos asked, under 200 distinct)
_INFOS = Recent(2048)


def stage_info(op):
    """The :class:`StageInfo` of a computed stage (isl counts of its statements; deterministic).

    Computed once per stage structure and name (:func:`~polyad.schedule.tuning.stage_key`: the info is read off
    the statements, the shapes and the dtypes, which the key covers, and carries the name).

    A stage the ``stride_phases`` rule proposes phases for (:func:`~polyad.schedule.phase.phase_strides`)
    also gets the info of each proposed phase decomposition (``phased``): the same counts read off its
    phased statements (:func:`polyad.codegen.phase.phase_statements`), over the ``q`` extents.

    :param op: a ``ComputeOp`` or polyhedral stage.
    :returns: its :class:`StageInfo`.
    """
    from .tuning import stage_key

    key = (op.name, stage_key(op))
    hit = _INFOS.get(key)
    return hit if hit is not None else _INFOS.put(key, _stage_info(op))


def _stage_info(op):
    import numpy as np

    stmts = statements_of(op)
    info = _info_of(op.name, tuple(op.shape), stmts, np.dtype(op.output_dtype(0)).itemsize,
                    box=not hasattr(op, "statements"))
    if any(op.output_dtype(i) == "bool" for i in range(op.num_outputs)):
        info = dataclasses.replace(info, vectors=False)
    if op.num_outputs > 1:
        info = dataclasses.replace(info, outputs=op.num_outputs)
    phased = _phased_infos(op, stmts, info)
    if phased:
        info = dataclasses.replace(info, phased=phased)
    form = scatter_form(op)
    if form is not None:
        shape = tuple(x for d, x in enumerate(op.shape) if d not in form.dims)
        info = dataclasses.replace(info, scatter=_info_of(op.name, shape, [form.loop_statement(stmts[form.index])],
                                                          info.itemsize, box=False), scatter_dims=form.dims)
    return info


def _info_of(name, shape, stmts, itemsize, box, phases=1):
    """The :class:`StageInfo` of statements ``stmts`` over output ``shape`` (``box``: a compute, one statement
    over the whole box: no regions; ``phases``: the phase combinations ``stmts`` come from)."""
    it = fl = 0
    loads, red, regions, plain, shared, strides, divided = [], False, [], True, [], [], False
    footprints, domains = [], []
    first = {}  # a phased stage's reads per step: those of one phase of each source statement
    for st in stmts:
        i, f = statement_cost(st)
        it += i
        fl += f
        if not box:
            inner, outer = _regions(st)
            if outer is not None:
                regions.append((i, inner, outer))
                if st.combiner is not None:
                    domains.append((st.n_out, str(st.domain.reset_tuple_id())))
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
        src = getattr(st, "source", None)
        if src is not None and first.setdefault(id(src), st) is not st:
            continue
        outs = st.out_vars
        ranges = _var_ranges(st) if st.combiner is not None else None
        for n in post_order(tuple(st.values)):
            if isinstance(n, Load):
                if ranges is not None:
                    footprints.append(_footprint_of(n, outs, ranges))
                used = frozenset(d for d, v in enumerate(outs) if any(_uses(ix, v) for ix in n.indices))
                last = outs[-1] if outs else None
                contig = bool(outs) and len(n.indices) > 0 and _contiguous(n.indices[-1], last) and not any(
                    _uses(ix, last) for ix in n.indices[:-1])
                loads.append((used, contig))
                divided |= last is not None and len(n.indices) > 0 and _divided(n.indices[-1], last)
    info = StageInfo(name, shape, max(it, 1), fl, red, itemsize, tuple(loads), tuple(regions), plain,
                     sum(i * f for i, f in shared) / max(1, sum(i for i, _ in shared)) if shared else 1.0,
                     phases=phases, divided=divided, footprints=tuple(footprints), domains=tuple(domains))
    # strides matter where most points' bounds or indices are divisions (stride-3 conv dX: no point has the
    # whole reduction box), not where only the borders are (dilated conv dX keeps its vector blocks)
    if any(x > 1 for x in strides) and (not red or full_fraction(info, (1,) * len(info.shape)) < 0.5):
        info = dataclasses.replace(info, strided=True, strides=tuple(strides))
    return info


# ---------------------------------------------------------------------------------------------
# footprints: what a block reads over its whole reduction
# ---------------------------------------------------------------------------------------------
def _var_ranges(st):
    """{id(var): (lo, hi)} of a statement's reduction variables over its domain, and of its output variables at 0
    (a block's first point); None for an empty domain."""
    from ..poly.convert import bounds

    D = st.domain.reset_tuple_id()
    if D.is_empty():
        return None
    red = bounds(D)[st.n_out:]
    return {**{id(v): (0, 0) for v in st.out_vars}, **{id(v): r for v, r in zip(st.red_vars, red)}}


#: a block's growth along an output dimension is read over this many points (a division's slope exactly)
_SLOPE_POINTS = 721


def _footprint_of(load, outs, ranges):
    """(itemsize, ((size, span, slopes), ...)) of a read in a reduction (:data:`StageInfo.footprints`)."""
    import numpy as np

    def span(env):
        return interval(ix, lambda v: env.get(id(v), (-math.inf, math.inf)))

    dims = []
    for k, ix in enumerate(load.indices):
        size = int(load.tensor.shape[k])
        base = span(ranges)
        if math.isinf(base[0]) or math.isinf(base[1]):  # data-dependent: the block may read anywhere along it
            dims.append((size, size - 1, (0.0,) * len(outs)))
            continue
        slopes = []
        for v in outs:
            grown = span({**ranges, id(v): (0, _SLOPE_POINTS - 1)})
            slopes.append(((grown[1] - grown[0]) - (base[1] - base[0])) / (_SLOPE_POINTS - 1))
        dims.append((size, base[1] - base[0], tuple(slopes)))
    return np.dtype(load.tensor.dtype).itemsize, tuple(dims)


#: bytes of a cache line (the refill term counts lines; 64 on the CPUs OpenCL runs on)
LINE = 64


def block_footprint(info, tile):
    """The bytes a block of ``tile`` reads over its whole reduction, and the cache lines they lie on.

    Each read's elements are a box: along each index, its span over the reduction plus its slopes times the
    block's extents, at most the tensor's extent; its rows (the last index) at a random offset lie on
    ``1 + (row bytes - itemsize) / LINE`` lines each.  A 4x1x6x16 block of a 3x3/2 convolution over 32 channels
    (``S[b, c, h % 2, w % 2, y + h // 2, x + w // 2]`` de-interleaved): 4 x 32 x 4 x 7 rows of 17, 244 KB.

    :param info: the stage's :class:`StageInfo`.
    :param tile: the block, one size per output dimension (None: a point).
    :returns: ``(bytes, lines)``.
    """
    tile = tile or (1,) * len(info.shape)
    total = lines = 0.0
    for itemsize, dims in info.footprints:
        ext = [min(size, span + 1 + math.ceil(sum(c * (t - 1) for c, t in zip(slopes, tile)) - 1e-9))
               for size, span, slopes in dims]
        rows = math.prod(ext[:-1]) if ext else 1
        row = (ext[-1] if ext else 1) * itemsize
        total += rows * row
        lines += rows * (1 + (row - itemsize) / LINE)
    return total, lines


def _phased_infos(op, stmts, info):
    """((phase, StageInfo over q), ...) for the phases the ``stride_phases`` rule proposes for ``op``."""
    from ..codegen.phase import phase_shape, phase_statements
    from .space import phase_options  # the rule's (space imports this module: at call time)

    out = []
    for ph in phase_options(op, info):
        pst = phase_statements(op, stmts, ph)
        p = _info_of(op.name, phase_shape(info.shape, ph), pst, info.itemsize, box=False, phases=math.prod(ph))
        out.append((ph, dataclasses.replace(p, vectors=info.vectors)))
    return tuple(out)


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
# the model
# ---------------------------------------------------------------------------------------------
def stage_cost(info, ss, dm, terms=None):
    """Estimated seconds of one stage under ``ss`` on ``dm`` (a model: it ranks, it does not predict).

    Blocks that are not full tiles run the naive loops: their share costs what the naive schedule costs.

    :param info: the stage's :class:`StageInfo`.
    :param ss: the :class:`~polyad.schedule.StageSchedule` (its ``local_size`` and ``grid_dims`` are not
        modelled; a ``phase`` is, where ``info`` holds that phase's info (``info.phased``), else it is ignored).
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :param terms: the block's roofline terms where the caller has them (:func:`stage_features`): those of ``info``
        and ``ss``, or of a phased schedule's phase info and ``ss`` without its phase.
    :returns: seconds, a float.
    """
    tile = scatter_blocks(info.scatter_dims, ss, len(info.shape)) if info.scatter is not None else None
    if tile is not None:
        return _scatter_cost(info, tile, dm)
    if ss.phase is not None and any(x > 1 for x in ss.phase):
        p = info.phase_info(ss.phase)
        if p is not None:
            return _phased_cost(p, ss, dm, terms)
        ss, terms = dataclasses.replace(ss, phase=None), None  # a phase the rule does not propose: not modelled
    if info.strided:
        # measured (conv2d 5x5 stride 3 dX, 2x2/2 max-pool dX): a block of exactly one stride cell along the
        # strided dimensions fixes each lane's reduction bounds (conv dX 35 -> 18 ms, pool dX ~30 -> ~6 ms);
        # the naive loops and any other block evaluate floor-division bounds per point (2x the model)
        # (scalar: 1x1x2x2/float2 blocks of the pool gradient measured 1.6x slower than scalar ones)
        if ss.tile and ss.vectorize == 1 and all(t == s for t, s in zip(ss.tile, info.strides) if s > 1):
            return _blocked_cost(info, ss, dm, terms)
        return STRIDED_NAIVE * _unstrided_cost(info, ss, dm, terms)
    return _unstrided_cost(info, ss, dm, terms)


def _phased_cost(p, ss, dm, terms=None):
    """A phased stage: per phase a stride-1 sub-stage over ``q`` (``p``, its info read off the phased statements:
    the reduction window of a stride-``s`` convolution's data gradient is ``ceil(k/s)`` per dimension and slides
    with ``q``, no floor-division bounds; the ragged border groups are ``p``'s partial blocks), its blocks the
    tile over ``q`` with every phase inside each work-item; plus lane-by-lane stores when the vectorised
    dimension is phased, and the build: ``phases x block statements`` copies of code, amortised over runs."""
    q = dataclasses.replace(ss, phase=None)
    t = stage_cost(p, q, dm, terms)  # p.strided only where a phase leaves divisions (not for its own strides)
    if ss.vectorize > 1 and ss.phase[-1] > 1:  # stores s apart, one per lane
        t += math.prod(p.shape) * p.phases / (dm.load_rate * 1e9)
    return t + phase_build_s(ss)


def phase_build_s(ss):
    """The build time a phased schedule adds, amortised over the ``stride_phases`` rule's runs: its code is the
    block's statements (``tile / vectorize``) once per phase combination.

    :param ss: a :class:`~polyad.schedule.StageSchedule` with a ``phase``.
    :returns: seconds per run, a float (0.0 without phases).
    """
    from .space import RULE  # the rule's constants (space imports this module: at call time)

    if ss.phase is None:
        return 0.0
    k = RULE["stride_phases"].constants
    phases = math.prod(ss.phase)
    if phases <= 1:
        return 0.0
    statements = max(1, math.prod(ss.tile or (1,)) // max(1, ss.vectorize))
    return phases * statements * k["build_s_per_statement"] / k["amortised_runs"]


# measured: conv2d 5x5 stride 3 dX 35 ms naive against 18 ms in stride-cell blocks, 2x2/2 max-pool dX ~30 ms
# against ~6 ms: a strided stage costs this many times the model outside stride-cell blocks
STRIDED_NAIVE = 2.0


def _unstrided_cost(info, ss, dm, terms=None):
    frac = full_fraction(info, ss.tile) if ss.tile else 1.0
    t = _blocked_cost(info, ss, dm, terms)
    if frac < 1.0:
        # measured: on strided domains (conv2d 5x5 stride 3 and dilated dX) the per-point loops of partial
        # blocks run 1.4-1.5x slower than the naive schedule's (per-point floor-division bounds, guards, no
        # unrolling); elsewhere (boxes' edge blocks, stride-1 convolution borders) as fast as naive loops
        pen = PARTIAL_PENALTY if info.strided else 1.0
        naive = pen * _naive_blocked(info, 1 if info.strided else ss.unroll, dm)
        # codegen's ragged vector groups run the vector update over the reduction points their lanes share
        # (V lanes share about 1 - (V - 1) * (1 - shared) of them); measured, that pays only where most
        # points have the whole reduction box (conv2d 3x3 dX: float8 blocks 2x faster than scalar ones),
        # not on a stride-3 data gradient, where no point has it (vector blocks 1.6-2.5x slower than naive)
        lanes = 0.0
        share = ragged_share(info, ss.tile[-1], ss.vectorize, dm.widths) if ss.vectorize > 1 else None
        if share is not None:
            # codegen's vector groups in the partial blocks: the reduction points all their lanes have run as vectors,
            # a lane's own points as vec scalar chains beside them, and the points in no whole group as naive loops
            ragged, odd = share
            odd = min(1.0 - frac, odd)
            ragged = min(1.0 - frac - odd, ragged)
            lane_cost = _blocked_cost(info, StageSchedule(tile=(1,) * (len(info.shape) - 1) + (ss.vectorize,)), dm)
            return (1.0 - ragged - odd) * t + ragged * lane_cost + odd * naive
        if ss.vectorize > 1 and info.regions:
            q = full_fraction(info, (1,) * len(info.shape))
            lanes = max(0.0, 1.0 - (ss.vectorize - 1) * (1.0 - info.shared)) * min(1.0, q / 0.5)
        elif ss.vectorize > 1 and not info.strided:  # a box: its edge blocks' whole groups run as vectors
            share = box_groups(info.shape, ss.tile, ss.vectorize, dm.widths, info.reduction)
            return (frac + share) * t + max(0.0, 1.0 - frac - share) * naive
        t = frac * t + (1.0 - frac) * (lanes * t + (1.0 - lanes) * naive)
        return t
    return t


def box_groups(shape, tile, vec, widths, reduction, moved=True):
    """The fraction of a box stage's points outside its full tiles that run in vector groups or a moved tile, each
    charged as a full tile's point (above 1 - full_fraction where a moved tile computes points twice).

    Codegen (``tree._split_tiles``) runs the whole ``vec``-lane groups of the edge blocks as vectors, and a
    reduction's remainder in narrower groups of the device's ``widths`` (:func:`~polyad.schedule.remainder_widths`);
    the rest (an odd remainder) runs scalar loops, charged as the naive schedule's.  A 1000-wide matmul in
    8x32/float16 tiles: 0.8% of its points, one float8 group a row.  A narrower group is not charged more a point:
    on a gathered matmul (60x300, ``W[j, k]`` along ``j``) that made float8 tiles win, which ran 1.3x slower than
    float16 ones with their remainder in float8 and float4.  Where the remainder would take more groups than a
    tile has vectors (:func:`~polyad.schedule.moved_tile`), the full rows' last tile moves back over it: a tile's
    points, rows of 28 in tiles of 16 charged as 32 (measured: a 3x3/2/1 conv2d's stage 1.46x faster than in a
    float8 and a float4 group).

    :param shape: the stage's output shape (a box).
    :param tile: its tile, one size per dimension.
    :param vec: the vector width of its last dimension.
    :param widths: the vector widths the device compiles.
    :param reduction: True when the stage reduces (assignments keep a scalar remainder).
    :param moved: whether codegen moves its last tiles (False: as it did before it could).
    :returns: a float, at least 0.
    """
    n, t = shape[-1], tile[-1]
    rows = math.prod((m // u) * u / m for m, u in zip(shape[:-1], tile[:-1]))
    cols = (n // t) * t
    share = (1.0 - rows) * cols / n  # the edge rows of the full columns: whole groups
    left = n - cols
    narrower = remainder_widths(vec, widths) if reduction else ()
    grouped = 1.0  # the rows whose rest runs in groups
    if moved and moved_tile(n, t, vec, narrower):
        share, grouped = share + rows * t / n, 1.0 - rows
    for w in (vec,) + narrower:
        share, left = share + grouped * (left // w) * w / n, left % w
    return share


#: (domains, tile, vec, widths) -> (ragged, odd): ragged_share's isl counts, a few per stage and block width
_RAGGED = Recent(4096)


def ragged_share(info, tile, vec, widths):
    """The fractions of a stage's iterations that its partial blocks run lane by lane: ``(ragged, odd)``.

    Codegen (``tree._split_tiles``) cuts the last output dimension into the full tiles' ``vec``-lane groups (blocks
    of ``tile`` from 0), then the rest of each row into whole groups of ``vec`` and of the narrower
    :func:`~polyad.schedule.remainder_widths`, widest first; points in none run scalar loops (``odd``).  A group
    whose lanes reduce over different sets runs their common points as a vector and each lane's others alone
    (``ragged``: those points, counted with isl over each reducing statement).  A 3x3/2/1 convolution's phased data
    gradient over rows of 28 in float16 blocks of 16: the border column's clipped window falls in the last float4
    group, 3.6% of its iterations; the share of one neighbour's lost points times 15 lanes had priced 54%.

    :param info: the stage's :class:`StageInfo` (None is returned without ``domains``).
    :param tile: the block's extent along the last dimension (a multiple of ``vec``).
    :param vec: the vector width.
    :param widths: the device's vector widths.
    :returns: ``(ragged, odd)``, floats in [0, 1], or None.
    """
    if not info.domains or vec <= 1:
        return None
    key = (info.domains, tile, vec, tuple(widths))
    hit = _RAGGED.get(key)
    if hit is None:
        hit = _RAGGED.put(key, _ragged_counts(info.domains, tile, vec, remainder_widths(vec, widths)))
    return hit


def _ragged_counts(domains, tile, vec, narrower):
    import islpy as isl

    from ..poly.convert import bounds, count

    ragged = odd = total = 0
    for n, text in domains:
        D = isl.Set(text)
        m = D.dim(isl.dim_type.set) - n
        size = count(D)
        total += size
        if not size:
            continue
        O = D.project_out(isl.dim_type.set, n, m)
        hi = bounds(O)[-1][1] + 1
        full = hi // tile * tile
        pieces, at = [], full  # the groups of each row's rest, widest first, aligned from the last full tile
        for w in (vec,) + tuple(narrower):
            while at + w <= hi:
                pieces.append((at, w))
                at += w
        names = [f"d{i}" for i in range(n + m)]
        x, p = names[n - 1], "pa_p"
        lanes = [f"(exists g: {vec}*g <= {x} < {vec}*g + {vec} and {vec}*g <= {p} < {vec}*g + {vec} and {x} < {full})"]
        lanes += [f"({a} <= {x} < {a + w} and {a} <= {p} < {a + w})" for a, w in pieces]
        M = isl.Map(f"{{ [{', '.join(names)}] -> [{', '.join(names[:n - 1] + [p] + names[n:])}] : "
                    f"{' or '.join(lanes)} }}")
        box = " and ".join(f"{lo} <= {names[n + k]} <= {b}" for k, (lo, b) in enumerate(bounds(D)[n:])) or "true"
        missing = O.insert_dims(isl.dim_type.set, n, m).intersect(isl.Set(f"{{ [{', '.join(names)}] : {box} }}"))
        ragged += count(D.intersect(missing.subtract(D).apply(M)))
        if at < hi:
            odd += count(D.intersect(isl.Set(f"{{ [{', '.join(names)}] : {at} <= {x} }}")))
    return (ragged / total, odd / total) if total else (0.0, 0.0)


#: (id(info), id(dm), unroll) -> (info, dm, seconds): the naive loops' cost, which every candidate of a stage charges
#: its partial blocks and the learned model's features read (lenet_step's search: 60000 feature rows in 40 rounds)
_NAIVE = Recent(4096)


def _naive_blocked(info, unroll, dm):
    """``_blocked_cost`` of the naive loops (unrolled ``unroll`` times) of a stage, remembered per info."""
    key = (id(info), id(dm), unroll)
    hit = _NAIVE.get(key)
    if hit is not None and hit[0] is info and hit[1] is dm:  # the objects held: an id is not reused meanwhile
        return hit[2]
    return _NAIVE.put(key, (info, dm, _blocked_cost(info, StageSchedule(unroll=unroll), dm)))[2]


def naive_cost(info, dm):
    """``stage_cost(info, StageSchedule(), dm)``, remembered: the naive loops, ``STRIDED_NAIVE`` times over on a
    strided stage, as :func:`stage_cost` charges them (they are no stride-cell blocks)."""
    return (STRIDED_NAIVE if info.strided else 1.0) * _naive_blocked(info, 1, dm)


def _scatter_cost(info, tile, dm):
    """codegen/tree.py's ``_scatter_stage``: zero the output, then each work-item's loop over the reduction points,
    a block of the other output dimensions a point (``tile``: the block, 1 along the picked dimensions)."""
    zero = output_bytes(info) / (dm.dram_gbs * 1e9)
    if any(t > 1 for t in tile[:-1]):  # the block's points are not contiguous: as many strided stores
        cost = SCATTER_STRIDED * (zero + _unstrided_cost(info.scatter, StageSchedule(), dm))
    else:
        # the block's points are an inner loop LLVM vectorises (no accumulators: priced as a vector block)
        last = len(info.shape) - 1
        w = max((x for x in dm.widths if tile[-1] % x == 0), default=1) if last not in info.scatter_dims else 1
        sub = StageSchedule(tile=tuple(t for d, t in enumerate(tile) if d not in info.scatter_dims) or None,
                            vectorize=w if w in VECTOR_WIDTHS else 1)
        cost = zero + _unstrided_cost(info.scatter, sub, dm)
        if dm.kind == "cpu" and tile[-1] == 1 and last not in info.scatter_dims and info.shape[-1] >= 8:
            cost *= SCATTER_COLUMNS  # a work-item a column: the rows it adds to, one element of each

    if dm.kind == "gpu":
        # a work-item's loop is a chain of read-modify-writes of memory, one a reduction point and block point:
        # at least a round trip each (not measured on a GPU; the roofline terms priced an embedding's gradient,
        # 64 work-items of 4096 points, at 0.04 ms on the H200)
        chain = info.scatter.iterations / max(1, math.prod(info.scatter.shape)) * math.prod(tile)
        cost = max(cost, chain * SCATTER_GPU_ROUND_TRIP_S)
    return cost


# measured: a scatter with a work-item per column of its output (naive loops along an unpicked last dimension)
# against rows in blocks, one process each: an embedding's gradient 0.37-0.46 ms against 0.084 in 1x8 blocks
# (10000 x 64, 4096 indices), 0.080 against 0.036 in 1x32 (2000 x 32, 512): the model had them about even
SCATTER_COLUMNS = 2.0

#: a dependent read-modify-write of a GPU's memory, the order of its latency (not a measurement of this project)
SCATTER_GPU_ROUND_TRIP_S = 5e-7

# measured: a scatter's blocks along an output dimension other than the last (its points strided in memory) ran
# 1.7x its naive loops (a 3x3/2 max pool's dX, 16x32x56x56: 4x1x1x1 and 1x8x1x1 0.80-0.87 ms, naive 0.475)
SCATTER_STRIDED = 1.7

# measured: partial blocks of strided domains (conv2d 5x5 stride 3 and dilated dX) run per-point loops
# 1.4-1.5x slower than the naive schedule's (conv2d_5x5_s3 bwd 66.8 ms tiled, 45 ms when charged so)
PARTIAL_PENALTY = 1.4


def _rate(vec, dm):
    """FLOP/s of a block's multiply-add chains at ``vec`` lanes: the device's measured rate at that width
    (scalar where it lacks the width)."""
    return dm.gflops_at(vec if vec <= dm.vector_width else 1) * 1e9


class _Terms:
    """The roofline terms of a block (:func:`_terms`)."""

    __slots__ = ("compute", "mem", "loads", "busy", "red", "blocks", "acc", "live", "refill", "footprint")

    def __init__(self, compute, mem, loads, busy, red, blocks, acc, live, refill=0.0, footprint=(0.0, 0.0)):
        self.compute, self.mem, self.loads, self.busy = compute, mem, loads, busy
        self.red, self.blocks, self.acc, self.live, self.refill = red, blocks, acc, live, refill
        self.footprint = footprint  # block_footprint's (bytes, lines)


def _terms(info, ss, dm):
    rank = len(info.shape)
    tile = ss.tile or (1,) * rank
    points = max(1, math.prod(info.shape) * info.phases)  # a phased info's shape is one phase's (q)
    block = max(1, math.prod(tile))
    blocks = block_count(info, tile)
    red = max(1.0, info.iterations / points)
    vec = ss.vectorize
    acc = max(1, block // vec)  # independent (vector) accumulators per work-item
    # LLVM overlaps a few iterations of a single accumulator chain: at least 3 in flight
    # (a reduction of one point per output, such as a stride-2 2x2 pool's gradient, has no chain)
    ilp = min(1.0, max(acc, 3) / dm.fma_slots) if info.reduction and red >= 2 else 1.0
    # select-based combiners run lane by lane: vectors do not speed them up; gathered operands cost a
    # scalar load per lane (below), not a slower chain (measured, softmax's dense recompute X.W^T along j:
    # 6x32/float16 blocks 2x faster than 6x8/float4)
    compute = info.flops / (_rate(1 if not info.simple else vec, dm) * ilp)
    # the accumulators and one step's operands; an unrolled reduction holds ``unroll`` steps' operands at once
    # (measured, PoCL on the Zen 4: dense_big's dW in 8x16/float8 blocks, 16 accumulators and 10 operands, ran
    # its backward in 14.1 ms unrolled 2x and 11.7 not; lenet_step's 6x32/float8 1.09 against 1.01 ms;
    # dense's 4x32/float8, 16 and 8, 1.00 against 1.04: within the 32 registers)
    steps_live = ss.unroll if info.reduction else 1
    live = acc + steps_live * ((tile[-2] if rank >= 2 else 1) + (max(1, tile[-1] // vec) if rank else 1))
    if live > dm.registers:
        # spills; a spilled full-width register is a full-width store and load a step (measured on the Zen 5: 34
        # live float16 in 32 registers 1.76x slower than 19; on the Zen 4 (AVX2), 17 float4 accumulators ran best)
        compute *= 1 + (live - dm.registers) / (1 if vec >= dm.vector_width > 1 else 4)
    # loads per reduction step of a block: elements of each read that the block touches
    per_step = sum(math.prod(tile[d] for d in used) if used else 1 for used, _ in info.loads)
    issue = load_issue(info, tile, vec)
    steps = info.iterations / block
    cache_bytes = steps * per_step * info.itemsize
    dram_bytes = points * info.itemsize * (1 + len(info.loads))
    if streams(info, dm) and not ss.nontemporal_stores(info.shape):
        dram_bytes += points * info.itemsize * info.outputs  # write-allocate: each line is read before it is written
    footprint = block_footprint(info, tile) if info.footprints else (0.0, 0.0)
    refill = _refill_s(footprint, blocks, dram_bytes, dm)
    mem = cache_bytes / (dm.cache_gbs * 1e9) + dram_bytes / (dm.dram_gbs * 1e9) + refill
    loads = steps * issue / (dm.load_rate * 1e9) if dm.kind == "cpu" else 0.0
    busy = min(blocks, dm.min_parallel) / dm.min_parallel
    return _Terms(compute, mem, loads, busy, red, blocks, acc, live, refill, footprint)


def load_issue(info, tile, vec):
    """The load instructions a block of ``tile`` (``vec`` lanes along the last dimension) issues a reduction step:
    a read's elements the block touches, one ``vloadN`` a vector where it runs contiguously along the vectors, a
    scalar load a lane where it gathers along them, one load (a broadcast) a point where it does not use them.

    :param info: the stage's :class:`StageInfo` (its ``loads``).
    :param tile: the block, one size per output dimension.
    :param vec: its vector width.
    :returns: a float.
    """
    last = len(tile) - 1
    issue = 0.0
    for used, contig in info.loads:
        n = math.prod(tile[d] for d in used) if used else 1
        issue += n / vec if vec > 1 and last in used and contig else n
    return issue


def _refill_s(footprint, blocks, dram_bytes, dm):
    """Seconds of refilling the work-item's cache: where a block's reads over its reduction outgrow the working
    set ``dm.l1_bytes``, each block brings its footprint's lines in from the next level at ``dm.fill_gbs`` (beyond
    the lines memory brings once).  Below it, neighbouring blocks find their shared rows in the cache.

    Measured (3x3/2/1 convolution, 16x32x56x56 -> 64 channels, de-interleaved input): 4x1x6x16/float16 blocks
    (244 KB each) 6.8 ms, 1x1x4x16 (44 KB) 5.4, 1x4x4x16 (four channels share the rows) 1.76, 1x8x2x16 1.78; the
    roofline terms had all at 1.1-1.7 ms."""
    fp, lines = footprint  # block_footprint's
    if not (dm.l1_bytes and dm.fill_gbs) or fp <= dm.l1_bytes:
        return 0.0
    return max(0.0, blocks * lines * LINE - dram_bytes) / (dm.fill_gbs * 1e9)


def output_bytes(info):
    """The bytes a stage writes."""
    return math.prod(info.shape) * info.phases * info.itemsize * info.outputs


def streams(info, dm):
    """A stage the ``nontemporal_stores`` rule gives nontemporal blocks on ``dm``: a CPU whose probe passed them,
    outputs that fill ``min_cache_fraction`` of its last-level cache (their lines would leave it unread anyway).
    There the model charges a plain store's write-allocation, a read of each output line from memory."""
    if not (dm.nontemporal and dm.kind == "cpu" and info.vectors and info.shape and dm.cache_bytes > 0):
        return False
    return output_bytes(info) >= _min_cache_fraction() * dm.cache_bytes


@functools.cache
def _min_cache_fraction():
    """The ``nontemporal_stores`` rule's constant, read once (space imports this module: at first call; a lookup
    a call was a quarter of ``stage_cost``'s time on the tuner's path)."""
    from .space import RULE

    return RULE["nontemporal_stores"].constants["min_cache_fraction"]


def _blocked_cost(info, ss, dm, terms=None):
    k = terms if terms is not None else _terms(info, ss, dm)
    t = max(k.compute, k.mem, k.loads)
    if ss.unroll > 1 and info.reduction:
        t *= 0.97 if k.red >= 4 * ss.unroll else 1.1
    t /= max(k.busy, 1e-3)
    return t + dm.launch_s


# ---------------------------------------------------------------------------------------------
# features for a learned model
# ---------------------------------------------------------------------------------------------
FEATURES = (
    # the stage (isl counts)
    "points", "rank", "extent_inner", "extent_outer", "iterations", "reduction_per_point", "flops",
    "flops_per_iteration", "itemsize", "reduction", "simple", "vectors", "loads", "loads_contiguous",
    "loads_gathered", "loads_broadcast", "regions", "interior_fraction", "shared", "strided", "max_stride",
    # the schedule
    "tile_inner", "tile_outer", "tile_product", "vectorize", "unroll", "local_size", "phases", "blocks",
    "accumulators", "live_registers", "full_fraction", "stride_cell", "footprint_bytes", "ragged", "odd",
    # the model's terms (seconds; busy: the fraction of min_parallel the blocks fill)
    "compute_s", "mem_s", "loads_s", "busy", "naive_s", "cost_s", "refill_s",
)


def stage_features(info, ss, dm):
    """A flat numeric feature vector of a stage under a schedule, for a learned cost model.

    Always the keys of :data:`FEATURES`, in that order, every value a float; deterministic, and cheap (no isl
    call: ``info`` holds the counts).  The stage's part: output points, rank, innermost two extents,
    iterations, reduction iterations per point, flops (and per iteration), item size, reduction / simple
    combiner / vectorisable (0 or 1), reads (all, contiguous along the last dimension, gathered along it, not
    using it), statements with regions, the fraction of iterations whose reduction is the whole box
    (``interior_fraction``), lane sharing, strided (0 or 1) and the largest stride.  The schedule's part: the
    innermost two tile sizes and the block's size, vector width, unroll, work-group size (0: the
    implementation's), phases (the product of ``phase``'s strides), blocks, vector accumulators and live
    vector registers, the fraction of iterations in full tiles, and whether the block is one stride cell
    (for a phased schedule the blocks, accumulators, registers and full tiles are those over ``q``, read off
    the phased statements), the bytes a block reads over its reduction (:func:`block_footprint`), and the shares of
    its iterations its partial blocks run lane by lane (:func:`ragged_share`).  The model's part
    (:func:`stage_cost`): the block's compute, memory and load-issue times at full-tile speed, its busy fraction,
    the naive schedule's cost and the schedule's, and the refill part of its memory time.

    :param info: the stage's :class:`StageInfo`.
    :param ss: the :class:`~polyad.schedule.StageSchedule`.
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :returns: ``{name: float}`` with the keys of :data:`FEATURES`.
    """
    rank = len(info.shape)
    tile = ss.tile or (1,) * rank
    points = max(1, math.prod(info.shape))
    strides = info.strides or (1,) * rank
    gathered = sum(1 for used, contig in info.loads if rank - 1 in used and not contig)
    contiguous = sum(1 for used, contig in info.loads if rank - 1 in used and contig)
    cell = bool(ss.tile) and info.strided and all(t == s for t, s in zip(ss.tile, strides) if s > 1)
    p = info.phase_info(ss.phase) if ss.phase is not None and any(x > 1 for x in ss.phase) else None
    # a phased schedule's terms are those of its blocks over q (the phased statements' info)
    own, q = (info, ss) if p is None else (p, dataclasses.replace(ss, phase=None))
    cell = cell and p is None
    k = _terms(own, q, dm)
    share = ragged_share(own, q.tile[-1], q.vectorize, dm.widths) if q.tile and q.vectorize > 1 else None
    values = (
        points, rank, info.shape[-1] if rank else 1, info.shape[-2] if rank >= 2 else 1, info.iterations,
        info.iterations / points, info.flops, info.flops / max(1, info.iterations), info.itemsize,
        info.reduction, info.simple, info.vectors, len(info.loads), contiguous, gathered,
        len(info.loads) - contiguous - gathered, len(info.regions),
        full_fraction(info, (1,) * rank), info.shared, info.strided, max(strides, default=1),
        tile[-1] if rank else 1, tile[-2] if rank >= 2 else 1, math.prod(tile), ss.vectorize, ss.unroll,
        math.prod(ss.local_size) if ss.local_size else 0, math.prod(getattr(ss, "phase", None) or (1,)), k.blocks,
        k.acc, k.live,
        full_fraction(own, q.tile) if q.tile else 1.0, cell, k.footprint[0],
        *(share or (0.0, 0.0)),
        k.compute, k.mem, k.loads, k.busy, naive_cost(info, dm), stage_cost(info, ss, dm, k), k.refill,
    )
    return {n: float(v) for n, v in zip(FEATURES, values)}
