"""The build driver on devices that cannot do everything: a capability set without wide vectors, a
schedule asking for a width the device lacks, a compiler that rejects or crashes on float16, and one
that rejects everything."""

import re
import uuid
import warnings

import numpy as np
import pytest

import polyad as pa
import polyad.pipeline as pipeline
from polyad.errors import BuildError
from polyad.pipeline import probe
from polyad.runtime import builder
from polyad.schedule import Schedule, StageSchedule
from workload_shapes import TINY

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl", "private_denials")]

NO_FLOAT16 = list(TINY)


def _gradient(name):
    """(gradient tensors, inputs + head, case) of workload ``name`` at its TINY shapes."""
    from polyad.bench.workloads import WORKLOADS

    case = WORKLOADS[name].instantiate(**TINY[name])
    ph = case.placeholders()
    Y = case.forward_te(ph)
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], ph["H"]))
    return grads, [ph[i.name] for i in case.inputs] + [ph["H"]], case


def _fake_capabilities(monkeypatch, widths):
    """The device compiles only ``widths`` (as its probe would say); models are derived again."""
    def fake(device, refresh=False):
        from polyad.runtime.device import device_key

        return probe.Capabilities(device_key(device), tuple(widths), True, None,
                                  {f"float{w}": "faked: the compiler aborts" for w in probe.WIDTHS if w not in widths},
                                  "faked")

    monkeypatch.setattr(pipeline, "capabilities", fake)
    monkeypatch.setattr(pipeline, "_MODELS", {})


def _close(got, want, what=""):
    got = got if isinstance(got, list) else [got]
    want = want if isinstance(want, list) else [want]
    assert len(got) == len(want)
    for i, (a, r) in enumerate(zip(got, want)):
        a, r = np.asarray(a, dtype="float64"), np.asarray(r, dtype="float64")
        assert a.shape == r.shape, (what, i)
        scale = max(float(np.max(np.abs(r))) if r.size else 0.0, 1e-12)
        err = float(np.max(np.abs(a - r))) if r.size else 0.0
        assert err <= 1e-4 * scale, f"{what} output {i}: max error {err:.2e}, max |value| {scale:.2e}"


def _matmul(name, n=32):
    """T[i, j] = sum_k X[i, k] * W[k, j], 4 x n x 8, with a stage name of its own (no cache hits across tests)."""
    X = pa.placeholder((4, 8), name="X")
    W = pa.placeholder((8, n), name="W")
    k = pa.reduce_axis((0, 8), name="k")
    T = pa.compute((4, n), lambda i, j: pa.sum(X[i, k] * W[k, j], axis=k), name=name)
    rng = np.random.default_rng(1)
    return T, [X, W], [rng.standard_normal(t.shape).astype("float32") for t in (X, W)]


def _wide(name):
    return Schedule("wide", stages={name: StageSchedule(tile=(2, 32), vectorize=16)})


def _build_warned(T, ins, schedule):
    """(module, the RuntimeWarnings' messages) of ``pa.build(T, ins, schedule=schedule)``."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        mod = pa.build(T, ins, schedule=schedule)
    return mod, [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]


def _vector_widths(source):
    return {int(n) for n in re.findall(r"\bfloat(2|4|8|16)\b", source)}


# ---------------------------------------------------------------------------------------------
# a device whose probe passed only some widths
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("widths,name", [((1, 2, 4), n) for n in TINY] + [((1, 2, 4, 8), n) for n in NO_FLOAT16],
                         ids=[f"1-2-4-{n}" for n in TINY] + [f"1-2-4-8-{n}" for n in NO_FLOAT16])
def test_every_workload_builds_within_the_widths_the_device_compiles(monkeypatch, widths, name):
    _fake_capabilities(monkeypatch, widths)
    dev = pipeline.select_device()
    assert pipeline.device_model(dev).widths == widths
    grads, ins, case = _gradient(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "auto" never asks for a width the model lacks
        mod = pa.build(grads, ins, schedule="auto")
    banned = {8, 16} - set(widths)
    assert not _vector_widths(mod.source) & banned, (name, sorted(_vector_widths(mod.source)))
    assert not any(f"vload{w}" in mod.source or f"vstore{w}" in mod.source for w in banned)
    data = case.data(seed=3)
    arrays = [data[t.name] for t in ins]
    _close(mod(*arrays), pa.evaluate(grads, dict(zip(ins, arrays))), name)


def test_the_shapes_ask_for_wide_vectors_unrestricted():
    """The tests above restrict something: with the device's own model, the programs of these shapes use
    every wide width the model offers (up to its best width) somewhere."""
    dev = pipeline.select_device()
    model = pipeline.device_model(dev)
    used = set()
    for name in TINY:
        grads, ins, _ = _gradient(name)
        used |= _vector_widths(pipeline.generate(grads, ins, "auto", device=dev).source)
    wanted = {w for w in (8, 16) if w in model.widths and w <= model.vector_width}
    assert wanted <= used, (sorted(used), model.describe())


def test_a_schedule_asking_for_a_width_the_device_lacks_is_narrowed_with_a_warning(monkeypatch):
    _fake_capabilities(monkeypatch, (1, 2, 4, 8))
    T, ins, arrays = _matmul("T_narrowed")
    with pytest.warns(RuntimeWarning) as rec:
        mod = pa.build(T, ins, schedule=_wide("T_narrowed"))
    msgs = [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    assert "T_narrowed" in msgs[0] and "does not compile the vector widths" in msgs[0], msgs[0]
    assert "float16" not in mod.source and 8 in _vector_widths(mod.source)
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), "T_narrowed")



def test_a_default_stage_schedule_too_wide_for_the_device_is_narrowed_with_a_warning_naming_the_default(monkeypatch):
    _fake_capabilities(monkeypatch, (1, 2, 4, 8))
    T, ins, arrays = _matmul("T_default_narrowed")
    with pytest.warns(RuntimeWarning) as rec:
        mod = pa.build(T, ins, schedule=Schedule("wide", default=StageSchedule(tile=(2, 32), vectorize=16)))
    msgs = [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "(the default)" in msgs[0] and "[]" not in msgs[0], msgs
    assert "float16" not in mod.source and 8 in _vector_widths(mod.source)
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), "T_default_narrowed")

# ---------------------------------------------------------------------------------------------
# a compiler that fails on float16: the fallback chain
# ---------------------------------------------------------------------------------------------
def _failing_on_float16(monkeypatch, failure):
    real = builder.compile_isolated
    tries = []

    def fake(job):
        tries.append("float16" in job["source"])
        if "float16" in job["source"]:
            if failure == "rejects":
                raise BuildError("error: fake compiler rejects float16", source=job["source"],
                                 log="error: fake compiler rejects float16")
            if failure == "killed":  # from outside (the OOM killer, a user): not the compiler's doing
                crash = builder.CompilerCrash("the OpenCL compiler crashed its process (SIGKILL)",
                                              source=job["source"], log="")
                crash.device_fault = False
                raise crash
            raise builder.CompilerCrash(
                "the OpenCL compiler crashed its process (SIGABRT): LLVM ERROR: Do not know how to scalarize",
                source=job["source"], log="LLVM ERROR: Do not know how to scalarize")
        return real(job)

    monkeypatch.setattr(builder, "compile_isolated", fake)
    return tries


def _first_build_falls_back(monkeypatch, failure):
    """Build a float16 matmul on a compiler that fails on float16; check the fallback; (module, stage,
    graph, arrays, compile attempts, code generations)."""
    from polyad import codegen

    tries = _failing_on_float16(monkeypatch, failure)
    generated = []
    real_generate = codegen.generate
    monkeypatch.setattr(codegen, "generate", lambda *a, **k: generated.append(1) or real_generate(*a, **k))
    dev = pipeline.select_device()
    assert 16 in pipeline.device_model(dev).widths  # the real device: its probe passed float16
    stage = f"T_fallback_{failure}_{uuid.uuid4().hex[:8]}"  # cold caches, whatever ran before in this process
    T, ins, arrays = _matmul(stage)
    mod, msgs = _build_warned(T, ins, _wide(stage))
    assert len(msgs) == 1, msgs
    assert f"['{stage}']" in msgs[0] and "float16" in msgs[0], msgs[0]
    assert ("fake compiler rejects float16" if failure == "rejects" else "scalarize") in msgs[0], msgs[0]
    assert "built with float8 vectors instead" in msgs[0], msgs[0]
    assert "float16" not in mod.source and 8 in _vector_widths(mod.source)
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), stage)
    assert tries == [True, False]  # float16 once, then float8, which built
    # one program is not the device: float16 stays in its model (this program keeps float8, program cache)
    assert "for this program" in msgs[0] and pipeline.denied_widths(dev) == {}
    assert 16 in pipeline.device_model(dev).widths
    return mod, stage, T, ins, arrays, tries, generated


@pytest.mark.parametrize("failure", ["rejects", "crashes"])
def test_a_program_that_does_not_build_falls_back_to_narrower_vectors_with_one_warning(
        monkeypatch, failure, private_denials):
    _first_build_falls_back(monkeypatch, failure)
    assert private_denials.exists()  # recorded where the fixture put it, not in the machine's cache
    # a second program failing at float16 leaves it out of the device's model
    dev = pipeline.select_device()
    stage = f"T_second_{uuid.uuid4().hex[:8]}"
    T, ins, arrays = _matmul(stage)
    mod, msgs = _build_warned(T, ins, _wide(stage))
    assert len(msgs) == 1 and "remembered for the device" in msgs[0], msgs
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), stage)
    denied = pipeline.denied_widths(dev)
    assert set(denied) == {16}, denied
    assert ("fake compiler rejects float16" if failure == "rejects" else "scalarize") in denied[16], denied
    assert pipeline.device_model(dev).widths == (1, 2, 4, 8)  # the model no longer offers float16


def test_one_program_failing_twice_does_not_deny_a_width(private_denials):
    dev = pipeline.select_device()
    assert not pipeline._deny_width(dev, 16, "error: one", "program-a")
    assert not pipeline._deny_width(dev, 16, "error: one again", "program-a")
    assert pipeline.denied_widths(dev) == {} and 16 in pipeline.device_model(dev).widths
    assert pipeline._deny_width(dev, 16, "error: another", "program-b")
    assert pipeline.denied_widths(dev) == {16: "error: another"}


def test_a_compiler_killed_from_outside_is_not_remembered_as_the_device_failing(monkeypatch, private_denials):
    # an external SIGKILL of the worker during a float16 compile was once kept as the device failing float16
    tries = _failing_on_float16(monkeypatch, "killed")
    dev = pipeline.select_device()
    stage = f"T_killed_{uuid.uuid4().hex[:8]}"
    T, ins, arrays = _matmul(stage)
    mod, msgs = _build_warned(T, ins, _wide(stage))
    assert len(msgs) == 1 and "(SIGKILL)" in msgs[0] and "remembered" not in msgs[0], msgs
    assert tries == [True, False]
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), stage)
    assert pipeline.denied_widths(dev) == {}
    assert 16 in pipeline.device_model(dev).widths


def test_the_same_build_after_a_fallback_neither_retries_nor_warns(monkeypatch, private_denials):
    """pipeline's docstring: the program that built is cached "under the original key, so the next build
    neither retries nor warns"."""
    mod, stage, T, ins, arrays, tries, generated = _first_build_falls_back(monkeypatch, "rejects")
    n_generated, n_tries = len(generated), len(tries)
    mod2, again = _build_warned(T, ins, _wide(stage))
    assert len(tries) == n_tries, "the second build compiled again"
    assert mod2.source == mod.source
    _close(mod2(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), stage)
    assert again == []
    assert len(generated) == n_generated, "the second build missed the program cache and generated code again"


def test_when_nothing_builds_the_error_has_the_source_and_says_what_was_tried(monkeypatch, private_denials):
    tries = []

    def fake(job):
        tries.append(job["source"])
        raise BuildError("OpenCL build failed on fake:\nerror: fake compiler rejects everything",
                         source=job["source"], log="error: fake compiler rejects everything")

    monkeypatch.setattr(builder, "compile_isolated", fake)
    T, ins, _ = _matmul("T_nothing_builds")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with pytest.raises(pa.BuildError) as info:
            pa.build(T, ins, schedule=_wide("T_nothing_builds"))
    err = info.value
    assert "polyad also tried narrower vectors and the naive schedule" in str(err), str(err)
    assert "fake compiler rejects everything" in str(err)
    assert err.source and "__kernel" in err.source and "float16" in err.source  # the first attempt's source
    assert err.log and "fake compiler" in err.log
    # 16, 8, 4, 2, scalar, then naive: every program was tried, and none is remembered as denied
    assert len(tries) == 6 and len(set(tries)) == 6
    assert "float16" in tries[0] and not any(re.search(r"\bfloat\d+\b", t) for t in tries[-2:])
    assert pipeline.denied_widths(pipeline.select_device()) == {}
    assert not private_denials.exists()
    assert not [w for w in rec if "failed on stages" in str(w.message)]


def test_a_schedule_polyad_chose_that_codegen_refuses_builds_naive_with_a_warning(monkeypatch, private_denials):
    """The auto schedule is polyad's: a ScheduleError code generation raises on it (its legality check: an
    accumulation without a reduction once) is absorbed, naive loops and one warning; a schedule the user wrote
    gets the error."""
    from polyad.codegen import tree

    real = tree.check_legality

    def refuse(op, ists, sched):
        if any(ist.kind == "block" for ist in ists):
            raise pa.ScheduleError(f"stage {op.name!r}: the loop schedule would reorder dependent statement instances")
        return real(op, ists, sched)

    monkeypatch.setattr(tree, "check_legality", refuse)
    stage = f"T_refused_{uuid.uuid4().hex[:8]}"
    T, ins, arrays = _matmul(stage, n=2048)
    assert pa.show(T, schedule="auto").count(f"stage {stage}: tile")  # auto blocks it
    mod, msgs = _build_warned(T, ins, "auto")
    assert len(msgs) == 1 and "refused the schedule polyad chose" in msgs[0] and "naive loops" in msgs[0], msgs
    _close(mod(*arrays), pa.evaluate(T, dict(zip(ins, arrays))), stage)
    with pytest.raises(pa.ScheduleError, match="reorder dependent"):
        pa.build(T, ins, schedule=_wide(stage))
