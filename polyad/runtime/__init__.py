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

    ``inputs`` may hold computed tensors (saved forward activations, see
    ``pa.residuals``): the module then takes an array for each, in the
    inputs' order, and neither computes it nor any stage only it needs.
    """
    from ..codegen import generate
    from ..codegen.cache import load_program, program_key, store_program
    from ..te.graph import cut
    from ..te.tensor import as_tensor_list
    from .device import device_key

    dev = select_device(device)
    user_inputs = as_tensor_list(inputs, "build inputs")
    # fed computed tensors become placeholders first: the cache key, the auto-scheduler and codegen
    # see only the graph that is built
    outs, inputs = cut(as_tensor_list(outputs, "build outputs"), user_inputs)
    outputs = outs[0] if isinstance(outputs, Tensor) else outs
    # a known build skips scheduling and code generation: the program cache is keyed by the
    # graph's structure, the schedule as given, the device and polyad's code
    key = program_key(outputs, inputs, schedule, device_key(dev))
    program = load_program(key, outputs, inputs) if key is not None else None
    if program is None:
        if isinstance(schedule, str) and schedule == "auto":
            from ..schedule import auto_schedule

            schedule = auto_schedule(outputs, device=dev)  # the model of the device it runs on
        program = generate(outputs, inputs, schedule)
        if key is not None:
            store_program(key, program)
    return Module(program, dev, single_output=isinstance(outputs, Tensor), inputs=user_inputs)


__all__ = ["build", "Module", "list_devices", "select_device"]
