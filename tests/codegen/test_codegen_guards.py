"""The printer's guards on a partial block's unrolled points: decided where the literals and the grid's bounds decide
them, else the C text of what is left (no device needed)."""

import islpy as isl

from polyad.codegen.opencl import Context, _bound_guard, ast_range


def _id(name):
    return isl.AstExpr.from_id(isl.Id(name))


def _int(v):
    return isl.AstExpr.from_val(isl.Val(v))


# -2 * (gid0 / 17) + 18: the rows left in the last block of 19 rows in blocks of 2, over 17 columns of blocks
ROWS_LEFT = _int(-2).mul(_id("gid0").pdiv_q(_int(17))).add(_int(18))


def test_ranges_over_the_grid():
    assert ast_range(ROWS_LEFT, {}, {"gid0": (0, 169)}) == (0, 18)
    assert ast_range(ROWS_LEFT, {}, {"gid0": (0, 152)}) == (2, 18)
    assert ast_range(_id("gid0").pdiv_r(_int(17)), {}, {"gid0": (20, 30)}) == (3, 13)
    assert ast_range(_id("gid0").pdiv_r(_int(17)), {}, {"gid0": (10, 30)}) == (0, 16)
    assert ast_range(_id("c0").add(_int(1)), {"c0": 4}, {}) == (5, 5)
    assert ast_range(_id("c1"), {}, {"gid0": (0, 3)}) is None  # another loop's iterator: not bounded here


def test_a_bound_that_holds_over_the_whole_grid_needs_no_guard():
    ctx = Context(wide=True)
    cond = _id("l").le(ROWS_LEFT)  # the point loop's condition, l <= -2 * (gid0 / 17) + 18
    grid = {"gid0": (0, 169)}
    assert _bound_guard(ctx, cond, {"l": 0}, grid) is True
    assert _bound_guard(ctx, cond, {"l": 1}, grid) == "(1L <= (-2L * (gid0 / 17L)) + 18L)"
    assert _bound_guard(ctx, cond, {"l": 1}, {"gid0": (0, 152)}) is True  # the grid without the last block row
    assert _bound_guard(ctx, cond, {"l": 19}, grid) is False
    both = cond.and_(_id("l").ge(_id("gid0").sub(_int(160))))
    assert _bound_guard(ctx, both, {"l": 1}, grid) == "(1L <= (-2L * (gid0 / 17L)) + 18L) && (1L >= gid0 - 160L)"
    # as a loop's initial value: l >= gid0 - 160
    assert _bound_guard(ctx, _id("gid0").sub(_int(160)), {"l": 9}, grid, lower="l") is True
    assert _bound_guard(ctx, _id("gid0").sub(_int(160)), {"l": 3}, grid, lower="l") == "(3L >= gid0 - 160L)"
