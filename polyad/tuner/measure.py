"""Measuring schedules on the device: compile in parallel, check, time, one build at a time.

A :class:`Measurer` turns a batch of :class:`~polyad.schedule.Schedule` into :class:`Trial` results.
:class:`LocalMeasurer` does it on this machine's device:

1. generate every candidate's program, in code generation worker processes when there are several workers and
   candidates (:mod:`polyad.tuner.generate`: in one process, generating took longer than compiling);
2. compile the kernels the kernel cache lacks in a pool of compiler processes
   (:func:`polyad.runtime.cache.precompile`), each kernel as a program of its own
   (:func:`polyad.runtime.module.per_kernel_requests`): a candidate that changes one stage compiles one
   kernel, and a compiler that aborts costs the candidates with that kernel, not the run;
3. one candidate at a time on the device, on inputs uploaded once: run it once and compare every output with
   the auto schedule's (relative error at most ``rtol``, the benchmark's tolerance: a mismatch is an
   error, never a result); then a warm-up, ``repeat`` timed runs, more (up to ``SPREAD_RUNS`` times as
   many) while they spread widely, or just two where both take over ``LOSES`` times auto's (the median is
   the trial's time), and
   one :meth:`~polyad.runtime.Module.profile_buffers`, whose per-kernel medians give every stage's time at once
   (Ansor's joint measurement: one build measures a candidate for every stage).

Each timed run of a candidate is paired with a run of the auto schedule's module, kept from the first
trial, in alternating order (``Trial.ref_times``).  This VM's speed changes in bursts of one to three
seconds (softmax's backward, one module, read 1.4 ms, then 2.5-3.1 ms for two seconds, then 1.4 again):
times taken minutes apart rank the moment, not the schedule, and the best of hundreds of such times is
partly a lucky moment.  The median of a candidate's runs over the auto runs beside them (``Trial.relative``)
does not drift with the machine, and ``spread`` is judged on those ratios.  A schedule that compiles to the
reference's own kernels (auto again) is not paired: its ratio is 1 by definition, except in the end
check (``pair_same``), where fresh modules of auto are scored like the candidates': the kept module is one
draw, and modules of one program read up to 3% apart (dense's backward once read 1.44 ms in one module and
1.74-1.94 ms in three others built beside it).

A candidate whose first run takes longer than ``timeout`` seconds (or ``slow`` times the auto
schedule's, when that is over a second) is stopped there and recorded as an error.  :class:`FunctionMeasurer` is a device made of a
function (tests, and searching a recorded space).
"""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..errors import BuildError, PolyadError

# the benchmark suite's tolerance (polyad.bench.report.ERR_FLAG): max |got - ref| / max |ref|
RTOL = 1e-3
# runs spread more than this (interquartile range over the median) are not settled: up to SPREAD_RUNS
# times ``repeat`` runs are taken
SPREAD = 0.15
SPREAD_RUNS = 4
# a candidate whose first two timed runs each take this many times the auto schedule's median is timed no
# further (and profiled once)
LOSES = 3.0


def settled(times):
    """Whether timed runs agree well enough for their median to rank schedules (IQR/median <= SPREAD)."""
    if len(times) < 3:
        return False
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return med > 0 and (q3 - q1) / med <= SPREAD


@dataclass(frozen=True)
class Trial:
    """What measuring one schedule gave.

    :param time: median seconds of a whole run (None after an error).
    :param times: every timed run, seconds.
    :param stages: stage name -> seconds of its kernels (per-kernel medians of one profile).
    :param error: why there is no time (a build error, a wrong result, a timeout), else None.
    :param device: the key of the device it ran on.
    :param codegen_s: seconds spent generating its program (its share of the batch's): isl's code generation
        and printing, in the measurer's process or its code generation workers.
    :param compile_s: seconds spent compiling it (its share of the batch's compile time, in the compiler
        processes).
    :param measure_s: seconds spent running it.
    :param ref_times: the auto schedule's runs, each timed next to one of ``times`` (the reference trial's are
        its own times), or () where the measurer pairs nothing (a fake device).
    """

    time: float = None
    times: tuple = ()
    stages: dict = field(default_factory=dict)
    error: str = None
    device: str = ""
    compile_s: float = 0.0
    measure_s: float = 0.0
    ref_times: tuple = ()
    codegen_s: float = 0.0

    @property
    def ok(self):
        return self.error is None and self.time is not None

    @property
    def relative(self):
        """The median of its runs over the auto runs timed beside them, or None when nothing was paired (what a
        log's record of it gives, ``Record.relative``)."""
        from ..schedule.tuning import relative_to

        return relative_to(self.times, self.ref_times) if self.ok else None


_CHUNK = 1 << 18  # elements compared at once: temporaries that stay in L2


def rel_error(got, ref):
    """max over outputs of max|got - ref| / max|ref| (NaN where they disagree on NaN-ness).

    Compared in chunks, in the outputs' own float type where every value is finite: avg_pool's
    42.6M-element gradient took 1.9 s a candidate as whole-array float64 temporaries (most of a trial),
    0.16 s this way."""
    worst = 0.0
    for g, r in zip(got, ref):
        g = np.ascontiguousarray(g).reshape(-1)
        r = np.ascontiguousarray(r).reshape(-1)
        if g.size != r.size:
            return float("nan")
        scale = err = 0.0
        for lo in range(0, r.size, _CHUNK):
            gc, rc = _comparable(g[lo:lo + _CHUNK]), _comparable(r[lo:lo + _CHUNK])
            if not (np.isfinite(gc).all() and np.isfinite(rc).all()):
                if not np.array_equal(np.isnan(gc), np.isnan(rc)):
                    return float("nan")
                # equal infinities compare equal, opposite ones as far apart as float64 goes
                gc, rc = np.nan_to_num(gc.astype(np.float64)), np.nan_to_num(rc.astype(np.float64))
            with np.errstate(over="ignore"):
                err = max(err, float(np.max(np.abs(gc - rc))))
            scale = max(scale, float(np.max(np.abs(rc))))
        worst = max(worst, err / scale if scale else err)
    return worst


def _comparable(a):
    """``a`` where it is float32 or float64, else as float64 (integers, booleans, halves)."""
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)


def default_data(inputs, seed=0):
    """Reproducible arrays for ``inputs``: standard normal floats, integers and booleans drawn from 0 and 1 (valid
    indices and labels wherever an axis has two entries; with zeros alone, a candidate that read another index
    than auto's passed the check on an index-driven graph)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in inputs:
        if np.dtype(t.dtype).kind == "f":
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
        else:
            out.append(rng.integers(0, 2, t.shape).astype(t.dtype if t.dtype != "bool" else np.bool_))
    return out


@dataclass(frozen=True)
class Context:
    """The graph a measurer builds, as the search sees it.

    :param outputs: the outputs, cut at fed inputs and uniquely named (as ``pa.build`` renames them).
    :param inputs: the build's placeholders, in order.
    :param model: the device's :class:`~polyad.schedule.DeviceModel`.
    :param auto: the auto :class:`~polyad.schedule.Schedule` of ``outputs`` on ``model`` (candidate 0).
    :param workload: the workload key of the records (``pa.build`` keys a tuned graph before it guards its reads:
        :func:`polyad.poly.bounds.guarded_reads`), or None: of ``outputs``.
    """

    outputs: list
    inputs: list
    model: object
    auto: object
    workload: str = None


def graph_context(outputs, inputs, model):
    """The :class:`Context` of a build of ``outputs`` from ``inputs`` planned for ``model``."""
    from ..pipeline import build_graph
    from ..schedule.auto import auto_schedule
    from ..te.graph import cut
    from ..te.tensor import as_tensor_list

    from ..schedule.tuning import workload_key

    outs, ins = cut(as_tensor_list(outputs, "tune outputs"), as_tensor_list(inputs, "tune inputs"))
    key = workload_key(outs, ins)  # as pa.build keys it: on the graph cut, not yet renamed and guarded
    outs = build_graph(outs)
    return Context(outs, list(ins), model, auto_schedule(outs, device=model, renamed=True), key)


class Measurer:
    """Measures batches of schedules.  ``device_key`` names the device its trials ran on;
    ``nothing_to_tune`` says that the build has no kernel to schedule."""

    device_key = ""
    workers = 1
    nothing_to_tune = False
    #: :meth:`measure` takes ``meanwhile``: a callable it calls once, in this thread, while its workers build the
    #: batch (the tuner breeds its next round there); measurers without it are called without
    overlaps = False

    def context(self):
        """The :class:`Context` of the graph it measures."""
        return self._context

    def measure(self, schedules, pair_same=False, timeout=None):
        """One :class:`Trial` per schedule, in order.  ``pair_same``: time a schedule that compiles to the
        reference's own kernels beside the reference too (the end check's fresh modules of auto), instead of
        giving it the ratio 1.  ``timeout``: seconds a candidate's compile or first run may take in this batch, if
        less than the measurer's own (the tuner's time budget nearly spent).  Where :attr:`overlaps`, also
        ``meanwhile``: called once, in this thread, while the workers build (a local measurer: while they compile,
        before any timed run)."""
        raise NotImplementedError

    def close(self):
        pass


class LocalMeasurer(Measurer):
    """Measures on a device of this machine.

    :param outputs: the tensors to compute (as ``pa.build`` takes them).
    :param inputs: the build's inputs.
    :param device: as ``pa.build`` takes it.
    :param workers: compiler processes run at once.
    :param data: arrays for the inputs (None: :func:`default_data`).
    :param repeat: timed runs per candidate (the median counts).
    :param warmup: untimed runs before them.
    :param timeout: seconds a candidate's code generation (in the workers), compile or first run may take.
    :param slow: a candidate whose first run takes this many times the auto schedule's median stops there.
    :param rtol: the relative error a candidate's outputs may have against the auto schedule's.
    :raises BuildError: when the auto schedule (the reference) does not build or run.
    """

    def __init__(self, outputs, inputs, device=None, workers=1, data=None, repeat=5, warmup=1,
                 timeout=60.0, slow=20.0, rtol=RTOL):
        from ..pipeline import device_model, select_device
        from ..runtime.device import device_key
        from ..te.tensor import as_tensor_list

        self.dev = select_device(device)
        self.device_key = device_key(self.dev)
        self.user_inputs = as_tensor_list(inputs, "tune inputs")
        self._context = graph_context(outputs, self.user_inputs, device_model(self.dev))
        self.outs, self.ins = self._context.outputs, self._context.inputs
        self.workers, self.repeat, self.warmup = max(1, int(workers)), repeat, warmup
        self.timeout, self.slow, self.rtol = timeout, slow, rtol
        self.arrays = list(data) if data is not None else default_data(self.ins)
        if len(self.arrays) != len(self.ins):
            raise PolyadError(f"tune: data has {len(self.arrays)} arrays for {len(self.ins)} inputs")
        self.ref_out, self.ref_time = None, None
        self._input_buffers = None
        self._ref = None  # the auto schedule's (module, buffers), run beside every candidate's timed runs
        self._pool = None  # compiler processes, kept from batch to batch
        self._generators = None  # code generation processes (GeneratorPool), likewise
        self._programs_here = None  # code generation in this process (generate.Programs), where there are none
        first = self.measure([self._context.auto])[0]  # the reference: every candidate must match it
        if not first.ok:
            self.close()
            raise BuildError(f"tune: the auto schedule does not run, so there is nothing to check candidates "
                             f"against: {first.error}")
        self.ref_time = first.time
        # no kernel at all (every output a bitcast of an input, flatten's gradient): no schedule changes anything
        self.nothing_to_tune = not first.stages

    def _program(self, schedule):
        if self._programs_here is None:
            from ..pipeline import _wide_indices
            from .generate import Programs

            model = self._context.model
            self._programs_here = Programs(self.outs, self.ins, _wide_indices(self.dev, model), widths=model.widths)
        return self._programs_here(schedule)  # what pa.build compiles

    overlaps = True

    def measure(self, schedules, pair_same=False, timeout=None, meanwhile=None):
        from ..runtime.cache import precompile
        from ..runtime.module import per_kernel_requests

        t0 = time.perf_counter()
        limit = self.timeout if timeout is None else min(self.timeout, timeout)
        programs, errors, requests = [], [], []
        for p in self._programs(schedules, limit):
            err, reqs = (p, {}) if isinstance(p, str) else (None, None)
            if err is None:
                try:
                    reqs = per_kernel_requests(p, self.dev)
                except PolyadError as e:
                    err, reqs = f"{type(e).__name__}: {e}", {}
            programs.append(None if err else p)
            requests.append(reqs)
            errors.append(err)
        t_gen = time.perf_counter()
        # each kernel apart, each distinct kernel once: a candidate compiles only the stages it changes
        distinct = list({r[0]: r for reqs in requests for r in reqs.values()}.values())
        if self._pool is None:
            from ..runtime.builder import Worker

            self._pool = [Worker() for _ in range(self.workers)]

        def compiled():
            return precompile(distinct, self.dev, timeout=limit, pool=self._pool), time.perf_counter()

        overlap = 0.0
        if meanwhile is None:
            built, t_built = compiled()
        else:
            # the compile in a thread (it only talks to the compiler processes), ``meanwhile`` here (isl is for one
            # thread).  Its time is not the compile's: on a machine whose cores the compilers fill, it takes their
            # time (2-core VM: a round bred beside the compile saved 3-23% of its own time, not all of it)
            with ThreadPoolExecutor(1) as ex:
                pending = ex.submit(compiled)
                t_bred = time.perf_counter()
                meanwhile()
                t_bred_end = time.perf_counter()
                built, t_built = pending.result()
            overlap = max(0.0, min(t_bred_end, t_built) - t_bred)
        failed = {r[0]: e for r, e in zip(distinct, built) if e is not None}
        for i, reqs in enumerate(requests):
            bad = [failed[r[0]] for r in reqs.values() if r[0] in failed]
            if bad and errors[i] is None:
                errors[i] = _first_line(bad[0])
        codegen_s = (t_gen - t0) / max(1, len(schedules))
        compile_s = max(0.0, t_built - t_gen - overlap) / max(1, len(schedules))
        out = []
        for p, reqs, err in zip(programs, requests, errors):
            t1 = time.perf_counter()
            if err is None:
                trial = self._run(p, reqs, pair_same, limit)
            else:
                trial = Trial(error=err, device=self.device_key)
            out.append(Trial(trial.time, trial.times, trial.stages, trial.error, self.device_key, compile_s,
                             time.perf_counter() - t1, trial.ref_times, codegen_s))
        return out

    def _programs(self, schedules, timeout):
        """Per schedule, its program or why there is none (the error's text): in the code generation workers
        (:mod:`polyad.tuner.generate`) when there are several workers and several schedules and the graph can be
        sent to them, else here."""
        from ..runtime.builder import isolated

        if self._generators is None and self.workers >= 2 and len(schedules) >= 2 and isolated():
            from ..pipeline import _wide_indices
            from .generate import GeneratorPool, GraphNotSent

            try:
                model = self._context.model
                self._generators = GeneratorPool(self.outs, self.ins, _wide_indices(self.dev, model), self.workers,
                                                 widths=model.widths)
            except GraphNotSent:
                self._generators = False  # generated here from now on
        if self._generators and len(schedules) >= 2:
            return self._generators.programs(schedules, timeout)
        out = []
        for s in schedules:
            try:
                out.append(self._program(s))
            except PolyadError as e:
                out.append(f"{type(e).__name__}: {e}")
        return out

    def close(self):
        for w in self._pool or ():
            w.close()
        self._pool = None
        if self._generators:
            self._generators.close()
        self._generators = None
        self._ref = None

    def _run(self, program, requests, pair_same=False, timeout=None):
        from ..runtime.cache import get_program
        from ..runtime.module import Module

        try:
            built = {name: get_program(src, self.dev, options, launches)
                     for name, (src, options, launches) in requests.items()}
            mod = Module(program, self.dev, single_output=False, inputs=self.user_inputs, kernel_programs=built)
            # the inputs go to the device once for every candidate (avg_pool's: 0.14 s a candidate)
            if self._input_buffers is None:
                self._input_buffers = mod.to_device(*self.arrays)[:len(self.ins)]
            bufs = self._input_buffers + mod.output_buffers(self._input_buffers)
            t0 = time.perf_counter()
            mod.run(*bufs)
            first = time.perf_counter() - t0
            n = len(self.ins)
            got = [mod.download(t, b) for t, b in zip(program.outputs, bufs[n:])]
        except PolyadError as e:
            return Trial(error=_first_line(e))
        if self.ref_out is None:
            self.ref_out = got
        else:
            err = rel_error(got, self.ref_out)
            if not err <= self.rtol:
                return Trial(error=f"wrong result: relative error {err:.3g} against the auto schedule's "
                                   f"outputs (tolerance {self.rtol:g})")
        # the first run also allocates the intermediates and lets the driver specialise each kernel: a
        # run under a second is never cut
        timeout = self.timeout if timeout is None else timeout
        limit = timeout if self.ref_time is None else min(timeout, max(1.0, self.slow * self.ref_time))
        if first > limit:
            why = f"over {self.slow:g}x the auto schedule's {self.ref_time * 1e3:.3g} ms" \
                if self.ref_time is not None and limit < timeout else f"the timeout, {timeout:g} s"
            return Trial(error=f"too slow: one run took {first:.3g} s, stopped at {limit:.3g} s ({why})")
        for _ in range(self.warmup):
            mod.run(*bufs)
        ref = self._ref
        kernels_of = sorted(r[0] for r in requests.values())
        if ref is None:  # this is the reference: keep it, to time beside every later candidate
            self._ref = ref = (mod, bufs, kernels_of)
        # the reference's own program again (auto, in the search) is its own measure: its ratio to it is 1 whatever
        # two modules of it read at two moments (1.32 in one softmax search).  The end check pairs it all the same
        # (pair_same): there auto's fresh modules are scored like the candidates', so the kept module's own
        # reading cancels
        paired = mod is not ref[0] and (pair_same or kernels_of != ref[2])
        if paired:
            ref[0].run(*ref[1])  # its warm-up: it may have idled for a whole compile batch

        def timed(m, b):
            t0 = time.perf_counter()
            m.run(*b)
            return time.perf_counter() - t0

        times, ref_times, loser = [], [], False
        # more runs while they spread widely (a kernel whose few work-groups split unevenly over the cores
        # was measured at 1.8-3.2 ms run to run): a median of five would rank noise
        while len(times) < self.repeat or (len(times) < SPREAD_RUNS * self.repeat and not (
                settled([t / r for t, r in zip(times, ref_times)]) if paired else settled(times))):
            if not paired:
                times.append(timed(mod, bufs))
                ref_times.append(times[-1])
            elif len(times) % 2 == 0:  # neither goes first every time
                ref_times.append(timed(*ref[:2]))
                times.append(timed(mod, bufs))
            else:
                times.append(timed(mod, bufs))
                ref_times.append(timed(*ref[:2]))
            # two runs each LOSES times auto's beside them: its rank is known, more runs would only cost
            # (dense_big's search met candidates at 3-30x auto's 14 ms, each run a dozen times)
            if len(times) == 2 and all(t > LOSES * r for t, r in zip(times, ref_times)):
                loser = True
                break
        med = float(np.median(times))
        kernels = mod.profile_buffers(*bufs, repeat=1 if loser else max(1, self.repeat), warmup=0)
        stages = {}
        for k in program.kernels:
            stages[k.stage_name] = stages.get(k.stage_name, 0.0) + kernels.get(k.name, 0.0)
        return Trial(med, tuple(times), stages, ref_times=tuple(ref_times))


def _first_line(e):
    text = str(e).strip().splitlines()
    head = text[0] if text else type(e).__name__
    errs = [ln.strip() for ln in text if "error" in ln.lower() and ln.strip() != head]
    return f"{type(e).__name__}: {head}" + (f" ({errs[0][:200]})" if errs else "")


class FunctionMeasurer(Measurer):
    """A device made of a function: ``stage_time(stage name, StageSchedule, Schedule) -> seconds``.

    A trial's time is the sum of its stages' times; ``error(schedule)`` may return an error text (a
    candidate that "does not compile").  Deterministic: the search's tests run on it.

    :param context: the :class:`Context` of the graph (:func:`graph_context` on a recorded model).
    :param stage_time: the function.
    :param stage_names: the stages of a schedule (``schedule -> iterable of names``).
    :param error: ``schedule -> str | None``.
    :param device_key: the name its trials carry.
    """

    deterministic = True  # the same schedule, the same time: nothing to confirm

    def __init__(self, context, stage_time, stage_names, error=None, device_key="fake-device"):
        self._context = context
        self.stage_time, self.stage_names, self.error = stage_time, stage_names, error
        self.device_key = device_key
        self.calls = 0

    def measure(self, schedules, pair_same=False, timeout=None):
        out = []
        for s in schedules:
            self.calls += 1
            err = self.error(s) if self.error else None
            if err:
                out.append(Trial(error=err, device=self.device_key))
                continue
            stages = {n: float(self.stage_time(n, s.for_stage(n), s)) for n in self.stage_names(s)}
            total = sum(stages.values())
            out.append(Trial(total, (total,), stages, None, self.device_key))
        return out
