"""Readable text for expressions and tensor graphs (``str(expr)``, ``pa.show``).

The output is short and stable: tests compare it.  Infix operators use
Python's spelling (``//`` and ``%`` are floor division and modulo).
"""

from .expr import Call, Const, IterVar, Load, Reduce, Var
from .names import fresh_name

_INFIX = {
    "or": (" or ", 1), "and": (" and ", 2),
    "lt": (" < ", 4), "le": (" <= ", 4), "gt": (" > ", 4), "ge": (" >= ", 4), "eq": (" == ", 4), "ne": (" != ", 4),
    "shl": (" << ", 5), "shr": (" >> ", 5),
    "add": (" + ", 6), "sub": (" - ", 6),
    "mul": ("*", 7), "div": ("/", 7), "floordiv": ("//", 7), "floormod": ("%", 7),
}
_ATOM = 10


def _const_str(c):
    v = c.value
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return repr(v)


class Printer:
    """Prints expressions, naming tensors through ``tensor_names`` (id -> name) when given."""

    #: a subexpression used more than once whose text is longer than this is printed once, as ``_k = ...``
    #: (with ``bind=True``): a select that reuses its value, nested 150 deep, was text of 3**150 characters
    BIND_OVER = 200

    def __init__(self, tensor_names=None, var_names=None, bind=False):
        self.tensor_names = tensor_names or {}
        self.var_names = var_names or {}
        self.memo = {}
        self.bind = bind
        self.bindings = []  # (name, text), in the order they are needed

    def tname(self, t):
        return self.tensor_names.get(id(t), t.name)

    def vname(self, v):
        return self.var_names.get(id(v), v.name)

    def __call__(self, e):
        from .visit import post_order

        # children first: each node then finds its operands' text in the memo, so an expression as deep as chain's
        # inlined backward prints without reaching Python's recursion limit
        order = post_order(e)
        uses = {}
        if self.bind:
            for n in order:
                for c in n.children():
                    uses[id(c)] = uses.get(id(c), 0) + 1
        for n in order:
            text, prec = self.p(n)
            if uses.get(id(n), 0) > 1 and len(text) > self.BIND_OVER:
                name = f"_{len(self.bindings)}"
                self.bindings.append((name, text))
                self.memo[id(n)] = (name, _ATOM)
        return self.p(e)[0]

    def take_bindings(self):
        """The ``(name, text)`` bindings made since the last call (to print before what uses them)."""
        out, self.bindings = self.bindings, []
        return out

    def p(self, e):
        """(text, precedence) of e."""
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        r = self._p(e)
        self.memo[key] = r
        return r

    def wrap(self, e, prec, right=False):
        s, q = self.p(e)
        return f"({s})" if q < prec or (right and q == prec) else s

    def _p(self, e):
        if isinstance(e, Const):
            s = _const_str(e)
            return s, (_ATOM if not s.startswith("-") else 8)
        if isinstance(e, Var):
            return self.vname(e), _ATOM
        if isinstance(e, Load):
            return f"{self.tname(e.tensor)}[{', '.join(self(i) for i in e.indices)}]", _ATOM
        if isinstance(e, Reduce):
            src = self(e.source[0]) if len(e.source) == 1 else "(" + ", ".join(self(s) for s in e.source) + ")"
            ax = ", ".join(f"{self.vname(a)} in [{a.lo}, {a.hi})" for a in e.axis)
            s = f"{e.combiner.name}({src}, axis=[{ax}]"
            if not (isinstance(e.condition, Const) and e.condition.value):
                s += f", where={self(e.condition)}"
            s += ")"
            if len(e.source) > 1:
                s += f"[{e.value_index}]"
            return s, _ATOM
        if isinstance(e, Call):
            op, a = e.op, e.args
            if op in _INFIX:
                sym, prec = _INFIX[op]
                return f"{self.wrap(a[0], prec)}{sym}{self.wrap(a[1], prec, right=True)}", prec
            if op == "neg":
                return f"-{self.wrap(a[0], 8)}", 8
            if op == "not":
                return f"not {self.wrap(a[0], 3)}", 3
            if op == "cast":
                return f"{e.dtype}({self(a[0])})", _ATOM
            return f"{op}({', '.join(self(x) for x in a)})", _ATOM
        return repr(e), _ATOM


def expr_str(e):
    return Printer()(e)


def unique_names(ops):
    """id -> a name unique among ``ops`` (anything with a ``.name``: operations, variables).

    The first keeps its name, repeats get _1, _2.
    """
    used, out = set(), {}
    for op in ops:
        name = fresh_name(op.name, used)
        used.add(name)
        out[id(op)] = name
    return out


def show(tensors):
    """The tensors and everything they depend on, one block per stage (``pa.show(tensors)``).

    Each later layer that introduces a new kind of stage registers how it is
    shown through the operation's ``show_lines(printer, name)`` method.  A
    scheduled graph is shown by :func:`polyad.schedule.show` (``pa.show(tensors,
    schedule=...)``), which calls this on the transformed graph.

    :param tensors: a tensor or a list of tensors.
    :returns: the text.
    :raises PolyadError: when ``tensors`` is not a tensor or a list of tensors.
    """
    from .tensor import ComputeOp, PlaceholderOp, as_tensor_list, walk_ops

    tensors = as_tensor_list(tensors, "show")
    ops = walk_ops(tensors)
    op_names = unique_names(ops)
    tnames = {}
    for op in ops:
        for i, t in enumerate(op.outputs):
            tnames[id(t)] = op_names[id(op)] if op.num_outputs == 1 else f"{op_names[id(op)]}.v{i}"
    lines = []
    for op in ops:
        name = op_names[id(op)]
        if isinstance(op, PlaceholderOp):
            lines.append(f"placeholder {name}: {op.dtype}{list(op.shape)}")
            continue
        pr = Printer(tnames, _var_names(op), bind=isinstance(op, ComputeOp))
        if isinstance(op, ComputeOp):
            dtypes = ", ".join(sorted({b.dtype for b in op.body}))
            axes = ", ".join(f"{pr.vname(a)} < {a.extent}" for a in op.axis)
            lines.append(f"compute {name}: {dtypes}{list(op.shape)}" + (f"  ({axes})" if axes else ""))
            lhs_idx = ", ".join(pr.vname(a) for a in op.axis)
            for i, b in enumerate(op.body):
                lhs = tnames[id(op.output(i))]
                text = pr(b)
                lines += [f"  {n} = {t}" for n, t in pr.take_bindings()]
                lines.append(f"  {lhs}[{lhs_idx}] = {text}")
        else:
            lines.extend(op.show_lines(pr, name))
    return "\n".join(lines)


def _var_names(op):
    """Unique printable names for the variables of one stage (axes first)."""
    from .visit import post_order

    vs = list(getattr(op, "axis", ()))
    seen = {id(v) for v in vs}
    for b in getattr(op, "body", ()):
        for n in post_order(b):
            if isinstance(n, IterVar) and id(n) not in seen:
                seen.add(id(n))
                vs.append(n)
    return unique_names(vs)
