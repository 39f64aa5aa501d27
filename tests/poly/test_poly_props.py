"""Property: for random compositions of affine index maps, the simplified gradient equals the raw one.

A view chain maps the indices of Y to those of X: offsets (slices), strides,
reversals, transposes, diagonals ``A[i, i]``, div/mod reshapes (merging and
splitting axes), paddings (guarded reads) and broadcasts.  The raw gradient of
``Y = view(X)`` is ``dX[j] = sum_o select(f(o) == j and guard(o), H[o], 0)``.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyad as pa
from polyad.poly import estimate, simplify
from poly_rawforms import rand, raw_grad

MAX_Y = 150


@st.composite
def view_chains(draw):
    x_shape = tuple(draw(st.lists(st.integers(2, 6), min_size=1, max_size=2)))
    shape = list(x_shape)

    def fn(idx):
        return list(idx), None

    for _ in range(draw(st.integers(1, 4))):
        kinds = ["offset", "stride", "reverse", "pad"]
        if len(shape) >= 2:
            kinds += ["transpose", "diagonal", "merge"]
        if len(shape) <= 2:
            kinds += ["split", "broadcast"]
        kind = draw(st.sampled_from(kinds))
        a = draw(st.integers(0, len(shape) - 1))
        n = shape[a]
        f = fn
        if kind == "offset" and n >= 2:
            m = draw(st.integers(1, n - 1))
            b = draw(st.integers(0, n - m))
            shape[a] = m
            fn = lambda i, f=f, a=a, b=b: f(i[:a] + [i[a] + b] + i[a + 1:])  # noqa: E731
        elif kind == "stride" and n >= 2:
            s = draw(st.integers(2, 3))
            shape[a] = -(-n // s)
            fn = lambda i, f=f, a=a, s=s: f(i[:a] + [s * i[a]] + i[a + 1:])  # noqa: E731
        elif kind == "reverse":
            fn = lambda i, f=f, a=a, n=n: f(i[:a] + [(n - 1) - i[a]] + i[a + 1:])  # noqa: E731
        elif kind == "pad":
            p = draw(st.integers(1, 2))
            shape[a] = n + 2 * p

            def fn(i, f=f, a=a, n=n, p=p):
                x, g = f(i[:a] + [i[a] - p] + i[a + 1:])
                inside = (i[a] >= p) & (i[a] < n + p)
                return x, inside if g is None else inside & g
        elif kind == "transpose":
            perm = draw(st.permutations(range(len(shape))))
            old = list(shape)
            shape = [old[q] for q in perm]

            def fn(i, f=f, perm=perm):
                orig = [None] * len(perm)
                for k, q in enumerate(perm):
                    orig[q] = i[k]
                return f(orig)
        elif kind == "diagonal":
            shape = [min(shape[0], shape[1])] + shape[2:]
            fn = lambda i, f=f: f([i[0], i[0]] + i[1:])  # noqa: E731
        elif kind == "merge" and a + 1 < len(shape):
            n1 = shape[a + 1]
            shape = shape[:a] + [n * n1] + shape[a + 2:]
            fn = lambda i, f=f, a=a, n1=n1: f(i[:a] + [i[a] // n1, i[a] % n1] + i[a + 1:])  # noqa: E731
        elif kind == "split":
            qs = [q for q in range(2, n) if n % q == 0]
            if qs:
                q = draw(st.sampled_from(qs))
                shape = shape[:a] + [n // q, q] + shape[a + 1:]
                fn = lambda i, f=f, a=a, q=q: f(i[:a] + [i[a] * q + i[a + 1]] + i[a + 2:])  # noqa: E731
        elif kind == "broadcast":
            shape = [draw(st.integers(1, 3))] + shape
            fn = lambda i, f=f: f(i[1:])  # noqa: E731
        if int(np.prod(shape)) > MAX_Y:
            break
    return x_shape, tuple(shape), fn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=view_chains(), seed=st.integers(0, 100))
def test_simplified_view_gradient_equals_raw_and_is_never_dearer(chain, seed):
    x_shape, y_shape, fn = chain
    if int(np.prod(y_shape)) > MAX_Y:
        return
    H = pa.placeholder(y_shape, name="H")

    def reads(o, r):
        x, g = fn(list(o))
        return [(tuple(x), g, H[tuple(o)])]

    raw = raw_grad(x_shape, y_shape, (), reads)
    s = simplify(raw)
    feed = {H: rand(y_shape, seed)}
    np.testing.assert_allclose(pa.evaluate(s, feed), pa.evaluate(raw, feed), rtol=1e-5, atol=1e-6)
    e, e_raw = estimate(s), estimate(raw)
    assert e.flops <= e_raw.flops and e.iterations <= e_raw.iterations
    # a view moves data: whatever the chain, the only arithmetic left is summing the
    # elements of H that land on the same element of X (at most one add per element of H)
    assert e.flops <= int(np.prod(y_shape))


@st.composite
def window_consumers(draw):
    """Y[o] = sum_r w(r) X[s*o + d*r - p] (guarded where it reads the padding), plus maybe a second read."""
    n = draw(st.integers(3, 9))
    k = draw(st.integers(1, 3))
    s = draw(st.integers(1, 3))
    d = draw(st.integers(1, 3))
    p = draw(st.integers(0, 2))
    out = (n + 2 * p - d * (k - 1) - 1) // s + 1
    second = draw(st.sampled_from([None, "reverse", "half"]))
    return n, k, s, d, p, out, second


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=window_consumers(), seed=st.integers(0, 100))
def test_simplified_window_gradient_equals_raw(case, seed):
    n, k, s, d, p, out, second = case
    if out < 1:
        return
    H = pa.placeholder((out,), name="H")
    Wt = pa.placeholder((k,), name="Wt")

    def reads(o, r):
        i = s * o[0] + d * r[0] - p
        terms = [((i,), (i >= 0) & (i < n), H[o[0]] * Wt[r[0]])]
        if second == "reverse":
            terms.append((((n - 1) - (o[0] % n),), None, H[o[0]]))
        elif second == "half":
            terms.append(((o[0] // 2,), (o[0] // 2 < n), H[o[0]] * 0.5))
        return terms

    raw = raw_grad((n,), (out,), (k,), reads)
    s_ = simplify(raw)
    feed = {H: rand((out,), seed), Wt: rand((k,), seed + 1)}
    np.testing.assert_allclose(pa.evaluate(s_, feed), pa.evaluate(raw, feed), rtol=1e-5, atol=1e-6)
    assert estimate(s_).flops <= estimate(raw).flops
    if second is None:
        # one read: statements + zero fill never exceed the raw box (with two, overlaps may, by a little)
        assert estimate(s_).iterations <= estimate(raw).iterations
