"""A PolyOp as an equivalent graph of plain computes (what autodiff differentiates).

The statement form is for codegen; autodiff only knows ``compute`` bodies.  A
PolyOp ``T`` with statements ``S1 .. Sk`` is equivalent to

    Sk'[o]  = value_k(o)                                     (assignment)
    Sk'[o]  = reduce_k(value_k(o, r), r in box_k, where=dom_k(o, r))   (reduction)
    T[o]    = select(o in proj(dom_k), Sk'[o] (+ T_{k-1}[o] if accumulating), T_{k-1}[o])

folded over the statements in order (T_0 = 0): domains become guards again.
Differentiating that graph and simplifying the result is exact, so gradients
of gradients work.
"""

from ..errors import NotDifferentiableError
from ..te.construct import select
from ..te.expr import Const, IterVar
from ..te.tensor import compute
from ..te.visit import substitute
from .convert import FromIsl, bounds
from .numpy_eval import statement_condition


def _combine(combiner, a, b):
    return substitute(combiner.result[0], {combiner.lhs[0]: a, combiner.rhs[0]: b})


def as_compute(op):
    """The output tensor of a plain-compute graph equal to the single-output PolyOp ``op``."""
    if op.num_outputs != 1:
        raise NotDifferentiableError(f"stage {op.name!r}: tuple-valued polyhedral stages have no derivative")
    dtype = op.dtypes[0]
    shape = op.shape
    acc = None
    for k, st in enumerate(op.statements):
        if st.domain.is_empty():
            continue
        part = _statement_compute(op, st, k)
        covered = FromIsl(st.out_vars).cond_of_set(st.out_domain)

        def step(*o, prev=acc, part=part, covered=covered, st=st):
            cov = substitute(covered, dict(zip(st.out_vars, o)))
            new = part[o]
            if st.accumulate and prev is not None:
                new = _combine(st.combiner, prev[o], new)
            old = prev[o] if prev is not None else Const(0, dtype)
            return select(cov, new, old)

        acc = compute(shape, step, name=f"{op.name}_upto{k}")
    if acc is None:
        return compute(shape, lambda *o: Const(0, dtype), name=op.name)
    return acc


def _statement_compute(op, st, k):
    cond = statement_condition(st)
    value = st.values[0]
    n = st.n_out
    name = f"{op.name}_s{k}"
    if st.combiner is None:
        return compute(op.shape, lambda *o: select(substitute(cond, dict(zip(st.vars, o))),
                                                   substitute(value, dict(zip(st.vars, o))),
                                                   Const(0, op.dtypes[0])), name=name)
    bb = bounds(st.domain)
    red = [IterVar(v.name, "int32", lo=lo, extent=hi - lo + 1, kind="reduce")
           for v, (lo, hi) in zip(st.red_vars, bb[n:])]

    def body(*o):
        m = dict(zip(st.vars, tuple(o) + tuple(red)))
        return st.combiner(substitute(value, m), axis=red, where=substitute(cond, m))

    return compute(op.shape, body, name=name)
