"""Generic traversals of expressions and tensor graphs.

Everything here is a pure function.  Expressions are hash-consed DAGs, so the
traversals memoise by identity: each distinct node is visited once.
"""

from .construct import as_expr, binary, cast, select, unary
from .expr import OPS, Call, Load, Reduce, Var


def post_order(root):
    """Every distinct node under ``root`` (an Expr or a tuple of them), children first."""
    roots = root if isinstance(root, (tuple, list)) else (root,)
    seen, out = set(), []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            out.append(node)
            continue
        stack.append((node, True))
        for c in reversed(node.children()):
            if id(c) not in seen:
                stack.append((c, False))
    return out


def transform(root, fn, memo=None):
    """Rebuild ``root`` bottom-up.

    ``fn(node, rebuilt)`` is called on every node after its children were
    transformed; ``rebuilt`` is the node with the new children (the node
    itself when nothing changed).  Return a replacement, or None to keep
    ``rebuilt``.  Shared subexpressions are transformed once.
    """
    memo = {} if memo is None else memo
    for node in post_order(root):
        if id(node) in memo:
            continue
        kids = node.children()
        rebuilt = node.with_children(tuple(memo[id(c)][1] for c in kids)) if kids else node
        new = fn(node, rebuilt)
        # keep the node alive with its result so ids stay unique while memo lives
        memo[id(node)] = (node, rebuilt if new is None else new)
    if isinstance(root, (tuple, list)):
        return tuple(memo[id(r)][1] for r in root)
    return memo[id(root)][1]


def substitute(root, mapping):
    """Replace variables: ``mapping`` maps Var -> Expr (or int)."""
    if not mapping:
        return root
    table = {id(k): as_expr(v, k.dtype) for k, v in mapping.items()}

    def fn(node, rebuilt):
        if isinstance(node, Var):
            return table.get(id(node))
        return None if rebuilt is node else _rebuild_checked(rebuilt)

    return transform(root, fn)


def _rebuild_checked(node):
    """Re-run the smart constructors on a rebuilt Call so folding applies after substitution."""
    if isinstance(node, Call):
        arity = OPS[node.op][1]
        if node.op == "select":
            return select(*node.args)
        if node.op == "cast":
            return cast(node.args[0], node.dtype)
        return unary(node.op, node.args[0]) if arity == 1 else binary(node.op, *node.args)
    return None


def free_vars(root):
    """The variables that occur in ``root`` and are not bound by a Reduce inside it."""
    nodes = post_order(root)
    bound = {id(a) for n in nodes if isinstance(n, Reduce) for a in n.axis}
    return [n for n in nodes if isinstance(n, Var) and id(n) not in bound]


def loads(root):
    """Every distinct Load in ``root``."""
    return [n for n in post_order(root) if isinstance(n, Load)]


def input_tensors(root):
    """The tensors read in ``root``, in first-read order, without repetition."""
    seen, out = set(), []
    for n in loads(root):
        if id(n.tensor) not in seen:
            seen.add(id(n.tensor))
            out.append(n.tensor)
    return out


def count_nodes(root):
    return len(post_order(root))


__all__ = [
    "post_order", "transform", "substitute", "free_vars", "loads", "input_tensors",
    "count_nodes",
]
