"""Small convolution gradients for the graph-transformation tests (space-to-depth, padded lanes, fold)."""

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import polyad as pa
from polyad.schedule import DeviceModel
from polyad.schedule.graph import uniquely_named

import auto_golden

ZEN5 = DeviceModel.load(auto_golden.DEVICES / "zen5-former-constants.json")


def conv_grads(size, stride, pad, dil, k=3, c_in=2, c_out=3, batch=2):
    """([dX, dW] uniquely named, {placeholder: random float32 data}) of ``pa.nn.conv2d`` on NCHW."""
    X = pa.placeholder((batch, c_in, size, size), name="X")
    W = pa.placeholder((c_out, c_in, k, k), name="W")
    Y = pa.nn.conv2d(X, W, strides=stride, padding=pad, dilation=dil)
    H = pa.placeholder(Y.shape, name="H")
    grads = uniquely_named(list(pa.differentiate(Y, [X, W], head=H)))
    rng = np.random.default_rng(size * 7 + pad)
    feeds = {t: rng.standard_normal(t.shape).astype(np.float32) for t in (X, W, H)}
    return grads, feeds


@st.composite
def random_convs(draw):
    """(size, strides, padding, dilations, k) of a convolution with at least one output: strides and dilations
    in {1, 2, 3}^2, paddings 0 to k - 1, odd and even sizes."""
    size, k = draw(st.integers(5, 13)), draw(st.integers(2, 4))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = draw(st.integers(0, k - 1))
    assume(all(size + 2 * pad - d * (k - 1) - 1 >= 0 for d in dil))
    return size, strides, pad, dil, k
