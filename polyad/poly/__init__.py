"""Polyhedral layer: TE <-> isl, the statement form of stages, gradient simplification.

``simplify(tensors)`` rewrites raw-form gradient stages as :class:`PolyOp`\\ s
(see ``docs/simplifier.md``); ``estimate(tensors)`` counts their work with isl;
``differentiate`` and ``jacobian`` are autodiff's with ``simplify`` passed in (``pa.differentiate``).
"""

from .estimate import Estimate, StageCost, estimate
from .simplify import simplify, simplify_op
from .stage import PolyOp, Statement, statements_of
from .gradients import differentiate, jacobian

__all__ = ["differentiate", "jacobian", "simplify", "simplify_op", "estimate", "Estimate", "StageCost", "PolyOp", "Statement", "statements_of"]
