"""The op library: numpy-like tensor ops (``pa.ops``) and neural-network ops (``pa.nn``).

Every op is written as ``compute`` bodies; nothing here calls numpy on data.
"""

from .elementwise import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403
from . import nn  # noqa: F401
