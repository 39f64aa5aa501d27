"""Helpers of the autodiff tests: central finite differences in float64 through pa.evaluate."""

import numpy as np
import polyad as pa
from polyad.te.tensor import ComputeOp, walk_ops
from polyad.te.visit import post_order

EPS = 1e-6


def numeric_jacobian(output, x, feed):
    """d output / d x by central differences: shape output.shape + x.shape."""
    base = np.asarray(feed[x], dtype=np.float64)
    f = dict(feed)
    cols = []
    for idx in np.ndindex(base.shape):
        xp, xm = base.copy(), base.copy()
        xp[idx] += EPS
        xm[idx] -= EPS
        f[x] = xp
        yp = pa.evaluate(output, f)
        f[x] = xm
        ym = pa.evaluate(output, f)
        cols.append((np.asarray(yp, np.float64) - ym) / (2 * EPS))
    return np.stack(cols, axis=-1).reshape(output.shape + base.shape)


def numeric_grad(output, x, feed, head=None):
    """sum_o head[p, o] d output[o] / d x[j]; the full Jacobian when head is None."""
    jac = numeric_jacobian(output, x, feed)
    if head is None:
        return jac
    return np.tensordot(np.asarray(feed[head]), jac, axes=output.ndim)


def check_grad(output, inputs, feed, head=None, optimize=(True, False), rtol=1e-5, atol=1e-6, **kw):
    """Compare pa.differentiate (every optimize setting given) with finite differences."""
    expected = [numeric_grad(output, x, feed, head) for x in inputs]
    results = []
    for opt in optimize:
        grads = pa.differentiate(output, inputs, head, optimize=opt, **kw)
        assert len(grads) == len(inputs)
        got = pa.evaluate(list(grads), feed)
        for x, g, e in zip(inputs, got, expected):
            assert g.shape == e.shape, (x.name, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"d/d{x.name} optimize={opt}")
        results.append(grads)
    return results


def graph_size(tensors):
    """Distinct expression nodes in the bodies of every stage the tensors depend on."""
    bodies = []
    for op in walk_ops(tensors):
        if isinstance(op, ComputeOp):
            bodies.extend(op.body)
    return len(post_order(tuple(bodies)))


def rand(rng, *shapes, lo=-1.0, hi=1.0):
    """float64 arrays uniform in [lo, hi)."""
    return [rng.uniform(lo, hi, size=s) for s in shapes]
