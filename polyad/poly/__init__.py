"""Polyhedral layer: TE <-> isl, the statement form of stages, gradient simplification.

``simplify(tensors)`` rewrites raw-form gradient stages as :class:`PolyOp`\\ s
(see ``docs/simplifier.md``); ``estimate(tensors)`` counts their work with isl.
"""

from .estimate import Estimate, StageCost, estimate
from .simplify import simplify, simplify_op
from .stage import PolyOp, Statement, statements_of
from ..autodiff import set_simplifier

# pa.differentiate(optimize=True) simplifies every adjoint; autodiff is below poly and cannot import it
set_simplifier(simplify)

__all__ = ["simplify", "simplify_op", "estimate", "Estimate", "StageCost", "PolyOp", "Statement", "statements_of"]
