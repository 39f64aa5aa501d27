"""Tensor expressions: scalar nodes, tensors, computes, reductions, printing."""

from . import dtype
from .construct import as_expr, binary, call, cast, const, floordiv, floormod, select, unary
from .expr import OPS, Call, CommReducer, Const, Expr, IterVar, Load, Reduce, Var
from .reduce import comm_reducer, max, min, prod, reduce_axis, sum
from .intrin import *  # noqa: F401,F403
from .intrin import __all__ as _intrin_all
from .graph import cut, residuals
from .printer import show
from .tensor import (
    ComputeOp, Operation, PlaceholderOp, Tensor, compute, is_stop_gradient, placeholder, placeholders, stop_gradient,
    walk_ops,
)
from .visit import post_order, substitute, transform

__all__ = [
    "dtype", "OPS", "Call", "CommReducer", "Const", "Expr", "IterVar", "Load", "Reduce", "Var",
    "as_expr", "binary", "call", "cast", "comm_reducer", "const", "floordiv", "floormod", "max",
    "min", "prod", "reduce_axis", "select", "sum", "unary", "show", "ComputeOp", "Operation",
    "PlaceholderOp", "Tensor", "compute", "is_stop_gradient", "placeholder", "placeholders", "stop_gradient", "walk_ops", "post_order",
    "substitute", "transform", "cut", "residuals",
] + list(_intrin_all)
