"""Differentiation time of the depth-n chain y = x*(x*(x*...)), each level its own stage.

    python -m polyad.bench.bench_chain_autodiff [--size 1000] [--depths 50 100 200 400 800 1600]

Prints, per depth, the time pa.differentiate takes and the number of expression
nodes the gradient adds; both grow linearly with the depth (memoised rules,
hash-consed nodes, one adjoint-sum stage for x however many consumers it has).
"""

import argparse
import time

import numpy as np

import polyad as pa
from polyad.te.tensor import ComputeOp, walk_ops
from polyad.te.visit import post_order


def chain(depth, size, dtype="float32"):
    x = pa.placeholder((size,), dtype, "x")
    y = x
    for level in range(depth):
        prev = y
        y = pa.compute((size,), lambda i: x[i] * prev[i], name=f"y{level}")
    return x, y


def nodes(tensors):
    bodies = [b for op in walk_ops(tensors) if isinstance(op, ComputeOp) for b in op.body]
    return len(post_order(tuple(bodies)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--depths", type=int, nargs="+", default=[50, 100, 200, 400, 800, 1600])
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = ap.parse_args(argv)

    # correctness first, on a small chain: d x^(n+1) / dx = (n+1) x^n
    x, y = chain(5, 4, "float64")
    H = pa.placeholder((4,), "float64", "H")
    (g,) = pa.differentiate(y, [x], H)
    xv = np.linspace(0.5, 1.2, 4)
    assert np.allclose(pa.evaluate(g, {x: xv, H: np.ones(4)}), 6 * xv ** 5)

    print(f"{'depth':>6} {'differentiate (ms)':>19} {'ms/level':>9} {'gradient nodes':>15} {'nodes/level':>12}")
    for depth in args.depths:
        best = float("inf")
        for _ in range(args.repeat):
            x, y = chain(depth, args.size)
            H = pa.placeholder((args.size,), "float32", "H")
            t0 = time.perf_counter()
            (g,) = pa.differentiate(y, [x], H)
            best = min(best, time.perf_counter() - t0)
        added = nodes([g]) - nodes([y])
        print(f"{depth:>6} {best * 1e3:>19.1f} {best * 1e3 / depth:>9.3f} {added:>15} {added / depth:>12.1f}")


if __name__ == "__main__":
    main()
