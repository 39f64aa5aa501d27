"""Gradients written by hand as TE: the baseline autodiff is measured against.

Everything here is written directly with ``pa.compute`` / ``pa.sum`` /
``pa.select`` (no ``pa.nn``), the way an engineer would write a backward
kernel for the same backend: gathers with exact index conditions, the
max-pool adjoint through a window argmax, flatten's adjoint as a reshape.

Each ``*_bwd`` takes tensors and returns tensors, so the composite steps
(mlp, lenet) are built from the same pieces.  A hand-written backward graph
takes the forward inputs and the head ``H`` and recomputes the forward
intermediates it needs, exactly as an autodiff gradient graph does, so the
two are timed on equal terms.
"""

import polyad as pa


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_out(size, k, stride, pad, dil):
    """Output extent of a convolution/pool along one axis (floor mode)."""
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _in_range(e, n):
    return pa.logical_and(e >= 0, e < n)


# ----------------------------------------------------------------------------- dense

def dense_fwd(X, W, B=None, name="dense"):
    """Y[i, j] = sum_k X[i, k] W[j, k] (+ B[j])."""
    n, m = X.shape[0], W.shape[0]
    k = pa.reduce_axis((0, X.shape[1]), name="k")
    Y = pa.compute((n, m), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name=name)
    if B is None:
        return Y
    return pa.compute((n, m), lambda i, j: Y[i, j] + B[j], name=name + "_bias")


def dense_bwd_data(H, W, name="dense_dX"):
    """dX[i, k] = sum_j H[i, j] W[j, k]  (dX = H·W)."""
    j = pa.reduce_axis((0, W.shape[0]), name="j")
    return pa.compute((H.shape[0], W.shape[1]), lambda i, k: pa.sum(H[i, j] * W[j, k], axis=j), name=name)


def dense_bwd_weight(H, X, name="dense_dW"):
    """dW[j, k] = sum_i H[i, j] X[i, k]  (dW = Hᵀ·X)."""
    i = pa.reduce_axis((0, X.shape[0]), name="i")
    return pa.compute((H.shape[1], X.shape[1]), lambda j, k: pa.sum(H[i, j] * X[i, k], axis=i), name=name)


def bias_bwd(H, axis=1, name="dB"):
    """dB[c] = sum of H over every axis but ``axis``."""
    others = [d for d in range(H.ndim) if d != axis]
    red = [pa.reduce_axis((0, H.shape[d]), name=f"r{d}") for d in others]

    def body(c):
        idx = [None] * H.ndim
        idx[axis] = c
        for d, r in zip(others, red):
            idx[d] = r
        return pa.sum(H[tuple(idx)], axis=red)

    return pa.compute((H.shape[axis],), body, name=name)


# ----------------------------------------------------------------------------- conv2d

def conv2d_fwd(X, W, stride=1, pad=0, dil=1, name="conv"):
    """NCHW x OIHW, symmetric padding read under a guard."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(pad), _pair(dil)
    n, c, h, w = X.shape
    f, _, kh, kw = W.shape
    oh, ow = conv_out(h, kh, sh, ph, dh), conv_out(w, kw, sw, pw, dw)
    rc = pa.reduce_axis((0, c), name="rc")
    rr = pa.reduce_axis((0, kh), name="rr")
    rs = pa.reduce_axis((0, kw), name="rs")

    def body(b, o, y, x):
        iy, ix = y * sh + rr * dh - ph, x * sw + rs * dw - pw
        return pa.sum(X[b, rc, iy, ix] * W[o, rc, rr, rs], axis=[rc, rr, rs],
                      where=pa.logical_and(_in_range(iy, h), _in_range(ix, w)))

    if ph == 0 and pw == 0:
        def body(b, o, y, x):  # noqa: F811 - no padding: no guard
            return pa.sum(X[b, rc, y * sh + rr * dh, x * sw + rs * dw] * W[o, rc, rr, rs], axis=[rc, rr, rs])

    return pa.compute((n, f, oh, ow), body, name=name)


def _taps(size_out, k, stride, pad, dil, pos):
    """The kernel taps r (with output row o) that read input row ``pos``.

    Returns (reduce axis, r expression, o expression, condition).  With
    dilation 1 and stride s, only r = (pos + pad) mod s + s*q can hit a
    valid output row, so the reduction runs over q: ceil(k/s) taps instead
    of k, the form a person writes for a strided backward.  Otherwise every
    tap is visited under an exact divisibility guard.
    """
    if dil == 1 and stride > 1:
        q = pa.reduce_axis((0, -(-k // stride)), name="q")
        r = pa.floormod(pos + pad, stride) + stride * q
        o = pa.floordiv(pos + pad - r, stride)
        cond = pa.logical_and(r < k, _in_range(o, size_out))
        return q, r, o, cond
    r = pa.reduce_axis((0, k), name="t")
    num = pos + pad - r * dil
    if stride == 1:
        return r, r, num, _in_range(num, size_out)
    o = pa.floordiv(num, stride)
    cond = pa.logical_and(pa.floormod(num, stride) == 0, _in_range(o, size_out))
    return r, r, o, cond


def conv2d_bwd_data(H, W, x_shape, stride=1, pad=0, dil=1, name="conv_dX"):
    """dX[b, c, y, x] = sum_{o, r, s} H[b, o, (y+p-r·d)/st, (x+p-s·d)/st] W[o, c, r, s] over exact taps."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(pad), _pair(dil)
    f, _, kh, kw = W.shape
    oh, ow = H.shape[2], H.shape[3]
    ro = pa.reduce_axis((0, f), name="ro")

    def body(b, c, y, x):
        qy, r, oy, cy = _taps(oh, kh, sh, ph, dh, y)
        qx, s, ox, cx = _taps(ow, kw, sw, pw, dw, x)
        return pa.sum(H[b, ro, oy, ox] * W[ro, c, r, s], axis=[ro, qy, qx], where=pa.logical_and(cy, cx))

    return pa.compute(x_shape, body, name=name)


def conv2d_bwd_weight(H, X, w_shape, stride=1, pad=0, dil=1, name="conv_dW"):
    """dW[o, c, r, s] = sum_{b, y, x} H[b, o, y, x] X[b, c, y·st + r·d - p, x·st + s·d - p]."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(pad), _pair(dil)
    n, _, h, w = X.shape
    rb = pa.reduce_axis((0, n), name="rb")
    ry = pa.reduce_axis((0, H.shape[2]), name="ry")
    rx = pa.reduce_axis((0, H.shape[3]), name="rx")

    def body(o, c, r, s):
        iy, ix = ry * sh + r * dh - ph, rx * sw + s * dw - pw
        cond = None
        if ph or pw:
            cond = pa.logical_and(_in_range(iy, h), _in_range(ix, w))
        return pa.sum(H[rb, o, ry, rx] * X[rb, c, iy, ix], axis=[rb, ry, rx], where=cond)

    return pa.compute(w_shape, body, name=name)


# ----------------------------------------------------------------------------- pooling

def pool_shape(x_shape, kernel, stride, pad):
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    n, c, h, w = x_shape
    return n, c, conv_out(h, kh, sh, ph, 1), conv_out(w, kw, sw, pw, 1)


def _argmax_reducer():
    # (index, value) pairs; ties keep the smaller index: the first maximum in
    # iteration order, as PyTorch's max_pool2d picks it.
    def combine(a, b):
        (ia, va), (ib, vb) = a, b
        take_b = pa.logical_or(vb > va, pa.logical_and(vb == va, ib < ia))
        return pa.select(take_b, ib, ia), pa.select(take_b, vb, va)

    def identity(ti, tv):
        return pa.const(-1, ti), pa.const(float("-inf"), tv)

    return pa.comm_reducer(combine, identity, name="argmax")


_ARGMAX = _argmax_reducer()


def max_pool_fwd(X, kernel, stride, pad=0, name="max_pool"):
    """Returns (window argmax as kernel-local index r*kw + s, window max)."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    h, w = X.shape[2], X.shape[3]
    rr = pa.reduce_axis((0, kh), name="pr")
    rs = pa.reduce_axis((0, kw), name="ps")

    def body(b, c, y, x):
        iy, ix = y * sh + rr - ph, x * sw + rs - pw
        cond = pa.logical_and(_in_range(iy, h), _in_range(ix, w)) if (ph or pw) else None
        return _ARGMAX((rr * kw + rs, X[b, c, iy, ix]), axis=[rr, rs], where=cond)

    arg, val = pa.compute(pool_shape(X.shape, kernel, stride, pad), body, name=name)
    return arg, val


def max_pool_bwd(H, arg, x_shape, kernel, stride, pad=0, name="max_pool_dX"):
    """dX[.., y, x] = sum of H over the windows whose argmax is (y, x)."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = H.shape[2], H.shape[3]
    if (kh, kw) == (sh, sw) and ph == pw == 0:
        # Windows tile the input: one window per element, no reduction.
        def body(b, c, y, x):
            oy, ox = pa.floordiv(y, sh), pa.floordiv(x, sw)
            hit = pa.logical_and(pa.logical_and(oy < oh, ox < ow),
                                 arg[b, c, oy, ox] == pa.floormod(y, sh) * kw + pa.floormod(x, sw))
            return pa.select(hit, H[b, c, oy, ox], pa.const(0.0, H.dtype))

        return pa.compute(x_shape, body, name=name)

    def body(b, c, y, x):
        qy, r, oy, cy = _taps(oh, kh, sh, ph, 1, y)
        qx, s, ox, cx = _taps(ow, kw, sw, pw, 1, x)
        hit = pa.logical_and(pa.logical_and(cy, cx), arg[b, c, oy, ox] == r * kw + s)
        return pa.sum(H[b, c, oy, ox], axis=[qy, qx], where=hit)

    return pa.compute(x_shape, body, name=name)


def avg_pool_fwd(X, kernel, stride, pad=0, name="avg_pool"):
    """Average over the window, padding counted (count_include_pad=True)."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    h, w = X.shape[2], X.shape[3]
    rr = pa.reduce_axis((0, kh), name="pr")
    rs = pa.reduce_axis((0, kw), name="ps")
    inv = 1.0 / (kh * kw)

    def body(b, c, y, x):
        iy, ix = y * sh + rr - ph, x * sw + rs - pw
        cond = pa.logical_and(_in_range(iy, h), _in_range(ix, w)) if (ph or pw) else None
        return pa.sum(X[b, c, iy, ix] * inv, axis=[rr, rs], where=cond)

    return pa.compute(pool_shape(X.shape, kernel, stride, pad), body, name=name)


def avg_pool_bwd(H, x_shape, kernel, stride, pad=0, name="avg_pool_dX"):
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = H.shape[2], H.shape[3]
    inv = 1.0 / (kh * kw)
    if (kh, kw) == (sh, sw) and ph == pw == 0:
        def body(b, c, y, x):
            oy, ox = pa.floordiv(y, sh), pa.floordiv(x, sw)
            return pa.select(pa.logical_and(oy < oh, ox < ow), H[b, c, oy, ox] * inv, pa.const(0.0, H.dtype))

        return pa.compute(x_shape, body, name=name)

    def body(b, c, y, x):
        qy, _, oy, cy = _taps(oh, kh, sh, ph, 1, y)
        qx, _, ox, cx = _taps(ow, kw, sw, pw, 1, x)
        return pa.sum(H[b, c, oy, ox] * inv, axis=[qy, qx], where=pa.logical_and(cy, cx))

    return pa.compute(x_shape, body, name=name)


# ----------------------------------------------------------------------------- softmax, flatten, relu

def softmax_fwd(T, name="softmax"):
    """Max-subtracted softmax over the last axis of a 2-D tensor."""
    n, m = T.shape
    k1 = pa.reduce_axis((0, m), name="k1")
    k2 = pa.reduce_axis((0, m), name="k2")
    mx = pa.compute((n,), lambda i: pa.max(T[i, k1], axis=k1), name=name + "_max")
    E = pa.compute((n, m), lambda i, j: pa.exp(T[i, j] - mx[i]), name=name + "_exp")
    S = pa.compute((n,), lambda i: pa.sum(E[i, k2], axis=k2), name=name + "_sum")
    return pa.compute((n, m), lambda i, j: E[i, j] / S[i], name=name)


def softmax_bwd(Y, H, name="softmax_dT"):
    """dT = Y * (H - sum_j H Y)."""
    n, m = Y.shape
    k = pa.reduce_axis((0, m), name="k")
    dot = pa.compute((n,), lambda i: pa.sum(H[i, k] * Y[i, k], axis=k), name=name + "_dot")
    return pa.compute((n, m), lambda i, j: Y[i, j] * (H[i, j] - dot[i]), name=name)


def flatten_bwd(H, x_shape, name="flatten_dX"):
    """dX[a, b, c, d] = H[a, ((b·C + c)·D + d)]: a reshape, no reduction."""
    _, c, h, w = x_shape
    return pa.compute(x_shape, lambda a, b, y, x: H[a, (b * h + y) * w + x], name=name)


def flatten_fwd(X, name="flatten"):
    n, c, h, w = X.shape
    return pa.compute((n, c * h * w), lambda a, m: X[a, pa.floordiv(m, h * w), pa.floormod(pa.floordiv(m, w), h),
                                                    pa.floormod(m, w)], name=name)


def relu_fwd(X, name="relu"):
    zero = pa.const(0.0, X.dtype)
    return pa.compute(X.shape, lambda *i: pa.max(X[i], zero), name=name)


def relu_bwd(Z, H, name="relu_dZ"):
    """H where the pre-activation Z > 0 (0 at Z == 0, as PyTorch)."""
    zero = pa.const(0.0, H.dtype)
    return pa.compute(Z.shape, lambda *i: pa.select(Z[i] > zero, H[i], zero), name=name)


def bias_add_fwd(X, B, axis=1, name="bias_add"):
    return pa.compute(X.shape, lambda *i: X[i] + B[i[axis]], name=name)


def cross_entropy_bwd(logits, labels, H, name="ce_dlogits"):
    """d(mean_i (lse(z_i) - z_i[label_i]))/dz · H = H (softmax(z) - onehot) / N.

    ``H`` is the scalar head, a tensor of shape ().
    """
    n, m = logits.shape
    P = softmax_fwd(logits, name="ce_softmax")
    scale = 1.0 / n
    one, zero = pa.const(1.0, logits.dtype), pa.const(0.0, logits.dtype)
    return pa.compute((n, m), lambda i, j: H[()] * scale * (P[i, j] - pa.select(labels[i] == j, one, zero)),
                      name=name)


def chain_bwd(x, H, depth, name="chain_dx"):
    """y = x^(depth+1) elementwise, so dx = H (depth+1) x^depth."""
    return pa.compute(x.shape, lambda i: H[i] * float(depth + 1) * pa.pow(x[i], pa.const(float(depth), x.dtype)),
                      name=name)
