"""OpenCL devices: choosing one (PoCL's CPU device by default), contexts and queues."""

import os
from dataclasses import dataclass

from ..errors import DeviceError

INSTALL_HINT = (
    "no OpenCL platform found. Install PoCL's CPU driver with `pip install pocl-binary-distribution` "
    "(or `pip install 'polyad[pocl]'`), or a vendor OpenCL driver for your GPU"
)


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - pyopencl is a dependency
        raise DeviceError(f"pyopencl cannot be imported ({e}); {INSTALL_HINT}") from None
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


def supports_fp64(device):
    try:
        return bool(device.double_fp_config)
    except Exception:  # noqa: BLE001 - some drivers raise for the query itself
        return "cl_khr_fp64" in device.extensions


def select_device(spec=None):
    """The device ``spec`` names (a substring of ``platform | device``), else $POLYAD_DEVICE, else PoCL's CPU."""
    pairs = all_devices()
    spec = spec if spec is not None else os.environ.get("POLYAD_DEVICE") or None
    if spec is not None:
        if not isinstance(spec, str):
            cl = _cl()
            if isinstance(spec, cl.Device):
                return spec
            raise DeviceError(f"device must be a name substring or a pyopencl.Device, got {spec!r}")
        low = spec.lower()
        for p, d in pairs:
            if low in f"{p.name} | {d.name}".lower():
                return d
        listing = "\n  ".join(describe(p, d) for p, d in pairs)
        raise DeviceError(f"no OpenCL device matches {spec!r}; the devices are:\n  {listing}")
    cl = _cl()
    pocl_cpu = [d for p, d in pairs if "portable computing language" in p.name.lower() and d.type & cl.device_type.CPU]
    others = [d for p, d in pairs if d not in pocl_cpu]
    problems = []
    for d in pocl_cpu + others:
        why = compile_problem(d)
        if why is None:
            return d
        problems.append(f"{d.platform.name.strip()} | {d.name.strip()}: {why}")
    raise DeviceError(
        "no OpenCL device here can compile a kernel:\n  " + "\n  ".join(problems) + "\n" + FIX_HINT
    )


FIX_HINT = (
    "run `python3 -m polyad.runtime.doctor --fix` (on Debian/Ubuntu as root it installs the system PoCL, "
    "pocl-opencl-icd), or install a vendor OpenCL driver; POLYAD_DEVICE picks a device by name"
)

_PROBES = {}


def compile_problem(device):
    """None when ``device`` compiles a trivial kernel, else the compiler's first error line.

    pip's PoCL cannot compile on CPUs newer than its LLVM (e.g. AMD Zen 5: "unknown
    target CPU 'generic'"), so the default device is the first that really compiles.
    The answer is cached per process.
    """
    key = device.int_ptr
    if key not in _PROBES:
        cl = _cl()
        try:
            ctx = cl.Context([device])
            cl.Program(ctx, "__kernel void polyad_probe(__global int *a) { a[0] = 1; }").build()
            _PROBES[key] = None
        except Exception as e:  # noqa: BLE001 - whatever the platform says is the answer
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            errs = [ln for ln in lines if "error" in ln.lower() and "clBuildProgram" not in ln]
            _PROBES[key] = (errs or lines or [type(e).__name__])[0]
    return _PROBES[key]


@dataclass(eq=False)
class DeviceState:
    device: object
    context: object
    queue: object


_STATES = {}


def device_state(device):
    """A context and an in-order queue for ``device``, created once per process."""
    key = device.int_ptr
    st = _STATES.get(key)
    if st is None:
        cl = _cl()
        ctx = cl.Context([device])
        st = DeviceState(device, ctx, cl.CommandQueue(ctx, device))
        _STATES[key] = st
    return st


def device_key(device):
    """What identifies compiled code for ``device`` across processes."""
    p = device.platform
    return "|".join(
        str(x).strip() for x in (p.name, p.version, device.name, device.vendor, device.version, device.driver_version)
    )


def list_devices():
    """Lines describing the devices polyad can use, the default marked with ``*``."""
    pairs = all_devices()
    try:
        default = select_device()
    except DeviceError:
        default = None
    return [("* " if d == default else "  ") + describe(p, d) for p, d in pairs]
