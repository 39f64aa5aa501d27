"""The ``nontemporal_stores`` rule: on a CPU whose probe passed nontemporal stores, a stage whose outputs fill the
last-level cache has every aligned vector block in both store forms, the model ranking the nontemporal one (also
under a rule that decides the block); elsewhere the space holds no nontemporal block.  A device without them
builds such a schedule with plain stores, and says so."""

import dataclasses
from pathlib import Path

import pytest

import polyad as pa
from polyad.schedule import DeviceModel, Schedule, StageSchedule
from polyad.schedule.auto import auto_schedule
from polyad.schedule.graph import stage_ops, uniquely_named
from polyad.schedule.space import stage_space

_DEVICES = Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")
STREAMS = dataclasses.replace(ZEN5, nontemporal=True, cache_bytes=2**16)  # a 64 KiB last-level cache
GPU = DeviceModel.load(_DEVICES / "h200-calibrated.json")


def _relu(width=512):
    X = pa.placeholder((64, width), name="X")  # 64 x 512 float32: 128 KiB
    return pa.compute(X.shape, lambda i, j: pa.max(X[i, j], pa.const(0.0)), name="relu")


def _matmul():
    A = pa.placeholder((64, 32), name="A")
    B = pa.placeholder((32, 512), name="B")
    k = pa.reduce_axis((0, 32), name="k")
    return pa.compute((64, 512), lambda i, j: pa.sum(A[i, k] * B[k, j], axis=k), name="mm")


def _pool_grad():
    X = pa.placeholder((2, 4, 64, 64), name="X")  # dX: 128 KiB
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "avg")
    (dX,) = pa.differentiate(Y, [X], pa.placeholder(Y.shape, name="H"))
    return dX


def _space(t, dm):
    ops = stage_ops(uniquely_named([t]))[0]
    return stage_space(ops[-1], dm)


@pytest.mark.parametrize("make", [_relu, _matmul])
def test_the_model_ranks_the_nontemporal_form_of_every_aligned_vector_block(make):
    sp = _space(make(), STREAMS)
    forms = {c.schedule for c in sp.candidates}
    vectors = [c for c in sp.candidates if c.schedule.vectorize > 1]
    assert vectors and all(c.schedule.nontemporal_stores((64, 512)) for c in vectors if c.schedule.nontemporal)
    for c in vectors:
        other = dataclasses.replace(c.schedule, nontemporal=not c.schedule.nontemporal)
        assert other in forms, c.schedule  # both store forms are in the space (the tuner measures)
        assert not (c.ranked and not c.schedule.nontemporal), c  # the plain form is not ranked
    assert any(c.ranked for c in vectors)


def test_auto_picks_the_nontemporal_form_of_the_block_it_would_pick():
    picked = auto_schedule([_matmul()], device=STREAMS).stages["mm"]
    assert picked.vectorize > 1 and picked.nontemporal
    assert auto_schedule([_matmul()], device=ZEN5).stages["mm"] == dataclasses.replace(picked, nontemporal=False)


def test_under_a_deciding_rule_the_block_it_measured_is_ranked_in_its_nontemporal_form():
    dX = _pool_grad()
    sp = _space(dX, STREAMS)
    assert sp.decided is not None  # the rule that measured the block decides it
    (ranked,) = sp.ranked()
    assert ranked.nontemporal and dataclasses.replace(ranked, nontemporal=False) in [c.schedule for c in sp.candidates]
    assert auto_schedule([dX], device=STREAMS).stages[dX.op.name].nontemporal
    plain = _space(dX, ZEN5)
    assert plain.ranked() == [dataclasses.replace(ranked, nontemporal=False)]


@pytest.mark.parametrize("dm, why", [
    (ZEN5, "the probe did not pass them"),
    (dataclasses.replace(STREAMS, cache_bytes=2**20), "the outputs fit the cache"),
    (dataclasses.replace(STREAMS, cache_bytes=0), "the cache size is unknown"),
    (dataclasses.replace(GPU, nontemporal=True, cache_bytes=2**16), "a GPU"),
])
def test_no_nontemporal_block_where_the_rule_does_not_apply(dm, why):
    for t in (_relu(), _pool_grad()):
        assert not any(c.schedule.nontemporal for c in _space(t, dm).candidates), why


def test_only_the_widths_that_divide_the_innermost_extent_store_nontemporally():
    sp = _space(_relu(width=500), STREAMS)  # 500 = 4 x 125
    widths = {c.schedule.vectorize for c in sp.candidates if c.schedule.nontemporal}
    assert widths == {2, 4}, widths
    assert any(c.schedule.vectorize in (8, 16) for c in sp.candidates)


def test_a_device_without_nontemporal_stores_builds_them_plainly(opencl, monkeypatch, tmp_path):
    import os

    import numpy as np

    from polyad import pipeline
    from polyad.runtime.records import cache_dir

    # a cold build (a stored program would warn of nothing), the device records where they are
    monkeypatch.setenv("POLYAD_DEVICE_CACHE_DIR", os.environ.get("POLYAD_DEVICE_CACHE_DIR")
                       or os.path.join(cache_dir(), "devices"))
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))

    real = pipeline.device_model()
    monkeypatch.setattr(pipeline, "device_model", lambda device=None: dataclasses.replace(real, nontemporal=False))
    t = _relu(width=16)
    ss = StageSchedule(tile=(1, 16), vectorize=8, nontemporal=True)
    with pytest.warns(RuntimeWarning, match="no nontemporal stores.*'relu'"):
        m = pa.build([t], t.op.input_tensors, schedule=Schedule("nt", stages={"relu": ss}))
    assert "__builtin_nontemporal_store" not in m.source and "vstore8" in m.source
    x = np.linspace(-1, 1, 64 * 16, dtype=np.float32).reshape(64, 16)
    np.testing.assert_array_equal(m(x)[0], np.maximum(x, 0))


def test_the_model_charges_plain_stores_a_read_of_each_line_where_the_rule_applies():
    from polyad.schedule.cost import stage_cost, stage_features, stage_info

    info = stage_info(stage_ops(uniquely_named([_relu()]))[0][-1])
    plain = StageSchedule(tile=(1, 64), vectorize=16)
    nt = dataclasses.replace(plain, nontemporal=True)
    # a copy-like stage is memory-bound: one read, one write, and the write's line read first (2x its bytes)
    assert stage_cost(info, plain, STREAMS) > stage_cost(info, nt, STREAMS)
    assert stage_features(info, plain, STREAMS)["mem_s"] == pytest.approx(
        1.5 * stage_features(info, nt, STREAMS)["mem_s"], rel=0.05)
    for dm in (ZEN5, dataclasses.replace(STREAMS, cache_bytes=2**20)):
        assert stage_cost(info, plain, dm) == stage_cost(info, nt, dm)


def _max_pool_grad(width=16):
    X = pa.placeholder((2, 4, 16, width), name="X")  # dX at width 16: 8 KiB
    Y = pa.nn.pool2d(X, (2, 2), (2, 2), 0, "max")
    H = pa.placeholder(Y.shape, name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    return dX, X, H


def test_a_strided_gradient_that_fills_the_cache_streams_stride_cells_of_whole_rows():
    dX, _, _ = _max_pool_grad()
    small = dataclasses.replace(STREAMS, cache_bytes=2**12)  # 4 KiB: dX fills it
    sp = _space(dX, small)
    assert sp.decided == "strided_rows"
    (ranked,) = sp.ranked()
    assert ranked == StageSchedule(tile=(1, 1, 2, 16), vectorize=4, nontemporal=True)
    assert auto_schedule([dX], device=small).stages[dX.op.name] == ranked
    for dm in (ZEN5, dataclasses.replace(small, cache_bytes=2**20)):  # no nontemporal stores; dX fits the cache
        assert _space(dX, dm).decided != "strided_rows"


def test_stride_cells_of_whole_rows_compute_the_max_pool_gradient(opencl):
    import numpy as np

    dX, X, H = _max_pool_grad(width=24)
    ss = StageSchedule(tile=(1, 1, 2, 24), vectorize=4, nontemporal=True)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in (X, H)]
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")  # a device without nontemporal stores says so
        m = pa.build([dX], [X, H], schedule=Schedule("rows", stages={dX.op.name: ss}))
    assert "select(" in m.source and "? H[" not in m.source  # the lanes select, they do not branch
    np.testing.assert_array_equal(m(*arrays)[0], pa.evaluate([dX], dict(zip([X, H], arrays)))[0])
