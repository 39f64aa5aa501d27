"""Hand-written numpy forward and backward passes: the textbook formulas.

The dtype follows the inputs: float32 arrays give the "numpy" column,
float64 arrays the reference every column's error is measured against.
Forward functions return ``(y, saved)``; backward functions take the saved
activations (as a framework would keep them) and the head ``h``.
"""

import numpy as np


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _out(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _pad(x, ph, pw, value=0.0):
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _tap(xp, r, s, dh, dw, sh, sw, oh, ow):
    """The input window rows/cols read by kernel tap (r, s): a strided view."""
    return xp[:, :, r * dh: r * dh + sh * (oh - 1) + 1: sh, s * dw: s * dw + sw * (ow - 1) + 1: sw]


# ----------------------------------------------------------------------------- dense

def dense_fwd(x, w, b=None):
    y = x @ w.T
    return (y if b is None else y + b), None


def dense_bwd(x, w, h):
    """(dX, dW, dB) = (H·W, Hᵀ·X, sum_i H)."""
    return h @ w, h.T @ x, h.sum(axis=0)


# ----------------------------------------------------------------------------- conv2d

def conv2d_fwd(x, w, stride=1, pad=0, dil=1):
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(pad), _pair(dil)
    n, c, hh, ww = x.shape
    f, _, kh, kw = w.shape
    oh, ow = _out(hh, kh, sh, ph, dh), _out(ww, kw, sw, pw, dw)
    xp = _pad(x, ph, pw)
    y = np.zeros((n, f, oh, ow), x.dtype)
    for r in range(kh):
        for s in range(kw):
            y += np.einsum("nchw,fc->nfhw", _tap(xp, r, s, dh, dw, sh, sw, oh, ow), w[:, :, r, s], optimize=True)
    return y, None


def conv2d_bwd(x, w, h, stride=1, pad=0, dil=1, data=True):
    """(dX, dW): per kernel tap, dW[:, :, r, s] = Hᵀ·X_tap and X_tap += H·W[:, :, r, s].

    data=False skips dX (returned as None), e.g. for a network's first layer.
    """
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(pad), _pair(dil)
    n, c, hh, ww = x.shape
    f, _, kh, kw = w.shape
    oh, ow = h.shape[2], h.shape[3]
    xp = _pad(x, ph, pw)
    dxp = np.zeros_like(xp) if data else None
    dw_ = np.zeros_like(w)
    for r in range(kh):
        for s in range(kw):
            dw_[:, :, r, s] = np.einsum("nfhw,nchw->fc", h, _tap(xp, r, s, dh, dw, sh, sw, oh, ow), optimize=True)
            if data:
                _tap(dxp, r, s, dh, dw, sh, sw, oh, ow)[...] += np.einsum("nfhw,fc->nchw", h, w[:, :, r, s], optimize=True)
    return (dxp[:, :, ph: ph + hh, pw: pw + ww] if data else None), dw_


# ----------------------------------------------------------------------------- pooling

def max_pool_fwd(x, kernel, stride, pad=0):
    """Max and first-maximum tap per window (PyTorch's tie rule)."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = _out(x.shape[2], kh, sh, ph, 1), _out(x.shape[3], kw, sw, pw, 1)
    xp = _pad(x, ph, pw, -np.inf)
    best = np.full(x.shape[:2] + (oh, ow), -np.inf, x.dtype)
    arg = np.zeros(best.shape, np.int64)
    for r in range(kh):
        for s in range(kw):
            v = _tap(xp, r, s, 1, 1, sh, sw, oh, ow)
            better = v > best  # strict: ties keep the earlier tap
            best = np.where(better, v, best)
            arg = np.where(better, r * kw + s, arg)
    return best, arg


def max_pool_bwd(arg, x_shape, h, kernel, stride, pad=0):
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = h.shape[2], h.shape[3]
    dxp = np.zeros(x_shape[:2] + (x_shape[2] + 2 * ph, x_shape[3] + 2 * pw), h.dtype)
    for r in range(kh):
        for s in range(kw):
            _tap(dxp, r, s, 1, 1, sh, sw, oh, ow)[...] += np.where(arg == r * kw + s, h, 0)
    return dxp[:, :, ph: ph + x_shape[2], pw: pw + x_shape[3]]


def avg_pool_fwd(x, kernel, stride, pad=0):
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = _out(x.shape[2], kh, sh, ph, 1), _out(x.shape[3], kw, sw, pw, 1)
    xp = _pad(x, ph, pw)
    y = np.zeros(x.shape[:2] + (oh, ow), x.dtype)
    for r in range(kh):
        for s in range(kw):
            y += _tap(xp, r, s, 1, 1, sh, sw, oh, ow)
    return y / (kh * kw), None


def avg_pool_bwd(x_shape, h, kernel, stride, pad=0):
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(pad)
    oh, ow = h.shape[2], h.shape[3]
    if (kh, kw) == (sh, sw) and ph == pw == 0:
        # Non-overlapping windows: the adjoint is a repeat of H (cropped rows get 0).
        dx = np.zeros(x_shape, h.dtype)
        g = np.repeat(np.repeat(h / (kh * kw), kh, axis=2), kw, axis=3)
        dx[:, :, : g.shape[2], : g.shape[3]] = g
        return dx
    dxp = np.zeros(x_shape[:2] + (x_shape[2] + 2 * ph, x_shape[3] + 2 * pw), h.dtype)
    for r in range(kh):
        for s in range(kw):
            _tap(dxp, r, s, 1, 1, sh, sw, oh, ow)[...] += h / (kh * kw)
    return dxp[:, :, ph: ph + x_shape[2], pw: pw + x_shape[3]]


# ----------------------------------------------------------------------------- softmax etc.

def softmax_fwd(t):
    e = np.exp(t - t.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_bwd(y, h):
    return y * (h - (h * y).sum(axis=-1, keepdims=True))


def dense_softmax_fwd(x, w):
    y = softmax_fwd(x @ w.T)
    return y, y


def dense_softmax_bwd(x, w, y, h):
    dt = softmax_bwd(y, h)
    return dt @ w, dt.T @ x


def cross_entropy_fwd(z, labels):
    m = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(axis=1)) + m[:, 0]
    return (lse - z[np.arange(z.shape[0]), labels]).mean(dtype=z.dtype)


def cross_entropy_bwd(z, labels, h):
    p = softmax_fwd(z)
    p[np.arange(z.shape[0]), labels] -= 1
    return p * (h / z.shape[0])


# ----------------------------------------------------------------------------- steps

def mlp_fwd(x, labels, params):
    """params = [W1, b1, W2, b2, ...]; relu between the dense layers."""
    acts, a = [], x
    layers = len(params) // 2
    for li in range(layers):
        z = a @ params[2 * li].T + params[2 * li + 1]
        acts.append((a, z))
        a = np.maximum(z, 0) if li < layers - 1 else z
    return cross_entropy_fwd(a, labels), acts


def mlp_bwd(labels, params, acts, h, input_adjoint=False):
    """Weight gradients [dW1, db1, ...]; with input_adjoint, also d(input)."""
    layers = len(params) // 2
    g = cross_entropy_bwd(acts[-1][1], labels, h)
    grads = [None] * len(params)
    for li in reversed(range(layers)):
        a, z = acts[li]
        if li < layers - 1:
            g = g * (z > 0)
        grads[2 * li], grads[2 * li + 1] = g.T @ a, g.sum(axis=0)
        if li or input_adjoint:
            g = g @ params[2 * li]
    return (grads, g) if input_adjoint else grads


def lenet_fwd(x, labels, params):
    """conv5x5+bias+relu+maxpool2, twice, flatten, dense 120/84/10 with relu."""
    cw1, cb1, cw2, cb2 = params[:4]
    z1 = conv2d_fwd(x, cw1)[0] + cb1[:, None, None]
    p1, arg1 = max_pool_fwd(np.maximum(z1, 0), 2, 2)
    z2 = conv2d_fwd(p1, cw2)[0] + cb2[:, None, None]
    p2, arg2 = max_pool_fwd(np.maximum(z2, 0), 2, 2)
    flat = p2.reshape(p2.shape[0], -1)
    loss, acts = mlp_fwd(flat, labels, params[4:])
    return loss, dict(x=x, z1=z1, p1=p1, arg1=arg1, z2=z2, p2=p2, arg2=arg2, acts=acts)


def lenet_bwd(labels, params, saved, h):
    cw1, cb1, cw2, cb2 = params[:4]
    dense_grads, g = mlp_bwd(labels, params[4:], saved["acts"], h, input_adjoint=True)
    g = g.reshape(saved["p2"].shape)
    g = max_pool_bwd(saved["arg2"], saved["z2"].shape, g, 2, 2) * (saved["z2"] > 0)
    dcb2 = g.sum(axis=(0, 2, 3))
    dp1, dcw2 = conv2d_bwd(saved["p1"], cw2, g)
    g = max_pool_bwd(saved["arg1"], saved["z1"].shape, dp1, 2, 2) * (saved["z1"] > 0)
    dcb1 = g.sum(axis=(0, 2, 3))
    _, dcw1 = conv2d_bwd(saved["x"], cw1, g, data=False)
    return [dcw1, dcb1, dcw2, dcb2] + dense_grads

