"""polyad: exact, simplified gradients of tensor expressions, compiled to OpenCL.

The public API (see docs/ and ../shared/DESIGN.md); nothing else lives here.
"""

from . import errors
from .errors import (
    ArityError, AxisError, BuildError, DeviceError, DeviceLimitError, DtypeError, EvaluationError, FeedError, IndexingError,
    InstallError, NotDifferentiableError, OutOfBoundsError, PolyadError, ScheduleError, ShapeError, TuningLogError,
)
from .te import (
    Tensor, cast, comm_reducer, compute, const, floordiv, floormod, max, min, placeholder, prod,
    reduce_axis, select, stop_gradient, sum,
)
from .te.intrin import (
    abs, ceil, cos, erf, exp, floor, log, log1p, log2, logical_and, logical_not, logical_or, pow,
    round, rsqrt, sigmoid, sign, sin, sqrt, tanh, trunc,
)
from .te.graph import residuals
from .evaluate import evaluate
from . import ops
from .ops import nn
from .poly import differentiate, estimate, jacobian
from . import schedule
from .schedule import Schedule, StageSchedule
from .schedule import show_graph as show
from .pipeline import build
from .pipeline.vjp import vjp
from .schedule.tuning import tuned, tuning_log
from .tuner import tune

__version__ = "0.1.0"
