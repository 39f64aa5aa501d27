"""TE <-> isl conversion: quasi-affine expressions and conditions, and the way back."""

import itertools

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.poly.convert import FromIsl, NotAffine, ToIsl, box, count, pieces


def _axes(shape, names="ijk"):
    from polyad.te.expr import IterVar

    return tuple(IterVar(nm, "int32", lo=0, extent=n) for nm, n in zip(names, shape))


def _eval_int(expr_fn, shape):
    """Evaluate an integer expression of the grid axes over the grid (through pa.evaluate)."""
    return pa.evaluate(pa.compute(shape, expr_fn, name="e"), {})


def _roundtrip(shape, fn):
    """fn's expression -> isl PwAff -> TE again (one piece), both evaluated on the grid."""
    t = pa.compute(shape, fn, name="orig")
    axes = t.op.axis
    pw = ToIsl(axes).aff(t.op.body[0])
    pcs = pieces(pw.coalesce())
    assert len(pcs) == 1
    back = FromIsl(axes, box(axes)).aff_expr(pcs[0][1])
    from polyad.te.visit import substitute

    def rebuilt(*i):
        return substitute(back, dict(zip(axes, i)))

    a = pa.evaluate(t, {})
    b = _eval_int(rebuilt, shape)
    np.testing.assert_array_equal(a, b)
    return back


@pytest.mark.parametrize(
    "fn",
    [
        lambda i, j: 3 * i - 2 * j + 7,
        lambda i, j: (i + 2 * j) // 3,
        lambda i, j: (5 * i - j) % 4,
        lambda i, j: ((i * 7 + j) // 5) % 3,
        lambda i, j: (-i - 1) // 2,
        lambda i, j: i % 3 * 4 + j // 2 - (i + j) // 7,
    ],
)
def test_quasi_affine_roundtrip_is_exact(fn):
    _roundtrip((9, 8), fn)


def test_piecewise_min_max_select_are_affine():
    axes = _axes((6, 5))
    i, j = axes
    conv = ToIsl(axes)
    for e, ref in [
        (pa.min(i, j), np.minimum),
        (pa.max(i - 2, j), lambda a, b: np.maximum(a - 2, b)),
        (pa.select(i < j, i, j + 1), lambda a, b: np.where(a < b, a, b + 1)),
    ]:
        pw = conv.aff(e)
        for a, b in itertools.product(range(6), range(5)):
            pt = isl.Point.zero(pw.get_domain_space()).set_coordinate_val(isl.dim_type.set, 0, a)
            pt = pt.set_coordinate_val(isl.dim_type.set, 1, b)
            assert int(str(pw.eval(pt))) == int(ref(np.int64(a), np.int64(b)))


def test_clean_output_for_div_and_mod():
    j = _axes((1000,), "j")[0]
    back = FromIsl([j], box([j]))
    assert str(back.aff_expr(isl.Aff("{ [j] -> [(floor((j)/500))] }"))) == "j//500"
    assert str(back.aff_expr(isl.Aff("{ [j] -> [(j - 25*floor((j)/25))] }"))) == "j%25"
    # a floor whose remainder part is constant on the context collapses to its quotient
    k = _axes((500,), "k")[0]
    aff = isl.PwAff("{ [k] -> [(1 + k + floor((-1 - k)/500))] }")
    assert str(FromIsl([k], box([k])).aff_expr(pieces(aff)[0][1])) == "k"
    # without a context it stays exact (not collapsed)
    e = FromIsl([k]).aff_expr(pieces(aff)[0][1])
    vals = _eval_int(lambda kk: __import__("polyad.te.visit", fromlist=["x"]).substitute(e, {k: kk}), (600,))
    np.testing.assert_array_equal(vals, 1 + np.arange(600) + (-1 - np.arange(600)) // 500)


@pytest.mark.parametrize(
    "cond",
    [
        lambda i, j: (i < j) & (j <= 5),
        lambda i, j: (i == 2 * j) | (i + j > 9),
        lambda i, j: ~((i % 3 == 1) & (j // 2 != i // 3)),
        lambda i, j: (3 * i - j >= 2) & ((i + j) % 4 == 0),
    ],
)
def test_conditions_to_sets_and_back(cond):
    shape = (8, 7)
    t = pa.compute(shape, lambda i, j: pa.select(cond(i, j), pa.const(1, "int32"), pa.const(0, "int32")), name="c")
    axes = t.op.axis
    ref = pa.evaluate(t, {}).astype(bool)
    s = ToIsl(axes).set(t.op.body[0].args[0]).intersect(box(axes))
    assert count(s) == int(ref.sum())
    # the set's constraints as a TE condition select the same points
    back = FromIsl(axes).cond_of_set(s)
    from polyad.te.visit import substitute

    got = pa.evaluate(
        pa.compute(shape, lambda i, j: pa.select(substitute(back, {axes[0]: i, axes[1]: j}), 1, 0), name="b"), {}
    )
    np.testing.assert_array_equal(got.astype(bool), ref)


def test_non_affine_parts_raise_not_affine():
    X = pa.placeholder((4,), "int32", name="idx")
    i, j = _axes((4, 4))
    conv = ToIsl([i, j])
    for e in (X[i] + j, i * j, i // j, pa.cast(i, "float32") < 2.0):
        with pytest.raises(NotAffine):
            if e.dtype == "bool":
                conv.set(e)
            else:
                conv.aff(e)
    assert conv.try_set(X[i] == j) is None


def test_box_sets_are_parsed_once_and_stay_what_they_were():
    # box_set memoises the parsed isl set by its text: the shared set must not be changed by its users
    from polyad.poly.stage import box_set

    X = pa.placeholder((7, 3), name="X")
    k = pa.reduce_axis((0, 3), name="k")
    Y = pa.compute((7,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="Y")
    first = box_set("S0", _axes((7, 3)))
    assert box_set("S0", _axes((7, 3))) is first  # other variables, the same text
    pa.differentiate(Y, [X])  # builds, intersects and projects box sets of these shapes
    assert first == isl.Set("{ S0[i, j] : 0 <= i < 7 and 0 <= j < 3 }")
    assert box_set("S0", _axes((7, 4))) != first
