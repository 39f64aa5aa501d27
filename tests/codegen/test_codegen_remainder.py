"""A tiled reduction's remainder in narrower vector groups.

A 1000-wide matmul in float16 blocks of 32 ends in 8 points a row.  They ran as 8 scalar reductions one after the
other, each a chain of dependent adds with a strided read each: 0.8% of dense's data gradient took as long as the
rest (0.389 ms against 0.208 for 1024 columns).  They run now as one float8 group a row, jammed like a full tile's.
"""

import islpy as isl
import numpy as np
import pytest

import polyad as pa
from polyad.codegen import generate as codegen
from polyad.pipeline import generate, select_device
from polyad.poly.stage import statements_of
from polyad.runtime.module import Module
from polyad.schedule import Schedule, StageSchedule, prepare
from polyad.tuner.generate import GeneratorPool

from codegen_polyops import strided_conv_dx, triangular_cumsum


def _matmul(rows=4, cols=40, red=12):
    X = pa.placeholder((rows, red), name="X")
    W = pa.placeholder((red, cols), name="W")
    k = pa.reduce_axis((0, red), name="k")
    return pa.compute((rows, cols), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name="Y"), [X, W]


def _sched(tile=(2, 32), vec=16, unroll=1):
    return Schedule("s", stages={"Y": StageSchedule(tile=tile, vectorize=vec, unroll=unroll)})


def _run(prog, outs, ins, seed=0):
    """``prog`` built and run on the default device, against pa.evaluate."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    got = Module(prog, select_device(None), inputs=ins)(*arrays)
    want = pa.evaluate(outs, dict(zip(ins, arrays)))
    for g, w in zip(got, want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=prog.source)


def _body(src):
    return src.split("// kernel Y")[1]


@pytest.mark.parametrize("unroll", [1, 4])
def test_a_remainder_of_eight_runs_as_one_float8_group_a_row(unroll):
    Y, ins = _matmul(cols=40)  # 40 = 32 + 8
    prog = generate([Y], ins, _sched(unroll=unroll))
    body = _body(prog.source)
    assert "float8 acc0_0_b8[" in prog.source and "vstore8(acc0_0_b8[" in body
    assert "acc0_0 = " not in body  # no scalar reduction left
    _run(prog, [Y], ins)


def test_the_remainder_takes_each_narrower_width_once_and_scalars_last():
    Y, ins = _matmul(cols=45)  # 45 = 32 + 8 + 4 + 1, in a tile wider than the row (no last tile to move back)
    prog = generate([Y], ins, _sched(tile=(2, 64)))
    body = _body(prog.source)
    assert "vstore8(acc0_0_b8[" in body and "vstore4(acc0_0_b4[" in body and "vstore2(" not in body
    assert "acc0_0 = " in body  # the last column: one scalar reduction a row
    _run(prog, [Y], ins)


def test_the_remainder_uses_only_the_widths_the_device_compiles():
    Y, ins = _matmul(cols=40)
    g, loop = prepare([Y], _sched())
    prog = codegen(g, ins, loop, widths=(1, 2, 4, 16))  # a device that fails float8
    body = _body(prog.source)
    assert "float8" not in prog.source and body.count("vstore4(acc0_0_b4[") == 4  # 2 rows, two float4 groups a row
    _run(prog, [Y], ins)
    only16 = codegen(g, ins, loop, widths=(1, 16))
    # nothing narrower: 8 scalar reductions a row, or the last tile moved back, a float16 vector of columns 24-39
    body = _body(only16.source)
    assert "acc0_0 = " not in body and "float8" not in only16.source and body.count("int const j = 24;") == 6
    _run(only16, [Y], ins)


def test_the_tuners_code_generation_workers_keep_the_devices_widths():
    Y, ins = _matmul(cols=40)
    pool = GeneratorPool([Y], ins, wide=None, workers=1, widths=(1, 2, 4, 16))
    try:
        (got,) = pool.programs([_sched()], timeout=120)
    finally:
        pool.close()
    g, loop = prepare([Y], _sched())
    assert not isinstance(got, str), got
    assert got.source == codegen(g, ins, loop, widths=(1, 2, 4, 16)).source and "float8" not in got.source


def test_a_copy_keeps_its_scalar_remainder():
    """Only reductions take the narrower groups: a remainder point of an assignment is one store, no chain."""
    A = pa.placeholder((4, 40), name="A")
    Y = pa.compute((4, 40), lambda i, j: A[i, j] * 2.0, name="Y")
    prog = generate([Y], [A], _sched())
    assert "float8" not in prog.source and "vstore16(" in prog.source
    _run(prog, [Y], [A])


def _count(s):
    return 0 if s.is_empty() else int(s.count_val().to_python())


@pytest.mark.parametrize("case", ["matmul", "triangular", "strided"])
def test_the_split_partitions_the_statement(case):
    """Full tiles, every width's groups (vector updates and ragged lanes) and the partial points: each instance
    once.  ``{ [b, l] : 0 <= l < 8 and 32b + l < 40 }``-style edges, a triangular domain, a strided
    convolution's data gradient (ragged groups)."""
    from polyad.codegen.tree import _split_tiles

    if case == "matmul":
        Y, ins = _matmul(cols=45)
        tile, vec = (2, 32), 16
    else:
        Y, ins, _ = triangular_cumsum(n=23) if case == "triangular" else strided_conv_dx(n_in=28)
        tile, vec = (16,), 8
    (st,) = [s for s in statements_of(Y.op) if s.combiner is not None][:1]
    full, (shift, shifted), groups, partial = _split_tiles(st, tile, vec, tuple(w for w in (8, 4, 2) if w < vec))
    assert shift == 0 and shifted.is_empty()  # no extent given: no tile moves
    m = len(st.vars) - st.n_out
    total = _count(full) * vec + _count(partial)
    for w, out, group, lanes in groups:
        total += _count(group) * w + _count(lanes)
        assert _count(out) and 2 <= w <= vec and vec % w == 0
    assert total == _count(st.domain)
    assert [w for w, *_ in groups] == sorted({w for w, *_ in groups}, reverse=True)
    if case == "matmul":
        assert [w for w, *_ in groups] == [8, 4]  # 45 = 32 + 8 + 4 + 1
        assert _count(partial) == 4 * 12 and m == 1  # the last column, every row and reduction point
    assert isinstance(full, isl.Set) and len(groups) >= 2  # a narrower width beside the schedule's own
    _run(generate([Y], ins, Schedule("s", stages={Y.op.name: StageSchedule(tile=tile, vectorize=vec)})), [Y], ins)


def test_pa_build_gives_codegen_the_devices_widths(monkeypatch):
    """pa.build's program is generated with its device model's widths: a model without float8 (a width its probe
    failed) gets the remainder in float4 groups, and the numbers are the same."""
    import dataclasses

    import polyad.pipeline as pipeline

    real = pipeline.device_model(None)
    if not {4, 8, 16} <= set(real.widths):  # the schedule's float16, the float8 left out, the float4 taken
        pytest.skip(f"the device's probe passed widths {real.widths}")
    narrow = dataclasses.replace(real, widths=tuple(w for w in real.widths if w != 8))
    monkeypatch.setattr(pipeline, "device_model", lambda device=None: narrow)
    Y, ins = _matmul(cols=40)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    mod = pa.build(Y, ins, schedule=_sched())
    assert "float8" not in mod.source and "vstore4(acc0_0_b4[" in mod.source
    np.testing.assert_allclose(mod(*arrays), pa.evaluate(Y, dict(zip(ins, arrays))), rtol=1e-5, atol=1e-5)


def _guards_in_loops(src):
    """``if`` lines inside a ``for`` loop's body (the printer puts each brace on its own line)."""
    scopes, pending, count = [], None, 0
    for line in (x.strip() for x in src.splitlines()):
        if line == "{":
            scopes.append(pending == "for")
            pending = None
        elif line == "}":
            if scopes:  # the body's last brace closes the kernel, opened before it
                scopes.pop()
        else:
            pending = "for" if line.startswith("for (") else None
            count += line.startswith("if (") and any(scopes)
    return count


@pytest.mark.parametrize("rows, blocked", [(7, True), (6, False)])
def test_groups_of_blocks_the_edge_does_not_cut_run_their_reduction_unguarded(rows, blocked, monkeypatch):
    """Rows of 12 in float8 blocks of 8 leave a float4 group a row; 7 rows in blocks of 3 leave an edge block of one
    row.  The other blocks' groups hold all 3 rows: their reduction loop has no guard (before, every block's group
    loop tested each row against the edge block's bound, inside the loop: a 3x3/2/1 conv2d's stage 1.7x slower).
    Where the blocks divide the rows (6), nothing is cut.  The numbers are evaluate's, and the same bit for bit
    as the guarded loop's."""
    from polyad.codegen import tree
    from polyad.te.memo import Recent

    Y, ins = _matmul(rows=rows, cols=12)
    g, loop = prepare([Y], _sched(tile=(3, 8), vec=8))
    prog = codegen(g, ins, loop)
    names = prog.tree.schedule.get_root().to_str()
    assert "Y_S0_g4[" in names and ("Y_S0_g4_e[" in names) == blocked
    monkeypatch.setattr(tree, "_whole_blocks", lambda *a: None)
    monkeypatch.setattr(tree, "_TILED", Recent(8))  # the built stage, remembered by what it is a function of
    guarded = codegen(g, ins, loop)
    if blocked:
        assert _guards_in_loops(_body(prog.source)) < _guards_in_loops(_body(guarded.source))
    else:
        assert prog.source == guarded.source
    _run(prog, [Y], ins)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    dev = select_device(None)
    np.testing.assert_array_equal(Module(prog, dev, inputs=ins)(*arrays), Module(guarded, dev, inputs=ins)(*arrays))
