"""Reverse-mode automatic differentiation of tensor expressions (see docs/autodiff.md).

* :func:`differentiate`: reverse accumulation over the tensor graph;
* :func:`jacobian`: the Jacobian of a tensor w.r.t. an immediate input;
* :func:`diff_building_block`: one consumer's adjoint contribution (the default ``fdiff``);
* :data:`RULES`: the derivative table, one rule per scalar operator.

Each takes the simplifier that ``optimize=True`` applies as an argument (``simplifier=``): the exact one
lives in ``polyad.poly``, above this layer, and ``pa.differentiate`` (:func:`polyad.poly.differentiate`)
passes it.  Called here without one, they return the building blocks' form.
"""

from .blocks import diff_building_block, identity_head
from .reverse import Gradients, differentiate, jacobian
from .rules import RULES

__all__ = ["differentiate", "jacobian", "diff_building_block", "identity_head", "Gradients", "RULES"]
