"""``fwd, bwd = pa.vjp(outputs, inputs)``: a compiled forward that saves what the backward needs.

JAX's ``vjp`` linearises a function into a forward that returns its outputs and the residuals, and a
backward that maps heads (cotangents) to gradients.  Here both are built modules:

- ``fwd`` computes the outputs *and* the residuals (``pa.residuals(grads, heads, save)``: by default
  JAX's ``dots_saveable`` policy, the stages with a reduction), leaving the residuals and the
  inputs on the device in an opaque :class:`Residuals`;
- ``bwd`` takes those and the heads and computes the gradients alone: none of the forward again.

Plain ``pa.build(pa.differentiate(...))`` still works: it recomputes the forward's intermediates
inside the backward, which costs more per step but needs no memory between the two calls.
"""

import time

import numpy as np

from ..errors import ArityError, PolyadError
from ..te import dtype as dt
from ..te.memo import Recent
from ..te.tensor import PlaceholderOp, Tensor, as_tensor_list, placeholder

__all__ = ["vjp", "vjp_from_gradients", "Residuals", "VJPForward", "VJPBackward"]


class Residuals:
    """What one forward run leaves for the backward: device buffers of its inputs and saved tensors.

    Opaque: pass it to the backward of the same ``pa.vjp``.  ``tensors`` names what is saved (for
    inspection); the buffers stay on the device until the object is dropped.
    """

    def __init__(self, owner, buffers, tensors):
        self._owner = owner
        self._buffers = buffers
        self.tensors = tuple(tensors)

    def __repr__(self):
        return f"<polyad.Residuals of {len(self.tensors)} saved tensors: {[t.name for t in self.tensors]}>"


def _is_device(a):
    import pyopencl as cl

    return isinstance(a, cl.Buffer) or (hasattr(a, "base_data") and hasattr(a, "offset"))


def _inputs_on_device(module, arrays, names):
    """Device buffers of ``arrays`` for ``module``'s first inputs: numpy arrays are copied (checked as
    a module checks them), device buffers are used as they are."""
    import pyopencl as cl

    from ..runtime.module import _buffer
    from ..te.tensor import array_for
    from ..errors import DtypeError, ShapeError

    bufs = []
    for t, a in zip(names, arrays):
        if _is_device(a):
            bufs.append(_buffer(a, t))
        else:
            host = np.ascontiguousarray(array_for(t, a, "the array", ShapeError, DtypeError))
            bufs.append(cl.Buffer(module.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                  hostbuf=host if host.dtype != bool else host.view(np.uint8)))
    return bufs


class VJPForward:
    """``y, res = fwd(*inputs)``: the outputs (one array, or a list) and the :class:`Residuals`.

    Inputs are numpy arrays or pyopencl buffers, in the order given to ``pa.vjp``.  When every input
    is a device buffer, the outputs are returned as device buffers too (nothing crosses to the host).
    ``fwd.module`` is the built forward (outputs then saved tensors); ``fwd.source`` its OpenCL C.
    """

    def __init__(self, module, inputs, outputs, saved, single):
        self.module = module
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.saved = list(saved)
        self._single = single

    @property
    def source(self):
        return self.module.source

    def time(self, *arrays, repeat=10, warmup=1):
        """Seconds per run of the forward (outputs and saved tensors), data on the device."""
        return self.module.time(*arrays, repeat=repeat, warmup=warmup)

    def __call__(self, *arrays):
        if len(arrays) != len(self.inputs):
            raise ArityError(f"the forward takes {len(self.inputs)} arrays "
                             f"({', '.join(t.name for t in self.inputs)}), got {len(arrays)}")
        on_device = bool(arrays) and all(_is_device(a) for a in arrays)
        ins = _inputs_on_device(self.module, arrays, self.inputs)
        outs = self.module.output_buffers(ins)
        self.module.run(*ins, *outs)
        n = len(self.outputs)
        res = Residuals(self, ins + outs, self.saved)  # the backward reads the outputs it saves too
        ys = outs[:n] if on_device else [self.module.download(t, b) for t, b in zip(self.outputs, outs[:n])]
        return (ys[0] if self._single else ys), res


class VJPBackward:
    """``grads = bwd(res, *heads)``: the gradients with respect to ``wrt``, in its order (a list).

    ``res`` is what the forward of the same ``pa.vjp`` returned; a head per output, numpy arrays or
    device buffers (then the gradients are device buffers too).  ``bwd.module`` is the built backward.
    """

    def __init__(self, module, forward, heads, grads):
        self.module = module
        self._forward = forward
        self.heads = list(heads)
        self.grads = list(grads)

    @property
    def source(self):
        return self.module.source

    def __call__(self, res, *heads):
        on_device = bool(heads) and all(_is_device(h) for h in heads)
        bufs = self._buffers(res, heads)
        self.module.run(*bufs)
        outs = bufs[-len(self.grads):]
        return outs if on_device else [self.module.download(t, b) for t, b in zip(self.grads, outs)]

    def time(self, res, *heads, repeat=10, warmup=1):
        """Seconds per run of the backward alone (a numpy array of ``repeat`` values), data on the device."""
        from ..runtime.module import _check_count

        _check_count("repeat", repeat, 1)
        _check_count("warmup", warmup, 0)
        bufs = self._buffers(res, heads)
        for _ in range(warmup):
            self.module.run(*bufs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.module.run(*bufs)
            times.append(time.perf_counter() - t0)
        return np.array(times)

    def _buffers(self, res, heads):
        """The backward module's buffers: the forward's inputs, the heads, the saved tensors, fresh outputs."""
        if not isinstance(res, Residuals) or res._owner is not self._forward:
            raise PolyadError("the backward takes the Residuals its own forward returned, then the heads")
        if len(heads) != len(self.heads):
            raise ArityError(f"the backward takes the residuals and {len(self.heads)} heads "
                             f"({', '.join(t.name for t in self.heads)}), got {len(heads)} heads")
        n_in = len(self._forward.inputs)
        hs = _inputs_on_device(self.module, heads, self.heads)
        ins = [*res._buffers[:n_in], *hs, *res._buffers[n_in:]]
        return ins + self.module.output_buffers(ins)


def vjp(outputs, inputs, wrt=None, *, schedule="auto", device=None, save="reductions"):
    """``fwd, bwd = pa.vjp(outputs, inputs)``: a compiled forward that saves, a backward that uses.

    ``y, res = fwd(*arrays)`` runs the forward on arrays for ``inputs`` and returns the outputs and
    the residuals (kept on the device); ``grads = bwd(res, *heads)`` returns the gradient of
    ``sum_k <head_k, output_k>`` with respect to each tensor of ``wrt``, as
    ``pa.differentiate(output, wrt, head)`` defines it (summed over the outputs).  The backward
    computes none of the forward again: it reads what the forward saved (``save``, as
    ``pa.residuals`` takes it: ``"reductions"``, JAX's ``dots_saveable``, recomputes elementwise
    stages from saved reductions; ``"all"`` saves every tensor the backward reads).

    :param outputs: the output tensor, or a list of them (a float dtype each).
    :param inputs: the placeholders the forward takes, in the order its arrays come.
    :param wrt: the tensors to differentiate with respect to (placeholders among ``inputs``);
        default: every float tensor of ``inputs``.
    :param schedule: as ``pa.build`` takes it, for both modules.
    :param device: as ``pa.build`` takes it.
    :param save: ``"reductions"`` (default) or ``"all"``.
    :returns: ``(fwd, bwd)``, a :class:`VJPForward` and a :class:`VJPBackward`.
    :raises PolyadError: when an input is not a placeholder, a ``wrt`` tensor is not among the
        inputs, or ``save`` is not known.
    :raises DtypeError: when an output is not a float tensor (from ``pa.differentiate``).
    :raises BuildError: when a module does not build (see ``pa.build``).
    """
    from ..poly import differentiate
    from ..ops.elementwise import add

    single = isinstance(outputs, Tensor)
    outs = as_tensor_list(outputs, "vjp outputs")
    ins = as_tensor_list(inputs, "vjp inputs")
    for t in ins:
        if not isinstance(t.op, PlaceholderOp):
            raise PolyadError(f"vjp: input {t.name!r} is computed; the forward's inputs are placeholders")
    wrt = [t for t in ins if dt.is_float(t.dtype)] if wrt is None else as_tensor_list(wrt, "vjp wrt")
    known = {id(t) for t in ins}
    for t in wrt:
        if id(t) not in known:
            raise PolyadError(f"vjp: {t.name!r} is not among the inputs {[i.name for i in ins]}")
    # each is a module's output: listed twice, the build said so of the gradients' and residuals' names
    for what, ts in (("outputs", outs), ("wrt", wrt)):
        twice = [t.name for i, t in enumerate(ts) if any(u is t for u in ts[:i])]
        if twice:
            raise PolyadError(f"vjp: {what} lists {twice[0]!r} twice")
    heads, grads = [], None
    for y in outs:
        h, gs = _gradients(y, wrt, differentiate)
        heads.append(h)
        grads = gs if grads is None else [add(a, b) for a, b in zip(grads, gs)]
    return _split(grads, heads, ins, outs, single, schedule, device, save)


#: ``pa.vjp``'s (output, wrt) gradients, the 16 most recently used (:func:`_gradients`)
_GRADIENTS = Recent(16)


def forget_gradients():
    """Empty ``pa.vjp``'s memo of gradients: its next call of any graph differentiates (a cold build, timed)."""
    _GRADIENTS.clear()


def _gradients(y, wrt, differentiate):
    """``(head, pa.differentiate(y, wrt, head))`` for a fresh placeholder ``head``, computed once for the same
    ``y`` and ``wrt`` (the objects: graphs are immutable) among the 16 most recently used.  A second
    ``pa.vjp`` of a graph, in a training loop say, then costs two warm builds, not a differentiation (chain's
    200 stages took 70 ms, lenet_step's 37).  The entries hold their graphs, so no id is reused while one
    lives; a bounded LRU, not weak references: a gradient refers to its output, which a weak key would keep
    alive for ever."""
    key = (id(y), tuple(id(t) for t in wrt))
    hit = _GRADIENTS.get(key)
    if hit is not None:
        return hit[2], hit[3]
    head = placeholder(y.shape, y.dtype, f"d_{y.name}")
    grads = list(differentiate(y, wrt, head))
    _GRADIENTS.put(key, (y, tuple(wrt), head, grads))
    return head, grads


def vjp_from_gradients(grads, heads, inputs, outputs=(), *, schedule="auto", device=None, save="reductions"):
    """``fwd, bwd`` as ``pa.vjp`` builds them, for a gradient graph you already have.

    ``grads`` reads ``heads`` (placeholders) and ``inputs`` (placeholders): a gradient written by
    hand as TE, or one from ``pa.differentiate``.  The forward computes ``outputs`` (none by default:
    ``fwd(*arrays)`` then returns ``([], res)``) and the residuals of ``grads`` with respect to
    ``heads`` (``pa.residuals(grads, heads, save)``); ``bwd(res, *heads)`` computes ``grads`` from
    them.  ``pa.vjp`` is ``pa.differentiate`` followed by this; the benchmarks feed their hand-written
    gradients through it, so that they run exactly as ``pa.vjp``'s backward does.

    :param grads: the gradient tensors (what ``bwd`` returns, in this order).
    :param heads: the placeholders ``grads`` reads that ``bwd`` is given after the residuals.
    :param inputs: the placeholders the forward takes, in the order its arrays come.
    :param outputs: tensors the forward computes and returns besides the residuals (default none).
    :param schedule: as ``pa.build`` takes it, for both modules.
    :param device: as ``pa.build`` takes it.
    :param save: ``"reductions"`` (default) or ``"all"``, as ``pa.residuals`` takes it.
    :returns: ``(fwd, bwd)``, a :class:`VJPForward` and a :class:`VJPBackward`.
    :raises PolyadError: when an input or a head is not a placeholder, or ``save`` is not known.
    :raises BuildError: when a module does not build (see ``pa.build``).
    """
    outs = as_tensor_list(list(outputs), "vjp outputs") if outputs else []
    ins = as_tensor_list(inputs, "vjp inputs")
    heads = as_tensor_list(heads, "vjp heads")
    for what, ts in (("input", ins), ("head", heads)):
        for t in ts:
            if not isinstance(t.op, PlaceholderOp):
                raise PolyadError(f"vjp: {what} {t.name!r} is computed; it must be a placeholder")
    return _split(as_tensor_list(grads, "vjp gradients"), heads, ins, outs, False, schedule, device, save)


def _split(grads, heads, ins, outs, single, schedule, device, save):
    """The two modules: the forward (outputs, then the residuals that are not outputs) from ``ins``,
    the backward (``grads``) from the inputs, the heads and what the forward computed."""
    from ..te.graph import residuals
    from . import _build, tuned

    saved = residuals(grads, heads, save=save)
    out_ids = {id(y) for y in outs}
    extra = [r for r in saved if id(r) not in out_ids]
    # a saved tensor that is also an output is read from the output's buffer: fed once
    order = outs + extra
    fwd_module, fwd_missed, dev = _build(order, ins, schedule, device)
    fwd = VJPForward(fwd_module, ins, outs, order, single)
    bwd_module, bwd_missed, _ = _build(grads, ins + heads + order, schedule, device)
    # a log tuned on the backward alone (`polyad tune --workload`, the bench) leaves the forward to auto as
    # meant: pa.tuned(log) warns only when it applied to neither module
    if fwd_missed and bwd_missed:
        tuned.warn_missed(schedule, f"pa.vjp's forward ({fwd_missed}) or backward ({bwd_missed})", dev,
                          stacklevel=3)
    return fwd, VJPBackward(bwd_module, fwd, heads, grads)
