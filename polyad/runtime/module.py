"""The compiled Module: numpy in, numpy out; or device buffers without host copies."""

import math
import threading
import time

import numpy as np

from ..errors import ArityError, BuildError, DeviceError, DeviceLimitError, DtypeError, PolyadError, ShapeError
from ..te.tensor import array_for
from .cache import get_program
from .device import check_process, device_state, is_gpu, supports_fp64

BUILD_OPTIONS = ()


class Module:
    """The kernels of one build, in one OpenCL program (or, for the tuner, one program a kernel:
    ``kernel_programs``), ready to run on one device.

    ``mod(*arrays)`` runs on numpy arrays (the build's inputs, in order) and
    returns one array for a single output tensor, else a list.
    ``mod.run(*buffers)`` takes device buffers (inputs then outputs) and copies
    nothing to or from the host.  ``mod.time(*arrays, repeat=)`` times runs.
    ``mod.source`` is the OpenCL C.  Intermediate buffers are allocated once,
    on the first run.  An output that is a bitcast of an input (a reshape in
    linear order, ``Program.aliases``) has no kernel: ``mod(...)`` returns a
    view of the input array and ``to_device`` gives it the input's buffer.
    """

    def __init__(self, program, device, single_output=False, inputs=None, cl_program=None, kernel_programs=None):
        self.program = program
        # the tensors as the build was given them (a fed computed tensor, not its placeholder)
        self._inputs = list(program.inputs) if inputs is None else list(inputs)
        self.device = device
        self._single = single_output
        state = device_state(device)
        self.context, self.queue, self._unordered = state.context, state.queue, state.unordered
        if program.fp64 and not supports_fp64(device):
            names = [t.name for t in _all_tensors(program) if t.dtype == "float64"]
            raise DeviceError(
                f"tensors {names} are float64 but the device {device.name.strip()!r} has no double precision "
                "support; use float32 or pick another device (device= or $POLYAD_DEVICE)"
            )
        import pyopencl as cl

        plan = launch_plan(program, device)
        # before compiling: a launch over the device's limits fails at call time with a bare pyopencl error
        check_device_limits(device, [t for t in _all_tensors(program) if id(t) not in program.aliases], plan)
        # kernel_programs: kernel name -> a built program of that kernel alone (the tuner's builds, per_kernel_requests)
        if cl_program is None and plan and kernel_programs is None:  # (no kernels: every output is a bitcast)
            cl_program = get_program(program.source, device, BUILD_OPTIONS, trial_launches(plan))
        self.cl_program = cl_program
        self._launches = []
        #: kernel name -> (scheduled work-group, the one it runs, CL_KERNEL_WORK_GROUP_SIZE) where the kernel
        #: cannot run its scheduled group (:func:`fit_work_group`)
        self.work_group_fits = {}
        for k, gsize, lsize in plan:
            try:
                kernel = cl.Kernel(self.cl_program if kernel_programs is None else kernel_programs[k.name], k.name)
            except cl.Error as e:
                raise BuildError(f"the program built for {device.name.strip()} has no kernel {k.name!r} ({e})",
                                 source=program.source, log=str(e)) from None
            if lsize is not None:
                most = kernel_work_group_limit(kernel, device)
                fitted = fit_work_group(lsize, most)
                if fitted != tuple(lsize):
                    self.work_group_fits[k.name] = (tuple(lsize), fitted, most)
                lsize = fitted
            self._launches.append((kernel, k, gsize, lsize))
        self._intermediates = None
        self._bound_to = None  # the buffers' handles the kernels' arguments were last set to
        # one run at a time: the kernels' arguments and the intermediate buffers are the module's (threads
        # sharing a module read each other's arguments, and PoCL aborted)
        self._running = threading.RLock()
        self._after = self._sinks = None  # per kernel, the earlier kernels it waits for; those none waits for

    @property
    def source(self):
        """The OpenCL C source of all kernels."""
        return self.program.source

    @property
    def inputs(self):
        """The build's inputs as given (computed tensors fed as data included), in order."""
        return list(self._inputs)

    @property
    def outputs(self):
        return list(self.program.outputs)

    def __repr__(self):
        ins = ", ".join(t.name for t in self.program.inputs)
        outs = ", ".join(t.name for t in self.program.outputs)
        return f"<polyad.Module ({ins}) -> ({outs}), {len(self._launches)} kernels on {self.device.name.strip()}>"

    # -- host arrays -------------------------------------------------------------------------
    def __reduce_ex__(self, protocol):
        # pickle found a Device (or an isl object of an in-process program) deep inside: say what to do instead
        raise PolyadError("a Module holds OpenCL objects of this process and cannot be pickled or copied: "
                          "send the graph and build it again there (the kernel cache makes that fast)")

    def _check_arrays(self, arrays):
        ins = self.program.inputs
        if len(arrays) != len(ins):
            raise ArityError(
                f"the module takes {len(ins)} arrays ({', '.join(t.name for t in ins)}), got {len(arrays)}"
            )
        out = []
        for t, a in zip(ins, arrays):
            out.append(np.ascontiguousarray(array_for(t, a, "the array", ShapeError, DtypeError)))
        return out

    def to_device(self, *arrays):
        """Device buffers of the input arrays, followed by the output buffers: ready for ``run``.

        An output that is a bitcast of an input (``Program.aliases``) gets that input's buffer: no
        kernel writes it and nothing is allocated.
        """
        return self._to_device(self._check_arrays(arrays))

    def _to_device(self, arrays):
        import pyopencl as cl

        check_process()
        mf = cl.mem_flags
        bufs = [cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a) for a in arrays]
        return bufs + self.output_buffers(bufs)

    def alloc_outputs(self):
        """Fresh device buffers for the outputs (``run`` fills a bitcast output's by a device copy)."""
        return [self._fresh(t) for t in self.program.outputs]

    def output_buffers(self, input_buffers):
        """Buffers for the outputs given the inputs': a bitcast of an input is that input's buffer
        (nothing allocated, nothing run: ``run`` returns it as it is), the others fresh."""
        by_input = {id(t): b for t, b in zip(self.program.inputs, input_buffers)}
        return [by_input[id(self._alias(t))] if self._alias(t) is not None else self._fresh(t)
                for t in self.program.outputs]

    def _fresh(self, t):
        import pyopencl as cl

        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=_nbytes(t))

    def _alias(self, t):
        return self.program.aliases.get(id(t))

    def from_device(self, buffers):
        """numpy arrays of the output buffers (the last len(outputs) of ``buffers`` if more are given)."""
        outs = self.program.outputs
        res = []
        for t, b in zip(outs, list(buffers)[-len(outs):]):
            res.append(self.download(t, b))
        return res

    def download(self, t, b):
        """A numpy array of tensor ``t`` from device buffer ``b`` (checked to be large enough)."""
        import pyopencl as cl

        check_process()
        a = np.empty(t.shape, dtype=t.dtype)
        buf = _buffer(b, t)
        try:
            cl.enqueue_copy(self.queue, a, buf, is_blocking=True)
        except cl.Error as e:
            raise self._device_error(f"reading {t.name!r} back", e) from e
        return a

    def __call__(self, *arrays):
        arrays = self._check_arrays(arrays)
        bufs = self._to_device(arrays)
        self.run(*bufs)
        # an output that is a bitcast of an input is a numpy view of that input, as numpy's reshape
        host = {id(t): a for t, a in zip(self.program.inputs, arrays)}
        n = len(self.program.inputs)
        res = [host[id(self._alias(t))].reshape(t.shape) if self._alias(t) is not None else self.download(t, b)
               for t, b in zip(self.program.outputs, bufs[n:])]
        return res[0] if self._single else res

    def time(self, *arrays, repeat=10, warmup=1):
        """Seconds per run (a numpy array of ``repeat`` values), data kept on the device."""
        _check_count("repeat", repeat, 1)
        _check_count("warmup", warmup, 0)
        bufs = self.to_device(*arrays)
        for _ in range(warmup):
            self.run(*bufs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.run(*bufs)
            times.append(time.perf_counter() - t0)
        return np.array(times)

    # -- device buffers ----------------------------------------------------------------------
    def run(self, *buffers, wait=True):
        """Run every kernel on device buffers: the inputs, then the outputs, in the build's order.

        Accepts ``pyopencl.Buffer`` or ``pyopencl.array.Array``.  With
        ``wait=False`` it returns the last event without waiting for it.  An
        output that is a bitcast of an input needs no kernel: given that input's
        buffer (as ``to_device`` and ``output_buffers`` give it) nothing runs for
        it; given another buffer, a device copy fills it.
        """
        import pyopencl as cl

        check_process()
        with self._running:
            self._set_arguments(buffers)
            try:  # free unless raised (not a context manager: a run of lenet_step's backward is 1.2 ms)
                return self._enqueue(cl, buffers, wait)
            except cl.Error as e:
                raise self._device_error("running its kernels", e) from e

    def _enqueue(self, cl, buffers, wait):
        event = None
        if self._after is not None:
            event = self._run_unordered(cl, wait)
        else:
            for kernel, _, gsize, lsize in self._launches:
                event = cl.enqueue_nd_range_kernel(self.queue, kernel, gsize, lsize)
        if self.program.aliases:  # an alias's source is always an input: its buffer is among those given
            given = dict(zip(map(id, self.program.inputs), buffers))
            for t, b in zip(self.program.outputs, buffers[len(self.program.inputs):]):
                src = self._alias(t)
                if src is None:
                    continue
                dst, frm = _buffer(b, t), _buffer(given[id(src)], src)
                if dst != frm:  # another buffer given: fill it
                    event = cl.enqueue_copy(self.queue, dst, frm, byte_count=_nbytes(t))
        if wait:
            self.queue.finish()
        return event

    def profile(self, *arrays, repeat=5, warmup=1):
        """Median seconds of each kernel, by name, in launch order: where a gradient's time goes.

        Each kernel is timed alone (launch to finish, on device-resident data), so the
        figures include one launch overhead each and add up to slightly more than ``time``.
        """
        return self.profile_buffers(*self.to_device(*arrays), repeat=repeat, warmup=warmup)

    def profile_buffers(self, *buffers, repeat=5, warmup=1):
        """:meth:`profile` on device buffers (inputs then outputs, as ``run`` takes them): nothing is copied."""
        import pyopencl as cl

        _check_count("repeat", repeat, 1)
        _check_count("warmup", warmup, 0)
        check_process()
        bufs = list(buffers)
        samples = {k.name: [] for _, k, _, _ in self._launches}
        with self._running:
            for _ in range(warmup):
                self.run(*bufs)
            self._set_arguments(bufs)
            for _ in range(repeat):
                for kernel, k, gsize, lsize in self._launches:
                    t0 = time.perf_counter()
                    cl.enqueue_nd_range_kernel(self.queue, kernel, gsize, lsize)
                    self.queue.finish()
                    samples[k.name].append(time.perf_counter() - t0)
        return {name: float(np.median(v)) for name, v in samples.items()}

    def _device_error(self, doing, e):
        """A driver's error while the module runs or reads back, as a DeviceError saying what failed where.
        A GPU reports a kernel's fault (an out-of-bounds access) at the next call that waits, often a read,
        and its context is lost with it: every later call in this process fails the same way."""
        names = [k.name for _, k, _, _ in self._launches]
        listed = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return DeviceError(f"{self.device.name.strip()} failed {doing} (kernels {listed or 'none'}): "
                           f"{type(e).__name__}: {e}; after a kernel's fault a GPU's context is lost for this process")

    def _run_unordered(self, cl, wait):
        """Enqueues the kernels on the device's out-of-order queue, each after the kernels it has a hazard
        with (it reads what they write, or writes what they read or write), so independent kernels overlap.
        What is on the in-order queue comes first and what is enqueued there after the run comes after: with
        ``wait`` the host waits for each in turn (it waits anyway); without, a marker starts the run and a
        barrier on the in-order queue ends it (events across the queues: 3-5% slower than the host's waits).
        Against the in-order queue, alternating in one process: conv2d_5x5_s3's backward 0.85x, conv2d_3x3's
        0.91x, lenet_step's 0.90x, dense's and max_pool's 1.0x (docs/runtime.md)."""
        start = None
        if wait:
            self.queue.finish()
        else:
            start = cl.enqueue_marker(self.queue)
            self.queue.flush()
        events = []
        for (kernel, _, gsize, lsize), after in zip(self._launches, self._after):
            deps = [events[j] for j in after] if after else ([start] if start is not None else None)
            events.append(cl.enqueue_nd_range_kernel(self._unordered, kernel, gsize, lsize, wait_for=deps))
        if wait:
            self._unordered.finish()
            return events[-1]
        self._unordered.flush()
        return cl.enqueue_barrier(self.queue, wait_for=[events[j] for j in self._sinks])

    def _set_arguments(self, buffers):
        """Binds the kernels' arguments to ``buffers`` (inputs then outputs) and the intermediates.  The
        arguments stay set between runs: a run on the same buffers as the last one (the
        same cl_mem handles, sizes and offsets, so ``set_args`` would set the same values) sets none, which
        saved 0.075 ms of Python per run of lenet_step's 27-kernel backward (1.2 ms).  Only the handles are
        kept, not the buffers: the module holds no memory its caller has dropped."""
        key = tuple(_handle(b) for b in buffers)
        if key == self._bound_to:
            return
        self._bound_to = None  # a failure below leaves the kernels half bound
        where = self._bind(buffers)
        for kernel, k, _, _ in self._launches:
            kernel.set_args(*[where[id(t)] for t in k.args])
        if self._unordered is not None and len(self._launches) > 1:
            self._after, self._sinks = kernel_order([k for _, k, _, _ in self._launches], where)
        self._bound_to = key

    def _bind(self, buffers):
        """id(tensor) -> device buffer for the given input/output buffers and the intermediates."""
        prog = self.program
        tensors = list(prog.inputs) + list(prog.outputs)
        if len(buffers) != len(tensors):
            raise ArityError(
                f"run takes {len(tensors)} buffers (inputs {', '.join(t.name for t in prog.inputs)}; "
                f"outputs {', '.join(t.name for t in prog.outputs)}), got {len(buffers)}"
            )
        where = {id(t): _buffer(b, t) for t, b in zip(tensors, buffers)}
        where.update(self._intermediate_buffers())
        for i, src in prog.aliases.items():  # kernels read a bitcast from its input's buffer
            where[i] = where[id(src)]
        return where

    def _intermediate_buffers(self):
        if self._intermediates is None:
            import pyopencl as cl

            self._intermediates = {
                id(t): cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=_nbytes(t))
                for t in self.program.intermediates if id(t) not in self.program.aliases
            }
        return self._intermediates


def launch_plan(program, device=None):
    """Per kernel ``(KernelLaunch, global size, local size)``: the global size rounded up to whole work-groups.

    A kernel whose schedule leaves the work-group size to the implementation gets :func:`cpu_local_size` on
    a device that is not a GPU (the model's kind ``cpu``; a GPU's driver chooses)."""
    cpu = device is not None and not is_gpu(device)
    plan = []
    for k in program.kernels:
        gsize, lsize = k.global_size, k.local_size
        if lsize is not None:
            lsize = tuple(lsize) + (1,) * (len(gsize) - len(lsize))
            lsize = lsize[: len(gsize)]
            gsize = tuple(-(-g // l) * l for g, l in zip(gsize, lsize))
        elif cpu and gsize:
            lsize = cpu_local_size(gsize, GROUPS_PER_CORE * int(device.max_compute_units),
                                   int(device.max_work_group_size), [int(n) for n in device.max_work_item_sizes])
        plan.append((k, gsize, lsize))
    return plan


# work-groups per core a CPU launch is split into at least, where the global size allows: PoCL's own choice is
# the largest group dividing the global size, split only to one group per core, and not when that drops a
# group below 4x its SIMD width (its 10x17 blocks of conv2d_3x3's dW partials ran as one group, on one core:
# 1.69 ms against 0.87 in 34 groups, PoCL 3.1, 2-core Zen 4; conv2d_5x5_s3's 2.58 against 1.28)
GROUPS_PER_CORE = 8


def cpu_local_size(gsize, groups, max_group, max_items):
    """The largest work-group that divides ``gsize`` (innermost first), fits the device's limits and still
    leaves at least ``groups`` groups where the global size allows: dimensions are shrunk outermost first, each
    to its next smaller divisor, so the innermost (where PoCL vectorises across work-items) stays widest.

    >>> cpu_local_size((10, 17), 16, 4096, [4096] * 3)
    (10, 1)
    >>> cpu_local_size((1024, 64, 32), 16, 4096, [4096] * 3)
    (1024, 4, 1)
    """
    divs = [_divisors(g) for g in gsize]
    lsize = [max(d for d in ds if d <= m) for ds, m in zip(divs, max_items)]

    def count():
        return math.prod(g // l for g, l in zip(gsize, lsize))

    for d in reversed(range(len(gsize))):
        while lsize[d] > 1 and (math.prod(lsize) > max_group or count() < groups):
            lsize[d] = max(x for x in divs[d] if x < lsize[d])
    return tuple(lsize)


def _divisors(n):
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def trial_launches(plan):
    """The kernels, their buffers and launch sizes: a cold compile launches each once, in the worker
    (:func:`polyad.runtime.builder.make_job`)."""
    return [(k.name, [(_nbytes(t), t.dtype if t.dtype != "bool" else "uint8") for t in k.args], gsize, lsize)
            for k, gsize, lsize in plan]


def per_kernel_requests(program, device):
    """``{kernel name: (source, options, launches)}``: each kernel of ``program`` as a program of its own
    (``Program.kernel_source``), as :func:`polyad.runtime.cache.precompile` and
    :func:`~polyad.runtime.cache.get_program` take requests; ``Module(..., kernel_programs=)`` runs them.  A
    tuner's candidates differ in a stage or two: compiled this way, the others come from the cache
    (lenet_step's backward: 4.2 s whole, 0.2-0.5 s a kernel)."""
    return {k.name: (program.kernel_source(k.name), BUILD_OPTIONS, trial_launches([(k, g, l)]))
            for k, g, l in launch_plan(program, device)}


def _nbytes(t):
    return max(1, t.size * np.dtype(t.dtype).itemsize)


def kernel_order(kernels, where):
    """``(after, sinks)`` of kernels run in order on the buffers ``where`` (``id(tensor) -> cl.Buffer``):
    ``after[i]``, the earlier kernels kernel ``i`` must wait for (a read or write of a buffer an earlier
    kernel writes, or a write of one it reads), without those implied through another; ``sinks``, the
    kernels no later one waits for.  Buffers, not tensors: a bitcast reads its input's buffer, and a caller
    may pass one buffer twice.  Two pads then a kernel reading both: ``([(), (), (0, 1)], [2])``.
    """
    def handles(ts):
        return {where[id(t)].int_ptr for t in ts}

    touches = [handles(k.args) for k in kernels]  # what a kernel reads or writes
    writes = [handles(k.written()) for k in kernels]
    after, before, needed = [], [], set()  # before[i]: every kernel i waits for, directly or not
    for i in range(len(kernels)):
        direct = [j for j in range(i) if writes[j] & touches[i] or writes[i] & touches[j]]
        implied = set().union(*(before[j] for j in direct))
        after.append(tuple(j for j in direct if j not in implied))
        before.append(implied.union(direct))
        needed.update(after[-1])
    return after, [i for i in range(len(kernels)) if i not in needed]


def _handle(b):
    """What a kernel argument holds for buffer ``b`` (a cl.Buffer or a pyopencl Array): its cl_mem handle,
    size and offset.  A handle the driver reuses for another buffer of the same size sets the same argument."""
    try:
        base = getattr(b, "base_data", b)
        return type(b), getattr(base, "int_ptr", None), getattr(base, "size", None), getattr(b, "offset", 0)
    except Exception:  # not a buffer: no key, so _bind checks it and says what is wrong (a buffer released with
        # .release() cannot be told from a live one: pyopencl's own .size of it segfaults)
        return object()


def _buffer(b, t):
    """The cl.Buffer behind ``b``, checked to be large enough for tensor ``t``."""
    import pyopencl as cl

    if hasattr(b, "base_data") and hasattr(b, "offset"):  # pyopencl.array.Array
        if b.offset:
            raise PolyadError(f"tensor {t.name!r}: device arrays with an offset are not supported")
        # an Array says what it holds: a float64 one given for a float32 tensor ran on its bytes
        if np.dtype(b.dtype) != np.dtype(t.dtype):
            raise DtypeError(f"tensor {t.name!r} is {t.dtype}, the device array given for it is {np.dtype(b.dtype)}")
        if tuple(b.shape) != tuple(t.shape):
            raise ShapeError(f"tensor {t.name!r} has shape {list(t.shape)}, the device array given for it "
                             f"{list(b.shape)}")
        if not (b.flags.c_contiguous or b.size <= 1):
            raise PolyadError(f"tensor {t.name!r}: the device array given for it is not C-contiguous")
        b = b.base_data
    if not isinstance(b, cl.Buffer):
        raise PolyadError(f"tensor {t.name!r}: expected a pyopencl Buffer or Array, got {type(b).__name__}")
    need = _nbytes(t)
    if b.size < need:
        raise ShapeError(f"tensor {t.name!r} {t.dtype}{list(t.shape)} needs {need} bytes, the buffer has {b.size}")
    return b


def _all_tensors(program):
    return list(program.inputs) + list(program.outputs) + list(program.intermediates)


def _check_count(name, value, least):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise PolyadError(f"{name} must be an integer >= {least}, got {value!r}")


def check_device_limits(device, tensors, plan):
    """DeviceLimitError naming the tensor or kernel when a buffer or a work-group exceeds ``device``'s limits.

    ``plan``: (KernelLaunch, global size, local size or None) per kernel.  The kernel-specific
    work-group limit is known only once compiled (:func:`_check_kernel_work_group`).
    """
    name = device.name.strip()
    max_alloc, total_mem = int(device.max_mem_alloc_size), int(device.global_mem_size)
    for t in tensors:
        if _nbytes(t) > max_alloc:
            raise DeviceLimitError(
                f"tensor {t.name!r} {t.dtype}{list(t.shape)} needs {_nbytes(t)} bytes, over the largest buffer "
                f"{name} allocates ({max_alloc} bytes, CL_DEVICE_MAX_MEM_ALLOC_SIZE)")
    total = sum(_nbytes(t) for t in tensors)
    if total > total_mem:
        raise DeviceLimitError(f"the build's buffers need {total} bytes together, over the memory of {name} "
                               f"({total_mem} bytes, CL_DEVICE_GLOBAL_MEM_SIZE)")
    max_wg, max_items = int(device.max_work_group_size), [int(n) for n in device.max_work_item_sizes]
    for k, _, lsize in plan:
        if lsize is None:
            continue
        if len(lsize) > len(max_items) or any(n > m for n, m in zip(lsize, max_items)):
            raise DeviceLimitError(f"kernel {k.name!r} has work-groups of {list(lsize)} work-items, over what "
                                   f"{name} allows per dimension ({max_items}, CL_DEVICE_MAX_WORK_ITEM_SIZES)")
        if int(np.prod(lsize)) > max_wg:
            raise DeviceLimitError(f"kernel {k.name!r} has work-groups of {int(np.prod(lsize))} work-items, over "
                                   f"the {max_wg} of {name} (CL_DEVICE_MAX_WORK_GROUP_SIZE)")


def kernel_work_group_limit(kernel, device):
    """CL_KERNEL_WORK_GROUP_SIZE: the most work-items ``kernel`` runs in one group on ``device``, or None where
    the driver cannot say.  It is below the device's maximum where the kernel's registers or local memory run
    out first: on an H200 (NVIDIA's OpenCL, CUDA 13), 256 for dense's and softmax's auto kernels, against
    the 1024 the device allows and the calibration measured."""
    import pyopencl as cl

    try:
        return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device))
    except cl.Error:
        return None


def fit_work_group(lsize, most):
    """``lsize`` (innermost first, as OpenCL) shrunk to at most ``most`` work-items: outermost dimensions
    first, each to its next smaller divisor, so the innermost (consecutive addresses: coalesced on a GPU)
    stays widest.  Each dimension of the result divides the scheduled one, so a global size rounded up to
    whole scheduled groups is whole groups of the result too, and the kernel (which reads no local ids)
    computes the same.

    >>> fit_work_group((128, 4), 256)
    (128, 2)
    >>> fit_work_group((32, 32), 256)
    (32, 8)
    >>> fit_work_group((1024,), 256), fit_work_group((6, 5), None)
    ((256,), (6, 5))
    """
    lsize = tuple(lsize)
    if most is None or math.prod(lsize) <= most:
        return lsize
    fitted = list(lsize)
    for d in reversed(range(len(fitted))):
        while fitted[d] > 1 and math.prod(fitted) > most:
            fitted[d] = max(x for x in _divisors(fitted[d]) if x < fitted[d])
    return tuple(fitted)
