"""Every op of pa.ops and pa.nn, differentiated w.r.t. every float input: central finite differences
in float64 through pa.evaluate, with heads that are not all ones (and full Jacobians for small ops)."""

import zlib

import numpy as np
import pytest

import polyad as pa
from polyad.te import dtype as dt

from autodiff_helpers import check_grad

F = "float64"
ops, nn = pa.ops, pa.nn


class Case:
    """Placeholders with their random values; ``ph`` makes a float64 input."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.feed = {}
        self.wrt = []

    def ph(self, shape, name, lo=-1.0, hi=1.0, wrt=True):
        t = pa.placeholder(shape, F, name)
        self.feed[t] = self.rng.uniform(lo, hi, shape)
        if wrt:
            self.wrt.append(t)
        return t

    def const_input(self, value, name):
        value = np.asarray(value)
        t = pa.placeholder(value.shape, value.dtype.name, name)
        self.feed[t] = value
        return t


def _away_from_jumps(c, x, scale):
    """Values whose floor/round/ceil/trunc/mod do not jump within the finite-difference step."""
    c.feed[x] = np.round(c.feed[x] * scale) / scale + 0.23 / scale
    return x


# name -> builder(Case) -> output tensor (the Case collects the inputs)
UNARY = {
    "abs": (ops.abs, -1, 1), "cos": (ops.cos, -2, 2), "erf": (ops.erf, -1, 1), "exp": (ops.exp, -1, 1),
    "log": (ops.log, 0.3, 2), "log1p": (ops.log1p, -0.5, 1), "log2": (ops.log2, 0.3, 2),
    "negative": (ops.negative, -1, 1), "rsqrt": (ops.rsqrt, 0.3, 2), "sigmoid": (ops.sigmoid, -2, 2),
    "sin": (ops.sin, -2, 2), "sqrt": (ops.sqrt, 0.3, 2), "tanh": (ops.tanh, -2, 2),
    "nn.sigmoid": (nn.sigmoid, -2, 2), "nn.tanh": (nn.tanh, -2, 2), "nn.relu": (nn.relu, -1, 1),
    "nn.leaky_relu": (lambda x: nn.leaky_relu(x, 0.1), -1, 1),
    "clip": (lambda x: ops.clip(x, -0.5, 0.4), -1, 1),
}
PIECEWISE = {"ceil": ops.ceil, "floor": ops.floor, "round": ops.round, "trunc": ops.trunc, "sign": ops.sign}
BINARY = {
    "add": (ops.add, (-1, 1), (-1, 1)), "subtract": (ops.subtract, (-1, 1), (-1, 1)),
    "multiply": (ops.multiply, (-1, 1), (-1, 1)), "divide": (ops.divide, (-1, 1), (0.5, 2)),
    "power": (ops.power, (0.3, 2), (-2, 2)), "maximum": (ops.maximum, (-1, 1), (-1, 1)),
    "minimum": (ops.minimum, (-1, 1), (-1, 1)),
}


def _unary(name):
    fn, lo, hi = UNARY[name]

    def build(c):
        x = c.ph((2, 3), "x", lo, hi)
        if name in ("abs", "nn.relu", "nn.leaky_relu", "clip"):
            c.feed[x] = np.where(np.abs(c.feed[x]) < 0.05, 0.3, c.feed[x])
            c.feed[x] = np.where(np.abs(np.abs(c.feed[x]) - 0.45) < 0.06, 0.2, c.feed[x])
        return fn(x)

    return build


def _piecewise(name):
    def build(c):
        x = _away_from_jumps(c, c.ph((2, 3), "x", -2, 2), 1.0)
        return ops.multiply(PIECEWISE[name](x), x)  # d = f(x): the piecewise part adds nothing

    return build


def _binary(name):
    fn, (la, ha), (lb, hb) = BINARY[name]

    def build(c):
        a = c.ph((2, 3), "a", la, ha)
        b = c.ph((3,), "b", lb, hb)  # broadcast: b's gradient sums over axis 0
        return fn(a, b)

    return build


def _mod(fn):
    def build(c):
        a = c.ph((2, 3), "a", 3.1, 3.9)
        b = c.ph((2, 3), "b", 1.05, 1.15)
        return ops.multiply(fn(a, b), a)

    return build


def _conv(c, xs, ws, **kw):
    return nn.conv2d(c.ph(xs, "x"), c.ph(ws, "w"), **kw)


def _convt(c, xs, ws, **kw):
    return nn.conv2d_transpose(c.ph(xs, "x"), c.ph(ws, "w"), **kw)


CASES = {
    **{f"unary:{n}": _unary(n) for n in UNARY},
    **{f"piecewise:{n}": _piecewise(n) for n in PIECEWISE},
    **{f"binary:{n}": _binary(n) for n in BINARY},
    "mod": _mod(ops.mod),
    "floor_divide": _mod(ops.floor_divide),
    "where+comparisons": lambda c: ops.where(
        ops.logical_or(ops.greater(c.ph((2, 3), "p"), c.ph((2, 3), "q")),
                       ops.logical_and(ops.less_equal(c.wrt[0], 0.2), ops.logical_not(ops.equal(c.wrt[1], 0.0)))),
        ops.multiply(c.ph((2, 3), "x"), c.wrt[0]), c.ph((3,), "y")),
    "cast": lambda c: ops.multiply(ops.cast(ops.cast(c.ph((2, 3), "x"), "float64"), "float64"), 2.0),
    "sum": lambda c: ops.sum(c.ph((2, 3, 2), "x"), axis=1),
    "sum_all": lambda c: ops.sum(c.ph((2, 3), "x")),
    "sum_keepdims": lambda c: ops.sum(c.ph((2, 3, 2), "x"), axis=(0, 2), keepdims=True),
    "mean": lambda c: ops.mean(c.ph((2, 3, 2), "x"), axis=(1, 2)),
    "max": lambda c: ops.max(c.ph((2, 4), "x"), axis=1),
    "min": lambda c: ops.min(c.ph((3, 2), "x"), axis=0, keepdims=True),
    "prod": lambda c: ops.prod(c.ph((2, 3), "x", 0.5, 1.5), axis=1),
    "reshape": lambda c: ops.reshape(c.ph((2, 3, 2), "x"), (3, 4)),
    "transpose": lambda c: ops.transpose(c.ph((2, 3, 2), "x"), (2, 0, 1)),
    "squeeze": lambda c: ops.squeeze(c.ph((2, 1, 3), "x"), axis=1),
    "expand_dims": lambda c: ops.expand_dims(c.ph((2, 3), "x"), 1),
    "concatenate": lambda c: ops.concatenate([c.ph((2, 3), "a"), c.ph((1, 3), "b"), c.ph((2, 3), "d")], axis=0),
    "split": lambda c: ops.multiply(*ops.split(c.ph((4, 3), "x"), 2, axis=0)),
    "split_indices": lambda c: ops.split(c.ph((2, 5), "x"), [1, 3], axis=1)[1],
    "take": lambda c: ops.take(c.ph((4, 3), "x"), c.const_input(np.array([3, 0, 3], "int32"), "i"), axis=0),
    "take_flat": lambda c: ops.take(c.ph((2, 3), "x"), c.const_input(np.array([[5, 1], [7, -1]], "int32"), "i")),
    "strided_slice": lambda c: ops.strided_slice(c.ph((5, 4), "x"), [1, 0], [5, 4], [2, 3]),
    "broadcast_to": lambda c: ops.broadcast_to(c.ph((3, 1), "x"), (2, 3, 2)),
    "pad": lambda c: ops.pad(c.ph((2, 3), "x"), ((1, 0), (2, 1))),
    "pad_reflect": lambda c: ops.pad(c.ph((3, 3), "x"), ((1, 1), (2, 0)), mode="reflect"),
    "pad_edge": lambda c: ops.pad(c.ph((2, 3), "x"), ((1, 1), (1, 2)), mode="edge"),
    "flip": lambda c: ops.flip(c.ph((2, 3), "x"), axis=1),
    "stack": lambda c: ops.stack([c.ph((2, 3), "a"), c.ph((2, 3), "b")], axis=1),
    "tensordot": lambda c: ops.tensordot(c.ph((2, 3, 2), "a"), c.ph((3, 2, 2), "b"), axes=2),
    "matmul": lambda c: ops.matmul(c.ph((2, 3), "a"), c.ph((3, 2), "b")),
    "batch_flatten": lambda c: ops.batch_flatten(c.ph((2, 2, 3), "x")),
    "flatten": lambda c: ops.flatten(c.ph((2, 3), "x")),
    "layout_transform": lambda c: ops.layout_transform(c.ph((1, 2, 2, 3), "x"), "NCHW", "NHWC"),
    "reshape_like": lambda c: ops.reshape_like(c.ph((2, 3), "x"), pa.placeholder((3, 2), F, "like")),
    "broadcast_to_like": lambda c: ops.broadcast_to_like(c.ph((3,), "x"), pa.placeholder((2, 3), F, "like")),
    "collapse_sum_like": lambda c: ops.collapse_sum_like(c.ph((2, 3), "x"), pa.placeholder((3,), F, "like")),
    "collapse_sum_to": lambda c: ops.collapse_sum_to(c.ph((2, 3, 2), "x"), (3, 1)),
    "slice_like": lambda c: ops.slice_like(c.ph((3, 4), "x"), pa.placeholder((2, 3), F, "like")),
    "zeros_like": lambda c: ops.add(ops.zeros_like(c.ph((2, 3), "x")), ops.ones_like(c.ph((2, 3), "y"))),
    "full_like": lambda c: ops.multiply(ops.full_like(c.ph((2, 3), "x"), 2.5), c.ph((3,), "y")),
    "nn.dense": lambda c: nn.dense(c.ph((2, 3), "x"), c.ph((4, 3), "w"), c.ph((4,), "b")),
    "nn.dense_nobias": lambda c: nn.dense(c.ph((2, 3), "x"), c.ph((2, 3), "w")),
    "nn.bias_add": lambda c: nn.bias_add(c.ph((2, 3, 2), "x"), c.ph((3,), "b"), axis=1),
    "nn.prelu": lambda c: nn.prelu(c.ph((2, 3, 2), "x"), c.ph((3,), "alpha"), axis=1),
    "nn.softmax": lambda c: nn.softmax(c.ph((2, 4), "x")),
    "nn.softmax_axis0": lambda c: nn.softmax(c.ph((3, 2), "x"), axis=0),
    "nn.log_softmax": lambda c: nn.log_softmax(c.ph((2, 4), "x")),
    "nn.conv2d": lambda c: _conv(c, (1, 2, 4, 4), (2, 2, 2, 2)),
    "nn.conv2d_stride_pad": lambda c: _conv(c, (1, 1, 5, 5), (2, 1, 3, 3), strides=2, padding=1),
    "nn.conv2d_dilated": lambda c: _conv(c, (1, 1, 5, 5), (1, 1, 2, 2), padding=1, dilation=2),
    "nn.conv2d_groups": lambda c: _conv(c, (1, 4, 3, 3), (2, 2, 2, 2), groups=2),
    "nn.conv2d_transpose": lambda c: _convt(c, (1, 2, 3, 3), (2, 1, 2, 2), strides=2),
    "nn.conv2d_transpose_pad": lambda c: _convt(c, (1, 1, 3, 3), (1, 2, 3, 3), strides=2, padding=1),
    "nn.pool2d_max": lambda c: nn.pool2d(c.ph((1, 2, 4, 4), "x"), 2, 2, pool_type="max"),
    "nn.pool2d_max_overlap_pad": lambda c: nn.pool2d(c.ph((1, 1, 4, 4), "x"), 3, 2, padding=1, pool_type="max"),
    "nn.pool2d_avg": lambda c: nn.pool2d(c.ph((1, 1, 4, 4), "x"), 2, 2, pool_type="avg"),
    "nn.pool2d_avg_pad": lambda c: nn.pool2d(c.ph((1, 1, 4, 4), "x"), 3, 2, padding=1, pool_type="avg",
                                             count_include_pad=False),
    "nn.global_pool2d_max": lambda c: nn.global_pool2d(c.ph((1, 2, 3, 3), "x"), "max"),
    "nn.global_pool2d_avg": lambda c: nn.global_pool2d(c.ph((1, 2, 3, 3), "x"), "avg"),
    "nn.upsampling": lambda c: nn.upsampling(c.ph((1, 1, 2, 3), "x"), 2),
    "nn.flatten": lambda c: nn.flatten(c.ph((2, 2, 2, 2), "x")),
    "nn.batch_norm": lambda c: nn.batch_norm(c.ph((2, 3, 2), "x"), c.ph((3,), "gamma"), c.ph((3,), "beta"),
                                             c.ph((3,), "mean"), c.ph((3,), "var", 0.5, 1.5)),
    "nn.dropout": lambda c: nn.dropout(c.ph((2, 3), "x"), c.const_input(np.array([[1, 0, 1], [0, 1, 1]], "bool"), "m")),
    "nn.lrn": lambda c: nn.lrn(c.ph((1, 4, 2, 2), "x"), size=3, alpha=0.5, beta=0.75, bias=1.0),
    "nn.l2_normalize": lambda c: nn.l2_normalize(c.ph((2, 3), "x"), axis=(1,)),
    "nn.cross_entropy": lambda c: nn.cross_entropy(c.ph((3, 4), "logits"),
                                                   c.const_input(np.array([2, 0, 3], "int32"), "labels")),
}

def _conv_relu_pool(c):
    y = nn.relu(nn.conv2d(c.ph((1, 1, 5, 5), "x"), c.ph((2, 1, 2, 2), "w1"), padding=1))
    y = nn.pool2d(y, 2, 2, pool_type="max")
    return nn.tanh(nn.conv2d(y, c.ph((1, 2, 2, 2), "w2")))


def _act_of_reshaped_conv(act):
    def build(c):
        y = nn.conv2d(c.ph((1, 1, 4, 4), "x"), c.ph((2, 1, 2, 2), "w"))
        return act(ops.reshape(y, (2, 9)))

    return build


CASES.update({
    "chain:conv_relu_pool": _conv_relu_pool,
    "chain:conv_dense_bias_relu": lambda c: nn.relu(nn.bias_add(nn.dense(
        nn.flatten(nn.conv2d(c.ph((2, 1, 3, 3), "x"), c.ph((2, 1, 2, 2), "w"))), c.ph((3, 8), "w2")), c.ph((3,), "b"), 1)),
    "chain:softmax_of_reshaped_conv": _act_of_reshaped_conv(nn.softmax),
    "chain:log_softmax_of_reshaped_conv": _act_of_reshaped_conv(nn.log_softmax),
    "chain:sigmoid_of_reshaped_conv": _act_of_reshaped_conv(nn.sigmoid),
    "chain:tanh_of_reshaped_conv": _act_of_reshaped_conv(nn.tanh),
    "chain:concatenate_split": lambda c: ops.multiply(*ops.split(ops.concatenate(
        [ops.exp(c.ph((2, 3), "a")), c.ph((2, 3), "b")], axis=1), 2, axis=1)),
    "chain:softmax_homebrew": lambda c: ops.divide(ops.exp(nn.dense(c.ph((2, 3), "x"), c.ph((4, 3), "w"))), ops.sum(
        ops.exp(nn.dense(c.wrt[0], c.wrt[1])), axis=1, keepdims=True)),
    "chain:cross_entropy_mlp": lambda c: nn.cross_entropy(nn.dense(nn.relu(nn.dense(
        c.ph((3, 4), "x"), c.ph((5, 4), "w1"), c.ph((5,), "b1"))), c.ph((3, 5), "w2")),
        c.const_input(np.array([0, 2, 1], "int32"), "labels")),
})

# full Jacobians (head=None) for these small ops, besides the random head
JACOBIAN = {"unary:exp", "binary:multiply", "sum", "max", "transpose", "take", "nn.softmax", "nn.dense", "nn.flatten",
            "concatenate", "pad_reflect", "prod"}


def _build(name):
    c = Case(zlib.crc32(name.encode()))
    out = CASES[name](c)
    if isinstance(out, (list, tuple)):
        out = out[0]
    return c, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_gradient_matches_finite_differences(name):
    c, out = _build(name)
    assert dt.is_float(out.dtype)
    H = pa.placeholder((2,) + out.shape, F, "H")
    c.feed[H] = c.rng.normal(size=H.shape)
    check_grad(out, c.wrt, c.feed, head=H)
    if name in JACOBIAN:
        check_grad(out, c.wrt, c.feed, optimize=(True,))


SECOND = ["unary:" + n for n in UNARY] + ["binary:" + n for n in BINARY] + [
    "nn.dense", "nn.softmax", "mod", "sum", "prod", "max", "nn.conv2d", "chain:conv_relu_pool"]


@pytest.mark.parametrize("name", SECOND)
def test_second_derivative(name):
    """The gradient of a gradient: differentiate dX (head H fixed) w.r.t. every input again."""
    c, out = _build(name)
    H = pa.placeholder(out.shape, F, "H")
    c.feed[H] = c.rng.normal(size=H.shape)
    grads = pa.differentiate(out, c.wrt, H)
    for g in grads:
        H2 = pa.placeholder(g.shape, F, "H2")
        c.feed[H2] = c.rng.normal(size=g.shape)
        check_grad(g, c.wrt, c.feed, head=H2, rtol=1e-4, atol=1e-5)


def test_the_catalog_covers_the_differentiable_ops():
    """Every public op of pa.ops / pa.nn with a float result has a case above (checked against the modules)."""
    keys = {k.split(":")[-1].replace("nn.", "") for k in CASES if not k.startswith("chain:")}
    not_float = {  # integer/bool results or no float inputs: no gradient to check
        "argmax", "argmin", "equal", "greater", "greater_equal", "less", "less_equal", "not_equal",
        "logical_and", "logical_or", "logical_not", "left_shift", "right_shift", "full", "zeros", "ones",
        "ones_like",
    }
    names = {n for n in dir(ops) if callable(getattr(ops, n)) and getattr(ops, n).__module__.startswith("polyad.ops")}
    names |= {n for n in dir(nn) if callable(getattr(nn, n)) and getattr(nn, n).__module__ == "polyad.ops.nn"}
    names = {n for n in names if not n.startswith("_") and not n.startswith("normalize_")}

    def covered(n):
        return any(k == n or k.startswith(n + "_") or k.startswith(n + "+") for k in keys)

    missing = sorted(n for n in names - not_float if not covered(n))
    assert not missing, f"ops without a gradient test: {missing}"
