"""The auto-tuner: ``pa.tune`` measures schedules on the device and logs every measurement.

It searches the space the auto-scheduler chooses from (:mod:`polyad.schedule.space`: graph decisions
and per-stage candidates, :mod:`polyad.tuner.configs`) with a model-guided evolutionary search
(:mod:`polyad.tuner.search`), measures candidates in batches (:mod:`polyad.tuner.measure`: a pool of
compiler processes, then one candidate at a time on the device, every output checked against the auto
schedule's), and appends one JSON line per measurement to a tuning log
(:mod:`polyad.schedule.tuning`).  The auto schedule is always candidate 0: the tuner never reports a
slower one.  ``workers=`` a ``distributed.Client`` measures on a Dask cluster instead
(:mod:`polyad.tuner.cluster`).

This layer sits above :mod:`polyad.pipeline` (it builds and runs); the schedule layer only reads the
logs it writes.
"""

import contextlib
import math
import numbers
import time
import warnings
from dataclasses import dataclass, field, replace


from ..errors import PolyadError
from ..schedule import Schedule

__all__ = ["TuneResult", "tune"]

# candidates the end check measures again beside auto: the search's fastest of hundreds of noisy times is
# partly luck (softmax's best read 0.94x auto in its search and 1.12x in another process)
CONFIRM_TOP = 3
# candidates measured once more before the end check, the check then taking its CONFIRM_TOP by the mean of their two
# readings: the search's fastest three are often its luckiest (conv2d_3x3's read 1.00-1.12x auto in the check)
RACE_TOP = 8
# candidates the race and the check also take by the sum of their stages' median times (each stage schedule's median
# over every trial that ran it): a config's one reading is one moment, its stages' medians pool the dozens of
# configs that share each stage.  In the twenty-first session's logs, against the median of the race's, the check's
# and the held-out rounds' readings of the ten configs the race measured, that sum ranked them with Spearman 0.80-0.92
# on conv2d_3x3, conv2d_5x5_s3, lenet_step and dense_big, where the search's readings ranked them -0.08-0.47; on
# dense, chain and avg_pool, one to three stages, it ranked worse (0.13, -0.10, 0.05 against 0.60, 0.37, 0.05)
STAGES_TOP = 2
# the least a candidate's compile is given once the time budget is nearly spent: lenet_step's candidates compile in
# 1-3 s a kernel, and one that needs longer is lost, not mismeasured
MIN_TIMEOUT = 10.0


@dataclass
class TuneResult:
    """What ``pa.tune`` found.

    :param schedule: the fastest measured :class:`~polyad.schedule.Schedule` (the auto schedule when nothing beat it).
    :param time: its seconds per run: ``auto_time`` times its median ratio to the auto runs timed beside it (the
        end check's, else the search's), so that the speed-up is a side-by-side figure.
    :param auto_time: the auto schedule's median, measured in the same run.
    :param trials: measurements made in this run (the log's earlier ones not counted).
    :param stages: per stage of the chosen schedule: ``{"auto": StageSchedule, "auto_time": s, "tuned":
        StageSchedule, "tuned_time": s}`` (times from the kernels' profile; None where a stage exists on one side
        only).
    :param history: ``(trial, best seconds so far)`` after each measurement.
    :param log: the tuning log's path, or None.
    :param interrupted: True when Ctrl-C stopped the search (the log holds every measurement made).
    :param wall: seconds by activity: ``codegen`` (generating the candidates' programs, in this process or a Dask
        worker's), ``compile`` (in the compiler processes), ``measure``, ``search`` (the rest) and ``total``.
    :param errors: trials that failed (build errors, wrong results, timeouts).
    :param workload: the workload key the records carry.
    :param device: the device key the best time was measured on.
    :param graph: the chosen schedule's graph decisions as moves from auto's (``"no pad_reads of X + materialise
        Y"``), ``"auto"`` where they are auto's.
    :param variants: the graph variants this run measured a configuration of (auto's included).
    """

    schedule: Schedule
    time: float
    auto_time: float
    trials: int
    stages: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    log: str = None
    interrupted: bool = False
    wall: dict = field(default_factory=dict)
    errors: int = 0
    workload: str = ""
    device: str = ""
    graph: str = "auto"
    variants: int = 1

    @property
    def speedup(self):
        """The auto schedule's time over the tuned one's (at least 1.0)."""
        return self.auto_time / self.time if self.time else 1.0

    def trials_to(self, share=0.9):
        """Trials needed to reach ``share`` of the search's final speed-up over auto (both as the search measured
        them, trial by trial).

        :param share: the share of the final speed-up, 0 to 1.
        :returns: the number of trials (0 without any).
        """
        if not self.history:
            return 0
        a0, last = self.history[0][1], self.history[-1][1]
        final = a0 / last - 1.0
        for n, best in self.history:
            if a0 / best - 1.0 >= share * final - 1e-12:
                return n
        return self.history[-1][0]

    def table(self):
        """Per stage, auto against tuned: one line each."""
        rows = [f"{'stage':32s} {'auto':>10s} {'tuned':>10s}  tuned schedule"]
        for name, r in sorted(self.stages.items()):
            a = "-" if r["auto_time"] is None else f"{r['auto_time'] * 1e3:.3f}ms"
            t = "-" if r["tuned_time"] is None else f"{r['tuned_time'] * 1e3:.3f}ms"
            rows.append(f"{name[:32]:32s} {a:>10s} {t:>10s}  {r['tuned'].describe() if r['tuned'] else '-'}")
        rows.append(f"{'total (one run, median)':32s} {self.auto_time * 1e3:9.3f}ms {self.time * 1e3:9.3f}ms  "
                    f"speed-up {self.speedup:.2f}x")
        return "\n".join(rows)

    def summary(self):
        w = self.wall
        # code generation is not counted: it is Python and isl (here or in the workers), what the share bounds
        busy = (w.get("compile", 0.0) + w.get("measure", 0.0)) / w["total"] if w.get("total") else 0.0
        return (f"{self.trials} trials ({self.errors} failed), best {self.time * 1e3:.3f} ms against auto "
                f"{self.auto_time * 1e3:.3f} ms: {self.speedup:.2f}x; {w.get('total', 0.0):.1f} s, "
                f"{100 * busy:.0f}% compiling and measuring"
                + (" (interrupted)" if self.interrupted else "")
                + f"\ngraph decisions: {self.graph} ({self.variants} graph variant{'s' if self.variants != 1 else ''} "
                  f"measured)")


def tune(outputs, inputs, *, trials=64, time_budget=None, log=None, device=None, workers=None, seed=0,
         resume=True, data=None, batch=None, policy="evolutionary", name="", progress=False, repeat=5,
         timeout=60.0, confirm=5, measurer=None):
    """Search schedules for a build of ``outputs`` on the device, measuring each.

    The auto schedule is measured first (candidate 0); every candidate's outputs are checked against its
    outputs on the same inputs (a mismatch is logged as an error and never chosen).  With ``log``, one
    JSON line per measurement is appended; ``resume=True`` reads the log first and never measures a
    configuration it holds again.  Ctrl-C stops the search: the log stays valid and the result holds the
    best so far (``interrupted``).  Apply the result with ``pa.build(..., schedule=result.schedule)`` or
    ``schedule=pa.tuned(log)``.

    :param outputs: a tensor or a list of tensors (as ``pa.build`` takes them).
    :param inputs: the build's inputs.
    :param trials: at most this many measurements (the auto schedule included).
    :param time_budget: stop after about this many seconds (None: no limit).
    :param log: the tuning log's path (JSON lines), or None.
    :param device: as ``pa.build`` takes it.
    :param workers: compiler processes at once (None: the machine's cores), or a ``distributed.Client``: build and
        measure on the cluster's workers.
    :param seed: the search's seed (a search on the same measurements is the same search).
    :param resume: reuse the log's measurements of this workload and device.
    :param data: arrays for ``inputs`` (None: reproducible random ones; 0s and 1s for integer inputs).
    :param batch: candidates compiled together per round (None: twice the workers, at least 4).
    :param policy: ``"evolutionary"`` (model-guided) or ``"random"``.
    :param name: a readable name the records carry (``"softmax"``).
    :param progress: show a progress bar (tqdm) with the trial count, the best time, the speed-up and the ETA.
    :param repeat: timed runs per candidate (the median counts).
    :param timeout: seconds a candidate's code generation (in the workers), compile or first run may take (with
        ``time_budget``, at most what is left of it, but never under ``MIN_TIMEOUT``).
    :param confirm: at the end, the search's ``RACE_TOP`` fastest, and its ``RACE_TOP`` fastest by the sum of
        their stages' median times over every trial that ran each stage schedule, are measured once more (logged as
        ``candidate="race"``); the ``CONFIRM_TOP`` fastest of them by the mean of their two readings, the
        ``STAGES_TOP`` fastest by their stages (not those the race read slower than auto) and the auto
        schedule are then measured again, each in a fresh module, this many rounds (default 5) in a rotating
        order (logged as ``candidate="confirm"``; a tuning database takes each configuration's median).  The one
        with the lowest median ratio to the auto runs beside it is chosen, if that is at most ``MARGIN``
        (0.98) times auto's own there; else auto is (0: take the search's figures, and race nothing).  The choice
        and auto are then measured as many rounds more (``candidate="holdout"``): the speed-up reported is that
        measurement's, not the check's lowest of three, and a choice that is not faster there gives way to auto.
    :param measurer: a :class:`~polyad.tuner.measure.Measurer` to use instead (tests: a fake device).
    :returns: a :class:`TuneResult`.
    :raises PolyadError: when ``outputs`` or ``inputs`` is malformed (as ``pa.build``), or ``policy`` is unknown.
    :raises TuningLogError: when ``log`` holds a corrupt line (not the torn last line of a crash).
    :raises BuildError: when even the auto schedule does not build or run.
    """
    import random

    from ..schedule.tuning import workload_key
    from ..te.tensor import as_tensor_list
    from .configs import ConfigSpace
    from .search import POLICIES

    if policy not in POLICIES:
        raise PolyadError(f"tune: unknown policy {policy!r} (known: {sorted(POLICIES)})")
    if not isinstance(trials, int) or trials < 1:
        raise PolyadError(f"tune: trials must be a positive integer, got {trials!r}")
    if time_budget is not None and (isinstance(time_budget, bool) or not isinstance(time_budget, numbers.Real)
                                    or math.isnan(time_budget)):
        raise PolyadError(f"tune: time_budget must be a number of seconds or None, got {time_budget!r}")
    if time_budget is not None and math.isinf(time_budget) and time_budget > 0:
        time_budget = None  # no limit (it overflowed the pacing's int())
    for arg, value, least in (("repeat", repeat, 1), ("confirm", confirm, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            # repeat=0 measured nothing: every time NaN, every record unusable
            raise PolyadError(f"tune: {arg} must be an integer >= {least}, got {value!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not 0 < timeout < math.inf:
        raise PolyadError(f"tune: timeout must be a positive, finite number of seconds, got {timeout!r}")
    start = time.perf_counter()
    outs_list = as_tensor_list(outputs, "tune outputs")
    ins_list = as_tensor_list(inputs, "tune inputs")
    if measurer is None:
        measurer = _measurer(outs_list, ins_list, device, workers, data, repeat, timeout)
    try:
        ctx = measurer.context()
        space = ConfigSpace(ctx.outputs, ctx.model, ctx.auto)
        wkey = ctx.workload or workload_key(ctx.outputs, ctx.inputs)
        session = _Session(space, measurer, wkey, name, log, resume)
        search = POLICIES[policy](space, random.Random(seed), ctx.model, stage_times=session.stage_times)
        n_batch = batch or max(4, 2 * getattr(measurer, "workers", 1))
        bar = _bar(progress, trials)
        pace = _Pace(first=max(1, getattr(measurer, "workers", 1)))
        try:
            session.run([space.auto_config()], search, bar)  # often a cache hit: not the search's pace
            bred = None  # the next round, bred while the last one built (a measurer that overlaps)
            while session.trials < trials and not measurer.nothing_to_tune:
                want, cap = min(n_batch, trials - session.trials), None
                if time_budget is not None:
                    left = time_budget - (time.perf_counter() - start)
                    if left <= 0:
                        break
                    want = pace.fit(want, left)
                    # a compile that hangs costs what is left of the budget, not the whole per-candidate timeout
                    cap = max(left, MIN_TIMEOUT) if left < timeout else None
                with pace(session):  # the round's breeding and model training count too
                    # bred in the last round, or now (none bred there: the last round's measurer does not overlap,
                    # the log held its configs, or it was to be the last)
                    configs = bred.result[:want] if bred is not None and bred.result else \
                        search.propose(want, session.seen)
                    if not configs:
                        break  # the space is exhausted
                    bred = _Breeding(search, min(n_batch, trials - session.trials - len(configs)), session.seen)
                    session.run(configs, search, bar, timeout=cap, meanwhile=bred)
                    bred = bred if bred.called else None
            if confirm > 0:
                session.race()
            session.confirm(confirm)
        except KeyboardInterrupt:
            session.interrupted = True
            warnings.warn("polyad tune: interrupted; the log holds every measurement made", RuntimeWarning,
                          stacklevel=2)
        finally:
            if bar is not None:
                bar.close()
            session.close()
        return session.result(time.perf_counter() - start)
    finally:
        measurer.close()


class _Breeding:
    """The search's next round, bred when called: a measurer that overlaps calls it while its workers compile this
    round, so that the breeding and the model's training (a sixth of a lenet_step tuning's wall time) run on the
    cores the compilers leave (on the 2-core VM, whose cores they fill, that saved 3-23% of the breeding's time).
    The round is bred from the trials before this one (a round behind: the same proposals whatever the timing),
    and knows this one's configs (``seen``) so as not to propose them again."""

    def __init__(self, search, n, seen):
        self.search, self.n, self.seen = search, n, seen
        self.called, self.result = False, []

    def __call__(self):
        if not self.called:
            self.called = True
            self.result = self.search.propose(self.n, self.seen) if self.n > 0 else []


class _Pace:
    """Seconds a trial of the search has taken so far, to size a round to the time left: the budget is checked
    between rounds, and a round is twice the workers (32 candidates on the lent GPU machine's 16 cores, where
    conv2d_3x3's tuning ran 20 s past a 40 s budget with auto's record alone).  Before any search round the
    pace is unknown, and the round is one candidate per worker: auto's trial often comes from the kernel cache
    (0.1 s there) and says nothing of what a candidate costs."""

    def __init__(self, first=1):
        self.seconds, self.trials, self.first = 0.0, 0, first

    @contextlib.contextmanager
    def __call__(self, session):
        t0, n0 = time.perf_counter(), session.trials
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0
            self.trials += session.trials - n0

    def fit(self, want, left):
        """At most ``want`` candidates, as many as ``left`` seconds hold at the pace so far (at least one)."""
        if self.trials == 0 or self.seconds <= 0:
            return min(want, self.first)
        return max(1, min(want, int(left / (self.seconds / self.trials))))


def _median_trial(trials):
    """The trial of the median time (the lower middle of an even count), or None."""
    return sorted(trials, key=lambda t: t.time)[(len(trials) - 1) // 2] if trials else None


def _bar(progress, total):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="trial", desc="tuning", dynamic_ncols=True)


def _measurer(outputs, inputs, device, workers, data, repeat, timeout):
    import os

    if workers is not None and not isinstance(workers, int):
        from .cluster import DaskMeasurer

        return DaskMeasurer(outputs, inputs, workers, device=device, data=data, repeat=repeat, timeout=timeout)
    from .measure import LocalMeasurer

    n = workers if workers is not None else (os.cpu_count() or 1)
    return LocalMeasurer(outputs, inputs, device=device, workers=n, data=data, repeat=repeat, timeout=timeout)


class _Session:
    """The measurements of one run: the log, the resume set, the best so far, the wall-time split."""

    def __init__(self, space, measurer, wkey, name, log, resume):
        from ..schedule.tuning import TuningLog, config_key, read_log
        from .search import StageTimes

        self.space, self.measurer, self.wkey, self.name = space, measurer, wkey, name
        self.config_key = config_key
        self.log_path = str(log) if log is not None else None
        self.logged = {}  # config key -> Record (this workload and device, from an earlier run)
        if log is not None and resume:
            import os

            if os.path.exists(log):
                for r in read_log(log, strict=True):
                    if r.workload == wkey and r.device == measurer.device_key and r.stale is None:
                        self.logged[r.config] = r
        self.trial_base = max((r.trial for r in self.logged.values()), default=0)
        self.written = 0  # records this run appended
        self.writer = TuningLog(log) if log is not None else None
        self.seen = set()
        self.results = {}  # config -> Trial
        self.trials = 0
        self.errors = 0
        self.history = []
        self.best = None  # (time, config)
        self.auto = None  # Trial of config 0
        self.interrupted = False
        self.raced = {}  # config -> Trial of its second reading (the race before the check), paced
        # every trial's stages: for the race and the check (_by_stages), and the search's best of each stage
        self.stage_times = StageTimes(space)
        self.confirmed = None  # (auto Trial, best Trial): medians of the side-by-side check
        self.codegen_s = self.compile_s = self.measure_s = 0.0

    def run(self, configs, search, bar, timeout=None, meanwhile=None):
        """Measure ``configs`` (those the log does not hold) and tell ``search`` each trial.  ``meanwhile``: passed
        to a measurer that :attr:`~polyad.tuner.measure.Measurer.overlaps` (it calls it while its workers build),
        else not called here."""
        from .measure import Trial

        todo, scheds = [], []
        for c in configs:
            self.seen.add(c)
            s = self.space.schedule(c, "auto" if c == self.space.auto_config() else "tuned")
            rec = self.logged.get(self.config_key(s))
            if rec is not None:
                # measured in an earlier run: its times teach the search, nothing is measured again
                t = Trial(rec.time, tuple(rec.times), {n: e.get("time") for n, e in rec.stages.items()
                                                       if e.get("time") is not None}, rec.error, rec.device,
                          ref_times=rec.ref_times)
                self._tell(c, s, t, search, write=False)
                continue
            todo.append(c)
            scheds.append(s)
        if not todo:
            return
        kw = {"meanwhile": meanwhile} if meanwhile is not None and self.measurer.overlaps else {}
        for c, s, t in zip(todo, scheds, self._measure(scheds, timeout=timeout, **kw)):
            self.trials += 1
            self._tell(c, s, t, search, write=True)
            if bar is not None:
                bar.update(1)
                if self.best is not None and self.auto is not None and self.auto.ok:
                    bar.set_postfix(best=f"{self.best[0] * 1e3:.3f}ms",
                                    speedup=f"{self.auto.time / self.best[0]:.2f}x")

    def _measure(self, scheds, timeout=None, **kw):
        """The measurer's trials of ``scheds``, their code generation, compile and measure seconds counted as they
        come.  ``timeout`` is passed only when set: a measurer written before it existed (``measure(schedules,
        pair_same)``) still runs without a time budget."""
        if timeout is not None:
            kw["timeout"] = timeout
        for t in self.measurer.measure(scheds, **kw):
            self.codegen_s += t.codegen_s
            self.compile_s += t.compile_s
            self.measure_s += t.measure_s
            yield t

    def _paced(self, t):
        """``t`` at the auto schedule's pace: its time relative to the auto runs timed beside it, times auto's time
        in this search (its stages scaled alike), so that trials minutes apart compare on a drifting machine;
        ``t`` itself where nothing was paired (a fake device, an error)."""
        rel = t.relative
        if rel is None or self.auto is None or not self.auto.ok or not t.time:
            return t
        paced = rel * self.auto.time
        k = paced / t.time
        return replace(t, time=paced, stages={n: v * k for n, v in t.stages.items() if v is not None})

    def _tell(self, c, s, t, search, write):
        if c == self.space.auto_config() and self.auto is None:
            self.auto = t
        raw, t = t, self._paced(t)
        self.results[c] = t
        search.tell(c, t)
        if t.ok:
            self.stage_times.add(c, t)
            if self.best is None or t.time < self.best[0]:
                self.best = (t.time, c)
        else:
            self.errors += write
        if write:
            self.history.append((self.trials, self.best[0] if self.best else None))
            self._write(c, s, raw, "auto" if c == self.space.auto_config() else search.name)

    def _write(self, c, s, t, candidate):
        from ..schedule.tuning import Record, stage_key

        if self.writer is None:
            return
        self.written += 1
        self.writer.append(Record.of(
            s, self.wkey, t.device or self.measurer.device_key, trial=self.trial_base + self.written,
            candidate=candidate, name=self.name,
            stages={ch.name: (stage_key(ch.op), ss, t.stages.get(ch.name)) for ch, ss in self.space.stage_pairs(c)},
            times=t.times if t.ok else (), error=t.error, ref_times=t.ref_times if t.ok else ()))

    def _contenders(self):
        """The search's candidates that beat auto, fastest first: where the race measured them, by the mean of their
        two readings (the raced ones first: the others were slower in the search than all of them)."""
        auto_c = self.space.auto_config()

        def figure(c, t):
            r = self.raced.get(c)
            return (1, t.time) if r is None else (0, (t.time + r.time) / 2)

        ranked = sorted((figure(c, t), i, c) for i, (c, t) in enumerate(self.results.items())
                        if t.ok and c != auto_c and t.time < self.auto.time
                        and (c not in self.raced or self.raced[c].ok))
        return [c for _, _, c in ranked]

    def _by_stages(self):
        """The measured candidates whose stages' median times (:class:`~polyad.tuner.search.StageTimes`) sum to less
        than auto's, fastest first by that sum, whatever their search readings said; not those the race measured
        failing or slower than auto (what the stages leave out, launches and the gaps between them, is in a
        whole reading, and the race's was not chosen for its luck)."""
        auto_c = self.space.auto_config()
        ref = self.stage_times.estimate(auto_c)
        if ref is None:
            return []
        ranked = []
        for i, (c, t) in enumerate(self.results.items()):
            r = self.raced.get(c)
            if t.ok and c != auto_c and (r is None or (r.ok and r.time < self.auto.time)):
                e = self.stage_times.estimate(c)
                if e is not None and e < ref:
                    ranked.append((e, i, c))
        return [c for _, _, c in sorted(ranked)]

    def race(self, top=RACE_TOP):
        """Measure the search's ``top`` fastest candidates and its ``top`` fastest by their stages' medians
        (:meth:`_by_stages`) once more, in one batch (logged as ``candidate="race"``), so that the end check takes
        its candidates by two readings each, not the luckiest one.  Nothing is raced when the check would measure
        them all anyway, or on a deterministic device."""
        if getattr(self.measurer, "deterministic", False) or self.auto is None or not self.auto.ok:
            return
        configs = list(dict.fromkeys(self._contenders()[:top] + self._by_stages()[:top]))
        if len(configs) <= CONFIRM_TOP:
            return
        scheds = [self.space.schedule(c, "tuned") for c in configs]
        for c, s, t in zip(configs, scheds, self._measure(scheds)):
            self._write(c, s, t, "race")
            self.raced[c] = t = self._paced(t)
            if t.ok:
                self.stage_times.add(c, t)

    def confirm(self, rounds, top=CONFIRM_TOP):
        """Measure auto and the ``top`` fastest candidates (after the race: by their two readings) again, ``rounds``
        rounds in a rotating order (none goes first every round), each in a fresh module, auto's paired with the
        kept auto module like the others (``pair_same``).  Each scores the median of its ``Trial.relative`` (its
        runs over the auto runs beside them) where the measurer pairs runs, else of its times;
        :func:`~polyad.schedule.tuning.confirmed_choice` chooses (at most ``MARGIN`` times auto's score, else
        auto).  A search's figures come from batches minutes apart on a machine whose speed drifts, its fastest
        of hundreds is partly luck, and every figure in it is relative to one kept module of auto, which may read
        a few percent off any other: auto's fresh modules, scored alike, cancel that."""
        from ..schedule.tuning import confirmed_choice

        auto_c = self.space.auto_config()
        if rounds <= 0 or getattr(self.measurer, "deterministic", False) or self.best is None \
                or self.best[1] == auto_c or self.auto is None or not self.auto.ok:
            return
        configs = [auto_c] + list(dict.fromkeys(self._contenders()[:top] + self._by_stages()[:STAGES_TOP]))
        scheds = [self.space.schedule(c, "auto" if c == auto_c else "tuned") for c in configs]
        got = [[] for _ in configs]
        for r in range(rounds):
            order = [(i + r) % len(configs) for i in range(len(configs))]
            for i, t in zip(order, self._measure([scheds[i] for i in order], pair_same=True)):
                self._write(configs[i], scheds[i], t, "confirm")
                if t.ok:
                    got[i].append(t)
        if not got[0] or len(got[0]) < rounds:
            return  # auto itself failed again: keep the search's figures
        paired = all(t.relative is not None for ts in got for t in ts)

        def score(ts):
            # the lower middle of an even count, as the tuning database takes a median (rounds=4, or Ctrl-C in the
            # held-out rounds): the two choose alike
            xs = sorted(t.relative if paired else t.time for t in ts)
            return float(xs[(len(xs) - 1) // 2])

        # a candidate that failed in any round is out (a flaky build is not a result)
        scores = {i: score(ts) for i, ts in enumerate(got) if len(ts) == rounds}
        best = confirmed_choice(scores, 0)
        self.confirmed = (_median_trial(got[0]), _median_trial(got[best]), configs[best],
                          scores[best] / scores[0] if scores[0] else 1.0)
        if best != 0:
            self.confirmed = self._holdout(rounds, (configs[0], scheds[0]), (configs[best], scheds[best]), score)

    def _holdout(self, rounds, auto, chosen, score):
        """The check's choice and auto measured again, ``rounds`` rounds in alternating order, fresh modules, logged as
        ``candidate="holdout"``: the figure reported, and a veto.  The check's own figure is its choice's lowest of
        ``CONFIRM_TOP`` noisy scores, which reads low (winner's curse): eight tunings' picks read 0.99-1.06x their
        reported time in fresh builds, 1.025x on average.  The choice stands where it reads faster than auto here;
        else (or where it fails here) auto is the result.  A tuning database decides alike (``holdout_veto``), on
        the same records, also where Ctrl-C stopped the rounds."""
        got, failed = {auto[0]: [], chosen[0]: []}, set()

        def verdict():
            """The result by the rounds measured so far (Ctrl-C may come between two): the database reads the same
            records and decides alike."""
            from ..schedule.tuning import holdout_veto

            a, b = got[auto[0]], got[chosen[0]]
            if auto[0] in failed or not a:
                return self.confirmed  # auto itself failed here, or nothing was measured: the check's figures stand
            if chosen[0] in failed or (b and holdout_veto(score(b), score(a))):
                return (_median_trial(a), _median_trial(a), auto[0], 1.0)
            return (_median_trial(a), _median_trial(b), chosen[0], score(b) / score(a)) if b else self.confirmed

        try:
            for r in range(rounds):
                pair = [auto, chosen] if r % 2 == 0 else [chosen, auto]
                for (c, s), t in zip(pair, self._measure([s for _, s in pair], pair_same=True)):
                    if t.ok:
                        got[c].append(t)
                    else:
                        failed.add(c)
                    self._write(c, s, t, "holdout")
        except KeyboardInterrupt:
            self.confirmed = verdict()
            raise
        return verdict()

    def close(self):
        if self.writer is not None:
            self.writer.close()

    def result(self, total):
        if self.auto is None or not self.auto.ok:
            raise PolyadError(f"tune: the auto schedule did not run: {self.auto.error if self.auto else 'no trial'}")
        # the search's best (its time paced: at auto's pace in this search), or the end check's choice, whose time
        # is auto's there times the ratio the choice was made on (side by side, drift cancelled)
        auto_t, best_t, best_c = self.auto, self.results[self.best[1]], self.best[1]
        tuned = best_t.time
        if self.confirmed is not None:
            auto_t, best_t, best_c, ratio = self.confirmed
            tuned = ratio * auto_t.time
        if tuned >= auto_t.time or best_c == self.space.auto_config():
            best_t, best_c, tuned = auto_t, self.space.auto_config(), auto_t.time
        elif best_t.time:  # its stages at the pace of the total reported
            k = tuned / best_t.time
            best_t = replace(best_t, stages={n: v * k for n, v in best_t.stages.items() if v is not None})
        sched = self.space.schedule(best_c, "tuned" if best_c != self.space.auto_config() else "auto")
        auto_pairs = {ch.name: ss for ch, ss in self.space.stage_pairs(self.space.auto_config())}
        tuned_pairs = {ch.name: ss for ch, ss in self.space.stage_pairs(best_c)}
        stages = {}
        for n in sorted(set(auto_pairs) | set(tuned_pairs)):
            stages[n] = {"auto": auto_pairs.get(n), "auto_time": auto_t.stages.get(n) if n in auto_pairs else None,
                         "tuned": tuned_pairs.get(n), "tuned_time": best_t.stages.get(n) if n in tuned_pairs else None}
        search_s = max(0.0, total - self.codegen_s - self.compile_s - self.measure_s)
        a = self.auto.time  # the search's own figures, for the history (trials to reach a share of the speed-up)
        history = [(n, min(b, a) if b is not None else a) for n, b in self.history]
        return TuneResult(sched, tuned, auto_t.time, self.trials, stages, history, self.log_path,
                          self.interrupted, {"codegen": self.codegen_s, "compile": self.compile_s,
                                             "measure": self.measure_s,
                                             "search": search_s, "total": total}, self.errors, self.wkey,
                          self.measurer.device_key, self.space.variants[best_c[0]].why,
                          len({c[0] for c, t in self.results.items() if t.ok}))
