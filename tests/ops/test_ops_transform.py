"""pa.ops transform ops against numpy, through pa.evaluate.

The numpy functions (np.reshape, np.pad, np.take, ...) and the slicing
written here are the oracle; polyad's ops build compute bodies only.
"""

import numpy as np
import pytest

import polyad as pa
from polyad.te.expr import Call, Const, IterVar, Load
from polyad.te.visit import post_order

ops = pa.ops
RNG = np.random.default_rng(7)


def data(shape, dtype="float32"):
    if dtype.startswith("int"):
        return RNG.integers(-50, 50, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run(out, *pairs):
    return pa.evaluate(out, {t: v for t, v in pairs})


def inp(shape, name="X", dtype="float32"):
    t = pa.placeholder(shape, dtype=dtype, name=name)
    return t, data(shape, dtype)


def check(out, ref, *pairs):
    got = run(out, *pairs)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    np.testing.assert_array_equal(got, ref)


def raises(exc, *words):
    """pytest.raises that also checks the message names the given tensor/axis words."""

    class _Ctx:
        def __enter__(self):
            self.cm = pytest.raises(exc)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *a):
            r = self.cm.__exit__(*a)
            msg = str(self.info.value)
            for w in words:
                assert w in msg, f"{w!r} not in {msg!r}"
            return r

    return _Ctx()


# ---------------------------------------------------------------------------
# index expressions stay quasi-affine (what the ISL simplifier needs)
# ---------------------------------------------------------------------------

_AFFINE_OPS = {"add", "sub", "neg", "min", "max", "abs", "select", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not"}


def _quasi_affine(e):
    """Built only from axis variables and integer constants with + - and products/div/mod by constants."""
    for n in post_order(e):
        if isinstance(n, Load):
            return False
        if isinstance(n, Call):
            if n.op in ("mul",):
                if not any(isinstance(a, Const) for a in n.args):
                    return False
            elif n.op in ("floordiv", "floormod"):
                if not isinstance(n.args[1], Const):
                    return False
            elif n.op not in _AFFINE_OPS:
                return False
        elif not isinstance(n, (Const, IterVar)):
            return False
    return True


def all_reads_quasi_affine(t):
    loads = [n for n in post_order(t.op.body) if isinstance(n, Load)]
    assert loads
    return all(_quasi_affine(i) for ld in loads for i in ld.indices)


def test_index_expressions_are_quasi_affine():
    X = pa.placeholder((2, 3, 4), name="X")
    Y = pa.placeholder((2, 5, 4), name="Y")
    outs = [
        ops.reshape(X, (4, -1)), ops.reshape(X, (3, 8)), ops.flatten(X), ops.batch_flatten(X),
        ops.transpose(X), ops.squeeze(ops.expand_dims(X, 1)), ops.concatenate([X, Y], 1),
        ops.strided_slice(X, [1, -1], [None, 0], [1, -2]), ops.split(Y, [1, 3], axis=1)[1],
        ops.broadcast_to(X, (5, 2, 3, 4)), ops.collapse_sum_like(X, pa.placeholder((3, 1), name="L")),
        ops.pad(X, 2), ops.pad(X, 2, mode="edge"), ops.pad(X, 1, mode="reflect"),
        ops.pad(X, 2, mode="symmetric"), ops.tensordot(X, Y, ([0, 2], [0, 2])), ops.matmul(X, pa.placeholder((4, 2), name="W")),
        ops.layout_transform(pa.placeholder((1, 2, 3, 4), name="D"), "NCHW", "NHWC"), ops.slice_like(Y, X),
    ]
    for t in outs:
        assert all_reads_quasi_affine(t), pa.show(t)


def test_flatten_reads_by_floordiv_floormod_of_constants():
    X = pa.placeholder((32, 100, 20, 25), name="X")
    F = ops.batch_flatten(X)
    assert F.shape == (32, 50000)
    assert str(F.op.body[0]) == "X[i0, i1//500, i1//25%20, i1%25]"
    # a pure split of one axis into two needs no modulo on the outer part
    R = ops.reshape(pa.placeholder((6, 4), name="A"), (2, 3, 4))
    assert str(R.op.body[0]) == "A[i0*3 + i1, i2]"


def test_names_and_tags():
    X = pa.placeholder((2, 3), name="X")
    assert ops.reshape(X, (3, 2)).op.name == "reshape"
    assert ops.reshape(X, (3, 2)).op.tag == "injective"
    assert ops.pad(X, 1, name="p").op.name == "p"
    assert ops.matmul(X, pa.placeholder((3, 4), name="W")).op.tag == "reduction"
    assert ops.tensordot(X, X, ([0, 1], [0, 1])).op.tag == "reduction"
    assert ops.collapse_sum_like(X, pa.placeholder((3,), name="L")).op.tag == "reduction"
    assert ops.take(X, 1, axis=0).op.name == "take"


# ---------------------------------------------------------------------------
# reshape family
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [
    ((2, 3), (3, 2)), ((2, 3, 4), (4, -1)), ((2, 3, 4), (-1,)), ((4, 6), (2, 2, 2, 3)),
    ((1, 6, 1), (3, 1, 2)), ((1, 1), ()), ((), (1, 1)), ((5,), (5, 1)), ((2, 2, 3), (3, 4)),
    ((6, 1, 5), (2, 15)), ((2, 3, 5, 7), (6, 35)),
])
def test_reshape(src, dst):
    X, x = inp(src)
    check(ops.reshape(X, dst), x.reshape(dst), (X, x))


def test_reshape_like_flatten_batch_flatten():
    X, x = inp((2, 3, 4))
    L = pa.placeholder((4, 6), name="L")
    check(ops.reshape_like(X, L), x.reshape(4, 6), (X, x))
    check(ops.flatten(X), x.ravel(), (X, x))
    check(ops.batch_flatten(X), x.reshape(2, 12), (X, x))
    Y, y = inp((3,), "Y")
    check(ops.batch_flatten(Y), y.reshape(3, 1), (Y, y))


def test_reshape_errors():
    X = pa.placeholder((2, 3), name="X")
    with raises(pa.ShapeError, "'X'", "(4, 2)"):
        ops.reshape(X, (4, 2))
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.reshape(X, (4, -1))
    with raises(pa.ShapeError, "'X'", "axes [0, 1]"):
        ops.reshape(X, (-1, -1))
    with raises(pa.ShapeError, "'X'", "axis 0"):
        ops.reshape(X, (0, 6))


def test_transpose():
    X, x = inp((2, 3, 4))
    check(ops.transpose(X), x.T, (X, x))
    check(ops.transpose(X, (1, 2, 0)), x.transpose(1, 2, 0), (X, x))
    check(ops.transpose(X, (-1, 0, -2)), x.transpose(-1, 0, -2), (X, x))
    check(ops.transpose(X, [0, 1, 2]), x, (X, x))
    Y, y = inp((1, 5, 1), "Y")
    check(ops.transpose(Y, (2, 0, 1)), y.transpose(2, 0, 1), (Y, y))


def test_transpose_errors():
    X = pa.placeholder((2, 3, 4), name="X")
    with raises(pa.AxisError, "'X'", "axis 2"):
        ops.transpose(X, (0, 1, 1))
    with raises(pa.AxisError, "'X'"):
        ops.transpose(X, (0, 1))
    with raises(pa.AxisError, "'X'", "axis 3"):
        ops.transpose(X, (0, 1, 3))


def test_squeeze_expand_dims():
    X, x = inp((1, 3, 1, 2))
    check(ops.squeeze(X), np.squeeze(x), (X, x))
    check(ops.squeeze(X, 2), np.squeeze(x, 2), (X, x))
    check(ops.squeeze(X, (-2, 0)), np.squeeze(x, (-2, 0)), (X, x))
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.squeeze(X, 1)
    O, o = inp((1, 1), "O")
    check(ops.squeeze(O), np.squeeze(o), (O, o))
    check(ops.expand_dims(X, 0), np.expand_dims(x, 0), (X, x))
    check(ops.expand_dims(X, -1), np.expand_dims(x, -1), (X, x))
    check(ops.expand_dims(X, (1, -2)), np.expand_dims(x, (1, -2)), (X, x))
    with raises(pa.AxisError, "'X'"):
        ops.expand_dims(X, 6)


def test_layout_transform():
    X, x = inp((2, 3, 4, 5))
    Y = ops.layout_transform(X, "NCHW", "NHWC")
    check(Y, x.transpose(0, 2, 3, 1), (X, x))
    check(ops.layout_transform(Y, "NHWC", "NCHW"), x, (X, x))
    with raises(pa.AxisError, "'X'"):
        ops.layout_transform(X, "NCHW", "NCHK")
    with raises(pa.ShapeError, "'X'"):
        ops.layout_transform(X, "NCH", "NHC")


# ---------------------------------------------------------------------------
# joining and slicing
# ---------------------------------------------------------------------------

def test_concatenate():
    A, a = inp((2, 3), "A")
    B, b = inp((2, 1), "B")
    C, c = inp((2, 4), "C")
    check(ops.concatenate([A, B, C], axis=1), np.concatenate([a, b, c], 1), (A, a), (B, b), (C, c))
    check(ops.concatenate([A, B, C], axis=-1), np.concatenate([a, b, c], -1), (A, a), (B, b), (C, c))
    D, d = inp((1, 3), "D")
    check(ops.concatenate([A, D, A]), np.concatenate([a, d, a]), (A, a), (D, d))
    check(ops.concatenate([A]), a, (A, a))


def test_concatenate_errors():
    A = pa.placeholder((2, 3), name="A")
    B = pa.placeholder((3, 3), name="B")
    with raises(pa.ShapeError, "'B'", "axis 0"):
        ops.concatenate([A, B], axis=1)
    with raises(pa.ShapeError, "'B'"):
        ops.concatenate([A, pa.placeholder((2, 3, 1), name="B")])
    with raises(pa.DtypeError, "'I'"):
        ops.concatenate([A, pa.placeholder((2, 3), "int32", name="I")])
    with raises(pa.AxisError, "'A'", "axis 2"):
        ops.concatenate([A, A], axis=2)


def test_stack_flip():
    A, a = inp((2, 3), "A")
    B, b = inp((2, 3), "B")
    check(ops.stack([A, B, A], axis=1), np.stack([a, b, a], 1), (A, a), (B, b))
    check(ops.stack([A, B], axis=-1), np.stack([a, b], -1), (A, a), (B, b))
    check(ops.flip(A), np.flip(a), (A, a))
    check(ops.flip(A, -1), np.flip(a, -1), (A, a))


def _np_slice(x, begin, end, strides, axes=None):
    axes = range(len(begin)) if axes is None else axes
    sl = [slice(None)] * x.ndim
    for ax, b, e, s in zip(axes, begin, end, strides):
        sl[ax] = slice(b, e, s)
    return x[tuple(sl)]


@pytest.mark.parametrize("begin,end,strides", [
    ([0, 1, 0], [2, 3, 4], [1, 1, 2]),
    ([1], [2], [1]),
    ([-1, -1, -1], [-10, -10, -10], [-1, -1, -2]),  # negative strides past the start: clamped
    ([5, 0, 3], [-5, 10, 0], [-1, 3, -1]),
    ([None, None, None], [None, None, None], [-1, -2, -3]),
    ([-2, 1, -100], [100, 2, 100], [1, 1, 1]),  # out-of-range bounds clamp
    ([0, 2], [1, 0], [1, -1]),  # fewer entries than axes
])
def test_strided_slice(begin, end, strides):
    X, x = inp((3, 4, 5))
    check(ops.strided_slice(X, begin, end, strides), _np_slice(x, begin, end, strides), (X, x))


def test_strided_slice_axes_and_default_strides():
    X, x = inp((3, 4, 5))
    check(ops.strided_slice(X, [1], [4], axes=[2]), x[:, :, 1:4], (X, x))
    check(ops.strided_slice(X, [3, 0], [0, 2], [-2, 1], axes=[-1, 0]), x[0:2, :, 3:0:-2], (X, x))
    check(ops.strided_slice(X, [1, 1], [2, 3]), x[1:2, 1:3], (X, x))
    check(ops.strided_slice(X, 1, 3, 1, axes=-1), x[:, :, 1:3], (X, x))  # one int is one entry


def test_strided_slice_errors():
    X = pa.placeholder((3, 4), name="X")
    with raises(pa.ShapeError, "'X'", "axis 1", "step 0"):
        ops.strided_slice(X, [0, 0], [3, 4], [1, 0])
    with raises(pa.ShapeError, "'X'", "axis 0", "empty"):
        ops.strided_slice(X, [2], [1])
    with raises(pa.PolyadError, "'X'"):
        ops.strided_slice(X, [0, 0, 0], [1, 1, 1])
    with raises(pa.AxisError, "'X'", "axis 1 is sliced twice"):
        ops.strided_slice(X, [0, 0], [1, 1], axes=[1, -1])
    with raises(pa.ShapeError, "begin must be a list of ints"):
        ops.strided_slice(X, 1.5, 2)


def test_split():
    X, x = inp((4, 10))
    for arg in (2, [3, 7], [1, 2, 9], [-3], [9], [-8, 7]):
        got = ops.split(X, arg, axis=1)
        ref = [r for r in np.split(x, arg, axis=1)]
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            check(g, r, (X, x))
    for g, r in zip(ops.split(X, 4, axis=-2), np.split(x, 4, axis=-2)):
        check(g, r, (X, x))
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.split(X, 3, axis=1)
    with raises(pa.ShapeError, "'X'", "axis 1", "empty"):
        ops.split(X, [3, 3], axis=1)
    with raises(pa.ShapeError, "'X'", "axis 1", "empty"):
        ops.split(X, [2, 100], axis=1)  # numpy would give an empty last piece


def test_slice_like():
    X, x = inp((4, 5, 6))
    L = pa.placeholder((2, 3), name="L")
    check(ops.slice_like(X, L), x[:2, :3], (X, x))
    check(ops.slice_like(X, pa.placeholder((3, 1, 2), name="M"), axes=(0, -1)), x[:3, :, :2], (X, x))
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.slice_like(X, pa.placeholder((1, 7), name="L"))


# ---------------------------------------------------------------------------
# broadcasting and its adjoint
# ---------------------------------------------------------------------------

def test_broadcast_to():
    X, x = inp((3, 1))
    check(ops.broadcast_to(X, (2, 3, 4)), np.broadcast_to(x, (2, 3, 4)), (X, x))
    check(ops.broadcast_to(X, (3, 1)), x, (X, x))
    check(ops.broadcast_to_like(X, pa.placeholder((5, 3, 2), name="L")), np.broadcast_to(x, (5, 3, 2)), (X, x))
    with raises(pa.ShapeError, "'X'", "axis 0"):
        ops.broadcast_to(X, (4, 4))
    with raises(pa.ShapeError, "'X'"):
        ops.broadcast_to(X, (3,))


@pytest.mark.parametrize("target", [(3, 1), (1, 4), (4,), (), (2, 3, 4), (1, 1, 1), (2, 1, 4)])
def test_collapse_sum_like(target):
    X, x = inp((2, 3, 4), dtype="float64")
    L = pa.placeholder(target, name="L")
    axes = tuple(range(3 - len(target))) + tuple(
        3 - len(target) + d for d, s in enumerate(target) if s == 1
    )
    ref = x.sum(axis=axes, keepdims=True).reshape(target)
    np.testing.assert_allclose(run(ops.collapse_sum_like(X, L), (X, x)), ref, rtol=1e-12)


def test_collapse_sum_is_the_adjoint_of_broadcast_to():
    # <broadcast(y), x> == <y, collapse_sum(x)> for every y and x
    Y, y = inp((3, 1), "Y", "float64")
    X, x = inp((2, 3, 4), "X", "float64")
    B = ops.broadcast_to(Y, X.shape)
    C = ops.collapse_sum_like(X, Y)
    b, c = run([B, C], (X, x), (Y, y))
    np.testing.assert_allclose((b * x).sum(), (y * c).sum(), rtol=1e-12)


def test_collapse_sum_errors():
    X = pa.placeholder((2, 3, 4), name="X")
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.collapse_sum_to(X, (2, 4))
    with raises(pa.ShapeError, "'X'"):
        ops.collapse_sum_to(X, (1, 2, 3, 4))


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("pad_width", [1, (2, 0), ((0, 0), (3, 1)), ((4, 5),), ((2, 1), (0, 2))])
def test_pad_constant(pad_width):
    X, x = inp((3, 2))
    check(ops.pad(X, pad_width), np.pad(x, pad_width), (X, x))
    check(ops.pad(X, pad_width, constant_values=-1.5), np.pad(x, pad_width, constant_values=-1.5), (X, x))


def test_pad_integer_tensor_and_errors():
    X, x = inp((2, 3), dtype="int32")
    check(ops.pad(X, 2, constant_values=7), np.pad(x, 2, constant_values=7), (X, x))
    with pytest.raises(pa.DtypeError):
        ops.pad(X, 1, constant_values=0.5)
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.pad(X, ((0, 0), (-1, 0)))
    with raises(pa.PolyadError, "'X'", "wrap"):
        ops.pad(X, 1, mode="wrap")


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric"])
@pytest.mark.parametrize("shape,pad_width", [
    ((5,), (4, 3)),  # pads more than half of the input
    ((3, 4), ((2, 2), (3, 1))),
    ((1, 4), ((0, 0), (1, 3))),  # size-1 axis left alone
    ((4, 3), 2),
    ((4, 3), ((0, 3), (2, 0))),  # one-sided pads
])
def test_pad_modes(mode, shape, pad_width):
    X, x = inp(shape)
    check(ops.pad(X, pad_width, mode=mode), np.pad(x, pad_width, mode=mode), (X, x))


def test_pad_edge_larger_than_input():
    X, x = inp((2, 1))
    check(ops.pad(X, ((5, 4), (3, 0)), mode="edge"), np.pad(x, ((5, 4), (3, 0)), mode="edge"), (X, x))


def test_pad_reflect_needs_pad_smaller_than_size():
    X = pa.placeholder((3, 4), name="X")
    with raises(pa.ShapeError, "'X'", "axis 0"):
        ops.pad(X, ((3, 0), (0, 0)), mode="reflect")
    with raises(pa.ShapeError, "'X'", "axis 1"):
        ops.pad(X, ((0, 0), (1, 4)), mode="reflect")
    with raises(pa.ShapeError, "'X'", "axis 0"):
        ops.pad(X, ((0, 4), (0, 0)), mode="symmetric")


# ---------------------------------------------------------------------------
# take
# ---------------------------------------------------------------------------

def test_take_flat_and_axis():
    A, a = inp((3, 4, 2), "A")
    I = pa.placeholder((2, 3), "int32", name="I")
    i = np.array([[0, 5, 23], [7, 1, 2]], dtype="int32")
    check(ops.take(A, I, mode="raise"), np.take(a, i), (A, a), (I, i))
    j = np.array([[0, 3, 1], [2, 2, 0]], dtype="int32")
    check(ops.take(A, I, axis=1), np.take(a, j, axis=1), (A, a), (I, j))
    k = np.array([[1, 0, 1], [0, 0, 1]], dtype="int32")
    check(ops.take(A, I, axis=-1, mode="raise"), np.take(a, k, axis=-1), (A, a), (I, k))


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_clip_wrap_out_of_range(mode):
    A, a = inp((3, 4), "A")
    I = pa.placeholder((6,), "int64", name="I")
    i = np.array([-7, -1, 0, 3, 4, 100], dtype="int64")
    check(ops.take(A, I, axis=1, mode=mode), np.take(a, i, axis=1, mode=mode), (A, a), (I, i))
    check(ops.take(A, I, mode=mode), np.take(a, i, mode=mode), (A, a), (I, i))


def test_take_raise_mode():
    A, a = inp((3, 4), "A")
    I = pa.placeholder((3,), "int32", name="I")
    ok = np.array([-3, 2, 0], dtype="int32")  # negative indices count from the end, as numpy
    T = ops.take(A, I, axis=0, mode="raise")
    check(T, np.take(a, ok, axis=0), (A, a), (I, ok))
    for bad in ([0, 3, 1], [-4, 0, 0]):
        with raises(pa.OutOfBoundsError, "'A'"):
            run(T, (A, a), (I, np.array(bad, dtype="int32")))
    O, o = inp((1, 1), "O")
    check(ops.take(O, I, mode="raise"), np.take(o, [0, -1, 0]), (O, o), (I, np.array([0, -1, 0], "int32")))
    with raises(pa.OutOfBoundsError, "'O'"):
        run(ops.take(O, I, mode="raise"), (O, o), (I, np.array([0, 1, 0], dtype="int32")))
    F = ops.take(A, I, mode="raise")
    with raises(pa.OutOfBoundsError, "'A'"):
        run(F, (A, a), (I, np.array([0, 12, 1], dtype="int32")))
    with raises(pa.OutOfBoundsError, "'A'"):
        run(F, (A, a), (I, np.array([0, -13, 1], dtype="int32")))
    # compiled code cannot raise: it reads NaN there (polyad.poly.bounds), never outside the buffer
    got = pa.build(T, [A, I])(a, np.array([-3, 3, -4], dtype="int32"))
    np.testing.assert_array_equal(got[0], a[0])
    assert np.isnan(got[1:]).all()


def test_take_scalar_index():
    A, a = inp((3, 4), "A")
    check(ops.take(A, 2, axis=1), np.take(a, 2, axis=1), (A, a))
    check(ops.take(A, -1, axis=0, mode="raise"), np.take(a, -1, axis=0), (A, a))
    check(ops.take(A, 7), np.take(a, 7), (A, a))
    check(ops.take(A, 9, axis=1, mode="clip"), np.take(a, 9, axis=1, mode="clip"), (A, a))
    check(ops.take(A, 9, axis=1, mode="wrap"), np.take(a, 9, axis=1, mode="wrap"), (A, a))
    with raises(pa.OutOfBoundsError, "'A'", "axis 1"):
        ops.take(A, 4, axis=1, mode="raise")
    S = pa.placeholder((), "int32", name="S")
    s = np.array(2, dtype="int32")
    check(ops.take(A, S, axis=0), np.take(a, s, axis=0), (A, a), (S, s))


def test_take_errors():
    A = pa.placeholder((3, 4), name="A")
    with raises(pa.IndexingError, "'A'", "'F'"):
        ops.take(A, pa.placeholder((2,), name="F"), axis=0)
    with raises(pa.AxisError, "'A'", "axis 2"):
        ops.take(A, 0, axis=2)
    with pytest.raises(pa.PolyadError):
        ops.take(A, 0, mode="nearest")


# ---------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb,axes", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4,), 0),
    ((2, 3, 4), (4, 2, 5), ([0, 2], [1, 0])), ((3, 4), (4, 3), ([-1], [0])), ((3, 4), (3, 4), ([0, 1], [0, 1])),
])
def test_tensordot(sa, sb, axes):
    A, a = inp(sa, "A", "float64")
    B, b = inp(sb, "B", "float64")
    np.testing.assert_allclose(run(ops.tensordot(A, B, axes), (A, a), (B, b)), np.tensordot(a, b, axes), rtol=1e-12)


def test_tensordot_errors():
    A = pa.placeholder((2, 3), name="A")
    B = pa.placeholder((4, 3), name="B")
    with raises(pa.ShapeError, "'A'", "'B'", "axis 1", "axis 0"):
        ops.tensordot(A, B, 1)
    with raises(pa.AxisError, "'B'"):
        ops.tensordot(A, B, ([1], [2]))


@pytest.mark.parametrize("sa,sb", [
    ((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)), ((2, 1, 3, 4), (5, 4, 2)),
    ((3, 4), (2, 4, 5)), ((2, 2, 3), (1, 3, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
])
def test_matmul(sa, sb):
    A, a = inp(sa, "A", "float64")
    B, b = inp(sb, "B", "float64")
    ref = np.matmul(a, b)
    got = run(ops.matmul(A, B), (A, a), (B, b))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_matmul_operator():
    A, a = inp((2, 3), "A", "float64")
    B, b = inp((3,), "B", "float64")
    np.testing.assert_allclose(run(A @ B, (A, a), (B, b)), a @ b, rtol=1e-12)


def test_matmul_int_and_errors():
    A, a = inp((2, 3), "A", "int32")
    B, b = inp((3, 2), "B", "int32")
    check(ops.matmul(A, B), a @ b, (A, a), (B, b))
    with raises(pa.ShapeError, "'A'", "'C'", "axis 1", "axis 0"):
        ops.matmul(A, pa.placeholder((2, 2), "int32", name="C"))
    with raises(pa.ShapeError, "'A'", "'D'"):
        ops.matmul(pa.placeholder((2, 2, 3), "int32", name="A"), pa.placeholder((3, 3, 2), "int32", name="D"))
    with raises(pa.DtypeError, "'F'"):
        ops.matmul(A, pa.placeholder((3, 2), name="F"))
