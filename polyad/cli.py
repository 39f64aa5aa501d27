"""The ``polyad`` command: demo, devices (later: show, bench, tune)."""

import argparse
import sys


def _demo(args):
    from .demo import run

    return run(args.batch, args.n_in, args.n_out, schedule=args.schedule)


def _devices(args):
    import pyopencl as cl

    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    if not platforms:
        print("no OpenCL platform found: pip install 'pocl-binary-distribution' (the polyad[pocl] extra)")
        return 1
    for p in platforms:
        for d in p.get_devices():
            print(f"{p.name} | {d.name} | {cl.device_type.to_string(d.type)} | {d.max_compute_units} compute units")
    return 0


def _bench_runner():
    """benchmarks.runner from the source checkout (the suite is not part of the installed package)."""
    try:
        from benchmarks import runner
    except ImportError:
        from pathlib import Path

        root = Path(__file__).resolve().parent.parent
        if not (root / "benchmarks" / "runner.py").is_file():
            raise ImportError("the benchmark suite lives in benchmarks/ of a polyad source checkout; run it there")
        sys.path.insert(0, str(root))
        from benchmarks import runner
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
    p.add_argument("--schedule", default="naive", help="naive (default) or auto")
    p.set_defaults(fn=_demo)
    p = sub.add_parser("devices", help="list the OpenCL devices polyad can use")
    p.set_defaults(fn=_devices)
    p = sub.add_parser("bench", help="benchmark autodiff gradients against hand-written TE, numpy and PyTorch")
    _bench_parser(p)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
