"""fold (issue 12): a plain copy ``C[o] = T[f(o)]`` that is ``T``'s only reader computes ``T``'s values
itself, at the points it reads; ``T``'s kernel and the copy's pass over it go.

The case that pays: a padded convolution's data gradient is computed over the padded input and cropped,
``{ C[n, c, y, x] -> T[n, c, y + 1, x + 1] }``; folded, the border rows and columns are never computed
(conv2d_dilated dX 1.39 + 0.07 ms -> 0.32 ms: its 32 columns are whole float8 vectors where 34 left
a scalar tail).  Three layers: the transformation against ``pa.evaluate`` on random convolutions
(hypothesis), its isl form and its errors, and the auto-scheduler's choice with an OpenCL build against
``pa.evaluate``.
"""

import pathlib
import sys

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyad as pa
from polyad.errors import ScheduleError
from polyad.schedule import Schedule, StageSchedule, prepare, validate
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import fold, foldable, stage_ops
from polyad.schedule.space import candidate_space
from polyad.tuner.configs import graph_moves

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402
from conv_cases import ZEN5, conv_grads, random_convs  # noqa: E402


_conv_grads = conv_grads


def _crops(outs):
    return [op.name for op in stage_ops(outs)[0] if foldable(outs, op) is None]


@settings(max_examples=40, deadline=None)
@given(case=random_convs())
def test_fold_equals_evaluate_on_random_convolutions(case):
    size, (sh, sw), pad, (dh, dw), k = case
    grads, feeds = _conv_grads(size, (sh, sw), pad, (dh, dw), k=k)
    want = pa.evaluate(grads, feeds)
    crops = _crops(grads)
    # a padded input's gradient is the one crop there is (its producer: the padded gradient, read by it alone)
    assert (crops == [grads[0].name]) == (pad > 0), crops
    for n in crops:
        new = fold(grads, n)
        for a, b in zip(pa.evaluate(new, feeds), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        before, after = stage_ops(grads)[1], stage_ops(new)[1]
        assert len(after) == len(before) - 1 and set(after) < set(before)
        assert after[n].attrs["folded"] not in after  # the producer is gone
        assert any(st.combiner is not None for st in after[n].statements)


def test_the_folded_dilated_data_gradient_in_isl():
    """{ T[n, c, y, x, f, rh, rw] : (y, x) in the 34x34 padded input } -> { C[n, c, y, x, f, rh, rw] } over the
    32x32 input, y + 1 in T's place."""
    grads, _ = _conv_grads(32, 1, 1, 2, k=3, c_in=16, c_out=16, batch=8)
    n = grads[0].name
    crop = stage_ops(grads)[1][n]
    prod = crop.statements[0].values[0].tensor.op
    assert prod.shape == (8, 16, 34, 34) and crop.shape == (8, 16, 32, 32)
    assert prod.statements[0].domain.is_equal(isl.Set(
        "{ S0[i0, i1, i2, i3, f, rh, rw] : 0 <= i0 <= 7 and 0 <= i1 <= 15 and 0 <= i2 <= 33 and 0 <= i3 <= 33 and "
        "0 <= f <= 15 and 0 <= rh <= 2 and 0 <= rw <= 2 and i2 - 29 <= 2rh <= i2 and i3 - 29 <= 2rw <= i3 }"))
    (st,) = stage_ops(fold(grads, n))[1][n].statements
    assert st.domain.is_equal(isl.Set(
        "{ S0[i0, i1, i2, i3, f, rh, rw] : 0 <= i0 <= 7 and 0 <= i1 <= 15 and 0 <= i2 <= 31 and 0 <= i3 <= 31 and "
        "0 <= f <= 15 and 0 <= rh <= 2 and 0 <= rw <= 2 and i2 + 1 - 29 <= 2rh <= i2 + 1 and "
        "i3 + 1 - 29 <= 2rw <= i3 + 1 }"))
    assert str(st.values[0]) == "H[i0, f, i2 + 1 - 2*rh, i3 + 1 - 2*rw]*W[f, i1, rh, rw]"


def test_fold_takes_any_affine_copy_and_keeps_every_statement():
    """A transpose of a matmul folds too (the user's choice; auto folds crops only), and a producer made of
    a reduction and a zero-fill statement keeps both, each over its preimage."""
    A = pa.placeholder((5, 7), name="A")
    B = pa.placeholder((7, 6), name="B")
    k = pa.reduce_axis((0, 7), name="k")
    M = pa.compute((5, 6), lambda i, j: pa.sum(A[i, k] * B[k, j], axis=k), name="M")
    Tr = pa.compute((6, 5), lambda j, i: M[i, j], name="Tr")
    rng = np.random.default_rng(0)
    feeds = {A: rng.standard_normal((5, 7)).astype(np.float32), B: rng.standard_normal((7, 6)).astype(np.float32)}
    new = fold([Tr], "Tr")
    assert [op.name for op in stage_ops(new)[0]] == ["Tr"]
    np.testing.assert_allclose(pa.evaluate(new, feeds)[0], (feeds[A] @ feeds[B]).T, rtol=1e-5, atol=1e-5)
    assert not auto_schedule([Tr], device=ZEN5).fold  # not a crop: the model has not measured it
    # the stride-3 data gradient of a 14x14 input padded to 16: a reduction over the cells and zeros in rows
    # and columns 14 and 15, which no cell reaches; cropped to [1, 15), the zeros are its row and column 13
    grads, feeds = _conv_grads(14, 3, 1, 1, k=5)
    n = grads[0].name
    src = stage_ops(grads)[1][n].statements[0].values[0].tensor.op
    assert [s.name for s in src.statements] == ["S0", "Z"]
    new = fold(grads, n)
    s0, z = stage_ops(new)[1][n].statements
    assert (s0.name, z.name) == ("S0", "Z") and s0.combiner is not None and z.combiner is None
    assert z.domain.is_equal(isl.Set("{ Z[i0, i1, i2, i3] : 0 <= i0 <= 1 and 0 <= i1 <= 1 and 0 <= i2 <= 13 and "
                                     "0 <= i3 <= 13 and (i2 = 13 or i3 = 13) }"))
    np.testing.assert_allclose(pa.evaluate(new, feeds)[0], pa.evaluate(grads, feeds)[0], rtol=1e-5, atol=1e-5)


def test_fold_errors_name_the_stage_and_the_reason():
    A = pa.placeholder((4, 6), name="A")
    k = pa.reduce_axis((0, 6), name="k")
    S = pa.compute((4,), lambda i: pa.sum(A[i, k], axis=k), name="S")
    C = pa.compute((3,), lambda i: S[i + 1], name="C")
    D = pa.compute((3,), lambda i: S[i] * 2.0, name="D")
    CA = pa.compute((4, 5), lambda i, j: A[i, j + 1], name="CA")
    with pytest.raises(ScheduleError, match="no stage 'nope'"):
        fold([C], "nope")
    with pytest.raises(ScheduleError, match="'D' cannot take over its producer: it is not a plain copy"):
        fold([D], "D")
    with pytest.raises(ScheduleError, match="'C' cannot.*read by C, D, not by it alone"):
        fold([C, D], "C")
    with pytest.raises(ScheduleError, match="'C' cannot.*'S' is an output of the build"):
        fold([C, S], "C")
    with pytest.raises(ScheduleError, match="'CA' cannot.*copies an input \\(A\\)"):
        fold([CA], "CA")
    # through a Schedule: validated like every decision, JSON only when set, shown
    with pytest.raises(ScheduleError, match="fold: there is no stage 'nope'"):
        validate([C], Schedule("s", fold={"nope"}))
    with pytest.raises(ScheduleError, match="Schedule.fold must be a set of stage names"):
        Schedule("s", fold="C")
    with pytest.raises(ScheduleError, match="names stage 'S', which the graph does not have"):
        validate([C], Schedule("s", fold={"C"}, stages={"S": StageSchedule(tile=(2,))}))
    s = Schedule("s", fold={"C"}, stages={"C": StageSchedule(tile=(3,))})
    validate([C], s)
    assert Schedule.from_json(s.to_json()) == s and s.to_dict()["fold"] == ["C"]
    assert "fold" not in Schedule("s").to_dict()
    assert "fold C" in s.describe()
    with pytest.raises(ScheduleError, match="'fold' must be a list"):
        Schedule.from_dict(dict(Schedule("s").to_dict(), fold="C"))
    g, _ = prepare([C], s)
    assert [op.name for op in stage_ops(g)[0]] == ["C"]


def test_auto_folds_the_crop_of_a_padded_data_gradient_and_the_tuner_can_undo_it():
    grads, _ = _conv_grads(14, 3, 1, 1, k=5)
    n = grads[0].name
    s = auto_schedule(grads, device=ZEN5)
    assert s.fold == {n}
    assert any(x.startswith(f"fold {n}: it crops") for x in s.notes)
    assert candidate_space(grads, ZEN5).fold == (n,)
    whys = [w for _, w in graph_moves(grads, s, ZEN5)]
    assert f"no fold of {n}" in whys
    # no padding: nothing is cropped, nothing folds
    grads, _ = _conv_grads(14, 3, 0, 1, k=5)
    assert not auto_schedule(grads, device=ZEN5).fold and candidate_space(grads, ZEN5).fold == ()
    # a crop of an elementwise stage is inlined instead
    A = pa.placeholder((4, 6), name="A")
    E = pa.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="E")
    C = pa.compute((4, 4), lambda i, j: E[i, j + 1], name="C")
    s = auto_schedule([C], device=ZEN5)
    assert not s.fold and "E" in s.inline


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
@pytest.mark.parametrize("stride,dil", [(3, 1), (1, 2)])
def test_built_fold_equals_evaluate(stride, dil):
    grads, feeds = _conv_grads(17, stride, 1, dil, k=3 if dil > 1 else 5, c_in=3, c_out=4)
    s = auto_schedule(grads)
    assert s.fold == {grads[0].name}
    got = pa.build(grads, list(feeds), schedule=s)(*feeds.values())
    for t, a, b in zip(grads, got, pa.evaluate(grads, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(b).max())), err_msg=t.name)
