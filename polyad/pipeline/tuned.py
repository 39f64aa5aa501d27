"""What a build takes from tuning logs (TVM's ``apply_history_best``).

- ``schedule=pa.tuned(log)``: the fastest whole schedule logged for this graph (its workload key) on
  this device; else the auto schedule with every stage that has a record on this device taking the
  fastest one (its stage key); else the auto schedule, with a warning that says so.
- ``schedule="auto"`` inside ``with pa.tuning_log(path):`` or with ``$POLYAD_TUNING_LOG`` set: the
  auto schedule with the logged stages, as above (no warning for a graph without records).

Records of another device, polyad version or schema are never applied
(:class:`polyad.schedule.tuning.TuningDatabase`).  The stages that came from a log say so in the
schedule's notes (``pa.show``, ``Schedule.describe``).
"""

import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """``schedule`` for :func:`polyad.schedule.resolve`, the ``lookup`` its auto-scheduler takes, and
    a ``token`` for the program cache key (the database's digest: a grown log is a new build).
    ``fallback``: for a whole logged schedule, the stage lookup to use instead when it does not fit
    the graph (a graph of the same structure whose stages have other names)."""

    schedule: object
    lookup: object = None
    token: str = ""
    fallback: object = None
    stage_keys: tuple = ()  # for a whole logged schedule: (stage name, stage key) of the graph it was measured on

    def resolve(self, renamed, model):
        """The :class:`~polyad.schedule.Schedule` for ``renamed`` (uniquely named outputs) on ``model``."""
        from ..errors import ScheduleError
        from ..schedule import resolve

        sched = resolve(self.schedule, renamed, model, lookup=self.lookup)
        if isinstance(self.lookup, _Counting) and not self.lookup.found:  # pa.show says it too, as pa.build warns
            import dataclasses

            return dataclasses.replace(sched, notes=("the tuning log has no record of this graph or of any of its "
                                                     "stages on this device: the auto schedule",) + sched.notes)
        if self.fallback is None:
            return sched
        try:
            moved = self._moved_stage(renamed, sched)
            if moved is None:
                return sched
            problem = f"its stage {moved!r} is another stage in this graph"
        except ScheduleError as e:
            problem = str(e).splitlines()[0]
        # the keys are structural, the schedule names stages: take the logged stages by their keys instead
        import dataclasses

        auto = resolve("auto", renamed, model, lookup=self.fallback)
        why = (f"the tuning log's schedule of this graph does not fit it ({problem}); its stages are applied by "
               "their keys instead")
        return dataclasses.replace(auto, name="tuned", notes=(why,) + auto.notes)

    def _moved_stage(self, renamed, sched):
        """A stage the logged schedule names that is another stage here (its key differs: a graph of the same
        structure with its stages' names permuted, whose whole schedule went by name to the wrong stages), or
        None.  ScheduleError when the schedule does not fit the graph at all."""
        from ..errors import PolyadError
        from ..schedule.graph import validate
        from ..schedule.tuning import stage_key
        from ..te.tensor import PlaceholderOp, walk_ops

        graph = validate(renamed, sched)  # before inlining: the stages the records key
        keys = dict(self.stage_keys)
        for op in walk_ops(graph):
            if isinstance(op, PlaceholderOp) or op.name not in keys:
                continue
            try:
                if stage_key(op) != keys[op.name]:
                    return op.name
            except PolyadError:  # a stage without a key is compared by nothing
                continue
        return None


def plan(schedule, outputs, inputs, dev):
    """The :class:`Plan` of ``schedule`` for a build of ``outputs`` from ``inputs`` on ``dev``.

    ``outputs`` need not be uniquely named yet: the workload key leaves names out, and a warm build
    (a program cache hit) then never renames its graph.
    """
    from ..runtime.device import device_key
    from ..schedule.tuning import Tuned, active_database, workload_key

    if isinstance(schedule, Tuned):
        db = schedule.database()
        dkey = device_key(dev)
        hit = db.best_schedule(workload_key(outputs, inputs), dkey)
        if hit is not None:
            sched, rec = hit
            import dataclasses

            note = f"the fastest schedule of this graph in the tuning log: {rec.where()}"
            return Plan(dataclasses.replace(sched, name="tuned", notes=(note,)), None, db.digest(),
                        fallback=db.lookup_for(dkey),
                        stage_keys=tuple((n, s["key"]) for n, s in sorted(rec.stages.items())
                                         if isinstance(s, dict) and "key" in s))
        lookup = _Counting(db.lookup_for(dkey))
        return Plan("auto", lookup, db.digest() + "|stages")
    if isinstance(schedule, str) and schedule == "auto":
        db = active_database()
        if db is not None and len(db):
            return Plan("auto", db.lookup_for(device_key(dev)), db.digest())
    return Plan(schedule)


class _Counting:
    """A lookup that remembers whether it found anything (pa.tuned warns when it found nothing)."""

    def __init__(self, lookup):
        self.lookup, self.found = lookup, 0

    def __call__(self, op):
        hit = self.lookup(op)
        self.found += hit is not None
        return hit


def missed(p, outputs):
    """What a build of ``outputs`` under :class:`Plan` ``p`` says it missed: ``"Y"`` (the outputs' names)
    when ``pa.tuned(log)`` found no record of the graph or any of its stages, else None."""
    if not (isinstance(p.lookup, _Counting) and not p.lookup.found):
        return None
    names = [t.name for t in outputs]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def warn_missed(schedule, what, dev, stacklevel):
    """``pa.tuned(log)`` found nothing for ``what`` (``"the graph of Y"``) on ``dev``: say the build is auto's.
    ``stacklevel`` counts from the caller of this function, as ``warnings.warn``'s does from its own."""
    warnings.warn(f"polyad: {schedule!r} has no record of {what}, or of any of its stages, on "
                  f"{dev.name.strip()}; using the auto schedule", RuntimeWarning, stacklevel=stacklevel + 1)
