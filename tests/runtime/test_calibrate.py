"""The calibration's kernels read what they claim: the GPU cache form, run on the CPU device here."""

import numpy as np
import pytest

from polyad.runtime import calibrate


def test_cache_plan_cpu_gives_each_work_item_its_own_slice():
    assert calibrate.cache_plan(False, 2, 1, 1 << 20) == ("cache_read", 8, 1, 8, 16 << 10)


@pytest.mark.parametrize("local", [32, 256, 1024])
def test_cache_plan_gpu_groups_share_interleaved_slices_within_the_cache(local):
    kernel, items, ls, groups, slice_bytes = calibrate.cache_plan(True, 132, local, 0)
    assert (kernel, ls, groups, items) == ("cache_read_group", local, 132 * 4, 132 * 4 * local)
    assert slice_bytes % (8 * local * 16) == 0  # whole rounds of the kernel's reads: none out of bounds
    # a reported cache bounds the working set at half of it, but never below one group per unit
    _, _, _, groups, slice_bytes = calibrate.cache_plan(True, 132, local, 24 << 20)
    assert 132 <= groups <= 132 * 4 and groups * slice_bytes <= max(12 << 20, 132 * slice_bytes)
    assert calibrate.cache_plan(True, 132, local, 1 << 20)[3] == 132


def test_cache_read_group_reads_every_vector_of_its_slice_once_per_rep(opencl):
    import pyopencl as cl

    from polyad.pipeline import select_device
    from polyad.runtime.device import device_state

    state = device_state(select_device())
    ctx, queue = state.context, state.queue
    src, _, _, g = calibrate._source([1, 4], 4)
    assert g == 4
    prg = cl.Program(ctx, src).build()
    _, items, local, groups, slice_bytes = calibrate.cache_plan(True, 3, 8, 0)
    n = slice_bytes // 4
    # distinct values: a work-item that read a neighbour's vector or another group's slice sums wrong
    a = np.arange(groups * n, dtype=np.float32) % 97
    mf = cl.mem_flags
    a_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    out = np.empty(items, np.float32)
    out_buf = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
    prg.cache_read_group(queue, (items,), (local,), a_buf, out_buf, np.int32(n // 4), np.int32(3))
    cl.enqueue_copy(queue, out, out_buf)
    vec = a.reshape(groups, n // (4 * local), local, 4)  # [group, round, work-item, lane]
    np.testing.assert_allclose(out.reshape(groups, local), 3 * vec.sum(axis=(1, 3)), rtol=1e-6)
