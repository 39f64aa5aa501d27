"""Never a silently wrong number (issue 14): each reproduction of a bad input, a damaged cache entry or
a device limit that once gave garbage or a raw pyopencl error, now right or a clear PolyadError."""

import glob
import json
import os
import types
import warnings

import numpy as np
import pytest

import polyad as pa
from polyad.pipeline import programs
from polyad.runtime import cache, records
from polyad.runtime.module import check_device_limits

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def _double(name="Y", n=3):
    X = pa.placeholder((n,), name="X")
    return pa.compute((n,), lambda i: X[i] * 2.0, name=name), X


# ---------------------------------------------------------------------------------------------
# input arrays: normalised or rejected in one place (te.tensor.array_for)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i4", "<f4"])
def test_a_byte_swapped_array_gives_the_right_numbers(dtype):
    native = np.dtype(dtype).newbyteorder("=")
    X = pa.placeholder((3,), native.name, name="X")
    Y = pa.compute((3,), lambda i: X[i] * 2, name="Y2")
    x = np.array([1, 2, 3], dtype)
    want = np.array([2, 4, 6], native)
    np.testing.assert_array_equal(pa.build(Y, [X])(x), want)  # was [9.2e-41 1.8e-43 4.6e-41]
    np.testing.assert_array_equal(pa.evaluate(Y, {X: x}), want)


def test_a_ragged_list_is_a_shape_error_naming_the_tensor():
    Y, X = _double()
    mod = pa.build(Y, [X])
    for run in (lambda a: mod(a), lambda a: pa.evaluate(Y, {X: a})):
        with pytest.raises(pa.PolyadError, match=r"input tensor 'X' has shape \(3,\).*not a rectangular array"):
            run([[1.0, 2.0], [3.0]])


# ---------------------------------------------------------------------------------------------
# the program cache: every entry checksummed over its whole content
# ---------------------------------------------------------------------------------------------
def _program_entry(tmp_path):
    files = glob.glob(str(tmp_path / "programs" / "*" / "*.json"))
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("damage", ["constant", "launch size"])
def test_an_edited_cached_program_is_regenerated_not_run(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    Y, X = _double("Y_edited", n=16)
    x = np.arange(16, dtype="float32")
    programs.clear_memory()  # the other parametrisation built the same graph in this process
    pa.build(Y, [X], schedule="naive")
    path = _program_entry(tmp_path)
    text = open(path).read()
    if damage == "constant":
        assert "2.0f" in text
        text = text.replace("2.0f", "3.0f")
    else:
        doc = json.loads(text)
        doc["payload"]["kernels"][0]["global"] = [4]  # a quarter of the outputs
        text = json.dumps(doc)
    open(path, "w").write(text)
    programs.clear_memory()
    with pytest.warns(RuntimeWarning, match="checksum mismatch"):
        mod = pa.build(Y, [X], schedule="naive")
    np.testing.assert_array_equal(mod(x), 2 * x)
    programs.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # rewritten: the next build trusts it again
        np.testing.assert_array_equal(pa.build(Y, [X], schedule="naive")(x), 2 * x)


def test_a_cached_source_that_no_longer_compiles_is_regenerated(tmp_path, monkeypatch):
    """A record with a valid checksum whose source does not compile (written by an older driver, say)."""
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    Y, X = _double("Y_stale", n=8)
    x = np.arange(8, dtype="float32")
    programs.clear_memory()
    pa.build(Y, [X], schedule="naive")
    path = _program_entry(tmp_path)
    payload = records.read(path)
    payload["source"] = payload["source"].replace("2.0f", "undeclared_thing")
    records.write(path, payload)
    programs.clear_memory()
    cache.clear_memory()
    with pytest.warns(RuntimeWarning, match="no longer builds"):
        mod = pa.build(Y, [X], schedule="naive")
    np.testing.assert_array_equal(mod(x), 2 * x)
    programs.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # regenerated once, not at every build
        np.testing.assert_array_equal(pa.build(Y, [X], schedule="naive")(x), 2 * x)


# ---------------------------------------------------------------------------------------------
# device limits: checked when the module is built
# ---------------------------------------------------------------------------------------------
def test_an_output_over_the_largest_allocation_is_a_device_limit_error_at_build_time():
    from polyad.pipeline import select_device

    dev = select_device()
    n = int(dev.max_mem_alloc_size) // 4 + 1024
    X = pa.placeholder((2,), name="X")
    Y = pa.compute((n,), lambda i: X[0] * 2.0, name="Huge")
    with pytest.raises(pa.DeviceLimitError, match=r"tensor 'Huge' .* CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        pa.build(Y, [X], schedule="naive")  # was INVALID_BUFFER_SIZE from pyopencl at the first call


def test_a_work_group_over_the_device_is_a_device_limit_error_naming_the_kernel():
    from polyad.pipeline import select_device

    dev = select_device()
    too_many = int(dev.max_work_group_size) * 2
    Y, X = _double("Y_wg", n=too_many)
    sched = pa.Schedule("too-wide", stages={"Y_wg": pa.StageSchedule(local_size=(too_many,))})
    with pytest.raises(pa.DeviceLimitError, match=r"kernel 'Y_wg' has work-groups of \[\d+\] work-items"):
        pa.build(Y, [X], schedule=sched)  # was INVALID_WORK_GROUP_SIZE (or a silent fallback)


def _fake_device(**kw):
    d = dict(name="fake device ", max_mem_alloc_size=1 << 20, global_mem_size=1 << 22,
             max_work_group_size=256, max_work_item_sizes=[256, 16, 4])
    d.update(kw)
    return types.SimpleNamespace(**d)


def _launch(name, lsize):
    return (types.SimpleNamespace(name=name), (64,), lsize)


@pytest.mark.parametrize("tensors,plan,match", [
    ([pa.placeholder((1 << 19,), name="A")], [], r"tensor 'A' float32\[524288\] needs 2097152 bytes"),
    ([pa.placeholder((1 << 18,), name=f"B{i}") for i in range(5)], [], r"need 5242880 bytes together"),
    ([], [_launch("k3d", (1, 1, 8))], r"kernel 'k3d' .* per dimension \(\[256, 16, 4\]"),
    ([], [_launch("k2d", (32, 16))], r"kernel 'k2d' has work-groups of 512 work-items, over the 256"),
    ([], [_launch("k4d", (1, 1, 1, 1))], r"kernel 'k4d'"),
], ids=["alloc", "total", "item-size", "group-size", "dimensions"])
def test_the_limits_of_a_faked_device(tensors, plan, match):
    with pytest.raises(pa.DeviceLimitError, match=match):
        check_device_limits(_fake_device(), tensors, plan)


def test_within_the_limits_of_a_faked_device_nothing_is_raised():
    check_device_limits(_fake_device(), [pa.placeholder((1 << 10,), name="A")],
                        [_launch("ok", (16, 16)), _launch("auto", None)])


# ---------------------------------------------------------------------------------------------
# smaller ones
# ---------------------------------------------------------------------------------------------
def test_names_that_are_opencl_words_types_builtins_or_macros_build():
    """Each name was a C identifier as given: ``int`` and ``exp2`` failed to build (a kernel named
    ``exp2`` was dropped by the compiler)."""
    names = ["int", "exp2", "float4", "convert_float", "M_PI", "__x", "kernel", "printf", "half_exp", "uint8"]
    X = pa.placeholder((4,), name=names[0])
    T = X
    for nm in names[1:]:
        T = pa.compute((4,), lambda i, T=T: pa.exp(T[i]) * 0.5, name=nm)
    x = np.linspace(-1, 1, 4).astype("float32")
    want = pa.evaluate(T, {X: x})
    for schedule in ("naive", "auto"):
        np.testing.assert_allclose(pa.build(T, [X], schedule=schedule)(x), want, rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(repeat=0), dict(repeat=-1), dict(repeat=2.5), dict(warmup=-1)])
def test_time_and_profile_reject_a_count_that_measures_nothing(kw):
    Y, X = _double()
    mod = pa.build(Y, [X])
    x = np.ones(3, "float32")
    name = next(iter(kw))
    for call in (mod.time, mod.profile):
        with pytest.raises(pa.PolyadError, match=f"{name} must be an integer >= "):
            call(x, **kw)  # time(repeat=0) returned an empty array
    assert len(mod.time(x, repeat=2)) == 2


def test_cross_entropy_with_a_label_out_of_range_is_nan_not_a_finite_loss():
    L = pa.placeholder((4, 5), name="L")
    y = pa.placeholder((4,), "int32", name="y")
    loss = pa.nn.cross_entropy(L, y)
    dL, = pa.differentiate(loss, [L])
    logits = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    mod = pa.build([loss, dL], [L, y])
    good = np.array([0, 1, 2, 4], "int32")
    for labels, bad_row in ((good, None), (np.array([0, 5, 2, 4], "int32"), 1), (np.array([0, 1, -1, 4], "int32"), 2)):
        ref = pa.evaluate([loss, dL], {L: logits, y: labels})
        got = mod(logits, labels)
        for l_, g_ in (ref, got):
            if bad_row is None:
                assert np.isfinite(l_) and np.isfinite(g_).all()
            else:  # the loss is undefined: NaN, and so is the gradient of that row only
                assert np.isnan(l_)
                assert np.isnan(g_[bad_row]).all() and np.isfinite(np.delete(g_, bad_row, axis=0)).all()
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
    unchecked = pa.nn.cross_entropy(L, y, check_labels=False)  # the old meaning, on request
    assert np.isfinite(pa.evaluate(unchecked, {L: logits, y: np.array([0, 5, 2, 4], "int32")}))


def test_a_long_stage_name_makes_a_short_kernel_name_and_builds():
    """PoCL's linker failed a kernel named by a stage name of 250 characters (a BuildError for the whole build).
    Names past ``MAX_NAME`` keep their start and a checksum of the whole, so two long names that share a start
    stay apart."""
    from polyad.poly.stage import MAX_NAME

    X = pa.placeholder((3, 5), name="X")
    Y = pa.compute((3, 5), lambda i, j: X[i, j] * 2, name="y" * 260)
    Z = pa.compute((3, 5), lambda i, j: Y[i, j] + 1, name="y" * 261)
    m = pa.build([Y, Z], [X])
    names = [k.name for k in m.program.kernels]
    assert len(set(names)) == 2 and all(len(n) <= MAX_NAME for n in names), names
    x = np.arange(15, dtype="float32").reshape(3, 5)
    y, z = m(x)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, 2 * x + 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("what", ["call", "build"])
def test_opencl_in_a_child_forked_after_the_parent_opened_it_is_a_device_error_not_a_hang(what):
    # the driver's state is copied without its threads: a run, a read back or a build waited forever there
    import signal

    X = pa.placeholder((8,), name="X")
    mod = pa.build(pa.compute((8,), lambda i: X[i] * 2.0, name="Y"), [X])
    x = np.arange(8, dtype="float32")
    pid = os.fork()
    if pid == 0:  # the child: its exit status says what happened
        code = 5
        try:
            signal.alarm(30)  # a hang dies of SIGALRM
            if what == "call":
                mod(x)
            else:
                pa.build(pa.compute((8,), lambda i: X[i] * 3.0, name="Z"), [X])
        except pa.DeviceError as e:
            code = 3 if "does not survive a fork" in str(e) else 4
        except BaseException:  # noqa: BLE001 - reported through the status
            code = 6
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
    np.testing.assert_array_equal(mod(x), 2 * x)  # the parent goes on


def test_a_module_is_not_pickled_or_copied_but_says_why():
    import copy
    import pickle

    X = pa.placeholder((4,), name="X")
    mod = pa.build(pa.compute((4,), lambda i: X[i] + 1.0, name="Y"), [X])
    for how in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(pa.PolyadError, match="cannot be pickled or copied: send the graph"):
            how(mod)
