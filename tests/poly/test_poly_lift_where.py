"""lift_where(): a reduction's quasi-affine ``where=`` becomes its statement domain, for every reducer."""

import numpy as np

import polyad as pa
from polyad.ops import nn
from polyad.poly import PolyOp
from polyad.poly.simplify import lift_where
from polyad.te.expr import Call
from polyad.te.visit import post_order


def _selects(op):
    return [n for st in op.statements for n in post_order(st.values) if isinstance(n, Call) and n.op == "select"]


def test_a_padded_max_pool_and_its_argmax_run_over_the_window_inside_the_input():
    X = pa.placeholder((2, 3, 6, 6), name="X")
    Y = nn.pool2d(X, 3, 1, 1)
    L = lift_where(Y)
    assert isinstance(L.op, PolyOp) and L.op.name == Y.op.name and not _selects(L.op)
    (st,) = L.op.statements
    want = ("[b, f, y, x, rh, rw] : 0 <= b <= 1 and 0 <= f <= 2 and 0 <= y <= 5 and 0 <= x <= 5 and 0 <= rh <= 2 and "
            "0 <= rw <= 2 and 0 <= y + rh - 1 <= 5 and 0 <= x + rw - 1 <= 5")
    assert st.domain.reset_tuple_id().is_equal(st.domain.reset_tuple_id().read_from_str(st.domain.get_ctx(),
                                                                                        "{ " + want + " }"))
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    arg = next(t.op for t in [dX] for t in t.op.input_tensors if "argmax" in t.op.name)
    lifted = lift_where(arg.output(0)).op
    assert isinstance(lifted, PolyOp) and lifted.num_outputs == 2 and not _selects(lifted)
    assert lifted.statements[0].domain.reset_tuple_id().is_equal(st.domain.reset_tuple_id())
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype("float32")
    np.testing.assert_array_equal(pa.evaluate(L, {X: x}), pa.evaluate(Y, {X: x}))  # (argmax: built, below)


def test_outputs_no_point_reaches_get_the_identity_and_a_non_affine_conjunct_stays_a_guard():
    X = pa.placeholder((5, 5), name="X")
    k = pa.reduce_axis((0, 5), "k")
    # row 0 has no k < i: the identity there, from a statement of its own; X[i, k] > 0 cannot be lifted
    T = pa.compute((5,), lambda i: pa.max(X[i, k], axis=k, where=(k < i) & (X[i, k] > 0.0)), name="T")
    L = lift_where(T)
    assert [st.name for st in L.op.statements] == ["S0", "Z"] and len(_selects(L.op)) == 1
    assert L.op.statements[1].domain.reset_tuple_id().is_equal(
        L.op.statements[1].domain.reset_tuple_id().read_from_str(L.op.statements[1].domain.get_ctx(), "{ [0] }"))
    x = np.random.default_rng(2).standard_normal((5, 5)).astype("float32")
    want = pa.evaluate(T, {X: x})
    assert want[0] == -np.inf
    np.testing.assert_array_equal(pa.evaluate(L, {X: x}), want)
    # nothing to lift: the stage stays as it is
    U = pa.compute((5,), lambda i: pa.max(X[i, k], axis=k, where=X[i, k] > 0.0), name="U")
    assert lift_where(U) is U


def test_builds_of_lifted_reductions_match_numpy(opencl):
    """Vector blocks inside the windows, exact bounds at the borders: max and avg pools with padding (avg without
    the padding counted), a padded argmax's gradient, a strided transposed convolution (a sum: solved as a
    gradient is) and a triangular min whose first row is the identity."""
    rng = np.random.default_rng(3)
    X = pa.placeholder((2, 4, 13, 17), name="X")
    W = pa.placeholder((4, 3, 3, 3), name="W")
    mp = nn.pool2d(X, 3, 1, 1)
    ap = nn.pool2d(X, 3, 2, 1, pool_type="avg", count_include_pad=False)
    H = pa.placeholder(mp.shape, name="H")
    (dX,) = pa.differentiate(mp, [X], H)
    ct = nn.conv2d_transpose(X, W, strides=2, padding=1)
    A = pa.placeholder((6, 20), name="A")
    k = pa.reduce_axis((0, 20), "k")
    tri = pa.compute((6, 20), lambda i, j: pa.min(A[i, k] * pa.cast(j + 1, "float32"), axis=k, where=k < i * 3),
                     name="tri")
    outs, ins = [mp, ap, dX, ct, tri], [X, W, H, A]
    feed = {t: rng.standard_normal(t.shape).astype("float32") for t in ins}
    from polyad.pipeline import generate

    assert "? X[" not in generate([mp], [X], "naive").source  # built from the lifted graph: no guard
    got = pa.build(outs, ins)(*(feed[t] for t in ins))
    for g, w in zip(got, pa.evaluate(outs, feed)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert np.isinf(got[4][0]).all()


def test_a_transposed_convolution_sums_over_the_quotient_not_over_one_kernel_offset_in_the_stride():
    """``X[(y + 1 - rh)//2]*W[rh]`` over ``{ rh : (y + 1 - rh) mod 2 = 0 }`` becomes ``X[q]*W[y + 1 - 2*q]`` over
    ``y - 1 <= 2*q <= y + 1``: a strided convolution's data gradient, which the scheduler runs in phases (the
    stride in the domain made every block naive loops: 110 ms, against 14-25 ms, for 16x32x56x56, stride 2)."""
    X = pa.placeholder((2, 3, 5, 6), name="X")
    W = pa.placeholder((3, 4, 3, 3), name="W")
    Y = nn.conv2d_transpose(X, W, strides=2, padding=1)
    (st,) = lift_where(Y).op.statements
    ops = {n.op for n in post_order(st.values) if isinstance(n, Call)}
    assert not ops & {"floordiv", "floormod", "select"}, ops
    b, f, y, x, rc, qh, qw = (v.name for v in st.vars)
    want = (f"{{ [{b}, {f}, {y}, {x}, {rc}, {qh}, {qw}] : 0 <= {b} <= 1 and 0 <= {f} <= 3 and 0 <= {y} <= 8 and "
            f"0 <= {x} <= 10 and 0 <= {rc} <= 2 and 0 <= {qh} <= 4 and 0 <= {qw} <= 5 and {y} - 1 <= 2{qh} <= {y} + 1 "
            f"and {x} - 1 <= 2{qw} <= {x} + 1 }}")
    dom = st.domain.reset_tuple_id()
    assert dom.is_equal(dom.read_from_str(dom.get_ctx(), want)), dom


def test_transposed_convolutions_solved_by_quotients_match_the_unlifted_sums():
    rng = np.random.default_rng(4)
    X = pa.placeholder((2, 4, 5, 7), name="X")
    for kw in (dict(strides=2, padding=1), dict(strides=3, padding=(0, 2), output_padding=1),
               dict(strides=(2, 3), padding=2, groups=2), dict(strides=2, dilation=2, padding=1)):
        W = pa.placeholder((4, 3 if kw.get("groups") is None else 1, 3, 3), name="W")
        Y = nn.conv2d_transpose(X, W, **kw)
        feed = {X: rng.standard_normal(X.shape).astype("float32"), W: rng.standard_normal(W.shape).astype("float32")}
        np.testing.assert_allclose(pa.evaluate(lift_where(Y), feed), pa.evaluate(Y, feed), rtol=1e-5, atol=1e-5,
                                   err_msg=str(kw))
