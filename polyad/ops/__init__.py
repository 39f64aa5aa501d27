"""The op library: numpy-like tensor ops (``pa.ops``) and neural-network ops (``pa.nn``).

Every op is written as ``compute`` bodies; nothing here calls numpy on data.
"""

from .elementwise import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403
from . import nn  # noqa: F401

import sys as _sys

from ..te.tensor import set_tensor_ops as _set_tensor_ops

# X + Y, X @ W, X > 0 on tensors are these ops; te, below ops, does not import them
_set_tensor_ops(_sys.modules[__name__])
