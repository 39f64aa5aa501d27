"""The tuning log and the tuning database: what a search measured, and the best of it, by workload and device.

A tuning log is a text file of JSON lines, one record per measured schedule, appended as the
search goes (a crash tears at most the last line).  A record, schema version 1 (one line in the
file; wrapped here)::

    {"schema": 1, "polyad": "0.1.0", "workload": "3f0a9c2e5b7d1e4a6c80", "name": "dense_backward",
     "device": "Portable Computing Language|OpenCL 3.0 PoCL ...|cpu-x86-64-znver4|...", "config": "9b1c...",
     "trial": 12, "candidate": "evolve", "schedule": {<Schedule.to_dict()>},
     "stages": {"T": {"key": "c41d...", "schedule": {<StageSchedule.to_dict()>}, "time": 0.000213}},
     "time": 0.00131, "times": [0.00131, 0.00129, 0.00135], "error": null, "timestamp": 1764000000.0}

* ``workload``: :func:`workload_key` of the graph the build was asked for (its outputs and inputs);
  ``name`` a human name for it, or ``""``;
* ``device``: the device key (:func:`polyad.runtime.device.device_key`), compared as a string;
* ``config``: :func:`config_key` of the schedule (its decisions, not its name or notes): a resumed
  search skips the configurations :func:`measured` lists;
* ``stages``: per stage of the prepared graph (after inline, rfactor, pad), its :func:`stage_key`,
  its loop-level schedule and its own time (seconds, or null when not measured alone);
* ``time``: the median of ``times`` (seconds) of the whole build, null when it failed (``error``);
* ``ref_times`` (optional): the auto schedule's runs, each timed beside one of ``times`` (the tuner
  pairs them: this VM's speed drifts in bursts of seconds).  Where every record of a workload has
  them, the database ranks by the runs' ratios to them (:attr:`Record.relative`), not by ``time``.

:class:`TuningDatabase` is TVM's ``apply_history_best``: the fastest error-free record of this
polyad version per workload and device (:meth:`TuningDatabase.best_schedule`), and the fastest
measured schedule of a stage wherever it occurred (:meth:`TuningDatabase.best_stage`, matched by
stage key, so a stage tuned in one graph serves the equal stage of another).  :func:`tuning_log`
and ``$POLYAD_TUNING_LOG`` choose the process's active database; :func:`tuned` is the
``schedule=`` value of ``pa.build`` that applies a log.
"""

import contextlib
import contextvars
import hashlib
import json
import math
import os
import statistics
import threading
import time as _time
import warnings
from dataclasses import dataclass, field

from ..errors import PolyadError, ScheduleError, TuningLogError
from ..te.expr import Call, Const, Load, Reduce, Var
from ..te.memo import graph_memo, op_memo
from ..te.tensor import PlaceholderOp, as_tensor_list, walk_ops
from ..te.visit import post_order
from . import Schedule, StageSchedule

__all__ = [
    "SCHEMA", "stage_key", "workload_key", "config_key", "Record", "stage_entries", "TuningLog", "read_log",
    "measured", "relative_to", "confirmed_choice", "holdout_veto", "MARGIN", "TuningDatabase", "tuning_log",
    "active_database", "tuned", "Tuned",
]

SCHEMA = 1
"""The record schema version this polyad writes and reads."""

_KEY_CHARS = 20  # hex digits of a key: 80 bits


def _version():
    import polyad  # late: this module is imported while polyad's __init__ runs

    return getattr(polyad, "__version__", "")


def _hash(doc):
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:_KEY_CHARS]


# ------------------------------------------------------------------------------------------------
# keys
# ------------------------------------------------------------------------------------------------
def _const_value(c):
    v = c.value
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        return float.hex(v)  # exact, and inf/nan spelled out
    if isinstance(v, int):
        return v
    return repr(v)


class _Inputs:
    """The tensors a stage reads, numbered in first-read order (reads of the stage itself apart)."""

    def __init__(self, self_op):
        self.self_op = self_op
        self.tensors, self._pos = [], {}

    def token(self, t):
        if t.op is self.self_op:
            return ["self", t.value_index]
        p = self._pos.get(id(t))
        if p is None:
            p = self._pos[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return ["in", p]


class _Writer:
    """The canonical form of expressions: a node list (children first, shared nodes once) that names
    nothing the user named: variables by their role, tensors by read position."""

    def __init__(self, inputs, var_tokens):
        self.inputs = inputs
        self.vars = dict(var_tokens)  # id(Var) -> token
        self.nodes, self.index = [], {}
        self._free = 0
        self._combiners = {}

    def roots(self, roots):
        for n in post_order(tuple(roots)):
            if id(n) not in self.index:
                self.index[id(n)] = len(self.nodes)
                self.nodes.append(self._entry(n))
        return [self.index[id(r)] for r in roots]

    def _entry(self, n):
        ix = self.index
        if isinstance(n, Var):
            tok = self.vars.get(id(n))
            if tok is None:
                tok = self.vars[id(n)] = ["free", self._free, n.dtype]
                self._free += 1
            return ["var", tok]
        if isinstance(n, Const):
            return ["const", n.dtype, _const_value(n)]
        if isinstance(n, Call):
            return ["call", n.op, n.dtype, [ix[id(a)] for a in n.args]]
        if isinstance(n, Load):
            return ["load", self.inputs.token(n.tensor), [ix[id(a)] for a in n.indices]]
        if isinstance(n, Reduce):
            return ["reduce", self._combiner(n.combiner), [ix[id(s)] for s in n.source],
                    [self.vars[id(a)] for a in n.axis], ix[id(n.condition)], n.value_index]
        # an expression kind this module does not know: its printed form (names and all) keeps keys apart
        return ["?", type(n).__name__, getattr(n, "dtype", None), str(n)]

    def _combiner(self, c):
        doc = self._combiners.get(id(c))
        if doc is None:
            toks = {id(v): ["lhs", i, v.dtype] for i, v in enumerate(c.lhs)}
            toks.update({id(v): ["rhs", i, v.dtype] for i, v in enumerate(c.rhs)})
            w = _Writer(self.inputs, toks)
            res = w.roots(c.result)
            ident = w.roots(c.identity)
            doc = self._combiners[id(c)] = {"nodes": w.nodes, "result": res, "identity": ident}
        return doc


def _axis_tokens(axes, role):
    return {id(a): [role, d] for d, a in enumerate(axes)}


def _axes_doc(axes):
    return [[int(a.lo), int(a.extent), a.dtype] for a in axes]


def _canonical_domain(domain):
    """The isl set with its tuple and dimensions renamed S[v0, v1, ...]: names out, structure in."""
    try:
        import islpy as isl

        d = domain.set_tuple_name("S")
        for i in range(d.dim(isl.dim_type.set)):
            d = d.set_dim_name(isl.dim_type.set, i, f"v{i}")
        return str(d)
    except Exception:  # noqa: BLE001 - not an isl set we can rename: its own text (names and all) is still exact
        return "raw:" + str(domain)


def _stage_doc(op):
    """(canonical document, input tensors in read order) of one stage."""
    inputs = _Inputs(op)
    if hasattr(op, "body"):  # ComputeOp
        body = tuple(op.body)
        toks = _axis_tokens(op.axis, "axis")
        red = ()
        if body and isinstance(body[0], Reduce):
            red = tuple(body[0].axis)
            toks.update(_axis_tokens(red, "raxis"))
        w = _Writer(inputs, toks)
        roots = w.roots(body)
        doc = {"kind": "compute", "shape": list(op.shape), "dtypes": [b.dtype for b in body],
               "axes": _axes_doc(op.axis), "reduce_axes": _axes_doc(red), "nodes": w.nodes, "body": roots}
    elif hasattr(op, "statements"):  # poly.stage.PolyOp: statements over isl domains
        stmts = []
        for st in op.statements:
            w = _Writer(inputs, _axis_tokens(st.vars, "v"))
            roots = w.roots(tuple(st.values))
            comb = w._combiner(st.combiner) if st.combiner is not None else None
            stmts.append({"n_out": st.n_out, "vars": _axes_doc(st.vars), "domain": _canonical_domain(st.domain),
                          "nodes": w.nodes, "values": roots, "combiner": comb, "accumulate": bool(st.accumulate)})
        doc = {"kind": "poly", "shape": list(op.shape), "dtypes": [op.output_dtype(i) for i in range(op.num_outputs)],
               "statements": stmts}
    else:
        raise PolyadError(
            f"stage {getattr(op, 'name', op)!r}: a {type(op).__name__} has no stage key "
            "(only computes and poly stages are stages)"
        )
    doc["inputs"] = [[list(t.shape), t.dtype] for t in inputs.tensors]
    return doc, inputs.tensors


@op_memo
def _stage_key_and_inputs(op):
    doc, ins = _stage_doc(op)
    return _hash(doc), tuple(ins)


def stage_key(op):
    """A structural hash of one stage: equal stages of differently named graphs share it.

    The key covers the stage's shape and output dtypes, its body (operations, constants, index
    expressions, reductions and their axes' ranges) and each tensor it reads, by shape, dtype and
    the order in which the body first reads it.  It leaves out every name (the stage's, its axes',
    its inputs') and the op's tag and attrs.  A poly stage (``op.statements``) is keyed by its
    statements: domains with their dimensions renamed, values, combiners and accumulation.

    :param op: the stage: a ``ComputeOp`` (``tensor.op``) or a poly stage, as the prepared graph has it.
    :returns: 20 hex digits of a SHA-256.
    :raises PolyadError: when ``op`` is neither (a placeholder is not a stage).
    """
    return _stage_key_and_inputs(op)[0]


def workload_key(outputs, inputs):
    """A structural hash of a whole graph: what a tuning record was measured for.

    The graph is every stage ``outputs`` reach (not through ``inputs``, which may be computed tensors
    fed as data), in dependency order; each stage counts by its :func:`stage_key` and where each
    tensor it reads comes from (which input, or which earlier stage's which output); then which
    stages' outputs are the outputs, and the inputs' shapes and dtypes.  Names do not count, nor does the
    order of ``inputs``: an input counts by where the graph first reads it (the inputs nothing reads, by shape
    and dtype).  The schedule does not depend on it, and ``polyad tune FILE.py:FUNC`` and ``pa.show`` take
    the inputs in the order the graph reaches them, where a build is given ``wrt + [H]``: the build missed the
    log's whole schedule.

    :param outputs: the output tensor, or a list of them, as given to ``pa.build``.
    :param inputs: the input tensors, in ``pa.build``'s order.
    :returns: 20 hex digits of a SHA-256.
    :raises PolyadError: when ``outputs`` or ``inputs`` is not a tensor or a list of tensors.
    """
    return _workload_key(tuple(as_tensor_list(outputs, "outputs")), tuple(as_tensor_list(inputs, "inputs")))


@graph_memo(32)  # a warm build with a tuning log keys its graph again (chain's 400 stages: 4 ms a build)
def _workload_key(outputs, inputs):
    given = {id(t): t for t in inputs}
    in_pos, pos, stages = {}, {}, []  # in_pos: an input's number, in the order the graph first reads it

    def ref(t):
        if id(t) in given:
            if id(t) not in in_pos:
                in_pos[id(t)] = len(in_pos)
            return ["in", in_pos[id(t)]]
        if id(t.op) in pos:
            return ["stage", pos[id(t.op)], t.value_index]
        return ["unfed", list(t.shape), t.dtype]  # a placeholder missing from inputs

    for op in walk_ops(outputs, inputs):
        if isinstance(op, PlaceholderOp):
            continue
        key, reads = _stage_key_and_inputs(op)
        stages.append([key, [ref(t) for t in reads]])
        pos[id(op)] = len(stages) - 1
    outs = [ref(t) for t in outputs]
    read = sorted(given.values(), key=lambda t: in_pos.get(id(t), len(in_pos)))
    unread = sorted([list(t.shape), t.dtype] for t in read[len(in_pos):])
    doc = {"inputs": [[list(t.shape), t.dtype] for t in read[:len(in_pos)]] + unread, "stages": stages,
           "outputs": outs}
    return _hash(doc)


def config_key(schedule):
    """The hash of a schedule's decisions: two schedules that build the same kernels share it.

    Its ``name`` and ``notes`` do not count (the auto-scheduler and a search that reach the same
    decisions measured the same configuration).

    :param schedule: a :class:`Schedule` or its ``to_dict()``.
    :returns: 20 hex digits of a SHA-256.
    :raises ScheduleError: when ``schedule`` is neither.
    """
    if isinstance(schedule, Schedule):
        data = schedule.to_dict()
    elif isinstance(schedule, dict):
        data = dict(schedule)
    else:
        raise ScheduleError(f"config_key: expected a Schedule or its dict, got {type(schedule).__name__}")
    data.pop("name", None)
    data.pop("notes", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:_KEY_CHARS]


# ------------------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------------------
_FIELDS = ("schema", "polyad", "workload", "name", "device", "config", "trial", "candidate", "schedule", "stages",
           "time", "times", "error", "timestamp")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_seconds(v):
    return _is_num(v) and v >= 0


def _check_record(r, where):
    """The reason ``r`` (a schema-1 Record) is malformed, raised as TuningLogError."""

    def bad(msg):
        raise TuningLogError(f"{where}: {msg}")

    for f in ("polyad", "workload", "name", "device", "config", "candidate"):
        if not isinstance(getattr(r, f), str):
            bad(f"{f!r} must be a string, got {getattr(r, f)!r}")
    if not _is_int(r.trial) or r.trial < 0:
        bad(f"'trial' must be a non-negative integer, got {r.trial!r}")
    if not isinstance(r.schedule, dict):
        bad(f"'schedule' must be a schedule object, got {type(r.schedule).__name__}")
    if r.time is not None and not _is_seconds(r.time):
        bad(f"'time' must be seconds (a finite number >= 0) or null, got {r.time!r}")
    if not isinstance(r.times, tuple) or not all(_is_seconds(t) for t in r.times):
        bad(f"'times' must be a list of seconds, got {r.times!r}")
    if not isinstance(r.ref_times, tuple) or not all(_is_seconds(t) for t in r.ref_times):
        bad(f"'ref_times' must be a list of seconds, got {r.ref_times!r}")
    if r.error is not None and not isinstance(r.error, str):
        bad(f"'error' must be a message or null, got {r.error!r}")
    if not _is_num(r.timestamp):
        bad(f"'timestamp' must be a number, got {r.timestamp!r}")
    if not isinstance(r.stages, dict):
        bad(f"'stages' must be an object of stage name -> entry, got {type(r.stages).__name__}")
    current = r.polyad == _version()
    for name, e in r.stages.items():
        if not isinstance(e, dict) or set(e) != {"key", "schedule", "time"}:
            bad(f"stage {name!r}: an entry is {{'key', 'schedule', 'time'}}, got {e!r}")
        if not isinstance(e["key"], str):
            bad(f"stage {name!r}: 'key' must be a string, got {e['key']!r}")
        if not isinstance(e["schedule"], dict):
            bad(f"stage {name!r}: 'schedule' must be a stage schedule object, got {e['schedule']!r}")
        if e["time"] is not None and not _is_seconds(e["time"]):
            bad(f"stage {name!r}: 'time' must be seconds or null, got {e['time']!r}")
        if current:
            try:
                StageSchedule.from_dict(e["schedule"], f"stage {name!r}")
            except ScheduleError as ex:
                bad(str(ex))
    if current:  # another version's schedule vocabulary may differ: only this one's is checked
        try:
            Schedule.from_dict(r.schedule)
        except ScheduleError as ex:
            bad(f"'schedule': {ex}")


@dataclass(frozen=True)
class Record:
    """One measured schedule: a line of a tuning log (see the module docstring for the JSON form).

    Records of schema :data:`SCHEMA` are checked field by field on construction; a record of another
    schema version is kept as read (``raw``), with only the fields it spells as this schema does.

    :param workload: :func:`workload_key` of the graph.
    :param device: the device key.
    :param config: :func:`config_key` of ``schedule``.
    :param schedule: the whole schedule, as ``Schedule.to_dict()`` gives it.
    :param trial: the trial number in its search (an int >= 0).
    :param candidate: where the schedule came from (``"auto"``, ``"evolve"``, ...).
    :param name: a human name of the workload, or ``""``.
    :param stages: stage name -> ``{"key": stage key, "schedule": StageSchedule.to_dict(), "time": seconds or
        None}``, for the stages of the prepared graph.
    :param time: the median of ``times``, in seconds; None when it was not measured.
    :param times: every measurement of the whole build, in seconds.
    :param error: None, or why the schedule did not build or run.
    :param timestamp: when it was measured (``time.time()``).
    :param ref_times: the auto schedule's runs timed beside ``times``, in seconds, or () (optional in the file).
    :param polyad: the polyad version that measured it.
    :param schema: the record schema version.
    :param source: the log file it was read from ("" when made here; not written).
    :param line: its line number there (0 when made here; not written).
    :param text: the line as read there ("" when made here; not written, not compared).
    :param raw: the JSON object as read, for a record of another schema version (None otherwise; not compared).
    :raises TuningLogError: when a field of a schema-1 record has the wrong type or range.
    """

    workload: str
    device: str
    config: str
    schedule: dict
    trial: int = 0
    candidate: str = ""
    name: str = ""
    stages: dict = field(default_factory=dict)
    time: float = None
    times: tuple = ()
    error: str = None
    timestamp: float = 0.0
    ref_times: tuple = ()
    polyad: str = field(default_factory=_version)
    schema: int = SCHEMA
    source: str = field(default="", compare=False, repr=False)
    line: int = field(default=0, compare=False, repr=False)
    text: str = field(default="", compare=False, repr=False)
    raw: dict = field(default=None, compare=False, repr=False)

    __hash__ = object.__hash__

    def __post_init__(self):
        for f in ("times", "ref_times"):
            if isinstance(getattr(self, f), list):
                object.__setattr__(self, f, tuple(getattr(self, f)))
        if isinstance(self.time, int) and not isinstance(self.time, bool):
            object.__setattr__(self, "time", float(self.time))
        if self.schema == SCHEMA:
            _check_record(self, f"{self.source}:{self.line}" if self.source else "tuning record")

    # -- making one ------------------------------------------------------------------------------
    @classmethod
    def of(cls, schedule, workload, device, trial=0, candidate="", name="", stages=None, times=(), error=None,
           ref_times=()):
        """A new record of a measurement: its config key, median time, version and timestamp filled in.

        :param schedule: the :class:`Schedule` measured (or its dict).
        :param workload: :func:`workload_key` of the graph.
        :param device: the device key.
        :param trial: the trial number.
        :param candidate: where the schedule came from.
        :param name: a human name of the workload.
        :param stages: stage name -> entry, as :func:`stage_entries` makes them (or ``(key, StageSchedule,
            seconds)`` tuples), or None.
        :param times: the measurements of the whole build, in seconds (empty when it failed).
        :param error: None, or why it failed (the time is then null).
        :param ref_times: the auto schedule's runs timed beside ``times`` (seconds), or ().
        :returns: the :class:`Record`.
        :raises TuningLogError: when a field has the wrong type.
        :raises ScheduleError: when ``schedule`` is not a schedule.
        """
        data = schedule.to_dict() if isinstance(schedule, Schedule) else schedule
        if not isinstance(data, dict):
            raise ScheduleError(f"Record.of: expected a Schedule, got {type(schedule).__name__}")
        entries = {}
        for n, e in (stages or {}).items():
            if isinstance(e, tuple):
                key, ss, t = e
                e = {"key": key, "schedule": ss.to_dict() if isinstance(ss, StageSchedule) else ss, "time": t}
            entries[n] = e
        times = tuple(float(t) for t in times)
        median = float(statistics.median(times)) if times and error is None else None
        return cls(workload=workload, device=device, config=config_key(data), schedule=data, trial=trial,
                   candidate=candidate, name=name, stages=entries, time=median, times=times,
                   error=None if error is None else str(error), timestamp=_time.time(),
                   ref_times=tuple(float(t) for t in ref_times))

    # -- JSON ------------------------------------------------------------------------------------
    def to_dict(self):
        """The record as plain data, in the schema's field order.

        :returns: a dict (the object as read, for a record of another schema version).
        """
        if self.raw is not None:
            return dict(self.raw)
        d = {
            "schema": self.schema, "polyad": self.polyad, "workload": self.workload, "name": self.name,
            "device": self.device, "config": self.config, "trial": self.trial, "candidate": self.candidate,
            "schedule": self.schedule, "stages": self.stages, "time": self.time, "times": list(self.times),
            "error": self.error, "timestamp": self.timestamp,
        }
        if self.ref_times:
            d["ref_times"] = list(self.ref_times)
        return d

    def to_json(self):
        """The record as one line of JSON (no newline).

        :returns: the text.
        """
        return json.dumps(self.to_dict(), separators=(", ", ": "), allow_nan=False)

    @classmethod
    def from_dict(cls, data, where="tuning record"):
        """The record of a JSON object read from a log.

        A record of another schema version is kept (its fields as far as they read, ``raw`` the
        object), to be flagged by :attr:`stale`; one of this schema must have every field, each of
        its type (fields it does not know are dropped).

        :param data: the parsed JSON object.
        :param where: what to name in errors (``"log.jsonl:12"``).
        :returns: the :class:`Record`.
        :raises TuningLogError: when ``data`` is not an object, has no integer ``schema``, or (schema
            :data:`SCHEMA`) lacks a field or has one of the wrong type.
        """
        if not isinstance(data, dict):
            raise TuningLogError(f"{where}: a record is a JSON object, got {type(data).__name__}")
        schema = data.get("schema")
        if not _is_int(schema):
            raise TuningLogError(f"{where}: not a polyad tuning record (no integer 'schema' field)")
        return cls._parse(data, where, "", 0)

    @classmethod
    def _parse(cls, data, where, src, line, text=""):
        schema = data["schema"]
        if schema != SCHEMA:
            def get(k, ok, default):
                v = data.get(k, default)
                return v if ok(v) else default

            return cls(
                workload=get("workload", lambda v: isinstance(v, str), ""),
                device=get("device", lambda v: isinstance(v, str), ""),
                config=get("config", lambda v: isinstance(v, str), ""),
                schedule=get("schedule", lambda v: isinstance(v, dict), {}),
                trial=get("trial", _is_int, 0),
                candidate=get("candidate", lambda v: isinstance(v, str), ""),
                name=get("name", lambda v: isinstance(v, str), ""),
                polyad=get("polyad", lambda v: isinstance(v, str), ""),
                schema=schema, source=src, line=line, text=text, raw=dict(data),
            )
        missing = [f for f in _FIELDS if f not in data]
        if missing:
            raise TuningLogError(f"{where}: the record lacks the fields {missing}")
        if not isinstance(data["times"], list):
            raise TuningLogError(f"{where}: 'times' must be a list of seconds, got {data['times']!r}")
        kwargs = {f: data[f] for f in _FIELDS}
        kwargs["times"] = tuple(data["times"])
        if "ref_times" in data:  # optional: logs written before the tuner paired runs lack it
            if not isinstance(data["ref_times"], list):
                raise TuningLogError(f"{where}: 'ref_times' must be a list of seconds, got {data['ref_times']!r}")
            kwargs["ref_times"] = tuple(data["ref_times"])
        try:
            return cls(**kwargs, source=src, line=line, text=text)
        except TuningLogError as e:
            own = f"{src}:{line}" if src else "tuning record"
            msg = str(e)
            raise TuningLogError(where + msg[len(own):] if msg.startswith(own) else f"{where}: {msg}") from None

    # -- reading one -----------------------------------------------------------------------------
    @property
    def stale(self):
        """Why the database ignores this record as of another format or version, or None.

        :returns: a reason (``"schema 2 (this polyad reads 1)"``, ``"polyad 0.0.9 (this is 0.1.0)"``) or None.
        """
        if self.schema != SCHEMA:
            return f"schema {self.schema} (this polyad reads {SCHEMA})"
        if self.polyad != _version():
            return f"polyad {self.polyad or '?'} (this is {_version()})"
        return None

    @property
    def relative(self):
        """The median of each of ``times`` over the auto run timed beside it (:func:`relative_to`), or None
        without ``ref_times``.

        :returns: a float or None.
        """
        return relative_to(self.times, self.ref_times)

    @property
    def usable(self):
        """Whether the database may apply it: current, error-free and timed.

        :returns: a bool.
        """
        return self.stale is None and self.error is None and self.time is not None

    def schedule_object(self):
        """The :class:`Schedule` the record measured.

        :returns: the schedule.
        :raises ScheduleError: when its schedule is not one this polyad reads.
        """
        return Schedule.from_dict(self.schedule)

    def where(self):
        """Where it came from, readable: ``"log.jsonl, trial 12, 1.31 ms (0.82 of auto's time beside it)"``.

        The ratio is what the tuner decides by (a raw time depends on the machine's mode in that minute), where the
        record has auto's runs beside its own.

        :returns: the text.
        """
        ratio = relative_to(self.times, self.ref_times)
        return _where(self, self.time) + ("" if ratio is None else f" ({ratio:.2f} of auto's time beside it)")


def _fmt_ms(seconds):
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def _where(rec, seconds):
    src = os.path.basename(rec.source) if rec.source else "a record"
    t = "untimed" if seconds is None else _fmt_ms(seconds)
    return f"{src}, trial {rec.trial}, {t}"


def stage_entries(ops, schedule, times=None):
    """The ``stages`` of a record: per stage of the prepared graph, its key, schedule and time.

    :param ops: the stages (``ComputeOp``/poly stages) of the graph as built: after inline, rfactor and pad;
        placeholders are skipped.
    :param schedule: the :class:`Schedule` built (each stage's entry is ``schedule.for_stage(name)``).
    :param times: stage name -> seconds of its kernel(s) alone, or None.
    :returns: a dict of stage name -> ``{"key", "schedule", "time"}``.
    :raises PolyadError: when an op is neither a compute nor a poly stage.
    """
    times = times or {}
    out = {}
    for op in ops:
        if isinstance(op, PlaceholderOp):
            continue
        t = times.get(op.name)
        out[op.name] = {"key": stage_key(op), "schedule": schedule.for_stage(op.name).to_dict(),
                        "time": None if t is None else float(t)}
    return out


# ------------------------------------------------------------------------------------------------
# the log file
# ------------------------------------------------------------------------------------------------
try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: appends are still single writes
    fcntl = None


class TuningLog:
    """A tuning log opened for appending: one record per line, each flushed to disk as it is written.

    Lines are only ever appended, each with one ``write``, so a crash tears at most the line being
    written; a log whose last line is torn (no newline) gets the next record on a fresh line.  Usable
    as a context manager (``with TuningLog(path) as log: log.append(record)``).  Processes appending
    to one log take turns (an advisory ``flock``).

    :param path: the log file; created (with its folder) when missing.
    :raises TuningLogError: when the file cannot be opened for appending.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            folder = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(folder, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise TuningLogError(f"tuning log {self.path!r} cannot be opened for appending: {e}") from None

    def append(self, record):
        """Write one record as a line, then flush it to disk (``fsync``).

        :param record: the :class:`Record`.
        :returns: None.
        :raises TuningLogError: when ``record`` is not a Record, the log is closed, or the write fails.
        """
        if not isinstance(record, Record):
            raise TuningLogError(f"tuning log {self.path!r}: append takes a Record, got {type(record).__name__}")
        if self._fd is None:
            raise TuningLogError(f"tuning log {self.path!r} is closed")
        data = (record.to_json() + "\n").encode()
        fd = self._fd
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # the last line was torn: this record starts a line of its own
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as e:
            raise TuningLogError(f"tuning log {self.path!r}: writing a record failed: {e}") from None

    def close(self):
        """Close the file (again: nothing).

        :returns: None.
        """
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def closed(self):
        """Whether :meth:`close` was called.

        :returns: a bool.
        """
        return self._fd is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self):
        return f"TuningLog({self.path!r}{', closed' if self.closed else ''})"


def _unfinished(text):
    """Whether ``text`` is an object that never closes: the prefix a crash in the middle of a write leaves."""
    s = text.strip()
    if not s.startswith("{"):
        return False
    depth, in_str, esc = 0, False, False
    for ch in s:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0:
                return False  # it closed: whatever is wrong with it, it is not cut short
    return True


def read_log(path, strict=True):
    """The records of a tuning log, in file order.

    * A last line without its newline that does not parse is the torn end of an interrupted write:
      skipped with a ``RuntimeWarning`` naming the file.  So is a line anywhere that is an object cut
      short (its braces never close): a log resumed after a crash has one in the middle.
    * Any other bad line (not JSON, not a record, a field missing or of the wrong type) raises
      :class:`TuningLogError` naming the file and the line, or, with ``strict=False``, is skipped
      with a ``RuntimeWarning`` saying so.
    * Blank lines are skipped.  Records of another schema or polyad version are returned, flagged by
      :attr:`Record.stale`.

    :param path: the log file.
    :param strict: raise on a corrupt line (True) or skip it with a warning (False).
    :returns: a list of :class:`Record` (each with its ``source`` and ``line``).
    :raises TuningLogError: when the file is missing or unreadable, or (``strict``) a line is corrupt.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise TuningLogError(f"tuning log {path!r} does not exist") from None
    except OSError as e:
        raise TuningLogError(f"tuning log {path!r} cannot be read: {e}") from None
    lines = data.split(b"\n")
    ends_cleanly = lines[-1] == b""
    if ends_cleanly:
        lines.pop()
    out = []
    for i, raw in enumerate(lines):
        lineno = i + 1
        last_unterminated = not ends_cleanly and i == len(lines) - 1
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            text, problem = None, f"not UTF-8 text ({e})"
        if text is not None:
            try:
                doc = json.loads(text)
                if not isinstance(doc, dict) or not _is_int(doc.get("schema")):
                    Record.from_dict(doc, where)  # raises, saying what it is not
                out.append(Record._parse(doc, where, path, lineno, text))
                continue
            except json.JSONDecodeError as e:
                problem = f"not JSON ({e.msg} at column {e.colno})"
            except RecursionError:  # a line of 100000 nested brackets: not a record, and not a crash
                problem = "nested deeper than any record"
            except TuningLogError as e:
                problem = str(e)[len(where) + 2:] if str(e).startswith(where) else str(e)
        torn_text = raw.decode("utf-8", errors="replace")
        if last_unterminated or _unfinished(torn_text):
            warnings.warn(f"tuning log {path!r}, line {lineno}: a torn record (the write was interrupted) is skipped",
                          RuntimeWarning, stacklevel=2)
            continue
        msg = f"tuning log {path!r}, line {lineno}: {problem}"
        if strict:
            raise TuningLogError(msg)
        warnings.warn(msg + "; the line is skipped", RuntimeWarning, stacklevel=2)
    return out


def relative_to(times, ref_times):
    """A time that does not drift with the machine: the median of each run over the auto run timed beside it
    (``times[i] / ref_times[i]``).  None when either is missing, or a reference took no time.

    Not the median over the median: this VM's speed switches between two modes about 2x apart from one run to
    the next, and a candidate's runs can fall mostly in the fast mode while the auto runs beside them fall
    mostly in the slow one.  One of dense's search trials read 0.47x auto that way, its runs' median ratio 0.84.
    In the ninth session's logs, the candidates the end check measured had read 18-46% faster in the search
    than in the check on 8 of 12 workloads by the median over the median, and between 8% faster and 1% slower
    by the runs' ratios.  Counts that do not pair (nothing in this polyad writes them) give the median over
    the median.

    :param times: a candidate's timed runs, seconds.
    :param ref_times: the reference runs, seconds, ``ref_times[i]`` timed beside ``times[i]``.
    :returns: a float or None.
    """
    if not times or not ref_times or min(ref_times) <= 0:
        return None
    if len(times) == len(ref_times):
        return float(statistics.median(t / r for t, r in zip(times, ref_times)))
    return float(statistics.median(times) / statistics.median(ref_times))


#: a tuned schedule replaces auto only where the tuner's end check measured it at most this fraction of auto's
#: time.  Modules of one program read up to 3% apart (once 20-34%), and one estimate of 50 paired runs moves
#: 3-6% from the next: a smaller gain than this is as likely a loss, and "never slower than auto" is worth more
#: than it.
MARGIN = 0.98


def confirmed_choice(scores, auto):
    """What the tuner's end check chooses, and a tuning database after it: the configuration of lowest score if
    it is at most :data:`MARGIN` times auto's, else auto.

    :param scores: configuration -> its median in the check (the ratio to the auto runs timed beside it, or
        seconds), every configuration measured alike; a configuration that failed is left out.
    :param auto: the auto schedule's configuration (a key of ``scores`` when auto was measured).
    :returns: a key of ``scores``, or ``auto``.
    """
    if not scores:
        return auto
    best = min(scores, key=lambda c: (scores[c], c != auto))
    if auto not in scores or best == auto:
        return best
    return best if scores[best] <= MARGIN * scores[auto] else auto


def holdout_veto(chosen, auto):
    """Whether the tuner's held-out rounds (``candidate="holdout"``: its end check's choice and auto, measured
    again after the check) turn the choice down for auto.  The check chose the lowest of its scores, and that
    one reads low by the choosing (eight tunings' picks read 1.025x their reported time in fresh builds, up to
    1.06x); the held-out rounds do not, and a choice that is not faster than auto in them is not kept.

    :param chosen: the choice's score in the held-out rounds (as :func:`confirmed_choice` takes scores).
    :param auto: auto's score there.
    :returns: True when auto is to be the result.
    """
    return not chosen < auto


def _held_out_veto(held, chosen, auto):
    """:func:`holdout_veto` on a workload's held-out records (``held``: config -> its records), or False where
    either configuration has none: each scores its median ratio to the auto runs beside it (its median time where
    a record was not paired), as the check's records do."""
    if chosen not in held or auto not in held:
        return False
    paired = all(r.relative is not None for r in held[chosen] + held[auto])
    return holdout_veto(*(_score(held[k], paired)[0] for k in (chosen, auto)))


def _score(records, paired):
    """``(median, its record)`` of some records of one configuration: by the ratio to the auto runs beside each
    where ``paired``, else by time (the lower middle of an even count)."""
    return _median([(r.relative if paired else r.time, r) for r in records])


def measured(records, workload, device):
    """The configurations already measured for a workload on a device: what a resumed search skips.

    Failed measurements count (a schedule that did not build will not the next time either);
    records of another schema or polyad version do not (their times are not this polyad's).

    :param records: :class:`Record`\\ s (e.g. :func:`read_log`'s).
    :param workload: the :func:`workload_key`.
    :param device: the device key.
    :returns: a set of :func:`config_key` strings.
    """
    return {r.config for r in records if r.workload == workload and r.device == device and r.stale is None}


# ------------------------------------------------------------------------------------------------
# the database
# ------------------------------------------------------------------------------------------------
def _median(runs):
    """The (time, record) of the median run (the lower middle of an even count)."""
    runs = sorted(runs, key=lambda tr: tr[0])
    return runs[(len(runs) - 1) // 2]


def _last_checks(records, auto):
    """The confirm records (``(workload, device, config) -> [(time, record)]``) and the held-out ones
    (``(workload, device) -> {config: [records]}``) of each workload's latest end check, in log order: what the
    last ``pa.tune`` reported.

    A check is the confirm records in a row (and the held-out ones after them) since the workload's previous
    search records.  A resumed run's check scored its candidates against its own auto runs; pooled with an
    earlier run's, they chose a configuration neither run had (the earlier run's auto runs lowered auto's score).
    A check that measured no candidate but auto (Ctrl-C in its first round) is no check: the search's fastest
    stands, as the interrupted ``pa.tune`` reported it; it made the log apply auto."""
    runs = {}  # (workload, device) -> the records of its latest check, and whether the last record was one
    for r in records:
        wd = (r.workload, r.device)
        cur = runs.setdefault(wd, [[], False])
        if r.candidate in ("confirm", "holdout"):
            if not cur[1]:
                cur[0] = []  # a new check
            cur[0].append(r)
            cur[1] = True
        else:
            cur[1] = False
    confirmed, held = {}, {}
    for wd, (recs, _) in runs.items():
        if not any(r.candidate == "confirm" and r.config != auto.get(wd) for r in recs):
            continue
        for r in recs:
            if r.candidate == "confirm":
                confirmed.setdefault(wd + (r.config,), []).append((r.time, r))
            else:
                held.setdefault(wd, {}).setdefault(r.config, []).append(r)
    return confirmed, held


class TuningDatabase:
    """The best measured schedules of some records, by workload and device, and by stage and device.

    Records with an error or no time, and records of another schema or polyad version, are left
    out (``ignored`` counts them); the device is compared at query time.

    :param records: the :class:`Record`\\ s.
    :param sources: the log files they were read from (for ``repr`` and :meth:`digest`), or ().
    """

    def __init__(self, records=(), sources=()):
        records = list(records)
        self.sources = tuple(os.fspath(p) for p in sources)
        self.records = tuple(r for r in records if r.usable)
        # a choice that failed in the tuner's held-out rounds gave way to auto there (a flaky build is no result)
        failed = {(r.workload, r.device, r.config) for r in records
                  if r.candidate == "holdout" and r.error is not None and r.stale is None}
        self.ignored = len(records) - len(self.records)
        # a configuration measured several times (the tuner's side-by-side check re-measures the best and
        # auto) counts with its median, so that one lucky run does not pick it
        configs, stages = {}, {}
        for r in self.records:
            configs.setdefault((r.workload, r.device, r.config), []).append((r.time, r))
            for name, e in r.stages.items():
                if e["time"] is not None:
                    sk = (e["key"], r.device, json.dumps(e["schedule"], sort_keys=True))
                    stages.setdefault(sk, []).append((e["time"], r))
        # the search's first trial is auto's (candidate "auto"): where the check decides, its rule does
        auto = {(r.workload, r.device): r.config for r in self.records if r.candidate == "auto"}
        confirmed, held = _last_checks(self.records, auto)
        # where the tuner checked its choice against auto side by side, that check decides
        checked = {(w, d) for w, d, _ in confirmed}
        configs = {k: v for k, v in configs.items() if (k[0], k[1]) not in checked}
        configs.update(confirmed)
        # a workload whose every record has the auto runs timed beside it ranks by the ratio to them: the
        # machine's speed drifts between measurements, the ratio does not
        paired = {}
        for (w, d, _), runs in configs.items():
            paired[(w, d)] = paired.get((w, d), True) and all(r.relative is not None for _, r in runs)
        medians = {}  # (workload, device) -> {config: (median, its record)}
        for (w, d, c), runs in configs.items():
            medians.setdefault((w, d), {})[c] = _score([r for _, r in runs], paired[(w, d)])
        self._best, self._stages = {}, {}
        for wd, meds in medians.items():
            if wd in checked:
                c = confirmed_choice({c: t for c, (t, _) in meds.items()}, auto.get(wd))
                h, a = held.get(wd, {}), auto.get(wd)
                vetoed = wd + (c,) in failed or _held_out_veto(h, c, a)
                if c != a and a in meds and wd + (a,) not in failed and vetoed:
                    c = a  # the tuner's held-out rounds turned its check's choice down
            else:
                c = min(meds, key=lambda c: meds[c][0])
            self._best[wd] = meds[c][1]
        for (key, d, ss), runs in stages.items():
            t, r = _median(runs)
            cur = self._stages.get((key, d))
            if cur is None or t < cur[0]:
                self._stages[(key, d)] = (t, json.loads(ss), r)
        self._digest = None

    @classmethod
    def from_logs(cls, paths, strict=False):
        """The database of one or several tuning logs.

        :param paths: a log file, or a list of them.
        :param strict: as :func:`read_log`'s: False skips corrupt lines with a warning.
        :returns: the :class:`TuningDatabase`.
        :raises TuningLogError: when a log is missing or unreadable, or (``strict``) has a corrupt line.
        """
        paths = _as_paths(paths)
        records = []
        for p in paths:
            records.extend(read_log(p, strict=strict))
        return cls(records, paths)

    def best_schedule(self, workload, device):
        """The fastest whole-schedule record of a workload on a device.

        :param workload: the :func:`workload_key`.
        :param device: the device key.
        :returns: ``(Schedule, Record)``, or None when no usable record matches.
        """
        r = self._best.get((workload, device))
        if r is None:
            return None
        return Schedule.from_dict(r.schedule), r

    def best_stage(self, key, device):
        """The fastest measured schedule of a stage on a device, from any record whose stage has that key.

        :param key: the :func:`stage_key`.
        :param device: the device key.
        :returns: ``(StageSchedule, where)`` with ``where`` like ``"log.jsonl, trial 12, 0.213 ms"``, or None.
        """
        hit = self._stages.get((key, device))
        if hit is None:
            return None
        t, ss, r = hit
        return StageSchedule.from_dict(ss), _where(r, t)

    def lookup_for(self, device):
        """A stage lookup for the auto-scheduler (``auto_schedule(..., lookup=...)``) on one device.

        :param device: the device key.
        :returns: a function ``op -> (StageSchedule, where) | None`` (memoised per op).
        """
        memo = {}

        def lookup(op):
            hit = memo.get(id(op))
            if hit is not None and hit[0] is op:
                return hit[1]
            try:
                key = stage_key(op)
            except PolyadError:
                found = None
            else:
                found = self.best_stage(key, device)
            memo[id(op)] = (op, found)  # the op is kept alive with it: ids stay unique
            return found

        return lookup

    def digest(self):
        """A short string that changes with the usable records (for cache keys).

        :returns: 16 hex digits.
        """
        if self._digest is None:
            h = hashlib.sha256()
            # a record read from a log is its line as read: writing 6,973 records again took 0.3 s
            for line in sorted(r.text or r.to_json() for r in self.records):
                h.update(line.encode())
                h.update(b"\n")
            self._digest = h.hexdigest()[:16]
        return self._digest

    def __len__(self):
        return len(self.records)

    def __repr__(self):
        src = ", ".join(os.path.basename(p) for p in self.sources) or "records"
        return f"<TuningDatabase {src}: {len(self.records)} records ({self.ignored} ignored)>"


def _as_paths(paths):
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, (str, bytes, os.PathLike)) for p in paths):
        raise TuningLogError(f"a tuning log is a path or a list of paths, got {paths!r}")
    out = tuple(os.fsdecode(os.fspath(p)) for p in paths)
    if not out:
        raise TuningLogError("no tuning log given")
    return out


# ------------------------------------------------------------------------------------------------
# the process's active database
# ------------------------------------------------------------------------------------------------
_LOADED = {}  # (abs paths, strict) -> (stamps, database)
_LOAD_LOCK = threading.Lock()


def _stamp(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TuningLogError(f"tuning log {path!r} does not exist") from None
    except OSError as e:
        raise TuningLogError(f"tuning log {path!r} cannot be read: {e}") from None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _load(paths, strict):
    """The database of ``paths``, read again when a file's mtime or size changed."""
    paths = tuple(os.path.abspath(p) for p in _as_paths(paths))
    stamps = tuple(_stamp(p) for p in paths)
    k = (paths, bool(strict))
    with _LOAD_LOCK:
        hit = _LOADED.get(k)
    if hit is not None and hit[0] == stamps:
        return hit[1]
    db = TuningDatabase.from_logs(paths, strict=strict)
    with _LOAD_LOCK:
        _LOADED[k] = (stamps, db)
    return db


@dataclass(frozen=True)
class _Active:
    paths: tuple
    strict: bool


_ACTIVE = contextvars.ContextVar("polyad_tuning_log", default=None)
_ENV = "POLYAD_TUNING_LOG"
_ENV_WARNED = set()


@contextlib.contextmanager
def tuning_log(path, strict=False):
    """``with pa.tuning_log("log.jsonl"):`` makes the log's database the active one here.

    Inside the block (this thread or asyncio context, and nested calls), :func:`active_database` is
    this log's database, read again whenever the file changes; it takes precedence over
    ``$POLYAD_TUNING_LOG``.  Blocks nest: the innermost wins.

    :param path: the log file, or a list of them.
    :param strict: as :func:`read_log`'s: False skips corrupt lines with a warning.
    :returns: a context manager whose ``as`` value is the :class:`TuningDatabase`.
    :raises TuningLogError: when a log is missing or unreadable, or (``strict``) has a corrupt line.
    """
    active = _Active(tuple(os.path.abspath(p) for p in _as_paths(path)), bool(strict))
    db = _load(active.paths, active.strict)
    token = _ACTIVE.set(active)
    try:
        yield db
    finally:
        _ACTIVE.reset(token)


def active_database():
    """The tuning database in effect: the innermost :func:`tuning_log` block's, else that of
    ``$POLYAD_TUNING_LOG`` (one path, or several separated by ``os.pathsep``), else None.

    Either is read again when its file's mtime or size changes.  An unusable ``$POLYAD_TUNING_LOG``
    (a missing file) is warned about once and ignored.

    :returns: a :class:`TuningDatabase`, or None.
    :raises TuningLogError: when the :func:`tuning_log` block's file went missing or unreadable.
    """
    active = _ACTIVE.get()
    if active is not None:
        return _load(active.paths, active.strict)
    env = os.environ.get(_ENV, "")
    paths = [p for p in env.split(os.pathsep) if p.strip()]
    if not paths:
        return None
    try:
        return _load(paths, False)
    except TuningLogError as e:
        if env not in _ENV_WARNED:
            _ENV_WARNED.add(env)
            warnings.warn(f"${_ENV} is ignored: {e}", RuntimeWarning, stacklevel=2)
        return None


@dataclass(frozen=True)
class Tuned:
    """``schedule=pa.tuned("log.jsonl")``: build with the best schedule a tuning log has for the workload
    and device.

    :param paths: the log files (a path or a sequence of them; kept as absolute paths).
    :param strict: as :func:`read_log`'s: False skips corrupt lines with a warning.
    :raises TuningLogError: when no path is given.
    """

    paths: tuple
    strict: bool = False

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(os.path.abspath(p) for p in _as_paths(self.paths)))
        object.__setattr__(self, "strict", bool(self.strict))

    def database(self):
        """The logs' database (cached; read again when a file changes).

        :returns: the :class:`TuningDatabase`.
        :raises TuningLogError: when a log is missing or unreadable, or (``strict``) has a corrupt line.
        """
        return _load(self.paths, self.strict)

    def to_json(self):
        """The value as JSON text (the paths, not the logs' contents: add ``database().digest()`` to a cache key).

        :returns: the text.
        """
        return json.dumps({"tuned": list(self.paths), "strict": self.strict}, sort_keys=True)

    def describe(self):
        """One line: which logs.

        :returns: the text.
        """
        return "the best records of " + ", ".join(self.paths)

    def __repr__(self):
        arg = repr(self.paths[0]) if len(self.paths) == 1 else repr(list(self.paths))
        return f"pa.tuned({arg}{', strict=True' if self.strict else ''})"


def tuned(log, strict=False):
    """The ``schedule=`` value that applies a tuning log: ``pa.build(outs, ins, schedule=pa.tuned("log.jsonl"))``.

    The log is read when the build asks for it (:meth:`Tuned.database`), not here.

    :param log: the log file, or a list of them.
    :param strict: as :func:`read_log`'s: False skips corrupt lines with a warning.
    :returns: a :class:`Tuned`.
    :raises TuningLogError: when no log is given.
    """
    return Tuned(log, strict)
