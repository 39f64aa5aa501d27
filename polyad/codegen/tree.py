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

A stage with a ``phase`` schedule has its statements replaced first by one statement per phase
(:mod:`polyad.codegen.phase`: ``x = s*q + p`` with ``p`` fixed, over ``q``), in phase-major order;
everything below then treats them as the stage's statements, over the extents of ``q``.

A stage with a ``tile`` / ``vectorize`` / ``unroll`` schedule gets instead
(:func:`_tiled_stage`; statements over ``[b, l, r]``, ``o = tile * b + l``)::

    mark "kernel <name>" / mark "grid"
      band [grid dims of b]                    one work-item per block
        sequence                               per stage statement: full tiles, full groups, partial points
          filter S0_t_init: band [l] unroll    one accumulator per block point (vectors: per group)
          filter S0_t: band [r.., floor(r/U)] / band [r] unroll / band [l] unroll   (unroll-and-jam)
          filter S0_t_final: band [l] unroll
          filter S0_g_init ... (the same for whole vector groups of the other blocks, guarded)
          filter S0_init/S0/S0_final: band [l] (coincident) / naive per-point code

checked by :func:`check_legality` against the stage's dependences.  Lowering
(:mod:`polyad.codegen.lower`) reads the marks, so it does not care how the
tree was produced.
"""

from dataclasses import dataclass

import islpy as isl

from ..errors import ScheduleError
from ..poly.scatter import scatter_form
from ..poly.stage import box_set, dim_names, safe_name, statements_of
from ..schedule import VECTOR_WIDTHS, moved_tile, remainder_widths
from ..te.memo import Recent
from . import phase
from .reserved import is_reserved

KERNEL_MARK = "kernel "
GRID_MARK = "grid"
POINTS_MARK = "points"  # above a block's point band: the printer unrolls the loops below it

def c_identifier(name, used):
    """A C identifier derived from ``name``, not in ``used`` nor reserved; added to ``used``."""
    # ASCII only (OpenCL C), and never an isl keyword: the names also appear in isl strings
    return safe_name(name, used, lambda b: is_reserved(b) or _looks_generated(b) or b.startswith("pa_"))


def _looks_generated(name):
    """Names of the shape the code generator uses for its own locals (c0, t3, r1, acc0_1, gid2, y0, n1)."""
    for p in ("acc", "gid", "c", "t", "r", "y", "n"):
        rest = name[len(p):]
        if name.startswith(p) and rest and all(ch.isdigit() or ch == "_" for ch in rest) and rest[0].isdigit():
            return True
    return False


@dataclass(frozen=True, eq=False)
class IslStatement:
    """One isl statement: a role of one stage statement (assign, init, update or final).

    A ``point`` statement's tuple is the stage statement's variables (outputs,
    then reductions).  A ``block`` statement (a full tile of a tiled stage) has
    the tuple ``[b_0..b_{n-1}, l_0..l_{n-1}, r...]``: output ``o_d = tile_d *
    b_d + l_d``, except that with ``vec > 1`` the last ``l`` counts vectors:
    ``o_{n-1} = tile * b + vec * l + lane`` for the lanes ``0..vec-1``.
    """

    name: str  # the isl tuple name
    stage: object  # the operation
    stmt: object  # the poly.stage.Statement
    index: int  # position of stmt in its stage
    role: str  # "assign" | "init" | "update" | "final"; a one-hot sum's scatter: "zero" | "scatter"
    domain: object  # isl.Set named ``name``
    kind: str = "point"  # "point" | "block" (vector/unrolled) | "lane" (one lane of a block's vector
    # accumulator: [b, l, lane, r]) | "tiled" (partial points: [b, l, r], scalar code)
    tile: tuple = None  # block statements: the tile sizes
    vec: int = 1  # block statements: vector width of the last output dim
    scatter: object = None  # role "scatter": the stage's poly.scatter.Scatter (its tuple lacks the picked dims)
    shift: int = 0  # a block statement's last tile moved back by this many points: o = tile * b + l - shift


@dataclass(frozen=True, eq=False)
class KernelSpec:
    name: str  # C identifier of the kernel, also the mark id suffix
    stage: object
    statements: tuple  # the stage's poly Statements
    local_size: tuple  # None: implementation's choice
    nontemporal: bool = False  # full vector blocks store nontemporally (StageSchedule.nontemporal_stores)
    lane_sum: object = None  # the stage summing this one's vector of partials: the kernel writes its output


@dataclass(frozen=True, eq=False)
class ModuleTree:
    """The isl schedule of a build and what its statement names mean."""

    schedule: object  # isl.Schedule
    kernels: tuple  # of KernelSpec, in execution order
    statements: dict  # isl name -> IslStatement
    kernel_schedules: tuple = ()  # one isl.Schedule per kernel (its subtree, its own domain)

    def kernel(self, name):
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


def tuple_names(ist):
    """isl-safe names of the tuple dimensions of an IslStatement (as its domain has them)."""
    k = ist.domain.dim(isl.dim_type.set)
    if ist.kind in ("block", "tiled", "lane"):
        n = ist.stmt.n_out
        m = len(ist.stmt.vars) - n
        lane = ["pa_lane"] if ist.kind == "lane" else []
        return ([f"pa_b{d}" for d in range(n)] + [f"pa_l{d}" for d in range(n)] + lane + [f"pa_r{d}" for d in range(m)])[:k]
    if ist.role == "scatter":
        return list(ist.scatter.names)
    return dim_names(ist.stmt.vars[:k])


def _band(stmts, exprs_of):
    """A MultiUnionPwAff band: member d maps each statement to exprs_of(st)[d] (isl syntax)."""
    per_stmt = [(st, exprs_of(st)) for st in stmts]
    n = len(per_stmt[0][1])
    members = []
    for d in range(n):
        parts = []
        for st, exprs in per_stmt:
            parts.append(f"{st.name}[{', '.join(tuple_names(st))}] -> [({exprs[d]})]")
        members.append("{ " + "; ".join(parts) + " }")
    return isl.MultiUnionPwAff("[" + ", ".join(members) + "]")


def _insert_band(sched, stmts, exprs_of, loop_type=None, coincident=False):
    """``sched`` with a band (members from exprs_of) inserted at its top; no-op for zero members."""
    if not stmts or not exprs_of(stmts[0]):
        return sched
    sched = sched.insert_partial_schedule(_band(stmts, exprs_of))
    node = sched.get_root().child(0)
    for d in range(node.band_n_member()):
        if loop_type is not None:
            node = node.band_member_set_ast_loop_type(d, loop_type)
        if coincident:
            node = node.band_member_set_coincident(d, 1)
    return node.get_schedule()


#: whether full tiles' point loops are unrolled by the printer (True) or by isl (False: what the tests compare with)
UNROLL_IN_PRINTER = True


def _point_band(sched, stmts, exprs_of):
    """``sched`` with the block points' band on top, under a :data:`POINTS_MARK`: the printer unrolls its loops
    (each point a literal), not isl.  isl's unrolling builds every point's call apart, and that was 70% of its
    AST generation (py-spy, native): conv2d_5x5_s3's eight slowest kernels of a tuning took 14.9 s unrolled,
    2.0 s as loops.  The printed program is the same (tests/codegen compare the two)."""
    if not UNROLL_IN_PRINTER:
        return _insert_band(sched, stmts, exprs_of, isl.ast_loop_type.unroll)
    sched = _insert_band(sched, stmts, exprs_of)
    node = sched.get_root().child(0)
    if node.get_type() != isl.schedule_node_type.band:
        return sched
    return node.insert_mark(isl.Id(POINTS_MARK)).get_schedule()


#: whether a guarded points band's leading and trailing members that range over one interval are unrolled by the
#: printer (True) or by isl with the rest (False: what the tests compare with; the printed programs are the same)
SPLIT_GUARDED = True


def _guarded_band(sched, stmts, exprs_of):
    """The points band (members ``exprs_of``) of statements whose guards isl specialises by unrolling it (see
    ``banded`` in :func:`_tiled_stage`).  Its leading and trailing members that range over one interval, whatever
    the statements' other dimensions are, go to the printer (constant bounds, nothing to guard); isl unrolls those
    between.  isl's unrolling builds every point apart, and this way it builds those of the members its guards are
    about: conv2d_dilated's data gradient's ragged groups at 1x8x3x1, 3 points, not 24 (1.88 s of AST to 0.32 s),
    its padded copy at 1x8x6x4, 24 not 192 (1.15 s to 0.17 s).  The printed programs are the same (docs/runtime.md
    counts the exceptions: other guards, or simpler block coordinates, where isl sees fewer members)."""
    n = len(exprs_of(stmts[0]))
    head, tail = _free_ends(stmts, exprs_of) if SPLIT_GUARDED else (0, 0)
    if head == n:
        return _point_band(sched, stmts, exprs_of)
    if tail:
        sched = _point_band(sched, stmts, lambda st: exprs_of(st)[n - tail:])
    sched = _insert_band(sched, stmts, lambda st: exprs_of(st)[head: n - tail], isl.ast_loop_type.unroll)
    return _point_band(sched, stmts, lambda st: exprs_of(st)[:head]) if head else sched


def _free_ends(stmts, exprs_of):
    """How many leading and how many trailing members of a band (``exprs_of``: each statement's dimension names)
    are :func:`free` in every statement's domain."""
    flags = None
    for st in stmts:
        names = tuple_names(st)
        mine = [x in names and free(st.domain, names.index(x)) for x in exprs_of(st)]
        flags = mine if flags is None else [a and b for a, b in zip(flags, mine)]
    head = next((i for i, f in enumerate(flags) if not f), len(flags))
    tail = next((i for i, f in enumerate(reversed(flags)) if not f), len(flags))
    return head, (tail if head < len(flags) else 0)


def free(D, d):
    """Whether set ``D`` is one interval of its dimension ``d`` times its projection without ``d``: ``{ [b, l] : 0
    <= b < 9 and 0 <= l < 8 }`` is, in ``l``; ``{ [b, l] : 0 <= l < 4 and l <= 32 - 4b }`` is not (which ``l`` a
    block has depends on ``b``)."""
    dims = D.dim(isl.dim_type.set)
    D = D.reset_tuple_id()
    own = D.project_out(isl.dim_type.set, d + 1, dims - d - 1).project_out(isl.dim_type.set, 0, d).coalesce()
    if own.is_empty() or not own.is_box():
        return False
    rest = D.project_out(isl.dim_type.set, d, 1).insert_dims(isl.dim_type.set, d, 1)
    box = own.insert_dims(isl.dim_type.set, 0, d).insert_dims(isl.dim_type.set, d + 1, dims - d - 1)
    return rest.intersect(box).is_subset(D)


def _grid_exprs(shape, names, grid_dims, stmt=None):
    """The naive NDRange mapping: all output dims, the leading ones fused when there are too many.

    With ``PHASE_IN_GRID``, a phased statement's phase is the outermost part of the first grid dimension
    (one NDRange slice per phase) instead of a loop inside each work-item.
    """
    n = len(shape)
    if n == 0:
        return []
    k = max(1, n - grid_dims + 1)  # dims fused into the first grid dim
    terms, stride = [], 1
    for d in reversed(range(k)):
        terms.append(f"{stride}*{names[d]}" if stride != 1 else names[d])
        stride *= shape[d]
    if PHASE_IN_GRID and n and isinstance(stmt, phase.PhasedStatement) and stmt.phase_index:
        terms.append(f"{stmt.phase_index * stride}")
    return [" + ".join(reversed(terms))] + list(names[k:])


# A phased stage's phases: the outermost loop of each work-item (False), or NDRange slices, one per phase
# (True). Measured on conv2d_5x5_s3's data gradient (PoCL, 2 cores): the loop is 8-30% faster, since the
# phases of one block read the same rows of H; kept for devices that want more work-items (docs/scheduling.md).
# Not part of the program cache's key: a switch for experiments, not a setting.
PHASE_IN_GRID = False


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


def stage_tiling(op, sched_of):
    """(tile, vec, unroll) of a stage, checked against it; tile None means the naive loops.

    Raises ScheduleError naming the stage (and the axis) for a tile of the
    wrong rank, a vector width that does not divide the innermost tile size,
    or vectors of a dtype OpenCL has no vector type for.
    """
    n = len(op.shape)
    tile, vec, unroll = sched_of.tile, sched_of.vectorize, sched_of.unroll
    axes = [v.name for v in statements_of(op)[0].out_vars] if n else []
    if tile is not None and len(tile) != n:
        raise ScheduleError(
            f"stage {op.name!r}: tile {tuple(tile)} has {len(tile)} sizes but the output {list(op.shape)} has rank {n}"
        )
    if vec > 1:
        if n == 0:
            raise ScheduleError(f"stage {op.name!r}: vectorize={vec} needs an output axis, the stage is a scalar")
        if tile is None:
            tile = (1,) * (n - 1) + (vec,)
        if tile[-1] % vec:
            raise ScheduleError(
                f"stage {op.name!r}: vectorize={vec} must divide the tile size {tile[-1]} of the innermost axis {axes[-1]!r}"
            )
        bad = [op.output(i).name for i in range(op.num_outputs) if op.output_dtype(i) == "bool"]
        if bad:
            raise ScheduleError(f"stage {op.name!r}: bool outputs {bad} cannot be vectorized (no OpenCL bool vectors)")
    if tile is None and unroll > 1:
        tile = (1,) * n
    return (tuple(tile) if tile is not None else None), vec, unroll


def _join(*groups):
    return ", ".join(x for g in groups for x in g)


#: (domain, output dims, dims, tile, vec) -> _split_full_tiles' sets: isl's work on a stage a tuner's candidate did not
#: change (lenet_step, 40 candidates: 3.9 s of 31 s of code generation)
_SPLIT = Recent(512)


def _split_full_tiles(st, tile, vec, narrower=(), extent=None):
    """:func:`_split_tiles` of ``st``, remembered: it reads only the statement's domain and its dimensions."""
    key = (st.domain.to_str(), st.n_out, len(st.vars), tuple(tile), vec, tuple(narrower), extent)
    hit = _SPLIT.get(key)
    return hit if hit is not None else _SPLIT.put(key, _split_tiles(st, tile, vec, narrower, extent))


def _split_tiles(st, tile, vec, narrower=(), extent=None):
    """(full-tile domain, shifted last tiles' domain, groups, partial domain) of a statement over ``[b, l, r]``
    (o = tile * b + l; l counts vectors in the full tiles and the groups).

    A tile (block ``b``) is full when all its output points are in the
    statement's output domain and they all reduce over the same reduction
    points: then one code path (unrolled points, vectors, no guards) covers
    it.  With ``extent`` (the last output dimension's, given only where a point
    may be computed twice: :func:`_shift_extent`), the last block along it, where it
    is cut (a row of 28 in tiles of 16), is moved back to end at the row's end
    (``o = tile * b + l - shift``) and is a full tile too, when it is one there
    and fewer vectors than its remainder's groups (:func:`~polyad.schedule.moved_tile`).  In the
    other blocks, each vector group (the ``vec``
    lanes of one ``l``; one point when vec is 1) that is whole and reduces over one set
    still gets that code, with isl guards per group where groups differ
    (edges, triangular or strided domains).  Then, for each width ``w`` of
    ``narrower`` (decreasing, each dividing ``vec``), the whole ``w``-lane
    groups among the points left: a 1000-wide output in float16 blocks of 32
    ends in 8 points a row, one float8 group, not 8 scalar reductions one after
    another (``{ [b, l] : 0 <= l < 8 and 32b + l < 1000 }`` at ``b = 31``).
    The rest, groups whose lanes differ, stays in the partial domain (scalar
    loops with exact isl bounds).  The domains cover the statement's instances, each once but those of the
    shifted tiles' points that an earlier tile also computes.

    ``groups``: per width, widest first, ``(w, group_out, group, lanes)``: the groups' output points
    ``[b, lv]``, their vector updates ``[b, lv, r]`` (the reduction points every lane has) and their lanes' own
    updates ``[b, lv, lane, r]`` (a ragged group: lanes reducing over different sets).
    ``shifted``: ``(shift, domain)``, the domain over ``[b, l, r]`` as the full tiles' (empty: none).
    Block coordinates are explicit dimensions, not floor expressions of the
    outputs, so the grid band has no existentially quantified variables.
    """
    D = st.domain
    sname = D.get_tuple_name()
    n, m = st.n_out, len(st.vars) - st.n_out
    b = [f"pa_b{d}" for d in range(n)]
    l = [f"pa_l{d}" for d in range(n)]
    r = [f"pa_r{k}" for k in range(m)]
    lbox = " and ".join(f"0 <= {x} < {t}" for x, t in zip(l, tile)) or "true"
    O = D.project_out(isl.dim_type.set, n, m).set_tuple_name(sname)
    full_blocks, full, Dl = _full_tiles(D, O, tile, vec)
    covered = full_blocks.apply(isl.Map(f"{{ [{_join(b)}] -> [{_join(b, l, r)}] }}"))
    taken = full_blocks.apply(isl.Map(f"{{ [{_join(b)}] -> [{_join(b, l)}] : {lbox} }}"))  # output points done
    shift = moved_tile(extent, tile[-1], vec, narrower) if tile else 0
    shifted = full.subtract(full)
    if shift:
        last = -(-extent // tile[-1]) - 1
        blocks, shifted, _ = _full_tiles(D, O, tile, vec, shift, last)
        if not blocks.is_empty():
            # the points it computes, as the unshifted blocks number them
            o = [f"{t}*{bb} + {ll}" for t, bb, ll in zip(tile, b, l)]
            moved = o[:-1] + [f"{o[-1]} - {shift}"]
            at = blocks.apply(isl.Map(f"{{ [{_join(b)}] -> [{_join(b, l)}] : {lbox} }}"))
            at = at.apply(isl.Map(f"{{ [{_join(b, l)}] -> {sname}[{_join(moved)}] }}"))
            at = at.apply(isl.Map(f"{{ [{_join(b, l)}] -> {sname}[{_join(o)}] : {lbox} }}").reverse())
            taken = taken.union(at)
            covered = covered.union(Dl.intersect(at.apply(isl.Map(f"{{ [{_join(b, l)}] -> [{_join(b, l, r)}] }}"))))
    groups = []
    for w in (vec,) + tuple(narrower):
        if w != vec and Dl.subtract(covered).is_empty():
            break  # nothing left for a narrower width (most stages: no remainder)
        got = _vector_groups(D, O, sname, tile, w, taken)
        if got is None:
            continue
        group_out, group, lanes, points = got
        groups.append((w, group_out, group, lanes))
        covered = covered.union(points.apply(isl.Map(f"{{ [{_join(b, l)}] -> [{_join(b, l, r)}] }}")))
        taken = taken.union(points)
    partial = Dl.subtract(covered).coalesce()
    return full, (shift, shifted.coalesce()), tuple(groups), partial


def _full_tiles(D, O, tile, vec, shift=0, last=None):
    """``(blocks, full, Dl)`` of statement domain ``D`` (output domain ``O``) in tiles of ``tile``, for
    :func:`_split_tiles`: the full blocks ``[b]``, their instances over ``[b, lv, r]`` (the last ``lv`` counting
    ``vec``-lane vectors), and every instance over ``[b, l, r]``; with ``shift``, of the blocks at ``last`` along the
    last dimension moved back by ``shift`` points."""
    sname = D.get_tuple_name()
    n = O.dim(isl.dim_type.set)
    m = D.dim(isl.dim_type.set) - n
    b = [f"pa_b{d}" for d in range(n)]
    l = [f"pa_l{d}" for d in range(n)]
    r = [f"pa_r{k}" for k in range(m)]
    lbox = " and ".join(f"0 <= {x} < {t}" for x, t in zip(l, tile)) or "true"
    back = f" - {shift}" if shift else ""
    at = f" and {b[-1]} = {last}" if last is not None else ""
    o = [f"{t}*{bb} + {ll}" + (back if d == n - 1 else "") for d, (t, bb, ll) in enumerate(zip(tile, b, l))]
    o0 = [f"{t}*{bb}" + (back if d == n - 1 else "") for d, (t, bb) in enumerate(zip(tile, b))]
    Dl = D.apply(isl.Map(f"{{ [{_join(b, l, r)}] -> {sname}[{_join(o, r)}] : {lbox}{at} }}").reverse())
    D0 = D.apply(isl.Map(f"{{ [{_join(b, l, r)}] -> {sname}[{_join(o0, r)}] : {lbox}{at} }}").reverse())
    Ol = O.apply(isl.Map(f"{{ [{_join(b, l)}] -> {sname}[{_join(o)}] : {lbox}{at} }}").reverse())
    cand = Ol.project_out(isl.dim_type.set, n, n)
    whole = cand.apply(isl.Map(f"{{ [{_join(b)}] -> [{_join(b, l)}] : {lbox} }}"))
    missing = whole.subtract(Ol).project_out(isl.dim_type.set, n, n)
    ragged = Dl.subtract(D0).union(D0.subtract(Dl)).project_out(isl.dim_type.set, n, n + m)
    blocks = cand.subtract(missing).subtract(ragged).coalesce()
    full = D.apply(isl.Map(f"{{ [{_join(b, l, r)}] -> {sname}[{_join(o0, r)}] : {_vector_box(l, tile, vec)}{at} }}")
                   .reverse())
    full = full.intersect(blocks.apply(isl.Map(f"{{ [{_join(b)}] -> [{_join(b, l, r)}] }}"))).coalesce()
    return blocks, full, Dl


#: whether a cut last tile moves back to the row's end, a full tile (:func:`_split_tiles`; False: what the tests
#: compare with)
SHIFT_LAST = True


def _shift_extent(stmts, shape):
    """The last output dimension's extent where :func:`_split_tiles` may move a stage's cut last tiles back, so that
    two work-items compute some points alike and both store them: only where no statement writes another's points
    (a later one overwrites or accumulates into them: the second work-item's first statement would undo the
    first's second); None where not.  A phased stage's statements are its statements' phases (``shape``: the
    ``q`` extents), which write apart."""
    srcs = list({id(x): x for x in (getattr(st, "source", None) or st for st in stmts)}.values())
    if not SHIFT_LAST or not shape or any(st.accumulate for st in srcs):
        return None
    outs = [st.out_domain for st in srcs]
    if any(not a.intersect(c).is_empty() for i, a in enumerate(outs) for c in outs[i + 1:]):
        return None
    return shape[-1]


def _phase_extent(st, extent):
    """The extent a statement's cut last tiles move back from: ``extent``, but a phase's own where it has fewer
    points than the phased shape (a 111-wide transposed convolution's odd phase, 55 of ``q``'s 56: its last float16
    tile over 39-54, where it took a float4, a float2 and a scalar group)."""
    if extent is None or not isinstance(st, phase.PhasedStatement):
        return extent
    return min(extent, int(st.out_domain.dim_max_val(st.n_out - 1).to_python()) + 1)


def _vector_box(l, tile, w):
    """``0 <= l_d < tile_d`` with the last ``l`` counting ``w``-lane vectors (isl text)."""
    n = len(tile)
    return " and ".join(f"0 <= {x} < {t // w if d == n - 1 else t}" for d, (x, t) in enumerate(zip(l, tile))) or "true"


def _vector_groups(D, O, sname, tile, w, taken):
    """The whole ``w``-lane groups of statement domain ``D`` (output domain ``O``) none of whose points are in
    ``taken`` (``[b, l]``: points earlier code covers), for :func:`_split_tiles`: ``(group_out, group, lanes,
    points)`` (``points``: theirs, as ``[b, l]``), or None where there are none.

    A group is the ``w`` lanes of one ``lv`` (``o_{n-1} = tile * b + w * lv + lane``); whole: every lane is an
    output point.  A ragged group (lanes reducing over different sets) updates all lanes as a vector over the
    reduction points its lanes share and lane by lane over the others, in one reduction loop."""
    n = len(tile)
    m = D.dim(isl.dim_type.set) - n
    b = [f"pa_b{d}" for d in range(n)]
    lv = [f"pa_l{d}" for d in range(n)]
    r = [f"pa_r{k}" for k in range(m)]
    lane = ["pa_lane"]
    vbox = _vector_box(lv, tile, w)
    og = [f"{t}*{bb} + {ll}" for t, bb, ll in zip(tile[:-1], b[:-1], lv[:-1])] + (
        [f"{tile[-1]}*{b[-1]} + {w}*{lv[-1]} + pa_lane"] if n else [])
    gbox = f"{vbox} and 0 <= pa_lane < {w}"
    DG = D.apply(isl.Map(f"{{ [{_join(b, lv, lane, r)}] -> {sname}[{_join(og, r)}] : {gbox} }}").reverse())
    OG = O.apply(isl.Map(f"{{ [{_join(b, lv, lane)}] -> {sname}[{_join(og)}] : {gbox} }}").reverse())
    gcand = OG.project_out(isl.dim_type.set, 2 * n, 1)
    gwhole = gcand.apply(isl.Map(f"{{ [{_join(b, lv)}] -> [{_join(b, lv, lane)}] : 0 <= pa_lane < {w} }}"))
    gmissing = gwhole.subtract(OG).project_out(isl.dim_type.set, 2 * n, 1)
    group_points = _group_points_map(b, lv, w)
    overlapping = taken.apply(group_points.reverse())
    groups = gcand.subtract(gmissing).subtract(overlapping).coalesce()
    if groups.is_empty():
        return None
    lift = isl.Map(f"{{ [{_join(b, lv)}] -> [{_join(b, lv, r)}] }}")
    to_lanes = isl.Map(f"{{ [{_join(b, lv, r)}] -> [{_join(b, lv, lane, r)}] : 0 <= pa_lane < {w} }}")
    any_lane = DG.project_out(isl.dim_type.set, 2 * n, 1).intersect(groups.apply(lift))
    every = any_lane.subtract(any_lane.apply(to_lanes).subtract(DG).project_out(isl.dim_type.set, 2 * n, 1))
    group_out = groups.intersect(isl.Set(f"{{ [{_join(b, lv)}] : {vbox} }}")).coalesce()
    lanes = DG.intersect(groups.apply(isl.Map(f"{{ [{_join(b, lv)}] -> [{_join(b, lv, lane, r)}] }}")))
    lanes = lanes.subtract(every.apply(to_lanes)).coalesce()
    return group_out, every.coalesce(), lanes, groups.apply(group_points)


def _group_parts(groups, n, tile):
    """``(w, group_out, group, lanes, suffix)`` per :func:`_split_tiles` group, cut by blocks: those whose groups
    fill the tile along every dimension but the last (suffix ``""``), and the others (``"_e"``: a block cut by an
    edge of the output, a row of 28 in blocks of 3).  Without the cut, every block's group loop guarded each point
    by the edge blocks' conditions, inside its reduction loop: a 3x3/2/1 conv2d's float8 and float4 groups (rows of
    28 in 1x4x3x16 blocks) ran its stage 1.7x slower than 1x4x4x16's, whose rows of 28 the blocks divide."""
    out = []
    for w, group_out, group, lanes in groups:
        whole = _whole_blocks(group_out, n, tile)
        if whole is None:
            out.append((w, group_out, group, lanes, ""))
            continue
        edge = group_out.reset_tuple_id().project_out(isl.dim_type.set, n, n).subtract(whole)
        for suffix, blocks in (("", whole), ("_e", edge)):
            def cut(dom, blocks=blocks):
                lift = blocks.insert_dims(isl.dim_type.set, n, dom.dim(isl.dim_type.set) - n)
                return dom.intersect(lift.set_tuple_id(dom.get_tuple_id()) if dom.has_tuple_id() else lift).coalesce()
            out.append((w, cut(group_out), cut(group), cut(lanes), suffix))
    return out


def _whole_blocks(group_out, n, tile):
    """The blocks (``[b]``) whose vector groups ``group_out`` (``[b, lv]``) hold every point of the tile along the
    dimensions before the last; None where every block's or no block's do (nothing to cut)."""
    if n < 2 or group_out.is_empty():
        return None
    names = [f"pa_b{d}" for d in range(n)] + [f"pa_l{d}" for d in range(n)]
    box = " and ".join(f"0 <= pa_l{d} < {tile[d]}" for d in range(n - 1))
    G = group_out.reset_tuple_id()
    full = G.project_out(isl.dim_type.set, n, n - 1).insert_dims(isl.dim_type.set, n, n - 1)
    full = full.intersect(isl.Set(f"{{ [{', '.join(names)}] : {box} }}"))
    cut = full.subtract(G).project_out(isl.dim_type.set, n, n)
    if cut.is_empty():
        return None
    whole = G.project_out(isl.dim_type.set, n, n).subtract(cut)
    return None if whole.is_empty() else whole.coalesce()


def _group_points_map(b, lv, w):
    """``{ [b, lv] -> [b, l] }``: the points of a ``w``-lane group (``l_{n-1} = w * lv_{n-1} + lane``)."""
    n = len(b)
    x = [f"pa_x{d}" for d in range(n)]
    cons = [f"{xd} = {ld}" for xd, ld in zip(x[:-1], lv[:-1])] + (
        [f"{w}*{lv[-1]} <= {x[-1]} < {w}*{lv[-1]} + {w}"] if n else [])
    return isl.Map(f"{{ [{_join(b, lv)}] -> [{_join(b, x)}] : {' and '.join(cons) or 'true'} }}")


def _points_span_every_reduction(ist, n):
    """Whether an update statement's block points (its dimensions after the ``n`` block coordinates, before the
    reduction's) are the same set at every reduction point of their block: then the printer unrolls them inside
    the reduction loop with guards on the grid alone.  Where they are not (a strided convolution's data gradient:
    which points a reduction point updates depends on both), isl's unrolling keeps its guards, which it derives
    from the whole domain (the printer's, per point and loop bound, made one such kernel 2.2x slower)."""
    D = ist.domain
    dims = D.dim(isl.dim_type.set)
    m = len(ist.stmt.vars) - ist.stmt.n_out
    if m == 0:
        return True
    points = D.project_out(isl.dim_type.set, dims - m, m).insert_dims(isl.dim_type.set, dims - m, m)
    reds = D.project_out(isl.dim_type.set, n, dims - m - n).insert_dims(isl.dim_type.set, n, dims - m - n)
    both = points.intersect(reds)  # isl drops the tuple's name where it changes the dimensions
    return both.set_tuple_name(D.get_tuple_name()).is_subset(D) if D.has_tuple_name() else both.is_subset(D)


def _reduction_bands(sched, stmts, unroll):
    """The reduction band of update statements on top of ``sched``; the innermost reduction
    loop split by ``unroll`` with the inner part unrolled by the AST generator."""
    def red(st):
        names = tuple_names(st)
        return names[len(names) - (len(st.stmt.vars) - st.stmt.n_out):]

    if unroll > 1:
        sched = _insert_band(sched, stmts, lambda st: red(st)[-1:], loop_type=isl.ast_loop_type.unroll)
        return _insert_band(sched, stmts, lambda st: red(st)[:-1] + [f"floor({red(st)[-1]}/{unroll})"] if red(st) else [])
    return _insert_band(sched, stmts, red)


def _tiled_stage(op, stmts, bases, tile, vec, unroll, grid_dims, shape=None, widths=()):
    """IslStatements and the schedule (grid band on top) of a tiled stage (``bases``: each statement's C name;
    ``shape``: the extents the tile applies to, the stage's own or, for a phased stage, those of ``q``;
    ``widths``: the vector widths the device compiles, for the narrower groups a reduction's remainder takes)."""
    n = len(op.shape)
    blocks = tuple(-(-s // t) for s, t in zip(shape or op.shape, tile))
    ists, parts = [], []
    unrolled = isl.ast_loop_type.unroll
    extent = _shift_extent(stmts, shape or op.shape)
    for si, (st, base) in enumerate(zip(stmts, bases)):
        narrower = remainder_widths(vec, widths) if st.combiner is not None else ()
        full, (shift, shifted), groups, partial = _split_full_tiles(st, tile, vec, narrower, _phase_extent(st, extent))
        m = len(st.vars) - st.n_out

        def points(x):
            return tuple_names(x)[n: 2 * n]

        def banded(ist, full=True, exprs_of=points):
            """One statement's schedule with its block points as a band, unrolled by the printer: a full tile's
            (its points' loops have constant bounds), and a partial block's accumulators (init and final: each
            point guarded by the grid, isl's unrolling took 3x as long to generate); ``full=False``: by isl, which
            specialises the guards to the grid's values (a copy's vector groups: a padded copy's, printer-unrolled,
            ran 1.1-1.3x slower, and 1.2x slower as loops), but for the leading and trailing points
            :func:`_guarded_band` finds nothing to guard in."""
            one = isl.Schedule.from_domain(isl.UnionSet(ist.domain))
            return _point_band(one, [ist], exprs_of) if full else _guarded_band(one, [ist], exprs_of)

        blk = dict(stage=op, stmt=st, index=si, kind="block", tile=tile, vec=vec)
        for name, dom, moved in ((base + "_t", full, 0), (base + "_s", shifted, shift)):
            if dom.is_empty():
                continue
            tb = dict(blk, shift=moved)
            if st.combiner is None:
                ist = IslStatement(name, role="assign", domain=dom.set_tuple_name(name), **tb)
                ists.append(ist)
                parts.append(banded(ist))
            else:
                out = dom.project_out(isl.dim_type.set, 2 * n, m)
                init = IslStatement(name + "_init", role="init", domain=out.set_tuple_name(name + "_init"), **tb)
                upd = IslStatement(name, role="update", domain=dom.set_tuple_name(name), **tb)
                fin = IslStatement(name + "_final", role="final", domain=out.set_tuple_name(name + "_final"), **tb)
                ists += [init, upd, fin]
                # unroll-and-jam: the block's points inside the reduction loop, one accumulator each
                u = _reduction_bands(
                    banded(upd),
                    [upd], unroll,
                )
                parts.append(
                    banded(init)
                    .sequence(u)
                    .sequence(banded(fin))
                )
        for w, group_out, group, lanes, suffix in _group_parts(groups, n, tile):
            name = base + ("_g" if w == vec else f"_g{w}") + suffix
            gblk = dict(blk, vec=w)
            if st.combiner is None:
                ist = IslStatement(name, role="assign", domain=group_out.set_tuple_name(name), **gblk)
                ists.append(ist)
                parts.append(banded(ist, full=False))
                continue
            init = IslStatement(name + "_init", role="init", domain=group_out.set_tuple_name(name + "_init"), **gblk)
            fin = IslStatement(name + "_final", role="final", domain=group_out.set_tuple_name(name + "_final"), **gblk)
            upds, scheds = [], []
            if not group.is_empty():
                upd = IslStatement(name, role="update", domain=group.set_tuple_name(name), **gblk)
                upds.append(upd)
                scheds.append(isl.Schedule.from_domain(isl.UnionSet(upd.domain)))
            if not lanes.is_empty():
                lup = IslStatement(name + "_lane", role="update", domain=lanes.set_tuple_name(name + "_lane"),
                                   **dict(gblk, kind="lane"))
                upds.append(lup)
                # a ragged group's lanes, unrolled by isl (a lane is no block point the printer knows the extent of)
                one = isl.Schedule.from_domain(isl.UnionSet(lup.domain))
                scheds.append(_insert_band(one, [lup], lambda x: [tuple_names(x)[2 * n]], unrolled))
            ists += [init] + upds + [fin]
            seq = banded(init)
            if upds:
                u = scheds[0] if len(scheds) == 1 else scheds[0].set(scheds[1])
                # unroll-and-jam, the points unrolled by the printer where their guards are the grid's alone
                if all(_points_span_every_reduction(x, n) for x in upds):
                    u = _point_band(u, upds, points)
                else:
                    u = _guarded_band(u, upds, points)
                u = _reduction_bands(u, upds, unroll)
                seq = seq.sequence(u)
            parts.append(seq.sequence(banded(fin)))
        if not partial.is_empty() or (full.is_empty() and not groups):
            tl = dict(kind="tiled", tile=tile)
            if st.combiner is None:
                own = [IslStatement(base, op, st, si, "assign", partial.set_tuple_name(base), **tl)]
                part = isl.Schedule.from_domain(isl.UnionSet(own[0].domain))
            else:
                out = partial.project_out(isl.dim_type.set, 2 * n, m)
                own = [
                    IslStatement(base + "_init", op, st, si, "init", out.set_tuple_name(base + "_init"), **tl),
                    IslStatement(base, op, st, si, "update", partial.set_tuple_name(base), **tl),
                    IslStatement(base + "_final", op, st, si, "final", out.set_tuple_name(base + "_final"), **tl),
                ]
                part = (
                    isl.Schedule.from_domain(isl.UnionSet(own[0].domain))
                    .sequence(_reduction_bands(isl.Schedule.from_domain(isl.UnionSet(own[1].domain)), [own[1]], unroll))
                    .sequence(isl.Schedule.from_domain(isl.UnionSet(own[2].domain)))
                )
            ists += own
            parts.append(_insert_band(part, own, lambda x: tuple_names(x)[n: 2 * n], coincident=True))
    sched = parts[0]
    for p in parts[1:]:
        sched = sched.sequence(p)

    sched = _insert_band(sched, ists, lambda x: _grid_exprs(blocks, tuple_names(x)[:n], grid_dims, x.stmt), coincident=True)
    return ists, sched


def _point_map(ist, m_max):
    """isl map from an IslStatement's tuple to its output point(s) and, for updates, its reduction point.

    Reduction coordinates are padded with 0 to ``m_max``; a vector statement maps to all its lanes.
    """
    st = ist.stmt
    n, m = st.n_out, len(st.vars) - st.n_out
    names = tuple_names(ist)
    red = list(names[len(names) - m:]) if ist.role == "update" and m else []
    outs = [f"pa_p{d}" for d in range(n)]
    if ist.kind == "point":
        cons = [f"pa_p{d} = {names[d]}" for d in range(n)]
    else:
        vec = ist.vec if ist.kind == "block" else 1
        step = ist.vec if ist.kind == "lane" else vec
        cons = []
        for d, t in enumerate(ist.tile):
            lo = f"{t}*{names[d]} + {step if d == n - 1 else 1}*{names[n + d]}" + (
                f" - {ist.shift}" if d == n - 1 and ist.shift else "")
            if d == n - 1 and ist.kind == "lane":
                lo += f" + {names[2 * n]}"
            cons.append(f"{lo} <= pa_p{d} < {lo} + {vec}" if d == n - 1 and vec > 1 else f"pa_p{d} = {lo}")
    rng = outs + red + ["0"] * (m_max - len(red))
    pm = isl.UnionMap(f"{{ {ist.name}[{', '.join(names)}] -> [{', '.join(rng)}] : {' and '.join(cons) or 'true'} }}")
    if isinstance(st, phase.PhasedStatement):  # back to the stage's point: x = s*q + p, r = r' + a*q
        ys = [f"pa_y{i}" for i in range(n + m_max)]
        back = [f"{s}*pa_y{d} + {p}" for d, (s, p) in enumerate(zip(st.strides, st.offsets))]
        back += [" + ".join([f"pa_y{n + j}"] + [f"{a}*pa_y{d}" for d, a in enumerate(st.skew[j]) if a])
                 for j in range(len(red))]  # an update's reduction point; other roles' padding stays 0
        back += [f"pa_y{n + j}" for j in range(len(red), m_max)]
        pm = pm.apply_range(isl.UnionMap(f"{{ [{', '.join(ys)}] -> [{', '.join(back)}] }}"))
    return pm


#: keys of the stage schedules check_legality passed, most recent last (a tuner's candidate changes one or two
#: stages and regenerates them all: conv2d_5x5_s3's backward spent 0.4 s a candidate here)
_LEGAL = Recent(512)


def _legality_key(ists, sched):
    """Everything check_legality reads: the schedule (with its statements' domains) and each statement's role,
    order, block shape and phase."""
    return sched.to_str(), tuple(
        (ist.name, ist.role, ist.index, ist.kind, ist.tile, ist.vec, ist.shift, ist.stmt.n_out, len(ist.stmt.vars),
         getattr(ist.stmt, "strides", None), getattr(ist.stmt, "offsets", None), getattr(ist.stmt, "skew", None),
         ist.domain.to_str()) for ist in ists)


def check_legality(op, ists, sched):
    """Raise ScheduleError unless ``sched`` (one stage's schedule) keeps the stage's dependences (remembered:
    a schedule that passed once passes again without the isl work).

    Every output point is its own chain of work: a statement's init, its
    updates in lexicographic order of the reduction points (a tuple
    reduction such as argmax depends on that order), its final store; and the
    statements of the stage in order (a later one overwrites, or accumulates
    into, what an earlier one wrote at the same point).  Every dependence must
    go forward in the schedule, within one work-item (grid members equal).
    """
    if not ists:
        return
    key = _legality_key(ists, sched)
    if _LEGAL.get(key) is None:
        _check_legality(op, ists, sched)
        _LEGAL.put(key, True)


def _check_legality(op, ists, sched):
    groups = {}
    # the phases of a phased stage write disjoint points: checked one by one; a shifted last tile computes its
    # points again, on its own: its work-item's chain is checked apart from the earlier tile's
    for ist in ists:
        groups.setdefault((getattr(ist.stmt, "offsets", None), ist.shift), []).append(ist)
    if len(groups) > 1:
        for g in groups.values():
            _check_legality(op, g, sched)
        return
    n_out = len(op.shape)
    rank = {"init": 0, "assign": 0, "update": 1, "final": 2}
    deps = None
    m_max = max(len(ist.stmt.vars) - ist.stmt.n_out for ist in ists)
    maps = {ist.name: _point_map(ist, m_max).intersect_domain(isl.UnionSet(ist.domain)) for ist in ists}
    k = n_out + m_max
    xs, ys = [f"x{i}" for i in range(k)], [f"y{i}" for i in range(k)]
    same_point = [f"x{i} = y{i}" for i in range(n_out)] or ["true"]
    for a in ists:
        for b in ists:
            before = (a.index, rank[a.role]) < (b.index, rank[b.role])
            same = a.index == b.index and a.role == b.role == "update"
            if not (before or same):
                continue
            # the same output point; two updates of one statement: an earlier reduction point first
            cons = list(same_point)
            m = len(a.stmt.vars) - a.stmt.n_out if same else 0
            if m:
                cons.append("(" + " or ".join(
                    " and ".join([f"x{n_out + j} = y{n_out + j}" for j in range(q)] + [f"x{n_out + q} < y{n_out + q}"])
                    for q in range(m)) + ")")
            pairs = isl.UnionMap(f"{{ [{', '.join(xs)}] -> [{', '.join(ys)}] : {' and '.join(cons)} }}")
            rel = maps[a.name].apply_range(pairs).apply_range(maps[b.name].reverse())
            deps = rel if deps is None else deps.union(rel)
    if deps is None or deps.is_empty():
        return
    smap = sched.get_map().intersect_domain(isl.UnionSet.from_set(ists[0].domain) if len(ists) == 1 else
                                            _union(ist.domain for ist in ists))
    ordered = smap.lex_lt_union_map(smap)
    bad = deps.subtract(ordered)
    if not bad.is_empty():
        raise ScheduleError(
            f"stage {op.name!r}: the loop schedule would reorder dependent statement instances: {bad.coalesce()}"
        )


def _union(sets):
    out = None
    for x in sets:
        u = isl.UnionSet.from_set(x)
        out = u if out is None else out.union(u)
    return out


def _naive_stage(op, stmts, kname, used_stmt, shape, grid_dims):
    """(isl statements, schedule) of a stage's naive loops: a work-item per output point, each statement's
    init, update over the reduction points in order, and final store."""
    ists, parts = [], []
    for si, st in enumerate(stmts):
        n, m = st.n_out, len(st.vars) - st.n_out
        if n != len(op.shape):
            raise ValueError(f"stage {op.name!r}: statement {st.name} has {n} output vars for a "
                             f"rank-{len(op.shape)} tensor")
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
    sched = parts[0]
    for p in parts[1:]:
        sched = sched.sequence(p)
    n = len(op.shape)
    if n:
        # the point band: the output point of every instance (degenerate under the grid)
        sched = sched.insert_partial_schedule(_band(ists, lambda st: dim_names(st.stmt.out_vars)))
        grid = _band(ists, lambda st: _grid_exprs(shape, dim_names(st.stmt.out_vars), grid_dims, st.stmt))
        sched = sched.insert_partial_schedule(grid)
        node = sched.get_root().child(0)
        for d in range(node.band_n_member()):
            node = node.band_member_set_coincident(d, 1)
        sched = node.get_schedule()
    return ists, sched


def _scatter_stage(op, st, form, blocks, base, grid_dims):
    """(isl statements, schedule) of a one-hot sum's scatter (poly/scatter.py): a work-item per block (``blocks``:
    a size per output dimension, 1 along the picked ones) of the other output dimensions zeroes its part of the
    output (all of it: the stage's zero fills too), then adds each reduction point's value at the indices that
    point computes, in the reduction's order (the gather's additions, in its order, at every point), the block's
    points innermost."""
    n, picked = st.n_out, set(form.dims)
    names = dim_names(st.vars)
    zero = IslStatement(base + "_zero", op, st, form.index, "zero", box_set(base + "_zero", st.out_vars))
    scat = IslStatement(base, op, st, form.index, "scatter", form.domain.set_tuple_name(base), scatter=form)
    outer = [(nm, t, x) for d, (nm, t, x) in enumerate(zip(names[:n], blocks, op.shape)) if d not in picked]
    points = [nm for nm, _, _ in outer]
    # the reduction points in the gather's order: a position that replaced a reduction variable runs down where
    # that variable ran up (poly/scatter.py's order)
    red = [nm if o == 1 else f"-{nm}" for nm, o in zip(form.names[len(points):], form.order)]
    sched = _insert_band(isl.Schedule.from_domain(isl.UnionSet(zero.domain)), [zero],
                         lambda x: [nm for d, nm in enumerate(names[:n]) if d in picked] + points).sequence(
        _insert_band(isl.Schedule.from_domain(isl.UnionSet(scat.domain)), [scat], lambda x: red + points))
    if outer:
        grid = [nm if t == 1 else f"floor(({nm})/{t})" for nm, t, _ in outer]
        shape = [-(-x // t) for _, t, x in outer]
        sched = _insert_band(sched, [zero, scat], lambda x: _grid_exprs(shape, grid, grid_dims), coincident=True)
    return [zero, scat], sched


#: an rfactor's sum of a point's vectors of partials is printed in the partials' kernel (tests compare both)
LANE_SUMS = True


def lane_sums(stages, schedule, outputs=()):
    """``{id(partials op): sum op}``: the sums of interleaved partials that the partials' kernel computes itself.

    ``T[o] = sum_{ri} T_rf[o, ri]`` (graph.rfactor's final stage) where ``T_rf``, read by ``T`` alone and not an
    output, is blocked with its whole last dimension in vectors (``tile[-1] == F``) in tiles that divide it: a
    full block's final statements hold a point's ``F`` partials in ``F / vectorize`` vector accumulators, each of
    which adds its lanes in halves into ``T[o]`` (the first stores, the others add to it), where a kernel of its own
    read them back from memory, gathered across points (a layer norm's backward: two such kernels of 0.04-0.14 ms).
    The sum's order is the halves' (the rfactor's reassociation, once more)."""
    if not LANE_SUMS:
        return {}
    from ..te.expr import Load, Reduce
    from ..te.tensor import ComputeOp, PlaceholderOp

    readers, out_ops = {}, {id(t.op) for t in outputs}
    for op in stages:
        for t in op.input_tensors:
            readers.setdefault(id(t.op), set()).add(id(op))
    pairs = {}
    for T in stages:
        b = T.body[0] if isinstance(T, ComputeOp) and len(T.body) == 1 else None
        if not isinstance(b, Reduce) or len(b.axis) != 1 or b.combiner.kind() != "sum" or len(b.source) != 1:
            continue
        load, rk = b.source[0], b.axis[0]
        if not (isinstance(load, Load) and len(load.indices) == len(T.axis) + 1 and rk.lo == 0
                and all(i is v for i, v in zip(load.indices, tuple(T.axis) + (rk,)))
                and getattr(b.condition, "value", None) is True and T.output_dtype(0).startswith("float")):
            continue
        P = load.tensor.op
        if (isinstance(P, PlaceholderOp) or P.num_outputs != 1 or readers.get(id(P)) != {id(T)} or id(P) in out_ops
                or rk.extent != P.shape[-1]):
            continue
        ss = schedule.for_stage(P.name)
        tile, vec, _ = stage_tiling(P, ss)  # vectors: a one-hot sum among them builds as the gather, not a scatter
        if (tile is None or vec < 2 or tile[-1] != P.shape[-1] or phase.active(ss.phase)
                or any(n % t for n, t in zip(P.shape, tile)) or not _one_reduction_over_its_box(P)):
            continue
        pairs[id(P)] = T
    return pairs


def _one_reduction_over_its_box(op):
    """Whether ``op`` is one reduction statement, from its identity, at every point of its box: its blocks' final
    statements then write every point (no zero fill or other statement writes one a lane sum would miss)."""
    sts = statements_of(op)
    if len(sts) != 1 or sts[0].combiner is None or sts[0].accumulate:
        return False
    return sts[0].out_domain.is_equal(box_set("", sts[0].out_vars).reset_tuple_id())


#: tiled stages built (stage statements, isl statements, marked schedule), by everything they are a function of:
#: the stage (held by the entry, so that its id is not reused), names, tiling and phase.  A tuner's candidate
#: changes a stage or three of lenet_step's thirty and builds them all again: that was a quarter of generating
#: its candidates (26 ms each).
_TILED = Recent(1024)


def build_tree(stages, schedule, widths=None, outputs=()):
    """The ModuleTree of ``stages`` (operations in dependency order) under ``schedule``; ``widths``: the vector
    widths the device compiles (None: all of ``VECTOR_WIDTHS``), of which a tiled reduction's remainder takes the
    narrower groups (:func:`_split_tiles`); ``outputs``: the program's (a stage computing one is never folded into
    another's kernel, :func:`lane_sums`)."""
    widths = VECTOR_WIDTHS if widths is None else tuple(sorted(w for w in widths if w in VECTOR_WIDTHS))
    used_kernel, used_stmt = set(), set()
    kernels, table, stage_scheds = [], {}, []
    summed = lane_sums(stages, schedule, outputs)
    absorbed = {id(T) for T in summed.values()}
    for op in stages:
        if id(op) in absorbed:  # computed by its partials' kernel
            continue
        sched_of = schedule.for_stage(op.name)
        kname = c_identifier(op.name, used_kernel)
        stmts = statements_of(op)
        tile, vec, unroll = stage_tiling(op, sched_of)
        shape = tuple(op.shape)
        if phase.active(sched_of.phase):  # one statement per phase, over q (x = s*q + p): codegen/phase.py
            stmts = phase.phase_statements(op, stmts, sched_of.phase)
            shape = phase.phase_shape(shape, sched_of.phase)
        form = scatter_form(op)
        blocks = form.blocks(sched_of, len(op.shape)) if form is not None else None
        if blocks is None and tile is not None:
            bases = tuple(c_identifier(f"{kname}_{st.name}", used_stmt) for st in stmts)
            key = (id(op), kname, bases, tile, vec, unroll, sched_of.grid_dims, sched_of.phase, UNROLL_IN_PRINTER,
                   PHASE_IN_GRID, SPLIT_GUARDED, SHIFT_LAST, widths)
            hit = _TILED.get(key)
            if hit is None:
                ists, sched = _tiled_stage(op, stmts, bases, tile, vec, unroll, sched_of.grid_dims, shape, widths)
                check_legality(op, ists, sched)
                node = sched.get_root().child(0).insert_mark(isl.Id(GRID_MARK))
                hit = _TILED.put(key, (op, tuple(stmts), ists,
                                       node.insert_mark(isl.Id(KERNEL_MARK + kname)).get_schedule()))
            # the statements the entry's were built from (the printer knows a statement by its object): a phased
            # stage's are remembered apart (codegen/phase.py), and may have been forgotten there
            _, stmts, ists, marked = hit
            for ist in ists:
                table[ist.name] = ist
            stage_scheds.append(marked)
            kernels.append(KernelSpec(kname, op, stmts, sched_of.local_size,
                                      sched_of.nontemporal_stores(op.shape), summed.get(id(op))))
            continue
        if blocks is not None:
            st = stmts[form.index]
            ists, sched = _scatter_stage(op, st, form, blocks, c_identifier(f"{kname}_{st.name}", used_stmt),
                                         sched_of.grid_dims)
        else:
            ists, sched = _naive_stage(op, stmts, kname, used_stmt, shape, sched_of.grid_dims)
        for ist in ists:
            table[ist.name] = ist
        node = sched.get_root().child(0).insert_mark(isl.Id(GRID_MARK))
        node = node.insert_mark(isl.Id(KERNEL_MARK + kname))
        stage_scheds.append(node.get_schedule())
        kernels.append(KernelSpec(kname, op, tuple(stmts), sched_of.local_size))
    if not stage_scheds:
        raise ValueError("nothing to build: no stages")
    # sequence in halves: isl copies the tree on every sequence(), pairwise keeps it O(n log n)
    level = list(stage_scheds)
    while len(level) > 1:
        level = [level[i].sequence(level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return ModuleTree(level[0], tuple(kernels), table, tuple(stage_scheds))
