"""OpenCL devices: choosing one (PoCL's CPU device by default), contexts and queues."""

import os
from dataclasses import dataclass

from ..errors import DeviceError

INSTALL_HINT = (
    "no OpenCL platform found. Install PoCL's CPU driver with `pip install pocl-binary-distribution` "
    "(or `pip install 'polyad[pocl]'`), or a vendor OpenCL driver for your GPU"
)


_opened = False  # whether this process has listed the OpenCL devices (the driver started its threads then)
_forked_from = None  # the parent's pid, in a child forked after that


def _after_fork():
    global _forked_from
    if _opened:
        _forked_from = os.getppid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def check_process():
    """DeviceError in a child forked after its parent opened OpenCL: the driver's state is copied without its
    threads, and every call that waits (a build, a run) hung there."""
    if _forked_from is not None:
        raise DeviceError(
            f"OpenCL was opened in process {_forked_from} before it forked this one, and a driver's state does "
            f"not survive a fork (its calls hang here): start child processes with multiprocessing's 'spawn' "
            f"or 'forkserver' (multiprocessing.get_context('spawn')), or open OpenCL only in the children")


def _cl():
    global _opened
    check_process()
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - pyopencl is a dependency
        raise DeviceError(f"pyopencl cannot be imported ({e}); {INSTALL_HINT}") from None
    _opened = True
    return cl


def all_devices():
    """Every (platform, device) pair, in platform order; DeviceError if there is none."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    pairs = []
    for p in platforms:
        try:
            pairs += [(p, d) for d in p.get_devices()]
        except cl.Error:
            continue
    if not pairs:
        raise DeviceError(INSTALL_HINT)
    return pairs


def describe(platform, device):
    """One line: ``platform | device | type | compute units | fp64``."""
    cl = _cl()
    fp64 = "fp64" if supports_fp64(device) else "no fp64"
    return (
        f"{platform.name.strip()} | {device.name.strip()} | {cl.device_type.to_string(device.type)} | "
        f"{device.max_compute_units} compute units | {fp64}"
    )


def is_gpu(device):
    """Whether ``device`` is a GPU: the one device-kind test (the model's ``kind``, the launch plan)."""
    return bool(int(device.type) & _cl().device_type.GPU)


def supports_fp64(device):
    try:
        return bool(device.double_fp_config)
    except Exception:  # noqa: BLE001 - some drivers raise for the query itself
        return "cl_khr_fp64" in device.extensions


def find_device(spec):
    """The device ``spec`` names: a ``pyopencl.Device``, or a substring of ``"platform | device"``."""
    cl = _cl()
    if isinstance(spec, cl.Device):
        return spec
    if not isinstance(spec, str):
        raise DeviceError(f"device must be a name substring or a pyopencl.Device, got {spec!r}")
    pairs = all_devices()
    low = spec.lower()
    for p, d in pairs:
        if low in f"{p.name} | {d.name}".lower():
            return d
    listing = "\n  ".join(describe(p, d) for p, d in pairs)
    raise DeviceError(f"no OpenCL device matches {spec!r}; the devices are:\n  {listing}")


def find_by_key(key):
    """The device whose :func:`device_key` is ``key`` (a worker process finds its parent's device so)."""
    for _, d in all_devices():
        if device_key(d) == key:
            return d
    raise DeviceError(f"no OpenCL device has the key {key!r} in this process")


FIX_HINT = (
    "run `python3 -m polyad.runtime.doctor --fix` (on Debian/Ubuntu as root it installs the system PoCL, "
    "pocl-opencl-icd), or install a vendor OpenCL driver; POLYAD_DEVICE picks a device by name"
)


@dataclass(eq=False)
class DeviceState:
    """A device's context, its in-order queue (copies, and everything that relies on order) and, where the
    device runs commands out of order, a queue for a module's kernels, ordered by their events alone."""

    device: object
    context: object
    queue: object
    unordered: object = None


_STATES = {}


def device_state(device):
    """A context, an in-order queue and (where the device has them) an out-of-order one for ``device``,
    created once per process."""
    key = device.int_ptr
    st = _STATES.get(key)
    if st is None:
        cl = _cl()
        ctx = cl.Context([device])
        st = DeviceState(device, ctx, cl.CommandQueue(ctx, device), _unordered_queue(cl, ctx, device))
        _STATES[key] = st
    return st


def _unordered_queue(cl, ctx, device):
    """An out-of-order queue on ``device``, or None where it has none (or ``POLYAD_IN_ORDER`` is set)."""
    flag = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    if os.environ.get("POLYAD_IN_ORDER") or not int(device.queue_properties) & int(flag):
        return None
    try:
        return cl.CommandQueue(ctx, device, properties=flag)
    except cl.Error:  # advertised but refused: kernels keep the in-order queue
        return None


# environment variables that change the code a driver generates for the same device
_CODEGEN_ENV = ("POCL_LLVM_CPU_NAME", "POCL_EXTRA_BUILD_FLAGS", "POCL_WORK_GROUP_METHOD", "POCL_VECTORIZER_REMARKS")


def device_key(device):
    """What identifies compiled code for ``device`` across processes (the environment that changes it too)."""
    p = device.platform
    parts = [str(x).strip() for x in (p.name, p.version, device.name, device.vendor, device.version,
                                      device.driver_version)]
    parts += [f"{v}={os.environ[v]}" for v in _CODEGEN_ENV if os.environ.get(v)]
    return "|".join(parts)
