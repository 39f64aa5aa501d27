"""GFLOP/s of single dense/conv backward stages under hand-written loop schedules.

    python -m polyad.bench.bench_kernels [--only dX,dW] [--repeat 20] [--quick]

Each stage is built alone with ``pa.build(stage, inputs, schedule=...)`` for a
few (tile, vectorize, unroll) choices, checked against numpy, then timed on
the device (data stays there).  The auto-scheduler engineer uses the table to
pick defaults; docs/runtime.md quotes the best rows.  Peak float32 on this
machine: 229 GFLOP/s (MACHINE-NOTES).
"""

import argparse
import time

import numpy as np

import polyad as pa
from polyad.schedule import Schedule, StageSchedule

PEAK = 229.0


def dense_dx(batch=32, n_in=1000, n_out=1000):
    """dX[i, j] = sum_o H[i, o] * W[o, j]: dense's input gradient (H: batch x n_out)."""
    H = pa.placeholder((batch, n_out), name="H")
    W = pa.placeholder((n_out, n_in), name="W")
    o = pa.reduce_axis((0, n_out), name="o")
    dX = pa.compute((batch, n_in), lambda i, j: pa.sum(H[i, o] * W[o, j], axis=o), name="dX")

    def ref(h, w):
        return h @ w

    return dX, [H, W], ref, 2.0 * batch * n_in * n_out


def dense_dw(batch=32, n_in=1000, n_out=1000):
    """dW[o, j] = sum_i H[i, o] * X[i, j]: dense's weight gradient (a reduction over the batch)."""
    H = pa.placeholder((batch, n_out), name="H")
    X = pa.placeholder((batch, n_in), name="X")
    i = pa.reduce_axis((0, batch), name="i")
    dW = pa.compute((n_out, n_in), lambda o, j: pa.sum(H[i, o] * X[i, j], axis=i), name="dW")

    def ref(h, x):
        return h.T @ x

    return dW, [H, X], ref, 2.0 * batch * n_in * n_out


def conv_dw(batch=32, c_in=17, size=28, c_out=19, k=3):
    """conv2d_3x3's weight gradient: dW[co, ci, ky, kx] = sum_{n, y, x} H[n, co, y, x] * X[n, ci, y + ky, x + kx]."""
    so = size - k + 1
    H = pa.placeholder((batch, c_out, so, so), name="H")
    X = pa.placeholder((batch, c_in, size, size), name="X")
    n = pa.reduce_axis((0, batch), name="n")
    y = pa.reduce_axis((0, so), name="y")
    x = pa.reduce_axis((0, so), name="x")
    dW = pa.compute(
        (c_out, c_in, k, k),
        lambda co, ci, ky, kx: pa.sum(H[n, co, y, x] * X[n, ci, y + ky, x + kx], axis=[n, y, x]),
        name="dW",
    )

    def ref(h, xx):
        out = np.zeros((c_out, c_in, k, k), np.float64)
        for ky in range(k):
            for kx in range(k):
                out[:, :, ky, kx] = np.einsum("nchw,ndhw->cd", h, xx[:, :, ky: ky + so, kx: kx + so])
        return out

    return dW, [H, X], ref, 2.0 * c_out * c_in * k * k * batch * so * so


def conv_dx(batch=32, c_in=17, size=28, c_out=19, k=3):
    """conv2d_3x3's input gradient as a full correlation of the padded adjoint (W flipped)."""
    so = size - k + 1
    H = pa.placeholder((batch, c_out, so, so), name="H")
    W = pa.placeholder((c_out, c_in, k, k), name="W")
    co = pa.reduce_axis((0, c_out), name="co")
    ky = pa.reduce_axis((0, k), name="ky")
    kx = pa.reduce_axis((0, k), name="kx")
    Hp = pa.compute(
        (batch, c_out, so + 2 * (k - 1), so + 2 * (k - 1)),
        lambda n, c, yy, xx: pa.select(
            (yy >= k - 1) & (yy < so + k - 1) & (xx >= k - 1) & (xx < so + k - 1),
            H[n, c, yy - (k - 1), xx - (k - 1)], pa.const(0.0)),
        name="Hp",
    )
    dX = pa.compute(
        (batch, c_in, size, size),
        lambda n, ci, yy, xx: pa.sum(Hp[n, co, yy + ky, xx + kx] * W[co, ci, k - 1 - ky, k - 1 - kx], axis=[co, ky, kx]),
        name="dX",
    )

    def ref(h, w):
        out = np.zeros((batch, c_in, size, size), np.float64)
        for a in range(k):
            for b in range(k):
                out[:, :, a: a + so, b: b + so] += np.einsum("nohw,oc->nchw", h, w[:, :, a, b])
        return out

    return dX, [H, W], ref, 2.0 * batch * c_in * size * size * c_out * k * k


STAGES = {"dX": dense_dx, "dW": dense_dw, "conv_dW": conv_dw, "conv_dX": conv_dx}

SCHEDULES = {
    "dX": [
        StageSchedule(),
        StageSchedule(tile=(4, 8), vectorize=8),
        StageSchedule(tile=(4, 32), vectorize=8),
        StageSchedule(tile=(4, 32), vectorize=8, unroll=4),
        StageSchedule(tile=(6, 16), vectorize=8),
        StageSchedule(tile=(8, 16), vectorize=8),
        StageSchedule(tile=(8, 32), vectorize=16),
        StageSchedule(tile=(4, 64), vectorize=16),
        StageSchedule(tile=(8, 16), vectorize=16),
        StageSchedule(tile=(16, 16), vectorize=16),
        StageSchedule(tile=(8, 32), vectorize=16, unroll=2),
        StageSchedule(tile=(4, 32), vectorize=16),
    ],
    "dW": [
        StageSchedule(),
        StageSchedule(tile=(4, 32), vectorize=8),
        StageSchedule(tile=(6, 16), vectorize=8),
        StageSchedule(tile=(8, 16), vectorize=8),
        StageSchedule(tile=(8, 32), vectorize=8),
        StageSchedule(tile=(8, 32), vectorize=16),
        StageSchedule(tile=(4, 64), vectorize=16),
        StageSchedule(tile=(8, 16), vectorize=16),
        StageSchedule(tile=(16, 16), vectorize=16),
        StageSchedule(tile=(8, 32), vectorize=16, unroll=2),
        StageSchedule(tile=(4, 32), vectorize=16),
    ],
    "conv_dW": [
        StageSchedule(),
        StageSchedule(tile=(1, 1, 3, 3)),
        StageSchedule(tile=(2, 1, 3, 3), unroll=2),
        StageSchedule(tile=(4, 1, 3, 3)),
        StageSchedule(tile=(1, 2, 3, 3), unroll=2),
        StageSchedule(tile=(2, 2, 3, 3)),
        StageSchedule(tile=(2, 1, 3, 3), unroll=4),
    ],
    "conv_dX": [
        StageSchedule(),
        StageSchedule(tile=(1, 1, 2, 8), vectorize=8),
        StageSchedule(tile=(1, 1, 4, 8), vectorize=8),
        StageSchedule(tile=(1, 1, 2, 16), vectorize=8),
        StageSchedule(tile=(1, 1, 4, 4), vectorize=4),
        StageSchedule(tile=(1, 2, 2, 4), vectorize=4),
        StageSchedule(tile=(1, 1, 2, 28), vectorize=4),
        StageSchedule(tile=(1, 1, 4, 28), vectorize=4),
        StageSchedule(tile=(1, 4, 1, 28), vectorize=4),
        StageSchedule(tile=(1, 2, 1, 28), vectorize=4),
    ],
}

QUICK = {"dX": 3, "dW": 3, "conv_dW": 2, "conv_dX": 2}


def measure(stage_fn, ss, repeat=20, rng=None):
    """(GFLOP/s, ms, build s, max rel error) of one stage under one StageSchedule."""
    rng = rng or np.random.default_rng(0)
    out, inputs, ref, flops = stage_fn()
    sched = Schedule("bench", stages={out.op.name: ss})
    t0 = time.perf_counter()
    mod = pa.build(out, inputs, schedule=sched)
    build_s = time.perf_counter() - t0
    arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in inputs]
    want = ref(*[a.astype(np.float64) for a in arrays])
    got = mod(*arrays)
    err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
    t = float(np.median(mod.time(*arrays, repeat=repeat, warmup=2)))
    return flops / t / 1e9, t * 1e3, build_s, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(STAGES), help="comma-separated stages: " + ", ".join(STAGES))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="only the first few schedules of each stage")
    args = ap.parse_args(argv)
    print(f"{'stage':8} {'schedule':42} {'GFLOP/s':>8} {'%peak':>6} {'ms':>8} {'build s':>8} {'rel err':>8}")
    for name in args.only.split(","):
        fn = STAGES[name]
        scheds = SCHEDULES[name][: QUICK[name]] if args.quick else SCHEDULES[name]
        for ss in scheds:
            gf, ms, bs, err = measure(fn, ss, repeat=args.repeat)
            print(f"{name:8} {ss.describe() if hasattr(ss, 'describe') else str(ss):42} {gf:8.1f} {100 * gf / PEAK:5.0f}% "
                  f"{ms:8.3f} {bs:8.2f} {err:8.1e}", flush=True)


if __name__ == "__main__":
    main()
