"""numpy evaluation and printing of polyhedral stages (PolyOp.evaluate_numpy / show_lines).

Each statement is evaluated over the bounding box of its domain, with the
domain's constraints turned back into a TE condition as the mask: reads are
only checked (and values only used) where the mask holds, which is how
``pa.evaluate`` treats a false ``select`` branch.
"""

import weakref

import numpy as np

from ..errors import PolyadError
from ..evaluate import NUMPY_OPS, REDUCTIONS, Block, alloc, axis_grid, blocks, neutral
from ..te.expr import Const, Reduce
from ..te.printer import Printer, unique_names
from .convert import FromIsl, bounds, box

_COND = weakref.WeakKeyDictionary()


def statement_condition(st):
    """The statement's domain as a TE bool expression over its vars (memoised)."""
    c = _COND.get(st)
    if c is None:
        c = FromIsl(st.vars).cond_of_set(st.domain.reset_tuple_id())
        _COND[st] = c
    return c


def extra_condition(st):
    """The domain's constraints beyond the box of the statement's vars (for printing)."""
    d = st.domain.reset_tuple_id()
    b = box(st.vars)
    if b.is_subset(d):
        return None
    return FromIsl(st.vars).cond_of_set(d.gist(b).coalesce())


def evaluate_polyop(op, values):
    where = f"stage {op.name!r}"
    outs = [alloc(op.shape, d, where, fill=0) for d in op.dtypes]
    written = alloc(op.shape, bool, where, fill=False)
    for st in op.statements:
        if st.domain.is_empty():
            continue
        _eval_statement(op, st, values, outs, written, where)
    if not written.all():
        idx = tuple(int(i) for i in np.argwhere(~written)[0])
        raise PolyadError(f"{where}: no statement writes the output point {idx}")
    return outs


def _eval_statement(op, st, values, outs, written, where):
    n = st.n_out
    bb = bounds(st.domain)
    red = bb[n:]
    rsize = int(np.prod([hi - lo + 1 for lo, hi in red], dtype=np.int64)) if red else 1
    cond = statement_condition(st)
    out_shape = tuple(hi - lo + 1 for lo, hi in bb[:n])
    kind = st.combiner.kind() if st.combiner is not None else None
    if st.combiner is not None and kind not in REDUCTIONS:
        raise PolyadError(f"{where}: numpy evaluation of the reducer {st.combiner.name} is not supported")
    rank = n + len(red)
    for block in blocks(out_shape, rsize):
        env = {}
        for d, (v, (a, b)) in enumerate(zip(st.vars[:n], block)):
            env[id(v)] = axis_grid(bb[d][0] + a, bb[d][0] + b, d, rank)
        for j, (v, (lo, hi)) in enumerate(zip(st.vars[n:], red)):
            env[id(v)] = axis_grid(lo, hi + 1, n + j, rank)
        blk = Block(values, env, rank, f"{where}, statement {st.name}")
        full = tuple(b - a for a, b in block) + tuple(hi - lo + 1 for lo, hi in red)
        mask = np.broadcast_to(blk.ev(cond), full)
        sl = tuple(slice(bb[d][0] + a, bb[d][0] + b) for d, (a, b) in enumerate(block))
        rdims = tuple(range(n, rank))
        hit = mask.any(axis=rdims) if rdims else mask
        for k, v in enumerate(st.values):
            val = np.broadcast_to(blk.ev(v, mask), full)
            dtype = op.dtypes[k]
            target = outs[k][sl + (...,)]  # a view even of a 0-d output (arr[()] is a scalar copy)
            if st.combiner is None:
                target[hit] = val[hit].astype(dtype, copy=False)
                continue
            ident = st.combiner.identity[k].value
            fn, opname = REDUCTIONS[kind]
            contrib = np.where(mask, val, np.asarray(neutral(kind, dtype), dtype))
            r = fn(contrib, axis=rdims).astype(dtype) if rdims else contrib.astype(dtype)
            start = target if st.accumulate else np.broadcast_to(np.asarray(ident, dtype), target.shape)
            if st.accumulate and not written[sl][hit].all():
                raise PolyadError(f"{where}: statement {st.name} accumulates into points not written before")
            combined = np.asarray(NUMPY_OPS[opname](start, r)).astype(dtype)
            target[hit] = combined[hit]
        written[sl] |= hit


def show_polyop(op, printer, name):
    """Readable lines of a PolyOp for pa.show."""
    dtypes = ", ".join(sorted(set(op.dtypes)))
    st0 = op.statements[0] if op.statements else None
    out_vars = st0.out_vars if st0 is not None else ()
    axes = ", ".join(f"{v.name} < {v.extent}" for v in out_vars)
    lines = [f"poly {name}: {dtypes}{list(op.shape)}" + (f"  ({axes})" if axes else "")]
    for st in op.statements:
        pr = Printer(printer.tensor_names, unique_names(st.vars))
        lhs_idx = ", ".join(pr.vname(v) for v in st.out_vars)
        lhs = name if op.num_outputs == 1 else f"{name}.v0"
        if st.combiner is None:
            rhs, eq = pr(st.values[0]), "="
        elif not st.red_vars:
            rhs, eq = pr(st.values[0]), "+=" if st.accumulate else "="
            if st.combiner.kind() != "sum":
                rhs, eq = f"{st.combiner.name}({lhs}[{lhs_idx}], {rhs})", "="
        else:
            red = Reduce(st.combiner, tuple(st.values), tuple(st.red_vars), Const(True, "bool"), 0)
            rhs, eq = pr(red), "+=" if st.accumulate else "="
        line = f"  {lhs}[{lhs_idx}] {eq} {rhs}"
        cond = extra_condition(st)
        if cond is not None:
            line += f"   where {pr(cond)}"
        lines.append(line)
    if op.attrs.get("fallback"):
        lines.append(f"  # fallback: {op.attrs['fallback']}")
    return lines


__all__ = ["evaluate_polyop", "show_polyop", "statement_condition", "extra_condition"]
