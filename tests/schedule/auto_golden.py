"""The auto schedules of the benchmark workloads, recorded: the reference ``test_auto_golden`` compares with.

For each workload (at the tiny test shapes, or with ``--real`` at the benchmark shapes) the graphs the
benchmarks build are scheduled on the two recorded device models:

- ``fwd``: the forward ``[Y]``;
- ``bwd``: ``pa.differentiate(Y, wrt, H)``, the gradient recomputing the forward it reads;
- ``fed``: that gradient cut at its residuals (what the benchmark's backward is fed), and ``res``: the
  forward module computing them;
- ``hand``: the hand-written TE gradient.

Run ``python tests/schedule/auto_golden.py`` to rewrite tests/data/auto_golden.json (after a change meant to
move auto's choices), or ``--real --out DIR`` to write the full ``Schedule.to_json()`` per graph.
"""

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
DEVICES = HERE.parent / "data" / "devices"
GOLDEN = HERE.parent / "data" / "auto_golden.json"
MODELS = ("zen5-former-constants", "gpu-former-constants", "h200-calibrated")


# the tiny shapes of tests/pipeline/workload_shapes.py when the schedules were recorded (fixed here: the
# golden file holds the schedules of these shapes)
TINY = {
    "dense": dict(batch=16, n_in=64, n_out=64),
    "dense_big": dict(batch=8, n_in=128, n_out=64),
    "conv2d_3x3": dict(batch=2, c_in=4, size=18, c_out=8),
    "conv2d_5x5_s3": dict(batch=1, c_in=2, size=14, c_out=3),
    "conv2d_dilated": dict(batch=2, c_in=4, size=18, c_out=8),
    "avg_pool": dict(batch=1, channels=2, size=8),
    "max_pool": dict(batch=1, channels=2, size=8),
    "softmax": dict(batch=8, n_in=64, n_out=128),
    "softmax_homebrew": dict(batch=8, n_in=64, n_out=128),
    "flatten": dict(batch=1, c=4, h=4, w=5),
    "chain": dict(n=16, depth=8),
    "mlp_step": dict(batch=16, sizes=(64, 64, 32, 10)),
    "lenet_step": dict(batch=1),
}


def graphs(name, shape):
    """(kind, outputs) of the graphs the benchmarks schedule for workload ``name`` at ``shape``
    (instantiate's keyword arguments; None: the benchmark's own)."""
    import polyad as pa
    from polyad.bench.runner import graph_residuals
    from polyad.bench.workloads import WORKLOADS
    from polyad.te.graph import cut

    case = WORKLOADS[name].instantiate(**(shape or {}))
    ph = case.placeholders()
    Y = case.forward_te(ph)
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name="H")
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], H))
    out = [("fwd", [Y]), ("bwd", grads)]
    res = graph_residuals(grads)
    if res:
        ins = [ph[i.name] for i in case.inputs] + [H]
        fed, _ = cut(grads, ins + [t for t in res if t not in ins])
        out += [("fed", fed), ("res", list(res))]
    out.append(("hand", case.hand_te(case.placeholders())))
    return out


def summary(sched):
    """A schedule's decisions (stages, inline, rfactor, pad; fold, space_to_depth and innermost where set) without its notes; a
    stage's schedule as its non-default fields (``phase`` among them where set: ``to_dict`` writes it only then)."""
    d = sched.to_dict()
    default = type(sched.default)().to_dict()
    stages = {n: {k: v for k, v in ss.items() if k not in default or v != default[k]} for n, ss in d["stages"].items()}
    out = {"stages": stages, "inline": d["inline"], "rfactor": d["rfactor"], "pad": d["pad"]}
    out.update({k: d[k] for k in ("fold", "space_to_depth", "innermost") if k in d})
    return out


def dumps(golden):
    """``golden`` as JSON text, one line per graph (reviewable diffs)."""
    lines = ["{"]
    for i, (model, per) in enumerate(sorted(golden.items())):
        lines.append(f" {json.dumps(model)}: {{")
        for j, (name, kinds) in enumerate(sorted(per.items())):
            lines.append(f"  {json.dumps(name)}: {{")
            for k, (kind, s) in enumerate(sorted(kinds.items())):
                comma = "," if k < len(kinds) - 1 else ""
                lines.append(f"   {json.dumps(kind)}: {json.dumps(s, sort_keys=True)}{comma}")
            lines.append("  }" + ("," if j < len(per) - 1 else ""))
        lines.append(" }" + ("," if i < len(golden) - 1 else ""))
    return "\n".join(lines + ["}"]) + "\n"


def record(shapes, full=False, models=MODELS):
    """{model: {workload: {kind: schedule}}} for ``shapes`` (name -> instantiate's kwargs or None): the
    decisions (:func:`summary`), or with ``full`` the whole ``Schedule.to_json()``."""
    from polyad.schedule import DeviceModel
    from polyad.schedule.auto import auto_schedule

    out = {}
    for model in models:
        dm = DeviceModel.load(DEVICES / f"{model}.json")
        per = out.setdefault(model, {})
        for name in sorted(shapes):
            for kind, outs in graphs(name, shapes[name]):
                s = auto_schedule(outs, device=dm)
                per.setdefault(name, {})[kind] = s.to_json() if full else summary(s)
    return out


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--real", action="store_true", help="the benchmark shapes (default: the tiny test shapes)")
    p.add_argument("--out", help="a directory: one full Schedule JSON per model/workload/graph")
    a = p.parse_args(argv)
    from polyad.bench.workloads import WORKLOADS

    shapes = {n: None for n in WORKLOADS} if a.real else TINY
    if a.out:
        d = pathlib.Path(a.out)
        d.mkdir(parents=True, exist_ok=True)
        for model, per in record(shapes, full=True).items():
            for name, kinds in per.items():
                for kind, text in kinds.items():
                    (d / f"{model}.{name}.{kind}.json").write_text(text + "\n")
        return
    GOLDEN.write_text(dumps(record(shapes)))


if __name__ == "__main__":
    main()
