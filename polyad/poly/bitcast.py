"""Stages that are their source's buffer read in another shape: XLA's bitcast, TVM's buffer binding.

A stage ``Y[v] = T[f(v)]`` with no arithmetic, over its whole box, of ``T``'s dtype and size, is a
bitcast of ``T`` when every point reads the element at its own linear offset:

    { [v] : v in box(Y) and lin_T(f(v)) != lin_Y(v) } = {}

(``lin`` the row-major offset).  flatten and its gradient ``dX[a, b, c, d] = H[a, 500b + 25c + d]``,
reshape, squeeze and expand_dims are; a transpose or a slice is not.  isl decides it exactly, floor
divisions and remainders included, so such a stage needs no kernel: its buffer is its source's.
"""

import islpy as isl

from ..te.expr import Load
from ..te.tensor import ComputeOp
from .convert import NotAffine, ToIsl, box
from .stage import PolyOp, statements_of


def _linear(aff_of, idx, shape, to):
    """The row-major offset of index expressions ``idx`` into ``shape``, as a PwAff of ``to``."""
    lin = to.const(0)
    for e, n in zip(idx, shape):
        lin = lin.mul(to.const(n)).add(aff_of(e))
    return lin


def bitcast_source(op):
    """The tensor whose buffer ``op``'s output is, read in ``op``'s shape; None when it is not a bitcast."""
    if not isinstance(op, (ComputeOp, PolyOp)) or len(op.outputs) != 1:
        return None
    try:
        sts = statements_of(op)
    except Exception:  # noqa: BLE001 - a stage without a statement form is not a bitcast
        return None
    if len(sts) != 1:
        return None
    st = sts[0]
    out = op.output(0)
    value = st.values[0] if len(st.values) == 1 else None
    if (st.combiner is not None or st.accumulate or len(st.vars) != st.n_out or not isinstance(value, Load)):
        return None
    src = value.tensor
    if (src.dtype != out.dtype or src.size != out.size or src is out or st.n_out != len(out.shape)
            or len(value.indices) != len(src.shape)):
        return None  # (a malformed stage is codegen's to report)
    to = ToIsl(st.vars)
    try:
        whole = box(st.vars)
        domain = st.domain.reset_tuple_id() if isinstance(st.domain, isl.Set) else None
        if domain is None or not domain.is_equal(whole):
            return None
        lin_src = _linear(to.aff, value.indices, src.shape, to)
        lin_out = _linear(to.aff, st.vars, out.shape, to)
    except (NotAffine, isl.Error):
        return None
    differs = lin_src.ne_set(lin_out).intersect(whole)
    return src if differs.is_empty() else None
