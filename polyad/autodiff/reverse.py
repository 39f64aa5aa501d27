"""Reverse accumulation over the tensor graph: ``pa.differentiate`` and ``pa.jacobian``."""

import functools

from ..errors import DtypeError, PolyadError, ShapeError
from ..te import dtype as dt
from ..te.tensor import ComputeOp, Tensor, as_tensor_list, is_stop_gradient, placeholders
from .blocks import _safe, add_tensors, check_head, diff_building_block, identity_head, zeros


class Gradients(list):
    """The result of :func:`differentiate`: the gradients, in the order of the inputs.

    ``adjoints`` maps every tensor on a path from an input to the output to its
    adjoint; ``adjoint_summands`` maps such a tensor to ``{consumer: that
    consumer's contribution}`` (the summands add up to the adjoint).
    """

    def __init__(self, grads, adjoints, adjoint_summands):
        super().__init__(grads)
        self.adjoints = adjoints
        self.adjoint_summands = adjoint_summands

    def __repr__(self):
        return f"Gradients({list.__repr__(self)})"


def _simplify(tensors, simplifier):
    tensors = list(tensors)
    return tensors if simplifier is None else list(simplifier(tensors))


def _edges(t, override):
    if t in override:
        return list(override[t][0])
    if is_stop_gradient(t.op):  # a constant to reverse mode: nothing behind it is on a path
        return []
    # any other operation keeps its edges, so its building block can say it has no derivative
    return list(getattr(t.op, "input_tensors", ()))


def _post_order(output, override):
    """Tensors reachable from ``output`` along the (possibly overridden) edges, inputs first."""
    order, seen = [], set()
    stack = [(output, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if t in seen:
            continue
        seen.add(t)
        stack.append((t, True))
        for c in reversed(_edges(t, override)):
            if c not in seen:
                stack.append((c, False))
    return order


def _check_override(override):
    if override is None:
        return {}
    if not isinstance(override, dict):
        raise PolyadError(f"override must be a dict {{tensor: (inputs, fn)}}, got {override!r}")
    out = {}
    for t, spec in override.items():
        if not isinstance(t, Tensor):
            raise PolyadError(f"override keys must be tensors, got {t!r}")
        try:
            ins, fn = spec
            ins = [ins] if isinstance(ins, Tensor) else list(ins)
        except (TypeError, ValueError):
            raise PolyadError(f"override of {t.name!r}: expected (inputs, fn), got {spec!r}") from None
        for x in ins:
            if not isinstance(x, Tensor):
                raise PolyadError(f"override of {t.name!r}: {x!r} is not a tensor")
        if not callable(fn):
            raise PolyadError(f"override of {t.name!r}: {fn!r} is not callable")
        out[t] = (ins, fn)
    return out


def _check_contribution(g, consumer, inp, prefix, who):
    want = prefix + inp.shape
    if not isinstance(g, Tensor):
        raise PolyadError(f"{who} of {consumer.name!r} w.r.t. {inp.name!r} returned {g!r}, not a tensor")
    if tuple(g.shape) != want:
        raise ShapeError(
            f"{who} of {consumer.name!r} w.r.t. {inp.name!r} has shape {g.shape}, expected {want} "
            f"(head prefix {prefix} + input shape {inp.shape})"
        )
    if g.dtype != inp.dtype:
        raise DtypeError(f"{who} of {consumer.name!r} w.r.t. {inp.name!r} has dtype {g.dtype}, expected {inp.dtype}")
    return g


def differentiate(output, inputs=None, head=None, *, fdiff=None, override=None, optimize=True,
                  simplifier=None):
    """Reverse-mode gradients of ``output`` w.r.t. ``inputs``, as :func:`polyad.differentiate` documents them,
    with the simplifier passed in rather than imported: autodiff sits below the polyhedral layer.

    :param optimize: the building blocks' own simplifications, then ``simplifier`` on every adjoint.
    :param simplifier: ``simplifier(tensors) -> equivalent tensors``; None for none (the building blocks' form).
        ``pa.differentiate`` passes the exact ISL simplifier, :func:`polyad.poly.simplify`.
    :raises PolyadError: also when ``simplifier`` is not callable.
    """
    if not isinstance(output, Tensor):
        raise PolyadError(f"differentiate: the output must be a tensor, got {output!r}")
    if not dt.is_float(output.dtype):
        raise DtypeError(
            f"differentiate: the output {output.name!r} {output.dtype}{list(output.shape)} is not a float tensor"
        )
    override = _check_override(override)
    if simplifier is not None and not callable(simplifier):
        raise PolyadError(f"differentiate: the simplifier must be callable, got {simplifier!r}")
    if inputs is None:
        inputs = placeholders(output)
    else:
        inputs = as_tensor_list(inputs, f"differentiate inputs (output {output.name!r} {output.shape})")
    if head is None:
        head = identity_head(output)
    prefix = check_head(output, head)
    if fdiff is None:
        fdiff = functools.partial(diff_building_block, optimize=optimize, simplifier=simplifier)
    elif not callable(fdiff):
        raise PolyadError(f"differentiate: fdiff must be callable, got {fdiff!r}")

    wanted = set(inputs)
    order = _post_order(output, override)
    depends = {}
    for t in order:
        depends[t] = dt.is_float(t.dtype) and (t in wanted or any(depends.get(c, False) for c in _edges(t, override)))

    # on a path: depends on an input and reached from the output through float tensors that do
    live = {output} if depends[output] else set()
    for t in reversed(order):
        if t in live:
            live.update(c for c in _edges(t, override) if depends.get(c, False))

    adjoints, summands = {}, {}
    for t in reversed(order):
        if t not in live:
            continue
        if t is output:
            adj = head
        else:
            parts = list(summands.get(t, {}).values())
            if not parts:  # its only consumers' custom gradients returned None for it
                continue
            adj = parts[0] if len(parts) == 1 else add_tensors(parts, f"d_{_safe(t.name)}")
        adjoints[t] = adj
        children = [c for c in _edges(t, override) if c in live]
        if not children:
            continue
        if t in override:
            ins, fn = override[t]
            grads = fn(t, list(ins), adj)
            if isinstance(grads, Tensor):
                grads = [grads]
            try:
                grads = list(grads)
            except TypeError:
                raise PolyadError(f"override of {t.name!r} returned {grads!r}: expected a list of adjoint "
                                  f"tensors, one per input (None for none)") from None
            if len(grads) != len(ins):
                raise PolyadError(
                    f"override of {t.name!r} returned {len(grads)} adjoints for {len(ins)} inputs"
                )
            for c, g in zip(ins, grads):
                if g is None or c not in live or t in summands.setdefault(c, {}):
                    continue
                summands[c][t] = _check_contribution(g, t, c, prefix, "override")
        else:
            for c in children:
                g = fdiff(t, c, adj)
                summands.setdefault(c, {})[t] = _check_contribution(g, t, c, prefix, "fdiff")

    grads = []
    for x in inputs:
        if x in adjoints:
            grads.append(adjoints[x])
        else:
            grads.append(zeros(prefix + x.shape, x.dtype, f"d_{_safe(x.name)}_zero"))
    if optimize:
        keys = list(adjoints)
        simplified = _simplify([adjoints[k] for k in keys] + grads, simplifier)
        new = dict(zip((id(a) for a in [adjoints[k] for k in keys] + grads), simplified))
        adjoints = {k: new[id(adjoints[k])] for k in keys}
        grads = [new[id(g)] for g in grads]
    return Gradients(grads, adjoints, summands)


def jacobian(output, input, optimize=True, simplifier=None):  # noqa: A002 - TVM's name
    """The Jacobian of ``output`` w.r.t. its immediate input ``input``, as :func:`polyad.jacobian` documents it,
    with ``simplifier`` as :func:`differentiate` takes it."""
    if not isinstance(output, Tensor) or not isinstance(input, Tensor):
        raise PolyadError(f"jacobian needs two tensors, got {output!r} and {input!r}")
    if not isinstance(output.op, ComputeOp) or not any(t is input for t in output.op.input_tensors):
        raise PolyadError(
            f"jacobian: {input.name!r} {input.shape} is not an immediate input of {output.name!r} {output.shape}; "
            "use pa.differentiate for indirect dependencies"
        )
    if not dt.is_float(output.dtype):
        raise DtypeError(f"jacobian: the output {output.name!r} {output.dtype}{list(output.shape)} is not a float tensor")
    return diff_building_block(output, input, identity_head(output), optimize=optimize, simplifier=simplifier)
