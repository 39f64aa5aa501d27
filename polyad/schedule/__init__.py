"""Schedules: data that says how each stage is mapped onto loops and the OpenCL NDRange.

A :class:`Schedule` holds one :class:`StageSchedule` per stage (by stage name,
as ``pa.show`` prints it); stages it does not mention get ``default``.
Graph-level decisions (``inline``, ``rfactor``) are applied to the tensor graph
before codegen by :mod:`polyad.schedule.graph`; loop-level ones (tile,
vectorize, unroll, local_size, grid_dims) by codegen as isl schedule-tree
transformations.  ``schedule="auto"`` asks :mod:`polyad.schedule.auto` for one.
Schedules serialise to JSON (:meth:`Schedule.to_json`, :meth:`Schedule.from_json`).
See docs/scheduling.md.
"""

import json
import numbers
from dataclasses import dataclass, field, fields, replace

from ..errors import ScheduleError


#: the widths of the OpenCL vector types (``floatN``) polyad emits, scalar first: what a schedule may ask for,
#: the probe tests, and codegen's remainder groups take
VECTOR_WIDTHS = (1, 2, 4, 8, 16)


def _is_count(x):
    """An integer (numpy's too), not a bool: ``tile=(True, 4)`` was a tile of 1."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


@dataclass(frozen=True)
class StageSchedule:
    """How one stage is scheduled (loop-level decisions, applied by codegen to the isl schedule tree).

    :param grid_dims: the outer output loops are mapped onto at most this many NDRange dimensions (1 to 3); when a
        stage has more output dimensions, the leading ones are fused into the first grid dimension.  The innermost
        output loop becomes ``get_global_id(0)``.
    :param local_size: the work-group size (1 to 3 positive ints, innermost first, as OpenCL), or None to let the
        OpenCL implementation choose.
    :param tile: per output dimension (outermost first), the block of outputs one work-item computes (positive
        ints); the NDRange iterates over blocks, and inside a block the output points are unrolled around the
        reduction loop (unroll-and-jam: register blocking).  None means 1 everywhere.
    :param vectorize: the innermost output dimension of a block is computed in OpenCL ``floatN`` vectors (N in 1, 2,
        4, 8, 16); it must divide that dimension's tile size.
    :param unroll: unroll factor of the innermost reduction loop, a positive int.
    :param phase: per output dimension (outermost first), a stride ``s_d`` (a positive int; 1 leaves the dimension
        alone), or None.  Each output index ``x_d`` is written ``x_d = s_d * q_d + p_d`` with the phase
        ``p_d = x_d mod s_d``: the stage runs as one dense sub-stage per phase combination (the isl map
        ``{ S[.., x, ..] -> [p, .., q, ..] : x = s*q + p and 0 <= p < s }`` with ``p`` fixed, outermost, inside
        each work-item), ``tile`` and ``vectorize`` apply to the ``q`` dimensions, and the reduction variables
        coupled to a phased dimension are counted from ``q`` (a stride-``s`` convolution's data gradient reduces
        over a fixed window around ``q``, with affine bounds and no division).  Legal for every stage; see
        docs/scheduling.md.
    :param nontemporal: write the stage's full vector blocks with nontemporal stores
        (``__builtin_nontemporal_store``: the lines go to memory without being read into the caches first), where
        :meth:`nontemporal_stores` holds; other stores are plain.  For outputs larger than the last-level cache on
        devices whose probe passed the ``nontemporal`` family (``DeviceModel.nontemporal``); a build on another
        device drops it, with a warning.
    :raises ScheduleError: when a field is out of its range or of the wrong type (checked on construction; that a
        tile or a phase fits its stage is checked against the graph, by :func:`validate`).
    """

    grid_dims: int = 3
    local_size: tuple = None
    tile: tuple = None
    vectorize: int = 1
    unroll: int = 1
    phase: tuple = None
    nontemporal: bool = False

    def __post_init__(self):
        if not _is_count(self.grid_dims) or not 1 <= self.grid_dims <= 3:
            raise ScheduleError(f"grid_dims must be 1, 2 or 3, got {self.grid_dims!r}")
        for field_ in ("local_size", "tile"):  # tile=3 raised tuple()'s TypeError
            v = getattr(self, field_)
            if v is not None and (isinstance(v, (str, bytes)) or not hasattr(v, "__iter__")):
                raise ScheduleError(f"{field_} must be a list of positive integers, got {v!r}")
        if self.local_size is not None:
            ls = tuple(int(x) if _is_count(x) else x for x in self.local_size)
            if not 1 <= len(ls) <= 3 or any(not _is_count(x) or x <= 0 for x in ls):
                raise ScheduleError(f"local_size must be 1 to 3 positive integers, got {self.local_size!r}")
            object.__setattr__(self, "local_size", ls)
        if self.tile is not None:
            t = tuple(int(x) if _is_count(x) else x for x in self.tile)  # numpy's integers too, not bools
            if any(not _is_count(x) or x <= 0 for x in t):
                raise ScheduleError(f"tile sizes must be positive integers, got {self.tile!r}")
            object.__setattr__(self, "tile", t)
        if not _is_count(self.vectorize) or self.vectorize not in VECTOR_WIDTHS:
            raise ScheduleError(f"vectorize must be 1, 2, 4, 8 or 16, got {self.vectorize!r}")
        if not _is_count(self.unroll) or self.unroll <= 0:
            raise ScheduleError(f"unroll must be a positive integer, got {self.unroll!r}")
        for name in ("grid_dims", "vectorize", "unroll"):  # a numpy integer as Python's: the JSON holds them
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.phase is not None:
            if isinstance(self.phase, (str, bytes)) or not hasattr(self.phase, "__iter__"):
                raise ScheduleError(f"phase must be a list of positive integers (one per output dimension), got {self.phase!r}")
            ph = tuple(self.phase)
            if any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in ph):
                raise ScheduleError(f"phase strides must be positive integers, got {self.phase!r}")
            object.__setattr__(self, "phase", ph)
        if not isinstance(self.nontemporal, bool):
            raise ScheduleError(f"nontemporal must be True or False, got {self.nontemporal!r}")

    def nontemporal_stores(self, shape):
        """Whether codegen writes this stage's full vector blocks (of a stage of ``shape``) with nontemporal stores.

        Asked for, in vectors, along an unphased innermost dimension whose extent the width divides: then every
        block's vector starts at a multiple of the width in the row-major buffer, aligned as the store needs
        (OpenCL aligns a buffer to at least 128 bytes, ``CL_DEVICE_MEM_BASE_ADDR_ALIGN``), while a misaligned
        nontemporal vector store faults on x86.
        """
        return (self.nontemporal and self.vectorize > 1 and len(shape) > 0 and shape[-1] % self.vectorize == 0
                and (self.phase is None or self.phase[-1] == 1))

    def stored(self, nontemporal):
        """This schedule with its vector blocks' stores nontemporal or plain (itself where they already are)."""
        return self if self.nontemporal == nontemporal else replace(self, nontemporal=nontemporal)

    def to_dict(self):
        """Plain data (JSON-ready): every field, tuples as lists; ``phase`` only when set and ``nontemporal``
        only when True (a schedule without them reads and writes the same JSON as before the fields existed)."""
        return {f.name: (list(v) if isinstance(v, tuple) else v) for f in fields(self) for v in [getattr(self, f.name)]
                if not (f.name == "phase" and v is None) and not (f.name == "nontemporal" and not v)}

    @classmethod
    def from_dict(cls, data, where="stage schedule"):
        if not isinstance(data, dict):
            raise ScheduleError(f"{where}: expected an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise ScheduleError(f"{where}: unknown fields {extra} (known: {sorted(known)})")
        try:
            return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()})
        except ScheduleError as e:
            raise ScheduleError(f"{where}: {e}") from None
        except TypeError as e:
            raise ScheduleError(f"{where}: {e}") from None

    def describe(self):
        """One line: the non-default fields."""
        parts = []
        if self.tile is not None:
            parts.append("tile " + "x".join(map(str, self.tile)))
        if self.vectorize != 1:
            parts.append(f"vectorize {self.vectorize}")
        if self.unroll != 1:
            parts.append(f"unroll {self.unroll}")
        if self.grid_dims != 3:
            parts.append(f"grid_dims {self.grid_dims}")
        if self.local_size is not None:
            parts.append("local_size " + "x".join(map(str, self.local_size)))
        if self.phase is not None and any(x != 1 for x in self.phase):
            parts.insert(0, "phase " + "x".join(map(str, self.phase)))
        if self.nontemporal:
            parts.append("nontemporal stores")
        return ", ".join(parts) or "naive loops"


@dataclass(frozen=True)
class RFactor:
    """An rfactor decision with its axis and form (``Schedule.rfactor`` values may also be a bare factor).

    See :func:`polyad.schedule.graph.rfactor`.

    :param factor: the split factor, an integer >= 2.
    :param axis: the reduction axis to split, by name (None: the largest).
    :param interleave: keep the inner part of the split as the partial stage's last axis (None:
        :func:`polyad.schedule.graph.rfactor`'s default).
    :param pad: interleaved, with a factor that does not divide the axis: run the axis to the next multiple
        of the factor on zero-padded operands (:func:`polyad.schedule.graph.pad_axis`) instead of ragged
        last lanes.
    :param axis_last: first read every operand that indexes the split axis elsewhere than last through a copy
        with that index last (:func:`polyad.schedule.graph.reduction_axis_last`), so that interleaved lanes along
        it load contiguously (a convolution's weight gradient with its partials along the batch).
    :raises ScheduleError: when ``factor`` is not an integer >= 2, ``axis`` is not a name, or ``interleave``,
        ``pad`` or ``axis_last`` is not a bool or None.
    """

    factor: int
    axis: str = None
    interleave: bool = None
    pad: bool = None
    axis_last: bool = None

    def __post_init__(self):
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 2:
            raise ScheduleError(f"rfactor needs an integer factor >= 2, got {self.factor!r}")
        if self.axis is not None and not isinstance(self.axis, str):
            raise ScheduleError(f"rfactor axis must be a reduction axis name, got {self.axis!r}")
        if self.interleave is not None and not isinstance(self.interleave, bool):
            raise ScheduleError(f"rfactor interleave must be true, false or null, got {self.interleave!r}")
        if self.pad is not None and not isinstance(self.pad, bool):
            raise ScheduleError(f"rfactor pad must be true, false or null, got {self.pad!r}")
        if self.axis_last is not None and not isinstance(self.axis_last, bool):
            raise ScheduleError(f"rfactor axis_last must be true, false or null, got {self.axis_last!r}")

    @classmethod
    def of(cls, spec, where="rfactor"):
        """The RFactor of a Schedule.rfactor value: an RFactor, a factor, or its JSON object."""
        if isinstance(spec, cls):
            return spec
        if isinstance(spec, dict):
            extra = sorted(set(spec) - {"factor", "axis", "interleave", "pad", "axis_last"})
            if extra or "factor" not in spec:
                raise ScheduleError(f"{where}: expected {{'factor', 'axis', 'interleave', 'pad', 'axis_last'}}, "
                                    f"got {spec!r}")
            try:
                return cls(**spec)
            except ScheduleError as e:
                raise ScheduleError(f"{where}: {e}") from None
        try:
            return cls(spec)
        except ScheduleError as e:
            raise ScheduleError(f"{where}: {e}") from None

    @property
    def bare(self):
        """Whether axis and form are the defaults: the decision is its factor alone."""
        return self.axis is None and self.interleave is None and not self.pad and not self.axis_last

    def to_data(self):
        """A bare factor when axis and form are the defaults, else an object (JSON-ready)."""
        if self.bare:
            return self.factor
        out = {"factor": self.factor, "axis": self.axis, "interleave": self.interleave}
        if self.pad:
            out["pad"] = True  # only when set: older schedules read and write as before
        if self.axis_last:
            out["axis_last"] = True
        return out

    def describe(self):
        s = str(self.factor)
        if self.axis is not None:
            s += f" over {self.axis}"
        if self.interleave:
            s += ", interleaved"
        if self.pad:
            s += ", on zero-padded operands"
        if self.axis_last:
            s += f", its operands read with {self.axis or 'the axis'} last"
        return s


SCHEDULE_FORMAT = "polyad-schedule"
SCHEDULE_VERSION = 1


@dataclass(frozen=True)
class Schedule:
    """A schedule for a whole build.

    Graph-level decisions (``fold``, ``pad``, ``space_to_depth``, ``innermost``, ``rfactor``, ``inline``) are
    transformations applied to the tensor graph before codegen, in that order; loop-level ones (``stages``, ``default``) are applied by
    codegen.

    :param name: the schedule's name (``"naive"``, ``"auto"``, or one of your own).
    :param stages: loop-level decisions per stage: a dict of the stage's unique name (as ``pa.show`` prints it) ->
        :class:`StageSchedule`.
    :param default: the :class:`StageSchedule` of the stages ``stages`` does not mention.
    :param inline: names of reduction-free stages to inline into their consumers.
    :param rfactor: stage name -> factor: the stage's largest reduction axis is split by it (a partial stage
        ``<name>_rf`` reduces blocks of ``factor`` iterations, the stage itself reduces the partial results); a
        value may be an :class:`RFactor` naming the axis and form.
    :param notes: why the auto-scheduler decided what it did (shown by :meth:`describe`, not used by codegen).
    :param pad: names of sums clipped by an operand's bounds to run over their bounding box on a zero-padded copy of
        it (:func:`polyad.schedule.graph.pad_reads`).
    :param space_to_depth: names of reductions whose operands read at a stride (``X[3y + kh]``) are read from a
        de-interleaved copy instead, at unit stride (:func:`polyad.schedule.graph.space_to_depth`).
    :param fold: names of plain copies (``C[o] = T[f(o)]``, a crop) that compute their producer's values
        themselves, at the points they read; the producer's kernel goes (:func:`polyad.schedule.graph.fold`).
    :param innermost: stage name -> one of its output dimensions (not the last) to compute innermost: the stage
        runs as ``<name>_t`` in a layout with that dimension last (its vectors along it), operands that read it
        through copies with that index last, and is copied back (:func:`polyad.schedule.graph.innermost`).
    :raises ScheduleError: when a field has the wrong type (``stages`` not a dict of names -> StageSchedule,
        ``inline`` or ``pad`` not a set of names, a bad rfactor value); whether the names exist in the graph is
        checked by :func:`validate`.
    """

    name: str = "naive"
    stages: dict = field(default_factory=dict)
    default: StageSchedule = StageSchedule()
    inline: frozenset = frozenset()
    rfactor: dict = field(default_factory=dict)
    notes: tuple = ()
    pad: frozenset = frozenset()
    space_to_depth: frozenset = frozenset()
    fold: frozenset = frozenset()
    innermost: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.stages, dict):
            raise ScheduleError(f"Schedule.stages must be a dict of stage name -> StageSchedule, got {self.stages!r}")
        for k, v in self.stages.items():
            if not isinstance(k, str) or not isinstance(v, StageSchedule):
                raise ScheduleError(f"Schedule.stages: stage {k!r} must map a name to a StageSchedule, got {v!r}")
        if not isinstance(self.default, StageSchedule):
            raise ScheduleError(f"Schedule.default must be a StageSchedule, got {self.default!r}")
        if isinstance(self.inline, str) or any(not isinstance(n, str) for n in self.inline):
            raise ScheduleError(f"Schedule.inline must be a set of stage names, got {self.inline!r}")
        object.__setattr__(self, "inline", frozenset(self.inline))
        if isinstance(self.pad, str) or any(not isinstance(n, str) for n in self.pad):
            raise ScheduleError(f"Schedule.pad must be a set of stage names, got {self.pad!r}")
        object.__setattr__(self, "pad", frozenset(self.pad))
        if isinstance(self.space_to_depth, str) or any(not isinstance(n, str) for n in self.space_to_depth):
            raise ScheduleError(f"Schedule.space_to_depth must be a set of stage names, got {self.space_to_depth!r}")
        object.__setattr__(self, "space_to_depth", frozenset(self.space_to_depth))
        if isinstance(self.fold, str) or any(not isinstance(n, str) for n in self.fold):
            raise ScheduleError(f"Schedule.fold must be a set of stage names, got {self.fold!r}")
        object.__setattr__(self, "fold", frozenset(self.fold))
        if not isinstance(self.innermost, dict) or any(
                not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v < 0
                for k, v in self.innermost.items()):
            raise ScheduleError(f"Schedule.innermost must be a dict of stage name -> output dimension (an int >= 0), "
                                f"got {self.innermost!r}")
        object.__setattr__(self, "innermost", dict(self.innermost))
        rf = {}
        for k, v in dict(self.rfactor).items():
            if not isinstance(k, str):
                raise ScheduleError(f"Schedule.rfactor: keys are stage names, got {k!r}")
            spec = RFactor.of(v, f"Schedule.rfactor: stage {k!r}")
            rf[k] = spec.factor if spec.bare else spec
        object.__setattr__(self, "rfactor", rf)
        object.__setattr__(self, "notes", tuple(self.notes))

    def for_stage(self, name):
        return self.stages.get(name, self.default)

    __hash__ = object.__hash__

    # -- data -----------------------------------------------------------------------------------
    def to_dict(self):
        """Plain data (JSON-ready); ``space_to_depth``, ``fold`` and ``innermost`` only when set (older schedules
        read and write as before)."""
        out = {
            "format": SCHEDULE_FORMAT,
            "version": SCHEDULE_VERSION,
            "name": self.name,
            "default": self.default.to_dict(),
            "stages": {k: self.stages[k].to_dict() for k in sorted(self.stages)},
            "inline": sorted(self.inline),
            "pad": sorted(self.pad),
            "rfactor": {k: RFactor.of(self.rfactor[k]).to_data() for k in sorted(self.rfactor)},
            "notes": list(self.notes),
        }
        if self.space_to_depth:
            out["space_to_depth"] = sorted(self.space_to_depth)
        if self.fold:
            out["fold"] = sorted(self.fold)
        if self.innermost:
            out["innermost"] = {k: self.innermost[k] for k in sorted(self.innermost)}
        return out

    def to_json(self, indent=None):
        """The schedule as JSON text (stable: keys sorted, same schedule -> same text)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict):
            raise ScheduleError(f"a schedule is a JSON object, got {type(data).__name__}")
        if data.get("format") != SCHEDULE_FORMAT:
            raise ScheduleError(f"not a polyad schedule (format {data.get('format')!r}, expected {SCHEDULE_FORMAT!r})")
        version = data.get("version")
        if version != SCHEDULE_VERSION:
            raise ScheduleError(f"schedule format version {version!r} is not supported (this polyad reads {SCHEDULE_VERSION})")
        known = {"format", "version", "name", "default", "stages", "inline", "rfactor", "notes", "pad", "space_to_depth", "fold",
                 "innermost"}
        extra = sorted(set(data) - known)
        if extra:
            raise ScheduleError(f"schedule: unknown fields {extra}")
        stages = data.get("stages", {})
        if not isinstance(stages, dict):
            raise ScheduleError("schedule: 'stages' must be an object of stage name -> stage schedule")
        inline = data.get("inline", [])
        if not isinstance(inline, list):
            raise ScheduleError("schedule: 'inline' must be a list of stage names")
        pad = data.get("pad", [])
        if not isinstance(pad, list):
            raise ScheduleError("schedule: 'pad' must be a list of stage names")
        s2d = data.get("space_to_depth", [])
        if not isinstance(s2d, list):
            raise ScheduleError("schedule: 'space_to_depth' must be a list of stage names")
        folds = data.get("fold", [])
        if not isinstance(folds, list):
            raise ScheduleError("schedule: 'fold' must be a list of stage names")
        inner = data.get("innermost", {})
        if not isinstance(inner, dict):
            raise ScheduleError("schedule: 'innermost' must be an object of stage name -> output dimension")
        rf = data.get("rfactor", {})
        if not isinstance(rf, dict):
            raise ScheduleError("schedule: 'rfactor' must be an object of stage name -> factor")
        return cls(
            name=str(data.get("name", "custom")),
            stages={k: StageSchedule.from_dict(v, f"stage {k!r}") for k, v in stages.items()},
            default=StageSchedule.from_dict(data.get("default", {}), "default stage schedule"),
            inline=frozenset(inline),
            rfactor=dict(rf),
            notes=tuple(data.get("notes", ())),
            pad=frozenset(pad),
            space_to_depth=frozenset(s2d),
            fold=frozenset(folds),
            innermost=dict(inner),
        )

    @classmethod
    def from_json(cls, text):
        """The Schedule of JSON text written by :meth:`to_json` (ScheduleError when it is not one)."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as e:
            raise ScheduleError(f"schedule JSON does not parse: {e}") from None
        return cls.from_dict(data)

    def describe(self):
        """The decisions, readable: one line per graph-level and per stage decision."""
        lines = [f"schedule {self.name!r}"]
        if self.inline:
            lines.extend(_wrap(f"inline ({len(self.inline)}): ", sorted(self.inline)))
        for n in sorted(self.fold):
            lines.append(f"  fold {n} (computes its producer at the points it reads)")
        for n in sorted(self.pad):
            lines.append(f"  pad_reads {n}")
        for n in sorted(self.space_to_depth):
            lines.append(f"  space_to_depth {n}")
        for n in sorted(self.innermost):
            lines.append(f"  innermost {n}: output dimension {self.innermost[n]} last (computed as {n}_t)")
        for n in sorted(self.rfactor):
            lines.append(f"  rfactor {n} by {RFactor.of(self.rfactor[n]).describe()}")
        if self.default != StageSchedule():
            lines.append(f"  default: {self.default.describe()}")
        for n in sorted(self.stages):
            lines.append(f"  stage {n}: {self.stages[n].describe()}")
        if len(lines) == 1:
            lines.append("  every stage: its own kernel, naive loops")
        if self.notes:
            lines.append("  why:")
            lines.extend(f"    {t}" for t in self.notes)
        return "\n".join(lines)

    def __str__(self):
        return self.describe()


def _wrap(head, names, width=100):
    lines, cur = [], "  " + head
    for i, n in enumerate(names):
        piece = n + (", " if i + 1 < len(names) else "")
        if len(cur) + len(piece) > width and cur.strip():
            lines.append(cur.rstrip())
            cur = "      "
        cur += piece
    lines.append(cur.rstrip())
    return lines


@dataclass(frozen=True)
class Auto:
    """``schedule=Auto(model)``: the auto-scheduler's choice for a given :class:`DeviceModel` (a recorded
    model, another device's) instead of the device's own calibrated one.  ``"auto"`` is ``Auto`` of
    the device the build runs on.

    :param model: the :class:`DeviceModel` the auto-scheduler plans for.
    """

    model: object

    def to_json(self):
        return json.dumps({"auto": self.model.to_dict()}, sort_keys=True)

    def describe(self):
        return f"auto with the model {self.model.source or 'given'}"


def remainder_widths(vec, widths):
    """The narrower vector widths, widest first, in which codegen runs the remainder of a reduction tiled in
    ``vec``-lane vectors (the points left beside the full tiles and the whole ``vec``-lane groups): those of the
    device's ``widths`` from 2 below ``vec`` that divide it.  A 1000-wide matmul in float16 blocks of 32 ends in
    8 points a row, one float8 group.  Codegen (``codegen.tree``) and the cost model (``cost.box_groups``) read it.

    :param vec: the stage's vector width.
    :param widths: the vector widths the device compiles (its model's).
    :returns: a tuple of ints.
    """
    return tuple(w for w in sorted(set(widths), reverse=True) if 2 <= w < vec and vec % w == 0)


def moved_tile(extent, tile, vec, narrower):
    """How many points codegen moves back the last tile along a last output dimension of ``extent`` cut by tiles
    of ``tile`` points in ``vec``-lane vectors (0: it does not): where the remainder would take more groups (of
    ``vec`` and the ``narrower`` widths of :func:`remainder_widths`, one a scalar point left) than a tile has
    vectors.  A row of 28 in float16 tiles of 16 then ends in a full tile over columns 12-27 (four computed twice,
    alike) where it took a float8 and a float4 group, each in its own reduction loop: a 3x3/2/1 conv2d's stage ran
    1.71 -> 1.17 ms.  Codegen (``codegen.tree``) moves it where isl finds the moved tile full and no statement of
    the stage writes another's points; the cost model (``cost.box_groups``) charges it as a tile.

    :param extent: the dimension's extent (None: 0).
    :param tile: the tile's size along it.
    :param vec: the vector width.
    :param narrower: the remainder's narrower widths, widest first (``()`` for an assignment).
    :returns: an int, the points the last tile moves back by.
    """
    if extent is None or vec <= 1 or tile > extent or extent % tile == 0:
        return 0
    left, groups = extent % tile, 0
    for w in (vec,) + tuple(narrower):
        groups, left = groups + left // w, left % w
    return -extent % tile if groups + left > tile // vec else 0


def naive():
    """The correctness baseline: every stage its own kernel, outer loops on the NDRange.

    :returns: the :class:`Schedule` named ``"naive"``, with no decision.
    """
    return Schedule("naive")


def resolve(schedule, outputs=None, device=None, lookup=None):
    """The :class:`Schedule` ``schedule`` stands for: the one place a schedule's name is interpreted.

    ``"naive"`` (or None), a Schedule, its dict or JSON text; ``"auto"`` runs
    the auto-scheduler on the graph of ``outputs`` for ``device`` (a
    :class:`DeviceModel`, a recorded model, a ``pyopencl.Device`` or None for
    the default device: see :meth:`DeviceModel.of`).

    :param schedule: ``"naive"``, None, ``"auto"``, an :class:`Auto`, a :class:`Schedule`, its dict or its JSON
        text.
    :param outputs: the tensors of the graph; needed for ``"auto"`` and :class:`Auto`.
    :param device: for ``"auto"``: the device whose model the auto-scheduler uses (see :meth:`DeviceModel.of`).
    :param lookup: for ``"auto"``: the tuning records to apply, ``op -> (StageSchedule, where) | None`` (see
        :meth:`polyad.schedule.tuning.TuningDatabase.lookup_for`; ``pa.build`` passes the active database's).
    :returns: the :class:`Schedule`.
    :raises ScheduleError: when ``schedule`` is an unknown name or type, its dict or JSON is not a valid schedule,
        ``"auto"``/:class:`Auto` comes without ``outputs``, or it is ``pa.tuned(log)`` (which needs the device
        key: ``pa.build`` and ``pa.show`` resolve it).
    :raises DeviceError: for ``"auto"``, when the device's model cannot be had (no usable device, an unreadable
        recorded model).
    """
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, Auto):
        if outputs is None:
            raise ScheduleError("an Auto schedule needs the graph: resolve(schedule, outputs)")
        from .auto import auto_schedule

        return auto_schedule(outputs, device=schedule.model)
    if schedule is None or schedule == "naive":
        return naive()
    if isinstance(schedule, str) and schedule == "auto":
        if outputs is None:
            raise ScheduleError("schedule 'auto' needs the graph: resolve(schedule, outputs, device)")
        from .auto import auto_schedule

        return auto_schedule(outputs, device=device, lookup=lookup)
    from .tuning import Tuned

    if isinstance(schedule, Tuned):
        raise ScheduleError(f"{schedule!r} applies records of a device: resolve it with the device "
                            "(pa.build, pa.show or polyad.pipeline.resolve_schedule)")
    if isinstance(schedule, dict):
        return Schedule.from_dict(schedule)
    if isinstance(schedule, str) and schedule.lstrip().startswith("{"):
        return Schedule.from_json(schedule)
    if isinstance(schedule, str):
        raise ScheduleError(
            f"unknown schedule {schedule!r}: use 'naive', 'auto', a polyad.schedule.Schedule or its JSON"
        )
    raise ScheduleError(f"schedule must be 'naive', 'auto', a Schedule or its JSON, got {type(schedule).__name__}")


def prepare(outputs, schedule="auto", device=None):
    """(outputs of the transformed graph, loop-level Schedule) for codegen.

    Resolves ``schedule`` (:func:`resolve`), checks it against the graph
    (ScheduleError naming the stage) and applies its graph-level
    transformations (pad, rfactor, then inline).  Stages are renamed to their
    unique names so that codegen finds their schedules.

    :param outputs: a tensor or a list of tensors.
    :param schedule: anything :func:`resolve` takes (``"auto"`` by default).
    :param device: for ``"auto"``: the device whose model the auto-scheduler uses.
    :returns: ``(outputs, schedule)``: the outputs of the transformed graph and the :class:`Schedule` whose
        loop-level decisions codegen applies.
    :raises ScheduleError: when ``schedule`` is malformed or does not fit the graph (naming the stage).
    :raises DeviceError: for ``"auto"``, when the device's model cannot be had.
    """
    from .graph import apply_graph_schedule, scheduled_graph

    outs = scheduled_graph(outputs)
    return apply_graph_schedule(outs, resolve(schedule, outs, device))


def show(tensors, schedule="auto", device=None):
    """The schedule's decisions (``describe()``) and the graph codegen gets (``pa.show``), as text.

    :param tensors: a tensor or a list of tensors.
    :param schedule: anything :func:`resolve` takes (``"auto"`` by default).
    :param device: for ``"auto"``: the device whose model the auto-scheduler uses.
    :returns: the text: the schedule's decisions, a blank line, then the transformed graph.
    :raises ScheduleError: when ``schedule`` is malformed or does not fit the graph.
    :raises DeviceError: for ``"auto"``, when the device's model cannot be had.
    """
    # the build driver's doors (as DeviceModel.of's): the graph pa.build generates code for (its unproven reads
    # guarded, its where= clauses lifted: a schedule decided on it does not fit the graph as written), and for
    # auto the device's tuning records (pa.tuned, pa.tuning_log)
    from ..pipeline import build_graph, resolve_schedule  # noqa: PLC0415
    from ..te.printer import show as show_graph
    from ..te.tensor import as_tensor_list
    from .tuning import Tuned

    if isinstance(schedule, Tuned) or (isinstance(schedule, str) and schedule == "auto" and not _is_model(device)):
        schedule = resolve_schedule(tensors, schedule, device)
    outs, sched = prepare(build_graph(as_tensor_list(tensors, "show")), schedule, device)
    lines = [sched.describe()] + _scatters(outs, sched) + _lane_sums(outs, sched)
    return "\n".join(lines) + "\n\n" + show_graph(outs)


def _scatters(outs, sched):
    """A line per stage ``sched`` builds as a scatter (poly/scatter.py; DESIGN.md: a data-dependent index's
    adjoint says how it is computed)."""
    from ..poly.scatter import scatter_form
    from ..poly.stage import statements_of
    from ..te.printer import Printer, unique_names
    from ..te.tensor import PlaceholderOp, walk_ops

    lines = []
    for op in walk_ops(outs):
        form = None if isinstance(op, PlaceholderOp) else scatter_form(op)
        if form is not None and form.blocks(sched.for_stage(op.name), len(op.shape)) is not None:
            st = statements_of(op)[form.index]
            pr = Printer(var_names=unique_names(list(st.vars) + [a for a, _ in form.steps if a is not None]))
            picks = dict(form.picks)
            at = ", ".join(pr(picks[d]) if d in picks else pr(v) for d, v in enumerate(st.out_vars))
            ranges = {id(a): (lo, hi) for a, lo, hi in form.ranges}
            given = [pr(e) if a is None else f"{pr(a)} = {pr(e)} in [{', '.join(map(str, ranges[id(a)]))}]"
                     for a, e in form.steps]
            given += [pr(form.check)] if form.check is not None else []
            lines.append(f"  scatter {op.name}: {op.name}[{at}] += {pr(form.value)} where {' and '.join(given)}, "
                         "in the reduction's order (a one-hot sum: no comparison per output point)")
    return lines


def _lane_sums(outs, sched):
    """A line per rfactor sum codegen computes in its partials' kernel (codegen/tree.py ``lane_sums``)."""
    from ..codegen.tree import lane_sums  # noqa: PLC0415 (codegen reads schedules: imported when asked)
    from ..te.tensor import PlaceholderOp, walk_ops

    stages = [op for op in walk_ops(outs) if not isinstance(op, PlaceholderOp)]
    by_id = {id(op): op for op in stages}
    pairs = lane_sums(stages, sched, outs).items()
    return [f"  lane sum {T.name}: in {by_id[p].name}'s kernel, each point's {by_id[p].shape[-1]} partials added "
            f"in halves (no kernel of its own, no {by_id[p].name} buffer)" for p, T in pairs]


def show_graph(tensors, schedule=None, device=None):
    """``pa.show(tensors)``: the tensors and everything they depend on, one block per stage; with a
    ``schedule``, its decisions and the graph codegen gets (after pad, rfactor and inlining) instead.

    :param tensors: a tensor or a list of tensors.
    :param schedule: None for the graph as written; else a schedule as ``pa.build`` takes it (``"auto"``,
        ``"naive"``, a ``Schedule`` or its JSON, ``pa.tuned(log)``), shown with the graph it transforms.
    :param device: with ``schedule="auto"``: the device whose model (and tuning records) the auto-scheduler uses.
    :returns: the text.
    :raises PolyadError: when ``tensors`` is not a tensor or a list of tensors.
    :raises ScheduleError: when ``schedule`` is malformed or does not fit the graph.
    :raises DeviceError: for ``"auto"``, when the device's model cannot be had.
    """
    from ..te.printer import show as show_tensors

    if schedule is None:
        return show_tensors(tensors)
    return show(tensors, schedule, device)


def _is_model(device):
    return isinstance(device, (DeviceModel, dict)) or (isinstance(device, str) and device.endswith(".json"))


from .auto import auto_schedule, candidate_space  # noqa: E402
from .model import DeviceModel  # noqa: E402
from .graph import inline, rfactor, validate  # noqa: E402

__all__ = [
    "Schedule", "StageSchedule", "RFactor", "Auto", "naive", "resolve", "prepare", "auto_schedule", "candidate_space",
    "DeviceModel", "inline", "rfactor", "validate", "show", "show_graph", "remainder_widths", "moved_tile",
    "VECTOR_WIDTHS",
]
