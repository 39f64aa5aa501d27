"""Tensor expressions: hash-consing, typing, folding, reducers, computes."""

import numpy as np
import pytest

import polyad as pa
from polyad.te.expr import Call, Const, IterVar, Load, Reduce
from polyad.te.visit import count_nodes, free_vars, post_order, substitute


def test_hash_consing_makes_equal_expressions_identical():
    X = pa.placeholder((4, 5), name="X")
    i = pa.reduce_axis((0, 4), "i")
    a = X[i, 2] * 2.0 + pa.exp(X[i, 2])
    b = X[i, 2] * 2.0 + pa.exp(X[i, 2])
    assert a is b
    assert isinstance(a, Call) and a.op == "add"
    # distinct variables with the same name stay distinct
    j = pa.reduce_axis((0, 4), "i")
    assert X[j, 2] is not X[i, 2]


def test_placeholders_with_the_same_name_are_different_tensors():
    A = pa.placeholder((3,), name="A")
    B = pa.placeholder((3,), name="A")
    assert A is not B and A[0] is not B[0]


def test_sharing_keeps_a_deep_chain_linear():
    x = pa.placeholder((3,), name="x")
    i = pa.reduce_axis((0, 3), "i")
    e = x[i]
    for _ in range(300):
        e = x[i] * e
    # 300 muls + the load + the index var: linear, not exponential
    assert count_nodes(e) == 302


def test_python_scalars_promote_to_the_expression_dtype():
    X = pa.placeholder((2,), dtype="float64", name="X")
    e = X[0] + 1
    assert e.dtype == "float64" and e.args[1].dtype == "float64"
    n = pa.placeholder((2,), dtype="int64", name="N")
    assert (n[0] * 3).dtype == "int64"
    assert (2 * X[1]).dtype == "float64"


def test_int_widths_widen_floats_do_not_mix():
    a = pa.placeholder((2,), dtype="int32", name="a")
    b = pa.placeholder((2,), dtype="int64", name="b")
    assert (a[0] + b[0]).dtype == "int64"
    f = pa.placeholder((2,), dtype="float32", name="f")
    d = pa.placeholder((2,), dtype="float64", name="d")
    with pytest.raises(pa.DtypeError, match="float32.*float64"):
        f[0] + d[0]
    with pytest.raises(pa.DtypeError, match="cast"):
        f[0] * a[0]
    assert (f[0] + pa.cast(d[0], "float32")).dtype == "float32"


def test_integer_constants_never_silently_overflow():
    a = pa.placeholder((3,), dtype="int32", name="a")
    with pytest.raises(pa.DtypeError, match="2199023255552 does not fit in int32"):
        pa.const(2**41, "int32")
    # a Python int too large for the other operand widens the operation, as int32 and int64 do
    big = pa.compute((3,), lambda i: a[i] + 2**41, name="big")
    assert big.dtype == "int64"
    # folding keeps no out-of-range constant: the evaluation (numpy, like C) wraps
    top = pa.const(2**31 - 1, "int32") + 1
    assert top.dtype == "int32" and not isinstance(top, pa.te.Const)
    assert pa.cast(pa.const(1e30), "int32").op == "cast"
    wrap = pa.compute((3,), lambda i: a[i] + (2**31 - 1) + 1, name="wrap")  # no reassociation to 2**31
    assert wrap.dtype == "int32"
    x = np.array([0, 1, -5], "int32")
    np.testing.assert_array_equal(pa.evaluate(big, {a: x}), x.astype("int64") + 2**41)
    np.testing.assert_array_equal(pa.evaluate(wrap, {a: x}), x + np.int32(2**31 - 1) + np.int32(1))


def test_integer_true_division_is_an_error():
    i = pa.reduce_axis((0, 3), "i")
    with pytest.raises(pa.DtypeError, match="//"):
        i / 2


def test_folding_of_neutral_elements_and_constants():
    X = pa.placeholder((2,), name="X")
    x = X[0]
    assert x * 1.0 is x and 1.0 * x is x and x + 0.0 is x and x - 0.0 is x
    assert (x * 0.0).value == 0.0
    assert (pa.const(2) + 3).value == 5
    assert pa.floordiv(pa.const(-7), 2).value == -4  # floor, not C truncation
    assert pa.floormod(pa.const(-7), 2).value == 1
    assert pa.select(pa.const(True), x, 0.0) is x
    assert -(-x) is x


def test_comparison_truth_value_is_identity():
    i = pa.reduce_axis((0, 3), "i")
    j = pa.reduce_axis((0, 3), "j")
    assert bool(i == i) and not bool(i == j) and bool(i != j)
    with pytest.raises(pa.PolyadError, match="truth value"):
        bool(i < j)


def test_select_requires_bool_condition_and_matching_branches():
    X = pa.placeholder((3,), name="X")
    i = pa.reduce_axis((0, 3), "i")
    with pytest.raises(pa.DtypeError, match="bool"):
        pa.select(i, X[0], 0.0)
    e = pa.select(i > 0, X[0], 0)
    assert e.dtype == "float32"


def test_float_intrinsics_need_float_operands():
    i = pa.reduce_axis((0, 3), "i")
    with pytest.raises(pa.DtypeError, match="exp"):
        pa.exp(i)
    X = pa.placeholder((3,), name="X")
    for f in (pa.exp, pa.log, pa.sqrt, pa.rsqrt, pa.tanh, pa.sigmoid, pa.sin, pa.cos, pa.erf,
              pa.floor, pa.ceil, pa.round, pa.trunc, pa.log1p, pa.log2, pa.abs, pa.sign):
        assert f(X[0]).dtype == "float32"
    assert pa.pow(X[0], 2.0).dtype == "float32"


def test_compute_builds_axes_with_ranges_and_names():
    X = pa.placeholder((4, 6), name="X")
    k = pa.reduce_axis((1, 6), "k")
    T = pa.compute((4,), lambda row: pa.sum(X[row, k], axis=k), name="T")
    op = T.op
    assert T.shape == (4,) and T.dtype == "float32" and T.name == "T"
    (row,) = op.axis
    assert isinstance(row, IterVar) and row.name == "row" and row.extent == 4 and row.kind == "data"
    body = op.body[0]
    assert isinstance(body, Reduce) and body.axis == (k,) and k.lo == 1 and k.hi == 6
    assert op.input_tensors == [X]


def test_compute_with_varargs_and_scalar_shape():
    X = pa.placeholder((2, 3), name="X")
    Y = pa.compute((2, 3), lambda *idx: X[idx] * 2.0, name="Y")
    assert [a.name for a in Y.op.axis] == ["i0", "i1"]
    S = pa.compute((), lambda: X[1, 2] + 1.0, name="S")
    assert S.shape == () and S.ndim == 0
    np.testing.assert_allclose(pa.evaluate(S, {X: np.arange(6, dtype="float32").reshape(2, 3)}), 6.0)


def test_binary_max_min_and_reductions_share_names():
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")
    assert pa.max(X[0, 0], X[0, 1]).op == "max"
    assert pa.min(X[0, 0], 1.0).op == "min"
    r = pa.max(X[0, k], axis=k)
    assert isinstance(r, Reduce) and r.combiner.kind() == "max"
    assert isinstance(pa.min(X[0, k], k), Reduce)
    for f in (pa.max, pa.min):  # neither axis nor a second operand: an error naming the function
        with pytest.raises(pa.AxisError, match=rf"pa\.{f.__name__} needs axis="):
            f(X[0, 0])


def test_comm_reducer_kinds_are_recognised_structurally():
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")
    mysum = pa.comm_reducer(lambda a, b: a + b, lambda t: pa.const(0, t), name="mysum")
    r = mysum(X[0, k], axis=k)
    assert r.combiner.kind() == "sum" and r.combiner.name == "mysum"
    # (1 + a)(1 + b) - 1: associative, identity 0, but not one of the four standard forms
    other = pa.comm_reducer(lambda a, b: a + b + a * b, lambda t: pa.const(0, t), name="other")
    assert other(X[0, k], axis=k).combiner.kind() is None


@pytest.mark.parametrize("fcombine, identity, law", [
    (lambda a, b: a * 0.5 + b, 0.0, r"fcombine is not associative: combine\(combine\(a, b\), c\) = "),  # a running mean
    (lambda a, b: a * b + a, 1.0, "fcombine is not associative"),
    # a standard combiner starting elsewhere is not a standard kind: a build's empty where= windows got 0 and
    # each rfactor partial started from it again, where pa.evaluate started once
    (lambda a, b: a + b, 1.0, r"fidentity is not neutral: combine\(identity, a\) = "),
    (lambda a, b: pa.max(a, b), 7.0, "fidentity is not neutral"),
    # neutral on the small samples, not farther out (a helper's max from -10 gave -10 over values in [-149, -50])
    (lambda a, b: pa.max(a, b), -10.0, r"fidentity is not neutral: combine\(identity, a\) = -10.0 but a = -100.0"),
    (lambda a, b: pa.max(a, b), -1e30, None),  # TVM's argmax starts from -1e30: neutral enough
    (lambda a, b: a + b, 0.0, None),
    (lambda a, b: a + b + a * b, 1.0, r"fidentity is not neutral: combine\(identity, a\) = "),
    (lambda a, b: b, 0.0, r"fidentity is not neutral: combine\(a, identity\) = 0.0 but a = "),
])
def test_a_comm_reducer_must_be_associative_with_a_neutral_identity(fcombine, identity, law):
    # pa.evaluate combines pairwise and a build in its schedule's order: without the laws they disagree
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")
    red = pa.comm_reducer(fcombine, lambda t: pa.const(identity, t), name="mine")
    if law is None:
        red(X[0, k], axis=k)
        return
    with pytest.raises(pa.PolyadError, match=r"reducer mine: " + law):
        red(X[0, k], axis=k)


def test_lawful_comm_reducers_need_not_commute():
    # TVM's argmax keeps the left operand on ties and composition of affine maps is ordered: both keep
    # iteration order in every schedule, so both are accepted (the build's order is tested in test_runtime_build)
    X = pa.placeholder((3, 4), name="X")
    k = pa.reduce_axis((0, 4), "k")

    def tvm_argmax(x, y):
        keep = x[1] >= y[1]
        return pa.select(keep, x[0], y[0]), pa.select(keep, x[1], y[1])

    amax = pa.comm_reducer(tvm_argmax, lambda ti, tv: (pa.const(-1, ti), pa.const(-np.inf, tv)), name="amax")
    affine = pa.comm_reducer(lambda f, g: (f[0] * g[0], g[0] * f[1] + g[1]),
                             lambda ta, tb: (pa.const(1, ta), pa.const(0, tb)), name="affine")
    amax((k, X[0, k]), axis=k)
    affine((X[0, k], X[1, k]), axis=k)


def test_substitute_refolds():
    X = pa.placeholder((5,), name="X")
    i = pa.reduce_axis((0, 5), "i")
    e = X[i] * pa.cast(i, "float32") + X[i + 1 - 1]
    assert X[i + 1 - 1] is X[i]
    s = substitute(e, {i: 0})
    assert s is X[0]  # X[0]*0.0 folds away
    s2 = substitute(e, {i: 2})
    assert s2 is X[2] * 2.0 + X[2]
    assert free_vars(s2) == []


def test_post_order_visits_each_shared_node_once():
    X = pa.placeholder((5,), name="X")
    a = X[0] + X[1]
    e = a * a
    nodes = post_order(e)
    assert nodes[-1] is e
    assert sum(1 for n in nodes if n is a) == 1
    assert all(isinstance(n, (Call, Load, Const)) for n in nodes)


@pytest.mark.parametrize("op", [pa.floordiv, pa.floormod])
def test_an_integer_division_by_the_constant_zero_is_an_error_as_in_python(op):
    """``X[i, i // 0]`` built and read ``X[i, 0]`` (the helpers' 0 for a divisor that is data)."""
    X = pa.placeholder((4, 5), name="X")
    with pytest.raises(pa.PolyadError, match=r"\(i, 0\): integer division by the constant 0"):
        pa.compute((4,), lambda i: X[i, op(i, 0)])
    with pytest.raises(pa.PolyadError, match="by the constant 0"):
        op(3, 0)
    assert op(pa.const(1.0), 0.0).dtype == "float32"  # a float divisor of 0 is IEEE's


def test_pow_by_one_and_by_zero_fold_exactly():
    """IEEE's and numpy's pow(x, 1) is x and pow(x, 0) is 1 for every x, NaN and infinities included: the derivative
    of ``x ** 2.0`` was ``2.0 * pow(x, 1.0)``, which PoCL computes at 86 ms a million floats (a variance's backward,
    16x32x56x56: 244 ms, 0.44 ms folded)."""
    import numpy as np

    from polyad.te.expr import Call, Const, Load
    from polyad.te.visit import post_order

    X = pa.placeholder((6,), name="X")
    I = pa.placeholder((6,), "int32", name="I")
    i = pa.placeholder((), "int32", name="i")[()]
    assert isinstance(X[i] ** 1.0, Load) and isinstance(I[i] ** 1, Load)
    assert isinstance(X[i] ** 0.0, Const) and (X[i] ** 0.0).value == 1.0 and (I[i] ** 0).dtype == "int32"
    with pytest.raises(pa.DtypeError):  # an int base and a float power do not mix, folded or not
        I[i] ** 1.0
    H = pa.placeholder((6,), name="H")
    (dX,) = pa.differentiate(pa.compute((6,), lambda j: X[j] ** 2.0, name="Y"), [X], H)
    assert not [n for n in post_order(dX.op.body) if isinstance(n, Call) and n.op == "pow"]
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 2.5, -3.0], np.float32)
    T = pa.compute((6,), lambda j: X[j] ** 1.0 + X[j] ** 0.0, name="T")
    np.testing.assert_array_equal(pa.evaluate(T, {X: x}), np.power(x, 1.0) + np.power(x, 0.0))
