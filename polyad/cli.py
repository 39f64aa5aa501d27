"""The ``polyad`` command: demo, devices [--calibrate], doctor, show, tune, bench."""

import argparse
import sys


def _demo(args):
    from .demo import run

    return run(args.batch, args.n_in, args.n_out, schedule=args.schedule)


def _devices(args):
    from .errors import DeviceError
    from .pipeline import list_devices

    try:
        if args.calibrate:
            return _calibrate(args.refresh)
        lines = list_devices()
    except DeviceError as e:
        print(e)
        return 1
    print("\n".join(lines))
    print("(* the default; pick another with $POLYAD_DEVICE or device=, by a substring of 'platform | device')")
    return 0


def _calibrate(refresh):
    """Every device's probe and calibration: the figures, where they are cached, measured now or cached."""
    from .pipeline import calibration, capabilities, model_of_calibration, select_device
    from .pipeline.probe import _cal_path, _probe_key
    from .runtime import records
    from .runtime.device import all_devices, describe, device_key

    for p, d in all_devices():
        key = device_key(d)
        caps = capabilities(d, refresh=refresh)
        print(describe(p, d))
        print("    probe: " + caps.describe().replace("\n", "\n    "))
        print(f"    probe record: {records.record_path('devices', 'probe-' + _probe_key(key))}")
        if not caps.usable:
            continue
        cal, how = calibration(d, refresh=refresh)
        if "failed" in cal:
            print(f"    calibration FAILED ({how}): {cal['failed']}")
            continue
        model = model_of_calibration(d, caps, cal, caps.widths, how)
        print(f"    calibration ({how}, {cal.get('seconds', 0):.1f} s to measure): {_cal_path(key)}")
        print("    " + model.describe().replace("\n", "\n    "))
    try:
        default = select_device()
        print(f"default device: {default.platform.name.strip()} | {default.name.strip()} "
              "(passes the probe; the fastest such by its calibration)")
    except Exception as e:  # noqa: BLE001 - the listing above says why
        print(f"no default device: {e}")
    return 0


def _load_target(target):
    """``FILE.py:FUNC`` -> FUNC() -> (output tensor, [tensors to differentiate w.r.t.])."""
    import importlib.util
    from pathlib import Path

    from .errors import PolyadError

    path, sep, func = target.rpartition(":")
    if not sep or not path.endswith(".py") or not func:
        raise PolyadError(f"expected FILE.py:FUNC, got {target!r}")
    if not Path(path).is_file():
        raise PolyadError(f"no file {path!r}")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise PolyadError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's module: say where it failed, not polyad's
        # traceback (sys.exit(3) in it made `polyad show` exit 3 without a word)
        raise PolyadError(f"running {path} raised {_where(e, path)}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise PolyadError(f"{path!r} defines no function {func!r}")
    try:
        res = fn()
    except PolyadError as e:
        raise PolyadError(f"{func}() in {path}: {type(e).__name__}: {e}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001
        raise PolyadError(f"{func}() in {path} raised {_where(e, path)}") from None
    from .te.tensor import Tensor

    usage = f"{target} must return (output tensor, [input tensors to differentiate w.r.t.])"
    if not (isinstance(res, tuple) and len(res) == 2):
        raise PolyadError(usage)
    out, wrt = res
    if isinstance(wrt, Tensor):  # one input, as pa.differentiate takes it (list() of a tensor iterates its rows)
        wrt = [wrt]
    if not isinstance(out, Tensor) or not isinstance(wrt, (list, tuple)) or not all(isinstance(t, Tensor) for t in wrt):
        raise PolyadError(f"{usage}; it returned ({type(out).__name__}, {type(wrt).__name__})")
    if not wrt:  # the gradient of nothing: an empty graph, which `polyad tune` tuned
        raise PolyadError(f"{usage}; it returned no tensor to differentiate w.r.t.")
    return out, list(wrt)


def _where(exc, path):
    """``ValueError: msg (at FILE:LINE)``: the exception and the deepest line of ``path`` it passed."""
    import os
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename) == os.path.abspath(path)]
    at = f" (at {path}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"


def _show(args):
    """The simplified gradient of FILE.py:FUNC's output, its cost, and its OpenCL C (or an example matmul's)."""
    import polyad as pa
    from .errors import PolyadError
    from .pipeline import generate, resolve_schedule
    from .te.tensor import placeholders

    if args.target is None:
        X = pa.placeholder((args.batch, args.n_in), name="X")
        W = pa.placeholder((args.n_out, args.n_in), name="W")
        k = pa.reduce_axis((0, args.n_in), name="k")
        Y = pa.compute((args.batch, args.n_out), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="Y")
        outs, ins = [Y], [X, W]
    else:
        try:
            Y, wrt = _load_target(args.target)
            H = pa.placeholder(Y.shape, Y.dtype, name="H")
            outs = list(pa.differentiate(Y, list(wrt), H))
        except PolyadError as e:
            print(f"polyad show: {e}", file=sys.stderr)
            return 2
        ins = placeholders(outs)
        print(pa.show(outs))
        print()
        print(pa.estimate(outs))
        print()
    sched = resolve_schedule(outs, args.schedule)  # "auto": the default device's calibrated model
    # the auto-scheduler's decisions and why, and under any schedule the stages built as scatters
    decisions = pa.show(outs, schedule=sched).split("\n\n")[0]
    if args.schedule == "auto" or "\n  scatter " in decisions:
        print(decisions)
        print()
    prog = generate(outs, ins, sched)
    if args.tree:
        print(prog.tree.schedule.get_root().to_str())
    print(prog.source)
    return 0


def _tune(args):
    """Tune FILE.py:FUNC's gradient or a benchmark workload's backward; print the schedule and a table."""
    import polyad as pa
    from .errors import PolyadError
    from .te.tensor import placeholders

    client = None
    try:
        if (args.target is None) == (args.workload is None):
            raise PolyadError("give FILE.py:FUNC or --workload NAME (one of them)")
        if args.workload is not None:
            from .bench.tuning import TINY, backward_graph
            from .bench.workloads import WORKLOADS

            params = dict(TINY.get(args.workload, {})) if args.shapes == "tiny" else None
            if args.workload not in WORKLOADS:
                raise PolyadError(f"unknown workload {args.workload!r} (known: {', '.join(sorted(WORKLOADS))})")
            g = backward_graph(args.workload, params, seed=args.seed)
            outs, ins, data, name = g.outputs, g.inputs, g.data, args.workload
        else:
            Y, wrt = _load_target(args.target)
            H = pa.placeholder(Y.shape, Y.dtype, name="H")
            outs = list(pa.differentiate(Y, list(wrt), H))
            ins, data, name = placeholders(outs), None, args.target
        workers = args.workers
        if args.dask:
            from distributed import Client

            client = workers = Client(args.dask)
        res = pa.tune(outs, ins, trials=args.trials, time_budget=args.time_budget, log=args.log,
                      workers=workers, seed=args.seed, resume=args.resume, data=data, name=name,
                      progress=not args.no_progress)
    except PolyadError as e:
        print(f"polyad tune: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    print()
    # the graph as tuned: cut at the fed inputs (a workload's backward is fed its forward's residuals, whose
    # stages would otherwise be shown and named too, and take the names the schedule gives backward stages)
    from .te.graph import cut

    print(pa.show(cut(outs, ins)[0], schedule=res.schedule))
    print()
    print(res.table())
    print(res.summary())
    w = res.wall
    print(f"wall: code generation {w.get('codegen', 0.0):.1f} s, compile {w['compile']:.1f} s, measure "
          f"{w['measure']:.1f} s, search and the rest "
          f"{w['search']:.1f} s; 90% of the speed-up after {res.trials_to(0.9)} trials")
    if res.log:
        print(f"log: {res.log}  (apply it: pa.build(..., schedule=pa.tuned({res.log!r})))")
    return 130 if res.interrupted else 0


def _tune_parser(p):
    p.add_argument("target", nargs="?", help="FILE.py:FUNC returning (output, [inputs]): tune its gradient")
    p.add_argument("--workload", help="tune a benchmark workload's backward (pa.vjp's, fed the residuals)")
    p.add_argument("--shapes", choices=("bench", "tiny"), default="bench", help="the workload's shapes")
    p.add_argument("--trials", type=int, default=64, help="measurements at most (default 64)")
    p.add_argument("--time-budget", type=float, default=None, help="stop after about this many seconds")
    p.add_argument("--log", default=None, help="the tuning log (JSON lines) to append to")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="reuse the log's measurements (never measure a configuration twice; default on)")
    p.add_argument("--workers", type=int, default=None, help="compiler processes at once (default: the cores)")
    p.add_argument("--dask", metavar="ADDRESS", help="build and measure on a Dask cluster (tcp://host:8786)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(fn=_tune)


def _bench_runner():
    """polyad.bench.runner, imported only when `polyad bench` is asked for."""
    from polyad.bench import runner

    return runner


def _bench_parser(p):
    try:
        _bench_runner().add_arguments(p)
    except Exception as exc:  # noqa: BLE001 - a missing/broken suite must not break the other subcommands
        p.set_defaults(bench_error=exc)
    p.set_defaults(fn=_bench)


def _bench(args):
    if getattr(args, "bench_error", None) is not None:
        print(f"polyad bench: {args.bench_error}", file=sys.stderr)
        return 2
    return _bench_runner().run_cli(args)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="polyad", description="differentiate tensor expressions, build OpenCL kernels")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("demo", help="differentiate, build and run the dense layer's gradient")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--n-in", type=int, default=1000)
    p.add_argument("--n-out", type=int, default=1000)
    p.add_argument("--schedule", default="auto", help="auto (default) or naive")
    p.set_defaults(fn=_demo)
    p = sub.add_parser("doctor", help="check that an OpenCL device compiles kernels (--fix installs PoCL)")
    p.add_argument("--fix", action="store_true", help="install Debian's PoCL if no device compiles")
    p.set_defaults(fn=lambda a: __import__("polyad.runtime.doctor", fromlist=["main"]).main(["--fix"] if a.fix else []))
    p = sub.add_parser("devices", help="list the OpenCL devices polyad can use, with its probe's result")
    p.add_argument("--calibrate", action="store_true",
                   help="also print each device's measured model (measured once, then cached) and where it is cached")
    p.add_argument("--refresh", action="store_true", help="probe and calibrate again instead of reading the cache")
    p.set_defaults(fn=_devices)
    p = sub.add_parser("show", help="print the simplified gradient of FILE.py:FUNC and its OpenCL C")
    p.add_argument("target", nargs="?", help="FILE.py:FUNC returning (output, [inputs]); default: an example matmul")
    p.add_argument("--schedule", default="naive", help="naive (default) or auto")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--n-in", type=int, default=8)
    p.add_argument("--n-out", type=int, default=3)
    p.add_argument("--tree", action="store_true", help="also print the isl schedule tree")
    p.set_defaults(fn=_show)
    p = sub.add_parser("tune", help="search schedules on the device for FILE.py:FUNC's gradient or a workload")
    _tune_parser(p)
    p = sub.add_parser("bench", help="benchmark autodiff gradients against hand-written TE, numpy and PyTorch")
    _bench_parser(p)
    args = parser.parse_args(argv)
    from .errors import PolyadError

    try:
        return args.fn(args)
    except PolyadError as e:  # what went wrong and what to do, not a traceback through polyad
        print(f"polyad {args.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
