"""The roofline of a backward: how fast it could be on the device, whatever its schedule.

A program that reads its inputs once and writes its outputs once, on a device that streams ``dram_gbs`` GB/s
and multiply-adds at ``peak_gflops``, takes at least

    max(flops / peak_gflops, compulsory bytes / dram_gbs)

(Williams, Waterman and Patterson's roofline).  ``flops`` are ``pa.estimate``'s exact isl counts of the
gradient stages (a multiply-add is two, as the calibration counts them); the compulsory bytes are those of the
inputs the program reads and the outputs it writes.  An output that is a bitcast of an input (flatten's
gradient) needs no kernel and moves nothing.

It is the classic, DRAM-bound roofline: a working set that stays in the caches between runs (a small
workload timed again and again) can beat it, and a time under it says so, not that the schedule is magic.
Kernel launches are not counted.  The bench reports each backward's time over it: where a schedule is
already near its roofline, no schedule can be much faster (issue 11's geomean of tuned over auto).
"""

from dataclasses import dataclass

import numpy as np

from ..te.tensor import PlaceholderOp, walk_ops


@dataclass(frozen=True)
class Roofline:
    """A program's least time on a device: ``seconds``, and what bounds it (``bound``: "memory" or "compute").

    :param flops: arithmetic of the computed stages (isl counts).
    :param bytes: compulsory traffic: the inputs read and the outputs written, each once.
    :param peak_gflops: the device's multiply-add rate at its best vector width.
    :param dram_gbs: the device's streaming bandwidth.
    """

    flops: int
    bytes: int
    peak_gflops: float
    dram_gbs: float

    @property
    def compute_s(self):
        return self.flops / (self.peak_gflops * 1e9)

    @property
    def memory_s(self):
        return self.bytes / (self.dram_gbs * 1e9)

    @property
    def seconds(self):
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self):
        return "compute" if self.compute_s > self.memory_s else "memory"

    def __str__(self):
        return (f"{self.seconds * 1e3:.3g} ms ({self.bound}: {self.flops:,} flops at {self.peak_gflops:g} GFLOP/s, "
                f"{self.bytes:,} bytes at {self.dram_gbs:g} GB/s)")


def _nbytes(t):
    return t.size * np.dtype(t.dtype).itemsize  # Python ints: exact for huge shapes


def traffic(outputs, inputs):
    """``(flops, compulsory bytes)`` of a program computing ``outputs`` from ``inputs`` (as ``pa.build`` takes
    them: computed tensors among ``inputs`` are fed, and what only they needed is not computed).

    :param outputs: a tensor or a list of tensors.
    :param inputs: the program's inputs.
    :returns: two Python ints.
    """
    from ..codegen import input_aliases
    from ..poly.estimate import estimate
    from ..te.graph import cut

    outs, ins = cut(outputs, inputs)
    flops = estimate(outs).flops if outs else 0
    # an output that is an input's buffer read in another shape (pa.build's rule: no kernel) costs neither its
    # write nor, for it, a read
    aliased = input_aliases(walk_ops(outs), ins, outs)
    kernel_outs = [t for t in outs if id(t) not in aliased]
    read = {}
    for op in walk_ops(kernel_outs):
        if isinstance(op, PlaceholderOp):
            read[id(op)] = op.output(0)
    written = {id(t): t for t in kernel_outs if not isinstance(t.op, PlaceholderOp)}
    return flops, sum(map(_nbytes, read.values())) + sum(map(_nbytes, written.values()))


def roofline(outputs, inputs, model):
    """The :class:`Roofline` of a program computing ``outputs`` from ``inputs`` on a device's
    :class:`~polyad.schedule.DeviceModel` (its calibrated ``peak_gflops`` and ``dram_gbs``)."""
    flops, nbytes = traffic(outputs, inputs)
    return Roofline(flops, nbytes, model.peak_gflops, model.dram_gbs)


def vjp_inputs(grads, H, Y, inputs, save="reductions"):
    """The inputs ``pa.vjp``'s backward of ``Y`` takes for ``grads`` (given head ``H``): the forward's ``inputs``,
    ``H``, ``Y`` and the residuals its forward saves (``pa.residuals(grads, [H], save=save)``, as ``pa.vjp``)."""
    from ..te.graph import residuals

    saved = residuals(grads, [H], save=save)
    return list(inputs) + [H] + [Y] + [r for r in saved if r is not Y]


__all__ = ["Roofline", "roofline", "traffic", "vjp_inputs"]
