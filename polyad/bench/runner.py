"""The benchmark harness: ``polyad bench`` (also ``python -m polyad.bench``).

For each workload, in one process so the ratios are fair: polyad forward and
backward (autodiff) per schedule, the hand-written TE gradient on the same
backend and schedule, hand-written numpy, PyTorch autograd when torch is
importable, build times, and every gradient's max relative error against a
float64 numpy reference.  A column that cannot run (an op or the runtime not
there yet, torch missing, a build error) becomes an "n/a: <reason>" cell; it
never stops the run.

What is timed:
* polyad backward (bwd ms, hand TE bwd ms): the backward alone, as a framework
  runs it: a Module built from the gradient graph with inputs (forward inputs,
  H, residuals) -> gradients, where residuals = ``pa.residuals(grads, [H],
  save="reductions")`` (the forward values the gradient reads, JAX's
  partial-evaluation residuals, under JAX's dots_saveable policy: reductions are
  saved, elementwise stages and pads are recomputed)
  are computed beforehand by a forward Module of the same schedule, outside the
  timing.  The hand-written TE graph has its own forward stages; its residuals
  are found the same way.
* bwd recompute ms: the gradient built from (forward inputs, H) alone, which
  recomputes the forward intermediates it needs (as TVM's te.gradient does).
* numpy and torch backward: the backward pass alone, with the forward
  activations saved beforehand (torch: ``autograd.grad(y, inputs, H)``).
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
from dataclasses import asdict, dataclass
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

def measure(run_n, repeat=5, budget_s=30.0):
    """Median milliseconds of ``run_n(n)`` (-> n per-run seconds), after a warm-up run.

    If ``repeat`` runs would exceed ``budget_s`` (judged by the warm-up), fewer
    are taken and the cell says so.
    """
    probe = _as_times(run_n(1))
    per_run = max(statistics.median(probe), 1e-9)
    n = repeat
    note = ""
    if per_run * repeat > budget_s:
        n = max(1, int(budget_s // per_run))
        note = f"{n} run{'s' if n > 1 else ''} (time budget {budget_s:g} s)"
    times = _as_times(run_n(n))
    return Cell(1e3 * statistics.median(times), note=note)


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

def _polyad_api(backend="opencl"):
    """What the polyad columns call: pa itself, or pa with build() replaced by the numpy oracle."""
    import polyad as pa

    if backend == "opencl":
        return pa
    if backend == "evaluate":
        from types import SimpleNamespace

        return SimpleNamespace(placeholder=pa.placeholder, differentiate=pa.differentiate, build=EvaluateModule)
    raise ValueError(f"unknown backend {backend!r}")


class EvaluateModule:
    """A Module look-alike over pa.evaluate (``--backend evaluate``).

    It checks gradients (the error columns) on the real workloads without
    OpenCL; its times are the numpy interpreter's, not polyad's kernels.
    """

    def __init__(self, outputs, inputs, schedule="naive"):
        self.outputs, self.inputs, self.schedule = list(outputs), list(inputs), schedule

    def __call__(self, *arrays):
        import polyad as pa

        out = pa.evaluate(self.outputs, dict(zip(self.inputs, arrays)))
        return out[0] if len(self.outputs) == 1 else out

    def time(self, *arrays, repeat=1):
        return wall_clock(lambda: self(*arrays))(repeat)


def _args_for(outputs, arrays, given=()):
    """The placeholders ``outputs`` read (not through ``given``), and the arrays to pass them, by name (reshaped to fit)."""
    from polyad.te.tensor import placeholders

    ins = placeholders(outputs, given)
    args = []
    for p in ins:
        if p.name not in arrays:
            raise KeyError(f"no data for placeholder {p.name!r}")
        a = arrays[p.name]
        args.append(a.reshape(p.shape) if a.shape != p.shape else a)
    return ins, args


def _as_list(out, n):
    if n == 1 and not isinstance(out, (list, tuple)):
        return [out]
    return list(out)


def graph_residuals(outputs):
    """``pa.residuals`` of a gradient graph with respect to its head (the placeholder named H)."""
    import polyad as pa
    from polyad.te.tensor import placeholders

    # JAX's dots_saveable policy: save what reduces, recompute the elementwise and the data movement (a
    # conv's padded input, an elementwise chain), as frameworks save a conv's input, not its padded copy
    return pa.residuals(outputs, [p for p in placeholders(outputs) if p.name == "H"], save="reductions")


class PolyadColumns:
    """Builds and times one graph (forward, autodiff gradient or hand-written gradient).

    With ``residuals`` (computed tensors of the graph, see :func:`graph_residuals`), a
    forward module of the same schedule computes them first, outside any timing, and
    the module takes them as inputs: it runs the backward alone.
    """

    def __init__(self, api, outputs, arrays, schedule, residuals=()):
        self.api, self.outputs, self.schedule = api, list(outputs), schedule
        self.residuals = list(residuals)
        self.inputs, self.args = _args_for(self.outputs, arrays, self.residuals)
        if self.residuals:
            fwd_ins, fwd_args = _args_for(self.residuals, arrays)
            fwd = api.build(self.residuals, fwd_ins, schedule=schedule)
            saved = _as_list(fwd(*fwd_args), len(self.residuals))
            self.inputs += self.residuals
            self.args += [np.asarray(a) for a in saved]
        t0 = time.perf_counter()
        self.module = api.build(self.outputs, self.inputs, schedule=schedule)
        self.build_cold = time.perf_counter() - t0

    def build_warm(self):
        t0 = time.perf_counter()
        self.api.build(self.outputs, self.inputs, schedule=self.schedule)
        return Cell(time.perf_counter() - t0)

    def results(self):
        return _as_list(self.module(*self.args), len(self.outputs))

    def time(self, repeat, budget):
        return measure(lambda n: self.module.time(*self.args, repeat=n), repeat, budget)


def torch_column(case, arrays, ref, repeat, budget):
    """(bwd ms, max rel error) of torch autograd: grad of the same forward with the same head."""
    import torch

    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    for k in case.wrt:
        t[k].requires_grad_(True)
    y = case.torch_forward(t)
    h = t["H"].reshape(y.shape)
    wrt = [t[k] for k in case.wrt]

    def backward():
        return torch.autograd.grad(y, wrt, h, retain_graph=True)

    err = Cell(rel_error([g.numpy() for g in backward()], ref))
    return measure(wall_clock(backward), repeat, budget), err


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


def run_workload(name, case, opts, api, log):
    """One row per schedule: a dict of column -> Cell."""
    arrays = case.data(opts.seed)
    ref = reference(case, arrays)
    rep, budget = opts.repeat, opts.time_budget
    wl_budget = getattr(opts, "workload_budget", None)
    deadline = time.perf_counter() + wl_budget if wl_budget else None

    def go(fn, *args):
        """attempt(), unless the workload has used up its time: then the cell says it was skipped."""
        if deadline is not None and time.perf_counter() > deadline:
            return Cell.missing(f"skipped: workload over its {wl_budget:g} s budget (--workload-budget)")
        return attempt(fn, *args)

    shared = {}
    res = go(numpy_column, case, arrays, ref, rep, budget)
    shared["numpy_ms"], shared["numpy_err"] = res if isinstance(res, tuple) else (res, res)
    if opts.torch:
        res = go(torch_column, case, arrays, ref, rep, budget)
        shared["torch_ms"], shared["torch_err"] = res if isinstance(res, tuple) else (res, res)
    else:
        shared["torch_ms"] = shared["torch_err"] = Cell.missing("disabled (--no-torch)")

    # Graphs, once per workload: the forward TE, its gradient, the hand-written gradient.
    graphs = {}

    def forward():
        ph = case.placeholders()
        return ph, case.forward_te(ph)

    fwd = attempt(forward)
    if isinstance(fwd, Cell):
        graphs["fwd"] = graphs["grad"] = fwd
        diff = fwd
    else:
        ph, Y = fwd
        graphs["fwd"] = [Y]
        H = api.placeholder(Y.shape, dtype=Y.dtype, name="H")

        def differentiate():
            t0 = time.perf_counter()
            grads = list(api.differentiate(Y, [ph[n] for n in case.wrt], H))
            return grads, Cell(time.perf_counter() - t0)

        res = attempt(differentiate)
        graphs["grad"], diff = res if isinstance(res, tuple) else (res, res)
    hand = attempt(lambda: case.hand_te(case.placeholders()))
    graphs["hand"] = hand
    # what each backward is fed from the forward (computed once, fed under every schedule)
    for key in ("grad", "hand"):
        g = graphs[key]
        graphs[key + "_res"] = g if isinstance(g, Cell) else attempt(graph_residuals, g)
    residual_names = {}
    for key, col in (("grad", "residuals"), ("hand", "hand_residuals")):
        r = graphs[key + "_res"]
        residual_names[col] = (", ".join(t.name for t in r) or "none") if isinstance(r, list) else f"n/a: {r.na}"

    rows = []
    for sched in opts.schedules:
        row = {"workload": name, "schedule": sched, "diff_s": diff, **shared, **residual_names}
        row.update(_polyad_row(graphs, arrays, ref, schedule_spec(sched), api, rep, budget, go))
        row["bwd_over_fwd"] = ratio(row["bwd_ms"], row["fwd_ms"], "bwd", "fwd")
        row["autodiff_over_hand"] = ratio(row["bwd_ms"], row["hand_ms"], "bwd", "hand TE")
        row["vs_numpy"] = ratio(row["bwd_ms"], row["numpy_ms"], "bwd", "numpy")
        row["vs_torch"] = ratio(row["bwd_ms"], row["torch_ms"], "bwd", "torch")
        rows.append(row)
        log(_progress(row))
    return rows


def schedule_spec(name):
    """What a schedule column names: ``naive``, ``auto``, ``auto@MODEL.json`` (the auto-scheduler on a
    recorded device model: the same run compares it with the device's own calibrated ``auto``), or a
    schedule / tuning-log path."""
    if isinstance(name, str) and name.startswith("auto@"):
        from polyad.schedule import Auto, DeviceModel

        return Auto(DeviceModel.load(name[len("auto@"):]))
    return name


def _polyad_row(graphs, arrays, ref, sched, api, rep, budget, go=attempt):
    row = {}

    def module(outputs, residuals=()):
        if isinstance(outputs, Cell):
            return outputs
        if isinstance(residuals, Cell):
            return residuals
        return go(PolyadColumns, api, outputs, arrays, sched, residuals)

    f = module(graphs["fwd"])
    row["fwd_ms"] = f if isinstance(f, Cell) else go(f.time, rep, budget)

    for key, prefix in (("grad", ""), ("hand", "hand_")):
        # the backward fed with its residuals: what bwd ms, the errors and the build times are of
        m = module(graphs[key], graphs.get(key + "_res", ()))
        if isinstance(m, Cell):
            cells = dict.fromkeys(("ms", "err", "build_cold_s", "build_warm_s"), m)
        else:
            cells = {
                "build_cold_s": Cell(m.build_cold),
                "build_warm_s": go(m.build_warm),
                "err": attempt(lambda: Cell(rel_error(m.results(), ref))),
                "ms": go(m.time, rep, budget),
            }
        row[prefix + ("bwd_ms" if not prefix else "ms")] = cells["ms"]
        for k in ("err", "build_cold_s", "build_warm_s"):
            row[prefix + k] = cells[k]
        if key == "grad":
            # the same gradient from (forward inputs, H) alone: it recomputes the forward it reads
            if isinstance(m, PolyadColumns) and not m.residuals:
                row["bwd_recompute_ms"] = cells["ms"]  # nothing to feed: the same module
            else:
                r = module(graphs[key])
                row["bwd_recompute_ms"] = r if isinstance(r, Cell) else go(r.time, rep, budget)
    return row


def _progress(row):
    def f(c):
        return f"{c.value:.3g}" if c.ok else "n/a"

    return (f"{row['workload']:>16} [{row['schedule']}] fwd {f(row['fwd_ms'])} ms, bwd {f(row['bwd_ms'])} ms "
            f"(recompute {f(row['bwd_recompute_ms'])} ms), hand TE {f(row['hand_ms'])} ms, "
            f"numpy {f(row['numpy_ms'])} ms, torch {f(row['torch_ms'])} ms")


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
    """Run the selected workloads; returns {"machine", "options", "rows"} (rows of Cells)."""
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
        "workloads", "schedules", "batch", "repeat", "time_budget", "workload_budget", "seed", "torch", "backend")}
    return {"machine": machine_info(), "options": options, "rows": rows}


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
                        "model, or a tuning-log path); default naive")
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
    p.add_argument("--no-plot", dest="plot", action="store_false",
                   help="skip the plots (PNG files, and in the HTML page); they need matplotlib")
    p.add_argument("--out", type=Path, default=RESULTS_DIR,
                   help=f"folder for the report (markdown, JSON, PNG, HTML); default ./{RESULTS_DIR}, created if needed")
    p.add_argument("--keep-cache", action="store_true",
                   help="use the usual kernel cache (default: a fresh POLYAD_CACHE_DIR, so 'cold' builds are cold)")
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
    with tempfile.TemporaryDirectory(prefix="polyad-bench-cache-") as tmp:
        old = os.environ.get("POLYAD_CACHE_DIR")
        if not opts.keep_cache:
            os.environ["POLYAD_CACHE_DIR"] = tmp
        try:
            result = run(opts)
        finally:
            if not opts.keep_cache:
                if old is None:
                    os.environ.pop("POLYAD_CACHE_DIR", None)
                else:
                    os.environ["POLYAD_CACHE_DIR"] = old
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

