"""Lowering a ModuleTree to one isl AST per kernel.

For each ``kernel`` mark of the tree, the ``grid`` band below it is removed
and its members become parameters ``gid0, gid1, ...`` (one per NDRange
dimension): the statement domains are intersected with ``grid(x) = gid``, and
the isl AST generator builds the code of one work-item, with exact loop
bounds and guards derived from the domains.  The NDRange is the bounding box
of the grid band's image (isl ``dim_min``/``dim_max``); work-items of the box
outside the image do nothing (the AST guards them).
"""

from dataclasses import dataclass

import islpy as isl

from ..te.memo import Recent
from .tree import GRID_MARK, KERNEL_MARK


class _Ast:
    """A work-item's isl AST, built when first asked for: a kernel whose C text a :class:`~polyad.codegen.KernelMemo`
    holds is never printed, and isl's AST generation is most of code generation (a padded copy's, up to 1.5 s)."""

    def __init__(self, context, schedule):
        self._args, self._node = (context, schedule), None

    @property
    def node(self):
        if self._node is None:
            context, schedule = self._args
            self._node = isl.AstBuild.from_context(context).node_from_schedule(schedule)
            self._args = None
        return self._node


@dataclass(frozen=True, eq=False)
class LoweredKernel:
    spec: object  # tree.KernelSpec
    lazy_ast: object  # _Ast: the isl.AstNode of one work-item, built on first use
    grid_params: tuple  # names of the parameters bound to the NDRange, outermost first
    grid_box: tuple  # (lo, size) per grid dim, outermost first
    key: str = None  # the kernel's own schedule as isl text, which the AST is a function of (None: lowered in the tree)

    @property
    def ast(self):
        """The isl.AstNode of one work-item."""
        return self.lazy_ast.node


def kernel_nodes(schedule):
    """The ``kernel`` mark nodes of a schedule, in tree (execution) order."""
    found = []

    def visit(node):
        if node.get_type() == isl.schedule_node_type.mark:
            name = node.mark_get_id().get_name()
            if name.startswith(KERNEL_MARK):
                found.append((name[len(KERNEL_MARK):], node))
                return
        for i in range(node.n_children()):
            visit(node.child(i))

    visit(schedule.get_root())
    return found


def _const_of(pw):
    """The integer value of a constant, parameter-free PwAff."""
    vals = []
    pw.foreach_piece(lambda s, aff: vals.append(aff.get_constant_val().to_python()))
    if len(vals) != 1:
        raise ValueError(f"the grid bound {pw} is not a single constant")
    return int(vals[0])


def lower_kernel(spec, node):
    """The LoweredKernel of the kernel mark ``node``."""
    domain = node.get_domain()
    grid_mark = node.child(0)
    if grid_mark.get_type() != isl.schedule_node_type.mark or grid_mark.mark_get_id().get_name() != GRID_MARK:
        raise ValueError(f"kernel {spec.name}: no grid mark below the kernel mark")
    band = grid_mark.child(0)
    n = band.band_n_member() if band.get_type() == isl.schedule_node_type.band else 0
    rest = grid_mark.delete()
    if n == 0:
        sched = rest.get_schedule().intersect_domain(domain)
        return LoweredKernel(spec, _Ast(isl.Set("{ : }"), sched), (), ())
    grid = band.band_get_partial_schedule_union_map().intersect_domain(domain)
    rest = rest.delete()
    params = tuple(f"gid{d}" for d in range(n))
    image = isl.Set.from_union_set(grid.range())
    box = []
    for d in range(n):
        lo, hi = _const_of(image.dim_min(d)), _const_of(image.dim_max(d))
        box.append((lo, hi - lo + 1))
    dims = ", ".join(f"a{d}" for d in range(n))
    eqs = " and ".join(f"a{d} = {p}" for d, p in enumerate(params))
    bind = isl.UnionSet(isl.Set(f"[{', '.join(params)}] -> {{ [{dims}] : {eqs} }}"))
    inst = grid.intersect_range(bind).domain()
    sched = rest.get_schedule().intersect_domain(inst)
    cons = " and ".join(f"{lo} <= {p} < {lo + size}" for p, (lo, size) in zip(params, box))
    context = isl.Set(f"[{', '.join(params)}] -> {{ : {cons} }}")
    return LoweredKernel(spec, _Ast(context, sched), params, tuple(box))


#: kernel schedule (isl text) -> (_Ast, grid params, grid box): the most recent 256 kernels' ASTs, each built when
#: first printed
_MEMO = Recent(256)


def _lowered(spec, node, own):
    """``lower_kernel``, its AST reused where the kernel's own schedule (``own``: one kernel's) was lowered
    before.  The AST is a function of the schedule alone (the statements' bodies are emitted from ``spec``
    later), and a tuner's candidate changes one or two stages: conv2d_5x5_s3's backward spent 2.6 s of its
    3.6 s of code generation here, a candidate."""
    if own is None:
        return lower_kernel(spec, node)
    key = own.to_str()
    hit = _MEMO.get(key)
    if hit is None:
        k = lower_kernel(spec, node)
        hit = _MEMO.put(key, (k.lazy_ast, k.grid_params, k.grid_box))
    return LoweredKernel(spec, *hit, key)


def lower(tree):
    """One LoweredKernel per kernel mark of ``tree`` (a ModuleTree), in execution order.

    Each kernel is lowered from its own small schedule (the same subtree as in
    the whole tree): lowering a kernel inside the whole tree costs time linear
    in the number of stages, quadratic over a build (a 600-stage gradient
    spent 18 s there).
    """
    specs = {k.name: k for k in tree.kernels}
    if not tree.kernel_schedules:
        return [lower_kernel(specs[name], node) for name, node in kernel_nodes(tree.schedule)]
    out = []
    for s in tree.kernel_schedules:
        nodes = kernel_nodes(s)
        for name, node in nodes:
            out.append(_lowered(specs[name], node, s if len(nodes) == 1 else None))
    return out
