"""Calibration: what a device really does, measured on it once and cached.

The auto-scheduler's cost model reads these figures (``DeviceModel``), never a
machine's constants.  Measured, for the float32 vector widths the probe passed:

- ``gflops[N]``: a register-only loop of independent ``floatN`` multiply-adds
  (``a*b + c``, which LLVM contracts to FMA; the ``fma()`` builtin is a library
  call on some PoCL builds), 16 accumulators per work-item;
- ``accumulators``: GFLOP/s at the best width with 4, 8, 16 and 32
  accumulators (how many independent chains keep the FMA pipes busy, and where
  registers run out);
- ``stream_gbs``: a vector copy of buffers well beyond the last-level cache;
- ``cache_gbs``: repeated vector reads of data that stays in cache.  On a CPU
  each work-item re-reads its own 16 KiB slice.  On a GPU a work-group
  re-reads a 32 KiB slice, its work-items interleaved (neighbours read
  neighbouring vectors, as the scheduled kernels' reuse does), a few groups per
  compute unit: a working set per unit that its L1 holds and, in all, well
  within the reported cache.  (Per-work-item slices on a GPU measured neither:
  addresses 16 KiB apart per neighbour, 138 MB in all on an H200, read 1 TB/s,
  a third of its stream copy.)
- on CPUs, ``l1_bytes``: the largest per-work-item slice (16 to 128 KiB) that ``cache_read`` re-reads
  within 70% of its 16 KiB rate (the working set the fastest cache holds);
- on CPUs, ``fill_gbs``: cache lines a second brought in from the next level: each work-item reads
  rows of 16 floats, 4 bytes past a line boundary (two lines each), in a stride-37 order over its
  256 KiB slice (short scattered rows, as a convolution's block reads its input; a sequential read
  of the same slice is prefetched 1.5-3x faster);
- ``launch_s``: enqueue-to-finish of an empty kernel (median);
- on GPUs, ``local_sizes``: the work-group sizes within 10% of the fastest
  on the copy kernel.

Everything runs in one program (one compile) and takes a few seconds on a
2-core CPU.  :func:`measure` is called in the probe's child process
(:mod:`polyad.pipeline.probe`), so a driver that crashes here costs a "no", not
the user's process.
"""

import time

import numpy as np

CAL_FORMAT = "polyad-calibration-2"  # 2: l1_bytes and fill_gbs
_ACCS = (4, 8, 16, 32)
_LANES = "0123456789abcdef"
_ROUNDS = 8  # the fastest of 8 interleaved runs: a shared VM's slow spells last seconds
_TARGET_S = 0.01  # seconds per timed run: well above the launch overhead, short enough for many rounds
_GROUP_WIDTH = 4  # the GPU cache reads: float4, the widest single load on the GPUs we know
_GROUP_SLICE = 32 << 10  # bytes a work-group re-reads
_GROUPS_PER_UNIT = 4
_L1_SLICES = (16 << 10, 32 << 10, 64 << 10, 128 << 10)  # per-work-item slices probed for the cache's knee
_FILL_SLICE = 256 << 10  # beyond the L1 of the CPUs we know, within their L2
_FILL_STRIDE = 37  # rows visited in a stride no prefetcher follows (odd: every row of the slice once a pass)


def cache_plan(gpu, compute_units, local, cache_bytes):
    """How the cache bandwidth is read: ``(kernel, work_items, local_size, slices, slice_bytes)``.

    CPU: one work-item per ``local`` slot, each on its own 16 KiB.  GPU: ``_GROUPS_PER_UNIT``
    work-groups of ``local`` per compute unit, each on its own ``_GROUP_SLICE``, fewer groups where the
    device reports a cache under twice that working set (never fewer than one per unit).  A slice
    holds whole rounds of the kernel's 8 interleaved float4 reads per work-item.
    """
    if not gpu:
        return "cache_read", compute_units * 4, local, compute_units * 4, 16 << 10
    slice_bytes = max(_GROUP_SLICE, 8 * local * 4 * _GROUP_WIDTH)
    groups = compute_units * _GROUPS_PER_UNIT
    if cache_bytes > 0:
        groups = min(groups, max(compute_units, cache_bytes // (2 * slice_bytes)))
    return "cache_read_group", groups * local, local, groups, slice_bytes


def _peak_kernel(n, acc):
    t = "float" if n == 1 else f"float{n}"
    init = "\n".join(f"  {t} a{i} = ({t})(1e-3f * (g + {i}));" for i in range(acc))
    body = "\n".join(f"    a{i} = a{i} * m + c;" for i in range(acc))
    total = " + ".join(f"a{i}" for i in range(acc))
    return f"""
__kernel void peak_w{n}_a{acc}(__global {t} *out, float s, int iters)
{{
  int g = (int)get_global_id(0);
  {t} m = ({t})(s), c = ({t})(1e-6f);
{init}
  for (int i = 0; i < iters; i++) {{
{body}
  }}
  out[g] = {total};
}}
"""


def _source(widths, best_guess):
    parts = [_peak_kernel(n, 16) for n in widths]
    parts += [_peak_kernel(best_guess, a) for a in _ACCS if a != 16]
    v = 4 if 4 in widths else 1  # the copy: memory-bound at any width
    w = max(widths)  # the cache reads: as wide as the device goes, or they measure the adder
    t = "float" if v == 1 else f"float{v}"
    tw = "float" if w == 1 else f"float{w}"
    g = _GROUP_WIDTH if _GROUP_WIDTH in widths else 1  # the group form: one 16-byte load per work-item
    tg = "float" if g == 1 else f"float{g}"
    parts.append(f"""
__kernel void stream_copy(__global {t} const *restrict a, __global {t} *restrict b)
{{
  size_t i = get_global_id(0);
  b[i] = a[i];
}}

__kernel void cache_read(__global {tw} const *restrict a, __global float *restrict out, int slice, int reps)
{{
  size_t g = get_global_id(0);
  __global {tw} const *p = a + g * slice;
  {tw} s0 = ({tw})(0.0f), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (int r = 0; r < reps; r++) {{
    for (int i = 0; i < slice; i += 8) {{
      s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
      s4 += p[i + 4]; s5 += p[i + 5]; s6 += p[i + 6]; s7 += p[i + 7];
    }}
  }}
  {tw} s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
  out[g] = {"s" if w == 1 else " + ".join(f"s.s{_LANES[k]}" for k in range(w))};
}}

__kernel void cache_read_group(__global {tg} const *restrict a, __global float *restrict out, int slice, int reps)
{{
  int n = (int)get_local_size(0);
  __global {tg} const *p = a + get_group_id(0) * (size_t)slice + get_local_id(0);
  {tg} s0 = ({tg})(0.0f), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (int r = 0; r < reps; r++) {{
    for (int i = 0; i < slice; i += 8 * n) {{
      s0 += p[i]; s1 += p[i + n]; s2 += p[i + 2 * n]; s3 += p[i + 3 * n];
      s4 += p[i + 4 * n]; s5 += p[i + 5 * n]; s6 += p[i + 6 * n]; s7 += p[i + 7 * n];
    }}
  }}
  {tg} s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
  out[get_global_id(0)] = {"s" if g == 1 else " + ".join(f"s.s{_LANES[k]}" for k in range(g))};
}}

__kernel void fill_rows(__global float const *restrict a, __global float *restrict out, int rows, int reps)
{{
  size_t g = get_global_id(0);
  __global float const *p = a + g * (size_t)rows * 16 + 1;
  uint mask = (uint)rows - 1u, row = 0u;
  {tw} s0 = ({tw})(0.0f), s1 = s0, s2 = s0, s3 = s0;
  for (int r = 0; r < reps; r++) {{
    for (int i = 0; i < rows; i += 4) {{
      s0 += {_row_sum(w, "p + row * 16")}; row = (row + {_FILL_STRIDE}u) & mask;
      s1 += {_row_sum(w, "p + row * 16")}; row = (row + {_FILL_STRIDE}u) & mask;
      s2 += {_row_sum(w, "p + row * 16")}; row = (row + {_FILL_STRIDE}u) & mask;
      s3 += {_row_sum(w, "p + row * 16")}; row = (row + {_FILL_STRIDE}u) & mask;
    }}
  }}
  {tw} s = (s0 + s1) + (s2 + s3);
  out[g] = {"s" if w == 1 else " + ".join(f"s.s{_LANES[k]}" for k in range(w))};
}}

__kernel void empty(__global float *out) {{ }}
""")
    return "\n".join(parts), v, w, g


def _row_sum(w, ptr):
    """The sum of the 16 floats at ``ptr`` as ``w``-lane vectors (one row of ``fill_rows``)."""
    if w == 1:
        return " + ".join(f"({ptr})[{k}]" for k in range(16))
    return " + ".join(f"vload{w}({k}, {ptr})" for k in range(16 // w))


def _best_time(queue, fn, repeat):
    """The fastest of ``repeat`` runs: what the device can do when the (shared, noisy) machine lets it."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        queue.finish()
        times.append(time.perf_counter() - t0)
    return float(min(times))


def _calibrated_reps(queue, run):
    """A repetition count for ``run(reps)`` that takes about ``_TARGET_S``: grown until a run is well
    above the launch overhead, then scaled (the first runs also pay the launch-time compile)."""
    reps = 16
    run(reps)
    queue.finish()
    while True:
        t = _best_time(queue, lambda: run(reps), 1)
        if t >= _TARGET_S / 2 or reps >= 1 << 26:
            break
        reps *= 8 if t < _TARGET_S / 50 else 2
    return max(1, min(1 << 26, int(reps * _TARGET_S / max(t, 1e-6))))


def _refill(ctx, queue, kernels, items, local, width):
    """``(l1_bytes, fill_gbs)`` of a CPU (the module's docstring says how they are read)."""
    import pyopencl as cl

    mf = cl.mem_flags
    out = cl.Buffer(ctx, mf.READ_WRITE, size=items * 4)
    big = max(max(_L1_SLICES), _FILL_SLICE)
    src = cl.Buffer(ctx, mf.READ_WRITE, size=items * big + 64)
    cl.enqueue_fill_buffer(queue, src, np.float32(1.0), 0, items * big + 64)
    rate = {}
    for size in _L1_SLICES:
        def run(reps, size=size):
            kernels["cache_read"](queue, (items,), (local,), src, out, np.int32(size // (4 * width)), np.int32(reps))

        reps = _calibrated_reps(queue, run)
        rate[size] = items * size * reps / _best_time(queue, lambda: run(reps), _ROUNDS)
    first = rate[_L1_SLICES[0]]
    l1 = max(size for size in _L1_SLICES if rate[size] >= 0.7 * first)
    rows = _FILL_SLICE // 64

    def fill(reps):
        kernels["fill_rows"](queue, (items,), (local,), src, out, np.int32(rows), np.int32(reps))

    reps = _calibrated_reps(queue, fill)
    lines = items * rows * 2 * reps  # each row: 64 bytes from 4 past a line, two lines
    return l1, lines * 64 / _best_time(queue, lambda: fill(reps), _ROUNDS) / 1e9


def measure(device, widths):
    """The calibration of ``device`` (a plain dict, JSON-ready) for the float32 ``widths`` that compile.

    ``widths``: the probe's passing widths (at least 1).  Raises whatever the
    driver raises: the caller runs this in a child process.
    """
    import pyopencl as cl

    from .device import is_gpu

    t_start = time.perf_counter()
    widths = sorted(set(widths)) or [1]
    gpu = is_gpu(device)
    cu = int(device.max_compute_units)
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, device)
    # the accumulator sweep runs at the widest width that passed (on GPUs, the scalar one)
    guess = 1 if gpu else max(widths)
    src, sv, cw, gw = _source(widths, guess)
    prg = cl.Program(ctx, src).build()
    kernels = {k.function_name: k for k in prg.all_kernels()}
    mf = cl.mem_flags

    max_wg = int(device.max_work_group_size)
    if gpu:
        local = min(256, max_wg)
        n_items = cu * 4 * local
    else:
        local = 1
        n_items = 4 * cu
    out = cl.Buffer(ctx, mf.READ_WRITE, size=n_items * 16 * 4)

    def runner(n, acc):
        k = kernels[f"peak_w{n}_a{acc}"]

        def run(iters):
            k(queue, (n_items,), (local,), out, np.float32(0.999), np.int32(iters))

        return run, n_items * n * acc * 2

    configs = [(n, 16) for n in widths] + [(guess, a) for a in _ACCS if a != 16]
    plans = {}
    for cfg in configs:
        run, flops = runner(*cfg)
        plans[cfg] = (run, flops, _calibrated_reps(queue, run))
    # rounds over every configuration: a slow moment of a shared machine costs each one run, not one
    # configuration all of its runs
    rate = dict.fromkeys(configs, 0.0)
    for _ in range(_ROUNDS):
        for cfg, (run, flops, iters) in plans.items():
            t = _best_time(queue, lambda: run(iters), 1)
            rate[cfg] = max(rate[cfg], flops * iters / t / 1e9)
    gflops = {n: rate[(n, 16)] for n in widths}
    accs = {a: rate[(guess, a)] for a in _ACCS}

    # streaming: buffers well beyond the caches (the device's reported cache, at least 64 MiB)
    cache_size = int(getattr(device, "global_mem_cache_size", 0) or 0)
    nbytes = max(64 << 20, 4 * cache_size)
    nbytes = min(nbytes, int(device.max_mem_alloc_size) // 2, int(device.global_mem_size) // 8)
    n_vec = max(1, nbytes // (4 * sv))
    n_vec -= n_vec % max(1, local if gpu else 1)
    a = cl.Buffer(ctx, mf.READ_WRITE, size=n_vec * 4 * sv)
    b = cl.Buffer(ctx, mf.READ_WRITE, size=n_vec * 4 * sv)
    cl.enqueue_fill_buffer(queue, a, np.float32(1.0), 0, n_vec * 4 * sv)
    queue.finish()
    copy_local = {}
    sizes = [None] if not gpu else [s for s in (32, 64, 128, 256, 512, 1024) if s <= max_wg and n_vec % s == 0]
    for ls in sizes or [None]:
        def run(ls=ls):
            kernels["stream_copy"](queue, (n_vec,), None if ls is None else (ls,), a, b)

        run()
        queue.finish()
        copy_local[ls] = 2 * n_vec * 4 * sv / _best_time(queue, run, _ROUNDS) / 1e9
    stream_gbs = max(copy_local.values())
    local_sizes = ()
    if gpu:
        local_sizes = tuple(sorted(ls for ls, g in copy_local.items() if ls is not None and g >= 0.9 * stream_gbs))

    # cache bandwidth: data re-read from the cache (cache_plan says how)
    kernel, items, cache_local, slices, slice_bytes = cache_plan(gpu, cu, local, cache_size)
    slice_vec = slice_bytes // (4 * (gw if gpu else cw))
    src_buf = cl.Buffer(ctx, mf.READ_WRITE, size=slices * slice_bytes)
    cl.enqueue_fill_buffer(queue, src_buf, np.float32(1.0), 0, slices * slice_bytes)
    out2 = cl.Buffer(ctx, mf.READ_WRITE, size=items * 4)

    def cache_run(reps):
        kernels[kernel](queue, (items,), (cache_local,), src_buf, out2, np.int32(slice_vec), np.int32(reps))

    reps = _calibrated_reps(queue, cache_run)
    cache_gbs = slices * slice_bytes * reps / _best_time(queue, lambda: cache_run(reps), _ROUNDS) / 1e9
    l1_bytes, fill_gbs = (0, 0.0) if gpu else _refill(ctx, queue, kernels, items, cache_local, cw)

    def launch():
        kernels["empty"](queue, (1,), None, out)

    launch()
    queue.finish()
    launch_s = float(np.median([_best_time(queue, launch, 1) for _ in range(30)]))

    return {
        "format": CAL_FORMAT,
        "kind": "gpu" if gpu else "cpu",
        "compute_units": cu,
        "gflops": {str(n): round(g, 3) for n, g in gflops.items()},
        "accumulators": {str(k): round(g, 3) for k, g in sorted(accs.items())},
        "accumulator_width": guess,
        "stream_gbs": round(stream_gbs, 3),
        "cache_gbs": round(cache_gbs, 3),
        "l1_bytes": l1_bytes,
        "fill_gbs": round(fill_gbs, 3),
        "launch_s": launch_s,
        "local_sizes": list(local_sizes),
        "max_work_group_size": max_wg,
        "seconds": round(time.perf_counter() - t_start, 3),
    }
