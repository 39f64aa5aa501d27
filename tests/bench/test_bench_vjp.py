"""The benchmark's two polyad backwards on OpenCL, at the workloads' tiny shapes: pa.vjp's (fed what its
forward saved on the device) and the one that recomputes the forward give pa.evaluate's gradients, and
a training step moves every parameter by -lr times its gradient, with either."""

from types import SimpleNamespace

import numpy as np
import pytest

import polyad as pa
from polyad.bench import runner
from polyad.bench.workloads import WORKLOADS
from polyad.te.tensor import placeholders
from bench_fakes import tiny_shapes

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


def _close(got, want, what, rtol=2e-4):
    got, want = np.asarray(got, "float64"), np.asarray(want, "float64")
    assert got.shape == want.shape, what
    assert float(np.abs(got - want).max()) <= rtol * max(float(np.abs(want).max()), 1e-6), what


def _columns(name):
    """The workload at its tiny shape, its graphs, its two backwards (schedule auto) and pa.evaluate's gradients."""
    case = WORKLOADS[name].instantiate(**tiny_shapes()[name])
    arrays = case.data(seed=5)
    ph = case.placeholders()
    Y = case.forward_te(ph)
    ins, wrt = placeholders([Y]), [ph[n] for n in case.wrt]
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name="H")
    grads = list(pa.differentiate(Y, wrt, H))
    api = runner._polyad_api("opencl")
    vjp = runner.VJPColumns(lambda: api.vjp(Y, ins, wrt, schedule="auto"), arrays)
    recompute = runner.PolyadColumns(api, grads, ins + [H], arrays, "auto")
    want = pa.evaluate(grads, {**{p: arrays[p.name] for p in ins}, H: arrays["H"]})
    return SimpleNamespace(case=case, api=api, arrays=arrays, Y=Y, ins=ins, wrt=wrt, vjp=vjp, recompute=recompute,
                           want=want)


@pytest.mark.parametrize("name", ["softmax", "mlp_step"])
def test_the_vjp_and_the_recomputing_backward_give_the_same_gradients(name):
    w = _columns(name)
    vjp, recompute = w.vjp, w.recompute
    assert vjp.saved_names() != "none"  # the vjp backward is fed what its forward saved ...
    saved = {t.name for t in vjp.res.tensors}
    assert not saved & {k.name for k in vjp.bwd.module.program.kernels}  # ... and computes none of it again
    for t, a, b, ref in zip(w.case.wrt, vjp.results(), recompute.results(), w.want):
        _close(a, ref, f"{name}: d{t} (vjp)")
        _close(b, ref, f"{name}: d{t} (recompute)")
        _close(a, b, f"{name}: d{t} (vjp against recompute)")
    assert vjp.time(2, 30.0).value > 0 and recompute.time(2, 30.0).value > 0


def test_a_training_step_moves_each_parameter_by_minus_lr_times_its_gradient():
    w = _columns("mlp_step")
    api, arrays, ins, wrt, want = w.api, w.arrays, w.ins, w.wrt, w.want
    forward = runner.PolyadColumns(api, [w.Y], ins, arrays, "auto")
    update = runner.sgd_update(api, wrt, "auto")
    for passes in (runner.vjp_passes(w.vjp.fwd, w.vjp.bwd),
                   runner.recompute_passes(forward.module, w.recompute.module)):
        step = runner.TrainingStep(passes, update, ins, wrt, arrays)
        step.step()
        for p, new, g in zip(wrt, step.parameters(), want):
            _close(new - arrays[p.name], -runner.SGD_LR * g, f"step of {p.name}", rtol=1e-3)
        step.step()  # the second step reads the first one's parameters (the two sets of buffers swapped)
        assert not np.allclose(step.parameters()[0], arrays[wrt[0].name] - runner.SGD_LR * want[0])
    pytest.importorskip("torch")
    run, params = runner.torch_step(w.case, arrays)
    run()
    for p, t, g in zip(wrt, params, want):
        _close(t.detach().numpy() - arrays[p.name], -runner.SGD_LR * g, f"torch step of {p.name}", rtol=1e-3)


def test_the_tuned_schedule_tunes_the_vjp_backward_and_applies_its_log(tmp_path, recwarn):
    """--schedule tuned --tune-budget: pa.tune on the workload's vjp backward, logged under OUT/tuning, then the
    row's builds take pa.tuned(log); the log's records are of the graph the vjp column builds (no fallback)."""
    case = WORKLOADS["softmax"].instantiate(**tiny_shapes()["softmax"])
    opts = SimpleNamespace(schedules=["auto", "tuned"], tune_budget=1.0, tuning_log=None, out=tmp_path, seed=0,
                           repeat=2, time_budget=10.0, workload_budget=None, backward=["vjp"], torch=False, batch=None)
    rows = runner.run_workload("softmax", case, opts, runner._polyad_api("opencl"), lambda s: None)
    row = rows[1]
    assert row["schedule"] == "tuned" and row["bwd_ms"].ok and row["err"].value < 1e-3
    # tuned against auto, timed run by run after both rows (the auto row has no such cell)
    assert row["tuned_vs_auto"].ok and 0 < row["tuned_vs_auto"].value < 5 and "run-by-run" in row["tuned_vs_auto"].note
    assert "tuned_vs_auto" not in rows[0]
    assert row["tune_s"].value > 0 and row["tune_trials"].value >= 1 and row["tune_speedup"].value >= 1.0
    assert (tmp_path / "tuning" / "softmax.jsonl").exists()
    # the log holds the graph pa.vjp's backward builds (pa.vjp's split, as polyad.pipeline.vjp makes it)
    from polyad.pipeline import resolve_schedule

    ph = case.placeholders()
    Y = case.forward_te(ph)
    H = pa.placeholder(Y.shape, dtype=Y.dtype, name="dY")
    grads = list(pa.differentiate(Y, [ph[n] for n in case.wrt], H))
    order = [Y] + [r for r in pa.residuals(grads, [H], save="reductions") if r is not Y]
    got = resolve_schedule(grads, pa.tuned(tmp_path / "tuning" / "softmax.jsonl"), inputs=placeholders([Y]) + [H] + order)
    assert got.name == "tuned" and "tuning log" in got.notes[0]
    with pytest.raises(ValueError, match="--tune-budget"):
        runner.tuned_spec("softmax", case, SimpleNamespace(tune_budget=None, tuning_log=None), print)
