"""OpenCL runtime: devices, compiled modules, the kernel cache."""

from ..te.tensor import Tensor
from .device import list_devices, select_device
from .module import Module


def build(outputs, inputs, schedule="auto", device=None):
    """``pa.build(outputs, inputs, schedule="auto", device=None) -> Module``.

    Generates one OpenCL program for every stage ``outputs`` need (see
    :mod:`polyad.codegen`), compiles it (or loads it from the kernel cache) for
    ``device`` (a substring of ``"platform | device"``, a ``pyopencl.Device``,
    or None for ``$POLYAD_DEVICE``, else PoCL's CPU device) and returns the
    callable :class:`Module`.  ``mod(*arrays)`` returns one array when
    ``outputs`` is a single tensor, else a list.
    """
    from ..codegen import generate

    dev = select_device(device)
    if isinstance(schedule, str) and schedule == "auto":
        from ..schedule import auto_schedule

        schedule = auto_schedule(outputs, device=dev)  # the model of the device it runs on
    program = generate(outputs, inputs, schedule)
    return Module(program, dev, single_output=isinstance(outputs, Tensor))


__all__ = ["build", "Module", "list_devices", "select_device"]
