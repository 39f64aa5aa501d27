"""``polyad demo``: differentiate a dense layer, show the gradient, build and run it on OpenCL."""

import time

import numpy as np


def run(batch=32, n_in=1000, n_out=1000, schedule="auto", out=print):
    """Run the demo; return 0 when every result matches numpy, 1 otherwise."""
    import polyad as pa

    X = pa.placeholder((batch, n_in), name="X")
    W = pa.placeholder((n_out, n_in), name="W")
    B = pa.placeholder((n_out,), name="B")
    Y = pa.nn.dense(X, W, B)
    H = pa.placeholder(Y.shape, name="H")
    out(f"polyad demo: Y = dense(X, W, B) = X·Wᵀ + B with X{list(X.shape)} W{list(W.shape)} B{list(B.shape)};")
    out(f"gradients of sum(H * Y) w.r.t. X, W, B for a head H{list(H.shape)}\n")

    t0 = time.perf_counter()
    dX, dW, dB = pa.differentiate(Y, [X, W, B], head=H)
    t_diff = time.perf_counter() - t0
    out(f"differentiated and simplified in {1e3 * t_diff:.0f} ms:\n")
    out(pa.show([dX, dW, dB]))
    out("")
    out(str(pa.estimate([dX, dW, dB])))

    rng = np.random.default_rng(0)
    try:
        x = rng.standard_normal(X.shape, dtype=np.float32)
        w = rng.standard_normal(W.shape, dtype=np.float32)
        b = rng.standard_normal(B.shape, dtype=np.float32)
        h = rng.standard_normal(H.shape, dtype=np.float32)
        x64, w64, h64 = (a.astype(np.float64) for a in (x, w, h))
        refs = {"Y": x64 @ w64.T + b, "dX": h64 @ w64, "dW": h64.T @ x64, "dB": h64.sum(0)}
    except MemoryError:
        raise pa.PolyadError(f"the demo's arrays do not fit this machine's memory (W alone is {n_out} x {n_in}): "
                             f"ask for smaller --batch, --n-in, --n-out") from None

    t0 = time.perf_counter()
    # the forward saves what the backward reads, on the device; the backward computes only gradients
    fwd, bwd = pa.vjp(Y, [X, W, B], schedule=schedule)
    t_build = time.perf_counter() - t0
    out(f"\nbuilt forward and backward (pa.vjp, {schedule} schedule) on {fwd.module.device.name.strip()} "
        f"in {t_build:.2f} s")

    y, res = fwd(x, w, b)
    dx, dw, db = bwd(res, h)
    ok = True
    for name, got in (("Y", y), ("dX", dx), ("dW", dw), ("dB", db)):
        ref = refs[name]
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        good = err < 1e-4
        ok &= good
        out(f"  {name:3s} max relative error vs numpy float64: {err:.1e} {'ok' if good else 'MISMATCH'}")

    t_fwd = float(np.median(fwd.time(x, w, b, repeat=5)))
    t_bwd = float(np.median(bwd.time(res, h, repeat=5)))
    out(f"\nforward {1e3 * t_fwd:.2f} ms, backward {1e3 * t_bwd:.2f} ms (median of 5), backward/forward {t_bwd / t_fwd:.2f}")
    out("OK" if ok else "MISMATCH")
    return 0 if ok else 1
