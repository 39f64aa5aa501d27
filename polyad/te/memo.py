"""Memos: :func:`op_memo` of a pure function of a stage, by the stage's identity, :func:`graph_memo` of a pure
function of whole graphs, by their tensors' identities, and :class:`Recent`, the most recently used entries of a
memo keyed by value.

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


def graph_memo(size):
    """``fn(*args)`` computed once per args among the ``size`` most recently used, each arg a list or tuple of
    tensors (keyed by the objects, whichever the sequence's type: graphs are immutable) or a hashable value (keyed
    by value).

    The entries hold their args, so no id in a key is reused while it lives; a bounded LRU, not weak keys: a result
    that refers to its graph (:func:`polyad.te.graph.cut`'s) would keep a weak key alive for ever.  ``fn`` must
    return an immutable value.  A warm ``pa.build`` of a graph it has built keys the graph again, and ``pa.vjp``'s
    backward is a graph fed the forward's residuals, rebuilt on every call without this
    (:func:`polyad.te.graph.cut`).
    """
    def wrap(fn):
        table = Recent(size)

        @functools.wraps(fn)
        def memoised(*args):
            key = tuple(("ids",) + tuple(map(id, a)) if isinstance(a, (list, tuple)) else ("value", a) for a in args)
            hit = table.get(key)
            if hit is not None:
                return hit[1]
            out = fn(*args)
            table.put(key, (tuple(tuple(a) if isinstance(a, list) else a for a in args), out))
            return out

        memoised.cache_clear = table.clear
        return memoised

    return wrap


class Recent:
    """A memo that holds its ``size`` most recently used entries (values are never None).

    For results keyed by what they are computed from (isl text, the tile), where the keys keep coming and
    nothing tells when one is dead: a tuner's candidates regenerate mostly unchanged stages.
    """

    def __init__(self, size=256):
        from collections import OrderedDict

        self.size = size
        self._table = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._table.get(key)
            if hit is not None:
                self._table.move_to_end(key)
            return hit

    def put(self, key, value):
        """Remember ``value`` under ``key``, forgetting the least recently used beyond ``size``; returns ``value``."""
        with self._lock:
            self._table[key] = value
            self._table.move_to_end(key)
            while len(self._table) > self.size:
                self._table.popitem(last=False)
        return value

    def clear(self):
        with self._lock:
            self._table.clear()

    def __len__(self):
        return len(self._table)
