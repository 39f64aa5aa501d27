"""The benchmark report: markdown, JSON, plots (PNG, when matplotlib is installed) and an HTML page.

The HTML page is one self-contained file (the table, the notes and the plots, embedded as PNG data
URIs, no script, no network): open it in a browser, or mail it.
"""

import base64
import html
import io
import time
from pathlib import Path

from .runner import BACKWARD_NAMES, BACKWARDS, NOT_A_STEP, SGD_LR, WARMUP_S, Cell, to_json

#: (column key, header, format) of the markdown table, in order.  "(vjp)": pa.vjp's backward, fed the
#: residuals its forward left on the device; "(recompute)": the gradient built from (inputs, H) alone.
COLUMNS = [
    ("workload", "workload", None),
    ("schedule", "schedule", None),
    ("fwd_ms", "fwd ms", "ms"),
    ("bwd_ms", "bwd ms (vjp)", "ms"),
    ("bwd_over_fwd", "bwd/fwd (vjp)", "x"),
    ("bwd_recompute_ms", "bwd ms (recompute)", "ms"),
    ("hand_ms", "hand TE bwd ms", "ms"),
    ("autodiff_over_hand", "autodiff/hand TE", "x"),
    ("numpy_ms", "numpy bwd ms", "ms"),
    ("vs_numpy", "vs numpy", "x"),
    ("torch_ms", "torch bwd ms", "ms"),
    ("vs_torch", "vs torch (vjp)", "x"),
    ("recompute_vs_torch", "vs torch (recompute)", "x"),
    ("step_ms", "step ms (vjp)", "ms"),
    ("step_recompute_ms", "step ms (recompute)", "ms"),
    ("torch_step_ms", "torch step ms", "ms"),
    ("step_vs_torch", "step vs torch (vjp)", "x"),
    ("step_recompute_vs_torch", "step vs torch (recompute)", "x"),
    ("roofline_ms", "roofline ms (vjp bwd)", "ms"),
    ("bwd_over_roofline", "bwd/roofline (vjp)", "x"),
    ("tune_s", "tuning s", "s"),
    ("tune_trials", "tuning trials", "n"),
    ("tune_speedup", "tuner speed-up (auto/tuned)", "x"),
    ("tuned_vs_auto", "tuned/auto bwd (run by run)", "x"),
    ("tune_trials_90", "trials to 90%", "n"),
    ("diff_s", "differentiate s", "s"),
    ("build_cold_s", "build s cold (vjp)", "s"),
    ("build_warm_s", "build s warm (vjp)", "s"),
    ("recompute_build_cold_s", "build s cold (recompute)", "s"),
    ("recompute_build_warm_s", "build s warm (recompute)", "s"),
    ("err", "max rel err (vjp)", "e"),
    ("recompute_err", "err recompute", "e"),
    ("hand_err", "err hand TE", "e"),
    ("numpy_err", "err numpy", "e"),
    ("torch_err", "err torch", "e"),
]

#: what the roofline column is (polyad.bench.roofline)
ROOFLINE_NOTE = ("max(flops / peak, compulsory bytes / bandwidth) on the device's calibrated model, the inputs read "
                 "and the gradients written once; a working set that stays in the caches between runs can beat it, "
                 "and kernel launches are not counted")

#: A float32 gradient further than this from the float64 reference is flagged.
ERR_FLAG = 1e-3
NA_WIDTH = 40


def fmt(cell, kind):
    if not isinstance(cell, Cell):
        return str(cell)
    if cell.na == NOT_A_STEP:
        return "-"
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


def _title(m):
    version = f" {m['polyad']}" if m.get("polyad") else ""
    return f"polyad{version} benchmark, {m.get('date_utc', '?')}, commit {m.get('commit', '?')}"


def _machine_line(m):
    return (f"Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs, {m.get('platform', '?')}; "
            f"OpenCL: {m.get('opencl', '?')}; numpy {m.get('numpy', '?')}; torch {m.get('torch', '?')}.")


def _options_line(o):
    backwards = " and ".join(BACKWARD_NAMES.get(b, b) for b in o.get("backward") or BACKWARDS)
    return (f"Options: backend {o.get('backend', 'opencl')}, schedules {' '.join(o['schedules'])}, "
            f"backward {backwards}, "
            f"batch {o['batch'] or 'as in WORKLOADS.md'}, "
            f"median of {o['repeat']} runs after {WARMUP_S:g} s of warm-up runs, time budget {o['time_budget']:g} s per measurement"
            f"{', ' + format(o['workload_budget'], 'g') + ' s per workload' if o.get('workload_budget') else ''}"
            f"{', torch on ' + o['torch_device'] if o.get('torch_device', 'cpu') != 'cpu' else ''}.")


def _backend_warning(o):
    if o.get("backend", "opencl") == "opencl":
        return None
    return (f"polyad columns ran on the {o['backend']} backend (numpy interpreter), not OpenCL: "
            "their errors are meaningful, their times are not polyad's.")


def _explanation():
    return ("Ratios are polyad's time over the other's (above 1: polyad is slower). Every backward is timed alone, "
            "after its forward, as numpy and torch reuse their saved activations; with torch, the two polyad backwards and "
            "torch's are timed side by side in alternating rounds (median of the rounds' medians), so that each "
            "ratio to torch divides times taken on the same machine state. "
            "(vjp): `fwd, bwd = pa.vjp(Y, inputs)`; the forward ran once, outside the timing, and left its residuals "
            "(`pa.residuals(grads, [H], save=\"reductions\")`) on the device; `bwd.time` times the backward alone on "
            "them. The hand-written TE gradient is split and fed the same way (`vjp_from_gradients`). (recompute): "
            "`pa.build(pa.differentiate(Y, wrt, H), inputs + [H])`, which recomputes the forward values it reads and "
            "keeps nothing between calls. Training steps (mlp_step, lenet_step): forward, backward and an SGD update "
            f"(lr {SGD_LR:g}) of every parameter, the parameters carried on the device from step to step; (vjp): pa.vjp's forward and "
            "backward; (recompute): the plain forward and the recomputing backward; torch: forward, autograd.grad, "
            "in-place update. Tuned rows: the tuner's own speed-up (auto over tuned, its end check's held-out "
            "rounds), and tuned/auto bwd (run by run): the tuned row's vjp backward over the auto row's, timed in "
            "alternating pairs of runs after "
            "both rows, three modules a side, every one against every one of the other side (the median of the pairs' "
            "ratios; below 1: the tuned schedule is faster). The tuner tunes the backward: a tuned row's forward, "
            "hand-written gradient and training-step update are built from the same log, and are auto's where it has "
            "no record of them. "
            "Errors: max|g - ref| / max|ref| "
            f"against a float64 numpy gradient of the same data, flagged (!) above {ERR_FLAG:g}.")


# a starred cell's note says how it was measured: side by side with torch, run-by-run ratios, or fewer runs than
# asked where the time budget capped them (the heading said the last of every one)
STARRED = "how the starred cells were measured (a time budget that capped the runs says so)"


def _footnotes(result):
    """(residuals fed: {workload: {who: names}}, capped-run notes, full n/a reasons: {reason: {workload}},
    rooflines: {workload: what bounds its backward})."""
    fed, notes, reasons, roofs = {}, [], {}, {}
    for row in result["rows"]:
        if isinstance(row.get("roofline"), str) and row["roofline"]:
            roofs[row["workload"]] = row["roofline"]
        for key, who in (("residuals", "autodiff"), ("hand_residuals", "hand TE")):
            if isinstance(row.get(key), str):
                fed.setdefault(row["workload"], {})[who] = row[key]
        for key, _, _ in COLUMNS:
            c = row.get(key, "")
            if isinstance(c, Cell) and c.note:
                notes.append(f"{row['workload']} [{row['schedule']}] {key}: {c.note}")
            if isinstance(c, Cell) and not c.ok and len(c.na) > NA_WIDTH and not c.na.startswith("needs"):
                reasons.setdefault(c.na, {}).setdefault(row["workload"], None)
    return fed, notes, reasons, roofs


def markdown(result):
    """The table, the machine it ran on, and the notes (full n/a reasons, capped runs)."""
    m = result["machine"]
    o = result["options"]
    lines = [
        _title(m),
        "",
        _machine_line(m),
        _options_line(o),
        "",
        "| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
        "|" + "|".join("---" if k in ("workload", "schedule") else "---:" for k, _, _ in COLUMNS) + "|",
    ]
    if _backend_warning(o):
        lines[-2:-2] = [f"**{_backend_warning(o)}**", ""]
    for row in result["rows"]:
        lines.append("| " + " | ".join(fmt(row.get(key, ""), kind) for key, _, kind in COLUMNS) + " |")
    lines += ["", _explanation()]
    fed, notes, reasons, roofs = _footnotes(result)
    if roofs:
        lines += ["", f"Rooflines of the vjp backwards ({ROOFLINE_NOTE}):"]
        lines += [f"- {w}: {r}" for w, r in roofs.items()]
    if fed:
        lines += ["", "What the vjp forward saves for its backward besides its outputs (computed tensors of the "
                      "gradient graph that do not depend on H):"]
        lines += [f"- {w}: " + "; ".join(f"{who}: {names}" for who, names in d.items()) for w, d in fed.items()]
    if notes:
        lines += ["", f"\\* {STARRED}:"] + [f"- {n}" for n in notes]
    if reasons:
        lines += ["", "Full n/a reasons:"] + [f"- {r} ({', '.join(w)})" for r, w in reasons.items()]
    return "\n".join(lines) + "\n"


def _pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _grouped_bars(plt, workloads, series, ylabel, title, one_line=False):
    """A figure of grouped bars (one group per workload, one bar per series), log scale; None if empty."""
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(workloads) + 2), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (label, vals) in enumerate(series.items()):
        xs = [j + i * width for j, w in enumerate(workloads) if w in vals]
        ys = [vals[w].value for w in workloads if w in vals]
        ax.bar(xs, ys, width, label=label)
    if one_line:
        ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _series(result, columns):
    """{label: {workload: Cell}} of the measured cells of ``columns`` ((label(schedule), key), ...)."""
    series = {}
    for r in result["rows"]:
        for label, key in columns:
            c = r.get(key)
            if isinstance(c, Cell) and c.ok and c.value > 0:
                series.setdefault(label(r["schedule"]), {})[r["workload"]] = c
    return series


def _backward_figure(plt, result):
    series = _series(result, ((lambda s: f"polyad pa.vjp ({s})", "bwd_ms"),
                              (lambda s: f"polyad recompute ({s})", "bwd_recompute_ms"),
                              (lambda s: f"hand TE ({s})", "hand_ms"),
                              (lambda s: "numpy", "numpy_ms"), (lambda s: "torch", "torch_ms")))
    return _grouped_bars(plt, _workloads(result), series, "backward ms (median, log scale)",
                         f"polyad benchmarks, {result['machine'].get('date_utc', '')}")


def _ratio_figure(plt, result):
    series = _series(result, ((lambda s: f"vjp vs hand TE ({s})", "autodiff_over_hand"),
                              (lambda s: f"vjp vs numpy ({s})", "vs_numpy"),
                              (lambda s: f"vjp vs torch ({s})", "vs_torch"),
                              (lambda s: f"recompute vs torch ({s})", "recompute_vs_torch")))
    return _grouped_bars(plt, _workloads(result), series, "polyad bwd / other's bwd (log scale)",
                         "polyad's backward against the others (below 1: polyad is faster)", one_line=True)


#: The report's plots: (file suffix, caption, figure builder).
PLOTS = (
    ("", "Backward time per workload (median ms, log scale): polyad's autodiff gradient (pa.vjp's backward on "
         "the saved residuals, and the one that recomputes the forward), the same gradient written by hand as TE, "
         "numpy and torch.", _backward_figure),
    ("-ratios", "polyad's backward time over each baseline's (log scale; below the line at 1, polyad is faster).",
     _ratio_figure),
)


def _workloads(result):
    return list(dict.fromkeys(r["workload"] for r in result["rows"]))


def plots(result):
    """[(file suffix, caption, PNG bytes)] of the report's plots; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    out = []
    for suffix, caption, build in PLOTS:
        fig = build(plt, result)
        if fig is None:  # nothing measured to plot
            continue
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        out.append((suffix, caption, buf.getvalue()))
    return out


def bar_chart(result, path):
    """The bar chart of backward ms per workload (log scale) as a PNG at ``path``; None without matplotlib."""
    plt = _pyplot()
    fig = _backward_figure(plt, result) if plt is not None else None
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- the HTML page

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
p.meta { color: #444; font-size: 0.9em; max-width: 80em; }
p.warning { background: #fff3cd; padding: 0.5em; }
div.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.na { color: #888; font-style: italic; }
td.flag { background: #fdd; font-weight: bold; }
tbody tr:nth-child(even) { background: #fafafa; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; }
"""


def _html_cell(row, key, kind):
    c = row.get(key, "")
    text = html.escape(fmt(c, kind))
    if not isinstance(c, Cell):
        return f"<td>{text}</td>"
    if not c.ok:
        return f'<td class="na" title="{html.escape(c.na, quote=True)}">{text}</td>'
    cls = "num flag" if kind == "e" and c.value > ERR_FLAG else "num"
    title = f' title="{html.escape(c.note, quote=True)}"' if c.note else ""
    return f'<td class="{cls}"{title}>{text}</td>'


def html_page(result, images=(), files=(), plot_note=None):
    """The report as one self-contained HTML page: the table, the notes, and ``images``
    ([(caption, PNG bytes)]) embedded as data URIs; ``files``: names of the report's other files
    (links relative to the page), ``plot_note``: said where the plots would be (e.g. matplotlib missing)."""
    m, o = result["machine"], result["options"]
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(_title(m))}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
           f"<h1>{e(_title(m))}</h1>",
           f'<p class="meta">{e(_machine_line(m))}<br>{e(_options_line(o))}</p>']
    if _backend_warning(o):
        out.append(f'<p class="warning">{e(_backend_warning(o))}</p>')
    out += ['<div class="scroll">', '<table id="results">', "<thead><tr>"]
    out += [f'<th scope="col">{e(h)}</th>' for _, h, _ in COLUMNS]
    out += ["</tr></thead>", "<tbody>"]
    for row in result["rows"]:
        out.append("<tr>" + "".join(_html_cell(row, key, kind) for key, _, kind in COLUMNS) + "</tr>")
    out += ["</tbody>", "</table>", "</div>", f'<p class="meta">{e(_explanation())}</p>']
    fed, notes, reasons, roofs = _footnotes(result)
    if roofs:
        out += ["<h2>Rooflines of the vjp backwards</h2>", f"<p>{e(ROOFLINE_NOTE)}</p>", "<ul>"]
        out += [f"<li>{e(w)}: {e(r)}</li>" for w, r in roofs.items()] + ["</ul>"]
    if fed:
        out.append("<h2>What the vjp forward saves for its backward</h2>")
        out.append("<p>Besides its outputs: computed tensors of the gradient graph that do not depend on H.</p><ul>")
        out += [f"<li>{e(w)}: " + "; ".join(f"{e(who)}: {e(names)}" for who, names in d.items()) + "</li>"
                for w, d in fed.items()]
        out.append("</ul>")
    if notes:
        out += [f"<h2>* {STARRED}</h2>", "<ul>"] + [f"<li>{e(n)}</li>" for n in notes] + ["</ul>"]
    if reasons:
        out += ["<h2>Full n/a reasons</h2>", "<ul>"]
        out += [f"<li>{e(r)} ({e(', '.join(w))})</li>" for r, w in reasons.items()] + ["</ul>"]
    if images or plot_note:
        out.append("<h2>Plots</h2>")
    for caption, png in images:
        data = base64.b64encode(png).decode("ascii")
        out += ["<figure>", f'<img src="data:image/png;base64,{data}" alt="{e(caption, quote=True)}">',
                f"<figcaption>{e(caption)}</figcaption>", "</figure>"]
    if plot_note:
        out.append(f"<p>{e(plot_note)}</p>")
    if files:
        out += ["<h2>Files of this run</h2>", "<ul>"]
        out += [f'<li><a href="{e(name, quote=True)}">{e(name)}</a></li>' for name in files] + ["</ul>"]
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def write(result, out_dir, plot=True):
    """bench-<stamp>.md / .json / .html (and the plots' .png) under out_dir; returns the paths written.

    The plots need matplotlib (``pip install "polyad[bench]"``); without it, or with ``plot=False``,
    the page says why it has none.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = out_dir / f"bench-{stamp}"
    paths = [base.with_suffix(".md"), base.with_suffix(".json")]
    paths[0].write_text(markdown(result))
    paths[1].write_text(to_json(result) + "\n")
    images, plot_note = [], None
    if plot:
        made = plots(result)
        if made is None:
            plot_note = 'No plots: they need matplotlib (pip install "polyad[bench]").'
        else:
            for suffix, caption, png in made:
                path = out_dir / f"{base.name}{suffix}.png"
                path.write_bytes(png)
                paths.append(path)
                images.append((caption, png))
            if not made:
                plot_note = "No plots: no backward time was measured."
    else:
        plot_note = "No plots (--no-plot)."
    page = base.with_suffix(".html")
    page.write_text(html_page(result, images, [p.name for p in paths], plot_note), encoding="utf-8")
    paths.append(page)
    return paths
