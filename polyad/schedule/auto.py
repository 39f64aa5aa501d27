"""The auto-scheduler (``schedule="auto"``): the search over the space, ranked by the model.

Graph decisions come from the graph rules of :mod:`polyad.schedule.space` (pad clipped sums, rfactor
small or row-shaped reductions, inline what is evaluated at most once per point: Li et al. 2018).  Each
materialised stage then gets ``argmin_{s in S} stage_cost(info, s, device)`` over the candidates ``S``
the stage rules let the model rank (:func:`~polyad.schedule.space.stage_space`), with the ``search``
rules breaking near-ties (within 3%): a reduction keeps naive loops unless a block is estimated 10%
faster; reductions prefer register blocks of 6-8 rows by 2 vectors, tiny or elementwise stages the
smallest block.  A ``lookup`` (a tuning log) replaces the argmin where it has a measured record.

CPU (PoCL) and GPU use the same machinery with their own :class:`DeviceModel`, measured on the device
(:mod:`polyad.schedule.model`).  Every decision is recorded in ``Schedule.notes``.
"""

import math

from ..errors import ScheduleError
from ..te.memo import Recent
from ..te.tensor import as_tensor_list
from . import Schedule, StageSchedule
from .cost import StageInfo, full_fraction, stage_cost, stage_features, stage_info
from .graph import check_stage_schedule, scheduled_graph, stage_ops
from .model import DeviceModel
from .space import (INLINE_MAX_DEPTH, INLINE_MAX_SIZE, RULE, RULES, Space, candidate_space, graph_decisions,
                    stage_space)

__all__ = ["DeviceModel", "auto_schedule", "candidate_space", "stage_cost", "stage_info", "stage_features",
           "full_fraction", "Space", "StageInfo", "RULES", "INLINE_MAX_DEPTH", "INLINE_MAX_SIZE"]


def auto_schedule(outputs, device=None, renamed=False, lookup=None):
    """The auto-scheduler's :class:`~polyad.schedule.Schedule` for the graph of ``outputs``.

    ``device``: a ``pyopencl.Device``, a :class:`DeviceModel` or a recorded
    model (None: the default device), see :meth:`DeviceModel.of`.  The decisions and their reasons are in ``.notes`` and
    ``.describe()``.

    :param outputs: a tensor or a list of tensors.
    :param device: a ``pyopencl.Device``, a :class:`DeviceModel` or a recorded model (None: the default device).
    :param renamed: True when the stages of ``outputs`` already have unique names (as :func:`prepare` makes them);
        False renames them first, as ``pa.show`` names them.
    :param lookup: None, or a callable ``lookup(op) -> (StageSchedule, source) | None`` asked for every
        materialised stage (``op``: the stage after the graph decisions, named as ``pa.show`` names it): a
        schedule it returns replaces the model's choice, with the note ``"<stage>: <schedule> (from the tuning
        log: <source>)"``; None keeps the model's.  The memo is per lookup object: pass a new one when its
        records change.
    :returns: the :class:`~polyad.schedule.Schedule` named ``"auto"`` (the same object again for the same tensor
        objects, device model and lookup).
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises DeviceError: when the device's model cannot be had (no usable device, an unreadable recorded model).
    :raises ScheduleError: when ``lookup`` returns something other than None or a (StageSchedule, str) pair.
    """
    dm = DeviceModel.of(device)
    outs = as_tensor_list(outputs, "auto_schedule outputs")
    # a warm build of the same graph (same tensor objects) reuses the decisions
    key = (tuple(id(t) for t in outs), dm, renamed, id(lookup))
    hit = _MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], outs)) and hit[2] is lookup:
        return hit[1]
    sched = _auto_schedule(outs, dm, renamed, lookup)
    _MEMO.put(key, (list(outs), sched, lookup))  # holding the tensors and the lookup keeps their ids unique
    return sched


_MEMO = Recent(64)


def _auto_schedule(outs, dm, renamed, lookup):
    if not renamed:
        outs = scheduled_graph(outs)
    graph = graph_decisions(outs, dm)
    notes = list(graph.notes)
    stages = {}
    for op in stage_ops(graph.outputs)[0]:
        if op.name in graph.inline:
            continue
        if lookup is not None:
            rec = _record(lookup, op)
            if rec is not None:
                ss, source = rec
                try:  # a record edited by hand: one bad line broke every build with the stage
                    check_stage_schedule(op.name, op, ss)
                except ScheduleError as e:
                    notes.append(f"{op.name}: the tuning log's record does not fit it ({e}; {source}): not used")
                else:
                    stages[op.name] = ss
                    notes.append(f"{op.name}: {ss.describe()} (from the tuning log: {source})")
                    continue
        info = graph.infos[op.name]
        best, note = _argmin(op, info, stage_space(op, dm, graph, info, ranked_only=True), dm)
        if best is not None:
            stages[op.name] = best
        if note is not None:
            notes.append(note)
    return Schedule("auto", stages=stages, inline=graph.inline, rfactor=graph.rfactor, notes=tuple(notes),
                    pad=graph.pad, space_to_depth=graph.space_to_depth, fold=graph.fold,
                    innermost=graph.innermost)


def _record(lookup, op):
    rec = lookup(op)
    if rec is None:
        return None
    if not (isinstance(rec, tuple) and len(rec) == 2 and isinstance(rec[0], StageSchedule)):
        raise ScheduleError(f"auto_schedule lookup: for stage {op.name!r} expected None or (StageSchedule, source), "
                            f"got {rec!r}")
    return rec[0], str(rec[1])


def _argmin(op, info, space, dm):
    """(the stage's schedule, or None for the default naive loops; its note)."""
    ranked = space.ranked()
    if space.decided is not None:
        best = min(ranked, key=lambda ss: stage_cost(info, ss, dm))
        return best, f"{op.name}: {best.describe()} ({RULE[space.decided].note(op, info, dm)})"
    near_k = RULE["near_best"].constants
    costs = [(stage_cost(info, ss, dm), ss) for ss in ranked]
    floor = min(c for c, _ in costs)
    near = [ss for c, ss in costs if c <= floor * near_k["ratio"] + near_k["slack_s"]]
    naive = stage_cost(info, StageSchedule(), dm)
    if info.reduction and floor > RULE["naive_unless_faster"].constants["margin"] * naive:
        # the model cannot tell a block from the naive loops apart: keep naive (never slower)
        return None, (f"{op.name}: naive loops (no block is estimated 10% faster: {floor * 1e3:.3f} ms "
                      f"vs {naive * 1e3:.3f} ms)")
    if floor - dm.launch_s < RULE["smallest_block"].constants["tiny_s"] or not info.reduction:
        # a tiny or elementwise stage: the smallest block wins (less code, faster builds, the same speed)
        best = min(near, key=_size_key)
    else:
        best = min(near, key=_shape_key)
    if best == StageSchedule():
        return None, None
    return best, (f"{op.name}: {best.describe()} ({info.iterations} iterations, {info.flops} flops, "
                  f"model {stage_cost(info, best, dm) * 1e3:.3f} ms)")


def _shape_key(ss):
    if not ss.tile or len(ss.tile) < 2:
        return (1, 0) + _size_key(ss)
    k = RULE["register_blocks"].constants
    return (abs(ss.tile[-1] - k["row_floats"]), -min(ss.tile[-2], k["rows"])) + _size_key(ss)


def _size_key(ss):
    # among equal costs prefer smaller blocks and less unrolling (less code)
    return (math.prod(ss.tile) if ss.tile else 1, ss.unroll, -ss.vectorize)
