"""``pa.evaluate``: the numpy reference interpreter of any tensor graph.

It is the oracle of the test suite, so it is written for obviousness first and
speed second:

* each stage is evaluated once, vectorised over its whole domain: an axis
  variable is an ``arange`` shaped to broadcast along its own dimension, and a
  reduction adds one dimension per reduce axis after the output dimensions;
* a stage whose domain is too large is split into blocks along its largest
  output axis, so memory stays bounded;
* reads outside a tensor are errors, except under a false ``select`` branch
  or a false ``where=``: values are computed at clamped indices, then each read
  is checked where it is really computed (the union of the masks of the paths
  that reach it), both in one pass over the expression's DAG;
* integer ``//`` and ``%`` floor (Python and isl semantics).
"""

import math
from collections.abc import Mapping

import numpy as np

from .errors import EvaluationError, OutOfBoundsError, PolyadError
from .te import dtype as dt
from .te.expr import Call, Const, Load, Reduce, Var
from .te.semantics import COMPUTED, NUMPY_OPS, call_value
from .te.tensor import ComputeOp, PlaceholderOp, Tensor, array_for, as_tensor_list, walk_ops
from .te.visit import post_order

#: Elements of the largest array one block of a stage may broadcast to.
BLOCK_ELEMENTS = 1 << 23

#: CommReducer.kind() -> (numpy reduction, the name of the combining op in NUMPY_OPS)
REDUCTIONS = {"sum": (np.sum, "add"), "prod": (np.prod, "mul"), "max": (np.max, "max"), "min": (np.min, "min")}


def neutral(kind, dtype):
    """The neutral element of a standard reduction kind in ``dtype``: what a masked-out point contributes."""
    return {"sum": 0, "prod": 1, "max": dt.min_value(dtype), "min": dt.max_value(dtype)}[kind]


def _and(m, c):
    if m is None:
        return c
    return np.logical_and(m, c)


class Block:
    """Evaluates expressions of one stage over a block of its domain.

    ``env`` maps ``id(var)`` to an array broadcastable to the block (see
    :func:`axis_grid`); ``ev(e, mask)`` checks reads only where ``mask`` holds.
    Other stage forms (poly's statements) evaluate through it too.
    """

    def __init__(self, values, env, rank, where):
        self.values = values  # id(tensor) -> ndarray
        self.env = env  # id(var) -> ndarray broadcastable to the block
        self.rank = rank
        self.where = where  # a description of the stage, for error messages
        self.memo = {}

    def ev(self, e, mask=None):
        """The value of ``e``, its reads checked where ``mask`` holds (None: everywhere).

        A node's value does not depend on the mask (reads are made at clamped indices), only which of its reads
        must be inside their tensors does.  So values are computed once a node, children first, and the reads
        are then checked under the union of the masks each node is evaluated under, parents first: both linear
        in the DAG (keyed by expression and mask, a select nested 12 deep reusing its value took 14 s, and one
        200 operations deep was a RecursionError)."""
        order = post_order(e)
        value = self._values(e, order)
        self._check(e, mask, order)
        return value

    def _values(self, root, order):
        memo = self.memo
        for e in order:
            if id(e) in memo:
                continue
            v = self._value(e, lambda x: memo[id(x)][1])
            if v.dtype == np.int32:  # loaded, a constant or a cast: operands of int32 arithmetic are 64-bit
                v = v.astype(np.int64)
            memo[id(e)] = (e, v)  # hold the node so its id is not reused
        return memo[id(root)][1]

    def _value(self, e, val):
        if isinstance(e, Const):
            return np.asarray(e.value, dtype=e.dtype)
        if isinstance(e, Var):
            try:
                return self.env[id(e)]
            except KeyError:
                raise PolyadError(f"{self.where}: variable {e.name!r} has no value here") from None
        if isinstance(e, Load):
            arr = self.values[id(e.tensor)]
            if not e.indices:
                return arr[()]
            return arr[tuple(_clamped(val(i), n) for i, n in zip(e.indices, e.tensor.shape))]
        if isinstance(e, Call):
            return call_value(e, [val(a) for a in e.args])
        if isinstance(e, Reduce):
            raise PolyadError(f"{self.where}: a reduction inside an expression (only allowed at the top of a body)")
        raise PolyadError(f"{self.where}: cannot evaluate {e!r}")

    def _check(self, root, mask, order):
        """OutOfBoundsError for a read of ``root``'s DAG outside its tensor where it is evaluated: under ``mask``,
        narrowed by each select's condition for its branches and by an ``and``/``or``'s first operand for its
        second (which is not evaluated at all where the first decides)."""
        if not any(isinstance(n, Load) and n.indices for n in order):
            return
        everywhere = object()
        reach = {id(root): everywhere if mask is None else mask}

        def reaches(node, m):
            old = reach.get(id(node))
            reach[id(node)] = (m if old is None else everywhere if m is everywhere or old is everywhere
                               else np.logical_or(old, m))

        def within(m, c):
            return c if m is everywhere else np.logical_and(m, c)

        def value(x):
            return self.memo[id(x)][1]

        for e in reversed(order):  # parents before children
            m = reach.get(id(e))
            if m is None:
                continue  # not evaluated: a branch a constant condition never takes
            if isinstance(e, Load):
                self._check_load(e, None if m is everywhere else m)
            if not isinstance(e, Call):
                continue
            args = e.args
            if e.op == "select":
                reaches(args[0], m)
                c = value(args[0])
                if c.ndim == 0:
                    reaches(args[1] if c else args[2], m)
                else:
                    reaches(args[1], within(m, c))
                    reaches(args[2], within(m, np.logical_not(c)))
            elif e.op in ("and", "or"):
                reaches(args[0], m)
                a = value(args[0])
                guard = a if e.op == "and" else np.logical_not(a)
                if a.ndim:
                    reaches(args[1], within(m, guard))
                elif bool(guard):
                    reaches(args[1], m)
            else:
                for a in args:
                    reaches(a, m)

    def _check_load(self, e, mask):
        t = e.tensor
        for ax, (i, n) in enumerate(zip(e.indices, t.shape)):
            ix = np.asarray(self.memo[id(i)][1])
            if ix.size == 0:
                continue
            lo, hi = ix.min(), ix.max()
            if lo >= 0 and hi < n:
                continue
            bad = (ix < 0) | (ix >= n)
            if mask is not None:
                bad = np.logical_and(bad, mask)
            if bad.any():
                ixb, badb = np.broadcast_arrays(ix, bad)
                value = ixb[tuple(np.argwhere(badb)[0])]
                raise OutOfBoundsError(
                    f"{self.where}: read of tensor {t.name!r} at axis {ax} index {int(value)} is outside [0, {n})"
                    f" (indices {', '.join(str(i) for i in e.indices)})"
                )


def _clamped(ix, n):
    """Index array ``ix`` within ``[0, n)`` (where it is outside, the read's value is not used)."""
    return ix if ix.ndim == 0 and 0 <= ix < n or ix.size and ix.min() >= 0 and ix.max() < n else np.clip(ix, 0, n - 1)


def _feed_by_id(feed):
    if not isinstance(feed, Mapping):
        raise EvaluationError(f"the feed must be a dict {{placeholder: array}}, got {type(feed).__name__}")
    by_id = {}
    for k, v in feed.items():
        if not isinstance(k, Tensor):
            raise EvaluationError(f"feed keys must be tensors, got {k!r}")
        by_id[id(k)] = v
    return by_id


def _check_feed(placeholder_tensors, by_id):
    """id(tensor) -> the fed array of each of ``placeholder_tensors`` (and fed computed tensors), checked."""
    vals = {}
    for t in placeholder_tensors:
        if id(t) not in by_id:
            raise EvaluationError(f"no value fed for input tensor {t.name!r} {t.dtype}{list(t.shape)}")
        vals[id(t)] = array_for(t, by_id[id(t)], "the fed array", EvaluationError, EvaluationError)
    return vals


def evaluate(outputs, feed):
    """``pa.evaluate(outputs, {placeholder: array})``: compute tensors with numpy.

    Returns one array for one tensor, a list for a list.  Each stage is
    evaluated once, however many times it is used.  ``feed`` may also give
    computed tensors (saved forward activations): their arrays are used as
    given, checked like a placeholder's, and what only they need is not
    evaluated.  A fed tensor cannot also be one of ``outputs``.

    :param outputs: a tensor or a list of tensors to compute.
    :param feed: a dict ``{tensor: array}``: an array (or nested list, or scalar) of the tensor's shape and dtype
        for every placeholder the outputs need, and optionally for computed tensors.
    :returns: a numpy array of the tensor's shape and dtype, or a list of them for a list of outputs.
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises EvaluationError: when ``feed`` is not a dict of tensors, an input is not fed, a fed array has another
        shape or dtype (or is ragged), a fed tensor is also an output, or a stage does not fit in memory.
    :raises OutOfBoundsError: when a stage reads a tensor outside its bounds at a point it really computes (not
        under a false ``select`` branch or ``where=``).
    """
    single = isinstance(outputs, Tensor)
    outs = as_tensor_list(outputs, "evaluate")
    by_id = _feed_by_id(feed)
    fed = [t for t in feed if not isinstance(t.op, PlaceholderOp)]
    out_ids = {id(t) for t in outs}
    for t in fed:
        if id(t) in out_ids:
            raise EvaluationError(
                f"tensor {t.name!r} is both an output and fed: an output is computed, a fed tensor is given"
            )
    ops = walk_ops(outs, fed)
    placeholders = [op.output(0) for op in ops if isinstance(op, PlaceholderOp)]
    values = _check_feed(placeholders + fed, by_id)
    # a fed input the outputs do not read is checked too: a wrong shape there is a mistake all the same
    _check_feed([t for t in feed if isinstance(t.op, PlaceholderOp) and id(t) not in values], by_id)
    fed_ids = {id(t) for t in fed}
    with np.errstate(all="ignore"):
        for op in ops:
            if isinstance(op, PlaceholderOp):
                continue
            results = evaluate_op(op, values)
            for t, r in zip(op.outputs, results):
                if id(t) not in fed_ids:  # a multi-output op computed for another output keeps the fed one
                    values[id(t)] = r
    res = [values[id(t)] for t in outs]
    return res[0] if single else res


def evaluate_op(op, values):
    """The output arrays of one operation, given the arrays of its inputs."""
    fn = _eval_compute if isinstance(op, ComputeOp) else getattr(op, "evaluate_numpy", None)
    if fn is None:
        raise PolyadError(f"stage {op.name!r}: no numpy evaluation for {type(op).__name__}")
    try:
        return fn(op, values) if fn is _eval_compute else fn(values)
    except MemoryError:  # a block of a huge reduction: the blocks never split reduction axes
        raise EvaluationError(
            f"stage {op.name!r} {list(op.shape)}: out of memory in pa.evaluate (the numpy reference is for small shapes)"
        ) from None


def _eval_compute(op, values):
    shape = op.shape
    red = op.reduce_axis
    rsize = int(np.prod([a.extent for a in red], dtype=np.int64)) if red else 1
    outs = [alloc(shape, b.dtype, f"stage {op.name!r}") for b in op.body]
    for block in blocks(shape, rsize):
        res = _eval_block(op, values, block)
        sl = tuple(slice(a, b) for a, b in block)
        for o, r in zip(outs, res):
            o[sl] = r
    return outs


def alloc(shape, dtype, where, fill=None):
    """A stage's output array; EvaluationError naming the stage when numpy cannot hold it."""
    try:
        return np.empty(shape, dtype=dtype) if fill is None else np.full(shape, fill, dtype=dtype)
    except (ValueError, MemoryError):
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        raise EvaluationError(
            f"{where}: its {dtype}{list(shape)} output ({nbytes:.3g} bytes) does not fit in memory; "
            "pa.evaluate is the numpy reference, for small shapes"
        ) from None


def blocks(shape, rsize):
    """Split the output index space into boxes of at most BLOCK_ELEMENTS points (times rsize)."""
    pending = [tuple((0, s) for s in shape)]
    while pending:
        box = pending.pop()
        size = int(np.prod([b - a for a, b in box], dtype=np.int64)) * rsize
        widths = [b - a for a, b in box]
        if size <= BLOCK_ELEMENTS or not widths or max(widths) <= 1:
            yield box
            continue
        d = int(np.argmax(widths))
        a, b = box[d]
        mid = (a + b) // 2
        pending.append(box[:d] + ((mid, b),) + box[d + 1:])
        pending.append(box[:d] + ((a, mid),) + box[d + 1:])


def _eval_block(op, values, box):
    n = len(op.axis)
    red = op.reduce_axis
    rank = n + len(red)
    env = {}
    for d, (a, (lo, hi)) in enumerate(zip(op.axis, box)):
        env[id(a)] = axis_grid(lo, hi, d, rank)
    for j, r in enumerate(red):
        env[id(r)] = axis_grid(r.lo, r.hi, n + j, rank)
    blk = Block(values, env, rank, f"stage {op.name!r}")
    data_shape = tuple(hi - lo for lo, hi in box)
    if not red:
        return [np.broadcast_to(blk.ev(b), data_shape) for b in op.body]
    return _reduce(op.body, blk, data_shape, n)


def axis_grid(lo, hi, d, rank):
    shp = [1] * rank
    shp[d] = hi - lo
    return np.arange(lo, hi, dtype=np.int64).reshape(shp)


def _reduce(body, blk, data_shape, n):
    r0 = body[0]
    comb = r0.combiner
    rdims = tuple(range(n, blk.rank))
    full = data_shape + tuple(a.extent for a in r0.axis)
    cond = blk.ev(r0.condition)
    mask = None if cond.ndim == 0 and bool(cond) else cond
    srcs = [blk.ev(s, mask) for s in r0.source]
    kind = comb.kind()
    if kind is not None:
        src = srcs[0]
        ident = comb.identity[0].value
        fn, opname = REDUCTIONS[kind]
        fill = neutral(kind, r0.dtype)
        if mask is not None:
            src = np.where(np.broadcast_to(mask, np.broadcast_shapes(np.shape(mask), src.shape)), src, np.asarray(fill, src.dtype))
        src = np.broadcast_to(src, full)
        red = fn(src, axis=rdims).astype(r0.dtype)
        if ident != fill:
            red = NUMPY_OPS[opname](np.asarray(ident, r0.dtype), red).astype(r0.dtype)
        return [red]
    # A general (tuple) reducer: combine neighbouring reduce points pairwise, log2(count) vectorised
    # steps instead of one Python step per point.  A comm_reducer is associative with a neutral
    # identity, and the pairs keep their order (earlier point on the left), so this is the fold in
    # iteration order, identity first (up to float rounding for float combiners).
    rcount = int(np.prod(full[n:], dtype=np.int64))
    parts = [np.broadcast_to(s, full).reshape(data_shape + (rcount,)) for s in srcs]
    if mask is not None:  # a point outside where= contributes the identity
        c = np.broadcast_to(mask, full).reshape(data_shape + (rcount,))
        parts = [np.where(c, x, np.asarray(i.value, i.dtype)) for x, i in zip(parts, comb.identity)]
    ident = [np.full(data_shape + (1,), i.value, dtype=i.dtype) for i in comb.identity]

    def combine(lhs, rhs):
        env = {id(v): a for v, a in zip(comb.lhs, lhs)}
        env.update((id(v), b) for v, b in zip(comb.rhs, rhs))
        shape = np.broadcast_shapes(lhs[0].shape, rhs[0].shape)
        fb = Block(blk.values, env, len(shape), blk.where)
        return [np.broadcast_to(fb.ev(r), shape).astype(COMPUTED.get(r.dtype, r.dtype), copy=False)
                for r in comb.result]

    while parts[0].shape[-1] > 1:
        if parts[0].shape[-1] % 2:
            parts = [np.concatenate([x, i], axis=-1) for x, i in zip(parts, ident)]
        parts = combine([x[..., 0::2] for x in parts], [x[..., 1::2] for x in parts])
    acc = combine(ident, parts)
    return [acc[b.value_index][..., 0] for b in body]


__all__ = [
    "evaluate", "evaluate_op", "NUMPY_OPS", "REDUCTIONS", "BLOCK_ELEMENTS", "Block", "alloc", "axis_grid", "blocks",
    "neutral",
]
