"""OpenCL runtime: devices, compiled modules, the kernel cache, isolated compiles, calibration.

``pa.build`` itself is the build driver's (:mod:`polyad.pipeline`): it owns the
order of the passes and picks the device; this package only runs what it gets.
"""

from .device import all_devices, find_device
from .module import Module

__all__ = ["Module", "all_devices", "find_device"]
