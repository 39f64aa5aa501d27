"""The search space as data: graph decisions and per-stage candidates, each from a named, measured rule.

As in TVM's auto_scheduler and meta_schedule, the space is apart from the cost model and the search.  A
:class:`Rule` proposes candidates, limits the ones the model ranks, or varies them; the constants of every
heuristic and the measurement they came from sit in :data:`RULES`, one table.  The space S of a stage is
the union of the proposals; the model ranks R, a subset of S, and ``auto_schedule`` takes argmin_{s in R} of
:func:`~polyad.schedule.cost.stage_cost`.  R leaves out what the model is known to misjudge: where a rule
measured a block it ranks below worse ones, R is that block alone; shapes it was never fitted on (whole
rows, channel tiles off padded stages, unroll 16, work-group sizes it has no term for) stay in S for the
tuner, which measures.

Graph level, in order: fold crops into the reductions they copy (the producer is computed only where it
is read), pad clipped sums (every block becomes full), rfactor small or row-shaped
reductions, inline what is evaluated at most once per point (Li et al. 2018), within caps on a
kernel's expression.
"""

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable

import islpy as isl
import numpy as np

from ..errors import PolyadError, ScheduleError
from ..te.expr import Call, Load, Reduce
from ..te.memo import op_memo
from ..te.tensor import ComputeOp, PlaceholderOp, as_tensor_list
from ..te.visit import post_order
from . import RFactor, Schedule, StageSchedule
from .cost import _contiguous, _rate, _uses, block_count, load_issue, scale_of, stage_info, streams
from .graph import (_box_copy, _interleavable, _plain_read, _reduction_form, apply_graph_schedule, axis_movable,
                    axis_padding, fold, foldable, inlinable, inline, innermost, movable, pad_reads,
                    paddable, rfactor_by, scheduled_graph, space_to_depth, stage_ops, strided_reads)
from .model import DeviceModel

__all__ = ["Rule", "RULES", "RULE", "Candidate", "StageSpace", "GraphChoice", "Space", "graph_decisions",
           "given_graph", "stage_space", "stage_candidates", "candidate_space", "phase_options", "INLINE_MAX_DEPTH",
           "INLINE_MAX_SIZE"]


@dataclass(frozen=True, eq=False)
class Rule:
    """A measured heuristic: what it proposes or limits, its constants, and where they come from.

    Graph rules (``level="graph"``) decide a ``target`` (``"fold"``, ``"pad"``, ``"space_to_depth"``,
    ``"innermost"``, ``"rfactor"`` or ``"inline"``): the first
    rule of the table whose ``propose(op, info, dm)`` returns ``[(decision, note), ...]`` decides the stage.
    Stage rules (``level="stage"``) see ``(op, info, dm, graph)`` (``graph`` a :class:`GraphChoice`):
    ``propose`` returns stage schedules (``ranked`` says whether the model ranks them; None: it does),
    ``limit(op, info, dm, graph, cands, ranked)`` returns the candidates the model ranks, ``vary(op, info, dm,
    ss, mine_only)`` returns ``[(variant, ranked)]`` of one candidate (with ``mine_only``, the ranked one
    alone), and ``note`` (rules whose ``limit`` keeps only their own blocks) says why.  Search rules (``level="search"``) hold the argmin's tie-breaking constants.

    :param name: its name (what notes and the tuner's logs call it).
    :param level: ``"graph"``, ``"stage"`` or ``"search"``.
    :param does: what it does, in a line.
    :param constants: its constants by name.
    :param measured: the measurement its constants came from (or why there is none).
    :param target: graph rules: the decision they make.
    :param applies: stage rules: ``(op, info, dm, graph) -> bool`` (None: always).
    :param propose: graph or stage proposals (above).
    :param ranked: stage rules: ``(op, info, dm, graph) -> bool``, whether the model ranks the proposals.
    :param limit: stage rules: the candidates the model ranks (above).
    :param vary: stage rules: variants of a candidate (above).
    :param note: stage rules that decide: ``(op, info, dm) -> str``.
    """

    name: str
    level: str
    does: str
    constants: MappingProxyType
    measured: str
    target: str = None
    applies: Callable = None
    propose: Callable = None
    ranked: Callable = None
    limit: Callable = None
    vary: Callable = None
    note: Callable = None

    def __post_init__(self):
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))


@dataclass(frozen=True)
class Candidate:
    """A stage schedule of the space and the rule that proposed it.

    :param schedule: the :class:`~polyad.schedule.StageSchedule`.
    :param rule: the name of the rule that proposed it (``base+gpu_local_sizes`` for a work-group variant).
    :param ranked: whether the cost model ranks it (False: a rule keeps the model off it; the tuner measures it).
    """

    schedule: StageSchedule
    rule: str
    ranked: bool = True


@dataclass(frozen=True)
class StageSpace:
    """A stage's candidates (in the order the argmin breaks ties by) and the rule that decided, if one did.

    :param name: the stage's name.
    :param candidates: a tuple of :class:`Candidate`.
    :param decided: the rule whose measured block the model ranks alone (None: the model ranks the grid).
    """

    name: str
    candidates: tuple
    decided: str = None

    def ranked(self):
        """The schedules the model ranks, in order.

        :returns: a list of :class:`~polyad.schedule.StageSchedule`.
        """
        return [c.schedule for c in self.candidates if c.ranked]


@dataclass(frozen=True)
class GraphChoice:
    """Graph-level decisions and the graph they make (pad and rfactor applied; inline is not: stages are
    ranked on their own bodies).

    :param outputs: the outputs of the padded and rfactored graph.
    :param pad: names of the padded stages.
    :param rfactor: stage name -> factor or :class:`~polyad.schedule.RFactor`.
    :param inline: names of the inlined stages.
    :param made_by: ``{"fold" | "pad" | "space_to_depth" | "innermost" | "rfactor" | "inline": {stage name: rule
        name}}``.
    :param infos: stage name -> :class:`~polyad.schedule.cost.StageInfo` of ``outputs``' stages.
    :param notes: the decisions' notes, in order.
    :param space_to_depth: names of the stages whose strided reads read de-interleaved copies.
    :param fold: names of the copies that compute their producer's values themselves.
    :param innermost: stage name -> the output dimension it is computed with innermost.
    """

    outputs: list
    pad: frozenset = frozenset()
    rfactor: dict = field(default_factory=dict)
    inline: frozenset = frozenset()
    made_by: dict = field(default_factory=dict)
    infos: dict = field(default_factory=dict)
    notes: tuple = ()
    space_to_depth: frozenset = frozenset()
    fold: frozenset = frozenset()
    innermost: dict = field(default_factory=dict)

    def rule_of(self, target, name):
        """The rule that made the ``target`` decision of stage ``name``.

        :param target: ``"pad"``, ``"rfactor"`` or ``"inline"``.
        :param name: a stage name.
        :returns: the rule's name, or None (no rule made it, or the decision was given).
        """
        return self.made_by.get(target, {}).get(name)


_NO_GRAPH = GraphChoice(outputs=[])


@dataclass(frozen=True)
class Space:
    """The choices of a build: graph-level candidates and per-stage loop candidates.

    :param inline: stage names that may be inlined.
    :param rfactor: stage name -> candidate factors and :class:`~polyad.schedule.RFactor` forms.
    :param stages: stage name -> list of candidate :class:`~polyad.schedule.StageSchedule`.
    :param pad: stage names that may be padded.
    :param candidates: stage name -> tuple of :class:`Candidate` (the same schedules, with the rule that
        proposed each and whether the model ranks it).
    :param space_to_depth: stage names whose strided reads may read a de-interleaved copy.
    :param fold: copy stages that may compute their producer's values themselves (names in the unfolded graph;
        the other fields name stages of the graph the chosen folds make).
    """

    inline: tuple
    rfactor: dict
    stages: dict = field(default_factory=dict)
    pad: tuple = ()
    candidates: dict = field(default_factory=dict)
    space_to_depth: tuple = ()
    fold: tuple = ()

    def size(self):
        """The number of schedules in the space.

        :returns: an int.
        """
        n = 2 ** (len(self.inline) + len(self.pad) + len(self.space_to_depth) + len(self.fold))
        for f in self.rfactor.values():
            n *= len(f) + 1
        for c in self.stages.values():
            n *= len(c)
        return n

    def ranked(self, name):
        """The schedules of stage ``name`` the auto-scheduler's model ranks.

        :param name: a stage name of ``stages``.
        :returns: a list of :class:`~polyad.schedule.StageSchedule`.
        """
        return [c.schedule for c in self.candidates[name] if c.ranked]


def _const(rule, key):
    return RULE[rule].constants[key]


def _padded(op):
    return getattr(op, "tag", "") == "padded"


def _points(op):
    return max(1, math.prod(op.shape))


# ---------------------------------------------------------------------------------------------
# graph rules: fold
# ---------------------------------------------------------------------------------------------
def _cropped_reduction(op, info, dm):
    """A crop of a reduction (``C[o] = T[o + lo]``: a padded input's gradient, cut back to the input) computes
    the reduction itself, at the points it keeps: the border rows and columns the crop drops are never
    computed, and the producer's kernel and the copy's pass over it go."""
    from ..poly.convert import ToIsl, pieces
    from ..poly.stage import statements_of

    found = _plain_read(op)
    if found is None:
        return []
    st, load = found
    T = load.tensor
    if isinstance(T.op, PlaceholderOp) or T.op.num_outputs != 1 or len(load.indices) != len(st.out_vars):
        return []
    try:
        if not any(x.combiner is not None for x in statements_of(T.op)):
            return []  # a reduction-free producer inlines instead
    except PolyadError:
        return []
    conv = ToIsl(st.vars)
    for d, ix in enumerate(load.indices):  # index d is o_d + a constant
        aff = pieces(conv.aff(ix))[0][1]
        coefs = [int(str(aff.get_coefficient_val(isl.dim_type.in_, k))) for k in range(len(st.vars))]
        if coefs != [int(k == d) for k in range(len(st.vars))]:
            return []
    dropped = math.prod(T.shape) - math.prod(op.shape)
    return [(True, f"fold {op.name}: it crops {T.op.name} ({dropped} of its {math.prod(T.shape)} points dropped); "
                   f"computed at the points it keeps, {T.op.name}'s kernel and the copy's pass go")]


# ---------------------------------------------------------------------------------------------
# graph rules: pad
# ---------------------------------------------------------------------------------------------
def _pad_clipped_sum(op, info, dm):
    """A clipped sum (a stride-1 or dilated convolution's data gradient) runs over its bounding box on a
    zero-padded operand, a strided one's over its phases' boxes: border blocks then vectorise like the interior."""
    from ..poly.convert import count

    found = paddable(op)
    if found is None:
        return []
    st, load = found.statement, found.load
    inside = count(st.domain)
    boxed = count(found.domain) if found.box is None else math.prod(hi - lo + 1 for lo, hi in found.box)
    if inside < _const("pad_clipped_sums", "min_reduction") * _points(op) or \
            boxed > _const("pad_clipped_sums", "max_extra") * inside:
        return []  # short reductions (a pad's gradient) or mostly-empty boxes: the border cases pay
    over = "bounding box" if found.box is not None else "phases' boxes"
    return [(True, f"pad_reads {op.name}: its sum is clipped only by {load.tensor.name}'s bounds; over its {over} "
                   f"on a zero-padded {load.tensor.name} ({boxed / inside:.2f}x the multiply-adds) "
                   "every block is a full vector block")]


# ---------------------------------------------------------------------------------------------
# graph rules: space-to-depth
# ---------------------------------------------------------------------------------------------
def _statement(op):
    from ..poly.stage import statements_of

    return statements_of(op)[0]


def _strided_operands(op, info, dm):
    """A long reduction reading an operand's rows at a stride (a strided convolution's weight gradient) reads a
    de-interleaved copy instead, when its innermost output is too narrow for vectors: its loads become
    unit-stride, and vectors (rfactor_lanes) can run along them."""
    if dm.kind != "cpu" or info is None or info.iterations < _const("strided_reads", "min_iterations"):
        return []
    if not op.shape or op.shape[-1] >= max(dm.vector_width, 1):
        return []  # vectors run along the outputs, not along the strided reduction (a dilated convolution)
    if _rfactor_batch_lanes(op, info, dm):
        return []  # lanes along the batch load whole vectors whatever the stride
    # strided along the rows the lanes would load, the innermost output beside the stride (X[3x + kw])
    inner = _statement(op).out_vars[-1]
    found = [x for x in strided_reads(op) if x[1][-1] > 1 and all(_uses(l.indices[-1], inner) for l in x[2])]
    copied = sum(math.prod(T.shape) for T, _, _ in found)
    if not found or info.iterations < _const("strided_reads", "min_reuse") * copied:
        return []
    what = ", ".join(f"{T.name} (strides {'x'.join(map(str, s))})" for T, s, _ in found)
    return [(True, f"space_to_depth {op.name}: it reads {what} at a stride; a de-interleaved copy "
                   f"({copied} elements, {info.iterations / copied:.0f} reads each) makes the reads unit-stride")]


def _per_channel_read(info, rank):
    """Whether a rank >= 3 (NCHW) stage reads an operand per channel (dimension 1) that its rows broadcast: a
    convolution's weight."""
    return any(1 in used and rank - 1 not in used for used, _ in info.loads)


def _strided_windows(op, info, dm):
    """A convolution's forward that reads its input at a stride over its outputs (``X[3y + kh, 3x + kw]``)
    reads a de-interleaved copy instead: consecutive outputs then read consecutive elements, and the stage is
    a box reduction, in vector blocks along its rows."""
    if dm.kind != "cpu" or info is None or not info.reduction or not info.simple or len(op.shape) < 3:
        return []
    if info.iterations < _const("strided_windows", "min_iterations"):
        return []
    if strided_reads(op):
        return []  # a reduction variable's stride: strided_reads decides
    if _filters_innermost(op, info, dm):
        return []  # its input broadcast along the channels: read at any stride alike
    inner = _statement(op).out_vars[-1]
    found = [x for x in strided_reads(op, over="output")
             if x[1][-1] > 1 and all(_uses(l.indices[-1], inner) for l in x[2])]
    if not found or not _per_channel_read(info, len(op.shape)):
        return []  # no per-channel operand: a pooling window, not measured
    copied = sum(math.prod(T.shape) for T, _, _ in found)
    what = ", ".join(f"{T.name} (strides {'x'.join(map(str, s))})" for T, s, _ in found)
    return [(True, f"space_to_depth {op.name}: its outputs read {what} at a stride; a de-interleaved copy "
                   f"({copied} elements) makes consecutive outputs read consecutive elements")]


# ---------------------------------------------------------------------------------------------
# graph rules: innermost
# ---------------------------------------------------------------------------------------------
def _batch_lanes(op, info, dm):
    """CPU: a reduction whose rows do not split into whole vectors runs with its batch innermost, vectors along
    it, when the batch fills at least two vectors and the operands read it as a plain index: a strided
    convolution's data gradient (every phase writes x = 3q + p), or a padded box whose rows are not a multiple
    of the vector width (conv2d_3x3's 28, lenet_step's 12)."""
    from .phase import phase_strides

    if dm.kind != "cpu" or info is None or not info.reduction or len(op.shape) < 3:
        return []
    if info.iterations < _const("batch_lanes", "min_iterations"):
        return []
    strides = phase_strides(op)
    vw = max(dm.vector_width, 1)
    if op.shape[0] % vw or op.shape[0] < 2 * vw or (strides is not None and strides[0] != 1):
        return []
    strided = strides is not None and strides[-1] > 1
    if not strided and not (_padded(op) and op.shape[-1] % vw):
        return []
    if movable(op, 0) is not None:  # the batch read other than as a plain index
        return []
    why = f"its outputs are strided (phases {'x'.join(map(str, strides))})" if strided else \
        f"its rows ({op.shape[-1]}) are not whole vectors of {vw}"
    return [(0, f"innermost {op.name}: {why}; with the batch ({op.shape[0]}) innermost its vectors run along the "
                "batch, loads and stores contiguous")]


def _filters_innermost(op, info, dm):
    """CPU: a convolution (rank 4: a box reduction with an operand read along its second dimension, a weight
    ``W[k, ..]``, and one that does not read it, the input ``X[n, .., y, x]``) whose rows are shorter than a vector
    runs with its second dimension innermost: vectors along it, the operands reading it through copies with it
    last, the other one value for all lanes.  A 3x3 conv2d on 14x14 rows cannot fill a float16 vector along them
    (a moved tile computes 16 points for 14); along 128 channels each vector is whole, and each weight vector
    serves every point of the block.  Its weight gradient ``dW[k, c, r, s]`` (rows of 3) alike, along ``c``."""
    from .phase import phase_strides

    if dm.kind != "cpu" or info is None or not info.reduction or not info.simple or len(op.shape) != 4:
        return []
    strides = phase_strides(op) if info.strided else None
    if info.strided and (strides is None or strides[1] != 1):
        return []
    vw = max(dm.vector_width, 1)
    row = -(-op.shape[-1] // strides[-1]) if strides else op.shape[-1]  # a phase's, where it is phased
    if vw < 2 or row >= vw or op.shape[1] % vw or op.shape[1] < _const(
            "filters_innermost", "min_vectors") * vw or info.iterations < _const("filters_innermost", "min_iterations"):
        return []
    if all(1 in used for used, _ in info.loads) or not any(1 in used for used, _ in info.loads):
        return []  # no operand one value for all lanes (a pool, a depthwise conv), or none read along them
    if movable(op, 1) is not None:  # the channel read other than as a plain index
        return []
    return [(1, f"innermost {op.name}: its rows ({row}) are shorter than a vector of {vw}; with its "
                f"{op.shape[1]} channels innermost its vectors run along them, the operands that read them through "
                "copies with them last, the others one value for all lanes")]


# ---------------------------------------------------------------------------------------------
# graph rules: rfactor
# ---------------------------------------------------------------------------------------------
def _split_form(op):
    """graph.rfactor's view of a stage: (reduce Exprs, reduce axes), or None where it cannot split it (a
    compute, or a PolyOp's single box reduction: a convolution's weight gradient)."""
    try:
        _, reduces, red = _reduction_form(op)
    except ScheduleError:
        return None
    return (reduces, red) if red else None


def _reduction_extent(op):
    form = _split_form(op)
    return max(a.extent for a in form[1]) if form else None


def _row_axis(op):
    """The reduction axis a single-output sum/max/min reads contiguously (the last index of every
    load that uses it is that axis plus something free of it), or None.  Only pure row reductions:
    every such load uses every output dimension (a matmul's operands are reused across outputs).  A compute, or a
    PolyOp's single box reduction (a folded row max: softmax's, whose lanes along the rows gathered 8 rows 1000
    apart)."""
    try:
        data, body, red = _reduction_form(op)
    except ScheduleError:
        return None
    if not red or len(body) != 1:
        return None
    b = body[0]
    if not isinstance(b, Reduce) or b.combiner.kind() is None:
        return None
    ax = max(b.axis, key=lambda a: a.extent)
    seen = False
    for n in post_order(tuple(body)):
        if isinstance(n, Load) and any(_uses(ix, ax) for ix in n.indices):
            if not n.indices or not _contiguous(n.indices[-1], ax) or any(_uses(ix, ax) for ix in n.indices[:-1]):
                return None
            seen = True
    return ax if seen and _reads_every_output(body, data, ax) else None


def _row_factor(e, dm):
    """Partials per output point of an interleaved rfactor: the fewest whole vectors, then a multiple of half
    the vector width, dividing the extent, or None.  The partials' sum reads ``F`` a row, gathered across
    rows: a layer norm's backward over 4096 rows of 512 ran 0.80x with 16 than with 64 (one vector against
    four accumulators: its rows stream from memory, so the longer dependence chain costs nothing)."""
    V = max(dm.vector_width, 1)
    half = max(1, V // 2)
    for f in list(range(V, 4 * V + 1, half)) + [half]:
        if f >= 2 and e % f == 0 and e // f >= _const("rfactor_rows", "min_steps"):
            return f
    return None


def _lane_axis(op, dm):
    """The reduction axis a small-output sum reads contiguously, when vectors along its outputs cannot pay.

    A convolution's weight gradient ``dW[co, ci, kh, kw] = sum_{b, y, x} H[b, co, y, x] * X[b, ci, y + kh,
    x + kw]``: its innermost output (kw, 3) is narrower than half a vector (or than one, beside ``x`` in a
    row index: a 5-wide kernel on 8 lanes), and every load that uses ``x``
    has it, with unit stride, in its last index only.  Interleaving partial sums over ``x`` gives each
    (co, ci, kh, kw) a vector of partials whose lanes load contiguous rows (``vloadN`` of H and of the
    shifted X row).  Returns the axis, or None.
    """
    if isinstance(op, PlaceholderOp) or not op.shape or op.shape[-1] >= max(dm.vector_width, 1):
        return None
    try:
        data, body, _ = _reduction_form(op)  # a compute, or a PolyOp's single box reduction
    except ScheduleError:
        return None
    # between half a vector and one, only a sliding window (the innermost output beside the axis in a row
    # index, X[.., x + kw]): a matmul's narrow outputs reuse their operands in register blocks instead
    window = op.shape[-1] * 2 > max(dm.vector_width, 1)
    b = body[0]
    if len(body) != 1 or b.combiner.kind() != "sum":
        return None
    best = None
    for ax in b.axis:
        seen = bool(_row_reads(body, ax))
        if window and seen and not _reads_every_output(body, data, ax):
            seen = any(isinstance(n, Load) and n.indices and _uses(n.indices[-1], ax) and _uses(n.indices[-1], data[-1])
                       for n in post_order(tuple(body)))
        if seen and ax.extent >= _const("rfactor_lanes", "min_extent") and (best is None or ax.extent > best.extent):
            best = ax
    return best


def _row_reads(body, ax):
    """The loads of ``body`` that use reduction axis ``ax``, where each has it, at unit stride, in its last
    index only (rows that lanes along ``ax`` load as vectors); () where one does not, or none uses it."""
    reads = tuple(n for n in post_order(tuple(body)) if isinstance(n, Load) and any(_uses(ix, ax) for ix in n.indices))
    if all(_contiguous(n.indices[-1], ax) and not any(_uses(ix, ax) for ix in n.indices[:-1]) for n in reads):
        return reads
    return ()


def _reads_every_output(body, data, ax):
    """Whether every load that uses reduction axis ``ax`` uses every output dimension too: no operand is
    reused across outputs (a bias gradient ``db[c] = sum d[n, c, y, x]``, unlike a matmul), so register
    blocks gain nothing and vectors of partials along ``ax`` cost nothing."""
    loads = [n for n in post_order(tuple(body)) if isinstance(n, Load) and any(_uses(ix, ax) for ix in n.indices)]
    return bool(loads) and all(all(any(_uses(ix, v) for ix in n.indices) for v in data) for n in loads)


def _lane_factor(e, dm, padded=False):
    """Lanes of the interleaved partials over an axis of extent ``e``: the vector width (at most the
    device's) with the fewest vector-plus-ragged steps per row (26: 8 lanes, 3 vectors and 2 scalar steps);
    ``padded`` (the axis runs to a multiple of the lanes on zero-padded operands): the least time for the
    padded row at the device's measured rate per width, near-ties to the narrower (26: 8 lanes, 32)."""
    V = max(dm.vector_width, 1)
    opts = [f for f in _const("rfactor_lanes", "widths") if f <= V and f in dm.widths and f <= e]
    if not opts:
        return None
    if not padded:
        return min(opts, key=lambda f: (e // f + e % f, -f))
    t = {f: -(-e // f) * f / _rate(f, dm) for f in opts}
    return min(f for f in opts if t[f] <= min(t.values()) * _const("near_best", "ratio"))


def _rfactor_lanes(op, info, dm):
    points = _points(op)
    lanes = dm.kind == "cpu" and info.iterations >= _const("rfactor_lanes", "iterations_per_output") * points
    ax = _lane_axis(op, dm) if lanes else None
    if ax is not None and points < dm.min_parallel:
        # too few outputs to balance the cores: rfactor_small_outputs splits for work-items, unless every core
        # gets two outputs and no operand is reused across them (a bias gradient): then a vector of partials
        # each is work enough (3 outputs of 50000: 2 on one core, 1 on the other; split, both busy)
        data, body, _ = _reduction_form(op)
        if points < 2 * dm.cores or not _reads_every_output(body, data, ax):
            ax = None
    if ax is None or info.iterations < _const("rfactor_lanes", "min_iterations"):
        return []
    # ragged last lanes run scalar: where they are a large share of the row, run the axis to a multiple of
    # the lanes on zero-padded operands instead
    f = _lane_factor(ax.extent, dm)
    if not f:
        return []
    V = max(dm.vector_width, 1)
    pad = ax.extent % f >= _const("rfactor_lanes", "pad_ragged_share") * ax.extent and \
        isinstance(axis_padding(op, ax.name, -(-ax.extent // V) * V), dict)
    if pad:
        f = _lane_factor(ax.extent, dm, padded=True)
        pad = ax.extent % f != 0
    how = (f"; the axis runs to {-(-ax.extent // f) * f} on zero-padded operands (no ragged lanes)" if pad else "")
    return [(RFactor(f, ax.name, True, pad=True if pad else None),
             f"rfactor {op.name} by {f} over {ax.name}, interleaved: its innermost output ({op.shape[-1]}) is too "
             f"narrow for vectors; {f} partials per output load contiguous rows along {ax.name} (extent "
             f"{ax.extent}) as vectors{how}")]


def _batch_lane_axis(op, dm):
    """The reduction axis of a conv weight gradient's partials along the batch (``rfactor(.., axis_last=True)``,
    :func:`~polyad.schedule.graph.reduction_axis_last`), or None.

    ``dW[co, ci, kh, kw] = sum_{b, y, x} H[b, co, y, x] * X[b, ci, y + kh, x + kw]`` whose innermost output is too
    narrow for vectors: where lanes along ``x`` would be ragged (rows of 26 in vectors of 8) or cannot load rows
    (X read at a stride), lanes along the batch, every operand read through a copy with the batch last, are
    whole aligned vectors.  The batch must be at least ``min_vectors`` vectors, and every operand read through a
    copy an input (or a zero-padded copy of one, whose moved copy reads the input): a computed operand would be
    computed and then copied.
    """
    V = max(dm.vector_width, 1)
    if dm.kind != "cpu" or isinstance(op, PlaceholderOp) or not op.shape or 2 * op.shape[-1] > V:
        return None
    try:
        _, body, red = _reduction_form(op)
    except ScheduleError:
        return None
    if len(body) != 1 or body[0].combiner.kind() != "sum":
        return None
    ax = _lane_axis(op, dm)
    f = _lane_factor(ax.extent, dm) if ax is not None else None
    if f and ax.extent % f == 0:
        return None  # whole vectors along the rows already
    for a in red:
        if a.extent % V or a.extent < _const("rfactor_batch_lanes", "min_vectors") * V or axis_movable(op, a.name):
            continue
        moved = {ld.tensor for ld in post_order(tuple(body)) if isinstance(ld, Load)
                 and any(ix is a for ix in ld.indices[:-1])}
        if all(isinstance(T.op, PlaceholderOp) or _box_copy(T.op) is not None for T in moved):
            return a
    return None


def _rfactor_batch_lanes(op, info, dm):
    if info is None or info.iterations < _const("rfactor_batch_lanes", "min_iterations"):
        return []
    a = _batch_lane_axis(op, dm)
    if a is None:
        return []
    V = max(dm.vector_width, 1)
    return [(RFactor(V, a.name, True, axis_last=True),
             f"rfactor {op.name} by {V} over {a.name}, interleaved, its operands read with {a.name} last: its innermost "
             f"output ({op.shape[-1]}) is too narrow for vectors and its rows give no whole vectors; {V} partials per "
             f"output load aligned vectors along {a.name} (extent {a.extent}) from copies with {a.name} last")]


def _gathered_lane_axis(op, info):
    """The reduction axis a rank-2 sum reads contiguously, where every read along its innermost output gathers.

    A dense layer's forward, ``Y[i, j] = sum_k X[i, k] * W[j, k]``: vectors along ``j`` load ``W`` a row apart
    (10000 floats in dense_big), while every load that uses ``k`` has it, at unit stride, in its last index only.
    Returns the axis, or None."""
    rank = len(op.shape)
    if rank != 2 or isinstance(op, PlaceholderOp) or not info.simple:
        return None
    along = [contig for used, contig in info.loads if rank - 1 in used]
    if not along or any(along):
        return None  # a read along the innermost output is contiguous: vectors along the outputs pay
    try:
        data, body, _ = _reduction_form(op)
    except ScheduleError:
        return None
    if len(body) != 1 or body[0].combiner.kind() != "sum":
        return None
    best = None
    for ax in body[0].axis:
        reads = _row_reads(body, ax)
        if reads and not any(_reshaped(n.tensor.op) for n in reads) and (best is None or ax.extent > best.extent):
            best = ax
    return best if best is not None and best.extent >= _const("rfactor_lanes", "min_extent") else None


def _reshaped(op):
    """A data-movement stage that indexes through floor divisions (flatten): inlined, as it will be, the lanes'
    contiguous row becomes divided indices (lenet_step's first dense layer on its flattened pool: 0.099 ms
    unsplit, 0.13 + 0.042 ms split)."""
    if not isinstance(op, ComputeOp) or not _pure_data_movement(op):
        return False
    return any(isinstance(n, Call) and n.op in ("floordiv", "floormod") for n in post_order(tuple(op.body)))


def _rfactor_gathered(op, info, dm):
    """Lanes over the axis of :func:`_gathered_lane_axis`, for a long sum of at least two vectors of outputs."""
    if dm.kind != "cpu" or info is None or not info.reduction or not op.shape:
        return []
    if op.shape[-1] < 2 * max(dm.vector_width, 1):
        return []  # under two vectors of outputs, a matmul keeps its register blocks (rfactor_lanes' premise)
    if info.iterations < _const("rfactor_gathered", "min_iterations"):
        return []
    ax = _gathered_lane_axis(op, info)
    f = _lane_factor(ax.extent, dm) if ax is not None else None
    if not f:
        return []
    return [(RFactor(f, ax.name, True),
             f"rfactor {op.name} by {f} over {ax.name}, interleaved: every read along its innermost output gathers "
             f"(a row apart); {f} partials per output load contiguous rows along {ax.name} (extent {ax.extent}) "
             "as vectors")]


def _rfactor_rows(op, info, dm):
    e = _reduction_extent(op)
    points = _points(op)
    if not (dm.kind == "cpu" and e and e >= _const("rfactor_rows", "min_extent") and points >= dm.min_parallel
            and points <= _const("rfactor_rows", "max_points")
            and info.iterations >= _const("rfactor_rows", "min_iterations") and _row_axis(op) is not None):
        return []
    f = _row_factor(e, dm)
    if not f:
        return []
    return [(f, f"rfactor {op.name} by {f}: {points} outputs each reduce {e} contiguous elements; "
                f"{f} interleaved partial results per output load them as vectors")]


def _rfactor_small_outputs(op, info, dm):
    points = _points(op)
    k = RULE["rfactor_small_outputs"].constants
    # a GPU whose work-items the outputs fill to a quarter or more runs the unsplit loops faster (measured)
    most = dm.min_parallel * (k["gpu_fill"] if dm.kind == "gpu" else 1)
    form = _split_form(op) if points < most else None
    if form is None:
        return []
    e = max(a.extent for a in form[1])
    # graph.rfactor's choice: sum/max/min stages get interleaved partials (the factor is their count)
    inter = _interleavable(form[0])
    if info.iterations < k["min_iterations"] or info.iterations < k["min_extent"] * points or e < k["min_stride"] * 2:
        return []
    n_outer = -(-dm.min_parallel // points)
    V = max(dm.vector_width, 1)
    step = _const("rfactor_small_outputs", "min_stride")
    # graph.rfactor interleaves sum/max/min by a factor dividing the extent: ``factor`` partials per
    # point, enough vector blocks for every work-item, each reducing a stride of at least 8 elements
    # (a stride counts every reduction axis: a convolution's weight gradient split over its batch still sums
    # the whole image per partial)
    terms = info.iterations // points
    divs = [f for f in range(step, V * n_outer + 1, step) if e % f == 0 and f < e and terms // f >= step] \
        if inter else []
    if divs:
        factor = divs[-1]
        parts = points * factor
    else:  # blocks of ``factor`` (a power of two; one dividing e would interleave: halve it until not)
        factor = max(step, -(-e // n_outer))
        factor = 1 << (factor.bit_length() - 1)  # a power of two, rounded down: at least n_outer partials
        while inter and factor >= 2 and e % factor == 0:
            factor //= 2
        parts = points * -(-e // factor)
    if factor >= e or factor < 2:
        return []
    return [(factor, f"rfactor {op.name} by {factor}: {points} output points cannot fill {dm.min_parallel} "
                     f"work-items; the partial stage has {parts}")]


# ---------------------------------------------------------------------------------------------
# graph rules: inline (Li2018, within caps on the expressions)
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


def _materialised_copy(op, cons, infos):
    """Why a copy that a reduction reads stays a buffer on a CPU, or None: a zero padding (a copy with selects on
    its indices, ``materialise_padding``: inlined, each of the reduction's reads is guarded) or a transpose (a
    plain copy whose innermost output does not run along its source's rows, ``T[k, j] = B[j, k]``,
    ``materialise_transposes``: inlined, the reduction's vector loads along ``j`` gather across B's rows)."""
    if not any(c.name in infos and infos[c.name].reduction for c, _ in cons[id(op)]):
        return None
    if _plain_copy(op):
        vals = op.body if isinstance(op, ComputeOp) else op.statements[0].values
        if any(isinstance(n, Call) and n.op == "select" for n in post_order(tuple(vals))):
            return "a zero-padded copy read by a reduction ({}); inlined, each of its reads is guarded"
    found = _plain_read(op)
    if found is None or not op.shape:
        return None
    st, load = found
    last = st.out_vars[-1]
    if _contiguous(load.indices[-1], last) and not any(_uses(ix, last) for ix in load.indices[:-1]):
        return None  # its rows are its source's rows
    return "a transpose read by a reduction ({}); inlined, its vector loads would gather across rows"


def _recompute_pays(evals, size, info, dm):
    """Recomputing ``evals - size`` extra points costs less than writing and reading the buffer."""
    per_point = info.flops / max(1, info.iterations)
    # independent elementwise work: scalar code with many independent chains (the calibrated scalar rate)
    extra = (evals - size) * max(per_point, 1) / _rate(1, dm)
    traffic = 2 * size * info.itemsize / (dm.dram_gbs * 1e9)
    return evals <= _const("inline_recompute", "max_evaluations") * size and extra < traffic


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


def _evaluations(info):
    """How often a materialised stage evaluates what is inlined into it: once per statement instance, or once
    per point of its scatter's loop (a one-hot sum: auto builds its scatter, poly/scatter.py)."""
    return (info.scatter or info).iterations


def _inline_by_evaluations(ops, outs, infos, notes, dm, by):
    """The stages Li2018's rule inlines: evaluated at most once per point where they end up, or cheap
    to recompute, or data movement (``by``: stage name -> the rule, filled in)."""
    out_ops = {id(t.op) for t in outs}
    cons = _consumers(ops)
    roots = {}  # id(op) -> {name of materialised stage: (iterations, reads per iteration)}
    chosen = set()
    for op in reversed(ops):
        info = infos[op.name]
        if id(op) in out_ops or inlinable(op) is not None or not cons[id(op)]:
            roots[id(op)] = {op.name: _evaluations(info)}
            continue
        reach = {}
        for c, k in cons[id(op)]:
            for r, it in roots[id(c)].items():
                # reads of the same index in one kernel are one value (hash-consed, emitted once)
                reach[r] = max(reach.get(r, 0), it * (k if id(c) != id(op) else 1))
        evals = sum(reach.values())
        size = max(1, math.prod(op.shape))
        if evals <= size:
            by[op.name] = "inline_once"
            notes.append(f"inline {op.name}: each point is evaluated once ({evals} evaluations in {', '.join(sorted(reach))})")
        elif _recompute_pays(evals, size, info, dm):
            by[op.name] = "inline_recompute"
            notes.append(f"inline {op.name}: recomputing it {evals / size:.1f}x costs less than its buffer's traffic")
        elif dm.kind == "cpu" and (why := _materialised_copy(op, cons, infos)):
            roots[id(op)] = {op.name: _evaluations(info)}
            notes.append(f"materialise {op.name}: " + why.format(", ".join(sorted(reach))))
            continue
        elif _pure_data_movement(op):
            by[op.name] = "inline_data_movement"
            notes.append(f"inline {op.name}: data movement only, read by {', '.join(sorted(reach))}")
        else:
            roots[id(op)] = {op.name: _evaluations(info)}
            notes.append(f"materialise {op.name}: {evals} evaluations if inlined for {size} points ({info.flops // size} flops each)")
            continue
        chosen.add(op.name)
        roots[id(op)] = reach
    return frozenset(chosen)


# ---------------------------------------------------------------------------------------------
# graph decisions
# ---------------------------------------------------------------------------------------------
def _decide(target, ops, infos, dm, notes):
    """(stage name -> decision, stage name -> rule): per stage, the first graph rule for ``target`` that
    proposes something decides."""
    rules = [r for r in RULES if r.level == "graph" and r.target == target and r.propose is not None]
    chosen, by = {}, {}
    for op in ops:
        info = infos.get(op.name) if infos is not None else None
        for r in rules:
            props = r.propose(op, info, dm)
            if props:
                decision, note = props[0]
                chosen[op.name], by[op.name] = decision, r.name
                notes.append(note)
                break
    return chosen, by


def graph_decisions(outputs, dm):
    """The graph rules' decisions for the graph of ``outputs``: pad, then rfactor, then inline.

    :param outputs: a list of tensors, uniquely named (:func:`~polyad.schedule.graph.uniquely_named`).
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :returns: a :class:`GraphChoice` (its ``outputs``: the graph padded and rfactored).
    """
    notes = []
    ops = stage_ops(outputs)[0]
    folds, fold_by = _decide("fold", [op for op in ops if foldable(outputs, op) is None], None, dm, notes)
    outs = outputs
    for n in sorted(folds):
        outs = fold(outs, n)
    pads, pad_by = _decide("pad", stage_ops(outs)[0], None, dm, notes)
    pad = frozenset(pads)
    for n in sorted(pad):
        outs = pad_reads(outs, n)
    infos = {op.name: stage_info(op) for op in stage_ops(outs)[0]}
    s2ds, s2d_by = _decide("space_to_depth", stage_ops(outs)[0], infos, dm, notes)
    s2d = frozenset(s2ds)
    for n in sorted(s2d):
        outs = space_to_depth(outs, n)
    if s2d:  # the rewritten stages and their copies are new
        infos = {op.name: (infos.get(op.name) if op.name not in s2d else None) or stage_info(op)
                 for op in stage_ops(outs)[0]}
    inner, inner_by = _decide("innermost", stage_ops(outs)[0], infos, dm, notes)
    for n in sorted(inner):
        outs = innermost(outs, n, inner[n])
    if inner:  # the moved stages, their copies back and the operands' copies are new
        infos = {op.name: (infos.get(op.name) if op.name not in inner else None) or stage_info(op)
                 for op in stage_ops(outs)[0]}
    rf, rf_by = _decide("rfactor", stage_ops(outs)[0], infos, dm, notes)
    g = outs
    for n in sorted(rf):
        spec = RFactor.of(rf[n])
        g = rfactor_by(g, n, spec)
    if rf:  # the split stages, their partials and any operand a padded split lengthened are new
        before = {id(op) for op in stage_ops(outs)[0]}
        infos = {op.name: (infos.get(op.name) if id(op) in before else None) or stage_info(op)
                 for op in stage_ops(g)[0]}
    ops, _ = stage_ops(g)
    inline_by = {}
    chosen = _inline_by_evaluations(ops, g, infos, notes, dm, inline_by)
    inl = _cap_inlined(ops, chosen, notes)
    infos = _fused_infos(g, inl, infos)
    made_by = {"fold": fold_by, "pad": pad_by, "space_to_depth": s2d_by, "innermost": inner_by, "rfactor": rf_by,
               "inline": {n: r for n, r in inline_by.items() if n in inl}}
    return GraphChoice(g, pad, rf, inl, made_by, infos, tuple(notes), s2d, frozenset(folds), dict(inner))


def _fused_infos(g, inl, infos, inlined=None):
    """``infos`` with the stages that absorb an inlined producer measured as they are built: with the
    producer's reads in their body (lenet's pool-and-relu gradient reads the argmax and the pooled gradient
    once per 2x2 window, which the unfused stage does not show: a 2x2 block is 0.09 ms against 0.15).
    ``inlined``: ``inline(g, inl)`` where the caller has it."""
    if not inl:
        return infos
    fused = stage_ops(inlined if inlined is not None else inline(g, inl))[1]
    out = dict(infos)
    for op in stage_ops(g)[0]:
        if op.name in fused and op.name not in inl and any(t.op.name in inl for t in op.input_tensors):
            out[op.name] = stage_info(fused[op.name])
    return out


def given_graph(outs, schedule, dm):
    """The :class:`GraphChoice` of ``schedule``'s graph decisions on ``outs``; a rfactor is credited to the
    graph rule that would make the same one there (its partial stage then gets that rule's blocks).

    :param outs: a list of tensors, uniquely named.
    :param schedule: the :class:`~polyad.schedule.Schedule` whose pad, rfactor and inline are applied (its
        stage schedules are not looked at).
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :returns: a :class:`GraphChoice` (no notes).
    :raises ScheduleError: when a decision does not fit the graph (naming the stage).
    """
    g, _ = apply_graph_schedule(outs, Schedule("graph", rfactor=schedule.rfactor, pad=schedule.pad,
                                               space_to_depth=schedule.space_to_depth, fold=schedule.fold,
                                               innermost=schedule.innermost))
    inlined = inline(g, schedule.inline)  # ScheduleError naming the stage when an inline does not fit
    infos = _fused_infos(g, frozenset(schedule.inline), {op.name: stage_info(op) for op in stage_ops(g)[0]}, inlined)
    padded, _ = apply_graph_schedule(outs, Schedule("graph", pad=schedule.pad, space_to_depth=schedule.space_to_depth,
                                                    fold=schedule.fold))
    by_name = stage_ops(padded)[1]
    rf_by = {}
    for n, spec in schedule.rfactor.items():
        op = by_name.get(n)
        if op is None:
            continue
        want = RFactor.of(spec)
        rf, by = _decide("rfactor", [op], {n: stage_info(op)}, dm, [])
        if n in rf and RFactor.of(rf[n]) == want:
            rf_by[n] = by[n]
    return GraphChoice(g, frozenset(schedule.pad), dict(schedule.rfactor), frozenset(schedule.inline),
                       {"fold": {}, "pad": {}, "space_to_depth": {}, "innermost": {}, "rfactor": rf_by, "inline": {}},
                       infos, (), frozenset(schedule.space_to_depth), frozenset(schedule.fold), dict(schedule.innermost))


# ---------------------------------------------------------------------------------------------
# stage rules
# ---------------------------------------------------------------------------------------------
def _tile_options(extent, sizes):
    # the whole extent too when it is small (a 3x3 kernel is one 3x3 block: no partial tiles)
    out = sorted({s for s in sizes if s <= max(extent, 1)} | ({extent} if extent <= max(sizes) else set()))
    return out or [1]


def _heads(info, channels):
    """Tiles of the dimensions before the last two: for rank >= 3 the outermost (conv weight gradients:
    output channels), or with ``channels`` the second instead (NCHW: channels share the rows they read)."""
    rank = len(info.shape)
    if channels:
        if rank < 4:
            return []
        return [(1, tc) + (1,) * (rank - 4)
                for tc in _tile_options(info.shape[1], set(_const("channel_tiles", "channels"))) if tc > 1]
    if rank < 3:
        return [()]
    return [(tf,) + (1,) * (rank - 3) for tf in _tile_options(info.shape[0], set(_const("grid", "heads")))]


def _grid(info, dm, heads):
    rank = len(info.shape)
    V = dm.vector_width
    st = info.strides or (1,) * rank  # stride cells (below) are options too
    inner = _tile_options(info.shape[-1], set(_const("grid", "inner")) | {st[-1]} | {V, 2 * V, 4 * V})
    outer = _tile_options(info.shape[-2], set(_const("grid", "outer")) | {st[-2]}) if rank >= 2 else [None]
    unrolls = _const("grid", "unrolls") if info.reduction else (1,)
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


def stage_candidates(info, dm, channels=False):
    """The grid of (tile, vectorize, unroll) stage schedules of a stage (the ``grid`` rule, with
    ``channels`` the ``channel_tiles`` rule's blocks after it).

    Tiles of the last two output dimensions from the ``grid`` rule's sizes (a small extent whole, the
    stage's stride cells, the device's vector width and its multiples), of the outermost for rank >= 3;
    vector widths the device has, dividing the innermost tile; unrolls for reductions.

    :param info: the stage's :class:`~polyad.schedule.cost.StageInfo`.
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :param channels: also tile the second dimension (NCHW channels) of a rank >= 4 stage.
    :returns: a list of :class:`~polyad.schedule.StageSchedule`.
    """
    if not info.shape:
        return [StageSchedule()]
    out = _grid(info, dm, _heads(info, False))
    if channels:
        out += _grid(info, dm, _heads(info, True))
    return out


def _propose_grid(op, info, dm, graph):
    return stage_candidates(info, dm)


def _propose_channels(op, info, dm, graph):
    return _grid(info, dm, _heads(info, True)) if info.shape else []


def _propose_unrolls(op, info, dm, graph):
    if not info.reduction or not info.shape:
        return []
    red = info.iterations / max(1, math.prod(info.shape))
    top = max(_const("grid", "unrolls"))
    more = [u for u in _const("more_unrolls", "unrolls") if red >= _const("more_unrolls", "min_trips") * u]
    return [dataclasses.replace(ss, unroll=u) for ss in stage_candidates(info, dm) if ss.unroll == top for u in more]


def _propose_whole_rows(op, info, dm, graph):
    """A reduction-free stage in blocks of whole rows: the innermost dimensions whole, the one before them
    in part (the fewest rows, dividing it, that hold ``min_row`` elements)."""
    shape = info.shape
    if info.reduction or not shape:
        return []
    lo = _const("whole_rows", "min_row")
    inner = 1
    for d in range(len(shape) - 1, -1, -1):
        if inner * shape[d] >= lo:
            r = next(r for r in range(1, shape[d] + 1) if shape[d] % r == 0 and inner * r >= lo)
            tile = (1,) * d + (r,) + tuple(shape[d + 1:])
            break
        inner *= shape[d]
    else:
        return []  # smaller than one row
    if math.prod(tile) > _const("whole_rows", "max_block") or math.prod(tile) == math.prod(shape):
        return []
    widths = [v for v in dm.widths if v <= max(dm.vector_width, 1) and shape[-1] % v == 0] if info.vectors else [1]
    return [StageSchedule(tile=tile, vectorize=v) for v in sorted(widths, reverse=True)]


def _batch_blocks(op, info, dm, graph):
    """The block of a stage :func:`~polyad.schedule.graph.innermost` moved (CPU): ``channels`` of its first
    dimension by two vectors of the moved one (of the widest width dividing it), each phase dense where its
    outputs are strided."""
    from .phase import phase_strides

    if dm.kind != "cpu" or getattr(op, "attrs", {}).get("dim", -1) != 0 or "innermost_of" not in op.attrs:
        return []  # the batch moved (filters_innermost's channels: the model ranks their blocks)
    if len(op.shape) < 2:
        return []
    vec = max((v for v in dm.widths if v <= max(dm.vector_width, 1) and op.shape[-1] % v == 0), default=1)
    if vec < 4:
        return []
    lanes = math.gcd(op.shape[-1], _const("batch_blocks", "vectors") * vec)
    c = min(_const("batch_blocks", "channels"), op.shape[0])
    row = 1  # points of the row beside the batch: with few channels, the block's accumulators are too few
    phase = phase_strides(op)
    if c < _const("batch_blocks", "channels") and phase is None and len(op.shape) >= 3:
        row = min(op.shape[-2], -(-_const("batch_blocks", "accumulators") // (c * (lanes // vec))))
    tile = (c,) + (1,) * (len(op.shape) - 3) + ((row,) if len(op.shape) >= 3 else ()) + (lanes,)
    return [StageSchedule(tile=tile, vectorize=vec, phase=phase)]


def _channel_lane_blocks(op, info, dm, graph):
    """The block of a stage :func:`_filters_innermost` moved (CPU): one or two vectors of channels by points of
    the other dimensions, ``accumulators`` (low, high) vectors in all, the fewest loads a multiply-add: a vector
    load serves every point of the block that its operand does not index, an operand that does not read the
    channels is one broadcast a point it indexes (a forward's input: 2 rows x 4 points; a weight gradient's
    output gradient: filters), each charged its blocks' lost points (``-(-n // t) * t / n``)."""
    if dm.kind != "cpu" or getattr(op, "attrs", {}).get("dim") != 1 or "innermost_of" not in op.attrs:
        return []
    from ..codegen.phase import phase_shape
    from .phase import phase_strides

    vw = max(dm.vector_width, 1)
    if vw < 2 or op.shape[-1] % vw or info is None or not info.loads:
        return []
    phase = phase_strides(op)  # a strided data gradient's, along the rows moved before the channels
    shape = phase_shape(op.shape, phase) if phase else op.shape
    low, high = _const("channel_lane_blocks", "accumulators")
    sizes = _const("channel_lane_blocks", "sizes")
    best = None
    for lanes in (vw, 2 * vw):
        if op.shape[-1] % lanes:
            continue
        for head in itertools.product(*[[t for t in sizes if t <= n] for n in shape[:-1]]):
            tile = head + (lanes,)
            acc = math.prod(head) * lanes // vw
            if not low <= acc <= high:
                continue
            issue = load_issue(info, tile, vw)
            lost = math.prod(-(-n // t) * t / n for n, t in zip(shape, tile))
            key = (issue / acc * lost, -acc, tile)
            best = min(best or key, key)
    return [StageSchedule(tile=best[2], vectorize=vw, phase=phase)] if best else []


def _batch_back(op, info, dm, graph):
    """The copy back of a stage :func:`~polyad.schedule.graph.innermost` moved (CPU): whole runs of the moved
    dimension (contiguous in what it reads) by a pair of its innermost outputs (a float2 store each)."""
    if dm.kind != "cpu" or not isinstance(op, ComputeOp) or not isinstance(op.body[0], Load):
        return []
    src = op.body[0].tensor.op
    if getattr(src, "attrs", {}).get("innermost_of") != op.name:
        return []
    d = src.attrs["dim"]
    tile = [1] * len(op.shape)
    tile[d] = math.gcd(op.shape[d], _const("batch_back", "run"))
    vec = 2 if op.shape[-1] % 2 == 0 and 2 in dm.widths else 1
    tile[-1] = vec
    return [StageSchedule(tile=tuple(tile), vectorize=vec)]


def _batch_last_copy(op, info, dm, graph):
    """An operand's copy with the batch last, made by :func:`~polyad.schedule.graph.innermost` (CPU): a run of
    its rows (contiguous in what it reads) by one vector of the batch; a batch of ``whole_batches`` whole, by a
    few points of the row (each work-item writes whole cache lines of the copy)."""
    if dm.kind != "cpu" or "moved_last_for" not in getattr(op, "attrs", {}) or len(op.shape) < 2:
        return []
    k = RULE["batch_last_copy"].constants
    whole = _whole_batch(op)
    lanes, run = (k["whole_lanes"], k["whole_run"]) if whole else (k["lanes"], k["run"])
    vec = max((v for v in dm.widths if v <= min(lanes, max(dm.vector_width, 1)) and op.shape[-1] % v == 0), default=1)
    tile = (1,) * (len(op.shape) - 2) + (min(op.shape[-2], run), op.shape[-1] if whole else vec)
    return [StageSchedule(tile=tile, vectorize=vec)]


def _whole_batch(op):
    """Whether ``batch_last_copy`` copies ``op``'s batch whole, by a few points of the row (its work-items write
    whole cache lines of the copy)."""
    return op.shape[-1] in _const("batch_last_copy", "whole_batches")


def _padded_rows(op, info, dm, graph):
    """The block of a stage :func:`~polyad.schedule.graph.pad_reads` made a box: a whole row of vectors by
    the most channels (NCHW's second dimension: the outputs that share every vector load of the padded
    operand, each with its own broadcast weight) that divide the channels and keep at most ``max_vectors``
    accumulators; two rows where no channel block does, when the row splits into vectors of at least 4
    (else nothing: the model chooses)."""
    if not _padded(op) or len(op.shape) < 2 or dm.kind != "cpu":
        return []
    e = op.shape[-1]
    vec = next((v for v in _const("padded_rows", "widths") if v <= dm.vector_width and v in dm.widths and e % v == 0),
               None)
    if vec is None or e > _const("padded_rows", "max_row") or vec < dm.vector_width:
        return []  # a row in narrower vectors than the device's best: the model chooses (edge groups run narrower)
    most = _const("padded_rows", "max_vectors") // (e // vec)
    c = next((c for c in _const("padded_rows", "channels") if c <= most and op.shape[1] % c == 0), 1)
    if c > 1 and len(op.shape) >= 3:
        return [StageSchedule(tile=(1, c) + (1,) * (len(op.shape) - 3) + (e,), vectorize=vec)]
    r = 2 if op.shape[-2] >= 2 and 2 * e // vec <= most else 1
    return [StageSchedule(tile=(1,) * (len(op.shape) - 2) + (r, e), vectorize=vec)]


def _plain_copy(op):
    """Reads, casts and selects against zero whose conditions are on indices only (a crop, a zero-padded or
    de-interleaved copy; not a pool's gradient, whose selects read an argmax)."""
    vals = op.body if isinstance(op, ComputeOp) else tuple(v for st in op.statements for v in st.values)
    for n in post_order(tuple(vals)):
        if isinstance(n, Call):
            if n.op not in ("select", "cast") and (n.dtype.startswith("float") or
                                                    any(a.dtype.startswith("float") for a in n.args)):
                return False
            if n.op == "select" and any(isinstance(x, Load) for x in post_order((n.args[0],))):
                return False
    return True


def _copy_rows(op, info, dm, graph):
    """The block of a materialised copy (a crop, a zero-padded or de-interleaved copy: reads, selects
    against zero, casts): whole rows of its last dimension as vectors, a few per block (its writes stream)."""
    from ..poly.bitcast import bitcast_source

    if info is None or info.reduction or len(op.shape) < 2 or dm.kind != "cpu" or not _plain_copy(op):
        return []
    if bitcast_source(op) is not None or any(t.op.name in graph.inline and not (
            isinstance(t.op, ComputeOp) and _plain_copy(t.op)) for t in op.input_tensors):
        # a reshape has no kernel (codegen aliases it); an inlined producer brings its arithmetic, unless it is a
        # copy too (split's pieces in a concatenation: naive loops 1.03 ms, rows 0.17-0.23, 16x32x56x56)
        return []
    e = op.shape[-1]
    if e > _const("copy_rows", "max_row"):
        return []
    vec = _copy_width(e, dm)
    if vec == 1 and info.vectors:
        # no vector divides the row: the whole row in a work-item, in vectors of a short width and its last points
        # one by one; rows too short for two of them run the naive loops, which PoCL's work-item vectoriser runs in
        # lanes
        w = _cut_width(e, dm)
        return [StageSchedule(tile=(1,) * (len(op.shape) - 1) + (-(-e // w) * w,), vectorize=w) if w else
                StageSchedule()]
    if not info.vectors:  # a bool copy: no vectors (auto's schedule of a bool transpose was its own ScheduleError)
        vec = 1
    r = max(1, min(op.shape[-2], _const("copy_rows", "row_elements") // e))
    while op.shape[-2] % r:
        r -= 1
    return [StageSchedule(tile=(1,) * (len(op.shape) - 2) + (r, e), vectorize=vec)]


def _cut_width(e, dm):
    """``copy_rows``' short vector for a row of ``e`` no vector divides, or None where two do not fit in it."""
    w = _const("copy_rows", "cut_width")
    return w if e >= 2 * w and w in dm.widths and w <= dm.vector_width else None


def _copy_note(op, info, dm):
    e = op.shape[-1]
    if _copy_width(e, dm) > 1 or not info.vectors:
        return f"a copy: whole rows of {e} as vectors"
    if _cut_width(e, dm):
        return f"a copy whose rows of {e} no vector divides: whole rows in vectors of {_cut_width(e, dm)}, the rest " \
               "point by point"
    return f"a copy whose rows of {e} no vector divides: the naive loops, in lanes across work-items"


def _copy_width(e, dm):
    """The widest of ``copy_rows``' widths that the device has (at most its best) and that divides a row of ``e``;
    1 where none does."""
    return next((v for v in _const("copy_rows", "widths") if v <= dm.vector_width and v in dm.widths and e % v == 0), 1)


def _divided_rows(op, info, dm, graph):
    """The block of an elementwise stage that reads along its last dimension through a floor division
    (``H[.., x // 2]``: a pool's upsampled gradient, ``info.divided``): PoCL's work-item vectoriser leaves those
    naive loops scalar; explicit vectors along the row, one vector a work-item."""
    if (info is None or info.reduction or not info.divided or info.strided or not op.shape or dm.kind != "cpu"
            or not info.vectors):
        return []  # (strided: a max-pool's gradient compares window indices; stride-cell blocks were measured there)
    if _copy_rows(op, info, dm, graph):
        return []  # a plain copy (no arithmetic) keeps copy_rows' whole rows, measured on copies
    vec = _row_width("divided_rows", op.shape[-1], dm)
    return [] if vec is None else [StageSchedule(tile=(1,) * (len(op.shape) - 1) + (vec,), vectorize=vec)]


def _lane_stride(op):
    """The largest :func:`~polyad.schedule.cost.scale_of` of a read's last index by the stage's last output
    variable (a stride-2 pool's window ``X[.., 2*x + kw]``: 2); None where no read scales it."""
    from ..poly.stage import statements_of

    ks = [scale_of(n.indices[-1], st.out_vars[-1]) for st in statements_of(op) if st.out_vars
          for n in post_order(tuple(st.values)) if isinstance(n, Load) and n.indices]
    return max((k for k in ks if k is not None), default=None)


def _strided_lanes(op, info, dm, graph):
    """The block of a box reduction whose reads index its rows at a stride (``X[.., 2*x + kw]``: an unpadded pool's
    window) on a CPU: one vector of ``width`` lanes a work-item."""
    if (dm.kind != "cpu" or not info.reduction or not info.vectors or not op.shape or info.strided or info.regions
            or _lane_stride(op) is None):
        return []  # (regions: a padded pool's clipped window, whose whole rows in float2 measured 4.3x faster)
    w = _const("strided_lanes", "width")
    if w not in dm.widths or w > dm.vector_width or op.shape[-1] < w:
        return []
    return [StageSchedule(tile=(1,) * (len(op.shape) - 1) + (w,), vectorize=w)]


def _row_width(rule, e, dm):
    """The first of ``rule``'s ``widths`` that the device has (at most its best) and that divides a row of ``e``."""
    return next((v for v in _const(rule, "widths") if v in dm.widths and v <= dm.vector_width and e % v == 0), None)


def _strided_rows(op, info, dm, graph):
    """The block of a reduction-free strided stage (a max-pool's gradient: its window's match compared per point)
    whose outputs fill the last-level cache: one stride cell along the other strided dimensions and the whole
    last row, in vectors of the widest of ``widths`` that divides the row (stored nontemporally:
    ``nontemporal_stores``)."""
    if info.reduction or not info.strided or not info.vectors or len(op.shape) < 2 or not streams(info, dm):
        return []
    e, strides = op.shape[-1], info.strides or (1,) * len(op.shape)
    if e > _const("strided_rows", "max_row") or e % strides[-1]:
        return []
    vec = _row_width("strided_rows", e, dm)
    return [] if vec is None else [StageSchedule(tile=tuple(strides[:-1]) + (e,), vectorize=vec)]


# ---------------------------------------------------------------------------------------------
# stage rules: stride phases
# ---------------------------------------------------------------------------------------------
def _phase_vectors(info):
    """Whether vectors may run along a phased dimension: a simple reduction's (its stores, ``s`` apart and
    lane by lane, are few against its multiply-adds), never a reduction-free or select-combiner stage's
    (measured 2.5-5x slower: every lane's store and select on its own)."""
    return info.reduction and info.simple


def phase_options(op, info):
    """The phase decompositions the ``stride_phases`` rule proposes for a stage.

    :func:`~polyad.schedule.phase.phase_strides`, each stride kept where it is at most ``max_stride`` and leaves
    ``min_points`` points per phase along its dimension (a grouped convolution's ``f // 6`` or a flatten's
    ``i // 500`` are divisions too, of nothing a phase makes dense); for a stage that may not vectorise along a
    phased dimension, also the same with its innermost dimension unphased (its vectors then run along ``x``).

    :param op: the stage.
    :param info: its :class:`~polyad.schedule.cost.StageInfo` (``reduction``, ``simple`` and ``vectors`` are read).
    :returns: a list of phase tuples (empty: the rule does not apply).
    """
    from .phase import phase_strides

    if not op.shape:
        return []
    found = phase_strides(op)
    if found is None:
        return []
    k = RULE["stride_phases"].constants
    st = tuple(s if s <= k["max_stride"] and n >= k["min_points"] * s else 1 for s, n in zip(found, op.shape))
    if all(s == 1 for s in st):
        return []
    out = [st]
    if st[-1] > 1 and info.vectors and not _phase_vectors(info) and any(s > 1 for s in st[:-1]):
        out.append(st[:-1] + (1,))
    return out


def _phase_channels(c):
    k = RULE["stride_phases"].constants
    return sorted({1} | ({c} if c <= k["whole_channels"] else set())
                  | {d for d in k["channel_divisors"] if d < c and c % d == 0})


def _phased_gathers(op, info, dm, graph):
    """A one-hot sum over overlapping strided windows that would run as a scatter (a 3x3/2/1 max pool's data
    gradient: CPU): the gather, phased, every phase's row of ``q`` whole in the widest vectors that divide it
    (at least ``min_lanes``, at most ``max_vectors`` of them), where every phase has the same extents (a row of
    56 in phases of 28; a row of 55 has phases of 28 and 27, whose ragged row ran 1.5-2.5x the scatter).  Each
    phase's window points are a compare and a select a lane of contiguous loads; the scatter's were a chain of
    scalar read-modify-writes with their bounds tests."""
    if dm.kind != "cpu" or info is None or info.scatter is None or not info.reduction:
        return []
    k = RULE["phased_gathers"].constants
    for ph, p in info.phased:
        if ph[-1] < 2 or any(n % s for n, s in zip(info.shape, ph)):
            continue
        q = p.shape[-1]
        w = max((v for v in dm.widths if k["min_lanes"] <= v <= max(dm.vector_width, 1) and q % v == 0), default=0)
        if w and q // w <= k["max_vectors"]:
            return [StageSchedule(phase=ph, tile=(1,) * (len(p.shape) - 1) + (q,), vectorize=w)]
    return []


def _propose_phases(op, info, dm, graph):
    """Phased blocks: per phase of :func:`phase_options`, tiles over ``q``: the channels (dimension 1 of rank >= 3;
    reductions only: the channels of a data gradient share the rows of ``H`` they read) whole when few and by
    divisors, the rows (dimension -2, where it is not the channels), the innermost ``q`` in short vectors (along
    a phased ``q`` only where :func:`_phase_vectors` allows), unrolls for reductions."""
    import itertools

    from ..codegen.phase import phase_shape

    k = RULE["stride_phases"].constants
    out = []
    for ph in (p for p, _ in info.phased):
        q = phase_shape(info.shape, ph)
        rank = len(q)
        opts = [[1] for _ in range(rank)]
        if rank >= 3 and info.reduction:
            opts[1] = _phase_channels(q[1])
        if rank >= 2 and (rank == 2 or rank >= 4 or not info.reduction):
            opts[-2] = [r for r in k["rows"] if r <= q[-2]]
        opts[-1] = [t for t in k["inner"] if t <= q[-1]]
        vec_ok = info.vectors and (ph[-1] == 1 or _phase_vectors(info))
        for tile in itertools.product(*opts):
            t = tile[-1]
            vecs = [1] + ([t] if vec_ok and t > 1 and t in dm.widths and t <= dm.vector_width else [])
            for v in vecs:
                for u in (k["unrolls"] if info.reduction else (1,)):
                    if all(x == 1 for x in tile):
                        out.append(StageSchedule(phase=ph, unroll=u))
                    else:
                        out.append(StageSchedule(phase=ph, tile=tile, vectorize=v, unroll=u))
    return out


def _partial_of(op, graph, rule):
    return op.name.endswith("_rf") and graph.rule_of("rfactor", op.name[:-3]) == rule


def _partial_width(op, dm):
    f = op.shape[-1]
    return f, max(v for v in dm.widths if v <= max(dm.vector_width, 1) and f % v == 0)


def _row_partials(op, info, dm, graph):
    """One row's interleaved partials per work-item: ``F / vec`` contiguous vector accumulators."""
    if not _partial_of(op, graph, "rfactor_rows"):
        return []
    f, vec = _partial_width(op, dm)
    return [StageSchedule(tile=(1,) * (len(op.shape) - 1) + (f,), vectorize=vec)]


def _lane_tile(shape, loads, dm):
    """The partial stage's block over its outer outputs (its lanes whole, last): the fewest issue slots per
    multiply-add, ``(max(F, w * L) + step_overhead) / F`` for F accumulators and L vector loads a reduction
    step (a load is repeated across the block's extent in each output it reads), times the waste of ragged
    blocks (ties: more accumulators, then fewer loads); at most 3/4 of the registers in accumulators (the
    loaded operands need the rest), at most ``max_block`` along a dimension, ragged only along the
    outermost, and enough blocks to fill the device.

    A conv weight gradient's ``dW_rf[co, ci, kh, kw, lane]`` reads ``H[.., co, ..]`` and
    ``X[.., ci, kh.., kw..]``: ``co x kh x kw`` blocks reuse each X load for every co and each H load for
    every tap."""
    outer = shape[:-1]
    budget = max(1, min(dm.fma_slots, dm.registers) * 3 // 4)
    cap, w, over = (_const("lane_partials", k) for k in ("max_block", "load_weight", "step_overhead"))
    # ragged blocks only along the outermost output (conv2d_3x3's 19 co in 2s); a ragged tap block branches
    opts = [sorted({t for t in range(1, min(n, cap) + 1) if n % t == 0 or (d == 0 and t in (2, 4, 8))})
            for d, n in enumerate(outer)]
    reads = [frozenset(d for d in used if d < len(outer)) for used, _ in loads]
    best = None
    for tile in itertools.product(*opts):
        f = math.prod(tile)
        if f > budget or math.prod(-(-n // t) for n, t in zip(outer, tile)) < dm.min_parallel:
            continue
        ld = sum(math.prod(tile[d] for d in used) for used in reads)
        waste = math.prod(-(-n // t) * t / n for n, t in zip(outer, tile))
        key = (round((max(f, w * ld) + over) / f * waste, 6), -f, ld, tile)
        best = key if best is None or key < best else best
    return (best[-1] if best else (1,) * len(outer)) + (shape[-1],)


def _lane_partials(op, info, dm, graph):
    """A lane vector per output, the block of :func:`_lane_tile`."""
    if not (_partial_of(op, graph, "rfactor_lanes") or _partial_of(op, graph, "rfactor_batch_lanes")):
        return []
    _, vec = _partial_width(op, dm)
    return [StageSchedule(tile=_lane_tile(op.shape, info.loads, dm), vectorize=vec)]


def _gathered_partials(op, info, dm, graph):
    """The partial stage of ``rfactor_gathered``: a lane vector per output in ``tile`` blocks of outputs, and a
    work-group of every block along the first output dimension (the rows of X that share the block's rows of
    W, read from one core's caches)."""
    if not _partial_of(op, graph, "rfactor_gathered") or len(op.shape) != 3:
        return []
    _, vec = _partial_width(op, dm)
    ti, tj = _const("gathered_partials", "tile")
    ti, tj = (ti if op.shape[0] % ti == 0 else 1), (tj if op.shape[1] % tj == 0 else 1)
    rows = op.shape[0] // ti
    group = (1, 1, rows) if 2 <= rows <= _const("cpu_operand_groups", "max_group") else None
    return [StageSchedule(tile=(ti, tj, op.shape[2]), vectorize=vec, local_size=group)]


def _step_variants(ss, shape, dm, reduction):
    """The blocks one step from ``ss``: one tile dimension doubled or halved (within the stage, whole vectors
    along the innermost), the vector width doubled or halved (dividing the innermost tile), unroll 1, 2 or 4
    on a reduction; phase and work-group kept."""
    if not shape:
        return []
    tile = ss.tile or (1,) * len(shape)
    widths = [v for v in dm.widths if v <= max(dm.vector_width, 1)] or [1]
    out = []
    for d, t in enumerate(tile):
        for n in (t * 2, t // 2):
            if 1 <= n <= shape[d] and (d < len(tile) - 1 or n % ss.vectorize == 0):
                out.append(dataclasses.replace(ss, tile=tile[:d] + (n,) + tile[d + 1:]))
    for v in (ss.vectorize * 2, ss.vectorize // 2):
        if v in widths + [1] and tile[-1] % v == 0:
            out.append(dataclasses.replace(ss, tile=tile, vectorize=v))
    if reduction:
        out += [dataclasses.replace(ss, unroll=u) for u in _const("block_steps", "unrolls") if u != ss.unroll]
    return [v for v in out if v != ss]


def _propose_steps(op, info, dm, graph):
    """The one-step variants of every deciding rule's block that applies (its measured neighbours were only a
    few; the tuner measures the rest)."""
    out = []
    for name in _const("block_steps", "of"):
        r = RULE[name]
        if r.applies is None or r.applies(op, info, dm, graph):
            for ss in r.propose(op, info, dm, graph):
                out += _step_variants(ss, op.shape, dm, bool(info.reduction))
    return out


def _proposes(propose):
    """``applies`` of a rule that decides: it proposes a block for the stage."""

    def applies(op, info, dm, graph):
        return bool(propose(op, info, dm, graph))

    return applies


def _only_own(rule_name):
    """A limit: the model ranks the rule's own blocks alone (they were measured; the model misjudges them)."""

    def limit(op, info, dm, graph, cands, ranked):
        own = RULE[rule_name].propose(op, info, dm, graph)
        return [c for c in cands if c.schedule.stored(False) in own]  # in either store form: _one_store_form

    return limit


def _deciding(rule_name, propose):
    """The ``applies``, ``propose`` and ``limit`` of a rule that decides: it proposes its measured blocks, and
    where it does the model ranks those alone."""
    return dict(applies=_proposes(propose), propose=propose, limit=_only_own(rule_name))


def _tuple_reducer_rows(op, info, dm, graph, cands, ranked):
    wide = min(_const("tuple_reducers", "min_inner"), info.shape[-1])
    return [c for c in ranked if c.schedule.tile and c.schedule.tile[-2] == 1 and c.schedule.tile[-1] >= wide] or ranked


def block_statements(ss, shape=None):
    """The statements a work-item's block emits: one per vector of its tile, for each unrolled step, in each copy
    of the block the code holds.  isl emits the full blocks once and the partial ones apart, unrolled too: with
    ``shape`` (the extents the tile blocks), two copies along each dimension the tile does not divide (lenet's dW2,
    84x120 in 8x32 blocks unrolled 2: 512 statements, four copies, 334 KB of OpenCL C)."""
    n = (math.prod(ss.tile) // max(1, ss.vectorize) if ss.tile else 1) * max(1, ss.unroll)
    if shape and ss.tile:
        n *= 2 ** sum(1 for e, t in zip(shape[-len(ss.tile):], ss.tile) if e % t)
    return n


def _blocked_shape(info, ss):
    """The extents ``ss``'s tile blocks: a phased schedule's are its phase's ``q`` extents."""
    if ss.phase is not None:
        ph = info.phase_info(ss.phase)
        return ph.shape if ph is not None else None
    return info.shape


def _occupied(op, info, dm, graph, cands, ranked):
    """A GPU's blocks: those that leave at least as many work-items as the naive loops or ``min_parallel``,
    whichever is fewer (the naive loops where none does)."""
    need = min(_points(op), dm.min_parallel)
    keep = [c for c in ranked if block_count(info, c.schedule.tile) >= need]
    return keep or [c for c in cands if c.schedule.tile is None][:1] or ranked


#: the functions whose narrow vectors PoCL runs slower than scalar code (math_lanes)
_MATH = frozenset(["exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf", "pow"])


def _calls_math(op, inline=frozenset()):
    """True when a stage's body, or that of a producer inlined into it (names in ``inline``), calls one of
    :data:`_MATH`."""
    from ..poly.stage import statements_of

    todo, seen = [op], set()
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        try:
            values = tuple(v for st in statements_of(o) for v in st.values)
        except Exception:  # noqa: BLE001 - a stage without statements: no opinion
            continue
        if any(isinstance(n, Call) and n.op in _MATH for n in post_order(values)):
            return True
        todo.extend(t.op for t in o.input_tensors if t.op.name in inline)
    return False


def _wide_math(op, info, dm, graph, cands, ranked):
    """An elementwise stage that calls math functions: the model ranks only vectors of at least ``min_width``
    lanes (or the widest the device has), else scalar code, where any of them is ranked.  The model prices such
    a stage by its memory traffic, the same at every width, and its smallest-block tie-break took scalar code:
    erf's runs 5x its 8 lanes."""
    least = min(RULE["math_lanes"].constants["min_width"], max(dm.widths))
    return ([c for c in ranked if c.schedule.vectorize >= least] or [c for c in ranked if c.schedule.vectorize == 1]
            or ranked)


def _local_size(ss, info, dm):
    """The work-group size the rule gives a block: the largest of the device's that its innermost blocks fill."""
    tile = ss.tile or (1,) * len(info.shape)
    inner_blocks = -(-info.shape[-1] // tile[-1])
    for ls in sorted(dm.local_sizes, reverse=True):
        if inner_blocks >= ls:
            return (ls,)
    return None


def _local_sizes(op, info, dm, ss, mine_only=False):
    if ss.local_size is not None:
        return [(ss, True)]
    mine = _local_size(ss, info, dm)
    if mine_only:
        return [(ss if mine is None else dataclasses.replace(ss, local_size=mine), True)]
    return [(ss, mine is None)] + [(dataclasses.replace(ss, local_size=(ls,)), mine == (ls,))
                                   for ls in sorted(dm.local_sizes)]


def _operand_group(op, ss, dm):
    """The CPU work-group of a matmul-like block: every block along the output dimension that the stage's
    dominant operand does not read with, in one group, so consecutive work-items on a core reuse that
    operand's strip from its caches; None where that does not apply.

    dense's dX, ``dX[i, k] = sum_j H[i, j] * W[j, k]``: W (the 4 MB operand) is read without ``i``, so the
    ``60 / 6`` row blocks of one 32-column strip of W go in one group (OpenCL order ``(1, 10)``), leaving the
    32 strips as groups.
    """
    if not ss.tile or len(ss.tile) != 2:
        return None
    a = _free_of_dominant(op)
    if a is None:
        return None
    blocks = [-(-n // t) for n, t in zip(op.shape, ss.tile)]
    if not 2 <= blocks[a] <= _const("cpu_operand_groups", "max_group") or \
            blocks[1 - a] < _const("cpu_operand_groups", "groups_per_core") * dm.cores:
        return None
    return tuple(blocks[a] if d == a else 1 for d in (1, 0))  # OpenCL order: the last output dimension first


@op_memo
def _free_of_dominant(op):
    """The output dimension (0 or 1) that a 2-d reduction's dominant operand does not read with, or None (no
    operand dominates, or it reads with both or neither): :func:`_operand_group`'s part that is the op's alone,
    computed once per op (the tuner asks it for every candidate of every stage: 628,000 times building
    lenet_step's 40 graph variants)."""
    if not isinstance(op, ComputeOp) or len(op.shape) != 2:
        return None
    b = op.body[0]
    if not isinstance(b, Reduce) or len(op.body) != 1:
        return None
    size, dims = {}, {}
    for ld in post_order(b.source):
        if isinstance(ld, Load):
            t = ld.tensor
            size[t] = math.prod(t.shape) * np.dtype(t.dtype).itemsize
            dims[t] = dims.get(t, frozenset()) | frozenset(
                d for d, v in enumerate(op.axis) if any(_uses(ix, v) for ix in ld.indices))
    if len(size) < 2:
        return None
    big = max(size, key=size.get)
    if any(size[big] < _const("cpu_operand_groups", "dominance") * n for t, n in size.items() if t is not big):
        return None
    free = [d for d in (0, 1) if d not in dims[big]]
    return free[0] if len(free) == 1 else None


def _operand_groups(op, info, dm, ss, mine_only=False):
    group = None if ss.local_size is not None else _operand_group(op, ss, dm)
    if group is None:
        return [(ss, True)]
    mine = dataclasses.replace(ss, local_size=group)
    return [(mine, True)] if mine_only else [(ss, False), (mine, True)]


def _nontemporal_variants(op, info, dm, ss, mine_only=False):
    """A vector block in both store forms where its stores can be nontemporal (aligned: the width divides the
    innermost extent); the model ranks the nontemporal one."""
    nt = ss.stored(True)
    if ss.nontemporal or not nt.nontemporal_stores(info.shape):
        return [(ss, True)]
    return [(nt, True)] if mine_only else [(ss, False), (nt, True)]


def _one_store_form(op, info, dm, graph, cands, ranked):
    """A limit after the others (a deciding rule keeps both forms of its blocks): of a block ranked in both
    store forms, the model ranks the nontemporal one."""
    forms = {c.schedule for c in cands}
    return [c for c in ranked
            if c.schedule.nontemporal or c.schedule.stored(True) not in forms]


def stage_space_key(op, info, graph=None):
    """A hashable key of everything :func:`stage_space` reads on one device model: equal keys, equal spaces.

    That is the stage's structure (:func:`~polyad.schedule.tuning.stage_key`: body, shape, dtypes, the inputs'
    shapes), its name, tag and attrs (``innermost``'s stages are known by their attrs, rfactor partials by their
    ``_rf`` name), each input's producer's name, tag and attrs (``batch_back`` reads them), the info, and the
    graph's part the rules read: which inputs come from inlined stages (``copy_rows``) and which graph rule made
    the rfactor this stage is the partial of (``row_partials``, ``lane_partials``).  A rule that reads more of
    ``graph`` or of the op must add it here; the tuner builds dozens of graph variants that share most stages and
    computes each distinct stage's space once by this key (tests/tune compare such spaces with fresh ones).
    """
    from .tuning import stage_key

    graph = graph if graph is not None else _NO_GRAPH

    def attrs(o):
        return repr(sorted((k, repr(v)) for k, v in (getattr(o, "attrs", None) or {}).items()))

    producers = tuple((t.op.name, getattr(t.op, "tag", ""), attrs(t.op), t.op.name in graph.inline)
                      for t in op.input_tensors)
    partial = graph.rule_of("rfactor", op.name[:-3]) if op.name.endswith("_rf") else None
    return (op.name, stage_key(op), getattr(op, "tag", ""), attrs(op), producers, info, partial)


def stage_space(op, dm, graph=None, info=None, ranked_only=False):
    """The candidates of one stage, each with the rule that proposed it and whether the model ranks it.

    Proposals come in the table's order (a schedule two rules propose is the first one's), then the
    variants (work-group sizes), then the limits.

    :param op: the stage (an op of ``graph.outputs``' graph).
    :param dm: the :class:`~polyad.schedule.model.DeviceModel`.
    :param graph: the :class:`GraphChoice` the stage comes from (None: no graph decision; the rules about
        rfactor partials then propose nothing).
    :param info: the stage's :class:`~polyad.schedule.cost.StageInfo` (None: computed).
    :param ranked_only: leave out the proposals the model does not rank (what ``auto_schedule`` needs).
    :returns: a :class:`StageSpace`.
    """
    graph = graph if graph is not None else _NO_GRAPH
    info = info if info is not None else stage_info(op)
    stage_rules = [r for r in RULES if r.level == "stage" and (r.applies is None or r.applies(op, info, dm, graph))]
    seen, cands = set(), []
    for r in stage_rules:
        if r.propose is None:
            continue
        ranked = r.ranked is None or r.ranked(op, info, dm, graph)
        if ranked_only and not ranked:
            continue
        for ss in r.propose(op, info, dm, graph):
            if ss not in seen:
                seen.add(ss)
                cands.append(Candidate(ss, r.name, ranked))
    for r in stage_rules:
        if r.vary is None:
            continue
        out = []
        for c in cands:
            for ss, mine in r.vary(op, info, dm, c.schedule, ranked_only and c.ranked):
                if ss == c.schedule:
                    out.append(c if mine or not c.ranked else dataclasses.replace(c, ranked=False))
                elif ss not in seen and not (ranked_only and not (c.ranked and mine)):
                    seen.add(ss)
                    out.append(Candidate(ss, f"{c.rule}+{r.name}", c.ranked and mine))
        cands = out
    # the per-block cap is a reduction's (its block is unrolled inside the reduction loop) or a GPU's (scalars); a
    # CPU's reduction-free blocks are vectors over whole rows (whole_rows: 1000 scalars of a relu, 37-70 GB/s),
    # capped by their code alone
    cap = _const("block_code", "max_statements") if info.reduction or dm.kind != "cpu" else math.inf
    code = _const("block_code", "max_code")
    cands = [c for c in cands if block_statements(c.schedule) <= cap
             and block_statements(c.schedule, _blocked_shape(info, c.schedule)) <= code
             and (info.vectors or c.schedule.vectorize == 1)]  # every rule's: a bool output has no vectors
    decided = None
    for r in stage_rules:
        if r.limit is None:
            continue
        ranked = [c for c in cands if c.ranked]
        keep = {id(c) for c in r.limit(op, info, dm, graph, cands, ranked)}
        cands = [c if (id(c) in keep) == c.ranked else dataclasses.replace(c, ranked=id(c) in keep) for c in cands]
        if r.note is not None:
            decided = r.name
    return StageSpace(op.name, tuple(c for c in cands if c.ranked or not ranked_only), decided)


# ---------------------------------------------------------------------------------------------
# the space
# ---------------------------------------------------------------------------------------------
def _rfactor_factors(extent):
    return [f for f in (8, 16, 32, 64, 128, 256, 512, 1024) if 2 <= f < extent]


def _rfactor_options(op, chosen=None):
    """Candidate rfactor decisions of a reduction stage: bare factors (the default form over the largest
    axis), then :class:`~polyad.schedule.RFactor` forms over every axis, interleaved and blocked; and
    ``chosen`` (the graph rules' decision) as it is written."""
    try:
        _, reduces, red = _reduction_form(op)
    except ScheduleError:
        return []
    if not red:
        return []
    largest = max(red, key=lambda a: a.extent)
    inter = _interleavable(reduces)
    narrow = bool(op.shape) and 2 * op.shape[-1] <= max(_const("rfactor_lanes", "widths"))
    seen, out = {}, []

    def add(value, f, ax, form):
        key = (f, ax.name, inter and ax.extent % f == 0 if form is None else form)
        if key not in seen:
            seen[key] = len(out)
            out.append(value)

    for ax in [largest] + [a for a in red if a is not largest]:
        factors = set(_rfactor_factors(ax.extent))
        if inter:
            factors |= {f for f in _const("rfactor_lanes", "widths") if f < ax.extent}
            factors |= {f for f in range(8, 257, 8) if ax.extent % f == 0 and ax.extent // f >= 4}
        for f in sorted(factors):
            add(f if ax is largest else RFactor(f, ax.name), f, ax, None)
            if inter:
                add(RFactor(f, ax.name, not (ax.extent % f == 0)), f, ax, not (ax.extent % f == 0))
        # lanes along an axis the operands index elsewhere than last (a conv weight gradient's batch), read
        # through copies with it last: whole aligned vectors of partials, where the innermost output is too
        # narrow for vectors of its own (as rfactor_lanes has it)
        if inter and narrow and axis_movable(op, ax.name) is None:
            for f in _const("rfactor_lanes", "widths"):
                if f <= ax.extent and ax.extent % f == 0:
                    add(RFactor(f, ax.name, True, axis_last=True), f, ax, "last")
    if chosen is not None:
        spec = RFactor.of(chosen)
        ax = next((a for a in red if a.name == spec.axis), largest) if spec.axis else largest
        key = (spec.factor, ax.name, "last" if spec.axis_last else inter and ax.extent % spec.factor == 0
               if spec.interleave is None else spec.interleave)
        if key in seen:
            out[seen[key]] = chosen
        else:
            out.append(chosen)
    return out


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
    outs = scheduled_graph(as_tensor_list(outputs, "candidate_space outputs"))
    folds = tuple(op.name for op in stage_ops(outs)[0] if foldable(outs, op) is None)
    if schedule is None:
        graph = graph_decisions(outs, dm)
    else:
        graph = given_graph(outs, schedule, dm)
    for n in sorted(graph.fold):  # the other decisions are made on the folded graph
        outs = fold(outs, n)
    ops, _ = stage_ops(outs)
    out_ops = {id(t.op) for t in outs}
    inl = tuple(op.name for op in ops if id(op) not in out_ops and inlinable(op) is None)
    pad = tuple(op.name for op in ops if paddable(op) is not None)
    s2d = tuple(op.name for op in ops if strided_reads(op))
    # rfactor candidates are those of the padded graph (a padded sum is a box: it splits)
    padded = outs
    for n in sorted(graph.pad):
        padded = pad_reads(padded, n)
    rf = {}
    for op in stage_ops(padded)[0]:
        fs = _rfactor_options(op, graph.rfactor.get(op.name) if schedule is None else None)
        if fs:
            rf[op.name] = fs
    candidates = {op.name: stage_space(op, dm, graph, graph.infos[op.name]).candidates
                  for op in stage_ops(graph.outputs)[0] if op.name not in graph.inline}
    stages = {n: [c.schedule for c in cs] for n, cs in candidates.items()}
    return Space(inl, rf, stages, pad, candidates, s2d, folds)


# ---------------------------------------------------------------------------------------------
# the rules: one table, in the order they apply (stage proposals: the argmin's tie order)
# ---------------------------------------------------------------------------------------------
def _never(*_):
    return False


RULES = (
    # graph: fold, pad, space_to_depth, rfactor (the first that proposes decides), inline
    Rule("fold_crops", "graph",
         "a crop of a reduction (C[o] = T[o + lo], a padded input's gradient cut back to the input) computes the "
         "reduction itself, at the points it keeps",
         {},
         "PoCL on a 2-core Zen 4, benchmark shapes: conv2d_dilated dX 1.39 ms (34x34 padded, scalar tails for its "
         "2 extra columns) + 0.07 ms crop -> 0.32 ms (32x32, whole float8 rows); conv2d_5x5_s3 dX 9.3 + 0.35 ms "
         "-> 6.6 ms",
         target="fold", propose=_cropped_reduction),
    Rule("batch_lanes", "graph",
         "CPU: a reduction whose rows do not split into whole vectors (a strided convolution's data gradient; a "
         "padded box whose rows are not a multiple of the vector width) is computed with its batch innermost "
         "(innermost(stage, 0)) when the batch is at least two vectors: vectors along the batch, the operands "
         "that read it through copies with the batch last, the result copied back",
         {"min_iterations": 1 << 20},
         "PoCL on a 2-core Zen 4, min of 5: conv2d_5x5_s3 dX (32x17x58x58, stride 3) phased NCHW in its best "
         "blocks (1x17x1x4/float4) 5.8-6.0 ms, batch innermost 1.49 ms (phases 1x3x3x1, 8 channels x 16 batch, "
         "float8) + 0.13 ms for H's copy + the copy back; conv2d_3x3's padded dX (rows of 28) 1.70 -> 1.01-1.2 "
         "+ 0.18 + 0.09 ms; lenet_step's second conv dX (rows of 12, batch 64) 0.55 -> 0.28 + 0.13 + 0.04 ms "
         "(backward 1.79 -> 1.61)",
         target="innermost", propose=_batch_lanes),
    Rule("filters_innermost", "graph",
         "CPU: a convolution (rank 4) whose rows (a phase's, where its outputs are strided) are shorter than a "
         "vector and whose second dimension fills at least min_vectors vectors is computed with it innermost "
         "(innermost(stage, 1)): vectors along the channels, the operands that read them through copies with "
         "them last, the other broadcast; a forward or data gradient on small images, a weight gradient (rows of "
         "the kernel's width); before strided_windows' copy, which it makes needless",
         {"min_vectors": 1, "min_iterations": 1 << 20},
         "PoCL, 2-core Zen 5, a 3x3/1/1 conv2d 16x128x14x14 -> 128: auto's 1x8x3x8/float8 blocks along the rows "
         "4.4 ms, channels innermost 1x2x4x32/float16 2.39 (1x2x7x16 2.50), torch 1.98; 3x3/2/1 16x64x28x28 -> "
         "128 (14x14 outputs) 5.06 -> 3.40 with the de-interleaved copy still made (0.63 ms of it); its data "
         "gradient (phases of 14) 4.93 -> 1.85; weight gradients, the backward: 16x128x14x14 8.78 -> 4.08 ms "
         "(torch 3.95), 16x64x28x28 -> 64 5.60 -> 5.03 (5.00), 1x1 2.00 -> 1.59 (1.44); one vector of channels: "
         "conv2d_dilated's backward 0.92x (its weight gradient, 16 channels), lenet_step's forward 0.88x (its "
         "second conv, 16 filters on rows of 8). Forwards on rows of 28: within the VM's spread; a 1x1 conv on "
         "rows of 28 1.8x slower: not proposed there",
         target="innermost", propose=_filters_innermost),
    Rule("pad_clipped_sums", "graph", "pad a sum clipped only by one operand's bounds, so that every block is full",
         {"max_extra": 3.0, "min_reduction": 16},
         "conv2d_3x3 dX: 3.5 ms clipped (its best blocks), 1.6 ms padded (16% more multiply-adds, a 2.2 MB "
         "copy); the dilated convolution's dX 1.97 -> 0.49 ms; lenet_step's second conv dX (a 12x12 full "
         "correlation of 8x8 outputs, 5x5 taps: 2.25x the multiply-adds padded) 1.62 ms clipped -> 0.49-0.53 ms "
         "padded (1x1x2x12/float4): max_extra 1.5 -> 3.0",
         target="pad", propose=_pad_clipped_sum),
    Rule("strided_reads", "graph",
         "CPU: a long reduction that reads an operand's rows at a stride (X[3y + kh, 3x + kw]) and whose innermost "
         "output is narrower than half a vector reads a de-interleaved copy, X_s2d[.., kh mod 3, kw mod 3, "
         "y + kh div 3, x + kw div 3], at unit stride",
         {"min_iterations": 1 << 16, "min_reuse": 4},
         "conv2d_5x5_s3 dW (32x17x60x60 padded X, stride 3), PoCL on a 2-core Zen 4: 59 ms in auto's 1x1x5x5 "
         "blocks and 25.6 ms interleaved over x with stride-3 gathers, against 7.0 ms interleaved over x on the "
         "copy plus 1.2 ms for the copy (1x1x1x1x4x20/float4)",
         target="space_to_depth", propose=_strided_operands),
    Rule("strided_windows", "graph",
         "CPU: a convolution's forward that reads its input at a stride over its outputs (X[3y + kh, 3x + kw], "
         "a per-channel weight beside it) reads a de-interleaved copy at unit stride along its rows",
         {"min_iterations": 1 << 16},
         "conv2d_5x5_s3's forward (32x19x19x19 from 32x17x58x58, padding 1), PoCL, 2-core Zen 5, medians of 9 "
         "alternating rounds: 14.6 ms on the materialised padding in the model's 4x1x6x1 blocks, 3.6 ms on the "
         "copy (1x1x1x1x4x20/float4) in 1x4x1x19 blocks (box_rows', a rule since retired: vector blocks along "
         "the row, the cut last one moved back, run faster)",
         target="space_to_depth", propose=_strided_windows),
    Rule("rfactor_batch_lanes", "graph",
         "CPU: a sum whose innermost output is narrower than half a vector (a conv weight gradient) and whose rows "
         "give no whole vectors (ragged lanes along x, or x read at a stride) is split over an axis that every "
         "operand indexes elsewhere than last (the batch, at least min_vectors vectors), its operands (inputs, or "
         "zero-padded copies of inputs) read through copies with that axis last: one aligned vector of partials "
         "per output (before strided_reads' de-interleaved copy, which it makes needless)",
         {"min_vectors": 2, "min_iterations": 1 << 16},
         "PoCL, 2-core Zen 5, the whole backward (Module.profile totals), the former auto schedule against this, 15 "
         "alternating rounds, median ratio: conv2d_3x3 (batch 32) 0.81, its dW partials 0.85 -> 0.35 ms in "
         "2x1x3x3x16 blocks, plus 0.12 and 0.08 ms for X's and H's copies; conv2d_5x5_s3 (stride 3) 0.80, its dW "
         "partials 3.0 -> 0.93 ms (4x1x1x5x16) and no de-interleaved copy (0.9 ms), plus 1.5 ms for the padded X's "
         "copy; in a prototype, conv2d_dilated (batch 8, 8 lanes) 1.33-1.54x and lenet_step's second conv (rows of "
         "8: whole vectors already) 1.00-1.10x, so neither takes it",
         target="rfactor", propose=_rfactor_batch_lanes),
    Rule("rfactor_lanes", "graph",
         "CPU: interleave a sum whose innermost output is narrower than half a vector (than one, in a sliding "
         "window beside the axis: X[x + kw], or where no operand is reused across outputs: a bias gradient) "
         "over a long reduction axis it reads contiguously (a conv weight gradient over x), one vector of "
         "partials per output (with fewer outputs than min_parallel, only without reuse and with two outputs "
         "a core); where the ragged last lanes are at least pad_ragged_share of the axis, the axis runs to a "
         "multiple of the lanes on zero-padded operands",
         {"iterations_per_output": 64, "min_iterations": 1 << 15, "min_extent": 8, "widths": (16, 8, 4),
          "pad_ragged_share": 0.1},
         "conv2d_3x3 dW 4.0 -> 2.1 ms (1x1x3x3x8 partial blocks), conv2d_dilated dW 1.26 -> 0.4-0.6 ms, "
         "conv2d_5x5_s3 dW on its space-to-depth copy 7.5 (19 columns: 3 ragged lanes of 8) -> 4.4-4.7 ms with the "
         "axis padded to 24 (plus 0.1 ms for the 24-column H copy); conv2d_3x3's 26 columns (2 ragged) padded to "
         "32: 2.40-2.45 against 2.42-2.46 ms, no gain, 0.2 ms of copies (pad_ragged_share: pad from 10% ragged), "
         "lenet_step's first conv dW 0.9 -> 0.2 ms; with 8-lane vectors (a fresh Zen 4 calibration), 5-wide "
         "kernels: lenet_step's conv dWs 1.26 -> 0.23 and 2.56 -> 0.36 ms, conv2d_5x5_s3's dW (on its "
         "space-to-depth copy) 62.7 -> 7.5 ms; lenet_step's first conv bias gradient (6 channels, batch 64) split "
         "over the batch by rfactor_small_outputs, lanes 3456 floats apart: 0.11-0.14 -> 0.03-0.04 ms as float8 "
         "partials along x; min_iterations 1 << 16 -> 1 << 15 (thirty-fourth session): softmax_homebrew's row sums "
         "of exp (60 rows of 1000, 60000 iterations, 8 scalar work-items) forward 0.89x, backward 0.93x",
         target="rfactor", propose=_rfactor_lanes),
    Rule("rfactor_gathered", "graph",
         "CPU: interleave a rank-2 sum every read of which along its innermost output gathers (a dense layer's "
         "forward, W[j, k] for Y[i, j]) over the long reduction axis every read takes contiguously: a vector of "
         "partials per output",
         {"min_iterations": 1 << 16},
         "PoCL, 2-core Zen 5, the forward's kernels (Module.profile, one run each): dense_big (32x10000 by "
         "3000x10000) auto's 8x32/float16 along j 26.4 ms, rfactor 16 over k in 4x4x16 blocks grouped by the "
         "batch's 8 row blocks 10.0 ms (8x4x16 ungrouped 16.5, grouped 10.4; 16x2x16 15.6); dense (32x1000 by "
         "1000x1000) 1.40 ms against 0.46 + 0.19 for the partials' sum",
         target="rfactor", propose=_rfactor_gathered),
    Rule("rfactor_rows", "graph",
         "CPU: interleave the row reductions of a few thousand outputs (softmax's max and exp-sum) into partials "
         "dividing the row: the fewest whole vectors, else a multiple of half the vector width",
         {"min_extent": 64, "max_points": 4096, "min_iterations": 1 << 14, "min_steps": 4},
         "softmax bwd 3.36 -> 3.14 ms (hand TE 3.01); a matmul's operands are reused across outputs and its "
         "register blocks stay faster (mlp_step's logits 2.67 vs 2.73 ms); a factor that does not divide the "
         "row leaves ragged lanes (conv2d_3x3 dW split over x by 8: 6.5 ms, unsplit 4.1); one vector of partials, "
         "not four, where one divides: a layer norm's backward over 4096 rows of 512 0.80x, 2048 of 1024 0.81x, "
         "60 to 1024 rows of 768-4096 and softmax's 0.95-1.03x (the partials' sum reads F a row)",
         target="rfactor", propose=_rfactor_rows),
    Rule("rfactor_small_outputs", "graph",
         "rfactor a long reduction whose output cannot fill min_parallel work-items (Li2018); on a GPU, one "
         "that fills under a quarter of them",
         {"min_iterations": 1 << 15, "min_extent": 64, "min_stride": 8, "gpu_fill": 0.25},
         "Li et al. 2018's rule: the factor gives at least min_parallel partial results, each reducing at least "
         "8 elements.  On the H200 (thirteenth session, per-kernel device time): softmax's row sum (60 outputs of "
         "1000) split 0.012 ms against 0.061 unsplit; conv2d_3x3's dW (2907 outputs, 21632 terms each) split 8 "
         "ways over the batch 0.25 against 0.47; dense's dX (32000 outputs, 0.95 of min_parallel) split 256 "
         "ways 0.30 against 0.029 unsplit (gpu_fill)",
         target="rfactor", propose=_rfactor_small_outputs),
    Rule("inline_once", "graph",
         "inline a reduction-free stage each of whose points is evaluated once where it ends up",
         {}, "Li et al. 2018's rule, not timed here: no recomputation, and a buffer's write and read saved",
         target="inline"),
    Rule("inline_recompute", "graph",
         "inline a stage whose recomputation costs less than its buffer's DRAM traffic",
         {"max_evaluations": 16},
         "avg_pool bwd's H/4 (commit 7ff7b7f; no timing recorded): recomputed 4x in the kernel that reads it",
         target="inline"),
    Rule("materialise_padding", "graph", "materialise a zero-padded copy a reduction reads (CPU), instead of "
         "inlining it as data movement",
         {},
         "conv2d forward, 3x3 padding 1 (32x19x26x26 from 32x17x26x26), PoCL, 2-core Zen 5, medians of 7 "
         "alternating rounds: the padding inlined 9.3-15 ms in whole-row blocks of 1-4 channels, the same "
         "convolution without padding 0.77-1.28; dilation 2 padding 1 (conv2d_dilated's, 8x16x30x30): inlined "
         "2.8-5.2 ms, without padding 0.28-0.44 (each of the reduction's reads is guarded by the padding's selects)",
         target="inline"),
    Rule("materialise_transposes", "graph", "materialise a transposing plain copy a reduction reads (CPU), instead "
         "of inlining it as data movement",
         {},
         "matmul(A, transpose(B)), 512x512x512, PoCL, 2-core Zen 5 (twenty-ninth session): the transpose inlined "
         "3.8-6.5 ms (auto's 8x32/float16 blocks, every B load a gather 512 apart), materialised 1.66 (the copy "
         "0.19, the matmul 0.84 in the same blocks)",
         target="inline"),
    Rule("inline_data_movement", "graph", "inline pure data movement (reads, selects against zero, casts)",
         {}, "not timed: a copy inlined is an index expression", target="inline"),
    Rule("inline_caps", "graph",
         "materialise an inlined stage where a kernel's expression would pass the caps (half for several readers)",
         {"max_depth": 512, "max_size": 2048},
         "PoCL compiles each kernel in about 0.1 s whatever its size: a 2000-deep chain cut every 64 operations "
         "(65 kernels) compiled in 6.5 s, every 512 (8 kernels) in 0.7 s; the ops of pa.ops and pa.nn inline "
         "far below the caps (under 40 operations; the chain workload's gradient 273 deep)",
         target="inline"),
    # stage: deciding rules first (a block they measured, the model ranks it alone)
    Rule("batch_blocks", "stage", "a stage computed with its batch innermost (CPU): channels x lanes blocks, in "
         "two vectors along the batch (of the widest width dividing it), dense phases where its outputs are strided; "
         "fewer channels than accumulators (unphased): as many points of the row beside the batch as make up the "
         "accumulators",
         {"channels": 8, "vectors": 2, "accumulators": 16},
         "conv2d_5x5_s3 dX with the batch innermost (17x58x58x32, phases 1x3x3x1), PoCL, 2-core Zen 4, min of 5: "
         "8x1x1x16/float8 1.49 ms, 4x1x1x32/8 2.35, 2x1x1x32/8 3.06, 4x1x1x16/8 2.75; the model's favourite "
         "1x4x2x8/8 (it ranks these as strided) 8.2 ms modelled.  lenet_step's second convolution's dX (6x12x12x64, "
         "6 channels), 2-core Zen 5, medians of 7 alternating rounds, four runs, against 6x1x1x16/float16: "
         "6x1x3x16 0.56-0.73, 6x1x4x16 0.46-0.82, 6x1x2x16 0.60-0.80; blocking the row of 8 channels hurt on "
         "conv2d_5x5_s3's phases (8x1x2x16 1.7x) and read 0.84-1.2 on conv2d_3x3's 17 channels.  Thirty-fourth "
         "session, 2-core Zen 5 (16 lanes), lanes 16 -> two vectors: conv2d_5x5_s3's dX_t 8x1x1x16/16 1.23 ms, "
         "8x1x1x32 0.88, 4x1x1x32 0.80; a stride-2 transposed conv's dW_t (batch-innermost filters) 2.50 -> 1.27, "
         "4x1x1x32 1.68; backwards in alternating rounds: conv2d_3x3 0.92x, conv2d_5x5_s3 0.85x, lenet_step 0.98x, "
         "bench_ops' conv2d_s2 0.94x and transposed conv 0.88x",
         **_deciding("batch_blocks", _batch_blocks),
         note=lambda op, info, dm: "computed with its batch innermost: channels x lanes blocks along the batch"),
    Rule("channel_lane_blocks", "stage", "a convolution computed with its second dimension innermost "
         "(filters_innermost; CPU): one or two vectors of it by points of the other dimensions (sizes), "
         "accumulators vectors in all, the fewest loads a multiply-add (each charged its blocks' lost points)",
         {"accumulators": (16, 24), "sizes": (1, 2, 3, 4, 6, 8)},
         "PoCL, 2-core Zen 5, medians of 5 profiles: a 3x3/1/1 conv2d 16x128x14x14 -> 128 computed as "
         "16x14x14x128: 1x2x4x32/float16 2.39 ms (the forward), 1x2x7x16 2.50, 1x4x4x16 2.83, 1x3x4x16 2.93, "
         "1x1x4x32 2.95, 1x1x7x16 3.26, 1x2x8x16 3.77; the model's favourite 1x8x3x16 unrolled 2x 4.4 (it charges "
         "16 accumulators half the rate of 32, and misses 24 input broadcasts a step); its weight gradient as "
         "128x3x3x128 (rows of 3): 4x1x3x32 2.00, 8x1x3x16 1.97, 4x3x1x32 2.0, 8x1x1x32 2.31, 1x3x3x32 2.81, "
         "1x2x3x32 3.61 (against the rfactor over x: 4.15 + 0.15); chosen: 2x2x3x32 for the forward (2.03 ms in "
         "all, torch 1.93) and 4x1x3x32 for the weight gradient (the backward 8.78 -> 4.08, torch 3.95)",
         **_deciding("channel_lane_blocks", _channel_lane_blocks),
         note=lambda op, info, dm: "computed with its channels innermost: points x vectors of channels, fewest "
                                   "loads a multiply-add"),
    Rule("padded_rows", "stage", "a padded box reduction (CPU) whose row the device's best vector width divides: "
         "a whole row of vectors by the most channels (dividing them) that share its vector loads, within "
         "max_vectors accumulators; else two rows",
         {"widths": (16, 8, 4), "max_row": 64, "max_vectors": 16, "channels": (4, 2)},
         "conv2d_dilated dX on a padded H (8x16x32x32), PoCL, 2-core Zen 4, min of 7 alternating rounds: "
         "1x4x1x32/float8 0.19 ms, 1x2x2x32 0.20, 1x2x1x32 0.20, 1x3x1x32 0.20, the former 1x1x2x32 0.29, "
         "1x1x4x32 0.28, 1x1x1x32 0.33 (rows of H are separate loads; channels share them); conv2d_3x3 dX on a "
         "padded H (32x17x28x28, before its batch went innermost): 1x1x2x28/float4 1.75 ms, 1x4x1x28 1.6, 2x1x1x28 "
         "2.0; the model's favourites 4x1x4x4 3.1, 4x1x1x28 5.0. On the Zen 5 (best width 16), rows of 28 in "
         "float4 lost to the model's blocks once it priced refills: a 3x3/1/1 conv2d's dX (16x64x28x28) "
         "1x2x1x28/float4 7.5 ms, 1x8x3x16/float16 4.5, 1x4x4x16 3.3; conv2d_dilated's 32-wide rows keep the "
         "rule (1x4x1x32/float16 0.109 ms against the model's 1x2x6x32 0.200)",
         **_deciding("padded_rows", _padded_rows),
         note=lambda op, info, dm: f"a padded box reduction: whole rows of {op.shape[-1]} as vectors, channels "
                                   f"sharing their loads"),
    Rule("copy_rows", "stage", "a materialised copy (CPU; reads, selects against zero, casts: a crop, a padded or "
         "space-to-depth copy): whole rows of its last dimension (at most max_row), about row_elements per block, "
         "in the widest vectors dividing the row; where none divides it, the whole row in a work-item in vectors of "
         "cut_width lanes, its last points one by one (the naive loops on rows shorter than two)",
         {"widths": (16, 8, 4, 2), "row_elements": 80, "max_row": 512, "cut_width": 4},
         "PoCL, 2-core Zen 4: conv2d_5x5_s3's X_s2d (32x17x3x3x20x20 from X through its zero padding): naive "
         "4.4-5.7 ms, 1x1x1x1x1x20/float4 2.0, 1x1x1x1x4x20/float4 1.2-1.4, 1x1x1x3x1x20/float4 1.8; its dX crop "
         "(32x17x58x58 of the padded 60x60): naive 2.0 ms, 1x1x1x58/float2 0.45, 1x1x4x58/2 0.45, 1x1x9x58/2 0.36; "
         "Zen 5: a 3x3/2/1 conv2d's de-interleaved input (16x32x2x2x29x29), rows of 29 no vector divides: scalar "
         "rows 1.86 ms, the naive loops 0.53 (PoCL's work-item vectoriser runs them in lanes); with moved last "
         "tiles (thirty-third session, medians of 9 alternating profiles, two runs): that copy in tiles of a "
         "float4 0.52-0.57 ms against the naive loops' 0.56-0.67, float8 0.67-0.74, float16 1.12; a stride-2 "
         "transposed conv's de-interleaved output gradient (16x16x2x2x57x57) 1.39-1.54 against 2.18-2.54, "
         "4 rows of float8 0.94-1.40 (1.1 on the rows of 29); thirty-fourth session, medians of 9 alternating "
         "profiles: whole rows in float4 (tiles of 60, 14 vectors and a point) 1.00 ms against float4 tiles' 1.43, "
         "float8 tiles 1.34, 2 rows 1.36-1.38, 4x4 blocks 1.66; the 3x3/2/1 conv2d's rows of 29 0.39 against 0.96; "
         "rows of 15 0.086 against 0.140; rows of 7 (naive) 0.058 against 0.056",
         **_deciding("copy_rows", _copy_rows),
         note=lambda op, info, dm: _copy_note(op, info, dm)),
    Rule("divided_rows", "stage", "an elementwise stage reading along its last dimension through a floor "
         "division (x // k: a pool's upsampled gradient; CPU): blocks of one vector of the widest of widths dividing "
         "the row", {"widths": (4, 2)},
         "PoCL, 2-core Zen 4: avg_pool's dX (32x17x280x280, H[.., y // 2, x // 2] / 4), in one process, alternating "
         "rounds: naive 11.2 ms, 1x1x1x2/float2 6.5, 1x1x1x4/float4 6.6, 1x1x1x8/float8 6.7, 2x1x1x32/float4 6.6; "
         "a store term in the cost model that would rank these instead put small elementwise stages (mlp_step's relu "
         "and its gradient, 128x512) in float2 blocks, 1.22-1.31x slower: PoCL widens those itself",
         **_deciding("divided_rows", _divided_rows),
         note=lambda op, info, dm: "reads x // k along its rows: one vector a work-item"),
    Rule("strided_lanes", "stage", "a box reduction whose reads index its rows at a constant stride of 2 or more "
         "(an unpadded pool's window X[.., 2*x + kw]; CPU): one vector of width lanes a work-item",
         {"width": 4},
         "PoCL 3.1 (LLVM 15), 2-core Zen 5: the max_pool workload's forward (2x2/2, 32x64x100x100 -> 50x50) in "
         "one process: auto's 1x1x8x32/float16 16.2-17.1 ms, 1x1x1x16/float16 23.1, 1x1x1x8/float8 25.5, "
         "1x1x1x4/float4 2.66-2.89, 1x1x1x2/float2 4.4-4.8, 1x1x1x50/float2 3.5, 1x1x1x8/float4 5.6, "
         "1x1x2x4/float4 4.3, naive 10.3: lanes 2 apart load as one wide load and a shuffle in float4 only; the "
         "model priced every block at 1.3-3.4 ms (a gathered lane as one load); avg_pool's 2x2/2 sum "
         "(32x17x280x280) 28.8 -> 20.2 ms, lenet_step's forward 0.97x. Not on a clipped window: a 3x3/2/1 max pool's "
         "(16x32x56x56) in 1x1x1x4/float4 2.39 ms, the model's 1x1x1x28/float2 0.55",
         **_deciding("strided_lanes", _strided_lanes),
         note=lambda op, info, dm: f"reads its rows {_lane_stride(op)} apart: one vector a work-item"),
    Rule("strided_rows", "stage", "a reduction-free strided stage (a max-pool's gradient) whose outputs fill the "
         "last-level cache on a CPU with nontemporal stores: a stride cell along the other strided dimensions by the "
         "whole last row (at most max_row), in vectors of the widest of widths dividing the row",
         {"widths": (4, 2), "max_row": 256},
         "max_pool's dX (32x64x100x100, 82 MB), Zen 5, PoCL 3.1, min over 5 rounds of 5: 1x1x2x100/float4 "
         "nontemporal 1.08 ms (plain 2.04), 4x1x1x4/float4 nontemporal 1.19, 1x1x2x4/float4 nontemporal 1.44, "
         "auto's former 1x1x2x2 scalar stride cells 2.30; the block the model ranked first among the nontemporal "
         "ones, 1x1x1x2/float2, 3.47 (it does not see a lane's gathered reads)",
         **_deciding("strided_rows", _strided_rows),
         note=lambda op, info, dm: "a strided gradient that fills the cache: stride cells of whole rows, streamed"),
    # after copy_rows: the last rule whose limit keeps its own blocks decides (the copy back is a plain copy too)
    Rule("batch_back", "stage", "the copy back of a stage computed with its batch innermost (CPU): a run of the "
         "batch (contiguous reads) by two outputs (float2 stores)",
         {"run": 32},
         "conv2d_5x5_s3's dX copied back from 17x58x58x32, PoCL, 2-core Zen 4, min of 7: 32x1x1x2/float2 0.23 ms, "
         "copy_rows' 1x1x1x58/float2 0.87, 8x1x1x58/2 0.68, 8x1x1x2/2 0.57, 32x1x1x1 0.51, naive 2.2",
         **_deciding("batch_back", _batch_back),
         note=lambda op, info, dm: "a copy back from the batch-innermost layout: runs of the batch"),
    Rule("batch_last_copy", "stage", "an operand's copy with the batch last (CPU): a run of its rows by one vector "
         "of the batch; a batch of whole_batches whole, by whole_run points of the row, in vectors of whole_lanes",
         {"run": 16, "lanes": 4, "whole_batches": (32,), "whole_run": 2, "whole_lanes": 2},
         "lenet_step's padded H moved batch-last (16x16x16x64), PoCL, 2-core Zen 4: 1x1x16x8/float8 0.13 ms, "
         "1x1x16x16/float16 0.17, copy_rows' 1x1x1x64 0.41; Zen 5, float4 against float8 (thirty-third session, "
         "whole backwards in order-alternating rounds): a stride-2 transposed conv's X_t (16x32x56x56, 1.29 ms "
         "in float8, 0.45 in float4) 0.87x twice, conv2d_s2 0.96x, conv2d_5x5_s3 0.95x and 0.98x, conv2d_3x3 "
         "1.03x and 0.94x, conv2d_dilated 0.99x, lenet_step 0.98x.  Thirty-fourth session (the tuner's pick on "
         "conv2d_5x5_s3), 2 points of the row by the batch whole in float2 against 16 by a float4, whole backwards "
         "in alternating rounds: batches of 32 conv2d_5x5_s3 0.70x, conv2d_3x3 0.78x; others no gain or a loss: "
         "batch 64 lenet_step 1.07x (2x64) and 1.08x (2x32), conv2d_s2's 64 filters last 0.97x (2x64) and 1.07x "
         "(2x32), batch 16 the transposed conv 0.99x, batch 8 conv2d_dilated 1.01x",
         **_deciding("batch_last_copy", _batch_last_copy),
         note=lambda op, info, dm: "a copy with the batch last: " + (
             "the batch whole by points of its rows" if _whole_batch(op) else "runs of its rows by a vector of the "
             "batch")),
    Rule("row_partials", "stage", "a row rfactor's partial stage: one row's partials per work-item, contiguous vectors",
         {}, "softmax bwd: these blocks 3.14 ms, the model's smaller ones 3.19, no rfactor 3.36 (hand TE 3.01)",
         **_deciding("row_partials", _row_partials),
         note=lambda op, info, dm: f"a row's {op.shape[-1]} partials, contiguous vectors"),
    Rule("gathered_partials", "stage",
         "rfactor_gathered's partial stage: tile outputs (1 along a dimension 4 does not divide) by the lanes as "
         "one vector, every block along the first output dimension in one work-group (at most cpu_operand_groups' "
         "max_group)",
         {"tile": (4, 4)},
         "dense_big's forward partials (32x3000x16), PoCL, 2-core Zen 5, Module.profile: 4x4x16 in groups of 8 "
         "10.0 ms, 8x4x16 in groups of 4 10.4, 8x3x16 10.5-11.2, 8x2x16 14.4, 4x2x16 14.1, 8x4x16 ungrouped "
         "16.5; dense's (32x1000x16): 4x4x16 grouped 0.46 ms, 8x4x16 grouped 0.55",
         **_deciding("gathered_partials", _gathered_partials),
         note=lambda op, info, dm: "a lane vector per output, the row blocks sharing W's rows in one work-group"),
    Rule("lane_partials", "stage",
         "a lane rfactor's partial stage: the lanes as one vector, and the block of outer outputs with the fewest "
         "issue slots per multiply-add (max(F, load_weight * L) + step_overhead) / F, F accumulators and L vector "
         "loads a step, times ragged blocks' waste (ragged along the outermost output only); accumulators at most "
         "3/4 of the registers, at most max_block along a dimension",
         {"max_block": 8, "load_weight": 1.5, "step_overhead": 4},
         "PoCL, 2-core Zen 4, the partial stage alone, min of 7 alternating rounds: conv2d_3x3 dW (19x17x3x3x8) "
         "1x1x3x3 2.08 ms, 2x1x3x3 1.69, 4x1x1x3 1.86, 8x1x1x3 1.94, 1x2x3x3 1.98, 3x1x3x3 1.90, 4x1x2x3 2.40, "
         "19x1x1x1 3.94; conv2d_5x5_s3 dW (19x17x5x5x8) 1x1x5x5 3.84, 4x1x1x5 2.52, 3x1x1x5 2.95, 2x1x1x5 3.60, "
         "2x1x2x5 4.13, 2x1x5x5 4.81; conv2d_dilated dW (16x16x3x3x8) 1x1x3x3 0.27, 2x1x3x3 0.18, 8x1x1x3 0.18, "
         "4x1x1x3 0.19, 4x1x3x3 0.23 (36 accumulators spill), 1x2x3x3 0.27, 16x1x1x1 0.35",
         **_deciding("lane_partials", _lane_partials),
         note=lambda op, info, dm: "a lane vector per output, a block of outputs sharing its loads in registers"),
    # stage: the grid and the proposals beside it
    Rule("grid", "stage",
         "tiles of the last two output dimensions (and the outermost for rank >= 3; small extents whole; stride "
         "cells; the vector width and its multiples) x vector widths dividing the innermost tile x unrolls",
         {"inner": (1, 2, 4, 8, 16, 32, 64), "outer": (1, 2, 3, 4, 6, 8), "heads": (1, 2, 4), "unrolls": (1, 2, 4, 8)},
         "polyad/bench/bench_kernels.py: dense dX 8x32/float16 117-128 GFLOP/s against 4-8 naive, dW 8x32/float16 "
         "unroll 2 165-174; whole small extents: conv weight gradients in 2x1x3x3 blocks 15 -> 5 ms; stride cells: "
         "conv2d_5x5_s3 dX 35 -> 18 ms, 2x2/2 max-pool dX ~30 -> ~6 ms",
         propose=_propose_grid),
    Rule("channel_tiles", "stage",
         "rank >= 4: tile the second dimension (NCHW channels) instead of the first; the model ranks them on "
         "padded stages, and on every stage where it prices refills (DeviceModel.fill_gbs: a CPU's calibration)",
         {"channels": (2, 4, 8)},
         "the channels of a padded data gradient share the rows of H they read (conv2d_3x3 dX 1x4x1x28 1.6 ms "
         "against 2x1x1x28 2.0); offered to every rank-4 stage, the model took 1x4x5x1 for conv2d_5x5_s3's dW: "
         "29 ms against 12 ms with its 2x1x5x4/float4 (before its rfactor); with refills priced, a 3x3/2/1 "
         "conv2d forward (16x32x56x56 -> 64) took 1x8x3x16/float16, 3.2 ms, against 4x1x6x16's 7.8 (torch 1.24), "
         "a 1x1 one (16x64x28x28 -> 128) 1.0 ms against 3.3 (torch 0.99), and the 13 workloads' programs stayed "
         "as fast (A/B 0.94-1.02 where they moved)",
         propose=_propose_channels, ranked=lambda op, info, dm, graph: _padded(op) or dm.fill_gbs > 0),
    Rule("phased_gathers", "stage",
         "CPU: a one-hot sum over overlapping strided windows (a scatter otherwise) whose phases have equal extents "
         "runs as the phased gather, each phase's row of q whole in the widest vectors dividing it",
         {"min_lanes": 4, "max_vectors": 8},
         "PoCL, 2-core Zen 5, alternating rounds against the scatter (bit for bit the same gradient): 3x3/2/1 max "
         "pool data gradient 16x32x56x56, phase 1x1x2x2 + 1x1x1x28/float4 0.76-0.80x (0.27 ms; torch 0.31), "
         "1x1x1x16/float16 0.85-0.94x, 1x1x2x28 0.90x, 1x1x4x28 1.13-1.23x; 8x64x112x112: 1x1x1x56/float8 0.62x, "
         "float4 0.64x, 1x1x1x16/float16 1.01x; a 3x3/2/0 pool over 55x55 (phases of 28 and 27) 1.41-1.48x "
         "(float4), 2.3-2.5x (float16); the model priced the scatter 0.31 ms and the phased row 0.53",
         **_deciding("phased_gathers", _phased_gathers),
         note=lambda op, info, dm: "the phased gather of overlapping strided windows, a phase's row in vectors"),
    Rule("stride_phases", "stage",
         "stages phase_strides finds strides in: x = s*q + p, one dense stride-1 sub-stage per phase, tiles over q "
         "(the channels whole when at most whole_channels, and by divisors; rows; the innermost q in short vectors, "
         "along a phased q only for simple reductions); the model ranks them on strided reductions (CPU); the "
         "cost: the phased statements' own blocks (window ceil(k/s), no floor-division bounds, ragged border "
         "groups), lane-by-lane stores along a phased q, and phases x block statements of code, its build "
         "amortised over amortised_runs",
         {"max_stride": 4, "min_points": 2, "whole_channels": 32, "channel_divisors": (2, 4, 8, 16), "rows": (1, 2),
          "inner": (1, 2, 4, 8, 16), "unrolls": (1, 2), "build_s_per_statement": 0.035, "amortised_runs": 10000},
         "PoCL, 2-core EPYC VM, min of interleaved rounds: conv2d_5x5_s3 dX (32x17x60x60, stride 3) auto 18.3 ms "
         "(2x1x3x3 stride cell) -> 6.55 ms with phase 1x1x3x3 + tile 1x17x1x4/4 (phase alone 33.6; 1x1x1x8/8 13.0; "
         "1x8x1x4/4 10.5; 1x17x1x2/2 9.4; 1x17x1x8/8 11.0, its 17 float8 accumulators spill; the same tile "
         "without the phase 28.4): one vload4 of H feeds the 17 channels; max_pool 2x2/2 dX 6.16 (stride cell) vs "
         "6.20 phased, no gain; avg_pool dX 12.2 naive vs 9.34 with phase 1x1x2x1 + 1x1x1x8/8 (unphased "
         "1x1x1x8/8 10.3); vectors along a phased dimension of a pool gradient 2.5-5x slower (lane-by-lane stores "
         "2 apart, selects); the dilated conv dX gains nothing (phased 2.07 vs 2.08 ms tiled, padded 0.75); "
         "code: 1x17x1x4/4 phased is 650 KB of OpenCL C, 4.8 s codegen (isl) + 1.3 s compile, against 43 KB "
         "and 1.1 s for the stride cell; 1x1x1x4/4 50 KB, 1.9 s: about 0.035 s per block statement and phase. "
         "Zen 5 (16 lanes): a 3x3/2/1 conv2d's dX (16x32x56x56), phase 1x1x2x2: 1x8x1x16/16 3.3-3.4 ms, 1x16x1x16 "
         "3.65-3.8, 1x8x2x16 3.8-4.0, 1x8x2x8/8 4.8, 1x32x1x4/4 8.8-13 (the model's pick with inner up to 8); "
         "conv2d_5x5_s3 dX phased: 1x17x1x16/16 2.92, 1x17x1x4/4 3.09, 1x17x1x8/8 3.19, 1x17x1x2/2 4.08",
         applies=lambda op, info, dm, graph: bool(info.phased), propose=_propose_phases,
         ranked=lambda op, info, dm, graph: dm.kind == "cpu" and info.strided and _phase_vectors(info)),
    Rule("more_unrolls", "stage",
         "reductions: unroll 16 where the reduction has at least 4 trips of it (for the tuner: the model's unroll "
         "term never prefers it to unroll 2)",
         {"unrolls": (16,), "min_trips": 4},
         "not timed: the model's unroll term (x0.97 where the trip count is at least 4x the unroll) is from dense "
         "dW, unroll 2 165-174 GFLOP/s against 158-166 without",
         propose=_propose_unrolls, ranked=_never),
    Rule("whole_rows", "stage",
         "reduction-free stages: blocks of whole rows holding at least min_row elements (for the tuner: the model "
         "charges their registers and misses their streaming)",
         {"min_row": 512, "max_block": 4096},
         "PoCL, a 32x100x20x25 relu: blocks of whole rows of >= 512 elements 37-70 GB/s against 4.5 GB/s naive",
         propose=_propose_whole_rows, ranked=_never),
    # after every ranked proposal: a block another rule proposes stays that rule's (and ranked)
    Rule("block_steps", "stage",
         "for the tuner: the blocks one step from a deciding rule's (a tile dimension doubled or halved, the vector "
         "width doubled or halved, unroll 1, 2 or 4 on a reduction); the model does not rank them",
         {"of": ("batch_blocks", "channel_lane_blocks", "padded_rows", "copy_rows", "batch_back", "batch_last_copy",
                 "row_partials", "lane_partials"), "unrolls": (1, 2, 4)},
         "not timed as a family: the deciding rules' own measurements (above) visited 3-8 such neighbours each, "
         "and found 1.3-2x between them; the tuner's search had no way to their other neighbours "
         "(conv2d_5x5_s3's dX: one batch_blocks block among 2705 grid and phase candidates)",
         propose=_propose_steps, ranked=_never),
    # stage: limits and variants
    Rule("tuple_reducers", "stage",
         "tuple reducers (an argmax through selects), rank >= 2: blocks along the last dimension only, of at least 8",
         {"min_inner": 8},
         "max_pool's recomputed argmax: 1x1x1x8..32 blocks 2x faster than 4x1x2x2 and 1x1x1x4, 3x than 1x1x2x8",
         applies=lambda op, info, dm, graph: not info.simple and len(info.shape) >= 2, limit=_tuple_reducer_rows),
    Rule("cpu_operand_groups", "stage",
         "CPU: a 2-D reduction block whose dominant operand (dominance x the bytes of every other) is read "
         "without one output dimension gets a work-group of every block along that dimension (when the other "
         "leaves groups_per_core groups per core; at most max_group blocks, well inside a CPU's work-group "
         "limit): consecutive work-items reuse the operand's strip",
         {"dominance": 4, "groups_per_core": 8, "max_group": 256},
         "PoCL on a 2-core Zen 4, softmax's dense dX (60x1000 by 1000x1000, 6x32/float8 blocks), 31 "
         "alternating rounds: PoCL's chosen groups (16, 1) min 0.77 / median 1.00 ms, (1, 10) 0.59 / 0.79, "
         "(1, 5) 0.65 / 0.88, (2, 5) 0.66 / 0.98",
         applies=lambda op, info, dm, graph: dm.kind == "cpu", vary=_operand_groups),
    Rule("nontemporal_stores", "stage",
         "CPUs whose probe passed nontemporal stores, a vectorisable stage whose outputs are at least "
         "min_cache_fraction of the last-level cache: every aligned vector block in both store forms, the model "
         "ranking the nontemporal one (the model charges plain stores there a read of each line: "
         "cost.streams)",
         {"min_cache_fraction": 1.0},
         "Zen 5, PoCL 3.1, 32 MiB L3, nontemporal over plain time of the same kernel, alternating rounds: "
         "avg_pool's dX in 1x1x1x16/float8 blocks at 5, 10, 20, 41, 81, 163 MiB 1.27, 1.16, 1.14, 0.85, 0.90, 0.83; "
         "auto's pa.vjp backward built with and without them, 9 alternating rounds: avg_pool (dX 170 MB, float4 "
         "blocks) 0.73, dense_big (dW 120 MB) 0.88; a scalar nontemporal store ran 1.9x slower than float16 "
         "plain ones (a copy of 170 MB)",
         applies=lambda op, info, dm, graph: streams(info, dm),
         vary=_nontemporal_variants, limit=_one_store_form),
    Rule("gpu_local_sizes", "stage",
         "devices with work-group sizes: every block with each; the model ranks the largest its innermost "
         "blocks fill (it has no term for them)",
         {},
         "not timed on a GPU: the sizes are those the calibration's copy kernel ran fastest with "
         "(DeviceModel.local_sizes); the recorded GPU model's figures were never measured on one",
         applies=lambda op, info, dm, graph: bool(dm.local_sizes) and bool(info.shape), vary=_local_sizes),
    Rule("block_code", "stage",
         "reductions, and on GPUs every stage: no block emitting more than max_statements statements (vectors of its "
         "tile times the unroll); every stage: no block whose code holds more than max_code counting the copies of "
         "the block (two along each dimension the tile does not divide), for the model or the tuner (a CPU's "
         "reduction-free blocks are vectors over whole rows: whole_rows)",
         {"max_statements": 512, "max_code": 1024},
         "lenet_step's tuning (thirteenth session): one candidate, d_pool2d_from_conv2d_t in 4x1x8x64/float2 blocks "
         "unrolled 4 (4096 statements), spent 18.3 s in isl's code generation (its other stages 0.2-0.6 s).  On the "
         "H200 (fifteenth session) lenet_step's first round of 16 candidates spent 100 s generating and compiling "
         "0.8-1.6 MB programs within max_statements alone (copies not counted; reduction-free stages not capped): 12 "
         "held blocks of 192-960 scalar statements, most in 2-4 copies (334 KB for dW2's 8x32 unrolled 2).  Over the "
         "CPU logs of the tenth and fourteenth sessions (100,799 stage measurements) no reduction's best takes "
         "longer within max_code; within 512 counting copies, conv2d_5x5_s3's dW 1.45x and mlp_step's dX 1.27x.  "
         "max_code on a CPU's reduction-free stages too (sixteenth session): a 90 s tuning of conv2d_5x5_s3 lost "
         "50 s to one candidate whose copy conv2d_pad_s2d in 1x8x1x1x8x32/float2 blocks (1024 statements, 8192 "
         "in copies) did not compile in the time left; the auto schedules (golden, and at the benchmark shapes) "
         "are unchanged",
         ),
    Rule("math_lanes", "stage",
         "CPUs: an elementwise stage that calls exp, log, tanh, sqrt, erf, ... is ranked in vectors of at least "
         "min_width lanes, else in scalar code (the smallest-block tie-break took 2 lanes, which PoCL runs as slowly "
         "as lane-by-lane calls, then scalar code, 5x erf's 8 lanes)",
         {"min_width": 16},
         "raw OpenCL on the Zen 5 VM, PoCL 3.1, a million float32s, ms at 1/2/4/8/16 lanes (twenty-eighth session): "
         "sqrt 0.20/0.64/0.34/0.11/0.09, exp 0.32/1.85/0.69/0.36/0.23, tanh 0.99/1.86/0.73/0.76/0.45, log "
         "9.4/6.0/0.89/0.47/0.19, v*v+v 0.13 at every width; a+sqrt|b|/(exp(a)+1)'s backward in 2 lanes (auto's) "
         "3.0 ms, in 8 0.59; tanh(exp(x*x)*sigmoid(x)) 6.6 ms in 2 lanes, 1.2 in 8, 0.64 in 16. Twenty-ninth: "
         "built stages at 1/4/8/16 lanes, erf 7.27/2.84/1.46/1.56, exp 0.31/0.36/0.21/0.22, tanh 0.96/0.75/0.41/0.25 "
         "(auto, scalar: 7.33, 0.39, 0.53); again, 8 lanes in blocks of 8/32/64 and 16 in 16/64/128: erf "
         "2.23/1.53/1.55 and 0.84/0.82/1.60, exp 0.18/0.20/0.19 and 0.22/0.13/0.14, tanh 0.39/0.39/0.39 and "
         "0.23/0.44/0.45 (scalar 10.9, 0.30, 0.70): 16 lanes where the device has them",
         applies=lambda op, info, dm, graph: dm.kind == "cpu" and not info.reduction
         and _calls_math(op, graph.inline if graph is not None else ()),
         limit=_wide_math),
    Rule("gpu_occupancy", "stage",
         "GPUs: the model ranks only blocks that leave as many work-items as the naive loops or min_parallel, "
         "whichever is fewer (its per-work-item chains are a CPU's: it prices a few long-running work-items "
         "as a few busy cores)",
         {},
         "the H200 (thirteenth session, per-kernel device time): lenet_step's conv1 weight gradient (150 outputs) "
         "in 4x1x1x5 blocks, 10 work-items, 5.06 ms against 0.86 naive; dense's dW in 3x64 blocks (5208 "
         "work-items) 0.15 ms against 0.019 in 6x2 (83334); conv2d_3x3's dX in 2x1x4x16 blocks 0.73 against "
         "0.035 in 1x4x2x1",
         applies=lambda op, info, dm, graph: dm.kind == "gpu" and bool(info.shape), limit=_occupied),
    # search: the argmin's tie-breaking
    Rule("near_best", "search", "candidates within ratio x the cheapest (+ slack) tie; the keys below break the tie",
         {"ratio": 1.03, "slack_s": 1e-6},
         "not timed on its own: the model's resolution, narrowed from 5% when the vector and scalar rates were "
         "recalibrated on bench_kernels (commit e32a5f4)"),
    Rule("naive_unless_faster", "search", "a reduction keeps naive loops unless a block is estimated this much faster",
         {"margin": 0.9},
         "conv2d_5x5_s3 bwd 66.8 -> 45 ms (naive 56), conv2d_dilated bwd 5.6 -> 2.6 ms (commit ceb1575)"),
    Rule("smallest_block", "search", "tiny (under tiny_s) or elementwise stages: the smallest near-best block",
         {"tiny_s": 1.8e-5},
         "not timed: any near-best block runs as fast there; a smaller one is less code and a faster build"),
    Rule("register_blocks", "search", "reductions: near-best blocks whose rows are row_floats wide (2 vectors "
         "of 16 lanes, 4 of 8), then of up to 8 rows, first",
         {"row_floats": 32, "rows": 8},
         "polyad/bench/bench_kernels.py (16 lanes): dense dX 8x32/float16 117-128 GFLOP/s, 4x32/float8 83-121, "
         "6x16/float8 95-105; 8 lanes (2-core Zen 4, alternating rounds): softmax's dense dW 4x32/float8 "
         "0.60 ms against 8x16 0.67, dense's 0.32-0.33 against 0.37 (tied in the model)"),
)
RULE = {r.name: r for r in RULES}

INLINE_MAX_DEPTH = RULE["inline_caps"].constants["max_depth"]  # operations along a kernel expression's longest path
INLINE_MAX_SIZE = RULE["inline_caps"].constants["max_size"]  # operations of a kernel's expression
