"""The roofline column: a backward's least time on the device (polyad.bench.roofline), counted with isl."""

from types import SimpleNamespace

import pytest

import polyad as pa
from polyad.bench import runner
from polyad.bench.report import markdown
from polyad.bench.roofline import Roofline, roofline, traffic, vjp_inputs

from test_bench_harness import TINY, _api, _opts

B, N, K = 8, 6, 5


def _dense():
    X = pa.placeholder((B, K), name="X")
    W = pa.placeholder((N, K), name="W")
    k = pa.reduce_axis((0, K), name="k")
    Y = pa.compute((B, N), lambda i, j: pa.sum(X[i, k] * W[j, k], axis=k), name="Y")
    H = pa.placeholder((B, N), name="H")
    return X, W, Y, H


def test_a_dense_backward_reads_its_inputs_and_writes_its_gradients_once():
    X, W, Y, H = _dense()
    grads = pa.differentiate(Y, [X, W], H)
    flops, nbytes = traffic(grads, [X, W, H])
    # dX = H W and dW = H^T X: B*N*K multiply-adds each, two flops apiece (isl's counts)
    assert flops == 2 * (2 * B * N * K)
    # X, W and H read (Y is not: the gradient of a product does not read it), dX and dW written
    assert nbytes == 4 * (B * K + N * K + B * N) + 4 * (B * K + N * K)


def test_a_bitcast_gradient_moves_nothing():
    """flatten's gradient is H's buffer in X's shape: no kernel, no traffic (pa.build binds it, docs/simplifier.md)."""
    X = pa.placeholder((2, 3, 4), name="X")
    Y = pa.compute((2, 12), lambda i, j: X[i, j // 4, j % 4], name="Y")
    H = pa.placeholder((2, 12), name="H")
    (dX,) = pa.differentiate(Y, [X], H)
    assert traffic([dX], [X, H]) == (0, 0)
    # a gradient that does compute counts beside it: 2*x's is read and written once
    Z = pa.compute((2, 3, 4), lambda a, b, c: X[a, b, c] * 2.0, name="Z")
    G = pa.placeholder((2, 3, 4), name="G")
    (dZ,) = pa.differentiate(Z, [X], G)
    assert traffic([dX, dZ], [X, H, G]) == (24, 2 * 24 * 4)


def test_the_vjp_backward_reads_the_residuals_instead_of_recomputing_the_forward():
    """softmax's backward fed what pa.vjp's forward saves (the row max and sum) counts none of the forward's
    reductions; built from (x, H) alone it recomputes them."""
    x = pa.placeholder((4, 16), name="x")
    y = pa.nn.softmax(x)
    H = pa.placeholder(y.shape, name="H")
    grads = list(pa.differentiate(y, [x], H))
    fed = vjp_inputs(grads, H, y, [x])
    assert fed[:3] == [x, H, y] and len(fed) > 3  # the residuals follow
    vjp_flops, vjp_bytes = traffic(grads, fed)
    re_flops, re_bytes = traffic(grads, [x, H])
    assert vjp_flops < re_flops
    assert vjp_bytes > re_bytes  # the saved tensors are read (here, the forward's output y at least)


def test_the_bound_is_the_slower_of_compute_and_memory():
    model = SimpleNamespace(peak_gflops=100.0, dram_gbs=10.0)
    X, W, Y, H = _dense()
    r = roofline(pa.differentiate(Y, [X, W], H), [X, W, H], model)
    assert r.memory_s == pytest.approx(r.bytes / 10e9) and r.compute_s == pytest.approx(r.flops / 100e9)
    assert r.seconds == max(r.memory_s, r.compute_s)
    assert (r.bound == "memory") == (r.memory_s >= r.compute_s)
    assert Roofline(10**12, 10**6, 100.0, 10.0).bound == "compute"
    assert Roofline(10**12, 10**6, 100.0, 10.0).seconds == pytest.approx(10.0)
    assert "compute" in str(Roofline(10**12, 10**6, 100.0, 10.0))


def test_the_bench_reports_each_backward_over_its_roofline():
    api = _api()
    api.device_model = lambda: SimpleNamespace(peak_gflops=50.0, dram_gbs=5.0)
    (row,) = runner.run_workload("dense", TINY["dense"], _opts(torch=False), api, lambda s: None)
    roof = row["roofline_ms"]
    assert roof.ok and roof.value > 0
    assert row["bwd_over_roofline"].value == pytest.approx(row["bwd_ms"].value / roof.value)
    assert "GB/s" in row["roofline"]
    text = markdown({"machine": {}, "options": {"schedules": ["naive"], "batch": None, "repeat": 1,
                                                "time_budget": 1.0}, "rows": [row]})
    assert "bwd/roofline (vjp)" in text and f"- dense: {row['roofline']}" in text


def test_no_device_model_no_roofline():
    (row,) = runner.run_workload("dense", TINY["dense"], _opts(torch=False), _api(), lambda s: None)
    assert not row["roofline_ms"].ok and "no device model" in row["roofline_ms"].na
    assert not row["bwd_over_roofline"].ok


def test_a_starred_cells_note_is_not_headed_as_fewer_runs_than_asked():
    """Cells timed side by side with torch carry a note (how many rounds), and the heading over every note said
    "fewer runs than asked" where more were taken; a capped cell's note says the budget capped it."""
    from polyad.bench.report import Cell

    row = {"workload": "dense", "schedule": "naive",
           "bwd_ms": Cell(1.0, note="side by side with torch, 7 rounds of 5"),
           "fwd_ms": Cell(2.0, note="3 runs (time budget 30 s)")}
    text = markdown({"machine": {}, "options": {"schedules": ["naive"], "batch": None, "repeat": 5,
                                                "time_budget": 30.0}, "rows": [row]})
    assert "fewer runs than asked" not in text
    assert "how the starred cells were measured (a time budget that capped the runs says so):" in text
    assert "- dense [naive] bwd_ms: side by side with torch, 7 rounds of 5" in text
    assert "- dense [naive] fwd_ms: 3 runs (time budget 30 s)" in text
