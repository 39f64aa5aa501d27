"""Schedules: data that says how each stage is mapped onto loops and the OpenCL NDRange.

A :class:`Schedule` holds one :class:`StageSchedule` per stage (by stage name);
stages it does not mention get the defaults.  codegen applies it as isl
schedule-tree transformations (see ``polyad.codegen.tree``), never as edits of
generated code.  For now only the naive vocabulary exists: how many outer
output loops become NDRange dimensions and the work-group size.  Halide's
vocabulary (inline, compute_at, split, tile, reorder, fuse, vectorize,
unroll, rfactor) grows here as fields of StageSchedule.
"""

from dataclasses import dataclass, field

from ..errors import ScheduleError


@dataclass(frozen=True)
class StageSchedule:
    """How one stage is scheduled (loop-level decisions, applied by codegen to the isl schedule tree).

    ``grid_dims``: the outer output loops are mapped onto at most this many
    NDRange dimensions (1 to 3); when a stage has more output dimensions, the
    leading ones are fused into the first grid dimension.  The innermost output
    loop becomes ``get_global_id(0)``.
    ``local_size``: the work-group size (innermost first, as OpenCL), or None to
    let the OpenCL implementation choose.
    ``tile``: per output dimension (outermost first), the block of outputs one
    work-item computes; the NDRange iterates over blocks, and inside a block the
    output points are unrolled around the reduction loop (unroll-and-jam:
    register blocking).  None means 1 everywhere.
    ``vectorize``: the innermost output dimension of a block is computed in
    OpenCL ``floatN`` vectors (N in 1, 2, 4, 8, 16); it must divide that
    dimension's tile size.
    ``unroll``: unroll factor of the innermost reduction loop.
    """

    grid_dims: int = 3
    local_size: tuple = None
    tile: tuple = None
    vectorize: int = 1
    unroll: int = 1

    def __post_init__(self):
        if not isinstance(self.grid_dims, int) or not 1 <= self.grid_dims <= 3:
            raise ScheduleError(f"grid_dims must be 1, 2 or 3, got {self.grid_dims!r}")
        if self.local_size is not None:
            ls = tuple(self.local_size)
            if not 1 <= len(ls) <= 3 or any(not isinstance(x, int) or x <= 0 for x in ls):
                raise ScheduleError(f"local_size must be 1 to 3 positive integers, got {self.local_size!r}")
            object.__setattr__(self, "local_size", ls)
        if self.tile is not None:
            t = tuple(self.tile)
            if any(not isinstance(x, int) or x <= 0 for x in t):
                raise ScheduleError(f"tile sizes must be positive integers, got {self.tile!r}")
            object.__setattr__(self, "tile", t)
        if self.vectorize not in (1, 2, 4, 8, 16):
            raise ScheduleError(f"vectorize must be 1, 2, 4, 8 or 16, got {self.vectorize!r}")
        if not isinstance(self.unroll, int) or self.unroll <= 0:
            raise ScheduleError(f"unroll must be a positive integer, got {self.unroll!r}")


@dataclass(frozen=True)
class Schedule:
    """A schedule for a whole build.

    ``stages``: loop-level decisions per stage, keyed by the stage's unique name
    (as ``pa.show`` prints it).  ``inline``: names of reduction-free stages to
    inline into their consumers, and ``rfactor``: stage name -> factor, both
    graph-level transformations applied to the tensor graph before codegen.
    """

    name: str = "naive"
    stages: dict = field(default_factory=dict)
    default: StageSchedule = StageSchedule()
    inline: frozenset = frozenset()
    rfactor: dict = field(default_factory=dict)

    def for_stage(self, name):
        return self.stages.get(name, self.default)

    __hash__ = object.__hash__


def naive():
    """The correctness baseline: every stage its own kernel, outer loops on the NDRange."""
    return Schedule("naive")


def resolve(schedule):
    """A Schedule from what ``pa.build`` accepts (``"naive"`` or a Schedule)."""
    if isinstance(schedule, Schedule):
        return schedule
    if schedule is None or schedule == "naive":
        return naive()
    if isinstance(schedule, str):
        raise ScheduleError(
            f"unknown schedule {schedule!r}: only 'naive' or a polyad.schedule.Schedule are available in this version"
        )
    raise ScheduleError(f"schedule must be 'naive' or a Schedule, got {type(schedule).__name__}")


__all__ = ["Schedule", "StageSchedule", "naive", "resolve"]
