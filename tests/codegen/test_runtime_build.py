"""pa.build: the OpenCL results agree with pa.evaluate (or a numpy reference) for every kind of stage.

Every build compiles one program (~0.5 s cold on PoCL), so CI builds a few
modules with many outputs each; the exhaustive per-op set is marked slow:
``python -m pytest tests/codegen -m slow``.
"""

import numpy as np
import pytest

import polyad as pa

from codegen_polyops import band_fill_accumulate, strided_conv_dx, triangular_cumsum

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]

RNG = np.random.default_rng(7)


def _rand(t, lo=-2.0, hi=2.0):
    if t.dtype == "bool":
        return RNG.random(t.shape) < 0.5
    if t.dtype.startswith("int"):
        return RNG.integers(-9, 10, size=t.shape).astype(t.dtype)
    return RNG.uniform(lo, hi, size=t.shape).astype(t.dtype)


def _check(outs, ins, arrays=None, rtol=2e-5, atol=2e-5):
    arrays = arrays or [_rand(t) for t in ins]
    mod = pa.build(outs, ins)
    got = mod(*arrays)
    want = pa.evaluate(outs, dict(zip(ins, arrays)))
    for t, g, w in zip(outs, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, t.name
        if t.dtype.startswith("float"):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=t.name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=t.name)
    return mod


def _float_module():
    X = pa.placeholder((5, 6), name="X")
    B = pa.placeholder((6,), name="B")
    k = pa.reduce_axis((0, 6), name="k")
    r = pa.reduce_axis((0, 5), name="r")
    P = pa.compute((5, 6), lambda i, j: pa.abs(X[i, j]) + 0.5, name="P")  # positive, for log/sqrt/pow
    outs = [
        pa.compute((5, 6), lambda i, j: X[i, j] * B[j] + B[j], name="bcast_mad"),
        pa.compute((5,), lambda i: pa.sum(X[i, k] * B[k], axis=k, where=k <= i), name="sum_where"),
        pa.compute((6,), lambda j: pa.max(X[r, j], axis=r, where=r != 2), name="max_where"),
        pa.compute((6,), lambda j: pa.min(X[r, j] * 2.0, axis=r), name="min_red"),
        pa.compute((5,), lambda i: pa.prod(P[i, k], axis=k), name="prod_red"),
        pa.compute((5, 6), lambda i, j: pa.select(j > 0, X[i, j - 1], pa.const(-1.0)), name="guarded_shift"),
        pa.compute((5, 6), lambda i, j: pa.exp(X[i, j]) + pa.log(P[i, j]) - pa.sqrt(P[i, j]) * pa.rsqrt(P[i, j]),
                   name="explog"),
        pa.compute((5, 6), lambda i, j: pa.tanh(X[i, j]) * pa.sigmoid(X[i, j]) + pa.erf(X[i, j]), name="act"),
        pa.compute((5, 6), lambda i, j: pa.floor(X[i, j] * 3.0) + pa.ceil(X[i, j]) - pa.round(X[i, j] * 2.0)
                   + pa.trunc(X[i, j] * 3.0) * pa.sign(X[i, j]), name="rounding"),
        pa.compute((5, 6), lambda i, j: pa.floordiv(X[i, j], 0.7) + pa.floormod(X[i, j], 0.7), name="ffloor"),
        pa.compute((5, 6), lambda i, j: pa.pow(P[i, j], X[i, j]) + pa.max(X[i, j], B[j]) - pa.min(X[i, j], 0.0),
                   name="powminmax"),
        pa.compute((), lambda: pa.sum(P[2, k], axis=k), name="scalar"),
    ]
    return outs, [X, B]


def test_float_module_matches_evaluate():
    outs, ins = _float_module()
    mod = _check(outs, ins, rtol=1e-4, atol=1e-5)
    # P is an intermediate stage with its own kernel, unless the auto-scheduler inlines it
    assert len(mod.program.kernels) in (len(outs), len(outs) + 1)
    assert "fma(" not in mod.source


def test_int_bool_cast_module_matches_evaluate():
    A = pa.placeholder((4, 5), dtype="int32", name="A")
    L = pa.placeholder((5,), dtype="int64", name="L")
    M = pa.placeholder((4, 5), dtype="bool", name="M")
    X = pa.placeholder((4, 5), name="X")
    k = pa.reduce_axis((0, 5), name="k")
    outs = [
        pa.compute((4, 5), lambda i, j: A[i, j] // 3 + A[i, j] % 4 - pa.floordiv(A[i, j], -2), name="ifloor"),
        pa.compute((4, 5), lambda i, j: A[i, j] * L[j] + pa.max(A[i, j], 0) - pa.abs(A[i, j]), name="iwide"),
        pa.compute((4, 5), lambda i, j: pa.select(M[i, j], pa.cast(A[i, j], "float32"), X[i, j]), name="masked"),
        pa.compute((4, 5), lambda i, j: (X[i, j] > 0.0) & ~M[i, j] | (A[i, j] == 3), name="logic"),
        pa.compute((4,), lambda i: pa.sum(pa.cast(M[i, k], "int32") * A[i, k], axis=k), name="isum"),
        pa.compute((4, 5), lambda i, j: pa.cast(X[i, j] * 4.0, "int32") + pa.sign(A[i, j]), name="trunc_cast"),
        pa.compute((4, 5), lambda i, j: pa.cast(A[i, j], "bool"), name="to_bool"),
    ]
    _check(outs, [A, L, M, X])


def test_argmax_tuple_reduction():
    X = pa.placeholder((4, 7), name="X")
    k = pa.reduce_axis((0, 7), name="k")

    def combine(x, y):
        keep = x[1] >= y[1]
        return pa.select(keep, x[0], y[0]), pa.select(keep, x[1], y[1])

    argmax = pa.comm_reducer(combine, lambda ti, tv: (pa.const(-1, ti), pa.const(float("-inf"), tv)), name="argmax")
    idx, val = pa.compute((4,), lambda i: argmax((k, X[i, k]), axis=k), name="am")
    x = _rand(X)
    x[1, 2] = x[1, 5] = 9.0  # a tie: the first index in iteration order wins
    mod = _check([idx, val], [X], [x])
    np.testing.assert_array_equal(mod(x)[0], np.argmax(x, axis=1))


def test_casts_out_of_range_saturate_and_narrowing_wraps_in_scalar_and_vector_code():
    # C leaves a float out of an integer's range (and NaN) undefined; numpy's result is platform-defined. polyad's
    # rule (OpenCL's convert_int_sat_rtz) holds in pa.evaluate and in compiled code alike, and int64 -> int32
    # wraps also where int32 is computed as long (pa.build's 64-bit indices on CPUs)
    from polyad.schedule import Schedule, StageSchedule

    Y = pa.placeholder((4, 16), name="Y")
    Y64 = pa.placeholder((4, 16), "float64", name="Y64")
    L = pa.placeholder((4, 16), "int64", name="L")
    outs = [pa.compute((4, 16), lambda i, j: pa.cast(Y[i, j], "int32") + pa.cast(L[i, j], "int32"), name="A"),
            pa.compute((4, 16), lambda i, j: pa.cast(Y64[i, j], "int32") - pa.cast(Y[i, j], "int64"), name="B")]
    y = np.array([np.nan, 3e9, -3e9, 2.7, -2.7, np.inf, -np.inf, 2147483520.0, -2147483648.0, 1e19, -1e19, -0.5,
                  0.0, 1e9, -1e9, 5.5] * 4, "float32").reshape(4, 16)
    l = np.random.default_rng(4).integers(-2**40, 2**40, (4, 16))
    a, b = pa.evaluate(outs, {Y: y, Y64: y.astype("float64"), L: l})
    sat = np.array([0, 2**31 - 1, -2**31, 2, -2, 2**31 - 1, -2**31, 2147483520, -2**31, 2**31 - 1, -2**31, 0,
                    0, 10**9, -10**9, 5] * 4).reshape(4, 16)
    np.testing.assert_array_equal(a, (sat + l.astype("int32")).astype("int32"))  # int32 addition wraps too
    assert a.dtype == np.int32 and b.dtype == np.int64
    vec = Schedule("rows", stages={n: StageSchedule(tile=(1, 16), vectorize=8) for n in "AB"})
    for schedule in ("naive", vec):
        mod = pa.build(outs, [Y, Y64, L], schedule=schedule)
        assert "_sat_rtz" in mod.source
        got = mod(y, y.astype("float64"), l)
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)


def test_integer_division_by_zero_and_negative_powers_agree_with_pa_evaluate():
    # C leaves them undefined; numpy raises for a negative power (a raw ValueError out of pa.evaluate) where the
    # build gave 0: both now give 1 / a**-b truncated, and x // 0 == x % 0 == 0
    A = pa.placeholder((8,), "int32", name="A")
    B = pa.placeholder((8,), "int32", name="B")
    outs = [pa.ops.power(A, B), pa.ops.floor_divide(A, B), pa.ops.mod(A, B)]
    a = np.array([2, 0, 3, 1, -1, -1, -2, 5], "int32")
    b = np.array([-1, -1, 2, -5, -3, -4, 0, 0], "int32")
    want = pa.evaluate(outs, {A: a, B: b})
    np.testing.assert_array_equal(want[0], [0, 0, 9, 1, -1, 1, 1, 1])
    np.testing.assert_array_equal(want[1][-2:], [0, 0])
    np.testing.assert_array_equal(want[2][-2:], [0, 0])
    for w, g in zip(want, pa.build(outs, [A, B])(a, b)):
        np.testing.assert_array_equal(g, w)


def test_int32_arithmetic_is_exact_until_stored_in_pa_evaluate_and_compiled_code():
    # index arithmetic past int32 ((i * 1000000 + j) % 7): pa.evaluate wrapped it per operation where the CPU build
    # computed it in 64 bits, and code with 32-bit indices (a GPU's) computed it in int: both now exact
    from polyad.pipeline import generate

    X = pa.placeholder((7,), name="X")
    Y = pa.compute((5000, 8), lambda i, j: X[pa.floormod(i * 1000000 + j, 7)], name="Y")
    x = np.arange(7, dtype="float32")
    ii, jj = np.meshgrid(np.arange(5000), np.arange(8), indexing="ij")
    want = x[(ii * 1000000 + jj) % 7]
    np.testing.assert_array_equal(pa.evaluate(Y, {X: x}), want)
    np.testing.assert_array_equal(pa.build(Y, [X])(x), want)
    assert generate([Y], [X], "naive").wide_index  # the index needs 64 bits wherever it is computed
    small = pa.compute((8,), lambda i: X[pa.floormod(i * 1000 + 3, 7)], name="S")
    assert not generate([small], [X], "naive").wide_index
    # data arithmetic past int32 wraps where it is stored: a comparison before that sees the exact value
    A = pa.placeholder((3,), "int32", name="A")
    P = pa.compute((3,), lambda i: pa.cast(A[i] * A[i] > 0, "int32") + A[i] * A[i], name="P")
    a = np.array([50000, -70000, 3], "int32")
    got = pa.evaluate(P, {A: a})
    np.testing.assert_array_equal(got, (1 + a.astype("int64") ** 2).astype("int32"))
    np.testing.assert_array_equal(pa.build(P, [A])(a), got)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_by_a_quarter_constant_is_products_and_square_roots_in_evaluate_and_built_code(dtype):
    # PoCL's pow took 86 ms a million float32s, sqrt 0.3 ms: lrn's forward went from 18 to 0.7 ms. The chain is IEEE
    # pow within rounding (signed zeros, inf, NaN), but a negative base with quarters gives NaN at -inf too
    from polyad.schedule import Schedule, StageSchedule

    x = np.array([-np.inf, -2.0, -0.0, 0.0, 1e-30, 0.3, 1.0, 2.5, 1e10, np.inf, np.nan, 7.0] * 2, dtype)
    X = pa.placeholder(x.shape, dtype, name="X")
    cs = [0.75, -0.25, 0.5, -0.5, 1.5, -1.5, 2.0, 3.0, -1.0, -2.0, 4.0, 3.75]
    outs = [pa.compute(x.shape, lambda i, c=c: pa.pow(X[i], c), name=f"p{k}") for k, c in enumerate(cs)]
    want = pa.evaluate(outs, {X: x})
    finite = x > -np.inf
    for c, w in zip(cs, want):
        with np.errstate(all="ignore"):
            ref = np.power(x, x.dtype.type(c))
        np.testing.assert_allclose(w[finite], ref[finite], rtol=1e-6, err_msg=str(c))
        number = finite & ~np.isnan(ref)  # a NaN's sign is nobody's business, nor numpy's sqrt(-0.0) for 0.5
        number &= ~((ref == 0) & (c == 0.5))
        np.testing.assert_array_equal(np.signbit(w[number]), np.signbit(ref[number]), err_msg=str(c))
        assert np.isnan(w[0]) == (c != int(c)), c  # -inf: NaN with quarters, as any negative base
    vec = Schedule("v", stages={o.op.name: StageSchedule(tile=(24,), vectorize=8) for o in outs})
    for schedule in ("naive", vec):
        mod = pa.build(outs, [X], schedule=schedule)
        assert "pow(" not in mod.source
        for c, w, g in zip(cs, want, mod(x)):
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=str(c))
            number = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]), err_msg=str(c))
    # the base repeats in the products: it is a temporary, else nested powers made the text exponential
    e = X[0] * 0.5 + 0.1
    for _ in range(8):
        e = pa.pow(e * 1.01 + 0.001, 2.0)
    assert len(pa.build(pa.compute((1,), lambda i: e, name="N"), [X]).source) < 2000


def test_auto_schedules_bool_copies_without_vectors():
    # copy_rows gave a bool transpose float8-like vectors, and the build then refused auto's own schedule
    B = pa.placeholder((64, 64), dtype="bool", name="B")
    F = pa.placeholder((64, 64), name="F")
    outs = [pa.ops.transpose(B), pa.ops.pad(B, ((1, 1), (0, 0))), pa.ops.concatenate([B, B], axis=0),
            pa.compute((64, 64), lambda i, j: pa.cast(F[j, i], "bool"), name="Cb")]
    rng = np.random.default_rng(6)
    b, f = rng.random((64, 64)) > 0.5, rng.standard_normal((64, 64)).astype("float32")
    want = pa.evaluate(outs, {B: b, F: f})
    for w, g in zip(want, pa.build(outs, [B, F], schedule="auto")(b, f)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_floor_division_by_a_constant_at_the_types_minimum(dtype):
    # (a >= 0 ? a : a - 2) / 3 overflowed at the minimum: INT64_MIN // 3 came out positive, % 3 gave 3
    info = np.iinfo(dtype)
    X = pa.placeholder((6,), dtype, name="X")
    outs = [pa.compute((6,), lambda i, d=d: X[i] // d, name=f"q{d}") for d in (3, 7)]
    outs += [pa.compute((6,), lambda i, d=d: X[i] % d, name=f"r{d}") for d in (3, 7)]
    x = np.array([info.min, info.min + 1, -7, -1, 0, info.max], dtype)
    want = [x // 3, x // 7, x % 3, x % 7]
    for w, e, g in zip(want, pa.evaluate(outs, {X: x}), pa.build(outs, [X])(x)):
        np.testing.assert_array_equal(e, w)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_division_and_modulo_are_pythons(dtype):
    # floor(a / b) made 1.0 // 0.1 ten (Python: 9), 1.0 % 0.1 negative and 5 % inf NaN
    a = np.array([1.0, -5.0, 5.0, 1e30, 1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 3.0, np.inf, np.nan, 2.0], dtype)
    b = np.array([0.1, np.inf, np.inf, 1e-30, 0.0, 0.0, 2.0, 2.0, 3.0, 3.0, -2.0, 2.0, 1.0, -np.inf], dtype)
    A = pa.placeholder(a.shape, dtype, name="A")
    B = pa.placeholder(a.shape, dtype, name="B")
    outs = [pa.ops.floor_divide(A, B), pa.ops.mod(A, B), pa.compute(a.shape, lambda i: A[i] % 0.25, name="M")]
    with np.errstate(all="ignore"):
        want = [a // b, a % b, a % a.dtype.type(0.25)]
    assert want[0][0] == 9 and want[1][0] > 0.09 and want[1][2] == 5
    for got in (pa.evaluate(outs, {A: a, B: b}), pa.build(outs, [A, B])(a, b)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            number = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_shifts_are_numpys_for_any_count(dtype):
    # OpenCL takes the count modulo the bits (5 << 64 was 5, numpy's 0), and C leaves -5 << 3 undefined
    A = pa.placeholder((12,), dtype, name="A")
    B = pa.placeholder((12,), dtype, name="B")
    a = np.array([5, -5, 5, -5, 5, -5, 5, -5, 5, -5, 1, -1], dtype)
    b = np.array([-1, -1, 0, 0, 3, 3, 31, 31, 64, 64, 70, 70], dtype)
    outs = [pa.compute((12,), lambda i: A[i] << B[i], name="L"), pa.compute((12,), lambda i: A[i] >> B[i], name="R"),
            pa.compute((12,), lambda i: A[i] << 3, name="L3"), pa.compute((12,), lambda i: A[i] >> 40, name="R40")]
    want = [np.left_shift(a, b), np.right_shift(a, b), a << 3, a >> 40]
    for got in (pa.evaluate(outs, {A: a, B: b}), pa.build(outs, [A, B])(a, b)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_sign_of_negative_zero_is_positive_zero_as_numpys():
    X = pa.placeholder((4,), name="X")
    S = pa.compute((4,), lambda i: pa.sign(X[i]), name="S")
    x = np.array([-0.0, 0.0, -2.0, np.nan], "float32")
    for got in (pa.evaluate(S, {X: x}), pa.build(S, [X])(x)):
        np.testing.assert_array_equal(got, np.sign(x))
        assert not np.signbit(got[0])


def test_an_ordered_reducer_keeps_iteration_order_in_every_schedule():
    # composition of maps x -> a*x + b: associative, not commutative; auto and a blocked rfactor must fold the
    # points in iteration order, as pa.evaluate does
    from polyad.schedule import Schedule

    affine = pa.comm_reducer(lambda f, g: (f[0] * g[0], g[0] * f[1] + g[1]),
                             lambda ta, tb: (pa.const(1, ta), pa.const(0, tb)), name="affine")
    A = pa.placeholder((5, 67), "int64", name="A")
    B = pa.placeholder((5, 67), "int64", name="B")
    k = pa.reduce_axis((0, 67), "k")
    ra, rb = pa.compute((5,), lambda i: affine((A[i, k], B[i, k]), axis=k), name="R")
    rng = np.random.default_rng(3)
    a = rng.choice([-1, 1], size=(5, 67)).astype("int64")
    b = rng.integers(-3, 4, size=(5, 67)).astype("int64")
    want = pa.evaluate([ra, rb], {A: a, B: b})
    fb = np.zeros(5, "int64")
    for j in range(67):
        fb = a[:, j] * fb + b[:, j]
    np.testing.assert_array_equal(want[1], fb)
    for schedule in ("auto", Schedule("rows", rfactor={"R": 8})):
        got = pa.build([ra, rb], [A, B], schedule=schedule)(a, b)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)


def test_polyops_nonrectangular_zero_fill_and_accumulate():
    cases = [triangular_cumsum(7), band_fill_accumulate(5, 7), strided_conv_dx()]
    outs = [c[0] for c in cases]
    ins = [t for c in cases for t in c[1]]
    arrays = {id(t): _rand(t) for t in ins}
    mod = pa.build(outs, ins)
    got = mod(*[arrays[id(t)] for t in ins])
    for (out, cins, ref), g in zip(cases, got):
        np.testing.assert_allclose(g, ref(*[arrays[id(t)] for t in cins]), rtol=1e-5, atol=1e-5, err_msg=out.name)


def test_float64_and_high_rank_fused_grid():
    X = pa.placeholder((2, 3, 2, 4, 3), dtype="float64", name="X")
    Y = pa.compute(X.shape, lambda a, b, c, d, e: X[a, b, c, d, e] * 2.0 + pa.exp(X[a, b, c, d, e]), name="Y")
    x = _rand(X)
    y = pa.build(Y, [X])(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, x * 2.0 + np.exp(x), rtol=1e-13)


def test_run_on_device_buffers_and_time():
    import pyopencl as cl

    X = pa.placeholder((16,), name="X")
    H = pa.compute((16,), lambda i: X[i] * 3.0, name="H")  # an intermediate, allocated once
    Y = pa.compute((16,), lambda i: H[i] + 1.0, name="Y")
    mod = pa.build(Y, [X])
    x = np.arange(16, dtype=np.float32)
    bufs = mod.to_device(x)
    assert all(isinstance(b, cl.Buffer) for b in bufs)
    mod.run(*bufs)
    first = mod._intermediates
    mod.run(*bufs)
    assert mod._intermediates is first
    (y,) = mod.from_device(bufs)
    np.testing.assert_allclose(y, x * 3.0 + 1.0)
    times = mod.time(x, repeat=3)
    assert times.shape == (3,) and (times > 0).all()
    assert isinstance(mod([1.0] * 16), np.ndarray)  # lists are taken as the tensor's dtype


def test_kernel_arguments_follow_the_buffers_of_each_run():
    """The kernels' arguments are set only when a run's buffers differ from the last run's: runs that
    alternate between two sets of buffers, with a profile (its own buffers) between them, each read and
    write their own; a second run on the same buffers binds nothing."""
    X = pa.placeholder((16,), name="X")
    H = pa.compute((16,), lambda i: X[i] * 3.0, name="H")
    Y = pa.compute((16,), lambda i: H[i] + 1.0, name="Y")
    mod = pa.build(Y, [X])
    xa, xb = np.arange(16, dtype=np.float32), np.full(16, -2.0, dtype=np.float32)
    a, b = mod.to_device(xa), mod.to_device(xb)
    binds = []
    bind = mod._bind
    mod._bind = lambda bufs: binds.append(1) or bind(bufs)
    for bufs, x in [(a, xa), (b, xb), (a, xa)]:
        mod.run(*bufs)
        np.testing.assert_allclose(mod.from_device(bufs)[0], x * 3.0 + 1.0)
    assert len(binds) == 3
    mod.run(*a)
    assert len(binds) == 3  # the same buffers again: the arguments stand
    mod.profile(xb, repeat=1)
    y = mod(xb * 2.0)  # fresh buffers
    np.testing.assert_allclose(y, xb * 6.0 + 1.0)
    mod.run(*a)
    np.testing.assert_allclose(mod.from_device(a)[0], xa * 3.0 + 1.0)
    with pytest.raises(pa.PolyadError, match="run takes 2 buffers"):
        mod.run(a[0])
    mod.run(*b)
    np.testing.assert_allclose(mod.from_device(b)[0], xb * 3.0 + 1.0)


def test_local_size_rounds_the_ndrange_up_and_guards():
    from polyad.schedule import Schedule, StageSchedule

    X = pa.placeholder((5, 7), name="X")
    Y = pa.compute((5, 7), lambda i, j: X[i, j] + 1.0, name="Y")
    sched = Schedule("ls", default=StageSchedule(local_size=(4, 2)))
    mod = pa.build(Y, [X], schedule=sched)
    x = _rand(X)
    np.testing.assert_allclose(mod(x), x + 1.0)



def test_a_kernel_that_cannot_run_its_scheduled_group_runs_the_largest_it_can(monkeypatch):
    """A kernel's own limit (CL_KERNEL_WORK_GROUP_SIZE: its registers) can be below the device's: on an H200,
    256 for kernels auto gave 512 and 1024 work-items, which failed the build.  The module shrinks the group
    (outermost first, to divisors: the rounded-up NDRange stays whole groups) and computes the same."""
    from polyad.runtime import module as runtime_module
    from polyad.schedule import Schedule, StageSchedule

    X = pa.placeholder((5, 7), name="X")
    Y = pa.compute((5, 7), lambda i, j: X[i, j] * 2.0 + 1.0, name="Y_fit")
    monkeypatch.setattr(runtime_module, "kernel_work_group_limit", lambda kernel, device: 4)
    mod = pa.build(Y, [X], schedule=Schedule("ls", default=StageSchedule(local_size=(4, 2))))
    assert mod.work_group_fits == {"Y_fit": ((4, 2), (4, 1), 4)}
    x = _rand(X)
    np.testing.assert_allclose(mod(x), x * 2.0 + 1.0)
    monkeypatch.setattr(runtime_module, "kernel_work_group_limit", lambda kernel, device: None)  # cannot say
    assert pa.build(Y, [X], schedule=Schedule("ls", default=StageSchedule(local_size=(4, 2)))).work_group_fits == {}


def test_a_driver_error_while_running_or_reading_back_is_a_device_error(monkeypatch):
    """A GPU reports a kernel's fault at the next call that waits (NVIDIA: INVALID_COMMAND_QUEUE): the user
    gets a pa.DeviceError saying what failed on which device, not a bare pyopencl error."""
    import pyopencl as cl

    X = pa.placeholder((4, 6), name="X")
    Y = pa.compute((4, 6), lambda i, j: X[i, j] + 1.0, name="Y_run")
    k = pa.reduce_axis((0, 6), name="k")
    Z = pa.compute((4,), lambda i: pa.sum(Y[i, k] * X[i, k], axis=k), name="Z_run")
    one = pa.build(Y, [X])
    two = pa.build([Y, Z], [X], schedule="naive")  # two kernels: the out-of-order queue where there is one
    x = _rand(X)

    def lost(*args, **kw):
        raise cl.LogicError("clEnqueueNDRangeKernel failed: INVALID_COMMAND_QUEUE")

    with monkeypatch.context() as m:
        m.setattr(cl, "enqueue_nd_range_kernel", lost)
        for mod, names in ((one, "Y_run"), (two, "Y_run, Z_run")):
            with pytest.raises(pa.DeviceError, match=rf"failed running its kernels \(kernels {names}\): "
                                                     "LogicError: .*INVALID_COMMAND_QUEUE"):
                mod(x)
    real_copy = cl.enqueue_copy

    def read_fails(queue, dst, src, **kw):
        if isinstance(dst, np.ndarray):
            raise cl.LogicError("clEnqueueReadBuffer failed: INVALID_COMMAND_QUEUE")
        return real_copy(queue, dst, src, **kw)

    with monkeypatch.context() as m:
        m.setattr(cl, "enqueue_copy", read_fails)
        with pytest.raises(pa.DeviceError, match="failed reading 'Y_run' back"):
            one(x)
    np.testing.assert_allclose(one(x), x + 1.0)  # nothing left broken on a device that did not fault

# -- the exhaustive per-op set: pytest -m slow -------------------------------------------------
_UNARY = ["exp", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf",
          "floor", "ceil", "round", "trunc", "abs", "sign"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", _UNARY)
def test_each_intrinsic(op, dtype):
    X = pa.placeholder((9,), dtype=dtype, name="X")
    positive = op in ("log", "log2", "log1p", "sqrt", "rsqrt")
    Y = pa.compute((9,), lambda i: getattr(pa, op)(pa.abs(X[i]) + 0.1 if positive else X[i]), name="Y")
    x = _rand(X, -3.0, 3.0)
    tol = 1e-5 if dtype == "float32" else 1e-12
    _check([Y], [X], [x], rtol=tol, atol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["floordiv", "floormod", "min", "max", "mul", "sub", "pow"])
def test_each_int_binary(op, dtype):
    A = pa.placeholder((11,), dtype=dtype, name="A")
    Bt = pa.placeholder((11,), dtype=dtype, name="B")
    fn = {"floordiv": pa.floordiv, "floormod": pa.floormod, "min": pa.min, "max": pa.max,
          "mul": lambda a, b: a * b, "sub": lambda a, b: a - b, "pow": pa.pow}[op]
    a = np.array([-7, -6, -1, 0, 1, 5, 7, 9, -9, 3, 2], dtype=dtype)
    b = np.array([2, -4, 3, 5, -3, 2, -1, 4, 4, 3, 7], dtype=dtype)
    if op == "pow":
        b = np.abs(b) % 4
    _check([pa.compute((11,), lambda i: fn(A[i], Bt[i]), name="Y")], [A, Bt], [a, b])


@pytest.mark.slow
@pytest.mark.parametrize("reducer", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("where", [False, True])
def test_each_reduction(reducer, where):
    X = pa.placeholder((4, 6), name="X")
    k = pa.reduce_axis((0, 6), name="k")
    fn = getattr(pa, reducer)
    Y = pa.compute((4,), lambda i: fn(X[i, k], axis=k, where=(k >= i) if where else None), name="Y")
    _check([Y], [X], [_rand(X, 0.5, 1.5)], rtol=1e-5)


def test_wide_index_program_compiles_without_allocating():
    from polyad.pipeline import generate, select_device
    from polyad.runtime.cache import get_program

    n = 2**31 + 7  # the buffers are never allocated: the program is only compiled
    X = pa.placeholder((n,), name="X")
    k = pa.reduce_axis((0, 3), name="k")
    Y = pa.compute((n // 3,), lambda i: pa.sum(X[3 * i + k], axis=k), name="Y")
    prog = generate(Y, [X], "naive")  # one work-item per output point
    assert prog.wide_index and "long const gid0" in prog.source
    assert prog.kernels[0].global_size == (n // 3,)
    dev = select_device()
    assert get_program(prog.source, dev) is not None  # no launches: nothing allocated
    if 4 * n > dev.max_mem_alloc_size:  # pa.build says at build time that X cannot be allocated there
        with pytest.raises(pa.DeviceLimitError, match=r"tensor 'X' float32\[2147483655\] needs 8589934620 bytes"):
            pa.build(Y, [X], schedule="naive")
    else:
        assert pa.build(Y, [X], schedule="naive").program.wide_index


def test_profile_times_each_kernel_by_name(opencl):
    X = pa.placeholder((64, 32), name="X")
    A = pa.compute((64, 32), lambda i, j: X[i, j] * 2.0, name="A")
    k = pa.reduce_axis((0, 32), "k")
    B = pa.compute((64,), lambda i: pa.sum(A[i, k] * A[i, k], axis=k), name="B")
    mod = pa.build([B], [X], schedule="naive")
    x = np.random.default_rng(0).standard_normal((64, 32)).astype("float32")
    prof = mod.profile(x, repeat=3)
    assert list(prof) == [kl.name for kl in mod.program.kernels] == ["A", "B"]
    assert all(v > 0 for v in prof.values())
    with pytest.raises(pa.PolyadError, match="run takes 2 buffers"):
        mod.run(mod.to_device(x)[0])


def test_cpus_index_in_64_bits_and_gpus_in_32():
    """On a CPU every index is ``long`` (an ``int`` is sign-extended at every load, which keeps LLVM from
    folding offsets into addresses: dense's dX 0.90 -> 0.74 ms on PoCL); a GPU keeps ``int`` (it emulates
    64-bit integers) unless a buffer needs more.  Same values either way."""
    import pathlib

    import pyopencl as cl

    from polyad.pipeline import generate
    from polyad.schedule import DeviceModel

    devices = pathlib.Path(__file__).resolve().parents[1] / "data" / "devices"
    X = pa.placeholder((6, 10), name="X")
    W = pa.placeholder((10, 8), name="W")
    k = pa.reduce_axis((0, 10), name="k")
    Y = pa.compute((6, 8), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="Y")
    cpu = generate(Y, [X, W], "auto", device=DeviceModel.load(devices / "zen5-former-constants.json"))
    gpu = generate(Y, [X, W], "auto", device=DeviceModel.load(devices / "gpu-former-constants.json"))
    assert cpu.wide_index and "(long)get_global_id" in cpu.source and "int const" not in cpu.source
    assert not gpu.wide_index and "(int)get_global_id" in gpu.source
    m = pa.build(Y, [X, W])
    assert m.program.wide_index == bool(m.device.type & cl.device_type.CPU)
    x, w = _rand(X), _rand(W)
    np.testing.assert_allclose(m(x, w), x @ w, rtol=1e-5, atol=1e-5)


def test_int32_reads_in_64_bit_index_code_are_long():
    """With 64-bit indices (every CPU build) int32 values are computed as ``long``: a scalar read of an
    int32 tensor is widened, or ``min(I[i], 6L)`` is an ambiguous overload and the build fails (found
    under an AVX2 target, where take's gradient ran scalar)."""
    from polyad.codegen import generate

    X = pa.placeholder((7, 3), name="X")
    I = pa.placeholder((5,), name="I", dtype="int32")
    Y = pa.compute((5, 3), lambda i, j: X[pa.max(pa.min(I[i], 6), 0), j], name="Y")
    prog = generate(Y, [X, I], wide=True)
    assert "((long)I[" in prog.source
    x = _rand(X)
    idx = np.array([-3, 0, 4, 6, 9], np.int32)
    m = pa.build(Y, [X, I], schedule="naive")
    np.testing.assert_array_equal(m(x, idx), x[np.clip(idx, 0, 6)])
