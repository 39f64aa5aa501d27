"""Nontemporal stores (``StageSchedule.nontemporal``): emitted for a stage's full vector blocks where every vector
is aligned (the width divides the innermost extent, which no phase splits), plain stores elsewhere; the values
are the same either way."""

import dataclasses
import warnings

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import device_model, generate
from polyad.schedule import Schedule, StageSchedule

NT = "__builtin_nontemporal_store"


def _pool_grad(width):
    X = pa.placeholder((2, 3, 4, width), name="X")
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "avg")
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    return dX, H


def _matmul_t(n=24):
    A = pa.placeholder((8, 20), name="A")
    B = pa.placeholder((20, n), name="B")
    k = pa.reduce_axis((0, 20), name="k")
    C = pa.compute((8, n), lambda i, j: pa.sum(A[i, k] * B[k, j], axis=k), name="C")
    return C, [A, B]


def _source(outs, ins, ss):
    return generate(outs, ins, Schedule("t", stages={outs[0].op.name: ss})).source


@pytest.mark.parametrize("width, tile, vec, emitted", [
    (16, 16, 8, True),  # every vector starts at a multiple of 8
    (24, 16, 8, True),  # 24 = 3 x 8: the ragged block's vectors stay aligned too
    (20, 8, 4, True),
    (20, 16, 8, False),  # 20 is no multiple of 8: a row's second vector would start misaligned
    (16, 16, 1, False),  # scalar stores: never nontemporal (measured 1.9x slower than plain vectors)
])
def test_nontemporal_stores_are_emitted_only_for_aligned_vectors(width, tile, vec, emitted):
    dX, H = _pool_grad(width)
    ss = StageSchedule(tile=(1, 1, 1, tile), vectorize=vec, nontemporal=True)
    assert ss.nontemporal_stores(dX.shape) is emitted
    src = _source([dX], [H], ss)
    assert (NT in src) is emitted
    plain = _source([dX], [H], dataclasses.replace(ss, nontemporal=False))
    assert NT not in plain
    if emitted:  # the same kernel but for its full vector blocks' stores
        assert src.count(NT) == plain.count(f"vstore{vec}(") - src.count(f"vstore{vec}(")


def test_a_phased_innermost_dimension_stores_plainly():
    dX, H = _pool_grad(16)
    ss = StageSchedule(tile=(1, 1, 1, 8), vectorize=4, phase=(1, 1, 1, 2), nontemporal=True)
    assert not ss.nontemporal_stores(dX.shape)
    assert NT not in _source([dX], [H], ss)
    rows = StageSchedule(tile=(1, 1, 1, 8), vectorize=4, phase=(1, 1, 2, 1), nontemporal=True)
    assert rows.nontemporal_stores(dX.shape) and NT in _source([dX], [H], rows)


def test_the_kernel_memo_keys_the_store_form():
    """A kernel generated plain and then nontemporal from the same graph is two kernels (codegen's memo reads
    the flag), and back."""
    C, ins = _matmul_t()
    ss = StageSchedule(tile=(4, 8), vectorize=8)
    first = _source([C], ins, ss)
    nt = _source([C], ins, dataclasses.replace(ss, nontemporal=True))
    assert NT not in first and NT in nt
    assert _source([C], ins, ss) == first


@pytest.mark.parametrize("case", ["pool_gradient", "reduction_final", "ragged_rows"])
def test_nontemporal_builds_compute_what_plain_stores_do(opencl, case):
    rng = np.random.default_rng(0)
    if case == "reduction_final":  # the accumulators' final stores
        C, ins = _matmul_t()
        outs, ss = [C], StageSchedule(tile=(4, 8), vectorize=8, unroll=2, nontemporal=True)
    else:
        dX, H = _pool_grad(24)
        outs, ins = [dX], [H]
        ss = StageSchedule(tile=(1, 2, 1, 16 if case == "ragged_rows" else 8), vectorize=8, nontemporal=True)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in ins]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a device without them says so (tests/schedule)
        m = pa.build(outs, ins, schedule=Schedule("t", stages={outs[0].op.name: ss}))
    # the device's probe decides: a GPU (no nontemporal family) or a CPU whose compiler lacks them stores plainly
    assert (NT in m.source) == device_model().nontemporal
    np.testing.assert_allclose(m(*arrays)[0], pa.evaluate(outs, dict(zip(ins, arrays)))[0], rtol=1e-5, atol=1e-5)


def test_the_field_round_trips_and_is_checked():
    ss = StageSchedule(tile=(1, 8), vectorize=8, nontemporal=True)
    assert ss.to_dict()["nontemporal"] is True
    assert StageSchedule.from_dict(ss.to_dict()) == ss
    assert "nontemporal" not in StageSchedule(tile=(1, 8), vectorize=8).to_dict()  # old JSON reads the same
    assert "nontemporal stores" in ss.describe()
    with pytest.raises(pa.ScheduleError, match="nontemporal must be True or False"):
        StageSchedule(nontemporal="yes")
