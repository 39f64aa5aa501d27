"""Hand-built raw-form gradients (the shape autodiff produces) and hand-written gradients, for tests.

A linear consumer ``Y[o] = sum_r sum_t v_t(o, r) * X[f_t(o, r)]`` read under
guards ``g_t`` has the raw adjoint::

    dX[j] = sum_{o', r'} sum_t select(f_t(o', r') == j and g_t(o', r'), H[o'] * v_t(o', r'), 0)
"""

import itertools

import numpy as np

import polyad as pa


def raw_grad(x_shape, out_shape, red_extents, reads, name="dX", dtype="float32"):
    """The raw adjoint of X.

    ``reads(o, r)`` gets the fresh reduce axes copying the consumer's data axes
    ``o`` and reduce axes ``r`` and returns ``[(index tuple, guard or None, value)]``,
    one per read of X (value already multiplied by the head).
    """

    def body(*j):
        o = [pa.reduce_axis((0, e), f"o{k}") for k, e in enumerate(out_shape)]
        r = [pa.reduce_axis((0, e), f"r{k}") for k, e in enumerate(red_extents)]
        src = None
        for idx, guard, val in reads(o, r):
            cond = guard
            for f, jj in zip(idx, j):
                c = f == jj
                cond = c if cond is None else cond & c
            term = pa.select(cond, val, pa.const(0.0, dtype))
            src = term if src is None else src + term
        return pa.sum(src, axis=o + r)

    return pa.compute(x_shape, body, name=name)


def window_pairs(n_in, n_out, kernel, stride, dilation=1, pad=0):
    """#{(y, r) : 0 <= y < n_out, 0 <= r < kernel, 0 <= stride*y + dilation*r - pad < n_in}."""
    return sum(
        1 for y, r in itertools.product(range(n_out), range(kernel)) if 0 <= stride * y + dilation * r - pad < n_in
    )


def out_size(n_in, kernel, stride, dilation=1, pad=0):
    return (n_in + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _first_argmax(x, y):
    take_y = (y[1] > x[1]) | ((y[1] == x[1]) & (y[0] < x[0]))
    return pa.select(take_y, y[0], x[0]), pa.select(take_y, y[1], x[1])


argmax = pa.comm_reducer(_first_argmax, lambda t0, t1: (pa.const(-1, t0), pa.const(float("-inf"), t1)), "argmax")


def argmax_rows(Z, name="A"):
    """A[i] = the first k where Z[i, k] is largest."""
    k = pa.reduce_axis((0, Z.shape[1]), "k")
    return pa.compute((Z.shape[0],), lambda i: argmax((k + 0, Z[i, k]), axis=k), name=name)[0]


def argmax_stage(X, out_shape, kernel, stride, name="A"):
    """A[n, c, y, x] = the flat index ry*K + rx of the first maximum of each pooling window."""
    K, S = kernel, stride

    def body(n, c, y, x):
        ry = pa.reduce_axis((0, K), "ry")
        rx = pa.reduce_axis((0, K), "rx")
        return argmax((ry * K + rx, X[n, c, S * y + ry, S * x + rx]), axis=[ry, rx])

    return pa.compute(out_shape, body, name=name)[0]


def rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
