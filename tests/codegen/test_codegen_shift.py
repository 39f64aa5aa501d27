"""A cut last tile moved back to the row's end: a full tile, some points computed twice.

A row of 28 in float16 tiles of 16 ran its last 12 points as a float8 and a float4 group, each in its own
reduction loop: three vector instructions where 32 columns take two.  Moved back to columns 12-27 the last tile is
full (one float16 vector; columns 12-15 computed again, alike, and stored again): a 3x3/2/1 conv2d's stage on
rows of 28 ran 1.71 -> 1.17 ms, bit for bit the same outputs.
"""

import islpy as isl
import numpy as np
import pytest

import polyad as pa
import polyad.codegen.tree as tree
from polyad.pipeline import generate, select_device
from polyad.poly.stage import PolyOp, Statement, statements_of
from polyad.runtime.module import Module
from polyad.schedule import Schedule, StageSchedule, moved_tile

from codegen_polyops import band_fill_accumulate, ivar, triangular_cumsum


def _matmul(rows=4, cols=28, red=12):
    X = pa.placeholder((rows, red), name="X")
    W = pa.placeholder((red, cols), name="W")
    k = pa.reduce_axis((0, red), name="k")
    return pa.compute((rows, cols), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="Y"), [X, W]


def _count(s):
    return 0 if s.is_empty() else int(s.count_val().to_python())


def _outputs(prog, ins, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    got = Module(prog, select_device(None), inputs=ins)(*arrays)
    return (got if isinstance(got, list) else [got]), arrays


def _both(monkeypatch, outs, ins, schedule):
    """The program with the last tiles moved and without, built and run on the same inputs: the outputs bit for
    bit the same, and pa.evaluate's."""
    moved = generate(outs, ins, schedule)
    monkeypatch.setattr(tree, "SHIFT_LAST", False)
    kept = generate(outs, ins, schedule)
    monkeypatch.setattr(tree, "SHIFT_LAST", True)
    (a, arrays), (b, _) = _outputs(moved, ins), _outputs(kept, ins)
    for x, y in zip(a, b):
        assert np.array_equal(x, y), "a moved tile changed the numbers"
    want = pa.evaluate(outs, dict(zip(ins, arrays)))
    for x, w in zip(a, want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4, err_msg=moved.source)
    return moved, kept


@pytest.mark.parametrize("tile, vec, rest, shift", [
    ((2, 16), 16, (8, 4, 2), 4),  # 28 = 16 + 12: a float8 and a float4 group, or one moved float16 tile
    ((2, 32), 16, (8, 4, 2), 0),  # 40 = 32 + 8: one float8 group, fewer than a tile's two vectors
    ((2, 32), 16, (), 24),  # 40 = 32 + 8 scalar points (an assignment, or a device without float8)
    ((2, 64), 16, (8, 4, 2), 0),  # a tile wider than the row: nothing to move it back into
    ((2, 16), 1, (), 0),  # no vectors
])
def test_the_last_tile_moves_back_where_its_remainder_takes_more_groups_than_a_tile(tile, vec, rest, shift):
    cols = {16: 28, 32: 40, 64: 40}[tile[-1]]
    assert moved_tile(cols, tile[-1], vec, rest) == shift
    assert moved_tile(None, tile[-1], vec, rest) == 0  # no extent: a stage where no point may be computed twice


def test_the_split_covers_every_instance_and_repeats_only_the_moved_tiles_overlap():
    """Rows of 28 in 2x16 tiles: ``{ [b0, b1, l0, l1, r] : b1 = 1 }`` over ``o1 = 16*b1 + 16*l1 - 4``, the tile of
    columns 12-27; the full tiles, the moved ones and the partial points count every instance once, and columns
    12-15 (4 rows, 12 reduction points each) twice."""
    Y, _ = _matmul(rows=4, cols=28)
    (st,) = statements_of(Y.op)
    full, (shift, moved), groups, partial = tree._split_tiles(st, (2, 16), 16, (8, 4, 2), extent=28)
    assert shift == 4 and not groups and partial.is_empty()
    assert _count(full) == 2 * 2 * 12 and _count(moved) == 2 * 2 * 12  # 2 row blocks x 2 rows x 12, a vector each
    assert moved.is_subset(isl.Set("{ [b0, b1, l0, l1, r] : b1 = 1 and l1 = 0 }"))
    assert (_count(full) + _count(moved)) * 16 == _count(st.domain) + 4 * 4 * 12


def test_a_row_of_28_ends_in_one_float16_tile_the_same_numbers(monkeypatch):
    Y, ins = _matmul(rows=4, cols=28)
    moved, kept = _both(monkeypatch, [Y], ins, Schedule("s", stages={"Y": StageSchedule(tile=(2, 16), vectorize=16)}))
    body = moved.source.split("// kernel Y")[1]
    assert "float8" not in moved.source and "float4" not in moved.source
    assert "int const j = 12;" in body and body.count("vstore16(") == 4  # two rows, in the first tile and the moved
    assert "float8" in kept.source and "float4" in kept.source  # the remainder's groups, without the move


def test_a_convolution_on_rows_of_14_in_float8_tiles_the_same_numbers(monkeypatch):
    """A padded 3x3 conv2d: its rows of 14 in float8 tiles end in a moved tile (columns 6-13), not float4 and
    float2 groups; its data gradient's copy out of the padded rows too, not 6 scalar stores a row; the outputs
    bit for bit those of the groups."""
    X = pa.placeholder((2, 3, 14, 14), name="X")
    W = pa.placeholder((4, 3, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=1, padding=1)
    sched = Schedule("s", stages={"conv2d": StageSchedule(tile=(1, 2, 2, 8), vectorize=8)})
    moved, kept = _both(monkeypatch, [Y], [X, W], sched)
    assert "float2" in kept.source and "float2" not in moved.source and "int const x = 6;" in moved.source
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    blocks = StageSchedule(tile=(1, 1, 2, 8), vectorize=8)  # the padded gradient's rows of 16, the copy's of 14
    moved, kept = _both(monkeypatch, [dX], [W, H], Schedule("s", stages={"d_conv2d_pad_from_conv2d": blocks,
                                                                          "d_X_from_conv2d_pad": blocks}))
    copy = moved.source.split("// kernel d_X_from_conv2d_pad")[1]
    assert "int const i3 = 6;" in copy and "int const i3 = 6;" not in kept.source


def test_a_phased_data_gradients_rows_of_14_the_same_numbers(monkeypatch):
    """A 3x3/2/1 conv2d's data gradient, phased (``x = 2*q + p``): each phase's rows of 14 ``q`` in float8 tiles
    end in a moved tile; the phases write apart, the moved tile's points again alike (measured on 16x32x56x56:
    the stage in 1x8x2x16 blocks 4.26 -> 3.75 ms)."""
    X = pa.placeholder((2, 3, 28, 28), name="X")
    W = pa.placeholder((4, 3, 3, 3), name="W")
    Y = pa.nn.conv2d(X, W, strides=2, padding=1)
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    name = "d_conv2d_pad_from_conv2d"  # the padded gradient, 30 wide: q rows of 15, phases of 15 and 14 points
    phased = StageSchedule(tile=(1, 1, 1, 8), vectorize=8, phase=(1, 1, 2, 2))
    moved, kept = _both(monkeypatch, [dX], [W, H], Schedule("s", stages={name: phased}))
    assert moved.source != kept.source


def test_no_tile_moves_where_a_statement_writes_anothers_points():
    """A second work-item's first statement would undo what the first's second wrote (an accumulation, an
    overwrite); statements writing apart (a padded copy's border and interior) may move."""
    T, _, _ = band_fill_accumulate(5, 7)
    assert tree._shift_extent(statements_of(T.op), T.shape) is None  # accumulates into the assignment's points
    n, m = 4, 20
    i, j = ivar("i", n), ivar("j", m)
    X = pa.placeholder((n, m), name="X")
    over = (Statement("Z", (i, j), 2, isl.Set(f"{{ Z[i, j] : 0 <= i < {n} and 0 <= j < {m} }}"), (pa.const(0.0),)),
            Statement("A", (i, j), 2, isl.Set(f"{{ A[i, j] : 0 <= i < {n} and 2 <= j < {m} }}"), (X[i, j],)))
    apart = (Statement("Z", (i, j), 2, isl.Set(f"{{ Z[i, j] : 0 <= i < {n} and 0 <= j < 2 }}"), (pa.const(0.0),)),
             over[1])
    assert tree._shift_extent(over, (n, m)) is None
    assert tree._shift_extent(apart, (n, m)) == m
    T = PolyOp("T", (n, m), ("float32",), apart).output(0)
    prog = generate([T], [X], Schedule("s", stages={"T": StageSchedule(tile=(1, 16), vectorize=16)}))
    (got,), (x,) = _outputs(prog, [X])
    want = np.where(np.arange(m) < 2, 0.0, x).astype("float32")
    assert np.array_equal(got, want) and "int const j = 4;" in prog.source


def test_a_triangular_domain_keeps_its_groups(monkeypatch):
    """isl decides: the last tile of a cumulative sum's row reduces over sets that differ point by point, no full
    tile where it is moved either; the program is the one without the move."""
    T, ins, _ = triangular_cumsum(n=23)
    moved, kept = _both(monkeypatch, [T], ins, Schedule("s", stages={"T": StageSchedule(tile=(16,), vectorize=8)}))
    assert moved.source == kept.source


def test_a_row_shorter_than_a_tile_is_not_moved_past_its_start():
    """A moved tile must start inside the row: rows of 10 in tiles of 16 are not moved (``o = 16*b + l - 6``
    would begin at -6)."""
    Y, _ = _matmul(rows=2, cols=10)
    (st,) = statements_of(Y.op)
    full, (shift, moved), groups, _ = tree._split_tiles(st, (1, 16), 16, (8, 4, 2), extent=10)
    assert shift == 0 and moved.is_empty() and full.is_empty() and [w for w, *_ in groups] == [8, 2]


def test_a_phase_with_fewer_points_moves_its_own_last_tile(monkeypatch):
    """A 31-wide stride-2 transposed convolution, phased: 16 even points a row and 15 odd ones, in float8 tiles.
    The odd phase's cut tile moves back to its own end (points 7-14), where it took a float4, a float2 and a
    scalar group (a 111-wide one at 16x32x56x56: the stage 4.16 -> 2.87 ms, bit for bit the same)."""
    X = pa.placeholder((1, 2, 16, 16), name="X")
    W = pa.placeholder((2, 3, 3, 3), name="W")
    Y = pa.nn.conv2d_transpose(X, W, strides=2, padding=1)
    assert Y.shape == (1, 3, 31, 31)
    sched = Schedule("s", stages={Y.op.name: StageSchedule(tile=(1, 1, 1, 8), vectorize=8, phase=(1, 1, 2, 2))})
    moved = generate([Y], [X, W], sched)
    monkeypatch.setattr(tree, "_phase_extent", lambda st, extent: extent)
    monkeypatch.setattr(tree, "_TILED", type(tree._TILED)(8))  # the tiled stages built with the switch off
    kept = generate([Y], [X, W], sched)
    assert "float4" in kept.source and "float2" in kept.source
    assert "float4" not in moved.source and "float2" not in moved.source
    (a,), arrays = _outputs(moved, [X, W])
    (b,), _ = _outputs(kept, [X, W])
    assert np.array_equal(a, b), "a moved tile changed the numbers"
    np.testing.assert_allclose(a, pa.evaluate(Y, dict(zip([X, W], arrays))), rtol=1e-4, atol=1e-4)
