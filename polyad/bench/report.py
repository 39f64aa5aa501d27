"""The benchmark table: markdown, JSON and a bar chart (when matplotlib is installed)."""

import time
from pathlib import Path

from .runner import Cell, to_json

#: (column key, header, format) of the markdown table, in order.
COLUMNS = [
    ("workload", "workload", None),
    ("schedule", "schedule", None),
    ("fwd_ms", "fwd ms", "ms"),
    ("bwd_ms", "bwd ms", "ms"),
    ("bwd_over_fwd", "bwd/fwd", "x"),
    ("bwd_recompute_ms", "bwd recompute ms", "ms"),
    ("hand_ms", "hand TE bwd ms", "ms"),
    ("autodiff_over_hand", "autodiff/hand TE", "x"),
    ("numpy_ms", "numpy bwd ms", "ms"),
    ("vs_numpy", "vs numpy", "x"),
    ("torch_ms", "torch bwd ms", "ms"),
    ("vs_torch", "vs torch", "x"),
    ("diff_s", "differentiate s", "s"),
    ("build_cold_s", "build s cold", "s"),
    ("build_warm_s", "build s warm", "s"),
    ("err", "max rel err", "e"),
    ("hand_err", "err hand TE", "e"),
    ("numpy_err", "err numpy", "e"),
    ("torch_err", "err torch", "e"),
]

#: A float32 gradient further than this from the float64 reference is flagged.
ERR_FLAG = 1e-3
NA_WIDTH = 40


def fmt(cell, kind):
    if not isinstance(cell, Cell):
        return str(cell)
    if not cell.ok:
        r = cell.na
        return "n/a: " + (r if len(r) <= NA_WIDTH else r[: NA_WIDTH - 1] + "…")
    v = cell.value
    if kind == "ms":
        s = f"{v:.3g}" if v < 1000 else f"{v:.0f}"
    elif kind == "x":
        s = f"{v:.2f}" if v < 10 else (f"{v:.1f}" if v < 100 else f"{v:.0f}")
    elif kind == "s":
        s = f"{v:.3f}" if v < 10 else f"{v:.1f}"
    elif kind == "e":
        s = f"{v:.1e}" + (" (!)" if v > ERR_FLAG else "")
    else:
        s = f"{v:g}"
    return s + ("*" if cell.note else "")


def markdown(result):
    """The table, the machine it ran on, and the notes (full n/a reasons, capped runs)."""
    m = result["machine"]
    o = result["options"]
    lines = [
        f"polyad benchmark, {m.get('date_utc', '?')}, commit {m.get('commit', '?')}",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs, {m.get('platform', '?')}; "
        f"OpenCL: {m.get('opencl', '?')}; numpy {m.get('numpy', '?')}; torch {m.get('torch', '?')}.",
        f"Options: backend {o.get('backend', 'opencl')}, schedules {' '.join(o['schedules'])}, "
        f"batch {o['batch'] or 'as in WORKLOADS.md'}, "
        f"median of {o['repeat']} runs after a warm-up, time budget {o['time_budget']:g} s per measurement"
        f"{', ' + format(o['workload_budget'], 'g') + ' s per workload' if o.get('workload_budget') else ''}.",
        "",
        "| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
        "|" + "|".join("---" if k in ("workload", "schedule") else "---:" for k, _, _ in COLUMNS) + "|",
    ]
    if o.get("backend", "opencl") != "opencl":
        lines[-2:-2] = [f"**polyad columns ran on the {o['backend']} backend (numpy interpreter), not OpenCL: "
                        "their errors are meaningful, their times are not polyad's.**", ""]
    notes, reasons = [], {}
    for row in result["rows"]:
        cells = []
        for key, _, kind in COLUMNS:
            c = row.get(key, "")
            cells.append(fmt(c, kind))
            if isinstance(c, Cell) and c.note:
                notes.append(f"{row['workload']} [{row['schedule']}] {key}: {c.note}")
            if isinstance(c, Cell) and not c.ok and len(c.na) > NA_WIDTH and not c.na.startswith("needs"):
                reasons.setdefault(c.na, {}).setdefault(row["workload"], None)
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Ratios are polyad's backward time over the other's (above 1: polyad is slower). Every backward is timed "
        "alone, with the forward's values saved beforehand: polyad's (autodiff and hand TE, `Module.time`) is fed "
        "`pa.residuals(grads, [H])`, computed by a forward module outside the timing, as numpy and torch reuse their "
        "saved activations. bwd recompute ms: the autodiff gradient built from the forward inputs and H alone, "
        "recomputing the forward values it reads. Errors (of the fed modules): max|g - ref| / max|ref| "
        f"against a float64 numpy gradient of the same data, flagged (!) above {ERR_FLAG:g}.",
    ]
    fed = {}
    for row in result["rows"]:
        for key, who in (("residuals", "autodiff"), ("hand_residuals", "hand TE")):
            if isinstance(row.get(key), str):
                fed.setdefault(row["workload"], {})[who] = row[key]
    if fed:
        lines += ["", "Residuals fed to the backward (computed tensors of the gradient graph that do not depend on H):"]
        lines += [f"- {w}: " + "; ".join(f"{who}: {names}" for who, names in d.items()) for w, d in fed.items()]
    if notes:
        lines += ["", "\\* fewer runs than asked:"] + [f"- {n}" for n in notes]
    if reasons:
        lines += ["", "Full n/a reasons:"] + [f"- {r} ({', '.join(w)})" for r, w in reasons.items()]
    return "\n".join(lines) + "\n"


def bar_chart(result, path):
    """Grouped bars of backward ms per workload (log scale); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = result["rows"]
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    series = {}
    for r in rows:
        for label, key in ((f"polyad autodiff ({r['schedule']})", "bwd_ms"), (f"hand TE ({r['schedule']})", "hand_ms"),
                           ("numpy", "numpy_ms"), ("torch", "torch_ms")):
            c = r.get(key)
            if isinstance(c, Cell) and c.ok:
                series.setdefault(label, {})[r["workload"]] = c
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(workloads) + 2), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (label, vals) in enumerate(series.items()):
        xs = [j + i * width for j, w in enumerate(workloads) if w in vals]
        ys = [vals[w].value for w in workloads if w in vals]
        ax.bar(xs, ys, width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("backward ms (median, log scale)")
    ax.set_title(f"polyad benchmarks, {result['machine'].get('date_utc', '')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(result, out_dir, plot=True):
    """bench-<stamp>.md / .json (/ .png) under out_dir; returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = out_dir / f"bench-{stamp}"
    paths = [base.with_suffix(".md"), base.with_suffix(".json")]
    paths[0].write_text(markdown(result))
    paths[1].write_text(to_json(result) + "\n")
    if plot:
        png = bar_chart(result, base.with_suffix(".png"))
        if png:
            paths.append(png)
    return paths
