"""``pa.estimate``: the work of computing tensors, counted exactly with isl.

* ``iterations``: executed statement instances, the isl point count
  (``Set.count_val``) of every statement domain (a plain compute's domain is
  the box of its data and reduction axes);
* ``flops``: per instance, the arithmetic on values (every operator whose
  result is a float, and comparisons of floats; index arithmetic inside
  tensor reads and casts are free), plus one combine per instance of a
  reduction statement; shared subexpressions count once;
* ``memory``: bytes of the intermediate buffers (every computed stage that
  is not one of the requested tensors).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..te import dtype as dt
from ..te.expr import Call, Load
from ..te.tensor import PlaceholderOp, as_tensor_list, walk_ops
from .convert import count
from .stage import statements_of


@dataclass(frozen=True)
class StageCost:
    name: str
    iterations: int
    flops: int
    bytes: int
    intermediate: bool

    def __str__(self):
        kind = "intermediate" if self.intermediate else "output"
        return f"{self.name}: {self.iterations} iterations, {self.flops} flops, {self.bytes} bytes ({kind})"


@dataclass(frozen=True)
class Estimate:
    """Totals over all stages, and the per-stage costs in dependency order."""

    iterations: int
    flops: int
    memory: int
    stages: tuple

    def stage(self, name):
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def __str__(self):
        head = f"{self.iterations} iterations, {self.flops} flops, {self.memory} bytes of intermediates"
        return "\n".join([head] + ["  " + str(s) for s in self.stages])


def value_flops(values):
    """Arithmetic operations of one evaluation of ``values`` (index arithmetic excluded)."""
    seen, n = set(), 0
    stack = list(values)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Load):
            continue  # indices are address arithmetic
        if isinstance(e, Call):
            if e.op != "cast" and (dt.is_float(e.dtype) or any(dt.is_float(a.dtype) for a in e.args)):
                n += 1
            stack.extend(e.args)
    return n


def statement_cost(st):
    """(iterations, flops) of one statement."""
    it = count(st.domain)
    # a combine is one operation for sum, max, min and products; an argmax's is six (the NaN tests, the tie on the
    # index, the selects)
    per = value_flops(st.values) + (max(1, value_flops(st.combiner.result)) if st.combiner is not None else 0)
    return it, it * per


def estimate(tensors):
    """``pa.estimate(tensors)``: iterations, flops and intermediate memory of computing ``tensors``.

    Everything the tensors depend on is counted once per stage.

    :param tensors: a tensor or a list of tensors.
    :returns: an ``Estimate``: ``iterations``, ``flops`` and ``memory`` (bytes of the intermediate stages) in all,
        and ``stages``, one ``StageCost`` per stage in dependency order (``Estimate.stage(name)`` finds one); counts
        are exact isl point counts of the statements' domains.
    :raises PolyadError: when ``tensors`` is not a tensor or a list of tensors.
    """
    outs = as_tensor_list(tensors, "estimate")
    out_ops = {id(t.op) for t in outs}
    stages = []
    for op in walk_ops(outs):
        if isinstance(op, PlaceholderOp):
            continue
        it = fl = 0
        for st in statements_of(op):
            i, f = statement_cost(st)
            it += i
            fl += f
        nbytes = sum(
            math.prod(op.shape) * np.dtype(op.output_dtype(k)).itemsize  # Python ints: exact for huge shapes
            for k in range(op.num_outputs)
        )
        stages.append(StageCost(op.name, it, fl, nbytes, id(op) not in out_ops))
    return Estimate(
        sum(s.iterations for s in stages),
        sum(s.flops for s in stages),
        sum(s.bytes for s in stages if s.intermediate),
        tuple(stages),
    )


__all__ = ["estimate", "Estimate", "StageCost", "value_flops", "statement_cost"]
