"""Single operators, forward and backward, against PyTorch: the ops the 13 workloads do not cover.

    python -m polyad.bench.bench_ops [--ops embedding max_pool_3x3_s2 ...] [--rounds 7] [--quick]

Each op is built with ``pa.vjp`` (schedule auto): the forward saves what its backward reads and the backward
runs on those residuals, as torch's autograd does.  The outputs and gradients are checked against torch's
(float32, the same inputs and head); the times are medians over alternating rounds of polyad's forward,
torch's forward, polyad's backward and torch's backward, each with its data already in place (polyad's on the
device: ``Module.time`` and ``VJPBackward.time``; torch's in memory, ``torch.autograd.grad`` with the graph
kept).  The table is markdown; ``--quick`` uses tiny shapes (the tests run it so).
"""

import argparse
import math
import os
import statistics
from dataclasses import dataclass

import numpy as np

import polyad as pa
from polyad.bench.runner import median_seconds, rel_error
from polyad.errors import PolyadError


@dataclass(frozen=True)
class Op:
    """One benchmarked operator: ``build(dims) -> (output, inputs, wrt)`` in polyad, ``torch(F, *tensors)`` the
    same in torch (inputs in ``inputs``' order), ``feeds(rng, dims)`` the arrays, ``dims``/``quick`` the sizes."""

    name: str
    build: object
    torch: object
    feeds: object
    dims: dict
    quick: dict
    note: str = ""


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _embedding(d):
    W = pa.placeholder((d["V"], d["C"]), name="W")
    I = pa.placeholder((d["K"],), name="I", dtype="int32")
    return pa.ops.take(W, I, axis=0), [W, I], [W]


def _max_pool(d):
    X = pa.placeholder((d["N"], d["C"], d["H"], d["H"]), name="X")
    return pa.nn.pool2d(X, 3, 2, 1, "max"), [X], [X]


def _conv_transpose(d):
    X = pa.placeholder((d["N"], d["C"], d["H"], d["H"]), name="X")
    W = pa.placeholder((d["C"], d["C"] // 2, 3, 3), name="W")
    return pa.nn.conv2d_transpose(X, W, strides=2, padding=1), [X, W], [X, W]


def _conv_s2(d):
    X = pa.placeholder((d["N"], d["C"], d["H"], d["H"]), name="X")
    W = pa.placeholder((2 * d["C"], d["C"], 3, 3), name="W")
    return pa.nn.conv2d(X, W, strides=2, padding=1), [X, W], [X, W]


def _gelu(d):
    X = pa.placeholder((d["N"], d["C"], d["H"], d["H"]), name="X")
    Y = pa.compute(X.shape, lambda *i: 0.5 * X[i] * (1.0 + pa.erf(X[i] * (1.0 / math.sqrt(2.0)))), name="gelu")
    return Y, [X], [X]


def _layer_norm(d):
    R, C = d["R"], d["C"]
    X = pa.placeholder((R, C), name="X")
    k = pa.reduce_axis((0, C), name="k")
    total = pa.compute((R,), lambda r: pa.sum(X[r, k], axis=k), name="total")
    j = pa.reduce_axis((0, C), name="j")
    dev = pa.compute((R, C), lambda r, c: X[r, c] - total[r] * (1.0 / C), name="centred")
    sq = pa.compute((R,), lambda r: pa.sum(dev[r, j] * dev[r, j], axis=j), name="squares")
    Y = pa.compute((R, C), lambda r, c: dev[r, c] * pa.rsqrt(sq[r] * (1.0 / C) + 1e-5), name="layer_norm")
    return Y, [X], [X]


def _matmul_t(d):
    A = pa.placeholder((d["M"], d["K"]), name="A")
    B = pa.placeholder((d["N"], d["K"]), name="B")
    return pa.ops.matmul(A, pa.ops.transpose(B)), [A, B], [A, B]


OPS = {op.name: op for op in (
    Op("embedding", _embedding, lambda F, W, I: F.embedding(I.long(), W),
       lambda rng, d: [_normal(rng, d["V"], d["C"]), rng.integers(0, d["V"], d["K"]).astype(np.int32)],
       dict(V=10000, C=64, K=4096), dict(V=50, C=8, K=30), "take's gradient: a scatter"),
    Op("max_pool_3x3_s2", _max_pool, lambda F, X: F.max_pool2d(X, 3, 2, 1),
       lambda rng, d: [_normal(rng, d["N"], d["C"], d["H"], d["H"])],
       dict(N=16, C=32, H=56), dict(N=1, C=2, H=9)),
    Op("conv2d_transpose_s2", _conv_transpose, lambda F, X, W: F.conv_transpose2d(X, W, stride=2, padding=1),
       lambda rng, d: [_normal(rng, d["N"], d["C"], d["H"], d["H"]), _normal(rng, d["C"], d["C"] // 2, 3, 3)],
       dict(N=16, C=32, H=56), dict(N=1, C=4, H=6)),
    Op("conv2d_s2", _conv_s2, lambda F, X, W: F.conv2d(X, W, stride=2, padding=1),
       lambda rng, d: [_normal(rng, d["N"], d["C"], d["H"], d["H"]), _normal(rng, 2 * d["C"], d["C"], 3, 3)],
       dict(N=16, C=32, H=56), dict(N=1, C=4, H=7), "3x3, stride 2, pad 1, 2C filters"),
    Op("gelu", _gelu, lambda F, X: F.gelu(X), lambda rng, d: [_normal(rng, d["N"], d["C"], d["H"], d["H"])],
       dict(N=16, C=32, H=56), dict(N=2, C=3, H=5), "erf"),
    Op("layer_norm", _layer_norm, lambda F, X: F.layer_norm(X, (X.shape[-1],), eps=1e-5),
       lambda rng, d: [_normal(rng, d["R"], d["C"])], dict(R=4096, C=512), dict(R=8, C=16), "no scale or shift"),
    Op("matmul_transposed", _matmul_t, lambda F, A, B: A @ B.T,
       lambda rng, d: [_normal(rng, d["M"], d["K"]), _normal(rng, d["N"], d["K"])],
       dict(M=512, K=512, N=512), dict(M=8, K=6, N=5)),
)}


def run_op(op, torch, quick=False, rounds=7, reps=5, seed=0):
    """One row: forward and backward ms of polyad and torch (medians of alternating rounds), their ratios, and
    the largest relative error of polyad's output and gradients against torch's."""
    d = op.quick if quick else op.dims
    Y, inputs, wrt = op.build(d)
    rng = np.random.default_rng(seed)
    arrays = op.feeds(rng, d)
    head = _normal(rng, *Y.shape)
    fwd, bwd = pa.vjp(Y, inputs, wrt)
    y, res = fwd(*arrays)
    grads = bwd(res, head)

    ts = [torch.from_numpy(a) for a in arrays]
    grad = [any(a is w for w in wrt) for a in inputs]
    for t, g in zip(ts, grad):
        t.requires_grad_(g)
    ty = op.torch(torch.nn.functional, *ts)
    th = torch.from_numpy(head)
    tw = [t for t, g in zip(ts, grad) if g]
    tg = torch.autograd.grad(ty, tw, th, retain_graph=True)
    err = rel_error([y] + list(grads), [ty.detach().numpy()] + [t.numpy() for t in tg])

    samples = {"pa_fwd": [], "torch_fwd": [], "pa_bwd": [], "torch_bwd": []}
    for _ in range(rounds):
        samples["pa_fwd"].append(float(np.median(fwd.module.time(*arrays, repeat=reps))))
        samples["torch_fwd"].append(median_seconds(reps, lambda: op.torch(torch.nn.functional, *ts)))
        samples["pa_bwd"].append(float(np.median(bwd.time(res, head, repeat=reps))))
        samples["torch_bwd"].append(median_seconds(reps, lambda: torch.autograd.grad(ty, tw, th, retain_graph=True)))
    ms = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {"op": op.name, "shape": " ".join(f"{k}={v}" for k, v in d.items()), **ms,
            "fwd_ratio": ms["pa_fwd"] / ms["torch_fwd"], "bwd_ratio": ms["pa_bwd"] / ms["torch_bwd"], "err": err,
            "note": op.note}


def table(rows):
    """The rows as a markdown table."""
    out = ["| op | sizes | fwd ms | torch fwd ms | fwd vs torch | bwd ms | torch bwd ms | bwd vs torch | max rel err "
           "| |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['op']} | {r['shape']} | {r['pa_fwd']:.3g} | {r['torch_fwd']:.3g} | {r['fwd_ratio']:.2f} | "
                   f"{r['pa_bwd']:.3g} | {r['torch_bwd']:.3g} | {r['bwd_ratio']:.2f} | {r['err']:.1e} | {r['note']} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m polyad.bench.bench_ops", description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS), metavar="NAME",
                   help=f"ops to run (default: all): {' '.join(OPS)}")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds (the median is reported)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per measurement of a round (their median)")
    p.add_argument("--quick", action="store_true", help="tiny shapes: checks the errors, not the speed")
    p.add_argument("--threads", type=int, default=None, help="torch's threads (default: the machine's cores)")
    a = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise PolyadError("bench_ops compares with PyTorch, which is not installed here: `python -m pip install "
                          "torch` (a CPU build is enough)") from None
    torch.set_num_threads(a.threads or os.cpu_count() or 1)
    rows = [run_op(OPS[name], torch, quick=a.quick, rounds=a.rounds, reps=a.repeat) for name in a.ops]
    text = table(rows)
    print(text)
    return rows


if __name__ == "__main__":
    main()
