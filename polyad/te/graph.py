"""Pure functions on tensor graphs: feeding computed tensors as data, and residuals.

* :func:`cut` replaces every read of some computed tensors by fresh
  placeholders (same name, shape and dtype): the graph that takes those
  tensors as data, as ``pa.build`` and ``pa.evaluate`` do when they are fed;
* :func:`residuals` is JAX's partial evaluation in one question: which
  computed tensors a gradient reads that do not depend on the head (the
  values a framework saves from the forward pass).

Both leave their input graph untouched.
"""

import dataclasses

from ..errors import FeedError, PolyadError
from .expr import Load
from .memo import graph_memo
from .tensor import PlaceholderOp, as_tensor_list, placeholder, walk_ops
from .visit import transform

__all__ = ["cut", "map_values", "rebuild", "redirected", "residuals"]


def map_values(op, fn, name=None):
    """``op`` with ``visit.transform(values, fn)`` applied to its values, renamed to ``name``: the same op
    when nothing changes.

    Works on any stage form: a ComputeOp (``body``) or an op defined by
    ``statements`` whose ``values`` read tensors (``poly.stage.PolyOp``).
    """
    name = op.name if name is None else name
    if hasattr(op, "body"):
        body = transform(tuple(op.body), fn)
        if name == op.name and all(a is b for a, b in zip(body, op.body)):
            return op
        return dataclasses.replace(op, name=name, body=tuple(body))
    if hasattr(op, "statements"):
        stmts, changed = [], name != op.name
        for st in op.statements:
            vals = transform(tuple(st.values), fn)
            changed |= any(a is not b for a, b in zip(vals, st.values))
            stmts.append(dataclasses.replace(st, values=tuple(vals)))
        return dataclasses.replace(op, name=name, statements=tuple(stmts)) if changed else op
    raise PolyadError(f"stage {op.name!r}: cannot rebuild a {type(op).__name__}")


def redirected(tmap):
    """A ``visit.transform`` function that redirects reads of ``tmap``'s tensors (id(old) -> new tensor)."""

    def fn(node, rebuilt):
        if isinstance(node, Load):
            nt = tmap.get(id(node.tensor))
            if nt is not None:
                return Load(nt, rebuilt.indices)
        return None

    return fn


def rebuild(op, tmap):
    """``op`` with its reads of ``tmap``'s tensors (id(old) -> new tensor) redirected."""
    return map_values(op, redirected(tmap))


def cut(outputs, tensors):
    """``(new_outputs, placeholders)``: the graph of ``outputs`` taking ``tensors`` as data.

    Every read of a computed tensor of ``tensors`` becomes a read of a fresh
    placeholder of the same name, shape and dtype; the stages downstream of it
    are rebuilt (same names) and the stages only it needed are gone.
    ``placeholders`` is ``tensors`` in order, each computed one replaced by its
    placeholder (placeholders stay themselves).  A tensor the outputs do not
    read is accepted, as an unused placeholder is.  Raises FeedError naming the
    tensor when one is listed twice or is also one of ``outputs``.

    The same ``outputs`` and ``tensors`` (the objects) give the same new graph while it is among the 32
    most recently cut: a warm build of ``pa.vjp``'s backward, fed the forward's residuals, then keys
    stages it has keyed before.  Rebuilt, they made every per-stage memo miss, and keying them again took
    half of lenet_step's warm ``pa.vjp`` (5 of 10 ms).
    """
    outs = as_tensor_list(outputs, "outputs")
    given = as_tensor_list(tensors, "inputs")
    new_outs, phs = _cut(outs, given)
    return list(new_outs), list(phs)


@graph_memo(32)
def _cut(outs, given):
    seen = set()
    for t in given:
        if id(t) in seen:
            raise FeedError(f"tensor {t.name!r} is given twice among the inputs {[g.name for g in given]}")
        seen.add(id(t))
    out_ids = {id(t) for t in outs}
    fed, phs = {}, []
    for t in given:
        if isinstance(t.op, PlaceholderOp):
            phs.append(t)
            continue
        if id(t) in out_ids:
            raise FeedError(
                f"tensor {t.name!r} is both an output and a fed input: an output is computed, "
                "a fed tensor is given; drop it from one of the lists"
            )
        fed[id(t)] = placeholder(t.shape, t.dtype, t.name)
        phs.append(fed[id(t)])
    if not fed:
        return tuple(outs), tuple(phs)
    tmap = dict(fed)  # id(old tensor) -> new tensor: the fed ones, then the rebuilt stages' outputs
    for op in walk_ops(outs, given):
        if isinstance(op, PlaceholderOp) or not any(id(t) in tmap for t in op.input_tensors):
            continue
        new = rebuild(op, tmap)
        for i in range(op.num_outputs):
            if id(op.output(i)) not in fed:  # a multi-output op may be rebuilt with one output fed
                tmap[id(op.output(i))] = new.output(i)
    return tuple(tmap.get(id(t), t) for t in outs), tuple(phs)


_SAVE = ("all", "reductions")


def _reduces(op):
    """A stage with a reduction (a compute over a Reduce, or a statement with a combiner)."""
    from .expr import Reduce

    if hasattr(op, "body"):
        return any(isinstance(b, Reduce) for b in op.body)
    return any(getattr(st, "combiner", None) is not None for st in getattr(op, "statements", ()))


def residuals(outputs, unknown, save="all"):
    """The computed tensors ``outputs`` read that do not depend on ``unknown``, where a stage that does reads them.

    ``unknown`` are placeholders (a gradient's head ``H``).  The result is what
    JAX's partial evaluation calls residuals: the values a framework saves
    from the forward pass so that the backward needs only them, the inputs
    and the head.  Feed them to ``pa.build(grads, inputs + residuals)`` and the
    backward computes none of the forward again.  Outputs that do not depend on
    ``unknown`` are not residuals (the backward computes them).  Ordered as the
    graph is (dependency order, then output index); stages whose reads are all
    of placeholders give none.

    ``save="reductions"`` is JAX's ``dots_saveable`` rematerialisation policy:
    only stages with a reduction (matmuls, convolutions, row statistics, a
    window argmax) are saved; a reduction-free residual (elementwise, a pad, a
    reshape) is recomputed from what it reads, so its own computed inputs take
    its place.  An elementwise chain then saves nothing, and a padded
    convolution saves its input, not the padded copy.

    :param outputs: a tensor or a list of tensors (the gradients).
    :param unknown: a placeholder or a list of placeholders the backward gets only then (the head).
    :param save: ``"all"`` (every residual) or ``"reductions"`` (only stages with a reduction).
    :returns: the list of residual tensors, in graph order.
    :raises PolyadError: when ``save`` is neither ``"all"`` nor ``"reductions"``, ``outputs`` or ``unknown`` is not
        a tensor or a list of tensors, or an ``unknown`` tensor is not a placeholder.
    """
    if save not in _SAVE:
        raise PolyadError(f"residuals: save must be one of {_SAVE}, got {save!r}")
    outs = as_tensor_list(outputs, "residuals outputs")
    unknown = as_tensor_list(unknown, "residuals unknown")
    for t in unknown:
        if not isinstance(t.op, PlaceholderOp):
            raise PolyadError(f"residuals: unknown tensor {t.name!r} is not a placeholder")
    ops = walk_ops(outs)
    unk = {id(t.op) for t in unknown}
    dep = {}
    for op in ops:
        dep[id(op)] = id(op) in unk or any(dep[id(t.op)] for t in op.input_tensors)
    picked = set()
    for op in ops:
        if dep[id(op)] and not isinstance(op, PlaceholderOp):
            for t in op.input_tensors:
                if not dep[id(t.op)] and not isinstance(t.op, PlaceholderOp):
                    picked.add(id(t))
    if save == "reductions":
        # walk back from the frontier: a reduction-free residual gives way to its computed inputs
        by_id = {id(t): t for op in ops for t in op.outputs}
        stack, picked, seen = list(picked), set(), set()
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            op = by_id[i].op
            if _reduces(op):
                picked.add(i)
            else:
                stack.extend(id(t) for t in op.input_tensors if not isinstance(t.op, PlaceholderOp))
    return [t for op in ops for t in op.outputs if id(t) in picked]
