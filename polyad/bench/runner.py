"""The benchmark harness: ``polyad bench`` (also ``python -m polyad.bench``).

For each workload, in one process so the ratios are fair: polyad forward and
backward (autodiff) per schedule, the hand-written TE gradient on the same
backend and schedule, hand-written numpy, PyTorch autograd when torch is
importable, build times, and every gradient's max relative error against a
float64 numpy reference.  A column that cannot run (an op or the runtime not
there yet, torch missing, a build error) becomes an "n/a: <reason>" cell; it
never stops the run.

What is timed (``--backward vjp recompute``, both by default):
* bwd ms (vjp): ``fwd, bwd = pa.vjp(Y, inputs, wrt)``; the forward runs once,
  outside the timing, and leaves its residuals on the device
  (``pa.residuals(grads, [H], save="reductions")``: JAX's dots_saveable policy,
  reductions are saved, elementwise stages and pads are recomputed); ``bwd`` is
  timed alone on them, as torch's backward is timed after its forward.  The
  hand-written TE gradient (hand TE bwd ms) is split and fed the same way
  (``polyad.pipeline.vjp.vjp_from_gradients``).
* bwd ms (recompute): ``pa.build(pa.differentiate(Y, wrt, H), inputs + [H])``,
  which recomputes the forward intermediates it needs (as TVM's te.gradient
  does) and keeps nothing between calls.
* numpy and torch backward: the backward pass alone, with the forward
  activations saved beforehand (torch: ``autograd.grad(y, inputs, H)``).
  With torch, both polyad backwards and torch's are timed side by side in
  alternating rounds (:func:`paired`): the torch ratios divide times taken on
  the same machine state.
* training steps (mlp_step, lenet_step): forward, backward and an SGD update
  of every parameter, on the device, the parameters carried from step to step:
  with pa.vjp (step ms (vjp)), with the plain forward and the recomputing
  backward (step ms (recompute)), and torch's (forward, autograd.grad,
  in-place update).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

#: Where a run writes its report unless ``--out`` says otherwise: relative to the current directory,
#: so that it works the same from a pip install and from a checkout.
RESULTS_DIR = Path("polyad-bench-results")
SCHEDULES = ("naive", "auto")


# ----------------------------------------------------------------------------- cells

@dataclass
class Cell:
    """A measured value, or why there is none (``na``)."""

    value: float = None
    na: str = None
    note: str = ""

    @classmethod
    def missing(cls, reason):
        return cls(na=" ".join(str(reason).split()) or "unknown reason")

    @property
    def ok(self):
        return self.na is None and self.value is not None


def _reason(exc):
    # The first line, or the first two when the first ends in ':' (e.g. a build error's log follows).
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    msg = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    msg = msg if len(msg) <= 300 else msg[:299] + "…"
    if isinstance(exc, NotImplementedError) and msg:
        return msg
    if isinstance(exc, (ImportError, ModuleNotFoundError)):
        return f"{exc.name or msg} not importable"
    if isinstance(exc, AttributeError) and "polyad" in msg:
        return f"missing API ({msg})"
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def attempt(fn, *args):
    """fn(*args), or a missing Cell with the exception as the reason."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every failure is one n/a cell, never the run
        return Cell.missing(_reason(exc))


def ratio(a, b, a_name="numerator", b_name="denominator"):
    """a / b as a Cell; n/a naming the missing side(s)."""
    missing = [n for n, c in ((a_name, a), (b_name, b)) if not (isinstance(c, Cell) and c.ok)]
    if missing:
        return Cell.missing("needs " + " and ".join(missing))
    return Cell(a.value / b.value) if b.value else Cell.missing(f"{b_name} is 0")


# ----------------------------------------------------------------------------- timing

#: Warm-up before the timed runs of every column (polyad, torch, numpy alike): runs until their times add up to
#: this many seconds (at most WARMUP_CALLS calls).  On PoCL the first 10-20 runs of a backward of small kernels
#: (lenet_step's) took 1.5x the later ones, and one warm-up run left that in the median of 5.
WARMUP_S = 0.25
WARMUP_CALLS = 100


def _warm_up(run_n):
    """Runs ``run_n(1)`` until they add up to :data:`WARMUP_S` seconds; returns the last run's seconds."""
    probe = _as_times(run_n(1))
    warm, calls = sum(probe), 1
    while warm < WARMUP_S and calls < WARMUP_CALLS:
        probe = _as_times(run_n(1))
        warm, calls = warm + sum(probe), calls + 1
    return max(statistics.median(probe), 1e-9)


def measure(run_n, repeat=5, budget_s=30.0):
    """Median milliseconds of ``run_n(n)`` (-> n per-run seconds), after warm-up runs adding up to
    :data:`WARMUP_S` seconds.

    If ``repeat`` runs would exceed ``budget_s`` (judged by the warm-up), fewer
    are taken and the cell says so.
    """
    per_run = _warm_up(run_n)
    n = repeat
    note = ""
    if per_run * repeat > budget_s:
        n = max(1, int(budget_s // per_run))
        note = f"{n} run{'s' if n > 1 else ''} (time budget {budget_s:g} s)"
    times = _as_times(run_n(n))
    return Cell(1e3 * statistics.median(times), note=note)


#: Alternating rounds in which the backwards and torch's are timed side by side (:func:`paired`): the torch
#: ratios divide medians taken on the same machine state.  This 2-core VM's speed drifts by up to 1.7x from
#: minute to minute (lenet_step's backward read 1.28 and 1.96 ms in two runs ten minutes apart), and the
#: columns timed one after the other, seconds apart, drifted apart with it.
PAIRED_ROUNDS = 7
#: Seconds of rest before each column's turn in a round: torch's OpenMP workers spin-wait on both cores for a
#: while after its backward returns, and the column timed next shared the cores with them (dense's backward,
#: one run: 1.64 ms right after torch's, 1.26 ms 30 ms later, 1.33 ms with no torch before it).
PAIRED_PAUSE_S = 0.03


def paired(run_ns, repeat=5, budget_s=30.0, rounds=PAIRED_ROUNDS):
    """Median milliseconds of each ``run_n`` of ``run_ns``, timed side by side: after each one's warm-up,
    ``rounds`` rounds, each running every one of them ``repeat`` times in turn (after
    :data:`PAIRED_PAUSE_S` of rest); a cell is the median of its rounds' medians.  Fewer rounds (at least one) where they would exceed ``budget_s``, and the cells say so.
    """
    per_run = [_warm_up(r) for r in run_ns]
    n = repeat
    k = rounds
    if sum(per_run) * n * rounds > budget_s:
        k = max(1, int(budget_s // (sum(per_run) * n)))
        if k == 1:
            n = max(1, int(budget_s // sum(per_run)))
    meds = [[] for _ in run_ns]
    for _ in range(k):
        for m, r in zip(meds, run_ns):
            time.sleep(PAIRED_PAUSE_S)
            m.append(statistics.median(_as_times(r(n))))
    note = f"side by side with torch, {k} round{'s' if k > 1 else ''} of {n}" + (
        f" (time budget {budget_s:g} s)" if k < rounds else "")
    return [Cell(1e3 * statistics.median(m), note=note) for m in meds]


def _as_times(t):
    if isinstance(t, (int, float)):
        return [float(t)]
    t = [float(x) for x in np.ravel(np.asarray(t, dtype=float))]
    if not t:
        raise ValueError("no timings returned")
    return t


def wall_clock(fn):
    """A run_n for ``measure`` that times ``fn()`` with perf_counter."""
    def run_n(n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    return run_n


def rel_error(got, ref):
    """max over gradients of max|g - ref| / max|ref|."""
    if len(got) != len(ref):
        raise ValueError(f"{len(got)} gradients for {len(ref)} references")
    worst = 0.0
    for g, r in zip(got, ref):
        g = np.asarray(g, dtype=np.float64).reshape(np.shape(r))
        scale = float(np.max(np.abs(r))) if np.size(r) else 0.0
        err = float(np.max(np.abs(g - r))) if np.size(r) else 0.0
        worst = max(worst, err / scale if scale else err)
    return worst


# ----------------------------------------------------------------------------- columns

#: The backwards a run can measure (``--backward``): pa.vjp's, fed the residuals its forward saved on
#: the device, and the gradient built alone from (inputs, H), which recomputes the forward it reads.
BACKWARDS = ("vjp", "recompute")
#: What each backward is, as the report says it (the options line; JSON's "backward"); its columns say
#: "(vjp)" or "(recompute)".
BACKWARD_NAMES = {
    "vjp": "vjp (pa.vjp: bwd on the residuals its forward left on the device)",
    "recompute": "recompute (pa.build(pa.differentiate(...), inputs + [H]): recomputes the forward it reads)",
}
#: The learning rate of the training steps' SGD update (``params - SGD_LR * grads``).
SGD_LR = 0.01
#: Why a step column is empty on a workload that is not a training step (shown as "-").
NOT_A_STEP = "not a training step"


def _polyad_api(backend="opencl"):
    """What the polyad columns call: pa's placeholder, differentiate, build and vjp (and
    ``vjp_from_gradients``, for the hand-written gradients), or their numpy stand-ins."""
    from types import SimpleNamespace

    import polyad as pa

    if backend == "opencl":
        from polyad.pipeline.vjp import vjp_from_gradients

        from polyad.pipeline import device_model

        return SimpleNamespace(placeholder=pa.placeholder, differentiate=pa.differentiate, build=pa.build,
                               vjp=pa.vjp, vjp_from_gradients=vjp_from_gradients, device_model=device_model)
    if backend == "evaluate":
        return evaluate_api()
    raise ValueError(f"unknown backend {backend!r}")


class EvaluateModule:
    """A Module look-alike over pa.evaluate (``--backend evaluate``).

    It checks gradients (the error columns) on the real workloads without
    OpenCL; its times are the numpy interpreter's, not polyad's kernels.
    Its "device buffers" are numpy arrays (``output_buffers``, ``run``).
    """

    def __init__(self, outputs, inputs, schedule="naive"):
        self.outputs, self.inputs, self.schedule = list(outputs), list(inputs), schedule

    def __call__(self, *arrays):
        import polyad as pa

        out = pa.evaluate(self.outputs, dict(zip(self.inputs, arrays))) if self.outputs else []
        return out[0] if len(self.outputs) == 1 else out

    def time(self, *arrays, repeat=1):
        return wall_clock(lambda: self(*arrays))(repeat)

    def output_buffers(self, input_buffers):
        return [np.empty(t.shape, t.dtype) for t in self.outputs]

    def run(self, *buffers):
        n = len(self.inputs)
        for out, value in zip(buffers[n:], _as_list(self(*buffers[:n]), len(self.outputs))):
            out[...] = value


def evaluate_api(build=EvaluateModule):
    """pa's names with ``build`` (default :class:`EvaluateModule`) for pa.build, and pa.vjp made of it
    as pa.vjp is made of pa.build: a forward module of the outputs and the residuals
    (``pa.residuals(grads, heads, save)``), a backward module fed them."""
    from types import SimpleNamespace

    import polyad as pa

    def vjp_from_gradients(grads, heads, inputs, outputs=(), *, schedule="naive", save="reductions"):
        outs = list(outputs)
        saved = pa.residuals(grads, heads, save=save)
        order = outs + [r for r in saved if all(r is not y for y in outs)]
        fwd = EvaluateForward(build(order, inputs, schedule=schedule), inputs, outs, order)
        return fwd, EvaluateBackward(build(grads, list(inputs) + list(heads) + order, schedule=schedule), heads, grads)

    def vjp(output, inputs, wrt=None, *, schedule="naive", save="reductions"):
        inputs = list(inputs)
        wrt = [t for t in inputs if t.dtype.startswith("float")] if wrt is None else list(wrt)
        head = pa.placeholder(output.shape, dtype=output.dtype, name=f"d_{output.name}")
        return vjp_from_gradients(list(pa.differentiate(output, wrt, head)), [head], inputs, [output],
                                  schedule=schedule, save=save)

    return SimpleNamespace(placeholder=pa.placeholder, differentiate=pa.differentiate, build=build, vjp=vjp,
                           vjp_from_gradients=vjp_from_gradients)


class _EvaluateResiduals:
    """pa.vjp's Residuals, on the host: the inputs, and the values of the saved ``tensors``."""

    def __init__(self, inputs, values, tensors):
        self.inputs, self.values, self.tensors = list(inputs), list(values), tuple(tensors)


class EvaluateForward:
    """pa.vjp's forward over a Module look-alike: ``y, res = fwd(*arrays)`` (``y``: the outputs, a list)."""

    def __init__(self, module, inputs, outputs, saved):
        self.module, self.inputs, self.outputs, self.saved = module, list(inputs), list(outputs), list(saved)

    def __call__(self, *arrays):
        values = _as_list(self.module(*arrays), len(self.saved)) if self.saved else []
        ys = values[:len(self.outputs)]
        return (ys[0] if len(ys) == 1 else ys), _EvaluateResiduals(arrays, values, self.saved)

    def time(self, *arrays, repeat=1):
        return self.module.time(*arrays, repeat=repeat)


class EvaluateBackward:
    """pa.vjp's backward over a Module look-alike: ``grads = bwd(res, *heads)``."""

    def __init__(self, module, heads, grads):
        self.module, self.heads, self.grads = module, list(heads), list(grads)

    def __call__(self, res, *heads):
        return _as_list(self.module(*res.inputs, *heads, *res.values), len(self.grads))

    def time(self, res, *heads, repeat=1):
        return self.module.time(*res.inputs, *heads, *res.values, repeat=repeat)


def _array(arrays, p):
    """The array of placeholder ``p``, by name (reshaped to fit)."""
    if p.name not in arrays:
        raise KeyError(f"no data for placeholder {p.name!r}")
    a = arrays[p.name]
    return a.reshape(p.shape) if a.shape != p.shape else a


def _args_for(outputs, arrays, given=()):
    """The placeholders ``outputs`` read (not through ``given``), and the arrays to pass them, by name (reshaped to fit)."""
    from polyad.te.tensor import placeholders

    ins = placeholders(outputs, given)
    return ins, [_array(arrays, p) for p in ins]


def _as_list(out, n):
    if n == 1 and not isinstance(out, (list, tuple)):
        return [out]
    return list(out)


def graph_residuals(outputs):
    """What ``pa.vjp``'s forward saves for a gradient graph besides the outputs: ``pa.residuals`` with
    respect to its head (the placeholder named H), under the benchmarks' policy ``save="reductions"``
    (JAX's dots_saveable: what reduces is saved; the elementwise stages and data movement, a conv's
    padded input, an elementwise chain, are recomputed, as frameworks save a conv's input, not its
    padded copy).  The runner reads the saved tensors off ``fwd.saved``; tests/schedule's recorded
    graphs use this."""
    import polyad as pa
    from polyad.te.tensor import placeholders

    return pa.residuals(outputs, [p for p in placeholders(outputs) if p.name == "H"], save="reductions")


#: A warm build's time is the median of this many (one reading caught a collection or the machine's slow
#: mode: chain's warm pa.vjp read 137 and 176 ms in two rows of one run).
WARM_BUILDS = 3


def median_seconds(n, fn):
    """The median seconds of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _median_of(n, fn):
    """:func:`median_seconds` as a Cell."""
    return Cell(median_seconds(n, fn))


class PolyadColumns:
    """Builds and times one module from ``inputs`` (placeholders) to ``outputs``: the forward, or the
    gradient built alone from (inputs, H), which recomputes the forward values it reads."""

    def __init__(self, api, outputs, inputs, arrays, schedule):
        self.api, self.outputs, self.inputs, self.schedule = api, list(outputs), list(inputs), schedule
        self.args = [_array(arrays, p) for p in self.inputs]
        t0 = time.perf_counter()
        self.module = api.build(self.outputs, self.inputs, schedule=schedule)
        self.build_cold = time.perf_counter() - t0

    def build_warm(self):
        return _median_of(WARM_BUILDS, lambda: self.api.build(self.outputs, self.inputs, schedule=self.schedule))

    def results(self):
        return _as_list(self.module(*self.args), len(self.outputs))

    def run_n(self, n):
        return self.module.time(*self.args, repeat=n)

    def time(self, repeat, budget):
        return measure(self.run_n, repeat, budget)


class VJPColumns:
    """A backward as ``pa.vjp`` runs it: ``make()`` -> ``(fwd, bwd)`` (``pa.vjp``, or
    ``vjp_from_gradients`` for a hand-written gradient); the forward runs once, outside any timing,
    and leaves its residuals on the device; ``time`` times ``bwd`` alone on them."""

    def __init__(self, make, arrays):
        from polyad.pipeline.vjp import forget_gradients

        self.make = make
        forget_gradients()  # cold: another row's pa.vjp of the same graph would have left its gradient
        t0 = time.perf_counter()
        self.fwd, self.bwd = make()
        self.build_cold = time.perf_counter() - t0  # both modules (and pa.vjp's differentiation)
        self.args = [_array(arrays, p) for p in self.fwd.inputs]
        self.heads = [arrays["H"].reshape(h.shape) for h in self.bwd.heads]  # pa.vjp names it d_<output>
        _, self.res = self.fwd(*self.args)

    def saved_names(self):
        """What the forward saves for the backward besides its outputs (and the inputs)."""
        extra = self.fwd.saved[len(self.fwd.outputs):]
        return ", ".join(t.name for t in extra) or "none"

    def build_warm(self):
        return _median_of(WARM_BUILDS, self.make)

    def results(self):
        return _as_list(self.bwd(self.res, *self.heads), len(self.bwd.grads))

    def run_n(self, n):
        return self.bwd.time(self.res, *self.heads, repeat=n)

    def time(self, repeat, budget):
        return measure(self.run_n, repeat, budget)


def _upload(module, a):
    """``a`` on ``module``'s device, writable (a numpy copy for a Module look-alike)."""
    a = np.array(a, order="C")  # a copy (0-d stays 0-d)
    context = getattr(module, "context", None)
    if context is None:
        return a
    import pyopencl as cl

    return cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a.reshape(-1))


def sgd_update(api, params, schedule, lr=SGD_LR):
    """The module ``(params, grads) -> params - lr * grads`` of a training step, one stage per parameter."""
    import polyad as pa

    grads = [pa.placeholder(p.shape, dtype=p.dtype, name=f"g_{p.name}") for p in params]
    new = [pa.compute(p.shape, lambda *i, p=p, g=g: p[i] - g[i] * lr, name=f"sgd_{p.name}")
           for p, g in zip(params, grads)]
    return untuned(api.build, new, list(params) + grads, schedule=schedule)


def untuned(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for a graph the tuner does not tune (it tunes the autodiff backward): a tuned row's
    forward, hand-written gradient and SGD update are auto's where its log has no record of them, as the report
    says, without pa.tuned's warning on every tuned row."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"polyad: pa\.tuned\(.* has no record of", RuntimeWarning)
        return fn(*args, **kwargs)


class TrainingStep:
    """One SGD step on the device: ``passes(buffers, h)`` (the forward and the backward) -> the
    gradients' buffers, then ``update`` writes ``params - lr * grads`` into a second set of parameter
    buffers, which the next step reads (the two sets swap: a training loop, nothing crosses to the host).

    ``inputs``: the forward's placeholders, ``wrt``: the parameters among them (``update``'s order).
    """

    def __init__(self, passes, update, inputs, wrt, arrays):
        self.passes, self.update, self.wrt = passes, update, list(wrt)
        self.bufs = [_upload(update, _array(arrays, p)) for p in inputs]
        at = {id(p): i for i, p in enumerate(inputs)}
        self.slots = [at[id(p)] for p in wrt]
        self.spare = [_upload(update, _array(arrays, p)) for p in wrt]
        self.h = _upload(update, arrays["H"])

    def step(self):
        grads = self.passes(self.bufs, self.h)
        params = [self.bufs[i] for i in self.slots]
        self.update.run(*params, *grads, *self.spare)
        for i, b in zip(self.slots, self.spare):
            self.bufs[i] = b
        self.spare = params

    def parameters(self):
        """The current parameters, as numpy arrays (in ``wrt``'s order)."""
        bufs = [self.bufs[i] for i in self.slots]
        if not hasattr(self.update, "download"):
            return [np.array(b) for b in bufs]
        return [self.update.download(p, b) for p, b in zip(self.wrt, bufs)]

    def time(self, repeat, budget):
        return measure(wall_clock(self.step), repeat, budget)


def vjp_passes(fwd, bwd):
    """A training step's passes with ``pa.vjp``: the forward saves, the backward reads what it saved."""
    def passes(bufs, h):
        _, res = fwd(*bufs)
        return bwd(res, h)

    return passes


def recompute_passes(forward, backward):
    """A training step's passes with plain modules: the forward (the loss), then the gradient built from
    (inputs, H), which computes the forward values it reads again."""
    def passes(bufs, h):
        forward.run(*bufs, *forward.output_buffers(bufs))
        ins = [*bufs, h]
        grads = backward.output_buffers(ins)
        backward.run(*ins, *grads)
        return grads

    return passes


def _torch_tensors(arrays, device):
    """``arrays`` as torch tensors on ``device`` ("cpu", "cuda"): copies, so an in-place update leaves them be."""
    import torch

    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise RuntimeError(f"torch cannot use device {device!r} here (torch {torch.__version__}, "
                           f"cuda available: {torch.cuda.is_available()})")
    return {k: torch.from_numpy(np.array(v)).to(device) for k, v in arrays.items()}


def _synced(fn, device):
    """``fn`` followed by a wait for the device: CUDA launches return before the kernels have run, and a polyad
    backward returns after its own have."""
    if device == "cpu":
        return fn
    import torch

    def run():
        out = fn()
        torch.cuda.synchronize()
        return out

    return run


def torch_backward(case, arrays, device="cpu"):
    """torch autograd's backward of the workload on ``device``, its forward run once: a function returning the
    gradients (after the device has finished them)."""
    import torch

    t = _torch_tensors(arrays, device)
    for k in case.wrt:
        t[k].requires_grad_(True)
    y = case.torch_forward(t)
    h = t["H"].reshape(y.shape)
    wrt = [t[k] for k in case.wrt]
    return _synced(lambda: torch.autograd.grad(y, wrt, h, retain_graph=True), device)


def torch_column(case, arrays, ref, repeat, budget, device="cpu"):
    """(bwd ms, max rel error) of torch autograd: grad of the same forward with the same head."""
    backward = torch_backward(case, arrays, device)
    err = Cell(rel_error([g.cpu().numpy() for g in backward()], ref))
    return measure(wall_clock(backward), repeat, budget), err


def torch_step(case, arrays, lr=SGD_LR, device="cpu"):
    """A torch training step (forward, ``autograd.grad``, in-place SGD update) on copies of ``arrays`` on
    ``device``; returns (step, parameters)."""
    import torch

    t = _torch_tensors(arrays, device)
    params = [t[k].requires_grad_(True) for k in case.wrt]
    h = t["H"].reshape(case.out_shape)

    def step():
        grads = torch.autograd.grad(case.torch_forward(t), params, h)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(g, alpha=lr)

    return _synced(step, device), params


def torch_step_column(case, arrays, repeat, budget, device="cpu"):
    step, _ = torch_step(case, arrays, device=device)
    return measure(wall_clock(step), repeat, budget)


def numpy_column(case, arrays, ref, repeat, budget):
    _, saved = case.np_forward(arrays)
    h = arrays["H"]
    err = Cell(rel_error(case.np_backward(arrays, saved, h), ref))
    return measure(wall_clock(lambda: case.np_backward(arrays, saved, h)), repeat, budget), err


def reference(case, arrays):
    """The float64 numpy gradient every column is compared with."""
    a64 = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()}
    _, saved = case.np_forward(a64)
    return case.np_backward(a64, saved, a64["H"])


def _pair(res):
    return res if isinstance(res, tuple) else (res, res)


def run_workload(name, case, opts, api, log):
    """One row per schedule: a dict of column -> Cell."""
    from polyad.te.tensor import placeholders

    arrays = case.data(opts.seed)
    ref = reference(case, arrays)
    rep, budget = opts.repeat, opts.time_budget
    wl_budget = getattr(opts, "workload_budget", None)
    deadline = time.perf_counter() + wl_budget if wl_budget else None
    backwards = tuple(getattr(opts, "backward", None) or BACKWARDS)

    def go(fn, *args):
        """attempt(), unless the workload has used up its time: then the cell says it was skipped."""
        if deadline is not None and time.perf_counter() > deadline:
            return Cell.missing(f"skipped: workload over its {wl_budget:g} s budget (--workload-budget)")
        return attempt(fn, *args)

    tdev = getattr(opts, "torch_device", "cpu")
    shared = {}
    shared["numpy_ms"], shared["numpy_err"] = _pair(go(numpy_column, case, arrays, ref, rep, budget))
    if not opts.torch:
        shared["torch_ms"] = shared["torch_err"] = Cell.missing("disabled (--no-torch)")
    else:
        shared["torch_ms"], shared["torch_err"] = _pair(go(torch_column, case, arrays, ref, rep, budget, tdev))
    torch_run = None
    if opts.torch and shared["torch_ms"].ok:
        got = attempt(torch_backward, case, arrays, tdev)
        torch_run = None if isinstance(got, Cell) else wall_clock(got)
    if not getattr(case, "training", False):
        shared["torch_step_ms"] = Cell.missing(NOT_A_STEP)
    else:
        shared["torch_step_ms"] = go(torch_step_column, case, arrays, rep, budget, tdev) if opts.torch else \
            Cell.missing("disabled (--no-torch)")

    # Graphs, once per workload: the forward TE, its gradient, the hand-written gradient.
    graphs = {}

    def forward():
        ph = case.placeholders()
        return ph, case.forward_te(ph)

    fwd = attempt(forward)
    if isinstance(fwd, Cell):
        graphs["fwd"] = graphs["grad"] = diff = fwd
    else:
        ph, Y = fwd
        graphs.update(fwd=[Y], ins=placeholders([Y]), wrt=[ph[n] for n in case.wrt])
        graphs["H"] = H = api.placeholder(Y.shape, dtype=Y.dtype, name="H")

        def differentiate():
            t0 = time.perf_counter()
            grads = list(api.differentiate(Y, graphs["wrt"], H))
            return grads, Cell(time.perf_counter() - t0)

        graphs["grad"], diff = _pair(attempt(differentiate))
    graphs["hand"] = attempt(lambda: case.hand_te(case.placeholders()))
    shared["roofline_ms"], shared["roofline"] = _pair(go(roofline_column, graphs, api))

    rows, bwd_runs = [], {}
    for sched in opts.schedules:
        row = {"workload": name, "schedule": sched, "diff_s": diff, **shared}
        spec = schedule_spec(sched)
        if sched == "tuned":
            spec, tuning = tuned_spec(name, case, opts, log)
            row.update(tuning)
        row.update(_polyad_row(case, graphs, arrays, ref, spec, api, rep, budget, go, backwards, torch_run,
                               keep=bwd_runs.setdefault(sched, {})))
        row["bwd_over_fwd"] = ratio(row["bwd_ms"], row["fwd_ms"], "bwd", "fwd")
        row["bwd_over_roofline"] = ratio(row["bwd_ms"], row["roofline_ms"], "bwd", "roofline")
        row["autodiff_over_hand"] = ratio(row["bwd_ms"], row["hand_ms"], "bwd", "hand TE")
        row["vs_numpy"] = ratio(row["bwd_ms"], row["numpy_ms"], "bwd", "numpy")
        row["vs_torch"] = ratio(row["bwd_ms"], row["torch_ms"], "bwd", "torch")
        row["recompute_vs_torch"] = ratio(row["bwd_recompute_ms"], row["torch_ms"], "bwd recompute", "torch")
        for key, step in (("step_vs_torch", "step_ms"), ("step_recompute_vs_torch", "step_recompute_ms")):
            row[key] = Cell.missing(NOT_A_STEP) if row[step].na == NOT_A_STEP else \
                ratio(row[step], row["torch_step_ms"], step.replace("_ms", "").replace("_", " "), "torch step")
        rows.append(row)
        log(_progress(row))
    # tuned against auto, run by run: the rows above were timed minutes apart (conv2d_3x3's tuned row read
    # 3.78 ms against auto's 2.25 in one run, 0.86x in another process)
    for row in rows:
        if row["schedule"] == "tuned":
            cols = (bwd_runs.get("auto", {}).get("bwd"), bwd_runs["tuned"].get("bwd"))
            row["tuned_vs_auto"] = Cell.missing("needs --schedule auto tuned and their vjp backwards") \
                if None in cols else same_program_noted(
                    go(lambda: interleaved_ratio(*(_modules(c, arrays) for c in cols), rep, budget)), *cols)
    return rows


def roofline_column(graphs, api):
    """(the vjp backward's roofline in ms, what bounds it): :mod:`polyad.bench.roofline` on the calibrated model of
    the device the polyad columns build for (``api.device_model``; a backend without one has no roofline)."""
    from .roofline import roofline, vjp_inputs

    model_of = getattr(api, "device_model", None)
    if model_of is None:
        return Cell.missing("no device model on this backend"), ""
    for key in ("fwd", "grad"):
        if isinstance(graphs[key], Cell):
            return graphs[key], ""
    grads = graphs["grad"]
    r = roofline(grads, vjp_inputs(grads, graphs["H"], graphs["fwd"][0], graphs["ins"]), model_of())
    return Cell(r.seconds * 1e3), str(r)


def same_program_noted(cell, auto, tuned):
    """``cell`` (tuned/auto), with a note when the two backwards (VJPColumns) run the same OpenCL program: the
    ratio is then one between modules of one program (chain's read 1.01 in three runs where the tuner had kept
    auto's schedule)."""
    def source(cols):
        return getattr(getattr(getattr(cols, "bwd", None), "module", None), "source", None)

    if cell.ok and source(auto) is not None and source(auto) == source(tuned):
        return replace(cell, note=f"{cell.note}; tuned and auto run the same backward program")
    return cell


#: rounds of :func:`interleaved_ratio`
INTERLEAVED_ROUNDS = 10
#: modules a side in the benchmark's run-by-run ratio: modules of one program read a few percent apart (dense's
#: backward: 1.44 ms in one, 1.74-1.94 ms in three built beside it), which one module a side would keep
INTERLEAVED_MODULES = 3


def interleaved_ratio(run_a, run_b, repeat=5, budget_s=30.0, rounds=INTERLEAVED_ROUNDS):
    """``run_b``'s time over ``run_a``'s, run by run: ``rounds`` rounds of ``repeat`` pairs, one run of each a
    pair, the first of a pair alternating; the median of the pairs' ratios.  This VM's speed changes in bursts
    of seconds, which a pair (two runs, milliseconds apart) shares.  Either side may be a list of ``run_n``
    (modules of one schedule): the pairs then go through every combination of the two sides' in turn.  Fewer
    rounds where they would exceed ``budget_s``."""
    side_a = list(run_a) if isinstance(run_a, (list, tuple)) else [run_a]
    side_b = list(run_b) if isinstance(run_b, (list, tuple)) else [run_b]
    per_pair = statistics.mean(map(_warm_up, side_a)) + statistics.mean(map(_warm_up, side_b))
    k = max(1, min(rounds, int(budget_s // max(per_pair * repeat, 1e-9))))
    ratios = []
    na, nb = len(side_a), len(side_b)
    for i in range(k * repeat):
        ra, rb = side_a[i % na], side_b[(i + i // na) % nb]  # b turns against a each pass over a
        if i % 2:
            b = _as_times(rb(1))[0]
            a = _as_times(ra(1))[0]
        else:
            a = _as_times(ra(1))[0]
            b = _as_times(rb(1))[0]
        ratios.append(b / a)
    modules = f" over {na} and {nb} modules" if na * nb > 1 else ""
    return Cell(statistics.median(ratios), note=f"median of {len(ratios)} run-by-run ratios{modules}, alternating" + (
        f" (time budget {budget_s:g} s)" if k < rounds else ""))


def _modules(cols, arrays, n=INTERLEAVED_MODULES):
    """``run_n`` of ``cols`` and of ``n - 1`` more modules of the same backward (pa.vjp again: the kernels come
    from the cache)."""
    return [cols.run_n] + [VJPColumns(cols.make, arrays).run_n for _ in range(n - 1)]


def tuned_spec(name, case, opts, log):
    """``--schedule tuned``: (the schedule, its tuning cells).  With ``--tuning-log`` that log's records
    (``pa.tuned``); with ``--tune-budget S``, ``pa.tune`` on the workload's backward (pa.vjp's, as ``bwd ms``
    times it) for about S seconds first, into ``OUT/tuning/NAME.jsonl`` (resumed when it is there)."""
    import polyad as pa

    log_path = getattr(opts, "tuning_log", None)
    budget = getattr(opts, "tune_budget", None)
    if log_path:
        missing = Cell.missing(f"not tuned in this run (--tuning-log {log_path})")
        return pa.tuned(log_path), {"tune_s": missing, "tune_trials": missing, "tune_speedup": missing,
                                    "tune_trials_90": missing}
    if not budget:
        raise ValueError("--schedule tuned needs --tune-budget SECONDS or --tuning-log PATH")
    from .tuning import backward_graph

    path = Path(opts.out) / "tuning" / f"{name}.jsonl"

    def tune():
        g = backward_graph(name, case=case, seed=opts.seed)
        t0 = time.perf_counter()
        res = pa.tune(g.outputs, g.inputs, data=g.data, trials=100_000, time_budget=budget, log=path, name=name)
        return res, time.perf_counter() - t0

    got = attempt(tune)
    if isinstance(got, Cell):
        return pa.tuned(path) if path.exists() else "auto", dict.fromkeys(
            ("tune_s", "tune_trials", "tune_speedup", "tune_trials_90"), got)
    res, secs = got
    log(f"{name:>16}: tuned {res.summary()}")
    return pa.tuned(path), {"tune_s": Cell(secs), "tune_trials": Cell(float(res.trials)),
                            "tune_speedup": Cell(res.speedup), "tune_trials_90": Cell(float(res.trials_to(0.9)))}


def schedule_spec(name):
    """What a schedule column names: ``naive``, ``auto``, ``auto@MODEL.json`` (the auto-scheduler on a
    recorded device model: the same run compares it with the device's own calibrated ``auto``), or a
    schedule / tuning-log path."""
    if isinstance(name, str) and name.startswith("auto@"):
        from polyad.schedule import Auto, DeviceModel

        return Auto(DeviceModel.load(name[len("auto@"):]))
    return name


def _polyad_row(case, graphs, arrays, ref, sched, api, rep, budget, go=attempt, backwards=BACKWARDS,
                torch_run=None, keep=None):
    """The polyad cells of one schedule: the forward, pa.vjp's backward, the recomputing backward, the
    hand-written gradient (through the same vjp split), and for a training step both steps.

    ``torch_run`` (a ``run_n`` of torch's backward, or None): the two backwards and torch's are then timed
    side by side (:func:`paired`), and the row's ``torch_ms`` is that measurement's.  ``keep`` (a dict, or
    None) gets ``"bwd"``: pa.vjp's backward (its :class:`VJPColumns`), to time against another schedule's later."""
    row = {}
    side_by_side = []  # (row key, run_n) of the backwards timed with torch's

    def failed(*cells):
        return next((c for c in cells if isinstance(c, Cell)), None)

    def not_measured():
        return Cell.missing(f"not measured (--backward {' '.join(backwards)})")

    def measured(cols, err_key, key=None):
        """build / error / time cells of a VJPColumns or PolyadColumns (or its failure); with ``key`` and
        torch's backward, the time comes later, side by side with torch's."""
        if isinstance(cols, Cell):
            cells = dict.fromkeys(("build_cold_s", "build_warm_s", "err", "ms"), cols)
        else:
            cells = {"build_cold_s": Cell(cols.build_cold), "build_warm_s": go(cols.build_warm),
                     "err": attempt(lambda: Cell(rel_error(cols.results(), ref)))}
            if key is not None and torch_run is not None:
                cells["ms"] = Cell.missing("not timed")  # replaced by the side-by-side rounds
                side_by_side.append((key, cols.run_n))
            else:
                cells["ms"] = go(cols.time, rep, budget)
        row[err_key] = cells["err"]
        return cells

    f = failed(graphs["fwd"]) or untuned(go, PolyadColumns, api, graphs["fwd"], graphs.get("ins"), arrays, sched)
    row["fwd_ms"] = f if isinstance(f, Cell) else go(f.time, rep, budget)

    # pa.vjp: its forward saves the residuals on the device, its backward (bwd ms) reads them
    if "vjp" in backwards:
        v = failed(graphs["fwd"], graphs["grad"]) or go(VJPColumns, lambda: api.vjp(
            graphs["fwd"][0], graphs["ins"], graphs["wrt"], schedule=sched, save="reductions"), arrays)
        cells = measured(v, "err", "bwd_ms")
        row["bwd_ms"] = cells["ms"]
        row["build_cold_s"], row["build_warm_s"] = cells["build_cold_s"], cells["build_warm_s"]
        row["residuals"] = v.saved_names() if isinstance(v, VJPColumns) else f"n/a: {v.na}"
        if keep is not None and isinstance(v, VJPColumns):
            keep["bwd"] = v
    else:
        v = None
        for k in ("bwd_ms", "build_cold_s", "build_warm_s", "err"):
            row[k] = not_measured()
        row["residuals"] = "n/a: not measured"

    # the same gradient built from (forward inputs, H) alone: it recomputes the forward it reads
    if "recompute" in backwards:
        r = failed(graphs["fwd"], graphs["grad"]) or go(
            PolyadColumns, api, graphs["grad"], graphs["ins"] + [graphs["H"]], arrays, sched)
        cells = measured(r, "recompute_err", "bwd_recompute_ms")
        row["bwd_recompute_ms"] = cells["ms"]
        row["recompute_build_cold_s"], row["recompute_build_warm_s"] = cells["build_cold_s"], cells["build_warm_s"]
    else:
        r = None
        for k in ("bwd_recompute_ms", "recompute_err", "recompute_build_cold_s", "recompute_build_warm_s"):
            row[k] = not_measured()
    # the hand-written gradient, split and fed as pa.vjp splits and feeds the autodiff one, and timed in the same
    # rounds: timed alone after them, it read 0.67x the autodiff gradient on conv2d_dilated, whose two programs
    # are the same blocks (0.43 against 0.45 ms profiled stage by stage)
    def hand_vjp():
        from polyad.te.tensor import placeholders

        g = graphs["hand"]
        (head,) = [p for p in placeholders(g) if p.name == "H"]
        return api.vjp_from_gradients(g, [head], [p for p in placeholders(g) if p is not head],
                                      schedule=sched, save="reductions")

    h = failed(graphs["hand"]) or untuned(go, VJPColumns, hand_vjp, arrays)
    cells = measured(h, "hand_err", "hand_ms")
    row["hand_ms"], row["hand_build_cold_s"], row["hand_build_warm_s"] = \
        cells["ms"], cells["build_cold_s"], cells["build_warm_s"]
    row["hand_residuals"] = h.saved_names() if isinstance(h, VJPColumns) else f"n/a: {h.na}"

    if side_by_side:
        keys = [k for k, _ in side_by_side] + ["torch_ms"]
        cells = go(paired, [run for _, run in side_by_side] + [torch_run], rep, budget)
        for k, c in zip(keys, cells if isinstance(cells, list) else [cells] * len(keys)):
            row[k] = c

    # a training step: forward, backward, SGD update, with each backward
    if not getattr(case, "training", False):
        row["step_ms"] = row["step_recompute_ms"] = Cell.missing(NOT_A_STEP)
        return row
    update = failed(graphs["fwd"]) or go(sgd_update, api, graphs["wrt"], sched)
    steps = {"step_ms": ("vjp", [v], lambda: vjp_passes(v.fwd, v.bwd)),
             "step_recompute_ms": ("recompute", [f, r], lambda: recompute_passes(f.module, r.module))}
    for key, (which, needs, passes) in steps.items():
        if which not in backwards:
            row[key] = not_measured()
            continue
        missing = failed(update, *needs)
        s = missing or go(TrainingStep, passes(), update, graphs["ins"], graphs["wrt"], arrays)
        row[key] = s if isinstance(s, Cell) else go(s.time, rep, budget)
    return row


def _progress(row):
    def f(c):
        return f"{c.value:.3g}" if c.ok else "n/a"

    step = "" if row["step_ms"].na == NOT_A_STEP else \
        f"; step {f(row['step_ms'])} ms (recompute {f(row['step_recompute_ms'])}), torch step {f(row['torch_step_ms'])}"
    return (f"{row['workload']:>16} [{row['schedule']}] fwd {f(row['fwd_ms'])} ms, bwd (vjp) {f(row['bwd_ms'])} ms "
            f"(recompute {f(row['bwd_recompute_ms'])} ms), hand TE {f(row['hand_ms'])} ms, "
            f"numpy {f(row['numpy_ms'])} ms, torch {f(row['torch_ms'])} ms{step}")


# ----------------------------------------------------------------------------- machine

def machine_info():
    info = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        info["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    except Exception:  # noqa: BLE001
        info["torch"] = "not installed"
    try:
        import pyopencl as cl

        info["opencl"] = "; ".join(f"{p.name}: {d.name}" for p in cl.get_platforms() for d in p.get_devices())
    except Exception as exc:  # noqa: BLE001
        info["opencl"] = f"n/a: {_reason(exc)}"
    if os.environ.get("POLYAD_DEVICE"):
        info["POLYAD_DEVICE"] = os.environ["POLYAD_DEVICE"]
    try:
        from importlib.metadata import version

        info["polyad"] = version("polyad")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a bare checkout on sys.path)
        info["polyad"] = "unknown"
    info["commit"] = _checkout_commit()
    return info


def _checkout_commit():
    """The short commit of the source checkout polyad is imported from; "none" for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return "none (installed package)"
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


# ----------------------------------------------------------------------------- the run

def run(opts, api=None, log=None):
    """Run the selected workloads; returns {"machine", "options", "backward" (what each measured backward is),
    "rows"} (rows of Cells)."""
    from .workloads import WORKLOADS

    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    api = api or _polyad_api(getattr(opts, "backend", "opencl"))
    rows = []
    for name in opts.workloads:
        t0 = time.perf_counter()
        case = WORKLOADS[name].instantiate(batch=opts.batch)
        rows += run_workload(name, case, opts, api, log)
        log(f"{name:>16}: {time.perf_counter() - t0:.1f} s")
    options = {k: v for k, v in vars(opts).items() if k in (
        "workloads", "schedules", "backward", "batch", "repeat", "time_budget", "workload_budget", "seed", "torch",
        "torch_device", "backend", "tune_budget", "tuning_log")}
    backward = {b: BACKWARD_NAMES[b] for b in getattr(opts, "backward", None) or BACKWARDS}
    return {"machine": machine_info(), "options": options, "backward": backward, "rows": rows}


def to_json(result):
    def enc(v):
        return asdict(v) if isinstance(v, Cell) else v

    return json.dumps({**result, "rows": [{k: enc(v) for k, v in r.items()} for r in result["rows"]]}, indent=1)


def add_arguments(p):
    """The options of ``polyad bench`` and ``python -m polyad.bench``."""
    from .workloads import WORKLOADS

    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS), metavar="NAME",
                   help="workloads to run (default: all): " + " ".join(WORKLOADS))
    p.add_argument("--schedule", "--schedules", dest="schedules", nargs="+", default=["naive"], metavar="SCHEDULE",
                   help="polyad schedules, one row each (naive, auto, auto@MODEL.json: auto on a recorded device "
                        "model, tuned: see --tune-budget and --tuning-log); default naive")
    p.add_argument("--tune-budget", type=float, default=None, metavar="SECONDS",
                   help="with --schedule tuned: tune each workload's backward for about this long first (pa.tune, "
                        "logged to OUT/tuning/NAME.jsonl)")
    p.add_argument("--tuning-log", default=None, metavar="PATH",
                   help="with --schedule tuned: apply this tuning log (pa.tuned) instead of tuning")
    p.add_argument("--backward", nargs="+", default=list(BACKWARDS), choices=list(BACKWARDS), metavar="KIND",
                   help="which polyad backwards to measure: vjp (pa.vjp's backward on the residuals its forward "
                        "left on the device) and/or recompute (pa.build(pa.differentiate(...), inputs + [H]): "
                        "recomputes the forward it reads); default both, side by side")
    p.add_argument("--batch", type=int, default=None,
                   help="replace the batch size of batched workloads (a reduced batch for quick runs)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per measurement after a warm-up (median; >= 5 "
                   "for the published table)")
    p.add_argument("--time-budget", type=float, default=30.0,
                   help="seconds one measurement may take; fewer runs beyond it, said in the cell (default 30)")
    p.add_argument("--workload-budget", type=float, default=900.0,
                   help="seconds one workload may take in all; later builds and measurements of it are skipped "
                        "with an n/a cell (default 900; 0 = no limit)")
    p.add_argument("--backend", choices=["opencl", "evaluate"], default="opencl",
                   help="opencl: pa.build (default); evaluate: pa.evaluate stands in for pa.build, to check the "
                        "error columns without OpenCL (its times are not polyad's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-torch", dest="torch", action="store_false", help="skip the PyTorch column")
    p.add_argument("--torch-device", default="cpu", metavar="DEVICE",
                   help="where the PyTorch column runs: cpu (default) or cuda (to set polyad on a GPU against "
                        "torch on the same GPU; each run waits for the device)")
    p.add_argument("--no-plot", dest="plot", action="store_false",
                   help="skip the plots (PNG files, and in the HTML page); they need matplotlib")
    p.add_argument("--out", type=Path, default=RESULTS_DIR,
                   help=f"folder for the report (markdown, JSON, PNG, HTML); default ./{RESULTS_DIR}, created if needed")
    p.add_argument("--keep-cache", action="store_true",
                   help="use the usual kernel cache (default: a fresh POLYAD_CACHE_DIR, so 'cold' builds are cold; "
                        "the device's probe and calibration are kept, as every run would otherwise re-measure them "
                        "and schedule on its own measurement)")
    return p


def main(argv=None, prog="python -m polyad.bench"):
    p = add_arguments(argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0]))
    return run_cli(p.parse_args(argv))


def run_cli(opts):
    """Run with parsed options, write markdown + JSON (+ PNG) under opts.out, print the table."""
    from . import report

    if opts.repeat < 1:
        raise SystemExit("--repeat must be >= 1")
    if opts.batch is not None and opts.batch < 1:
        raise SystemExit("--batch must be >= 1")
    from ..runtime.records import cache_dir

    with tempfile.TemporaryDirectory(prefix="polyad-bench-cache-") as tmp:
        old = {k: os.environ.get(k) for k in ("POLYAD_CACHE_DIR", "POLYAD_DEVICE_CACHE_DIR")}
        if not opts.keep_cache:
            # cold builds, on the device as this machine knows it: a fresh calibration per run moved the
            # auto schedules of tiny stages (11% in dram_gbs, 29% in launch_s between three runs)
            os.environ.setdefault("POLYAD_DEVICE_CACHE_DIR", os.path.join(cache_dir(), "devices"))
            os.environ["POLYAD_CACHE_DIR"] = tmp
        try:
            result = run(opts)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    paths = report.write(result, opts.out, plot=opts.plot)
    print(report.markdown(result))
    print(where_written(paths))
    return 0


def where_written(paths):
    """What a run says about its report: the folder, each file, and the page to open in a browser."""
    paths = [Path(p).resolve() for p in paths]
    lines = [f"Report written to {paths[0].parent}/:"] + [f"  {p.name}" for p in paths]
    page = [p for p in paths if p.suffix == ".html"]
    if page:
        lines.append(f"Open {page[0].as_uri()} in a browser for the table and the plots.")
    return "\n".join(lines)

