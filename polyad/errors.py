"""The one error hierarchy of polyad.

Every error a user can provoke is a :class:`PolyadError`.  The subclasses also
derive from the matching builtin (``ValueError``, ``TypeError``, ...) so code
that catches those keeps working.  Messages name the tensor and the axis.
"""


class PolyadError(Exception):
    """Base class of every error raised by polyad on bad input."""


class ShapeError(PolyadError, ValueError):
    """Wrong rank, mismatched or non-broadcastable shapes, bad sizes."""


class DtypeError(PolyadError, TypeError):
    """Mixing dtypes without a cast, a float op on integers, a bad dtype."""


class AxisError(PolyadError, ValueError):
    """An axis out of range, or a reduce axis used outside its reduction."""


class ArityError(PolyadError, TypeError):
    """A compute function or a call with the wrong number of arguments."""


class IndexingError(PolyadError, IndexError):
    """A tensor read with a wrong number of indices or a non-integer index."""


class OutOfBoundsError(PolyadError, IndexError):
    """A read outside a tensor's bounds, found while evaluating or building."""


class EvaluationError(PolyadError, ValueError):
    """Bad feed to ``pa.evaluate``: missing input, wrong shape or dtype."""


class FeedError(PolyadError, ValueError):
    """A bad list of tensors given as data (``pa.build`` inputs): one listed twice, a fed output."""


class NotDifferentiableError(PolyadError, TypeError):
    """An operation that has no derivative rule."""


class BuildError(PolyadError, RuntimeError):
    """An OpenCL program failed to compile: carries the source and the log."""

    def __init__(self, message, source=None, log=None):
        super().__init__(message)
        self.source = source
        self.log = log


class DeviceError(PolyadError, RuntimeError):
    """No OpenCL platform/device, or a device lacking a needed feature."""


class InstallError(PolyadError, RuntimeError):
    """polyad's Python environment is incomplete: a module it or a library it calls needs does not import, in
    this process or in a child process polyad starts.  Never a verdict on the device, so nothing is recorded
    about the device."""


class DeviceLimitError(DeviceError):
    """A build over a limit of its device: a buffer over the largest allocation, a work-group too large."""


class ScheduleError(PolyadError, ValueError):
    """An illegal or malformed schedule."""


class TuningLogError(PolyadError, ValueError):
    """A corrupt tuning log or cache entry that cannot be ignored."""
