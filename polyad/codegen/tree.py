"""Stages -> one isl schedule tree for a whole build.

Every statement of a stage becomes one or three isl statements (an assignment
is one; a reduction is ``init`` (accumulator := identity, or := T[o] when it
accumulates), ``update`` over the reduction points, and ``final`` (T[o] :=
accumulator)).  The tree of a build is::

    domain: every statement instance of every stage
      sequence                                 one filter per stage, in dependency order
        filter: the stage's instances
          mark "kernel <name>"                 one OpenCL kernel
            mark "grid"                        the band below is mapped onto the NDRange
              band [grid dims]                 coincident (parallel) members
                band [o0, ..., o_{n-1}]        the output point
                  sequence                     the stage's statements, in order
                    filter S0_init / S0 (+ band [r...]) / S0_final / filter S1 ...

Everything later schedules do (tiling, splitting, fusing stages, choosing
other NDRange mappings) is a transformation of this tree; lowering
(:mod:`polyad.codegen.lower`) reads the marks, so it does not care how the tree
was produced.
"""

from dataclasses import dataclass

import islpy as isl

from ..poly.stage import dim_names, statements_of

KERNEL_MARK = "kernel "
GRID_MARK = "grid"

_RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    bool uchar ushort uint ulong half size_t ptrdiff_t intptr_t uintptr_t kernel global local constant private
    true false read_only write_only image1d_t image2d_t image3d_t sampler_t event_t NULL INFINITY NAN
    exp log log2 log1p sqrt rsqrt tanh sin cos erf floor ceil rint trunc fabs pow fmin fmax min max abs sign
    isnan select mad fma get_global_id get_local_id get_group_id""".split()
)


def c_identifier(name, used, reserved=_RESERVED):
    """A C identifier derived from ``name``, not in ``used`` nor reserved; added to ``used``."""
    base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "v"
    if base[0].isdigit():
        base = "v" + base
    if base in reserved or _looks_generated(base) or base.startswith("pa_"):
        base += "_"
    nm, k = base, 0
    while nm in used:
        k += 1
        nm = f"{base}_{k}"
    used.add(nm)
    return nm


def _looks_generated(name):
    """Names of the shape the code generator uses for its own locals (c0, t3, r1, acc0_1, gid2, y0, n1)."""
    for p in ("acc", "gid", "c", "t", "r", "y", "n"):
        rest = name[len(p):]
        if name.startswith(p) and rest and all(ch.isdigit() or ch == "_" for ch in rest) and rest[0].isdigit():
            return True
    return False


@dataclass(frozen=True, eq=False)
class IslStatement:
    """One isl statement: a role of one stage statement (assign, init, update or final)."""

    name: str  # the isl tuple name
    stage: object  # the operation
    stmt: object  # the poly.stage.Statement
    index: int  # position of stmt in its stage
    role: str  # "assign" | "init" | "update" | "final"
    domain: object  # isl.Set named ``name``


@dataclass(frozen=True, eq=False)
class KernelSpec:
    name: str  # C identifier of the kernel, also the mark id suffix
    stage: object
    statements: tuple  # the stage's poly Statements
    local_size: tuple  # None: implementation's choice


@dataclass(frozen=True, eq=False)
class ModuleTree:
    """The isl schedule of a build and what its statement names mean."""

    schedule: object  # isl.Schedule
    kernels: tuple  # of KernelSpec, in execution order
    statements: dict  # isl name -> IslStatement

    def kernel(self, name):
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


def _band(stmts, exprs_of):
    """A MultiUnionPwAff band: member d maps each statement to exprs_of(st)[d] (isl syntax)."""
    per_stmt = [(st, exprs_of(st)) for st in stmts]
    n = len(per_stmt[0][1])
    members = []
    for d in range(n):
        parts = []
        for st, exprs in per_stmt:
            names = dim_names(st.stmt.vars[: st.domain.dim(isl.dim_type.set)])
            parts.append(f"{st.name}[{', '.join(names)}] -> [({exprs[d]})]")
        members.append("{ " + "; ".join(parts) + " }")
    return isl.MultiUnionPwAff("[" + ", ".join(members) + "]")


def _grid_exprs(shape, names, grid_dims):
    """The naive NDRange mapping: all output dims, the leading ones fused when there are too many."""
    n = len(shape)
    if n <= grid_dims:
        return list(names)
    k = n - grid_dims + 1  # dims fused into the first grid dim
    terms, stride = [], 1
    for d in reversed(range(k)):
        terms.append(f"{stride}*{names[d]}" if stride != 1 else names[d])
        stride *= shape[d]
    return [" + ".join(reversed(terms))] + list(names[k:])


def _statement_schedule(ist_init, ist_update, ist_final, n_red):
    upd = isl.Schedule.from_domain(isl.UnionSet(ist_update.domain))
    if n_red:
        upd = upd.insert_partial_schedule(
            _band([ist_update], lambda st: dim_names(st.stmt.vars)[st.stmt.n_out:])
        )
    return (
        isl.Schedule.from_domain(isl.UnionSet(ist_init.domain))
        .sequence(upd)
        .sequence(isl.Schedule.from_domain(isl.UnionSet(ist_final.domain)))
    )


def build_tree(stages, schedule):
    """The ModuleTree of ``stages`` (operations in dependency order) under ``schedule``."""
    used_kernel, used_stmt = set(), set()
    kernels, table, stage_scheds = [], {}, []
    for op in stages:
        sched_of = schedule.for_stage(op.name)
        kname = c_identifier(op.name, used_kernel)
        stmts = statements_of(op)
        ists, parts = [], []
        for si, st in enumerate(stmts):
            n, m = st.n_out, len(st.vars) - st.n_out
            if n != len(op.shape):
                raise ValueError(f"stage {op.name!r}: statement {st.name} has {n} output vars for a rank-{len(op.shape)} tensor")
            base = c_identifier(f"{kname}_{st.name}", used_stmt)
            dom = st.domain
            if st.combiner is None:
                ist = IslStatement(base, op, st, si, "assign", dom.set_tuple_name(base))
                ists.append(ist)
                parts.append(isl.Schedule.from_domain(isl.UnionSet(ist.domain)))
                continue
            out_dom = dom.project_out(isl.dim_type.set, n, m)
            init = IslStatement(base + "_init", op, st, si, "init", out_dom.set_tuple_name(base + "_init"))
            upd = IslStatement(base, op, st, si, "update", dom.set_tuple_name(base))
            fin = IslStatement(base + "_final", op, st, si, "final", out_dom.set_tuple_name(base + "_final"))
            ists += [init, upd, fin]
            parts.append(_statement_schedule(init, upd, fin, m))
        for ist in ists:
            table[ist.name] = ist
        sched = parts[0]
        for p in parts[1:]:
            sched = sched.sequence(p)
        n = len(op.shape)
        if n:
            # the point band: the output point of every instance (degenerate under the grid)
            sched = sched.insert_partial_schedule(_band(ists, lambda st: dim_names(st.stmt.out_vars)))
            grid = _band(ists, lambda st: _grid_exprs(op.shape, dim_names(st.stmt.out_vars), sched_of.grid_dims))
            sched = sched.insert_partial_schedule(grid)
            node = sched.get_root().child(0)
            for d in range(node.band_n_member()):
                node = node.band_member_set_coincident(d, 1)
            sched = node.get_schedule()
        node = sched.get_root().child(0).insert_mark(isl.Id(GRID_MARK))
        node = node.insert_mark(isl.Id(KERNEL_MARK + kname))
        stage_scheds.append(node.get_schedule())
        kernels.append(KernelSpec(kname, op, tuple(stmts), sched_of.local_size))
    if not stage_scheds:
        raise ValueError("nothing to build: no stages")
    tree = stage_scheds[0]
    for s in stage_scheds[1:]:
        tree = tree.sequence(s)
    return ModuleTree(tree, tuple(kernels), table)
