"""A module's kernels on an out-of-order queue: each waits for the kernels it has a hazard with, no more, and
the results are those of running them in order."""

from types import SimpleNamespace

import numpy as np
import pytest

import polyad as pa
from polyad.runtime.device import _unordered_queue
from polyad.runtime.module import kernel_order


def _kernels(*specs):
    """Fake launches: (tensors read and written, tensors written) per kernel, tensors named by strings."""
    return [SimpleNamespace(args=tuple(args), written=lambda w=tuple(w): w) for args, w in specs]


def _bufs(names, same=()):
    """id(name) -> a fake buffer; the names in ``same`` share one."""
    handles = {n: i for i, n in enumerate(names)}
    for n in same:
        handles[n] = handles[same[0]]
    return {id(n): SimpleNamespace(int_ptr=handles[n]) for n in names}


def test_kernel_order_waits_for_hazards_only():
    # two pads, a data gradient reading the first, a weight gradient reading both, its final sum
    H, X, W, Hp, Xp, dX, rf, dW = "H", "X", "W", "Hp", "Xp", "dX", "rf", "dW"
    ks = _kernels(((H, Hp), (Hp,)), ((Hp, W, dX), (dX,)), ((X, Xp), (Xp,)), ((Hp, Xp, rf), (rf,)),
                  ((rf, dW), (dW,)))
    after, sinks = kernel_order(ks, _bufs([H, X, W, Hp, Xp, dX, rf, dW]))
    # the data gradient and the weight gradient only read Hp: neither waits for the other
    assert after == [(), (0,), (), (0, 2), (3,)]
    assert sinks == [1, 4]


def test_kernel_order_keeps_writes_after_reads_and_sees_shared_buffers():
    A, B, C, D = "A", "B", "C", "D"
    # kernel 1 writes A, which kernel 0 reads: it waits (write after read)
    after, _ = kernel_order(_kernels(((A, B), (B,)), ((C, A), (A,))), _bufs([A, B, C]))
    assert after == [(), (0,)]
    # C and D are one buffer (a bitcast, or a buffer passed twice): writing D is writing C
    after, _ = kernel_order(_kernels(((A, C), (C,)), ((B, D), (D,))), _bufs([A, B, C, D], same=(C, D)))
    assert after == [(), (0,)]
    # a wait implied through another kernel is left out: 2 reads 0's output but waits for 1, which waits for 0
    after, sinks = kernel_order(_kernels(((A, B), (B,)), ((B, C), (C,)), ((B, C, D), (D,))), _bufs([A, B, C, D]))
    assert after == [(), (0,), (1,)] and sinks == [2]


def test_unknown_writes_mean_every_argument():
    from polyad.codegen import KernelLaunch

    k = KernelLaunch("k", None, ("a", "b"), (1,), None)
    assert k.written() == ("a", "b")
    assert KernelLaunch("k", None, ("a", "b"), (1,), None, ("b",)).written() == ("b",)


def _branches():
    """Independent branches (two kernels that may overlap) joined by a third, and a fourth reading X again."""
    X = pa.placeholder((64, 48), name="X")
    k = pa.reduce_axis((0, 48), name="k")
    A = pa.compute((64, 48), lambda i, j: X[i, j] * 2.0 + 1.0, name="A")
    B = pa.compute((64,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="B")
    C = pa.compute((64, 48), lambda i, j: A[i, j] - B[i], name="C")
    D = pa.compute((64,), lambda i: pa.sum(C[i, k], axis=k), name="D")
    return X, [C, D]


@pytest.mark.opencl
def test_a_module_out_of_order_computes_what_it_does_in_order(opencl):
    X, outs = _branches()
    x = np.random.default_rng(0).standard_normal(X.shape).astype(np.float32)
    want = pa.evaluate(outs, {X: x})
    mod = pa.build(outs, [X], schedule="naive")
    if mod._unordered is None:
        pytest.skip("the device has no out-of-order queue")
    bufs = mod.to_device(x)
    for _ in range(3):
        mod.run(*bufs)
        for g, w in zip(mod.from_device(bufs), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    assert mod._after is not None and len(mod._after) == len(mod.program.kernels) >= 3
    # not waited for: the download on the in-order queue comes after the run's barrier
    x2 = x * -0.5
    bufs2 = mod.to_device(x2)
    mod.run(*bufs2, wait=False)
    for g, w in zip(mod.from_device(bufs2), pa.evaluate(outs, {X: x2})):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.opencl
def test_an_output_written_into_a_buffer_another_kernel_reads_keeps_the_order(opencl):
    """The caller passes X's buffer as C's output, and E, which reads X and shares no tensor with C, comes
    first: C's kernel must wait for E's (their tensors do not tell; their buffers do), and the results are
    those of the in-order queue."""
    import pyopencl as cl

    X, (C, D) = _branches()
    E = pa.compute(X.shape, lambda i, j: X[i, j] + 3.0, name="E")
    outs = [E, C, D]
    x = np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)
    results = []
    for unordered in (True, False):
        mod = pa.build(outs, [X], schedule="naive")
        if not unordered:
            mod._unordered = None
        elif mod._unordered is None:
            pytest.skip("the device has no out-of-order queue")
        mf = cl.mem_flags
        xb = cl.Buffer(mod.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x)
        eb, _, db = mod.alloc_outputs()
        mod.run(xb, eb, xb, db)  # C overwrites X
        if unordered:
            names = [k.name for k in mod.program.kernels]
            assert names.index("E") < names.index("C")
            waits = set(mod._after[names.index("C")])
            for j in list(waits):
                waits |= set(mod._after[j])
            assert names.index("E") in waits
        results.append([mod.download(t, b) for t, b in zip(mod.outputs, (eb, xb, db))])
    np.testing.assert_array_equal(results[0][0], x + 3.0)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_no_out_of_order_queue_where_the_device_has_none_or_polyad_in_order(monkeypatch):
    import pyopencl as cl

    flag = int(cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    in_order_only = SimpleNamespace(queue_properties=0)
    assert _unordered_queue(cl, None, in_order_only) is None
    monkeypatch.setenv("POLYAD_IN_ORDER", "1")
    assert _unordered_queue(cl, None, SimpleNamespace(queue_properties=flag)) is None


def test_threads_sharing_a_module_get_their_own_results(opencl):
    # a run binds the kernels' arguments and uses the module's intermediate buffers: without a lock, threads
    # calling one module read each other's arguments (a third of the results wrong) and PoCL aborted
    import sys
    import threading

    X = pa.placeholder((4, 16), name="X")
    mod = pa.build(pa.nn.softmax(X), [X], schedule="naive")
    assert len(mod.program.kernels) > 1
    wrong = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(150):
            x = rng.standard_normal((4, 16)).astype("float32") * (seed + 1)
            e = np.exp(x - x.max(1, keepdims=True))
            if not np.allclose(mod(x), e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-6):
                wrong.append(seed)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a loaded machine does
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not wrong
