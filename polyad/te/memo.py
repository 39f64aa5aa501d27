"""A memo of a pure function of a stage, by the stage's identity.

Operations are immutable, so what is computed from one (its cache-key text, its tuning key) holds as
long as it lives; entries go with it (weak keys).  Thread-safe: a Dask worker runs the tuner's
tasks in threads.
"""

import functools
import threading
import weakref


def op_memo(fn):
    """``fn(op)`` computed once per op (an op that cannot be weakly referenced is not memoised)."""
    table = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    @functools.wraps(fn)
    def memoised(op):
        try:
            with lock:
                hit = table.get(op)
        except TypeError:  # not weakly referenceable
            return fn(op)
        if hit is None:
            hit = fn(op)
            with lock:
                table[op] = hit
        return hit

    return memoised
