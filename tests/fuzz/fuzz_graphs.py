"""Random TE graphs for the differential fuzzer (Csmith-style, in the spirit of TVM's and TorchInductor's op fuzzers).

A graph is a :class:`Spec`: an input shape, a dtype and 1-4 steps, each an op of ``pa.ops`` / ``pa.nn`` with
its parameters (drawn for the shape the previous steps produced).  :func:`make` replays a spec in any dtype,
so the same graph is checked in float64 (finite differences) and in float32 (OpenCL).  A step whose
parameters polyad rejects must raise a ``pa.PolyadError``: the spec then ends there with ``expect_error``.

Data: floats uniform in +-[0.1, 1] rounded to float32 (the float32 and float64 twins read the same numbers;
distinct values, away from the kinks of relu/abs/max at 0), positive ones in [0.5, 1.5] where an op needs
them (a variance), integers in [-4, 4], index tensors in range, or out of range for take's clip/wrap modes.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import polyad as pa

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")


@dataclass
class Ctx:
    """Replay state: the placeholders a graph creates, in order, with what their data must be."""

    dtype: str
    inputs: list = field(default_factory=list)  # (placeholder, kind) kind in 'x', 'pos', 'index:lo:hi'

    def ph(self, shape, kind="x", dtype=None):
        t = pa.placeholder(tuple(shape), dtype=dtype or self.dtype, name=f"P{len(self.inputs)}")
        self.inputs.append((t, kind))
        return t

    def data(self, seed):
        rng = np.random.default_rng(seed)
        out = []
        for t, kind in self.inputs:
            out.append(random_array(rng, t.shape, t.dtype, kind))
        return out

    def float_inputs(self):
        return [t for t, kind in self.inputs if t.dtype in FLOATS]


def random_array(rng, shape, dtype, kind="x"):
    if kind.startswith("index"):
        _, lo, hi = kind.split(":")
        return np.asarray(rng.integers(int(lo), int(hi), size=shape), dtype)
    if dtype in INTS:
        return np.asarray(rng.integers(-4, 5, size=shape), dtype)
    if kind == "pos":
        v = rng.uniform(0.5, 1.5, size=shape)
    else:
        v = rng.uniform(0.1, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return np.asarray(np.asarray(v, np.float32), dtype)


# ---------------------------------------------------------------------------------------------
# the ops: name -> (applicable(shape, dtype), draw params(draw, shape, dtype), apply(ctx, x, params))
# ---------------------------------------------------------------------------------------------
OPS = {}


def op(name, when=lambda shape, dtype: True):
    def deco(pair):
        OPS[name] = (when, pair[0], pair[1])
        return pair
    return deco


def _floaty(shape, dtype):
    return dtype in FLOATS


def _rank(lo, hi=8, floats=False):
    return lambda shape, dtype: lo <= len(shape) <= hi and (not floats or dtype in FLOATS)


def _size(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


_UNARY_F = ("negative", "exp", "tanh", "sigmoid", "sin", "cos", "erf", "abs", "relu", "leaky_relu", "square",
            "log_pos", "sqrt_pos", "rsqrt_pos", "floor", "round", "sign")
_UNARY_I = ("negative", "abs", "square", "relu")


def _unary_apply(ctx, x, p):
    f = p["fn"]
    O = pa.ops
    if f == "relu":
        return pa.nn.relu(x)
    if f == "leaky_relu":
        return pa.nn.leaky_relu(x, 0.2)
    if f == "square":
        return O.multiply(x, x)
    if f.endswith("_pos"):  # log, sqrt, rsqrt of x*x + 0.5
        return getattr(O, f[:-4])(O.add(O.multiply(x, x), 0.5))
    return getattr(O, f)(x)


op("unary")((lambda draw, shape, dtype: {"fn": draw(st.sampled_from(_UNARY_F if dtype in FLOATS else _UNARY_I))},
             _unary_apply))


def _bshape(draw, shape):
    """A shape that broadcasts with ``shape``: some axes 1, some leading axes dropped, or one more axis."""
    how = draw(st.sampled_from(["same", "ones", "drop", "extra"]))
    if how == "same" or not shape and how != "extra":
        return tuple(shape)
    if how == "ones":
        return tuple(1 if draw(st.booleans()) else s for s in shape)
    if how == "drop":
        return tuple(shape[draw(st.integers(0, len(shape))):])
    return (draw(st.integers(1, 3)),) + tuple(shape)


_BINARY_F = ("add", "subtract", "multiply", "divide_pos", "maximum", "minimum", "power_pos")
_BINARY_I = ("add", "subtract", "multiply", "maximum", "minimum")


def _binary_draw(draw, shape, dtype):
    other = draw(st.sampled_from(["tensor", "tensor", "scalar", "self", "tensor_left"]))
    p = {"fn": draw(st.sampled_from(_BINARY_F if dtype in FLOATS else _BINARY_I)), "other": other}
    if other.startswith("tensor"):
        p["shape"] = _bshape(draw, shape)
    if other == "scalar":
        p["value"] = draw(st.sampled_from([2, -3, 0.5, 1.5, -0.75])) if dtype in FLOATS else draw(st.integers(-3, 3))
    return p


def _binary_apply(ctx, x, p):
    O = pa.ops
    y = {"self": x, "scalar": p.get("value")}.get(p["other"])
    if y is None:
        y = ctx.ph(p["shape"])
    a, b = (y, x) if p["other"] == "tensor_left" else (x, y)
    f = p["fn"]
    if f == "divide_pos":  # a / (b*b + 0.5)
        return O.divide(a, O.add(O.multiply(b, b), 0.5))
    if f == "power_pos":  # (a*a + 0.5) ** b
        return O.power(O.add(O.multiply(a, a), 0.5), b)
    return getattr(O, f)(a, b)


op("binary")((_binary_draw, _binary_apply))


def _clip_draw(draw, shape, dtype):
    lo = draw(st.sampled_from([None, -0.5, -0.3, 0.2] if dtype in FLOATS else [None, -2, 0]))
    hi = draw(st.sampled_from([None, 0.4, 0.7] if dtype in FLOATS else [None, 1, 3]))
    return {"a_min": lo, "a_max": hi}


op("clip")((_clip_draw, lambda ctx, x, p: pa.ops.clip(x, p["a_min"], p["a_max"])))


def _where_draw(draw, shape, dtype):
    return {"threshold": draw(st.sampled_from([0, 0.3, -0.4]) if dtype in FLOATS else st.integers(-2, 2)),
            "other": draw(st.sampled_from(["tensor", "scaled", "scalar"])), "shape": _bshape(draw, shape)}


def _where_apply(ctx, x, p):
    O = pa.ops
    cond = O.greater(x, p["threshold"])
    other = {"tensor": lambda: ctx.ph(p["shape"]), "scaled": lambda: O.multiply(x, 3), "scalar": lambda: 2}[p["other"]]()
    return O.where(cond, x, other)


op("where")((_where_draw, _where_apply))


def _axes_draw(draw, shape, allow_none=True):
    n = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"] if allow_none else ["int", "tuple"]))
    if kind == "none" or n == 0:
        return None
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    axes = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    return tuple(a - n if draw(st.booleans()) else a for a in axes)


def _reduce_draw(draw, shape, dtype):
    fns = ("sum", "max", "min", "mean", "prod") if dtype in FLOATS else ("sum", "max", "min")
    return {"fn": draw(st.sampled_from(fns)), "axis": _axes_draw(draw, shape), "keepdims": draw(st.booleans())}


op("reduce")((_reduce_draw, lambda ctx, x, p: getattr(pa.ops, p["fn"])(x, axis=p["axis"], keepdims=p["keepdims"])))

op("softmax", _rank(1, floats=True))((
    lambda draw, shape, dtype: {"fn": draw(st.sampled_from(["softmax", "log_softmax"])),
                                "axis": draw(st.integers(-len(shape), len(shape) - 1))},
    lambda ctx, x, p: getattr(pa.nn, p["fn"])(x, axis=p["axis"])))


def _reshape_draw(draw, shape, dtype):
    n = _size(shape)
    dims = []
    while n > 1 and len(dims) < 4:
        d = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
        dims.append(d)
        n //= d
    if n > 1:
        dims.append(n)
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return {"newshape": tuple(dims)}


op("reshape")((_reshape_draw, lambda ctx, x, p: pa.ops.reshape(x, p["newshape"])))

op("transpose", _rank(1))((
    lambda draw, shape, dtype: {"axes": draw(st.none() | st.permutations(range(len(shape))).map(tuple))},
    lambda ctx, x, p: pa.ops.transpose(x, p["axes"])))


def _squeeze_draw(draw, shape, dtype):
    ones = [i for i, s in enumerate(shape) if s == 1]
    if not ones or draw(st.integers(0, 9)) == 0:
        return {"axis": None if not shape or draw(st.booleans()) else draw(st.integers(0, len(shape) - 1))}
    return {"axis": draw(st.sampled_from(ones))}


op("squeeze")((_squeeze_draw, lambda ctx, x, p: pa.ops.squeeze(x, p["axis"])))
op("expand_dims", _rank(0, 5))((
    lambda draw, shape, dtype: {"axis": draw(st.integers(-len(shape) - 1, len(shape)))},
    lambda ctx, x, p: pa.ops.expand_dims(x, p["axis"])))


def _concat_draw(draw, shape, dtype):
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    parts = draw(st.lists(st.sampled_from(["x", "new"]), min_size=1, max_size=3))
    sizes = [draw(st.integers(1, 3)) for _ in parts]
    return {"axis": axis, "parts": tuple(parts), "sizes": tuple(sizes), "first": draw(st.booleans())}


def _concat_apply(ctx, x, p):
    ax = p["axis"] % x.ndim
    ts = [x]
    for part, n in zip(p["parts"], p["sizes"]):
        ts.append(x if part == "x" else ctx.ph(x.shape[:ax] + (n,) + x.shape[ax + 1:]))
    if not p["first"]:
        ts = ts[1:] + ts[:1]
    return pa.ops.concatenate(ts, axis=p["axis"])


op("concatenate", _rank(1))((_concat_draw, _concat_apply))


def _split_draw(draw, shape, dtype):
    axis = draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    if draw(st.booleans()):
        how = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
    else:
        how = tuple(sorted(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=2, unique=True)))) if n > 1 else ()
    return {"how": how, "axis": axis, "use": draw(st.sampled_from(["first", "last", "reversed"]))}


def _split_apply(ctx, x, p):
    pieces = pa.ops.split(x, p["how"] if isinstance(p["how"], int) else list(p["how"]), axis=p["axis"])
    if p["use"] == "first":
        return pieces[0]
    if p["use"] == "last":
        return pieces[-1]
    return pa.ops.concatenate(pieces[::-1], axis=p["axis"])


op("split", _rank(1))((_split_draw, _split_apply))


def _take_draw(draw, shape, dtype):
    axis = draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    n = _size(shape) if axis is None else shape[axis]
    constant = draw(st.booleans())
    # an integer tensor read at an index fed at run time in mode "raise" is an IndexingError by design (compiled
    # code cannot check the index, and an integer has no NaN to show it): the fuzzer's graphs are the valid ones
    modes = ["clip", "wrap", "raise"] if constant or not dtype.startswith("int") else ["clip", "wrap"]
    mode = draw(st.sampled_from(modes))
    lo, hi = (0, n) if mode == "raise" else (-n - 2, n + 2)
    if constant:
        return {"axis": axis, "mode": mode, "index": draw(st.integers(lo, hi - 1))}
    ishape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    return {"axis": axis, "mode": mode, "ishape": ishape, "lo": lo, "hi": hi,
            "idtype": draw(st.sampled_from(INTS))}


def _take_apply(ctx, x, p):
    if "index" in p:
        return pa.ops.take(x, p["index"], axis=p["axis"], mode=p["mode"])
    ind = ctx.ph(p["ishape"], kind=f"index:{p['lo']}:{p['hi']}", dtype=p["idtype"])
    return pa.ops.take(x, ind, axis=p["axis"], mode=p["mode"])


op("take", _rank(1))((_take_draw, _take_apply))


def _slice_draw(draw, shape, dtype):
    begin, end, strides = [], [], []
    for s in shape:
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        b = draw(st.none() | st.integers(-s - 1, s))
        e = draw(st.none() | st.integers(-s - 1, s + 1))
        if b is not None and e is not None and draw(st.integers(0, 4)) and (e - b) * step <= 0 and b % (s + 1) != e % (s + 1):
            b, e = e, b  # mostly non-empty (an empty slice is a ShapeError: tensors have no empty axes)
        begin.append(b), end.append(e), strides.append(step)
    return {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides)}


def _slice_apply(ctx, x, p):
    return pa.ops.strided_slice(x, list(p["begin"]), list(p["end"]), list(p["strides"]))


op("strided_slice", _rank(1))((_slice_draw, _slice_apply))
op("flip", _rank(1))((lambda draw, shape, dtype: {"axis": _axes_draw(draw, shape)},
                      lambda ctx, x, p: pa.ops.flip(x, p["axis"])))


def _bto_draw(draw, shape, dtype):
    new = tuple(draw(st.integers(2, 3)) if s == 1 and draw(st.booleans()) else s for s in shape)
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=1 if len(shape) < 4 else 0)))
    return {"shape": lead + new}


op("broadcast_to")((_bto_draw, lambda ctx, x, p: pa.ops.broadcast_to(x, p["shape"])))


def _pad_draw(draw, shape, dtype):
    mode = draw(st.sampled_from(["constant", "edge", "reflect", "symmetric"]))
    widths = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    return {"pad_width": widths, "mode": mode, "value": draw(st.sampled_from([0, 1, -2]))}


def _pad_apply(ctx, x, p):
    kw = {"constant_values": p["value"]} if p["mode"] == "constant" else {}
    return pa.ops.pad(x, [list(w) for w in p["pad_width"]], mode=p["mode"], **kw)


op("pad", _rank(1))((_pad_draw, _pad_apply))


def _matmul_draw(draw, shape, dtype):
    k = shape[-1]
    kind = draw(st.sampled_from(["vec", "mat", "batch"]))
    if kind == "vec":
        return {"other": (k,), "left": False}
    m = draw(st.integers(1, 4))
    if kind == "mat":
        return {"other": (k, m), "left": False}
    return {"other": (draw(st.integers(1, 2)), k, m), "left": False}


op("matmul", _rank(1, 3))((_matmul_draw, lambda ctx, x, p: pa.ops.matmul(x, ctx.ph(p["other"]))))


def _tensordot_draw(draw, shape, dtype):
    n = len(shape)
    na = draw(st.integers(0, min(n, 2)))
    ax_a = tuple(draw(st.permutations(range(n)))[:na])
    free = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    # other's axes: the contracted ones (in order) then free ones, shuffled
    order = draw(st.permutations(range(na + len(free))))
    return {"ax_a": ax_a, "free": free, "order": tuple(order)}


def _tensordot_apply(ctx, x, p):
    dims = [x.shape[a] for a in p["ax_a"]] + list(p["free"])
    oshape = [dims[o] for o in p["order"]]
    ax_b = [p["order"].index(i) for i in range(len(p["ax_a"]))]
    return pa.ops.tensordot(x, ctx.ph(oshape), axes=(list(p["ax_a"]), ax_b))


op("tensordot", _rank(1, 3))((_tensordot_draw, _tensordot_apply))

# -- nn ---------------------------------------------------------------------------------------
op("dense", _rank(2, 2, floats=True))((
    lambda draw, shape, dtype: {"units": draw(st.integers(1, 4)), "bias": draw(st.booleans())},
    lambda ctx, x, p: pa.nn.dense(x, ctx.ph((p["units"], x.shape[1])), ctx.ph((p["units"],)) if p["bias"] else None)))


def _pad_arg(draw, hi):
    kind = draw(st.sampled_from(["int", "pair", "four"]))
    if kind == "int":
        return draw(st.integers(0, hi))
    return tuple(draw(st.integers(0, hi)) for _ in range(2 if kind == "pair" else 4))


def _pair_arg(draw, lo, hi):
    return draw(st.integers(lo, hi) | st.tuples(st.integers(lo, hi), st.integers(lo, hi)))


def _conv_draw(draw, shape, dtype):
    c = shape[1]
    groups = draw(st.sampled_from([g for g in range(1, c + 1) if c % g == 0]))
    return {"out_per_group": draw(st.integers(1, 2)), "groups": groups,
            "kernel": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
            "strides": _pair_arg(draw, 1, 3), "padding": _pad_arg(draw, 2), "dilation": _pair_arg(draw, 1, 2)}


def _conv_apply(ctx, x, p):
    g = p["groups"]
    w = ctx.ph((g * p["out_per_group"], x.shape[1] // g) + p["kernel"])
    return pa.nn.conv2d(x, w, strides=p["strides"], padding=p["padding"], dilation=p["dilation"], groups=g)


op("conv2d", _rank(4, 4, floats=True))((_conv_draw, _conv_apply))


def _convt_draw(draw, shape, dtype):
    p = _conv_draw(draw, shape, dtype)
    p["output_padding"] = _pair_arg(draw, 0, 1)
    return p


def _convt_apply(ctx, x, p):
    g = p["groups"]
    w = ctx.ph((x.shape[1], p["out_per_group"]) + p["kernel"])
    return pa.nn.conv2d_transpose(x, w, strides=p["strides"], padding=p["padding"],
                                  output_padding=p["output_padding"], dilation=p["dilation"], groups=g)


op("conv2d_transpose", _rank(4, 4, floats=True))((_convt_draw, _convt_apply))


def _pool_draw(draw, shape, dtype):
    kernel = _pair_arg(draw, 1, 3)
    small = min(kernel) // 2 if isinstance(kernel, tuple) else kernel // 2
    return {"kernel": kernel, "stride": draw(st.none()) if draw(st.booleans()) else _pair_arg(draw, 1, 3),
            "padding": _pad_arg(draw, 1 if draw(st.integers(0, 5)) == 0 else small), "pool_type": draw(st.sampled_from(["max", "avg"] if dtype in FLOATS else ["max"])),
            "ceil_mode": draw(st.booleans()), "count_include_pad": draw(st.booleans())}


op("pool2d", _rank(4, 4))((_pool_draw, lambda ctx, x, p: pa.nn.pool2d(x, **p)))
op("global_pool2d", _rank(4, 4))((
    lambda draw, shape, dtype: {"pool_type": draw(st.sampled_from(["max", "avg"] if dtype in FLOATS else ["max"]))},
    lambda ctx, x, p: pa.nn.global_pool2d(x, p["pool_type"])))
op("upsampling", _rank(4, 4))((lambda draw, shape, dtype: {"scale": _pair_arg(draw, 1, 2)},
                               lambda ctx, x, p: pa.nn.upsampling(x, p["scale"])))
op("flatten", _rank(2, 4))((lambda draw, shape, dtype: {}, lambda ctx, x, p: pa.nn.flatten(x)))


def _chan_draw(draw, shape, dtype):
    return {"fn": draw(st.sampled_from(["bias_add", "prelu", "batch_norm"])),
            "axis": draw(st.integers(-len(shape), len(shape) - 1))}


def _chan_apply(ctx, x, p):
    n = x.shape[p["axis"]]
    if p["fn"] == "bias_add":
        return pa.nn.bias_add(x, ctx.ph((n,)), axis=p["axis"])
    if p["fn"] == "prelu":
        return pa.nn.prelu(x, ctx.ph((n,)), axis=p["axis"])
    g, b, m, v = ctx.ph((n,)), ctx.ph((n,)), ctx.ph((n,)), ctx.ph((n,), kind="pos")
    return pa.nn.batch_norm(x, g, b, m, v, axis=p["axis"])


op("per_channel", _rank(1, 4, floats=True))((_chan_draw, _chan_apply))
op("l2_normalize", _rank(1, 4, floats=True))((
    lambda draw, shape, dtype: {"axis": _axes_draw(draw, shape)},
    lambda ctx, x, p: pa.nn.l2_normalize(x, axis=p["axis"])))
op("lrn", _rank(4, 4, floats=True))((
    lambda draw, shape, dtype: {"size": draw(st.sampled_from([1, 3, 5])), "axis": draw(st.integers(1, 3))},
    lambda ctx, x, p: pa.nn.lrn(x, size=p["size"], axis=p["axis"], alpha=0.1)))


# ---------------------------------------------------------------------------------------------
# specs
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    dtype: str
    shape: tuple
    steps: tuple  # ((op name, params dict), ...)
    expect_error: bool = False  # the last step is rejected: it must raise a PolyadError

    def __repr__(self):
        lines = [f"Spec(dtype={self.dtype!r}, shape={self.shape!r}, expect_error={self.expect_error}, steps=("]
        lines += [f"    ({n!r}, {p!r})," for n, p in self.steps]
        return "\n".join(lines) + "))"


def make(spec, dtype=None):
    """Replay ``spec`` in ``dtype`` (default its own): (output tensor, Ctx)."""
    ctx = Ctx(dtype or spec.dtype)
    x = ctx.ph(spec.shape)
    for name, p in spec.steps:
        x = OPS[name][2](ctx, x, p)
    return x, ctx


#: how often an op is drawn, relative to the others it is applicable with (structural ops find more)
WEIGHTS = {"conv2d": 6, "conv2d_transpose": 4, "pool2d": 4, "dense": 2, "matmul": 2, "tensordot": 2,
           "strided_slice": 2, "pad": 2, "take": 2, "reduce": 2, "concatenate": 2, "split": 2}


@st.composite
def specs(draw, dtypes=("float64", "float32", "float64", "float32", "int32", "int64"), max_steps=4, max_size=48,
          errors=True):
    """A random graph of 1-``max_steps`` ops; intermediates are kept below ``max_size`` elements.  ``errors``:
    sometimes end with a step polyad rejects (``expect_error``)."""
    dtype = draw(st.sampled_from(dtypes))
    rank = draw(st.sampled_from([1, 2, 2, 3, 4, 4, 4]))
    if rank == 4:
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    else:
        shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    steps = []
    x, _ = make(Spec(dtype, shape, ()))
    n_steps = min(max_steps, draw(st.sampled_from([3, 2, 4, 1, 3, 4])))
    for _ in range(n_steps):
        # heaviest first: hypothesis leans towards the first choice
        names = [n for n, (when, _, _) in sorted(OPS.items(), key=lambda kv: (-WEIGHTS.get(kv[0], 1), kv[0]))
                 if when(x.shape, x.dtype)]
        name = draw(st.sampled_from([n for n in names for _ in range(WEIGHTS.get(n, 1))]))
        params = OPS[name][1](draw, x.shape, x.dtype)
        steps.append((name, params))
        try:
            x, _ = make(Spec(dtype, shape, tuple(steps)))
        except Exception:  # noqa: BLE001 - a non-PolyadError is a finding: the test replays the spec
            if errors and not draw(st.integers(0, 3)):
                return Spec(dtype, shape, tuple(steps), expect_error=True)
            steps.pop()  # mostly, go on with legal graphs
            continue
        if x.dtype not in FLOATS + INTS or _size(x.shape) > max_size:
            steps.pop()  # keep the graph small (PoCL compiles and finite differences stay cheap)
            x, _ = make(Spec(dtype, shape, tuple(steps)))
    if not steps:
        steps.append(("unary", {"fn": "negative"}))
    return Spec(dtype, shape, tuple(steps))
