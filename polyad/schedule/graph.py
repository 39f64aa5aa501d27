"""Graph-level schedule transformations: pure functions from a tensor graph to a tensor graph.

* :func:`inline` substitutes the body of reduction-free stages into their
  consumers (the stage then has no buffer and no kernel of its own);
* :func:`rfactor` splits the largest reduction axis of a stage by a factor:
  a partial stage ``<name>_rf[o..., ro]`` reduces blocks of ``factor``
  iterations, the stage itself reduces those partial results over ``ro``;
* :func:`fold` makes a plain copy (a crop) compute its producer's values itself, at the points it reads;
* :func:`pad_reads` runs a clipped sum over its bounding box on a zero-padded operand;
* :func:`innermost` computes a stage with one output dimension innermost (the batch: vectors over it),
  its operands read through copies with that index last, and copies it back;
* :func:`space_to_depth` gives a reduction's strided reads a de-interleaved copy,
  ``{ X[i] -> X_s2d[i mod s, i div s] }``, that it reads at unit stride;
* :func:`validate` checks a :class:`~polyad.schedule.Schedule` against a graph;
* :func:`apply_graph_schedule` does all of it for codegen.

Stages are named as ``pa.show`` names them (:func:`uniquely_named` renames
duplicates ``name_1``, ``name_2`` so that a stage's name is its key).  Every
function leaves its input graph untouched and returns new output tensors.
"""


import math
from dataclasses import dataclass
from types import MappingProxyType

import islpy as isl

from ..errors import ScheduleError
from ..te.construct import binary, select
from ..te.expr import Call, Const, IterVar, Load, Reduce
from ..te.names import fresh_name
from ..te.printer import unique_names
from ..te.tensor import ComputeOp, PlaceholderOp, as_tensor_list, walk_ops
from ..te.graph import map_values
from ..te.memo import graph_memo, op_memo
from ..te.visit import post_order, substitute, transform

__all__ = ["scheduled_graph", "fold", "foldable", "innermost", "movable", "inline", "rfactor", "pad_reads", "paddable",
           "pad_axis", "axis_padding", "space_to_depth", "strided_reads", "validate", "apply_graph_schedule",
           "uniquely_named", "inlinable", "stage_ops"]


class _Rewriter:
    """Rebuilds stages in dependency order, redirecting reads to new tensors or inlined bodies."""

    def __init__(self):
        self.tmap = {}  # id(old tensor) -> new tensor
        self.inl = {}  # id(old tensor) -> (vars, body over vars), already rewritten
        self.alive = []  # old tensors, so that ids stay unique while the maps live

    def _fn(self, node, rebuilt):
        if isinstance(node, Load):
            t = node.tensor
            if id(t) in self.inl:
                vars_, body = self.inl[id(t)]
                if all(a is b for a, b in zip(vars_, rebuilt.indices)):
                    return body  # read at its own variables (see _adopt_axes)
                return substitute(body, dict(zip(vars_, rebuilt.indices)))
            nt = self.tmap.get(id(t))
            if nt is not None:
                return Load(nt, rebuilt.indices)
        return None

    def exprs(self, roots):
        return transform(tuple(roots), self._fn)

    def rebuild(self, op, name=None):
        """``op`` reading the new tensors (the same object when nothing changed)."""
        if isinstance(op, PlaceholderOp):
            return op
        new = map_values(op, self._fn, name)
        self.map_outputs(op, new)
        return new

    def map_outputs(self, old, new):
        if new is old:
            return
        for i in range(old.num_outputs):
            self.alive.append(old.output(i))
            self.tmap[id(old.output(i))] = new.output(i)

    def result(self, outputs):
        return [self.tmap.get(id(t), t) for t in outputs]


def stage_ops(outputs):
    """The computed stages of ``outputs`` (dependency order) and name -> op (unique names expected)."""
    ops = [op for op in walk_ops(outputs) if not isinstance(op, PlaceholderOp)]
    return ops, {op.name: op for op in ops}


def scheduled_graph(outputs):
    """The graph schedules are decided on and applied to: :func:`uniquely_named`, with every reduction's
    quasi-affine ``where=`` in its statement domain (:func:`polyad.poly.simplify.lift_where`, which ``pa.build``
    generates code for).  ``auto_schedule``, ``candidate_space`` and ``prepare`` take the graph as written through
    it: decided on the compute as written, an rfactor of a where-clipped reduction did not fit its lifted,
    non-box stage (the fuzzer's random schedules found it).  Idempotent."""
    from ..poly.simplify import lift_where

    return uniquely_named(lift_where(as_tensor_list(outputs, "schedule outputs")))


def uniquely_named(outputs):
    """The graph of ``outputs`` with every stage named as ``pa.show`` names it (repeats get ``_1``, ``_2``)."""
    outs = as_tensor_list(outputs, "schedule outputs")
    ops = walk_ops(outs)
    names = unique_names(ops)
    if all(names[id(op)] == op.name for op in ops if not isinstance(op, PlaceholderOp)):
        return outs
    rw = _Rewriter()
    for op in ops:
        rw.rebuild(op, names[id(op)])
    return rw.result(outs)


# ---------------------------------------------------------------------------------------------
# inline
# ---------------------------------------------------------------------------------------------
def _box(shape):
    names = [f"d{i}" for i in range(len(shape))]
    cons = " and ".join(f"0 <= {n} < {s}" for n, s in zip(names, shape))
    return isl.Set(f"{{ [{', '.join(names)}] : {cons} }}" if cons else "{ [] }")


def inlinable(op):
    """None if ``op`` can be inlined into its consumers, else the reason it cannot."""
    if isinstance(op, PlaceholderOp):
        return "it is an input (placeholder)"
    if isinstance(op, ComputeOp):
        if isinstance(op.body[0], Reduce):
            return "it is a reduction (materialise it, or rfactor it)"
        return None
    stmts = op.statements
    if "space_to_depth_of" in op.attrs:
        return f"it is the de-interleaved copy space_to_depth made for {op.attrs['space_to_depth_of']!r}"
    if "moved_last_for" in op.attrs:
        return f"it is the copy innermost made for {op.attrs['moved_last_for']!r}, read as vectors"
    if op.num_outputs != 1 or len(stmts) != 1:
        return f"its {len(stmts)} statements define it region by region (only one assignment over the whole box inlines)"
    st = stmts[0]
    if st.combiner is not None:
        return "it is a reduction (materialise it, or rfactor it)"
    if not st.domain.reset_tuple_id().is_equal(_box(op.shape)):
        return "its statement does not cover the whole box"
    return None


def _check_inline(name, by_name, out_ops):
    """ScheduleError naming the stage unless stage ``name`` can be inlined."""
    op = by_name.get(name)
    if op is None:
        raise ScheduleError(f"inline: there is no stage {name!r} (stages: {', '.join(sorted(by_name))})")
    if id(op) in out_ops:
        raise ScheduleError(f"inline: stage {name!r} is an output of the build; outputs need their buffer")
    why = inlinable(op)
    if why:
        raise ScheduleError(f"inline: stage {name!r} cannot be inlined: {why}")


def _inline_body(op):
    """(vars, body) of an inlinable stage: reading ``T[idx]`` means ``body[vars := idx]``."""
    if isinstance(op, ComputeOp):
        return tuple(op.axis), op.body[0]
    st = op.statements[0]
    return tuple(st.out_vars), st.values[0]


def inline(outputs, names):
    """The graph of ``outputs`` with the stages named in ``names`` inlined into their consumers.

    Inlinable stages are reduction-free: a compute whose body is an
    expression, or a polyhedral stage made of one assignment over its whole
    box.  Outputs cannot be inlined (they need their buffer).  Raises
    ScheduleError naming the stage otherwise.

    :param outputs: a tensor or a list of tensors (stages are found by their names in this graph).
    :param names: a stage name or a collection of them.
    :returns: the list of outputs of the rewritten graph (``outputs`` as a list when ``names`` is empty).
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises ScheduleError: when a named stage does not exist (inputs are not stages), is an output, or is not
        inlinable.
    """
    outs = as_tensor_list(outputs, "inline outputs")
    names = {names} if isinstance(names, str) else set(names)
    if not names:
        return outs
    ops, by_name = stage_ops(outs)
    out_ops = {id(t.op) for t in outs}
    for n in sorted(names):
        _check_inline(n, by_name, out_ops)
    rw = _Rewriter()
    canon = {}
    for orig in walk_ops(outs):
        if isinstance(orig, PlaceholderOp):
            continue
        inlined = orig.name in names
        touches = any(id(t) in rw.inl for t in orig.input_tensors)
        op = _canonical(orig, canon) if inlined or touches else orig
        if inlined:
            vars_, body = _inline_body(op)
            (body,) = rw.exprs((body,))
            rw.alive.append(orig.output(0))
            rw.inl[id(orig.output(0))] = (vars_, body)
            continue
        new = rw.rebuild(op)
        if op is not orig:  # back to variables of its own
            fresh = tuple(IterVar(a.name, a.dtype, lo=0, extent=a.extent, kind="data") for a in orig.axis)
            new = ComputeOp(orig.name, fresh, substitute(tuple(new.body), dict(zip(op.axis, fresh))), orig.tag, orig.attrs)
        if new is not orig:
            rw.map_outputs(orig, new)
    return rw.result(outs)


def _canonical(op, canon):
    """A ComputeOp over shared variables, one set per shape.

    Inlining substitutes the producer's body at the consumer's indices; down
    an elementwise chain the bodies grow and substituting them at every step
    is quadratic.  With producer and consumer over the same variables a
    pointwise read needs no substitution at all (the body is used as it is);
    only the small, not yet inlined body of each stage is substituted.
    """
    if not isinstance(op, ComputeOp) or not op.axis:
        return op
    key = tuple((a.lo, a.extent, a.dtype) for a in op.axis)
    vars_ = canon.get(key)
    if vars_ is None:
        vars_ = canon[key] = tuple(IterVar(a.name, a.dtype, lo=a.lo, extent=a.extent, kind="data") for a in op.axis)
    body = substitute(tuple(op.body), dict(zip(op.axis, vars_)))
    return ComputeOp(op.name, vars_, tuple(body), op.tag, op.attrs)


# ---------------------------------------------------------------------------------------------
# rfactor
# ---------------------------------------------------------------------------------------------
def _reduction_form(op):
    """(data axes, reduce Exprs (one per output), reduce axes) of a reduction stage, or raise."""
    if isinstance(op, ComputeOp):
        if not isinstance(op.body[0], Reduce):
            raise ScheduleError(f"rfactor: stage {op.name!r} is not a reduction")
        return tuple(op.axis), tuple(op.body), tuple(op.body[0].axis)
    if isinstance(op, PlaceholderOp):
        raise ScheduleError(f"rfactor: {op.name!r} is an input, not a reduction stage")
    stmts = op.statements
    if len(stmts) != 1 or stmts[0].combiner is None or stmts[0].accumulate:
        raise ScheduleError(
            f"rfactor: stage {op.name!r} is not a single reduction statement ({len(stmts)} statements); "
            "only one reduction over a box can be split"
        )
    st = stmts[0]
    from ..poly.convert import bounds

    bb = bounds(st.domain)
    red = tuple(IterVar(v.name, "int32", lo=lo, extent=hi - lo + 1, kind="reduce") for v, (lo, hi) in zip(st.red_vars, bb[st.n_out:]))
    box = _box(op.shape)
    if bb:
        full = isl.Set(
            "{ [" + ", ".join(f"d{i}" for i in range(len(bb))) + "] : "
            + " and ".join(f"{lo} <= d{i} <= {hi}" for i, (lo, hi) in enumerate(bb)) + " }"
        )
        box_ok = st.domain.reset_tuple_id().is_equal(full) and full.project_out(
            isl.dim_type.set, st.n_out, len(red)).is_equal(box)
    else:
        box_ok = True
    if not box_ok:
        raise ScheduleError(
            f"rfactor: stage {op.name!r} reduces over a non-rectangular domain {st.domain}; "
            "only box reductions can be split"
        )
    axis = tuple(IterVar(v.name, "int32", lo=0, extent=s, kind="data") for v, s in zip(st.out_vars, op.shape))
    m = dict(zip(st.vars, axis + red))
    srcs = tuple(substitute(v, m) for v in st.values)
    true = Const(True, "bool")
    return axis, tuple(Reduce(st.combiner, srcs, red, true, i) for i in range(len(srcs))), red


def _guarded_partial(name, out, red, ro, ri, n, factor, comb, cond, srcs, dtypes):
    """The interleaved partial stage as a statement whose domain holds the guard ``ro*factor + ri < n``:
    codegen then runs the lanes' shared reduction points as vectors (a ComputeOp's guard would be a
    select per lane)."""
    from ..poly.stage import PolyOp, Statement, box_set, dim_names
    from ..te.construct import select

    vars_ = tuple(out) + tuple(red)
    names = dim_names(vars_)
    nro, nri = names[vars_.index(ro)], names[vars_.index(ri)]
    dom = box_set("S0", vars_).intersect(
        isl.Set(f"{{ S0[{', '.join(names)}] : {factor}*{nro} + {nri} < {n} }}", context=isl.DEFAULT_CONTEXT))
    if not (isinstance(cond, Const) and cond.value):
        srcs = tuple(select(cond, s_, i) for s_, i in zip(srcs, comb.identity))
    st = Statement("S0", vars_, len(out), dom, tuple(srcs), comb)
    return PolyOp(name, tuple(a.extent for a in out), tuple(dtypes), (st,), {})


def _replace_stage(outs, op, new):
    """The outputs of the graph of ``outs`` with stage ``op`` replaced by ``new`` (its consumers rebuilt)."""
    rw = _Rewriter()
    for o in walk_ops(outs):
        if o is op:
            rw.map_outputs(op, new)
        else:
            rw.rebuild(o)
    return rw.result(outs)


def _zero(dtype):
    return Const(0.0, dtype) if dtype.startswith("float") else Const(0, dtype)


def _interleavable(reduces):
    """A single-output sum/max/min: regrouping its terms by residue keeps its value (a tuple reducer's
    first-argmax order needs contiguous blocks)."""
    return len(reduces) == 1 and reduces[0].combiner.kind() is not None


def _named_stage(outputs, stage, what):
    """(outputs as a list, the op named ``stage``) for transformation ``what``; ScheduleError listing the
    stages when there is none of that name."""
    outs = as_tensor_list(outputs, f"{what} outputs")
    _, by_name = stage_ops(outs)
    op = by_name.get(stage)
    if op is None:
        raise ScheduleError(f"{what}: there is no stage {stage!r} (stages: {', '.join(sorted(by_name))})")
    return outs, op


def rfactor(outputs, stage, factor, axis=None, interleave=None, pad=None, axis_last=None):
    """The graph of ``outputs`` with the reduction of ``stage`` split by ``factor``.

    ``T[o] = R_{r} f(o, r)`` (R a commutative reducer, r the largest reduction
    axis, or ``axis`` by name) becomes::

        T_rf[o, ro] = R_{ri, other axes} f(o, ro*factor + ri)   where ro*factor + ri < extent(r)
        T[o]        = R_{ro} T_rf[o, ro]

    The partial stage exposes ``ceil(extent/factor)`` times more parallel
    work; the values are those of the original reduction regrouped
    (bitwise-equal for max/min, equal up to rounding for sums).

    ``interleave`` (default: for single-output sum/max/min reducers whose
    extent ``factor`` divides) keeps the inner part of the split as the
    partial stage's last axis instead::

        T_rf[o, ri] = R_{ro, other axes} f(o, ro*factor + ri)   where ro*factor + ri < extent(r)
        T[o]        = R_{ri} T_rf[o, ri]

    ``factor`` partials per output point, whose neighbours along ``ri`` read
    neighbouring elements: vector lanes load them contiguously (a row
    reduction's partial sums vectorise).  Tuple reducers (argmax) keep the
    blocked form, whose order keeps the first extremum; so, by default, do
    factors that do not divide the extent (asked for, the guard on the last
    partials is the partial statement's domain: ragged vector lanes, measured
    slower than the blocked form on conv2d_3x3's weight gradient).

    :param outputs: a tensor or a list of tensors.
    :param stage: the name of the reduction stage to split.
    :param factor: the split factor, an integer >= 2 and at most the split axis's extent (equal: the interleaved
        partials keep the whole axis as their lanes).
    :param axis: the name of the reduction axis to split; None for the largest.
    :param interleave: True for the interleaved form, False for the blocked one, None for the default above.
    :param pad: with ``interleave`` and a factor that does not divide the extent: first run the axis to the
        next multiple of ``factor`` on zero-padded operands (:func:`pad_axis`), so that every lane is full.
    :param axis_last: with ``interleave``: first read the operands that index the axis elsewhere than last
        through copies with it last (:func:`reduction_axis_last`), so that the lanes load contiguously.
    :returns: the list of outputs of the rewritten graph (with the partial stage ``<stage>_rf``).
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises ScheduleError: when there is no stage ``stage`` or it is not a single reduction, ``factor`` is not an
        integer >= 2 or larger than the axis's extent, ``axis`` is not one of its reduction axes, or
        ``interleave`` is asked for a tuple or custom reducer.
    """
    outs, op = _named_stage(outputs, stage, "rfactor")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise ScheduleError(f"rfactor: stage {stage!r} needs an integer factor >= 2, got {factor!r}")
    data_axes, reduces, red = _reduction_form(op)
    if axis is None:
        split = max(red, key=lambda a: a.extent)
    else:
        cand = [a for a in red if a.name == axis]
        if not cand:
            raise ScheduleError(f"rfactor: stage {stage!r} has no reduction axis {axis!r} (it has {[a.name for a in red]})")
        split = cand[0]
    n = split.extent
    if factor > n:
        raise ScheduleError(
            f"rfactor: stage {stage!r}, axis {split.name!r} has extent {n}; the factor {factor} must not be larger"
        )
    if axis_last:
        if not interleave:
            raise ScheduleError(f"rfactor: stage {stage!r}: axis_last goes with the interleaved form")
        return rfactor(reduction_axis_last(outs, stage, split.name), stage, factor, split.name, interleave, pad)
    if pad and n % factor:
        if not interleave:
            raise ScheduleError(f"rfactor: stage {stage!r}: pad goes with the interleaved form")
        outs = pad_axis(outs, stage, split.name, -(-n // factor) * factor)
        return rfactor(outs, stage, factor, split.name, interleave)
    n_outer = -(-n // factor)
    comb = reduces[0].combiner
    if interleave is None:
        interleave = _interleavable(reduces) and n % factor == 0
    elif interleave and not _interleavable(reduces):
        raise ScheduleError(f"rfactor: stage {stage!r} has a tuple or custom reducer; only sum/max/min interleave")
    # the partial stage: fresh data axes, the split axis becomes (ro data, ri reduce)
    p_axes = tuple(IterVar(a.name, "int32", lo=0, extent=a.extent, kind="data") for a in data_axes)
    kept, gone = ("reduce", "data") if interleave else ("data", "reduce")
    ro = IterVar(split.name + "_o", "int32", lo=0, extent=n_outer, kind=kept)
    ri = IterVar(split.name + "_i", "int32", lo=0, extent=factor, kind=gone)
    p_data, p_split = (ri, ro) if interleave else (ro, ri)
    p_red = tuple(p_split if a is split else IterVar(a.name, "int32", lo=a.lo, extent=a.extent, kind="reduce")
                  for a in red)
    m = dict(zip(data_axes, p_axes))
    m.update({a: b for a, b in zip(red, p_red) if a is not split})
    m[split] = ro * factor + ri + split.lo if split.lo else ro * factor + ri
    cond = substitute(reduces[0].condition, m)
    if n % factor:
        cond = binary("and", cond, binary("lt", ro * factor + ri, Const(n, "int32")))
    srcs = tuple(substitute(s, m) for s in reduces[0].source)
    p_body = tuple(Reduce(comb, srcs, p_red, cond, i) for i in range(len(srcs)))
    taken = {o.name for o in walk_ops(outs)}
    p_name = fresh_name(f"{stage}_rf", taken)
    if interleave and n % factor:
        partial = _guarded_partial(p_name, p_axes + (ri,), p_red, ro, ri, n, factor, comb,
                                   tuple(substitute(reduces[0].condition, m) for _ in (0,))[0], srcs,
                                   tuple(op.output_dtype(i) for i in range(len(srcs))))
    else:
        partial = ComputeOp(p_name, p_axes + (p_data,), p_body, "rfactor", {})
    # the final stage: reduce the partial results over the kept part of the split
    f_axes = tuple(IterVar(a.name, "int32", lo=0, extent=a.extent, kind="data") for a in data_axes)
    rk = IterVar(p_data.name, "int32", lo=0, extent=p_data.extent, kind="reduce")
    f_srcs = tuple(Load(partial.output(i), f_axes + (rk,)) for i in range(len(srcs)))
    f_body = tuple(Reduce(comb, f_srcs, (rk,), Const(True, "bool"), i) for i in range(len(srcs)))
    final = ComputeOp(stage, f_axes, f_body, getattr(op, "tag", ""), dict(getattr(op, "attrs", {})))
    # rewire: the partial stage reads what the old stage read (rewritten), consumers read ``final``
    rw = _Rewriter()
    for o in walk_ops(outs):
        if o is op:
            p_new = rw.rebuild(partial)
            if p_new is not partial:  # reads were redirected: the final stage must read the new partial
                f_srcs = tuple(Load(p_new.output(i), f_axes + (rk,)) for i in range(len(srcs)))
                f_body = tuple(Reduce(comb, f_srcs, (rk,), Const(True, "bool"), i) for i in range(len(srcs)))
                final = ComputeOp(stage, f_axes, f_body, final.tag, final.attrs)
            rw.map_outputs(op, final)
        else:
            rw.rebuild(o)
    return rw.result(outs)


def rfactor_by(outputs, stage, spec):
    """:func:`rfactor` of ``stage`` as an :class:`~polyad.schedule.RFactor` ``spec`` says."""
    return rfactor(outputs, stage, spec.factor, spec.axis, spec.interleave, spec.pad, spec.axis_last)


# ---------------------------------------------------------------------------------------------
# pad_axis: a reduction axis run to a longer extent on zero-padded operands
# ---------------------------------------------------------------------------------------------
def axis_padding(op, axis, extent):
    """How :func:`pad_axis` would run ``op``'s reduction axis ``axis`` to ``extent``: ``{id(tensor): (tensor,
    dimension, extent needed)}`` for the operands whose reads pass their bounds, or a string saying why it
    cannot.

    Legal when ``op`` is a sum (a compute) whose every load that uses the axis has it in one index, at
    coefficient 1 (``X[.., x + kw]``), and whose value is zero wherever one of those loads reads past its
    operand's end for every ``x >= n`` (a product through ``H[b, co, y, x]``): the new terms add zeros.
    """
    from ..poly.convert import NotAffine, ToIsl, pieces

    if not isinstance(op, ComputeOp) or not isinstance(op.body[0], Reduce) or len(op.body) != 1:
        return "it is not a single reduction compute"
    b = op.body[0]
    if b.combiner.kind() != "sum":
        return "it is not a sum"
    r = next((a for a in b.axis if a.name == axis), None)
    if r is None or r.lo != 0:
        return f"it has no reduction axis {axis!r} from 0"
    if any(n is r for n in post_order((b.condition,))):
        return f"its condition reads {axis!r}"
    n = r.extent
    vars_ = tuple(op.axis) + tuple(b.axis)
    conv = ToIsl(vars_)
    box = conv.univ  # the stage's box with the axis run to ``extent``
    for k, v in enumerate(vars_):
        hi = (extent if v is r else v.lo + v.extent) - 1
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val(v.lo)).upper_bound_val(isl.dim_type.set, k, isl.Val(hi))
    beyond = box.lower_bound_val(isl.dim_type.set, vars_.index(r), isl.Val(n))
    need, witness = {}, False
    for load in {id(x): x for x in post_order(b.source) if isinstance(x, Load)}.values():
        dims = [d for d, ix in enumerate(load.indices) if _uses(ix, r)]
        if not dims:
            continue
        if len(dims) != 1:
            return f"{load.tensor.name} reads {axis!r} in {len(dims)} indices"
        d = dims[0]
        try:
            a = conv.aff(load.indices[d])
        except NotAffine:
            return f"{load.tensor.name}'s index {d} is not affine"
        ps = pieces(a)
        if len(ps) != 1 or str(ps[0][1].get_coefficient_val(isl.dim_type.in_, vars_.index(r))) != "1":
            return f"{load.tensor.name} reads {axis!r} at a coefficient other than 1"
        hi = int(str(a.intersect_domain(box).max_val())) + 1
        if hi > load.tensor.shape[d]:
            prev = need.get(id(load.tensor))
            if prev is not None and prev[1] != d:
                return f"{load.tensor.name} reads {axis!r} in two dimensions"
            need[id(load.tensor)] = (load.tensor, d, max(hi, prev[2] if prev else 0))
        past = int(str(a.intersect_domain(beyond).min_val())) >= load.tensor.shape[d]
        witness |= past and _zero_with(b.source[0], load)
    if not witness:
        return f"its value is not zero wherever an operand read along {axis!r} is past its end"
    return need


def pad_axis(outputs, stage, axis, extent):
    """The graph of ``outputs`` with the sum ``stage`` run over its reduction axis ``axis`` to ``extent``.

    Operands read past their end get zero-padded copies along that index (``T_pad``: a copy statement and a
    zero fill, never inlined; a space-to-depth copy is rebuilt longer instead); the new terms are zero
    because the value is a product through one of them (:func:`axis_padding`).  An interleaved rfactor
    by a factor that does not divide the axis then has full lanes only (``rfactor(..., pad=True)``):
    conv2d_5x5_s3's weight gradient, 19 columns in 8 lanes, runs 24 on a 24-column H.

    :raises ScheduleError: naming the stage when it does not exist or cannot be padded so.
    """
    outs, op = _named_stage(outputs, stage, "pad_axis")
    need = axis_padding(op, axis, extent)
    if isinstance(need, str):
        raise ScheduleError(f"pad_axis: stage {stage!r} cannot run {axis!r} to {extent}: {need}")
    taken = {o.name for o in walk_ops(outs)}
    # the operands another stage reads too (a space-to-depth copy two stages share is not rebuilt for one)
    elsewhere = {id(t) for o in walk_ops(outs) if o is not op and not isinstance(o, PlaceholderOp)
                 for t in o.input_tensors}
    longer = {}  # id(old operand) -> (its padded tensor, the offset of the operand inside it)
    for T, d, hi in need.values():
        shared = _covering_pad(outs, T, d, hi)
        if shared is not None:
            longer[id(T)] = shared
            continue
        made = _zero_extended(T, d, hi, stage, taken, alone=id(T) not in elsewhere)
        taken.add(made.name)
        longer[id(T)] = (made.output(0), (0,) * len(T.shape))
    b = op.body[0]
    r = next(a for a in b.axis if a.name == axis)
    r2 = IterVar(r.name, r.dtype, lo=0, extent=extent, kind="reduce")

    def fn(node, rebuilt):
        if isinstance(node, Load) and id(node.tensor) in longer:
            P, off = longer[id(node.tensor)]
            return Load(P, tuple(ix + o if o else ix for ix, o in zip(rebuilt.indices, off)))
        return None

    src = tuple(substitute(e, {r: r2}) for e in transform(b.source, fn))
    red = tuple(r2 if a is r else a for a in b.axis)
    new = ComputeOp(op.name, op.axis, (Reduce(b.combiner, src, red, b.condition, 0),), op.tag, dict(op.attrs))
    return _replace_stage(outs, op, new)


def zero_padded_offsets(P, T):
    """The offsets of ``T`` inside ``P`` when ``P`` is a zero-padded copy of the whole of ``T``:
    ``P[j] = T[j - off]`` where ``off <= j < off + shape(T)``, 0 elsewhere in ``P``'s box; else None.

    So ``T[i] == P[i + off]``, and ``P`` reads zero past ``T``'s end up to its own (``pa.nn``'s padding,
    :func:`pad_reads`' copies and :func:`pad_axis`' copies are such).
    """
    from ..poly.convert import NotAffine, ToIsl, pieces
    from ..poly.stage import box_set

    boxed = _box_copy(P.op)
    if boxed is None or P.value_index != 0:
        return None
    read, bb = boxed
    load = read.values[0]
    if load.tensor is not T or len(P.shape) != len(T.shape):
        return None
    conv = ToIsl(read.vars)
    off = []
    for k, ix in enumerate(load.indices):
        try:
            ps = pieces(conv.aff(ix))
        except NotAffine:
            return None
        if len(ps) != 1:
            return None
        a = ps[0][1]
        coeffs = [int(str(a.get_coefficient_val(isl.dim_type.in_, i))) for i in range(len(read.vars))]
        if coeffs != [int(i == k) for i in range(len(read.vars))] or str(a.get_denominator_val()) != "1":
            return None
        off.append(-int(str(a.get_constant_val())))
    if [tuple(b) for b in bb] != [(o, o + n - 1) for o, n in zip(off, T.shape)]:
        return None
    covered = read.domain.reset_tuple_id()
    for st in P.op.statements:
        if st is not read:
            covered = covered.union(st.domain.reset_tuple_id())
    full = box_set("", tuple(IterVar(f"j{k}", "int32", lo=0, extent=e) for k, e in enumerate(P.shape)))
    return tuple(off) if covered.is_equal(full.reset_tuple_id()) else None


def _covering_pad(outputs, T, d, extent):
    """(a zero-padded copy of ``T`` in the graph, ``T``'s offsets in it) whose zeros run past ``T`` along ``d``
    to at least ``extent``: ``T`` run to ``extent`` on zeros reads it at the offsets, with no copy of its own
    (conv2d_dilated: the weight gradient's partials read the data gradient's padded H); else None."""
    for op in walk_ops(outputs):
        if op.num_outputs != 1:
            continue
        P = op.output(0)
        off = zero_padded_offsets(P, T)
        if off is not None and off[d] + extent <= P.shape[d]:
            return P, off
    return None


def _zero_extended(T, d, extent, stage, taken, alone=True):
    """``T`` run to ``extent`` along dimension ``d``, zero beyond its end.  A space-to-depth copy made for
    ``stage`` (one statement over its box) that only ``stage`` reads (``alone``) is rebuilt longer, under its
    own name, its value under ``j_d < n``, and a zero-padded
    copy of a box copies the box's source into the longer buffer (no copy of a copy); any other tensor gets
    a zero-padded copy ``T_pad`` (a copy statement and a zero fill)."""
    from ..poly.stage import PolyOp, Statement, box_set, dim_names

    if d == len(T.shape) - 1:
        extent = -(-extent // 4) * 4  # whole rows of float4 for the copy (the extra zeros are never read)
    shape = tuple(extent if k == d else e for k, e in enumerate(T.shape))
    pv = tuple(IterVar(f"j{k}", "int32", lo=0, extent=e, kind="data") for k, e in enumerate(shape))
    zero = _zero(T.dtype)
    src = T.op
    if alone and isinstance(src, PolyOp) and src.attrs.get("space_to_depth_of") == stage and len(src.statements) == 1:
        st = src.statements[0]
        value = substitute(st.values[0], dict(zip(st.out_vars, pv)))
        inside = binary("lt", pv[d], Const(T.shape[d], "int32"))
        if isinstance(value, Call) and value.op == "select" and value.args[2] is zero:
            value = select(binary("and", value.args[0], inside), value.args[1], zero)
        else:
            value = select(inside, value, zero)
        return PolyOp(src.name, shape, src.dtypes, (Statement("S0", pv, len(pv), box_set("S0", pv), (value,)),),
                      dict(src.attrs))
    names = dim_names(pv)
    full = box_set("S0", pv)
    boxed = _box_copy(src)
    if boxed is not None:
        # T is itself a zero-padded copy of a box (X_pad[i] = X[i - 1] inside, 0 outside): copy X over the same
        # box into the longer buffer (no copy of a copy; T's kernel goes when nothing else reads it)
        read, bb = boxed
        value = substitute(read.values[0], dict(zip(read.out_vars, pv)))
        region = isl.Set("{ S0[" + ", ".join(names) + "] : " + " and ".join(
            f"{lo} <= {nm} <= {hi}" for nm, (lo, hi) in zip(names, bb)) + " }", context=full.get_ctx())
    else:
        value = Load(T, pv)
        region = isl.Set("{ S0[" + ", ".join(names) + f"] : {names[d]} < {T.shape[d]} }}", context=full.get_ctx())
    stmts = (Statement("S0", pv, len(pv), full.intersect(region), (value,)),
             Statement("S1", pv, len(pv), full.subtract(region).set_tuple_name("S1").coalesce(), (zero,)))
    return PolyOp(fresh_name(f"{T.name}_pad", taken), shape, (T.dtype,), stmts, {"pad_of": stage})


# ---------------------------------------------------------------------------------------------
# pad_reads
# ---------------------------------------------------------------------------------------------
def _zero_with(e, load):
    """True when ``e`` is zero wherever ``load`` reads zero (a product or quotient through it)."""
    if e is load:
        return True
    if isinstance(e, Call) and e.op == "mul":
        return any(_zero_with(a, load) for a in e.args)
    if isinstance(e, Call) and e.op in ("neg", "cast"):
        return _zero_with(e.args[0], load)
    if isinstance(e, Call) and e.op == "div":
        return _zero_with(e.args[0], load)
    return False


@dataclass(frozen=True)
class Clipped:
    """A sum :func:`pad_reads` can run on a zero-padded operand: its ``statement``, the ``load`` of the operand
    whose bounds clip it, and the ``domain`` it runs over instead (an unnamed isl set): its bounding box, whose
    per-variable bounds are ``box``, or, for a stride-phased stage, its phases' boxes (``box`` None)."""

    statement: object
    load: object
    domain: object
    box: tuple = None


def paddable(op):
    """A :class:`Clipped` when ``op`` is a sum clipped only by one operand's bounds, else None.

    The statement ``T[o] = sum_{r : (o, r) in D} L[idx(o, r)] * g(o, r)`` qualifies when ``D`` is its
    bounding box ``B`` intersected with ``idx(o, r) in bounds(L)`` (a stride-1 or dilated convolution's
    data gradient: ``{ [n, c, h, w, f, rh, rw] : 0 <= h - rh < 26 and 0 <= w - rw < 26 and ... }``),
    ``B`` covers every output point and the value is zero wherever ``L`` reads zero.  Or, for a stage with
    phase strides, when ``D`` is its phases' boxes (:func:`~polyad.schedule.phase.phase_boxes`) intersected
    so (a stride-2 convolution's data gradient, clipped where its odd phases' taps pass ``H``'s last row):
    each phase then runs a box.
    """
    return _paddable(op)[0]


@op_memo
def _paddable(op):
    """:func:`paddable`'s answer as a 1-tuple (op_memo keeps only what is not None), once per op: the phases' isl
    work took 52 ms on conv2d_5x5_s3's backward, asked again for each graph variant the tuner builds."""
    from ..poly.convert import NotAffine, ToIsl, bounding_box, count
    from .phase import phase_boxes, phase_strides

    if isinstance(op, PlaceholderOp) or isinstance(op, ComputeOp) or op.num_outputs != 1:
        return (None,)
    if len(op.statements) != 1:
        return (None,)
    st = op.statements[0]
    if st.combiner is None or st.accumulate or st.combiner.kind() != "sum":
        return (None,)
    dom = st.domain.reset_tuple_id()
    bb, box = bounding_box(dom)
    if bb[: st.n_out] != [(0, n - 1) for n in op.shape]:
        return (None,)
    if dom.is_equal(box):
        return (None,)  # already a box
    conv = ToIsl(st.vars)
    inside = {}
    for load in {id(n): n for n in post_order(tuple(st.values)) if isinstance(n, Load)}.values():
        if not _zero_with(st.values[0], load):
            continue
        try:
            inside[id(load)] = (load, conv.inside(load).reset_tuple_id())
        except NotAffine:
            continue
    boxed = next((Clipped(st, load, box, tuple(bb)) for load, inb in inside.values()
                  if dom.is_equal(box.intersect(inb))), None)
    strides = phase_strides(op) if inside else None
    try:
        phased = phase_boxes(dom, st.n_out, strides) if strides else None
    except isl.Error:  # a phase isl cannot bound or count: the phases stay clipped (a heuristic, not the build)
        phased = None
    if phased is None or phased.is_equal(dom) or (boxed and count(phased) >= math.prod(hi - lo + 1 for lo, hi in bb)):
        return (boxed,)  # the box when the phases' boxes run no fewer points (a dilated convolution's)
    # a stride-2 convolution's data gradient is its box clipped by W's taps too: 28x28 rows where 2.25 are read
    for load, inb in inside.values():
        if dom.is_equal(phased.intersect(inb)):
            # the domain less the operand's bounds, in the domain's own constraints where that is the same set (the
            # union of the phases' boxes has a div a phase, which phase_strides would read as strides of their own)
            plain = dom.gist(inb).intersect(bounding_box(phased)[1])
            return (Clipped(st, load, plain if plain.is_equal(phased) else phased),)
    return (boxed,)


def pad_reads(outputs, stage):
    """The graph of ``outputs`` with the clipped sum ``stage`` run over its bounding box (or its phases' boxes) on
    a zero-padded operand.

    For a stage :func:`paddable` accepts::

        L_pad[j] = L[j - lo]  where 0 <= j - lo < shape(L),  0 elsewhere   (a stage of its own)
        T[o]     = sum_{r in box} L_pad[idx(o, r) + lo] * g(o, r)

    ``lo`` and the padded shape cover ``idx`` over the box.  The terms outside
    the original domain read zeros and add nothing; the reduction domain is a
    box, which tiles and vectorises without border cases (conv2d_3x3's data
    gradient: 3.5 -> 1.6 ms, for 16% more multiply-adds).  A stride-phased stage
    keeps its statement, over its phases' boxes: each phase a box.  Infinities in
    ``g`` where ``L`` is padded would give NaN instead of ignoring the term:
    the transformation assumes finite values, as an im2col convolution does.
    """
    from ..poly.convert import ToIsl
    from ..poly.stage import PolyOp, Statement, box_set, dim_names

    outs, op = _named_stage(outputs, stage, "pad_reads")
    found = paddable(op)
    if found is None:
        raise ScheduleError(
            f"pad_reads: stage {stage!r} is not a sum whose domain is its bounding box (or its stride phases' "
            "boxes) clipped by one operand's bounds (the operand the value is a product of)"
        )
    st, load = found.statement, found.load
    T = load.tensor
    conv = ToIsl(st.vars)
    lo, shape = [], []
    for ix, n in zip(load.indices, T.shape):
        a = conv.aff(ix).intersect_domain(found.domain)
        mn, mx = int(str(a.min_val())), int(str(a.max_val()))
        lo.append(max(0, -mn))
        shape.append(lo[-1] + max(n, mx + 1))
    taken = {o.name for o in walk_ops(outs)}
    # the padded copy: the copy region and the zero fill, two statements (never inlined back)
    pvars = tuple(IterVar(f"j{d}", "int32", lo=0, extent=e, kind="data") for d, e in enumerate(shape))
    names = dim_names(pvars)
    full = box_set("S0", pvars)
    region = isl.Set("{ S0[" + ", ".join(names) + "] : " + " and ".join(
        f"{l} <= {nm} < {l + n}" for nm, l, n in zip(names, lo, T.shape)) + " }", context=full.get_ctx())
    copy = Statement("S0", pvars, len(pvars), full.intersect(region),
                     (Load(T, tuple(v - l if l else v for v, l in zip(pvars, lo))),))
    zeros = Statement("S1", pvars, len(pvars), full.subtract(region).set_tuple_name("S1").coalesce(),
                      (_zero(T.dtype),))
    padded = PolyOp(fresh_name(f"{T.name}_pad", taken), tuple(shape), (T.dtype,),
                    tuple(x for x in (copy, zeros) if not x.domain.is_empty()), {"pad_of": stage})

    def moved_load(m):
        return Load(padded.output(0), tuple(substitute(ix, m) + l if l else substitute(ix, m)
                                            for ix, l in zip(load.indices, lo)))

    if found.box is None:  # phased: the statement over its phases' boxes
        moved = moved_load({})
        value = transform((st.values[0],), lambda node, rebuilt: moved if node is load else None)[0]
        dom = found.domain
        for k, nm in enumerate(dim_names(st.vars)):
            dom = dom.set_dim_name(isl.dim_type.set, k, nm)
        dom = dom.set_tuple_name(st.domain.get_tuple_name())
        new = PolyOp(stage, op.shape, op.dtypes, (Statement(st.name, st.vars, st.n_out, dom, (value,), st.combiner),),
                     dict(op.attrs))
        return _replace_stage(outs, op, new)
    # the stage over the box
    axis = tuple(IterVar(v.name, "int32", lo=0, extent=n, kind="data") for v, n in zip(st.out_vars, op.shape))
    red = tuple(IterVar(v.name, "int32", lo=a, extent=b - a + 1, kind="reduce")
                for v, (a, b) in zip(st.red_vars, found.box[st.n_out:]))
    m = dict(zip(st.vars, axis + red))
    moved = moved_load(m)

    def swap(node, rebuilt):
        return moved if node is load else None

    value = substitute(transform((st.values[0],), swap)[0], m)
    new = ComputeOp(stage, axis, (Reduce(st.combiner, (value,), red, Const(True, "bool"), 0),), "padded", {})
    return _replace_stage(outs, op, new)


# ---------------------------------------------------------------------------------------------
# fold: a copy computes its producer's values itself, at the points it reads
# ---------------------------------------------------------------------------------------------
def _plain_read(op):
    """(the statement, its read) when ``op`` is a plain copy: one statement over its whole box whose value is
    one read ``T[f(o)]`` at affine indices (no floor division); else None."""
    from ..errors import PolyadError
    from ..poly.convert import NotAffine, ToIsl, pieces
    from ..poly.stage import statements_of

    if isinstance(op, PlaceholderOp) or op.num_outputs != 1:
        return None
    try:
        stmts = statements_of(op)
    except PolyadError:
        return None
    if len(stmts) != 1:
        return None
    st = stmts[0]
    load = st.values[0]
    if st.combiner is not None or st.accumulate or st.n_out != len(st.vars) or not isinstance(load, Load):
        return None
    if not load.tensor.shape or not st.domain.reset_tuple_id().is_equal(_box(op.shape)):
        return None
    conv = ToIsl(st.vars)
    try:
        affine = all(len(ps) == 1 and ps[0][1].dim(isl.dim_type.div) == 0
                     for ps in (pieces(conv.aff(ix)) for ix in load.indices))
    except NotAffine:
        return None
    return (st, load) if affine else None


def foldable(outputs, op):
    """None if copy stage ``op`` can take over its producer (:func:`fold`) in the graph of ``outputs``, else
    why not."""
    from ..errors import PolyadError
    from ..poly.stage import statements_of

    found = _plain_read(op)
    if found is None:
        return "it is not a plain copy (one read T[f(o)] at affine indices over its whole box)"
    T = found[1].tensor
    P = T.op
    if isinstance(P, PlaceholderOp):
        return f"it copies an input ({T.name})"
    if P.num_outputs != 1:
        return f"its producer {P.name!r} has {P.num_outputs} outputs"
    if any(t is T for t in outputs):
        return f"its producer {P.name!r} is an output of the build"
    readers = [o.name for o in walk_ops(outputs) if any(t is T for t in o.input_tensors)]
    if readers != [op.name]:
        return f"its producer {P.name!r} is read by {', '.join(sorted(readers))}, not by it alone"
    try:
        stmts = statements_of(P)
    except PolyadError:
        return f"its producer {P.name!r} has no statement form"
    if any(isinstance(n, Load) and n.tensor is T for st in stmts for n in post_order(tuple(st.values))):
        return f"its producer {P.name!r} reads itself"
    return None


def fold(outputs, stage):
    """The graph of ``outputs`` with copy ``stage`` computing its producer's values itself.

    ``stage`` is a plain copy ``C[o] = T[f(o)]`` (``f`` affine) and the only reader of ``T``: each statement
    ``S`` of ``T`` becomes a statement of ``C`` over the preimage of its domain, its output variables
    replaced by ``f(o)``::

        { S[t, r] : ... }  ->  { S[o, r] : (f(o), r) in dom S }

    ``T``'s kernel, buffer and the copy's pass over it go, and ``T`` is computed only where ``C`` reads it:
    a padded convolution's data gradient, cropped (``{ C[n, c, y, x] -> T[n, c, y + 1, x + 1] }``), is
    computed over the crop alone, without the border rows and columns it would drop.  Halide's
    ``compute_inline`` of a reduction into a consumer that only reads it.

    :raises ScheduleError: naming the stage when it does not exist or cannot fold (:func:`foldable`).
    """
    from ..poly.convert import ToIsl, rename
    from ..poly.stage import PolyOp, Statement, dim_names, statements_of

    outs, op = _named_stage(outputs, stage, "fold")
    why = foldable(outs, op)
    if why:
        raise ScheduleError(f"fold: stage {stage!r} cannot take over its producer: {why}")
    cst, load = _plain_read(op)
    P = load.tensor.op
    out = tuple(IterVar(v.name, "int32", lo=0, extent=n, kind="data") for v, n in zip(cst.out_vars, op.shape))
    at = [substitute(ix, dict(zip(cst.out_vars, out))) for ix in load.indices]  # f(o)
    stmts = []
    for st in statements_of(P):
        red = tuple(IterVar(v.name, v.dtype, lo=v.lo, extent=v.extent, kind="reduce") for v in st.red_vars)
        vars_ = out + red
        conv = ToIsl(vars_)
        affs = [conv.aff(e) for e in at] + [conv.aff(v) for v in red]
        pma = isl.PwMultiAff.from_pw_aff(affs[0])
        for a in affs[1:]:
            pma = pma.flat_range_product(isl.PwMultiAff.from_pw_aff(a))
        names = dim_names(vars_)
        inside = isl.Set("{ [" + ", ".join(names) + "] : " + " and ".join(
            f"0 <= {nm} < {n}" for nm, n in zip(names, op.shape)) + " }", context=conv.space.get_ctx())
        dom = st.domain.reset_tuple_id().preimage_pw_multi_aff(pma).intersect(inside)
        if dom.is_empty():
            continue
        values = substitute(tuple(st.values), dict(zip(st.vars, tuple(at) + red)))
        stmts.append(Statement(st.name, vars_, len(out), rename(dom.coalesce(), vars_, st.name), tuple(values),
                               st.combiner, st.accumulate))
    new = PolyOp(stage, tuple(op.shape), (P.output_dtype(0),), tuple(stmts), {"folded": P.name})
    return _replace_stage(outs, op, new)


# ---------------------------------------------------------------------------------------------
# innermost: a stage computed with one output dimension innermost (its vectors' lanes)
# ---------------------------------------------------------------------------------------------
def _permuted_domain(st, perm):
    """``st``'s domain with its output dimensions in the order ``perm`` (reduction dimensions after)."""
    n = st.n_out
    names = [st.domain.get_dim_name(isl.dim_type.set, k) for k in range(len(st.vars))]
    order = list(perm) + list(range(n, len(st.vars)))
    tup = st.domain.get_tuple_name() or ""
    m = isl.Map(f"{{ {tup}[{', '.join(names)}] -> {tup}[{', '.join(names[k] for k in order)}] }}",
                context=st.domain.get_ctx())
    return st.domain.apply(m)


def _moved_last(T, e, stage, taken):
    """A copy of ``T`` with dimension ``e`` last, ``{ T[.., i_e, ..] -> T_t[.., i_e] }`` (its own kernel).

    When ``T`` is itself a zero-padded copy of a box (``H_pad[j] = H[j - off]`` inside, 0 outside), the
    moved copy reads ``H`` over the same box, moved, and is zero elsewhere: no copy of a copy, and
    ``T``'s kernel goes when nothing else reads it (conv2d_3x3's and lenet_step's batch-innermost data
    gradients read a padded H).
    """
    from ..poly.stage import PolyOp, Statement, box_set, dim_names

    rank = len(T.shape)
    perm = [k for k in range(rank) if k != e] + [e]
    vs = tuple(IterVar(f"j{k}", "int32", lo=0, extent=T.shape[p], kind="data") for k, p in enumerate(perm))
    src = [None] * rank
    for k, p in enumerate(perm):
        src[p] = vs[k]
    full = box_set("S0", vs)
    boxed = _box_copy(T.op)
    if boxed is None:
        stmts = (Statement("S0", vs, rank, full, (Load(T, tuple(src)),)),)
    else:
        read, bb = boxed
        value = substitute(read.values[0], dict(zip(read.out_vars, src)))
        names = dim_names(vs)
        region = isl.Set("{ S0[" + ", ".join(names) + "] : " + " and ".join(
            f"{bb[p][0]} <= {names[k]} <= {bb[p][1]}" for k, p in enumerate(perm)) + " }", context=full.get_ctx())
        zeros = full.subtract(region).set_tuple_name("S1").coalesce()
        stmts = (Statement("S0", vs, rank, full.intersect(region), (value,)),)
        if not zeros.is_empty():
            stmts += (Statement("S1", vs, rank, zeros, (_zero(T.dtype),)),)
    return PolyOp(fresh_name(f"{T.name}_t", taken), tuple(T.shape[p] for p in perm), (T.dtype,), stmts,
                  {"moved_last_for": stage})


def movable(op, dim):
    """None if :func:`innermost` can compute stage ``op`` with its output dimension ``dim`` last, else why not
    (words that follow "stage <name>")."""
    from ..errors import PolyadError
    from ..poly.stage import statements_of

    n = len(op.shape)
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < n - 1:
        return (f"has output dimensions 0 to {n - 1}; dim must be one of 0 to {n - 2} (the last is innermost "
                f"already), got {dim!r}")
    if op.num_outputs != 1:
        return f"has {op.num_outputs} outputs"
    try:
        stmts = statements_of(op)
    except PolyadError as e:
        return f"has no statement form ({e})"
    me = op.output(0)
    for st in stmts:
        v = st.out_vars[dim]
        for ld in post_order(tuple(st.values)):
            if not isinstance(ld, Load):
                continue
            uses = [ix for ix in ld.indices if _uses(ix, v)]
            if uses and (ld.tensor is me or len(uses) != 1 or uses[0] is not v):
                return f"reads {ld.tensor.name} with its output dimension {dim} ({v.name}) other than as one plain index"
    return None


def _read_moved(values, v, stage, taken, copies, made=()):
    """``values`` with every load that has variable ``v`` as one plain index, not its last, reading a copy of its
    tensor with that index last instead (``T[.., v, ..] -> T_t[.., v]``): one :func:`_moved_last` copy per
    (tensor, index) in ``copies``, or the equal one among ``made`` (copies the graph has already)."""

    def swap(node, rebuilt):
        if not isinstance(node, Load) or not any(ix is v for ix in rebuilt.indices) or rebuilt.indices[-1] is v:
            return None
        idx = rebuilt.indices
        e = next(k for k, ix in enumerate(idx) if ix is v)
        key = (id(node.tensor), e)
        if key not in copies:
            copy = _moved_last(node.tensor, e, stage, taken)
            copies[key] = next((o for o in made if _same_copy(o, copy)), copy)
            if copies[key] is copy:
                taken.add(copy.name)
        return Load(copies[key].output(0), tuple(ix for k, ix in enumerate(idx) if k != e) + (v,))

    return transform(tuple(values), swap)


def innermost(outputs, stage, dim):
    """The graph of ``outputs`` with ``stage`` computed in a layout whose last dimension is its output dimension
    ``dim``, then copied back.

    A strided convolution's data gradient ``dX[n, c, y, x]`` runs each phase's outputs ``x = 3q + p`` at
    stride 3, so its vectors along ``x`` store lane by lane; with the batch innermost they run along ``n``::

        H_t[f, oy, ox, n] = H[n, f, oy, ox]                                  { H[n, ..] -> H_t[.., n] }
        dX_t[c, y, x, n] = sum_{f, oy, ox} H_t[f, oy, ox, n] * W[f, c, y - 3oy, x - 3ox]
        dX[n, c, y, x] = dX_t[c, y, x, n]

    Every statement keeps its domain with the output dimensions reordered; an operand read with ``o_dim`` as
    one of its indices gets a copy with that index last (``<T>_t``, its own kernel; none where it is last
    already), operands that do not read it are left alone (``W``: one value for all lanes).  The stage's name
    goes to the copy back; the computation is ``<stage>_t``.

    :raises ScheduleError: naming the stage when it does not exist, has no statement form or several outputs,
        ``dim`` is not one of its output dimensions other than the last, or an operand reads ``o_dim`` other
        than as one of its indices (``X[n + 1]``, ``X[n, n]``).
    """
    from ..poly.convert import rename
    from ..poly.stage import PolyOp, Statement, statements_of

    outs, op = _named_stage(outputs, stage, "innermost")
    why = movable(op, dim)
    if why:
        raise ScheduleError(f"innermost: stage {stage!r} {why}")
    n = len(op.shape)
    perm = [k for k in range(n) if k != dim] + [dim]
    taken = {o.name for o in walk_ops(outs)}
    copies = {}  # (id(T), e) -> the copy of T with index e last
    new_stmts = []
    for st in statements_of(op):
        v = st.out_vars[dim]
        values = _read_moved(st.values, v, stage, taken, copies)  # movable(): v is one plain index of its loads
        vars_ = tuple(st.out_vars[p] for p in perm) + tuple(st.red_vars)
        dom = rename(_permuted_domain(st, perm), vars_, st.name)
        new_stmts.append(Statement(st.name, vars_, n, dom, tuple(values), st.combiner, st.accumulate))
    moved = PolyOp(fresh_name(f"{stage}_t", taken), tuple(op.shape[p] for p in perm), (op.output_dtype(0),),
                   tuple(new_stmts), {"innermost_of": stage, "dim": dim})
    axis = tuple(IterVar(f"i{k}", "int32", lo=0, extent=e, kind="data") for k, e in enumerate(op.shape))
    back = ComputeOp(stage, axis, (Load(moved.output(0), tuple(axis[p] for p in perm)),), "", {})
    return _replace_stage(outs, op, back)


def axis_movable(op, axis):
    """None if :func:`reduction_axis_last` can move reduction axis ``axis`` of stage ``op`` last in its operands,
    else why not (words that follow "stage <name>")."""
    from ..poly.stage import statements_of

    try:
        _reduction_form(op)
    except ScheduleError as e:
        return str(e).split(f"{op.name!r} ", 1)[-1]
    (st,) = statements_of(op)
    v = next((r for r in st.red_vars if r.name == axis), None)
    if v is None:
        return f"has no reduction axis {axis!r} (it has {[r.name for r in st.red_vars]})"
    moved = False
    for ld in post_order(tuple(st.values)):
        if not isinstance(ld, Load):
            continue
        uses = [ix for ix in ld.indices if _uses(ix, v)]
        if uses and (len(uses) != 1 or uses[0] is not v):
            return f"reads {ld.tensor.name} with {axis!r} other than as one plain index"
        moved = moved or (bool(uses) and ld.indices[-1] is not v)
    return None if moved else f"reads {axis!r} last in every operand already"


def _same_copy(a, b):
    """Whether two of :func:`_moved_last`'s copies are the same: the same shape, and statements that read the
    same tensors the same way over the same domains."""
    if a.shape != b.shape or len(a.statements) != len(b.statements):
        return False
    for sa, sb in zip(a.statements, b.statements):
        la = [n for n in post_order(tuple(sa.values)) if isinstance(n, Load)]
        lb = [n for n in post_order(tuple(sb.values)) if isinstance(n, Load)]
        if str(sa.values) != str(sb.values) or len(la) != len(lb) or not sa.domain.is_equal(sb.domain):
            return False
        if any(x.tensor is not y.tensor for x, y in zip(la, lb)):
            return False
    return True


def reduction_axis_last(outputs, stage, axis):
    """The graph of ``outputs`` with every operand of ``stage`` that indexes its reduction axis ``axis``
    elsewhere than last read through a copy with that index last; the stage's domain is unchanged.

    A convolution's weight gradient sums over the batch, which both operands index first::

        dW[o, c, kh, kw] = sum_{b, y, x} H[b, o, y, x] * X[b, c, y + kh, x + kw]
        H_t[o, y, x, b] = H[b, o, y, x]                                      { H[b, ..] -> H_t[.., b] }
        X_t[c, y, x, b] = X[b, c, y, x]
        dW[o, c, kh, kw] = sum_{b, y, x} H_t[o, y, x, b] * X_t[c, y + kh, x + kw, b]

    ``rfactor(.., axis="b", interleave=True, axis_last=True)`` then gives each output a vector of partials
    along ``b`` whose loads are whole aligned vectors, where partials along ``x`` have ragged last lanes
    (rows of 26) and shifted loads.  The copies are :func:`innermost`'s (``<T>_t``, their own kernels; a
    zero-padded copy's moved copy reads the unpadded tensor).

    :raises ScheduleError: naming the stage when it does not exist, is not a single reduction, has no reduction
        axis ``axis``, reads ``axis`` other than as one plain index of each load, or reads it last everywhere
        already.
    """
    from ..poly.stage import PolyOp, Statement, statements_of

    outs, op = _named_stage(outputs, stage, "reduction_axis_last")
    why = axis_movable(op, axis)
    if why:
        raise ScheduleError(f"reduction_axis_last: stage {stage!r} {why}")
    (st,) = statements_of(op)
    v = next(r for r in st.red_vars if r.name == axis)
    taken = {o.name for o in walk_ops(outs)}
    # a copy the graph has already (innermost's, for a data gradient that reads the same H) is read, not made again
    made = [o for o in walk_ops(outs) if isinstance(o, PolyOp) and "moved_last_for" in o.attrs]
    values = _read_moved(st.values, v, stage, taken, {}, made)
    new = PolyOp(stage, op.shape, tuple(op.output_dtype(i) for i in range(op.num_outputs)),
                 (Statement(st.name, st.vars, st.n_out, st.domain, tuple(values), st.combiner, st.accumulate),),
                 dict(getattr(op, "attrs", None) or {}))
    return _replace_stage(outs, op, new)


# ---------------------------------------------------------------------------------------------
# space-to-depth: strided reads made unit-stride
# ---------------------------------------------------------------------------------------------
def strided_reads(op, over="reduction"):
    """The operands a reduction reads at a stride: ``[(tensor, strides, loads)]``, or ``[]``.

    ``over="reduction"``: a load's dimension is strided when its index is affine with a single reduction
    variable ``r`` in it, at coefficient ``s >= 2``: ``idx = s*r + e(o)`` (a stride-3 convolution's weight
    gradient reads ``X[b, ci, 3*y + kh, 3*x + kw]``, ``{ [co, ci, kh, kw, b, y, x] -> [b, ci, 3y + kh, 3x + kw] }``).
    ``over="output"``: when it has a single output variable ``o`` at coefficient ``s >= 2``, ``idx = s*o + e(r)``
    (the forward of that convolution reads ``X[b, ci, 3*y + kh, 3*x + kw]`` with ``y, x`` its outputs).
    A tensor qualifies when every load of it in ``op`` has the same strides (``strides``: one per dimension,
    1 where the index is left alone), at least one above 1.  Read off the isl form of the indices, never
    from op names.
    """
    return list(_strided_reads(op)[over])


@op_memo
def _strided_reads(op):
    """:func:`strided_reads` for both ``over``s from one isl pass over the indices, once per op (the graph
    rules, the tuner's moves and ``space_to_depth`` each ask)."""
    from ..poly.convert import NotAffine, ToIsl, pieces
    from ..poly.stage import statements_of
    from ..errors import PolyadError

    none = {"reduction": (), "output": ()}
    if isinstance(op, PlaceholderOp):
        return none
    try:
        stmts = statements_of(op)
    except PolyadError:
        return none
    if len(stmts) != 1 or stmts[0].combiner is None:
        return none
    st = stmts[0]
    conv = ToIsl(st.vars)
    spans = {"reduction": range(st.n_out, len(st.vars)), "output": range(st.n_out)}
    by_tensor = {over: {} for over in spans}
    for load in {id(n): n for n in post_order(tuple(st.values)) if isinstance(n, Load)}.values():
        strides = {over: [] for over in spans}
        for ix in load.indices:
            try:
                ps = pieces(conv.aff(ix))
            except NotAffine:
                ps = []
            affine = len(ps) == 1 and ps[0][1].dim(isl.dim_type.div) == 0
            for over, span in spans.items():
                s = 1
                if affine:
                    aff = ps[0][1]
                    used = [c for c in (int(str(aff.get_coefficient_val(isl.dim_type.in_, j))) for j in span) if c]
                    if len(used) == 1 and used[0] >= 2:
                        s = used[0]
                strides[over].append(s)
        for over in spans:
            by_tensor[over].setdefault(id(load.tensor), (load.tensor, []))[1].append((load, tuple(strides[over])))
    out = {}
    for over, tensors in by_tensor.items():
        found = []
        for T, loads in tensors.values():
            shapes = {s for _, s in loads}
            if len(shapes) == 1 and max(next(iter(shapes)), default=1) > 1:
                found.append((T, next(iter(shapes)), tuple(l for l, _ in loads)))
        out[over] = tuple(found)
    return out


def _s2d_layout(shape, strides):
    """(first strided dimension f, the de-interleaved shape): the phases of the strided dimensions go
    before dimension f, each strided extent ``n`` becomes ``ceil(n / s)``: NCHW strided in H and W is
    ``[N, C, s_h, s_w, ceil(H / s_h), ceil(W / s_w)]``, whose last index runs along ``x`` at unit stride."""
    dims = [d for d, s in enumerate(strides) if s > 1]
    f = dims[0]
    return f, tuple(shape[:f]) + tuple(strides[d] for d in dims) + tuple(
        -(-n // s) for n, s in zip(shape[f:], strides[f:]))


def space_to_depth(outputs, stage):
    """The graph of ``outputs`` with the strided reads of reduction ``stage`` made unit-stride.

    For each operand :func:`strided_reads` finds (``L`` read as ``L[.., s*r + e, ..]``), a de-interleaved
    copy of its own kernel (never inlined back), the isl map ``{ L[i] -> L_s2d[i mod s, i div s] }`` per
    strided dimension::

        L_s2d[.., p, .., q, ..] = L[.., s*q + p, ..]   where s*q + p < n,  0 elsewhere
        T[o] = sum_r ... L_s2d[.., e mod s, .., r + e div s, ..] ...

    ``e`` is free of the reduction variables, so the phase is fixed across the reduction loop and
    consecutive ``r`` read consecutive elements: TVM's and oneDNN's space-to-depth for a strided
    convolution's weight gradient, whose ``X[3y + kh, 3x + kw]`` reads become vector loads along ``x``.
    Where no reduction variable is strided, an output variable ``o`` may be (that convolution's forward):
    ``L[.., s*o + e(r), ..]`` reads ``L_s2d[.., e mod s, .., o + e div s, ..]``, consecutive outputs
    consecutive elements, the phase moving with the reduction.
    Where ``L`` is a zero-padded copy of a box (``pa.nn``'s padding), the copy reads through it (one
    statement, its border a select against zero) and ``L``'s own kernel goes when nothing else reads it.

    :raises ScheduleError: naming the stage when it does not exist or reads nothing at a stride.
    """
    from ..poly.stage import statements_of
    from ..te.construct import floordiv, floormod

    outs, op = _named_stage(outputs, stage, "space_to_depth")
    found, over = strided_reads(op), "reduction"
    if not found:  # the forward of a strided convolution: X[3y + kh] with y an output
        found, over = strided_reads(op, over="output"), "output"
    if not found:
        raise ScheduleError(f"space_to_depth: stage {stage!r} is not a reduction that reads an operand at a "
                            "stride (an index s*r + e with a reduction variable r and s >= 2)")
    st0 = statements_of(op)[0]
    red = st0.red_vars
    taken = {o.name for o in walk_ops(outs)}
    swaps = {}
    for T, strides, loads in found:
        f, made = _s2d_copy(T, strides, stage, taken)
        # another stage's copy of the same values (a transposed conv's data and weight gradients both read its
        # output gradient de-interleaved, each through its own zero-padded copy): read that one
        made = next((o for o in walk_ops(outs) if "space_to_depth_of" in getattr(o, "attrs", {})
                     and _same_copy(o, made)), made)
        taken.add(made.name)
        for load in loads:
            ph, qs = [], []
            for d in range(f, len(strides)):
                ix = load.indices[d]
                if strides[d] == 1:
                    qs.append(ix)
                    continue
                r = next(v for v in (red if over == "reduction" else st0.out_vars) if _uses(ix, v))
                e = substitute(ix, {r: Const(0, r.dtype)})  # ix = s*r + e
                ph.append(floormod(e, strides[d]))
                qs.append(r + floordiv(e, strides[d]))
            swaps[id(load)] = Load(made.output(0), tuple(load.indices[:f]) + tuple(ph + qs))

    new = map_values(op, lambda node, rebuilt: swaps.get(id(node)))
    return _replace_stage(outs, op, new)


def _s2d_copy(T, strides, stage, taken):
    """(first strided dimension, the de-interleaved copy of ``T``: a PolyOp never inlined)."""
    from ..poly.stage import PolyOp, Statement, box_set, dim_names

    f, shape = _s2d_layout(T.shape, strides)
    dims = [d for d, s in enumerate(strides) if s > 1]
    vs = tuple(IterVar(f"j{d}", "int32", lo=0, extent=e, kind="data") for d, e in enumerate(shape))
    names = dim_names(vs)
    phase = {d: f + k for k, d in enumerate(dims)}  # positions in vs
    src, cons = list(vs[:f]), []  # T's index of each copy point, and the points inside T
    for k, d in enumerate(range(f, len(strides))):
        q = f + len(dims) + k
        if d in phase:
            src.append(vs[q] * strides[d] + vs[phase[d]])
            cons.append(f"{strides[d]}*{names[q]} + {names[phase[d]]} < {T.shape[d]}")
        else:
            src.append(vs[q])
    full = box_set("S0", vs)
    zero = _zero(T.dtype)
    boxed = _box_copy(T.op)
    if boxed is not None:
        # T is a zero-padded copy of a box (X_pad[i] = X[i - 1] inside, 0 outside): read X itself, over the
        # whole box, the border a select against zero (no region-by-region statements: every row is one
        # vector block)
        read, bb = boxed
        cond = None
        for d, (lo, hi) in enumerate(bb):
            top = (strides[d] * shape[phase[d] + len(dims)] if d in phase else T.shape[d]) - 1
            for c in ([binary("ge", src[d], Const(lo, "int32"))] if lo > 0 else []) + \
                     ([binary("le", src[d], Const(hi, "int32"))] if hi < top else []):
                cond = c if cond is None else binary("and", cond, c)
        value = substitute(read.values[0], dict(zip(read.out_vars, src)))
        stmts = (Statement("S0", vs, len(vs), full, (value if cond is None else select(cond, value, zero),)),)
    else:
        region = full.intersect(isl.Set("{ S0[" + ", ".join(names) + "] : " + " and ".join(cons) + " }",
                                        context=full.get_ctx()))
        stmts = (Statement("S0", vs, len(vs), region, (Load(T, tuple(src)),)),
                 Statement("S1", vs, len(vs), full.subtract(region).set_tuple_name("S1").coalesce(), (zero,)))
    made = PolyOp(fresh_name(f"{T.name}_s2d", taken), shape, (T.dtype,),
                  tuple(x for x in stmts if not x.domain.is_empty()), {"space_to_depth_of": stage})
    return f, made


def _box_copy(op):
    """(the read statement, its bounds) when ``op`` is a zero-padded copy: a polyhedral stage that reads a
    tensor over a box of its domain and is zero elsewhere (``pa.nn``'s padding, :func:`pad_reads`'s
    copies); else None."""
    from ..poly.convert import bounding_box
    from ..poly.stage import PolyOp

    if not isinstance(op, PolyOp) or op.num_outputs != 1:
        return None
    reads, zeros = [], []
    for st in op.statements:
        v = st.values[0]
        if st.combiner is not None or st.accumulate or st.n_out != len(st.vars):
            return None
        if isinstance(v, Load):
            reads.append(st)
        elif isinstance(v, Const) and v.value == 0:
            zeros.append(st)
        else:
            return None
    if len(reads) != 1:
        return None
    dom = reads[0].domain.reset_tuple_id()
    bb, box = bounding_box(dom)
    return (reads[0], bb) if dom.is_equal(box) else None


def _uses(e, v):
    return any(n is v for n in post_order((e,)))


# ---------------------------------------------------------------------------------------------
# checking and applying a Schedule
# ---------------------------------------------------------------------------------------------
def check_stage_schedule(name, op, ss):
    """Raise ScheduleError (naming the stage) when stage schedule ``ss`` does not fit stage ``op``'s loops."""
    rank = len(op.shape)
    if ss.tile is not None and len(ss.tile) != rank:
        raise ScheduleError(
            f"stage {name!r}: tile {ss.tile} has {len(ss.tile)} sizes but the stage has {rank} output "
            f"dimensions {op.shape}"
        )
    inner = ss.tile[-1] if ss.tile else 1
    if ss.vectorize > 1 and (rank == 0 or inner % ss.vectorize):
        raise ScheduleError(
            f"stage {name!r}: vectorize {ss.vectorize} does not divide the innermost tile size {inner} "
            f"(tile {ss.tile}); make the tile's last size a multiple of {ss.vectorize}"
        )
    if ss.phase is not None:
        _check_phase(name, op, ss)


def _check_phase(name, op, ss):
    """ScheduleError naming the stage and the dimension unless ``ss.phase`` fits ``op`` (and its tile)."""
    rank, shape = len(op.shape), tuple(op.shape)
    if len(ss.phase) != rank:
        raise ScheduleError(
            f"stage {name!r}: phase {ss.phase} has {len(ss.phase)} strides but the stage has {rank} output "
            f"dimensions {shape}"
        )
    axes = _axis_names(op)
    for d, (s, n) in enumerate(zip(ss.phase, shape)):
        if s > n:
            raise ScheduleError(
                f"stage {name!r}: phase stride {s} on dimension {d} ({axes[d]!r}) exceeds its extent {n}; "
                f"a phase needs at least one point per remainder"
            )
        q = -(-n // s)  # the most points of one phase along d
        if s > 1 and ss.tile is not None and ss.tile[d] > q:
            raise ScheduleError(
                f"stage {name!r}: tile {ss.tile[d]} on dimension {d} ({axes[d]!r}) exceeds the {q} points of one "
                f"phase there (extent {n}, phase stride {s}): the tile applies to x // {s}"
            )


def _axis_names(op):
    from ..poly.stage import statements_of

    try:
        return [v.name for v in statements_of(op)[0].out_vars]
    except Exception:  # noqa: BLE001 - a stage without statements: number the axes
        return [f"axis{d}" for d in range(len(op.shape))]


def validate(outputs, schedule):
    """Raise ScheduleError (naming the stage) when ``schedule`` does not fit the graph of ``outputs``.

    ``outputs`` are expected to be uniquely named (see :func:`uniquely_named`).

    :param outputs: a tensor or a list of tensors, uniquely named.
    :param schedule: the :class:`~polyad.schedule.Schedule` to check.
    :returns: the outputs of the graph with the schedule's graph decisions applied but its inlining (the stages
        the auto-scheduler and the tuner key their records on).
    :raises PolyadError: when ``outputs`` is not a tensor or a list of tensors.
    :raises ScheduleError: when the schedule names a stage the graph does not have, pads, rfactors or inlines a
        stage that cannot be, schedules an inlined stage, or gives a stage a tile or vector width that does not fit
        its loops.
    """
    return _validated(as_tensor_list(outputs, "schedule outputs"), schedule)


def _validated(outs, schedule):
    """The graph with ``schedule``'s folds, pads, space-to-depth copies, innermost layouts and rfactors
    applied (each once), every other decision checked against it; the caller inlines.

    They come first: a fold removes the folded copy's producer, and the pads and space-to-depth
    name the copies (``H_pad``, ``X_s2d``, fresh if taken) that stage schedules may mention and turn
    the padded stages into box reductions.
    """
    return _checked(outs, schedule)[0]


def _checked(outs, schedule):
    """(the graph split as :func:`_validated` returns it, the graph inlined too): the graph decisions' part
    (:func:`_decided`, remembered) and the stage schedules checked against it (here, every time)."""
    split, inlined, by_name, after, listing = _decided(outs, GraphDecisions.of(schedule))
    for n in sorted(schedule.stages):
        if n in schedule.inline:
            raise ScheduleError(f"stage {n!r} is inlined: it has no loops of its own to schedule")
        if n not in by_name and n not in after:
            raise ScheduleError(f"the schedule names stage {n!r}, which the graph does not have (stages: {listing})")
        if n in by_name:
            check_stage_schedule(n, by_name[n], schedule.stages[n])
        if n in after and after[n] is not by_name.get(n):  # a split stage's loops are the split's
            check_stage_schedule(n, after[n], schedule.stages[n])
    for n, op in by_name.items():
        if n not in schedule.stages and n not in schedule.inline:
            check_stage_schedule(n, op, schedule.default)
    return split, inlined


@dataclass(frozen=True)
class GraphDecisions:
    """A schedule's graph-level decisions, each a sorted tuple (what :func:`apply_graph_schedule` does to the graph;
    the stage schedules do not change it): a memo key, not a tuple (:func:`~polyad.te.memo.graph_memo` keys
    tuples by their items' identities)."""

    fold: tuple
    pad: tuple
    space_to_depth: tuple
    innermost: tuple  # (stage, dimension) pairs
    rfactor: tuple  # (stage, RFactor) pairs
    inline: tuple

    @classmethod
    def of(cls, schedule):
        from . import RFactor

        return cls(tuple(sorted(schedule.fold)), tuple(sorted(schedule.pad)), tuple(sorted(schedule.space_to_depth)),
                   tuple(sorted(schedule.innermost.items())),
                   tuple((n, RFactor.of(schedule.rfactor[n])) for n in sorted(schedule.rfactor)),
                   tuple(sorted(schedule.inline)))


@graph_memo(64)
def _decided(outs, decisions):
    """The graph of ``outs`` under ``decisions`` (:class:`GraphDecisions`), remembered for the 64 most recent: a
    tuner's candidates differ mostly in stage schedules, and applying the same graph decisions again was a quarter of
    generating lenet_step's candidates (34 ms each).

    :returns: (split graph, inlined graph, name -> op before the rfactors, name -> op after them, the stage names
        listed for errors); the two graphs as tuples.
    """
    fold_, pad, s2d, inner = decisions.fold, decisions.pad, decisions.space_to_depth, decisions.innermost
    rfactor, inline_ = decisions.rfactor, decisions.inline
    _, by_name = stage_ops(outs)
    for n in fold_:
        if n not in by_name:
            raise ScheduleError(f"fold: there is no stage {n!r} (stages: {', '.join(sorted(by_name))})")
        outs = fold(outs, n)
        _, by_name = stage_ops(outs)
    for n in pad:
        if n not in by_name:
            raise ScheduleError(f"pad: there is no stage {n!r} (stages: {', '.join(sorted(by_name))})")
        outs = pad_reads(outs, n)
    if pad:
        _, by_name = stage_ops(outs)
    for n in s2d:
        if n not in by_name:
            raise ScheduleError(f"space_to_depth: there is no stage {n!r} (stages: {', '.join(sorted(by_name))})")
        outs = space_to_depth(outs, n)
    if s2d:
        _, by_name = stage_ops(outs)
    for n, dim in inner:
        outs = innermost(outs, n, dim)
    if inner:
        _, by_name = stage_ops(outs)
    out_ops = {id(t.op) for t in outs}
    listing = ", ".join(sorted(by_name))
    for n, _ in rfactor:
        op = by_name.get(n)
        if op is None:
            raise ScheduleError(f"rfactor: there is no stage {n!r} (stages: {listing})")
        _reduction_form(op)
    split = outs
    for n, spec in rfactor:  # once: the stages they create (n_rf, a padded split's zero-padded
        split = rfactor_by(split, n, spec)  # operands) are what stage schedules may mention too
    _, after = stage_ops(split) if rfactor else (None, by_name)
    for n in inline_:
        _check_inline(n, by_name, out_ops)
    return (tuple(split), tuple(inline(split, frozenset(inline_))), MappingProxyType(by_name), MappingProxyType(after),
            listing)


def apply_graph_schedule(outputs, schedule):
    """(new outputs, schedule): ``schedule``'s fold, pad, space_to_depth, innermost, rfactor then inline applied to
    the graph of ``outputs`` (:func:`scheduled_graph`)."""
    return list(_checked(scheduled_graph(outputs), schedule)[1]), schedule
