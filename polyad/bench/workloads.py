"""The benchmark workloads (/work/shared/WORKLOADS.md) as data.

A :class:`Workload` is a family (dense, conv2d, pool, ...) plus its
parameters; ``instantiate(batch=...)`` gives a :class:`Case` with everything
one run needs: input specs, the forward TE (built with ``pa.nn`` /
``pa.ops``), the hand-written TE gradient, the numpy forward/backward and the
torch forward.  Tests instantiate the same families at tiny shapes.

Every forward-TE and torch builder is called lazily, so a missing op (pa.nn
is being written) or a missing torch costs one "n/a" cell, not the run.
"""

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import handwritten as hw
from . import numpy_ref as npr


@dataclass(frozen=True)
class Input:
    """An input: shape, dtype and how to draw its values."""

    name: str
    shape: tuple
    dtype: str = "float32"
    init: tuple = ("normal", 1.0)  # ("normal", scale) | ("uniform", lo, hi) | ("labels", classes)

    def draw(self, rng):
        kind = self.init[0]
        if kind == "normal":
            return (rng.standard_normal(self.shape) * self.init[1]).astype(self.dtype)
        if kind == "uniform":
            return rng.uniform(self.init[1], self.init[2], self.shape).astype(self.dtype)
        if kind == "labels":
            return rng.integers(0, self.init[1], self.shape).astype(self.dtype)
        raise ValueError(f"input {self.name!r}: unknown init {self.init!r}")


@dataclass
class Case:
    """One concrete workload instance.

    ``forward_te(ph)`` builds Y from placeholders ``ph`` (name -> tensor) with pa.nn/pa.ops;
    ``hand_te(ph)`` returns the hand-written gradients of ``wrt`` (``ph`` also holds "H");
    ``np_forward(a)`` -> (y, saved) and ``np_backward(a, saved, h)`` -> gradients, on arrays ``a``;
    ``torch_forward(t)`` -> y from torch tensors ``t`` (name -> tensor).
    ``training``: Y is a loss and ``wrt`` the parameters: the runner also times a training step
    (forward, backward, SGD update of ``wrt``).
    """

    name: str
    inputs: list
    out_shape: tuple
    wrt: tuple
    forward_te: Callable
    hand_te: Callable
    np_forward: Callable
    np_backward: Callable
    torch_forward: Callable
    description: str = ""
    notes: list = field(default_factory=list)
    training: bool = False

    def data(self, seed=0):
        """Inputs and the head H (float32), reproducible."""
        rng = np.random.default_rng(seed)
        arrays = {i.name: i.draw(rng) for i in self.inputs}
        arrays["H"] = np.asarray(rng.standard_normal(self.out_shape), dtype="float32")
        return arrays

    def placeholders(self, float_dtype="float32"):
        """Fresh TE placeholders for every input and the head, by name (floats as ``float_dtype``)."""
        import polyad as pa

        def dtype(d):
            return float_dtype if d.startswith("float") else d

        ph = {i.name: pa.placeholder(i.shape, dtype=dtype(i.dtype), name=i.name) for i in self.inputs}
        ph["H"] = pa.placeholder(self.out_shape, dtype=float_dtype, name="H")
        return ph


def _fan(n):
    return ("normal", 1.0 / np.sqrt(n))


# ----------------------------------------------------------------------------- families

def dense(batch=32, n_in=1000, n_out=1000, wrt=("X", "W", "B")):
    def forward_te(ph):
        import polyad as pa

        return pa.nn.dense(ph["X"], ph["W"], ph["B"])

    def hand_te(ph):
        X, W, H = ph["X"], ph["W"], ph["H"]
        g = {"X": lambda: hw.dense_bwd_data(H, W), "W": lambda: hw.dense_bwd_weight(H, X),
             "B": lambda: hw.bias_bwd(H, axis=1)}
        return [g[n]() for n in wrt]

    def np_backward(a, saved, h):
        g = dict(zip("XWB", npr.dense_bwd(a["X"], a["W"], h)))
        return [g[n] for n in wrt]

    def torch_forward(t):
        import torch.nn.functional as F

        return F.linear(t["X"], t["W"], t["B"])

    return Case(
        "dense", [Input("X", (batch, n_in)), Input("W", (n_out, n_in), init=_fan(n_in)), Input("B", (n_out,))],
        (batch, n_out), tuple(wrt), forward_te, hand_te,
        lambda a: npr.dense_fwd(a["X"], a["W"], a["B"]), np_backward, torch_forward,
        f"X({batch},{n_in}) W({n_out},{n_in}) B({n_out}): Y = X·Wᵀ + B",
    )


def conv2d(batch=32, c_in=17, size=28, c_out=19, k=3, stride=1, pad=0, dil=1, wrt=("X", "W")):
    x_shape, w_shape = (batch, c_in, size, size), (c_out, c_in, k, k)
    o = hw.conv_out(size, k, stride, pad, dil)

    def forward_te(ph):
        import polyad as pa

        return pa.nn.conv2d(ph["X"], ph["W"], strides=stride, padding=pad, dilation=dil)

    def hand_te(ph):
        X, W, H = ph["X"], ph["W"], ph["H"]
        g = {"X": lambda: hw.conv2d_bwd_data(H, W, x_shape, stride, pad, dil),
             "W": lambda: hw.conv2d_bwd_weight(H, X, w_shape, stride, pad, dil)}
        return [g[n]() for n in wrt]

    def np_backward(a, saved, h):
        g = dict(zip("XW", npr.conv2d_bwd(a["X"], a["W"], h, stride, pad, dil, data="X" in wrt)))
        return [g[n] for n in wrt]

    def torch_forward(t):
        import torch.nn.functional as F

        return F.conv2d(t["X"], t["W"], stride=stride, padding=pad, dilation=dil)

    return Case(
        "conv2d", [Input("X", x_shape), Input("W", w_shape, init=_fan(c_in * k * k))],
        (batch, c_out, o, o), tuple(wrt), forward_te, hand_te,
        lambda a: npr.conv2d_fwd(a["X"], a["W"], stride, pad, dil), np_backward, torch_forward,
        f"X{x_shape} W{w_shape}, stride {stride}, pad {pad}, dilation {dil}",
    )


def pool(batch=32, channels=17, size=280, kernel=2, stride=2, pad=0, kind="avg"):
    x_shape = (batch, channels, size, size)
    out_shape = hw.pool_shape(x_shape, kernel, stride, pad)

    def forward_te(ph):
        import polyad as pa

        return pa.nn.pool2d(ph["X"], (kernel, kernel), (stride, stride), pad, kind)

    def hand_te(ph):
        X, H = ph["X"], ph["H"]
        if kind == "max":
            arg, _ = hw.max_pool_fwd(X, kernel, stride, pad)
            return [hw.max_pool_bwd(H, arg, x_shape, kernel, stride, pad)]
        return [hw.avg_pool_bwd(H, x_shape, kernel, stride, pad)]

    def np_forward(a):
        if kind == "max":
            return npr.max_pool_fwd(a["X"], kernel, stride, pad)
        return npr.avg_pool_fwd(a["X"], kernel, stride, pad)

    def np_backward(a, saved, h):
        if kind == "max":
            return [npr.max_pool_bwd(saved, x_shape, h, kernel, stride, pad)]
        return [npr.avg_pool_bwd(x_shape, h, kernel, stride, pad)]

    def torch_forward(t):
        import torch.nn.functional as F

        f = F.max_pool2d if kind == "max" else F.avg_pool2d
        return f(t["X"], kernel, stride, pad)

    return Case(
        f"{kind}_pool", [Input("X", x_shape)], out_shape, ("X",), forward_te, hand_te, np_forward, np_backward,
        torch_forward, f"X{x_shape}, {kernel}x{kernel}, stride {stride}, pad {pad}",
    )


def softmax(batch=60, n_in=1000, n_out=1000, homebrew=False):
    def forward_te(ph):
        import polyad as pa

        T = pa.nn.dense(ph["X"], ph["W"])
        if not homebrew:
            return pa.nn.softmax(T, axis=-1)
        E = pa.ops.exp(T)
        return pa.ops.divide(E, pa.ops.sum(E, axis=-1, keepdims=True))

    def hand_te(ph):
        X, W, H = ph["X"], ph["W"], ph["H"]
        Y = hw.softmax_fwd(hw.dense_fwd(X, W))
        dT = hw.softmax_bwd(Y, H)
        return [hw.dense_bwd_data(dT, W), hw.dense_bwd_weight(dT, X)]

    def np_forward(a):
        t = a["X"] @ a["W"].T
        if homebrew:
            e = np.exp(t)
            y = e / e.sum(axis=-1, keepdims=True)
        else:
            y = npr.softmax_fwd(t)
        return y, y

    def np_backward(a, y, h):
        return list(npr.dense_softmax_bwd(a["X"], a["W"], y, h))

    def torch_forward(t):
        import torch

        z = t["X"] @ t["W"].T
        if not homebrew:
            return torch.softmax(z, dim=-1)
        e = torch.exp(z)
        return e / e.sum(dim=-1, keepdim=True)

    how = "E = exp(X·Wᵀ); Y = E / sum(E)" if homebrew else "Y = softmax(X·Wᵀ), max-subtracted"
    return Case(
        "softmax_homebrew" if homebrew else "softmax",
        [Input("X", (batch, n_in)), Input("W", (n_out, n_in), init=_fan(n_in))], (batch, n_out), ("X", "W"),
        forward_te, hand_te, np_forward, np_backward, torch_forward, f"X({batch},{n_in}) W({n_out},{n_in}): {how}",
    )


def flatten(batch=32, c=100, h=20, w=25):
    x_shape = (batch, c, h, w)

    def forward_te(ph):
        import polyad as pa

        return pa.nn.flatten(ph["X"])

    def torch_forward(t):
        return t["X"].reshape(batch, -1)

    return Case(
        "flatten", [Input("X", x_shape)], (batch, c * h * w), ("X",), forward_te,
        lambda ph: [hw.flatten_bwd(ph["H"], x_shape)],
        lambda a: (a["X"].reshape(batch, -1), None),
        lambda a, saved, hh: [hh.reshape(x_shape)], torch_forward, f"X{x_shape} -> ({batch},{c * h * w})",
    )


def chain(n=1000, depth=200):
    def forward_te(ph):
        import polyad as pa

        x = ph["x"]
        y = x
        for d in range(depth):  # each level its own stage: y_d = x * y_(d-1)
            y = pa.compute((n,), lambda i, y=y: x[i] * y[i], name=f"y{d + 1}")
        return y

    def np_forward(a):
        y = a["x"]
        for _ in range(depth):
            y = a["x"] * y
        return y, None

    def torch_forward(t):
        y = t["x"]
        for _ in range(depth):
            y = t["x"] * y
        return y

    return Case(
        "chain", [Input("x", (n,), init=("uniform", 0.98, 1.02))], (n,), ("x",), forward_te,
        lambda ph: [hw.chain_bwd(ph["x"], ph["H"], depth)], np_forward,
        lambda a, saved, h: [h * (depth + 1) * a["x"] ** depth], torch_forward,
        f"x({n},), y = x·(x·(…)) {depth} deep, elementwise; d/dx = (depth+1)·x^depth",
    )


def _dense_stack(ph, x, layers, te_nn):
    """Dense layers with relu between them; te_nn picks pa.nn or the hand-written forward."""
    a = x
    for li in range(layers):
        W, B = ph[f"W{li + 1}"], ph[f"b{li + 1}"]
        if te_nn is None:
            z = hw.bias_add_fwd(hw.dense_fwd(a, W), B, name=f"z{li + 1}")
            a = hw.relu_fwd(z, name=f"a{li + 1}") if li < layers - 1 else z
        else:
            z = te_nn.dense(a, W, B)
            a = te_nn.relu(z) if li < layers - 1 else z
    return a


def _hand_dense_stack_bwd(ph, x, layers, labels, H, need_input):
    """Recompute the dense stack, then its backward: weight grads (and the input's adjoint)."""
    zs, acts, a = [], [], x
    for li in range(layers):
        z = hw.bias_add_fwd(hw.dense_fwd(a, ph[f"W{li + 1}"]), ph[f"b{li + 1}"], name=f"z{li + 1}")
        acts.append(a)
        zs.append(z)
        a = hw.relu_fwd(z, name=f"a{li + 1}") if li < layers - 1 else z
    g = hw.cross_entropy_bwd(zs[-1], labels, H)
    grads = [None] * (2 * layers)
    for li in reversed(range(layers)):
        if li < layers - 1:
            g = hw.relu_bwd(zs[li], g, name=f"dz{li + 1}")
        grads[2 * li] = hw.dense_bwd_weight(g, acts[li], name=f"dW{li + 1}")
        grads[2 * li + 1] = hw.bias_bwd(g, axis=1, name=f"db{li + 1}")
        if li or need_input:
            g = hw.dense_bwd_data(g, ph[f"W{li + 1}"], name=f"da{li}")
    return grads, g


def _torch_ce(logits, labels):
    import torch.nn.functional as F

    return F.cross_entropy(logits, labels.long())


def mlp_step(batch=128, sizes=(784, 512, 256, 10)):
    layers = len(sizes) - 1
    params = []
    for li in range(layers):
        params += [Input(f"W{li + 1}", (sizes[li + 1], sizes[li]), init=_fan(sizes[li])),
                   Input(f"b{li + 1}", (sizes[li + 1],), init=("normal", 0.1))]
    names = tuple(p.name for p in params)

    def forward_te(ph):
        import polyad as pa

        return pa.nn.cross_entropy(_dense_stack(ph, ph["X"], layers, pa.nn), ph["labels"])

    def hand_te(ph):
        return _hand_dense_stack_bwd(ph, ph["X"], layers, ph["labels"], ph["H"], False)[0]

    def np_forward(a):
        return npr.mlp_fwd(a["X"], a["labels"], [a[n] for n in names])

    def np_backward(a, acts, h):
        return npr.mlp_bwd(a["labels"], [a[n] for n in names], acts, h)

    def torch_forward(t):
        import torch.nn.functional as F

        a = t["X"]
        for li in range(layers):
            a = F.linear(a, t[f"W{li + 1}"], t[f"b{li + 1}"])
            if li < layers - 1:
                a = F.relu(a)
        return _torch_ce(a, t["labels"])

    return Case(
        "mlp_step", [Input("X", (batch, sizes[0])), Input("labels", (batch,), "int32", ("labels", sizes[-1]))] + params,
        (), names, forward_te, hand_te, np_forward, np_backward, torch_forward,
        f"{'-'.join(map(str, sizes))} MLP, relu, softmax cross-entropy, batch {batch}", training=True,
    )


def lenet_step(batch=64, size=28, c1=6, c2=16, k=5, dense=(120, 84, 10)):
    s1 = (size - k + 1) // 2
    s2 = (s1 - k + 1) // 2
    flat = c2 * s2 * s2
    sizes = (flat,) + tuple(dense)
    layers = len(dense)
    params = [Input("cw1", (c1, 1, k, k), init=_fan(k * k)), Input("cb1", (c1,), init=("normal", 0.1)),
              Input("cw2", (c2, c1, k, k), init=_fan(c1 * k * k)), Input("cb2", (c2,), init=("normal", 0.1))]
    for li in range(layers):
        params += [Input(f"W{li + 1}", (sizes[li + 1], sizes[li]), init=_fan(sizes[li])),
                   Input(f"b{li + 1}", (sizes[li + 1],), init=("normal", 0.1))]
    names = tuple(p.name for p in params)

    def forward_te(ph):
        import polyad as pa

        a = ph["X"]
        for c in ("1", "2"):
            z = pa.nn.bias_add(pa.nn.conv2d(a, ph["cw" + c]), ph["cb" + c], axis=1)
            a = pa.nn.pool2d(pa.nn.relu(z), (2, 2), (2, 2), 0, "max")
        return pa.nn.cross_entropy(_dense_stack(ph, pa.nn.flatten(a), layers, pa.nn), ph["labels"])

    def hand_te(ph):
        X, H = ph["X"], ph["H"]
        z1 = hw.bias_add_fwd(hw.conv2d_fwd(X, ph["cw1"], name="conv1"), ph["cb1"], name="z1c")
        r1 = hw.relu_fwd(z1, name="r1")
        arg1, p1 = hw.max_pool_fwd(r1, 2, 2, name="pool1")
        z2 = hw.bias_add_fwd(hw.conv2d_fwd(p1, ph["cw2"], name="conv2"), ph["cb2"], name="z2c")
        r2 = hw.relu_fwd(z2, name="r2")
        arg2, p2 = hw.max_pool_fwd(r2, 2, 2, name="pool2")
        dense_grads, g = _hand_dense_stack_bwd(ph, hw.flatten_fwd(p2), layers, ph["labels"], H, True)
        g = hw.flatten_bwd(g, p2.shape, name="dp2")
        g = hw.relu_bwd(z2, hw.max_pool_bwd(g, arg2, z2.shape, 2, 2, name="dr2"), name="dz2c")
        dcw2 = hw.conv2d_bwd_weight(g, p1, ph["cw2"].shape, name="dcw2")
        dcb2 = hw.bias_bwd(g, axis=1, name="dcb2")
        g = hw.conv2d_bwd_data(g, ph["cw2"], p1.shape, name="dp1")
        g = hw.relu_bwd(z1, hw.max_pool_bwd(g, arg1, z1.shape, 2, 2, name="dr1"), name="dz1c")
        dcw1 = hw.conv2d_bwd_weight(g, X, ph["cw1"].shape, name="dcw1")
        dcb1 = hw.bias_bwd(g, axis=1, name="dcb1")
        return [dcw1, dcb1, dcw2, dcb2] + dense_grads

    def np_forward(a):
        return npr.lenet_fwd(a["X"], a["labels"], [a[n] for n in names])

    def np_backward(a, saved, h):
        return npr.lenet_bwd(a["labels"], [a[n] for n in names], saved, h)

    def torch_forward(t):
        import torch.nn.functional as F

        a = t["X"]
        for c in ("1", "2"):
            a = F.max_pool2d(F.relu(F.conv2d(a, t["cw" + c], t["cb" + c])), 2, 2)
        a = a.reshape(a.shape[0], -1)
        for li in range(layers):
            a = F.linear(a, t[f"W{li + 1}"], t[f"b{li + 1}"])
            if li < layers - 1:
                a = F.relu(a)
        return _torch_ce(a, t["labels"])

    return Case(
        "lenet_step",
        [Input("X", (batch, 1, size, size)), Input("labels", (batch,), "int32", ("labels", dense[-1]))] + params,
        (), names, forward_te, hand_te, np_forward, np_backward, torch_forward,
        f"conv({c1},{k}x{k})+relu+maxpool2, conv({c2},{k}x{k})+relu+maxpool2, dense "
        f"{'→'.join(map(str, sizes))}, batch {batch} of {size}x{size}, cross-entropy", training=True,
    )


# ----------------------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Workload:
    """A named workload: a family with its parameters (``batch`` is the reducible one)."""

    name: str
    family: Callable
    params: dict

    def instantiate(self, batch=None, **overrides):
        params = dict(self.params, **overrides)
        if batch is not None and "batch" in params:
            params["batch"] = batch
        case = self.family(**params)
        case.name = self.name
        return case


WORKLOADS = {w.name: w for w in [
    Workload("dense", dense, dict(batch=32, n_in=1000, n_out=1000)),
    Workload("dense_big", dense, dict(batch=32, n_in=10000, n_out=3000, wrt=("W", "B"))),
    Workload("conv2d_3x3", conv2d, dict(batch=32, c_in=17, size=28, c_out=19, k=3)),
    Workload("conv2d_5x5_s3", conv2d, dict(batch=32, c_in=17, size=58, c_out=19, k=5, stride=3, pad=1)),
    Workload("conv2d_dilated", conv2d, dict(batch=8, c_in=16, size=32, c_out=16, k=3, stride=1, pad=1, dil=2)),
    Workload("avg_pool", pool, dict(batch=32, channels=17, size=280, kind="avg")),
    Workload("max_pool", pool, dict(batch=32, channels=64, size=100, kind="max")),
    Workload("softmax", softmax, dict(batch=60, n_in=1000, n_out=1000)),
    Workload("softmax_homebrew", softmax, dict(batch=60, n_in=1000, n_out=1000, homebrew=True)),
    Workload("flatten", flatten, dict(batch=32, c=100, h=20, w=25)),
    Workload("chain", chain, dict(n=1000, depth=200)),
    Workload("mlp_step", mlp_step, dict(batch=128)),
    Workload("lenet_step", lenet_step, dict(batch=64)),
]}
