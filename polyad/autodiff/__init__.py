"""Reverse-mode automatic differentiation of tensor expressions (see docs/autodiff.md).

* :func:`differentiate`: reverse accumulation over the tensor graph;
* :func:`jacobian`: the Jacobian of a tensor w.r.t. an immediate input;
* :func:`diff_building_block`: one consumer's adjoint contribution (the default ``fdiff``);
* :data:`RULES`: the derivative table, one rule per scalar operator;
* :func:`set_simplifier`: where ``polyad.poly`` plugs in the simplifier ``optimize=True`` runs.
"""

from .blocks import diff_building_block, identity_head
from .reverse import Gradients, differentiate, jacobian, set_simplifier
from .rules import RULES

__all__ = ["differentiate", "jacobian", "diff_building_block", "identity_head", "Gradients", "RULES", "set_simplifier"]
