"""The generated OpenCL C and the schedule tree, checked without compiling anything."""

import re

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import generate
from polyad.poly.stage import PolyOp, Statement
from polyad.schedule import Schedule, StageSchedule

from codegen_polyops import band_fill_accumulate, ivar, strided_conv_dx, triangular_cumsum


def _kernel(src, name):
    m = re.search(r"__kernel void " + name + r"\(.*?\n}\n", src, re.S)
    assert m, f"no kernel {name} in\n{src}"
    return m.group(0)


def test_matmul_loops_and_ndrange():
    X = pa.placeholder((8, 5), name="X")
    W = pa.placeholder((3, 5), name="W")
    k = pa.reduce_axis((0, 5), name="k")
    T = pa.compute((8, 3), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="T")
    prog = generate(T, [X, W])
    (kern,) = prog.kernels
    assert kern.global_size == (3, 8)  # innermost output dim is get_global_id(0)
    assert [t.name for t in kern.args] == ["X", "W", "T"]
    src = prog.source
    assert "get_global_id(0)" in src and "get_global_id(1)" in src
    # the reduction is one sequential loop with exact constant bounds, accumulating a*b + c in one expression
    # (FP_CONTRACT fuses it into an FMA; through a temporary it may not)
    assert re.search(r"for \(int c\d+ = 0; c\d+ <= 4; c\d+ \+= 1\)", src)
    assert "acc0_0 = acc0_0 + (X[i * 5 + k] * W[j * 5 + k])" in src and "y0" not in src
    assert "fma(" not in src and "?" not in src
    assert not prog.wide_index and "long" not in src


def test_schedule_tree_has_kernel_grid_and_parallel_band():
    T, ins, _ = band_fill_accumulate()
    prog = generate(T, ins)
    tree = prog.tree.schedule.get_root().to_str()
    assert 'mark: "kernel T"' in tree and 'mark: "grid"' in tree
    assert "coincident: [ 1, 1 ]" in tree
    # the stage's statements run in order, each reduction as init / update / final
    order = [tree.index(f'filter: "{{ T_{s}[') for s in ("Z", "A", "R_init", "R", "R_final")]
    assert order == sorted(order)


def test_triangular_domain_gives_exact_bounds_not_guards():
    T, ins, _ = triangular_cumsum(6)
    src = generate(T, ins).source
    # k runs exactly over [0, i]: the bound comes from the domain, no select, no if
    assert re.search(r"for \(int c\d+ = 0; c\d+ <= gid0; c\d+ \+= 1\)", src), src
    assert "?" not in src and "if (" not in src


def test_strided_domain_gives_floor_division_bounds():
    dX, ins, _ = strided_conv_dx()
    src = generate(dX, ins).source
    loop = re.search(r"for \(int (c\d+) = (.*?); (.*?); ", src)
    assert loop, src
    # o ranges over max(0, ceil((x - 3) / 3)) .. min(4, floor((x + 1) / 3)): isl's exact bounds
    assert "pa_floordiv_i32" in loop.group(2) or "/" in loop.group(2) or "max(" in loop.group(2)
    assert "gid0" in loop.group(2) and "gid0" in loop.group(3)
    assert "?" not in _kernel(src, "dX")


def test_zero_fill_and_accumulate_are_separate_guarded_statements():
    T, ins, _ = band_fill_accumulate()
    src = _kernel(generate(T, ins).source, "T")
    assert "T[i * 7 + j] = 0.0f" in src
    # the accumulating reduction starts from the value T already holds
    assert re.search(r"acc2_0 = T\[i \* 7 \+ j\]", src)
    assert src.index("T[i * 7 + j] = B[") < src.index("acc2_0 = T[")
    # the regions are told apart by conditions on the work-item, not selects in the values
    assert re.search(r"if \(.*gid1.*gid0.*\)|if \(.*gid0.*gid1.*\)", src)
    assert "?" not in src


def test_wide_index_for_buffers_over_2_31_elements():
    n = 2**31 + 7
    X = pa.placeholder((n,), name="X")
    Y = pa.compute((n,), lambda i: X[i] * 2.0, name="Y")
    prog = generate(Y, [X])
    assert prog.wide_index
    assert "long const gid0 = (long)get_global_id(0)" in prog.source
    assert prog.kernels[0].global_size == (n,)
    small = generate(pa.compute((4,), lambda i: X[i] * 2.0, name="Z"), [X])
    assert small.wide_index  # X itself is huge: its flat indices need 64 bits
    P = pa.placeholder((4,), name="P")
    assert not generate(pa.compute((4,), lambda i: P[i] * 2.0, name="Q"), [P]).wide_index


def test_large_2d_extent_multiplies_in_64_bit():
    X = pa.placeholder((70000, 40000), name="X")
    Y = pa.compute((70000, 40000), lambda i, j: X[i, j] + 1.0, name="Y")
    src = generate(Y, [X]).source
    assert "X[i * 40000L + j]" in src and "long const i = gid0" in src


def test_floor_semantics_helpers():
    A = pa.placeholder((6,), dtype="int32", name="A")
    F = pa.placeholder((6,), name="F")
    Q = pa.compute((6,), lambda i: A[i] // A[5 - i] + A[i] % -4, name="Q")
    R = pa.compute((6,), lambda i: pa.floordiv(F[i], 2.0) + pa.floormod(F[i], 3.0), name="R")
    src = generate([Q, R], [A, F]).source
    assert "static inline int pa_floordiv_i32(int a, int b)" in src
    assert "static inline int pa_floormod_i32(int a, int b)" in src
    assert re.search(r"pa_floordiv_i32\((A\[i\]|t0), ", src)
    assert re.search(r"pa_floordiv_f32\((F\[i\]|t0), 2.0f\)", src)  # Python's float //, from fmod
    assert "static inline float pa_floormod_f32(float a, float b)" in src
    assert "% " not in _kernel(src, "Q")  # C's truncating % never reaches user arithmetic
    # positive constant divisors need no helper: shift/mask for powers of two, corrected truncation else
    P = pa.compute((6,), lambda i: A[i] // 3 + A[i] % 4 + A[i] // 8, name="P")
    p_src = _kernel(generate([P], [A]).source, "P")
    assert "pa_floor" not in p_src and "& 3" in p_src and ">> 3" in p_src and "/ 3" in p_src


def test_high_rank_outputs_fuse_into_three_grid_dims():
    X = pa.placeholder((2, 3, 4, 5, 6), name="X")
    Y = pa.compute(X.shape, lambda a, b, c, d, e: X[a, b, c, d, e] + 1.0, name="Y")
    prog = generate(Y, [X])
    assert prog.kernels[0].global_size == (6, 5, 2 * 3 * 4)
    one = generate(Y, [X], Schedule("g1", default=StageSchedule(grid_dims=1)))
    assert one.kernels[0].global_size == (720,)


def test_shared_subexpressions_are_emitted_once_and_guarded_reads_are_clamped():
    X = pa.placeholder((5,), name="X")
    e = pa.exp(X[0]) * 3.0

    def body(i):
        guarded = X[i - 1] * X[i - 1]  # out of bounds at i = 0: read clamped, the select drops it there
        return pa.select(i > 0, guarded, e) + e * e

    Y = pa.compute((5,), body, name="Y")
    src = _kernel(generate(Y, [X]).source, "Y")
    assert src.count("exp(") == 1
    assert re.search(r"const float t\d+ = exp\(X\[0\]\)", src)
    assert re.search(r"const float t\d+ = X\[min\(max\(i - 1, 0\), 4\)\]", src)  # read once, in bounds
    assert "select(" in src and "?" not in src  # both arms are safe to evaluate: no branch
    x = np.array([0.5, -1.0, 2.0, 3.0, -0.25], np.float32)
    np.testing.assert_allclose(pa.build(Y, [X])(x), pa.evaluate(Y, {X: x}), rtol=1e-6)


def test_both_arms_of_a_select_are_evaluated_where_nothing_can_fault():
    X = pa.placeholder((5,), name="X", dtype="int32")
    # a floor division by a read: its helper gives 0 for the zero divisor, in the arm the select drops
    Y = pa.compute((5,), lambda i: pa.select(X[i] != 0, pa.floordiv(7, X[i]), 0), name="Y")
    src = _kernel(generate(Y, [X]).source, "Y")
    assert "select(" in src and "?" not in src, src
    x = np.array([0, 2, -3, 0, 5], np.int32)
    np.testing.assert_array_equal(pa.build(Y, [X])(x), pa.evaluate(Y, {X: x}))


def test_names_that_clash_with_c_or_generated_names_are_renamed():
    X = pa.placeholder((3,), name="float")
    Y = pa.compute((3,), lambda c0: X[c0] + 1.0, name="c0")
    src = generate(Y, [X]).source
    assert "float const *restrict float_" in src
    assert "__kernel void c0_(" in src or "__kernel void c0_" in src
    assert re.search(r"const c0_\w* = gid0", src) or "int const c0_ = gid0" in src


def test_scalar_output_is_one_work_item():
    X = pa.placeholder((4,), name="X")
    k = pa.reduce_axis((0, 4), name="k")
    S = pa.compute((), lambda: pa.sum(X[k], axis=k), name="S")
    prog = generate(S, [X])
    assert prog.kernels[0].global_size == (1,)
    assert "S[0] = acc0_0" in prog.source


def test_statement_domain_must_match_rank():
    X = pa.placeholder((4,), name="X")
    i = ivar("i", 4)
    st = Statement("S0", (i,), 1, isl.Set("{ S0[i] : 0 <= i < 4 }"), (X[i],))
    bad = PolyOp("P", (4, 1), ("float32",), (st,)).output(0)
    with pytest.raises(ValueError, match="rank-2"):
        generate(bad, [X])


def test_build_io_errors_name_the_tensor():
    X = pa.placeholder((4,), name="X")
    W = pa.placeholder((4,), name="W")
    Y = pa.compute((4,), lambda i: X[i] + W[i], name="Y")
    with pytest.raises(pa.PolyadError, match="'W'"):
        generate(Y, [X])
    with pytest.raises(pa.FeedError, match="'Y' is both an output"):
        generate(Y, [X, W, Y])
    with pytest.raises(pa.ScheduleError, match="'fancy'"):
        generate(Y, [X, W], schedule="fancy")


def test_a_speculated_read_isl_proves_in_bounds_is_not_clamped():
    """Max-pool's gradient reads the argmax and the pooled gradient at { [b, c, y, x] -> [b, c, floor(y/2),
    floor(x/2)] }, inside both tensors wherever the output is: the match selects among plain reads."""
    X = pa.placeholder((2, 3, 8, 8), name="X")
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "max")
    H = pa.placeholder(Y.shape, name="H")
    (g,) = pa.differentiate(Y, [X], H)
    src = generate(g, [X, H]).source
    body = src[src.rindex("__kernel"):]
    assert "select(" in body and "min(max(" not in body, body
    rng = np.random.default_rng(0)
    feeds = {X: rng.standard_normal(X.shape).astype(np.float32), H: rng.standard_normal(H.shape).astype(np.float32)}
    np.testing.assert_array_equal(pa.build(g, [X, H])(feeds[X], feeds[H]), pa.evaluate(g, feeds))


def test_kernel_source_cuts_a_program_down_to_one_kernel_with_its_helpers():
    """The tuner compiles each kernel apart: the pragmas and helpers, then that kernel and no other."""
    from polyad.codegen.opencl import kernel_source

    X = pa.placeholder((6,), dtype="int32", name="X")
    A = pa.compute((6,), lambda i: X[i] // X[5 - i], name="A")  # a floor division by a read: a helper
    B = pa.compute((6,), lambda i: A[i] * 2, name="B")
    prog = generate([A, B], [X])
    src = prog.source
    a, b = prog.kernel_source("A"), prog.kernel_source("B")
    head = src[:src.index("__kernel")]
    assert "pa_floordiv_i32" in head
    assert a.startswith(head) and b.startswith(head)
    assert _kernel(src, "A") in a and "__kernel void B(" not in a
    assert _kernel(src, "B") in b and "__kernel void A(" not in b
    assert a.count("__kernel") == b.count("__kernel") == 1
    assert kernel_source(src, "C") is None and kernel_source("// no kernels\n", "A") is None
