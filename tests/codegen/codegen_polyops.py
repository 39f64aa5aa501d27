"""Hand-made PolyOp stages (what the ISL simplifier will produce) and their numpy references."""

import islpy as isl
import numpy as np

import polyad as pa
from polyad.poly.stage import PolyOp, Statement
from polyad.te.expr import IterVar
from polyad.te.reduce import sum_reducer


def ivar(name, extent, kind="data"):
    return IterVar(name, "int32", lo=0, extent=extent, kind=kind)


def triangular_cumsum(n=6):
    """T[i] = sum_{k <= i} X[k]: a reduction over the non-rectangular domain {[i, k] : 0 <= k <= i < n}."""
    X = pa.placeholder((n,), name="X")
    i, k = ivar("i", n), ivar("k", n, "reduce")
    dom = isl.Set(f"{{ S0[i, k] : 0 <= k <= i < {n} }}")
    st = Statement("S0", (i, k), 1, dom, (X[k],), sum_reducer("float32"))
    T = PolyOp("T", (n,), ("float32",), (st,)).output(0)

    def ref(x):
        return np.cumsum(x.astype(np.float64)).astype(np.float32)

    return T, [X], ref


def band_fill_accumulate(n=5, m=7):
    """A zero-fill, an assignment and an accumulating reduction over a parallelogram.

    T[i, j] = 0 where j > i + 2 (zero-fill);  T[i, j] = B[i, j] where j <= i + 2;
    then T[i, j] += sum_{k : j <= k <= j + i, k < m} X[i, k] where j <= i + 2.
    """
    X = pa.placeholder((n, m), name="X")
    B = pa.placeholder((n, m), name="B")
    i, j, k = ivar("i", n), ivar("j", m), ivar("k", m, "reduce")
    zero = Statement("Z", (i, j), 2, isl.Set(f"{{ Z[i, j] : 0 <= i < {n} and i + 2 < j < {m} }}"), (pa.const(0.0),))
    band = f"0 <= i < {n} and 0 <= j < {m} and j <= i + 2"
    init = Statement("A", (i, j), 2, isl.Set(f"{{ A[i, j] : {band} }}"), (B[i, j],))
    acc = Statement(
        "R", (i, j, k), 2, isl.Set(f"{{ R[i, j, k] : {band} and j <= k <= j + i and k < {m} }}"),
        (X[i, k] * 2.0,), sum_reducer("float32"), accumulate=True,
    )
    T = PolyOp("T", (n, m), ("float32",), (zero, init, acc)).output(0)

    def ref(x, b):
        out = np.zeros((n, m))
        for a in range(n):
            for c in range(m):
                if c > a + 2:
                    continue
                out[a, c] = b[a, c] + sum(2.0 * x[a, q] for q in range(c, min(c + a, m - 1) + 1))
        return out.astype(np.float32)

    return T, [X, B], ref


def strided_conv_dx(n_in=13, k=5, stride=3, pad=1):
    """dX of a 1-d strided convolution as the simplifier leaves it: exact bounds on o, no select.

    dX[x] = sum_{o : x = stride*o + r - pad, 0 <= r < k} H[o] * W[x - stride*o + pad]
    """
    n_out = (n_in + 2 * pad - k) // stride + 1
    H = pa.placeholder((n_out,), name="H")
    W = pa.placeholder((k,), name="W")
    x, o = ivar("x", n_in), ivar("o", n_out, "reduce")
    dom = isl.Set(
        f"{{ S0[x, o] : 0 <= x < {n_in} and 0 <= o < {n_out} and 0 <= x - {stride}*o + {pad} < {k} }}"
    )
    st = Statement("S0", (x, o), 1, dom, (H[o] * W[x - stride * o + pad],), sum_reducer("float32"))
    dX = PolyOp("dX", (n_in,), ("float32",), (st,)).output(0)

    def ref(h, w):
        out = np.zeros(n_in)
        for oo in range(n_out):
            for r in range(k):
                xx = stride * oo + r - pad
                if 0 <= xx < n_in:
                    out[xx] += h[oo] * w[r]
        return out.astype(np.float32)

    return dX, [H, W], ref
