"""OpenCL C from lowered kernels (isl ASTs) and TE expressions, through cgen.

* Loops, guards and statement arguments come from the isl AST unchanged:
  exact bounds, no selects over rectangular domains.
* Statement bodies are TE expressions.  Shared subexpressions are emitted once
  as ``const`` temporaries, but only where evaluating them unconditionally is
  safe (a read under a false ``select`` branch may be out of bounds).  In an
  assignment (no reduction) such a read is speculated: read always, its index
  clamped into its buffer, its value dropped where the condition is false; a
  ``select`` whose arms then read nothing conditionally is OpenCL's
  ``select()``, which PoCL vectorises across work-items (a ``?:`` it does not).
* Integer ``//`` and ``%`` floor (helpers; C's operators truncate), float
  min/max propagate NaN (as numpy), ``round`` is ``rint`` (half to even), and
  products-plus-sums are printed as ``a * b + c`` (never ``fma()``, a slow
  library call on PoCL; the compiler contracts or uses ``mad``).
* Index arithmetic is ``int`` unless a buffer or a loop exceeds 2^31 - 1
  elements, or the build asks for ``long`` (``pa.build`` does on CPUs, where
  64-bit addressing makes it faster); then every index (and every int32
  computation) is ``long``.
* No expression nests deeper than ``HOIST_NESTING`` brackets plus one node's
  own: a deeper subexpression is bound to a ``const`` temporary first, so a
  2000-deep chain is a sequence of short statements, not 4000 nested
  brackets (clang rejects more than 256).  A subexpression that is evaluated
  only under a condition and reads memory is bound too, its conditional reads
  clamped into their buffers: evaluated where its value is not used, it reads
  a valid element and its value is dropped.
* Vector code is printed from the vector IR of :mod:`polyad.codegen.vectorize`
  (``KernelWriter.block_user``, ``VectorPrinter``): widths, contiguous loads
  and stores, broadcasts and lane-by-lane evaluation are decided there.
"""

import math
import operator
import re

import cgen as c
import cgen.opencl as cl
import islpy as isl

from ..errors import ScheduleError
from ..te import dtype as dt
from ..te.expr import Call, Const, Load, Var
from ..te.semantics import pow_chain
from ..te.visit import post_order
from ..poly.stage import dim_names
from . import vectorize as vz
from . import erf
from .tree import POINTS_MARK, c_identifier

# The bracket nesting above which a subexpression is bound to a temporary.  Clang (PoCL's
# compiler, and most OpenCL compilers) rejects more than 256 nested brackets ("bracket nesting
# level exceeded"), and a temporary costs nothing (the compiler's SSA form names it anyway); 20
# keeps every statement readable and far from the limit with what surrounds it (one node's own
# brackets, a row-major index, a store, a vector conversion: MAX_EXPR_NESTING).
HOIST_NESTING = 20
# What no emitted statement's expression exceeds (tests check it on deep graphs).
MAX_EXPR_NESTING = 48

STORAGE = {"float32": "float", "float64": "double", "int32": "int", "int64": "long", "bool": "uchar"}
_INT32_MAX = 2**31 - 1


class _RestrictPointer(c.Pointer):
    """``T *restrict name`` (cgen's RestrictPointer spells the GNU ``__restrict__``)."""

    def get_decl_pair(self):
        sub_tp, sub_decl = self.subdecl.get_decl_pair()
        return sub_tp, f"*restrict {sub_decl}"


# -- helper functions, emitted only when used -------------------------------------------------
def _helper_source(name):
    kind, _, suffix = name[3:].rpartition("_")
    suffix, _, width = suffix.partition("x")
    t = {"i32": "int", "i64": "long", "f32": "float", "f64": "double"}[suffix]
    if kind == "erf":  # float32's, a polynomial: codegen/erf.py
        return erf.helper_source(name, width)
    if width:  # a vector helper: NaN-propagating min/max lane-wise (OpenCL's fmax drops NaN)
        v, cmp = f"{t}{width}", {"fmax": ">", "fmin": "<"}[kind]
        return f"static inline {v} {name}({v} a, {v} b) {{ return select(b, a, (a {cmp} b) | isnan(a)); }}"
    u = {"int": "uint", "long": "ulong"}.get(t)
    if kind in ("floordiv", "floormod") and t in ("float", "double"):
        # Python's (and numpy's) float // and %, from fmod: floor(a / b) made 1.0 // 0.1 10 (Python: 9) and
        # 1.0 % 0.1 a negative remainder for a positive divisor
        z, one, half = ("0.0f", "1.0f", "0.5f") if t == "float" else ("0.0", "1.0", "0.5")
        fix_mod = (f"  if (m != {z}) {{ if ((b < {z}) != (m < {z})) {{ m += b; d -= {one}; }} }}"
                   f" else m = copysign({z}, b);\n")
        if kind == "floormod":
            return (f"static inline {t} {name}({t} a, {t} b) {{\n  {t} m = fmod(a, b);\n  if (b == {z}) return m;\n"
                    f"  {t} d = {z};\n" + fix_mod + "  return m;\n}")
        return (f"static inline {t} {name}({t} a, {t} b) {{\n  {t} m = fmod(a, b);\n  if (b == {z}) return a / b;\n"
                f"  {t} d = (a - m) / b;\n" + fix_mod
                + f"  if (d == {z}) return copysign({z}, a / b);\n  {t} f = floor(d);\n"
                f"  return (d - f > {half}) ? f + {one} : f;\n}}")
    if kind == "floordiv":
        return (
            f"static inline {t} {name}({t} a, {t} b) {{\n"
            f"  if (b == 0) return 0;\n"
            f"  if (b == -1) return ({t})(({u})0 - ({u})a);\n"
            f"  {t} q = a / b;\n"
            f"  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n}}"
        )
    if kind == "floormod":
        return (
            f"static inline {t} {name}({t} a, {t} b) {{\n"
            f"  if (b == 0 || b == -1) return 0;\n"
            f"  {t} r = a % b;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}}"
        )
    if kind in ("shl", "shr"):
        # numpy's: a count outside [0, bits) shifts everything out (OpenCL takes it modulo the bits); a negative
        # value shifts left through its unsigned twin (C leaves that undefined)
        bits = 32 if t == "int" else 64
        out = "0" if kind == "shl" else "(a < 0 ? -1 : 0)"
        op = f"({t})(({u})a << b)" if kind == "shl" else "a >> b"
        return f"static inline {t} {name}({t} a, {t} b) {{ return (b < 0 || b >= {bits}) ? {out} : {op}; }}"
    if kind == "ipow":
        return (
            f"static inline {t} {name}({t} a, {t} b) {{\n"
            f"  if (b < 0) return (a == 1) ? 1 : ((a == -1) ? ((b & 1) ? -1 : 1) : 0);\n"
            f"  {t} r = 1;\n"
            f"  while (b) {{ if (b & 1) r *= a; a *= a; b >>= 1; }}\n"
            f"  return r;\n}}"
        )
    if kind == "fmax":
        return f"static inline {t} {name}({t} a, {t} b) {{ return (a > b || isnan(a)) ? a : b; }}"
    if kind == "fmin":
        return f"static inline {t} {name}({t} a, {t} b) {{ return (a < b || isnan(a)) ? a : b; }}"
    raise KeyError(name)


_SUFFIX = {"int": "i32", "long": "i64", "float": "f32", "double": "f64"}


class Context:
    """What one generated program shares: index width, helpers used, fp64."""

    def __init__(self, wide):
        self.wide = wide
        self.idx = "long" if wide else "int"
        self.helpers = []
        self.fp64 = False

    def helper(self, kind, ctype, width=1):
        name = f"pa_{kind}_{_SUFFIX[ctype]}" + (f"x{width}" if width > 1 else "")
        if name not in self.helpers:
            self.helpers.append(name)
        return name

    def ctype(self, dtype):
        """The C type expressions of ``dtype`` are computed in."""
        if dtype == "float64":
            self.fp64 = True
        if dtype == "bool":
            return "bool"
        if dtype == "int32" and self.wide:
            return "long"
        return STORAGE[dtype]

    def int_lit(self, v, ctype=None):
        ctype = ctype or self.idx
        v = int(v)
        if ctype == "long":
            return f"({v + 1}L - 1L)" if v == -(2**63) else f"{v}L"
        if v == -(2**31):
            return "(-2147483647 - 1)"
        return str(v)

    def lit(self, value, dtype):
        if dtype == "bool":
            return "true" if value else "false"
        ct = self.ctype(dtype)
        if dt.is_int(dtype):
            return self.int_lit(value, ct)
        v = float(value)
        if math.isnan(v):
            return "NAN" if ct == "float" else "(double)NAN"
        if math.isinf(v):
            s = "INFINITY" if ct == "float" else "(double)INFINITY"
            return s if v > 0 else f"(-{s})"
        r = repr(v)
        r = r if v >= 0 else f"({r}"
        return r + ("f" if ct == "float" else "") + (")" if v < 0 else "")


# -- TE expressions -> C -------------------------------------------------------------------------
_INFIX = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
    "eq": "==", "ne": "!=", "and": "&&", "or": "||", "shl": "<<", "shr": ">>",
}
_MATH = {
    "exp": "exp", "log": "log", "log2": "log2", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "tanh": "tanh", "sin": "sin", "cos": "cos", "erf": "erf", "floor": "floor", "ceil": "ceil",
    "round": "rint", "trunc": "trunc",
}
# OpenCL's select(a, b, c) for scalars: c ? b : a, c an integer of the operands' size
_SELECT_MASK = {"float": "int", "double": "long", "int": "int", "long": "long"}
# the operands evaluated only under a condition: (op, argument positions)
_CONDITIONAL = {"select": (1, 2), "and": (1,), "or": (1,)}


def flat_index(ctx, indices, shape):
    """Row-major flat index of ``indices`` (C strings) into a tensor of ``shape``."""
    if not indices:
        return "0"
    s = indices[0]
    for ix, n in zip(indices[1:], shape[1:]):
        if not _additive(ix):
            ix = f"({ix})"  # a shift, mask, comparison or ?: binds looser than +
        s = f"({s}) * {ctx.int_lit(n)} + {ix}" if not _atomic(s) else f"{s} * {ctx.int_lit(n)} + {ix}"
    return s


def _additive(s):
    """True when ``s`` has no operator binding looser than + at its top level."""
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and (ch in "<>&|?=!^" or (ch == ":" and i)):
            return False
    return True


def _atomic(s):
    return s.replace("_", "").isalnum() or (s.startswith("(") and _balanced_outer(s))


def _balanced_outer(s):
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i != len(s) - 1:
            return False
    return s.endswith(")")


def _floor_by_positive_const(op, a, b, ct):
    """Floor division / modulo by a constant b > 0 without the general helper's branches.

    Powers of two use the arithmetic shift and the mask (two's complement: exact floor
    semantics for negative a too); other divisors correct C's truncation only for a < 0, without
    overflowing at the type's minimum.
    Index arithmetic (pooling, reshape, strides) is full of these: 2-4x faster kernels.
    """
    if b == 1:
        return a if op == "floordiv" else f"(({ct})0)"
    if b & (b - 1) == 0:
        k = b.bit_length() - 1
        return f"({a} >> {k})" if op == "floordiv" else f"({a} & {b - 1})"
    if op == "floordiv":  # ~a = -1 - a: no overflow at the type's minimum (a - (b - 1) overflowed there)
        return f"({a} >= 0 ? {a} / {b} : ~(~{a} / {b}))"
    return f"({a} % {b} < 0 ? {a} % {b} + {b} : {a} % {b})"


class ExprPrinter:
    """Prints TE expressions of one statement block, with names for vars and tensors."""

    def __init__(self, ctx, var_names, tensor_names, temp_prefix="t", speculate=False, in_bounds=frozenset()):
        self.ctx = ctx
        self.var_names = var_names  # id(Var) -> C expression
        self.tensor_names = tensor_names  # id(Tensor) -> C name
        self.temp_prefix = temp_prefix
        self.speculate = speculate  # read conditional loads always, clamped (assignments: see _emit)
        self.in_bounds = in_bounds  # ids of the loads isl proves in bounds everywhere: speculated unclamped
        self.n_temps = 0
        self._clamp, self._uncond, self._spec = False, frozenset(), frozenset()
        self._evaluable_memo = {}

    def emit(self, roots):
        """(declaration lines, one C expression per root): shared safe subexpressions and deep ones
        become temporaries."""
        start = self.n_temps
        try:
            return self._emit(roots, clamp=False)
        except _Speculate:  # rare: a deep conditional subexpression reads memory; clamp its reads
            self.n_temps = start
            return self._emit(roots, clamp=True)

    def _emit(self, roots, clamp):
        nodes, uses, uncond = _analyse(roots)
        # in an assignment, a read under a condition (a relu mask, an argmax match) is read always, clamped
        # into its buffer, and the condition picks among values: branch-free, so PoCL vectorises the
        # work-items (lenet's pool-and-relu gradient: 0.24 -> 0.09 ms in 2x2 blocks).  Not in a reduction's
        # update: there the condition is mostly a padding bound in the inner loop, and the clamps and the
        # reads cost more than the branch (conv2d_5x5_s3's forward 19 -> 42 ms, conv2d_dilated's backward
        # 0.47 -> 0.64-0.88 ms)
        spec = frozenset(id(nd) for nd in nodes if isinstance(nd, Load) and id(nd) not in uncond) \
            if self.speculate else frozenset()
        self._clamp, self._uncond, self._spec = clamp, uncond, spec
        self._evaluable_memo = {}
        has_load = self._has_load = {}
        text, lines = {}, []
        for nd in nodes:
            s = self._node(nd, [text[id(ch)] for ch in nd.children()])
            if id(nd) in spec:  # bound first: what reads it reads a temporary, not memory
                has_load[id(nd)] = False
                text[id(nd)] = self._bind(lines, self.ctx.ctype(nd.dtype), s)
                continue
            has_load[id(nd)] = isinstance(nd, Load) or any(has_load[id(ch)] for ch in nd.children())
            safe = id(nd) in uncond or not has_load[id(nd)]
            shared = uses.get(id(nd), 0) > 1 and isinstance(nd, (Call, Load))
            if (shared and safe) or self._deep(nd, s, safe):
                s = self._bind(lines, self.ctx.ctype(nd.dtype), s)
            text[id(nd)] = s
        return lines, [text[id(r)] for r in roots]

    def _evaluable(self, e):
        """True when evaluating ``e`` where its value is not used is harmless: it reads only what is read
        anyway or speculated (clamped).  Nothing else can fault: TE has no integer ``/``, and the floor
        division helpers return 0 for a zero divisor."""
        memo, key = self._evaluable_memo, id(e)  # per _emit: the sets above are its
        if key not in memo:
            ok = not isinstance(e, Load) or id(e) in self._uncond or id(e) in self._spec
            memo[key] = ok and all(self._evaluable(ch) for ch in e.children())
        return memo[key]

    def _deep(self, nd, s, safe):
        """True when ``s``, the text of ``nd``, nests too deep to be used inside another expression.

        ``safe``: evaluating ``nd`` unconditionally is harmless.  A deep node that is not safe can be
        bound only once the conditional reads are clamped (_Speculate asks the caller for that)."""
        if isinstance(nd, (Const, Var)) or len(s) <= 2 * HOIST_NESTING or nesting(s) <= HOIST_NESTING:
            return False
        if not (safe or self._clamp):
            raise _Speculate
        return True

    def _bind(self, lines, ctype, s):
        """Declare ``const ctype tN = s`` and return the temporary's name."""
        name = f"{self.temp_prefix}{self.n_temps}"
        self.n_temps += 1
        lines.append(f"const {ctype} {name} = {_strip(s)}")
        return name

    def _index(self, e, flat, lanes=1):
        """The flat index of load ``e``; clamped into its buffer where the load is speculated (a bound
        conditional subexpression, evaluated also where its value is not used)."""
        if not (self._clamp or id(e) in self._spec) or id(e) in self._uncond or id(e) in self.in_bounds:
            return flat
        hi = max(e.tensor.size - lanes, 0)
        return f"min(max({_strip(flat)}, {self.ctx.int_lit(0)}), {self.ctx.int_lit(hi)})"

    def _node(self, e, a):
        ctx = self.ctx
        if isinstance(e, Const):
            return ctx.lit(e.value, e.dtype)
        if isinstance(e, Var):
            try:
                return self.var_names[id(e)]
            except KeyError:
                raise ValueError(f"variable {e.name!r} has no value in this statement") from None
        if isinstance(e, Load):
            t = e.tensor
            s = f"{self.tensor_names[id(t)]}[{self._index(e, flat_index(ctx, [_strip(x) for x in a], t.shape))}]"
            if t.dtype == "int32" and ctx.wide:  # int32 is computed as long there: min(I[i], 6L) is ambiguous
                return f"((long){s})"
            return f"({s} != 0)" if t.dtype == "bool" else s
        op, args = e.op, e.args
        ct = ctx.ctype(e.dtype)
        if op in ("floordiv", "floormod"):
            b = args[1]
            if isinstance(b, Const) and b.value > 0 and not dt.is_float(e.dtype):
                return _floor_by_positive_const(op, a[0], b.value, ct)
            return f"{ctx.helper(op, ct)}({_strip(a[0])}, {_strip(a[1])})"
        if op in ("and", "or") and not self._has_load.get(id(args[1]), True):
            # a right operand without reads is safe to evaluate always: & and | do not branch,
            # which keeps PoCL's work-item loops vectorisable (argmax combiners, guards)
            return f"({a[0]} {'&' if op == 'and' else '|'} {a[1]})"
        if op in ("shl", "shr"):
            c = args[1]
            bits = 8 * {"int": 4, "long": 8}[ct]
            if isinstance(c, Const) and 0 <= c.value < bits and (op == "shr" or isinstance(args[0], Const)
                                                                and args[0].value >= 0):
                return f"({a[0]} {_INFIX[op]} {a[1]})"
            return f"{ctx.helper(op, ct)}({_strip(a[0])}, {_strip(a[1])})"
        if op in _INFIX:
            return f"({a[0]} {_INFIX[op]} {a[1]})"
        if op in ("min", "max"):
            if dt.is_float(e.dtype):
                return f"{ctx.helper('f' + op, ct)}({_strip(a[0])}, {_strip(a[1])})"
            return f"{op}({_strip(a[0])}, {_strip(a[1])})"
        if op == "pow":
            chain = dt.is_float(e.dtype) and isinstance(args[1], Const) and pow_chain(args[1].value)
            if chain:
                return _pow_text(ctx, e.dtype, a[0], chain)
            if dt.is_float(e.dtype):
                return f"pow({_strip(a[0])}, {_strip(a[1])})"
            return f"{ctx.helper('ipow', ct)}({_strip(a[0])}, {_strip(a[1])})"
        if op == "erf" and ct == "float":
            return f"{ctx.helper('erf', ct)}({_strip(a[0])})"
        if op in _MATH:
            return f"{_MATH[op]}({_strip(a[0])})"
        if op == "sigmoid":
            one = ctx.lit(1.0, e.dtype)
            return f"({one} / ({one} + exp(-{a[0]})))"
        if op == "not":
            return f"(!{a[0]})"
        if op == "neg":
            return f"(-{a[0]})"
        if op == "abs":
            return f"fabs({_strip(a[0])})" if dt.is_float(e.dtype) else f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
        if op == "sign":
            one, zero = ctx.lit(1, e.dtype), ctx.lit(0, e.dtype)
            # the last arm keeps NaN, and + 0 makes -0.0 +0.0, as numpy's
            rest = f"({a[0]} + {zero})" if dt.is_float(e.dtype) else a[0]
            return f"({a[0]} > {zero} ? {one} : ({a[0]} < {zero} ? -{one} : {rest}))"
        if op == "select":
            mask = _SELECT_MASK.get(ct)
            if mask and self._evaluable(args[1]) and self._evaluable(args[2]):
                # both arms evaluated, no branch: PoCL's work-item loops vectorise a select() but not
                # a ?: (lenet's pool-and-relu gradient in 2x2 blocks: 0.195 -> 0.062 ms)
                return f"select({_strip(a[2])}, {_strip(a[1])}, ({mask}){a[0]})"
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op == "cast":
            src = args[0].dtype
            if e.dtype == "bool":
                return f"({a[0]} != {ctx.lit(0, src)})"
            return convert(ctx, src, e.dtype, a[0])
        raise ValueError(f"no OpenCL form for the operator {op!r}")


def _pow_text(ctx, dtype, x, chain):
    """C text of ``pow(x, c)`` as :func:`polyad.te.semantics.pow_chain` decomposes ``c`` (scalars and vectors)."""
    m, q, negative = chain
    base = f"({x} + {ctx.lit(0.0, dtype)})" if q else x
    parts = [base] * m
    if q:
        root = f"sqrt({_strip(base)})"
        parts.append({1: f"sqrt({root})", 2: root, 3: f"({root} * sqrt({root}))"}[q])
    r = f"({' * '.join(parts)})" if len(parts) > 1 else parts[0]
    return f"({ctx.lit(1.0, dtype)} / {r})" if negative else r


def convert(ctx, src, dtype, x, width=None):
    """C text of the cast of ``x`` (of dtype ``src``, in its C type) to ``dtype``'s C type, ``width`` lanes.

    A float saturates to an integer's range and NaN gives 0 (``convert_int_sat_rtz``: C leaves both undefined,
    and ``pa.evaluate`` does the same, ``te.semantics.cast``); an integer narrowed to int32 wraps also where
    int32 is computed as ``long`` (64-bit indices).
    """
    ct, at, store = ctx.ctype(dtype), ctx.ctype(src), STORAGE.get(dtype)
    w = width or ""
    if dt.is_float(src) and dt.is_int(dtype):
        x = f"convert_{store}{w}_sat_rtz({_strip(x)})"
        at = store
    elif dtype == "int32" and ct != store and dt.is_int(src) and src != "int32":
        x = f"convert_{store}{w}({_strip(x)})" if width else f"(({store}){x})"
        at = store
    if ct == at and src != "bool":
        return x
    return f"convert_{ct}{w}({_strip(x)})" if width else f"(({ct}){x})"


class _Speculate(Exception):
    """A deep subexpression evaluated only under a condition reads memory: emit again, clamped."""


_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")


def nesting(s):
    """The deepest nesting of brackets ((), [] and {}) in the C text ``s``."""
    depth = best = 0
    for ch in _NOT_BRACKET.sub("", s):
        if ch in "([{":
            depth += 1
            best = max(best, depth)
        else:
            depth -= 1
    return best


def _proven_in_bounds(st):
    """ids of the loads of statement ``st`` read under a condition (the ones speculated) whose indices stay
    within their tensor over its domain (isl); an index outside the quasi-affine fragment (a loaded one)
    proves nothing."""
    from ..poly.convert import NotAffine, ToIsl

    nodes, _, uncond = _analyse(st.values)
    loads = [nd for nd in nodes if isinstance(nd, Load) and id(nd) not in uncond]
    if not loads:
        return
    try:
        conv = ToIsl(st.vars)
        dom = conv.univ.intersect(st.domain.reset_tuple_id())
    except isl.Error:
        return
    for nd in loads:
        try:
            if dom.is_subset(conv.inside(nd)):
                yield id(nd)
        except (NotAffine, isl.Error):
            continue


def _analyse(roots):
    """(nodes in post order, use counts, ids of the nodes every evaluation of the roots computes)."""
    nodes = post_order(tuple(roots))
    uses = {}
    for r in roots:
        uses[id(r)] = uses.get(id(r), 0) + 1
    for nd in nodes:
        for ch in nd.children():
            uses[id(ch)] = uses.get(id(ch), 0) + 1
        if isinstance(nd, Call) and nd.op == "pow" and isinstance(nd.args[1], Const) and pow_chain(nd.args[1].value):
            uses[id(nd.args[0])] += 1  # its text repeats in the chain's products and roots: a temporary, once
    # nodes every evaluation of the roots computes anyway: hoisting them is safe
    uncond, stack = set(), list(roots)
    while stack:
        nd = stack.pop()
        if id(nd) in uncond:
            continue
        uncond.add(id(nd))
        skip = _CONDITIONAL.get(nd.op, ()) if isinstance(nd, Call) else ()
        stack.extend(ch for i, ch in enumerate(nd.children()) if i not in skip)
    return nodes, uses, uncond


_LANE = "0123456789abcdef"


class VectorPrinter(ExprPrinter):
    """Prints TE expressions over the lanes of OpenCL vectors, as :mod:`polyad.codegen.vectorize` decided.

    ``plan`` (a :class:`~polyad.codegen.vectorize.VecExprs`) gives the vector form of every
    lane-dependent node; ``var_names`` names every variable, the vector ones (Ramp, VecVar) too.
    Nodes without a form are lane-free and printed as scalars (OpenCL widens them where they meet
    vectors); a :class:`~.vectorize.Lanes` node is printed lane by lane and assembled,
    ``(floatN)(l0, l1, ...)``.
    """

    def __init__(self, ctx, var_names, tensor_names, plan, temp_prefix="t", speculate=False, in_bounds=frozenset()):
        super().__init__(ctx, var_names, tensor_names, temp_prefix, speculate, in_bounds)
        self.width = plan.width
        self.forms = plan.forms

    def vtype(self, dtype):
        return f"{self.ctx.ctype(dtype)}{self.width}"

    def _mask_ctype(self, nd):
        """The integer C type of the mask of the bool ``nd`` (a VecMask): a comparison of 64-bit values gives
        longN, of 32-bit ones intN; and/or/not take their first mask operand's (known: nodes go children first)."""
        got = self._mask_ct.get(id(nd))
        if got is None:
            if nd.op in vz.COMPARISONS:
                got = _SELECT_MASK[self.ctx.ctype(nd.args[0].dtype)]
            else:
                got = next(self._mask_ct[id(a)] for a in nd.args if isinstance(self.forms.get(id(a)), vz.VecMask))
            self._mask_ct[id(nd)] = got
        return got

    def _widened(self, x):
        """C text of ``x`` as a vector: a lane-free operand widened (functions and select() do not widen one)."""
        t = _strip(self._text[id(x)])
        return t if id(x) in self.forms else f"({self.vtype(x.dtype)})({t})"

    def _vtype_of(self, nd):
        f = self.forms.get(id(nd))
        return f"{self._mask_ctype(nd)}{self.width}" if isinstance(f, vz.VecMask) else self.vtype(nd.dtype)

    def _as_mask(self, a, ctype):
        """C text of the bool ``a`` (a VecMask or a lane-free bool) as a mask vector of ``ctype``; None when
        ``a`` is a mask printed lane by lane."""
        vt = f"{ctype}{self.width}"
        if isinstance(self.forms.get(id(a)), vz.VecMask):
            t = self._text[id(a)]
            return t if t is None or self._mask_ctype(a) == ctype else f"convert_{vt}({_strip(t)})"
        return f"(-({vt})({_strip(self._text[id(a)])}))"  # a scalar true is 1: all bits set is -1

    def _emit(self, roots, clamp):
        nodes, uses, uncond = _analyse(roots)
        # in an assignment, the conditional reads isl proves in bounds are speculated, so that a select printed
        # lane by lane is select(), not a branch a lane (max_pool's data gradient in 1x1x2x4/float4 blocks ran 6x
        # the scalar blocks' time with a ?: a lane, its argmax matches unpredictable); the others keep their
        # branches (clamped reads of conv2d_dilated's padded copy ran 8% slower than its predictable ?:)
        self._spec = frozenset(id(nd) for nd in nodes if isinstance(nd, Load) and id(nd) not in uncond
                               and id(nd) in self.in_bounds) if self.speculate else frozenset()
        self._clamp, self._uncond = clamp, uncond
        self._evaluable_memo = {}
        has_load, forms = {}, self.forms
        self._has_load = has_load
        self._text, self._lines = {}, []
        self._named = set()  # lane-dependent nodes bound to a vector temporary (lane k: name.sK)
        self._lane_text = [dict() for _ in range(self.width)]
        # evaluable in every lane: reads only what is read anyway or what isl proves in bounds
        self._all_lanes = all_lanes = {}
        self._mask_ct = {}
        text, lines = self._text, self._lines
        for nd in nodes:
            if isinstance(forms.get(id(nd)), vz.VecMask):
                self._mask_ctype(nd)
            has_load[id(nd)] = isinstance(nd, Load) or any(has_load[id(ch)] for ch in nd.children())
            all_lanes[id(nd)] = (not isinstance(nd, Load) or id(nd) in uncond or id(nd) in self.in_bounds) \
                and all(all_lanes[id(ch)] for ch in nd.children())
            d = id(nd) in forms
            if d:
                s = self._vnode(forms[id(nd)])
                ty = None if s is None else self._vtype_of(nd)
            else:
                s = self._node(nd, [text[id(ch)] for ch in nd.children()])
                ty = self.ctx.ctype(nd.dtype)
            safe = id(nd) in uncond or not has_load[id(nd)]
            shared = uses.get(id(nd), 0) > 1 and isinstance(nd, (Call, Load))
            if s is not None and ((shared and safe) or self._deep(nd, s, safe)):
                s = self._bind(lines, ty, s)
                if d:
                    self._named.add(id(nd))
                    for k, memo in enumerate(self._lane_text):  # its lanes, printed before it was bound, are
                        if id(nd) in memo:  # its components now: the whole text again in each user made the
                            memo[id(nd)] = f"{s}.s{_LANE[k]}"  # source exponential in chained selects
            text[id(nd)] = s
        return lines, [text[id(r)] for r in roots]

    def _vnode(self, f):
        """Vector C text of the vector form ``f`` of a node (None for a ScalarLanes bool)."""
        text = self._text
        if isinstance(f, vz.Ramp):
            name = self.var_names[id(f.var)]
            return f"({name} + ({self.ctx.ctype(f.var.dtype)}{f.width})({', '.join(map(str, range(f.width)))}))"
        if isinstance(f, vz.VecVar):
            return self.var_names[id(f.var)]
        if isinstance(f, vz.ScalarLanes):
            return None
        if isinstance(f, vz.VecLoad):
            t, ix = f.tensor, f.indices
            parts = [_strip(text[id(x)]) for x in ix[:-1]] + [_strip(self._lane(ix[-1], 0))]
            flat = self._index(f.load, flat_index(self.ctx, parts, t.shape), self.width)
            return _from_storage(self.ctx, f"vload{self.width}(0, {self.tensor_names[id(t)]} + {flat})", t.dtype, self.width)
        if isinstance(f, vz.Convert):
            nd = f.call
            return convert(self.ctx, nd.args[0].dtype, nd.dtype, text[id(nd.args[0])], self.width)
        if isinstance(f, vz.VecMask):
            nd = f.expr
            if nd.op in vz.COMPARISONS:
                return self._node(nd, [text[id(ch)] for ch in nd.args])
            if nd.op == "not":
                m = text[id(nd.args[0])]
                return None if m is None else f"(~{m})"
            # both sides evaluated: the right one only where every lane may be (and/or evaluate it conditionally)
            if not self._all_lanes[id(nd.args[1])]:
                return None
            ct = self._mask_ctype(nd)
            a, b = (self._as_mask(x, ct) for x in nd.args)
            return None if a is None or b is None else f"({a} {'&' if nd.op == 'and' else '|'} {b})"
        if isinstance(f, vz.VecSelect):
            nd = f.call
            c, a, b = nd.args
            arms = [self._widened(x) for x in (a, b)]
            if id(c) not in self.forms:  # one condition for every lane: C's ?: evaluates the arm it takes
                return f"({text[id(c)]} ? {arms[0]} : {arms[1]})"
            mask = self._as_mask(c, _SELECT_MASK[self.ctx.ctype(nd.dtype)])
            if mask is not None and self._all_lanes[id(a)] and self._all_lanes[id(b)]:
                return f"select({arms[1]}, {arms[0]}, {_strip(mask)})"
            lanes = ", ".join(_strip(self._lane(nd, k)) for k in range(self.width))
            return f"(({self.vtype(nd.dtype)})({lanes}))"
        if isinstance(f, vz.VecOp):
            nd = f.call
            if nd.op in ("min", "max"):  # functions: a scalar operand is widened (only operators widen it)
                ct = self.ctx.ctype(nd.dtype)
                fn = self.ctx.helper("f" + nd.op, ct, self.width) if dt.is_float(nd.dtype) else nd.op
                return f"{fn}({', '.join(self._widened(ch) for ch in nd.args)})"
            if nd.op == "erf" and self.ctx.ctype(nd.dtype) == "float":
                return f"{self.ctx.helper('erf', 'float', self.width)}({self._widened(nd.args[0])})"
            return self._node(nd, [text[id(ch)] for ch in nd.children()])
        lanes = ", ".join(_strip(self._lane(f.expr, k)) for k in range(self.width))
        return f"(({self.vtype(f.expr.dtype)})({lanes}))"

    def _lane(self, root, k):
        """Scalar C text of lane ``k`` of a node (lane-free subexpressions reuse their scalar text, vector
        temporaries their component ``.sK``; a deep lane is bound to a scalar temporary)."""
        memo, forms = self._lane_text[k], self.forms
        stack = [root]
        while stack:  # children first, stopping at what has a text already (no walk of whole subtrees)
            x = stack[-1]
            if id(x) in memo:
                stack.pop()
                continue
            f = forms.get(id(x))
            if f is None:
                memo[id(x)] = self._text[id(x)]
            elif isinstance(f, vz.Ramp):
                name = self.var_names[id(x)]
                memo[id(x)] = name if k == 0 else f"({name} + {k})"
            elif isinstance(f, vz.VecVar):
                memo[id(x)] = f"{self.var_names[id(x)]}.s{_LANE[k]}"
            elif id(x) in self._named:  # a mask's true lane is -1: compared, it is a bool
                lane = f"{self._text[id(x)]}.s{_LANE[k]}"
                memo[id(x)] = f"({lane} != 0)" if isinstance(f, vz.VecMask) else lane
            else:
                todo = [ch for ch in x.children() if id(ch) not in memo]
                if todo:
                    stack.extend(todo)
                    continue
                s = self._node(x, [memo[id(ch)] for ch in x.children()])
                if self._deep(x, s, id(x) in self._uncond or not self._has_load[id(x)]):
                    s = self._bind(self._lines, self.ctx.ctype(x.dtype), s)
                memo[id(x)] = s
            stack.pop()
        return memo[id(root)]


def _strip(s):
    """Drop one pair of redundant outer parentheses."""
    return s[1:-1] if s.startswith("(") and _balanced_outer(s) else s


# -- isl AST expressions -> C ------------------------------------------------------------------
_AST_INFIX = {
    isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.div: "/", isl.ast_expr_op_type.pdiv_q: "/", isl.ast_expr_op_type.pdiv_r: "%",
    isl.ast_expr_op_type.zdiv_r: "%", isl.ast_expr_op_type.and_: "&&", isl.ast_expr_op_type.and_then: "&&",
    isl.ast_expr_op_type.or_: "||", isl.ast_expr_op_type.or_else: "||", isl.ast_expr_op_type.eq: "==",
    isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<", isl.ast_expr_op_type.ge: ">=",
    isl.ast_expr_op_type.gt: ">",
}


def _fold(op, a):
    """The integer value of isl AST operation ``op`` on integer arguments ``a``, or None where it is not folded."""
    T = isl.ast_expr_op_type
    if op == T.add:
        return a[0] + a[1]
    if op == T.sub:
        return a[0] - a[1]
    if op == T.mul:
        return a[0] * a[1]
    if op == T.minus:
        return -a[0]
    if op == T.min:
        return min(a)
    if op == T.max:
        return max(a)
    if op == T.fdiv_q:
        return a[0] // a[1]
    if op in (T.pdiv_q, T.div) and a[0] >= 0 and a[1] > 0:  # exact or of a non-negative: C's division agrees
        return a[0] // a[1]
    if op in (T.pdiv_r, T.zdiv_r) and a[0] >= 0 and a[1] > 0:
        return a[0] % a[1]
    cmp = {T.eq: operator.eq, T.le: operator.le, T.lt: operator.lt, T.ge: operator.ge, T.gt: operator.gt}.get(op)
    if cmp is not None:
        return int(cmp(a[0], a[1]))
    if op in (T.and_, T.and_then):
        return int(bool(a[0]) and bool(a[1]))
    if op in (T.or_, T.or_else):
        return int(bool(a[0]) or bool(a[1]))
    if op in (T.cond, T.select):
        return a[1] if a[0] else a[2]
    return None


def ast_value(e, env):
    """isl AST expression ``e`` as an int where the iterators ``env`` binds (name -> int) make it constant, else
    None."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        v = env.get(e.get_id().get_name())
        return v if isinstance(v, int) else None
    if t == isl.ast_expr_type.int:
        return int(e.get_val().to_python())
    args = [ast_value(e.get_op_arg(i), env) for i in range(e.get_op_n_arg())]
    if any(a is None for a in args):
        return None
    return _fold(e.get_op_type(), args)


def ast_expr(ctx, e, env=None):
    """C text of isl AST expression ``e``; ``env`` binds iterators the printer unrolls (name -> int), and the
    parts they make constant are folded."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        name = e.get_id().get_name()
        if env and name in env:
            return ctx.int_lit(env[name])
        return name
    if t == isl.ast_expr_type.int:
        return ctx.int_lit(e.get_val().to_python())
    if env:
        v = ast_value(e, env)
        if v is not None:
            return ctx.int_lit(v)
    op = e.get_op_type()
    args = [ast_expr(ctx, e.get_op_arg(i), env) for i in range(e.get_op_n_arg())]
    if op in _AST_INFIX:
        return f"({args[0]} {_AST_INFIX[op]} {args[1]})"
    if op == isl.ast_expr_op_type.minus:
        return f"(-{args[0]})"
    if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
        fn = "min" if op == isl.ast_expr_op_type.min else "max"
        while len(args) > 1:  # pairwise: the nesting grows with log(bounds), not their number
            args = [f"{fn}({_strip(a)}, {_strip(b)})" for a, b in zip(args[::2], args[1::2])] + args[len(args) - len(args) % 2:]
        return args[0]
    if op == isl.ast_expr_op_type.fdiv_q:
        return f"{ctx.helper('floordiv', ctx.idx)}({_strip(args[0])}, {_strip(args[1])})"
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        return f"({args[0]} ? {args[1]} : {args[2]})"
    raise ValueError(f"unsupported isl AST expression {e.to_C_str()}")


def _and_guards(a, b):
    """Two guards (True, False or C text) as one."""
    if a is False or b is False:
        return False
    if a is True:
        return b
    return a if b is True else f"{a} && {b}"


def _bound_guard(ctx, e, env, grid, lower=None):
    """A point loop's bound at the literals ``env`` binds: True or False where they decide it, else the C text of
    what they leave (the conjuncts they decide dropped).  ``e`` is the loop's condition, or with ``lower`` (the
    iterator's name) its initial value, read as ``lower >= e``.  A condition ``l <= min(a, b)`` is read as
    ``l <= a && l <= b``, an initial value ``max(a, b)`` as ``l >= a && l >= b``: a partial block's bounds are
    such (``l <= min(7, 16 - 8*gid1)``), and only the grid's part needs a guard.  ``grid`` bounds the grid
    parameters (name -> (lo, hi)): a conjunct true for every work-item is dropped, as isl's unrolling drops it."""
    T = isl.ast_expr_op_type
    if lower is not None:
        pieces = _args(e) if e.get_type() == isl.ast_expr_type.op and e.get_op_type() == T.max else [e]
        terms = [(env[lower], ">=", p) for p in pieces]
    elif e.get_type() == isl.ast_expr_type.op and e.get_op_type() in (T.and_, T.and_then):
        out = True
        for x in _args(e):
            out = _and_guards(out, _bound_guard(ctx, x, env, grid))
        return out
    elif e.get_type() == isl.ast_expr_type.op and e.get_op_type() in (T.le, T.lt, T.ge, T.gt):
        op = e.get_op_type()
        left, right = e.get_op_arg(0), e.get_op_arg(1)
        split = T.min if op in (T.le, T.lt) else T.max
        pieces = _args(right) if right.get_type() == isl.ast_expr_type.op and right.get_op_type() == split else [right]
        sym = {T.le: "<=", T.lt: "<", T.ge: ">=", T.gt: ">"}[op]
        terms = [(left, sym, p) for p in pieces]
    else:
        v = ast_value(e, env)
        return bool(v) if v is not None else _strip(ast_expr(ctx, e, env))
    out = True
    for x, sym, p in terms:
        xr = (x, x) if isinstance(x, int) else ast_range(x, env, grid)
        pr = ast_range(p, env, grid)
        t = None
        if xr is not None and pr is not None:  # decided where the ranges do not overlap
            (xl, xh), (pl, ph) = xr, pr
            t = {"<=": (xh <= pl, xl > ph), "<": (xh < pl, xl >= ph),
                 ">=": (xl >= ph, xh < pl), ">": (xl > ph, xh <= pl)}[sym]
            t = True if t[0] else False if t[1] else None
        if t is None:
            xs = ctx.int_lit(x) if isinstance(x, int) else _strip(ast_expr(ctx, x, env))
            t = f"({xs} {sym} {_strip(ast_expr(ctx, p, env))})"
        out = _and_guards(out, t)
    return out


def ast_range(e, env, grid):
    """The least and greatest values of isl AST expression ``e`` as a pair of ints, where ``env`` binds the unrolled
    iterators (name -> int) and ``grid`` bounds the work-item's grid parameters (name -> (lo, hi)); None where it
    is not bounded so (another loop's iterator, an operation it does not bound)."""
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        v = int(e.get_val().to_python())
        return v, v
    if t == isl.ast_expr_type.id:
        name = e.get_id().get_name()
        v = env.get(name)
        return (v, v) if isinstance(v, int) else grid.get(name)
    T = isl.ast_expr_op_type
    op = e.get_op_type()
    a = [ast_range(x, env, grid) for x in _args(e)]
    if any(r is None for r in a):
        return None
    if op == T.add:
        return a[0][0] + a[1][0], a[0][1] + a[1][1]
    if op == T.sub:
        return a[0][0] - a[1][1], a[0][1] - a[1][0]
    if op == T.minus:
        return -a[0][1], -a[0][0]
    if op == T.mul:
        ends = [x * y for x in a[0] for y in a[1]]
        return min(ends), max(ends)
    if op in (T.min, T.max):
        f = min if op == T.min else max
        return f(r[0] for r in a), f(r[1] for r in a)
    d = a[1][0] if len(a) == 2 and a[1][0] == a[1][1] and a[1][0] > 0 else None
    if d is not None and (op == T.fdiv_q or (op in (T.pdiv_q, T.div) and a[0][0] >= 0)):
        return a[0][0] // d, a[0][1] // d  # floor division by a positive constant is monotone
    if d is not None and op in (T.pdiv_r, T.zdiv_r) and a[0][0] >= 0:
        lo, hi = a[0]
        return (lo % d, hi % d) if lo // d == hi // d else (0, d - 1)
    return None


def _args(e):
    return [e.get_op_arg(i) for i in range(e.get_op_n_arg())]


# -- kernels -----------------------------------------------------------------------------------
class KernelWriter:
    """Writes one kernel: signature, NDRange binding, the AST with statement bodies."""

    def __init__(self, ctx, lk, tensor_names, statements):
        self.ctx = ctx
        self.lk = lk
        self.spec = lk.spec
        self.tensor_names = tensor_names  # id(Tensor) -> C name (module-wide, unique)
        self.statements = statements  # isl name -> IslStatement
        op = self.spec.stage
        # a kernel that sums its partials itself (tree.lane_sums) writes the sum, not the partials
        self.outputs = op.outputs if self.spec.lane_sum is None else self.spec.lane_sum.outputs
        reads, seen = [], {id(t) for t in op.outputs + self.outputs}
        for st in self.spec.statements:
            for t in _reads(st.values):
                if id(t) not in seen:
                    seen.add(id(t))
                    reads.append(t)
        self.reads = reads
        self._vec_plans = {}  # isl statement name -> vectorize.VecBlock
        self._env = {}  # iterators of the point loops being unrolled -> their literal
        self._unrolling = 0  # depth of POINTS_MARKs around the node being printed
        self._proven = {}  # id(statement) -> ids of its loads proven in bounds
        self._grid = {p: (lo, lo + size - 1) for p, (lo, size) in zip(lk.grid_params, lk.grid_box)}
        used = set(tensor_names.values()) | set(lk.grid_params)
        self.acc = {}
        scattered = {i.index for i in statements.values() if i.stage is op and i.role == "scatter"}
        for si, st in enumerate(self.spec.statements):
            if st.combiner is not None and si not in scattered:
                self.acc[si] = [f"acc{si}_{i}" for i in range(len(st.values))]
        # full tiles keep one accumulator per block point: private arrays indexed by the
        # unrolled point (constants), which the compiler keeps in registers
        # (the narrower groups of a reduction's remainder: arrays of their own width, named by it)
        self.block_acc = {}
        blocks = [i for i in statements.values() if i.stage is op and i.kind == "block" and i.stmt.combiner is not None]
        widest = {}
        for ist in blocks:
            widest[ist.index] = max(widest.get(ist.index, 1), ist.vec)
        for ist in blocks:
            tag = "" if ist.vec == widest[ist.index] else str(ist.vec)
            names = [f"acc{ist.index}_{i}_b{tag}" for i in range(len(ist.stmt.values))]
            self.block_acc[ist.index, ist.vec] = (ist, names)
        # statement variables keep their names where they do not clash
        self.var_names = {}
        for st in self.spec.statements:
            local = set(used)
            self.var_names[id(st)] = {
                id(v): c_identifier(nm, local) for v, nm in zip(st.vars, dim_names(st.vars))
            }

    @property
    def args(self):
        """The tensors passed to the kernel, in argument order (reads first, then outputs)."""
        return list(self.reads) + list(self.outputs)

    def memo_key(self):
        """Everything :meth:`generate` reads, as text, or None where the kernel's AST has no key of its own
        (``LoweredKernel.key``): two kernels with equal keys are the same C text, whatever graph they come from.

        That is the AST (its key: the kernel's own isl schedule, statement names and tiling included), the index
        width, the kernel's name, work-group, nontemporal stores and grid, the output shape, its arguments (C name,
        shape, dtype), and per statement of the stage its C variable names and ranges, its domain, its values and
        combiner with every name they print (:func:`_expressions_doc`), and per isl statement its role, kind, tile
        and vector width.  A field :meth:`generate` comes to read must be added here (tests/codegen compare programs
        written with and without the memo, source for source)."""
        if self.lk.key is None:
            return None
        tensor = {id(t): (self.tensor_names[id(t)], tuple(t.shape), t.dtype) for t in self.args}
        stmts = []
        for st in self.spec.statements:
            names = self.var_names[id(st)]
            var = {id(v): (names.get(id(v), v.name), v.dtype, getattr(v, "lo", None), getattr(v, "extent", None))
                   for v in st.vars}
            comb = st.combiner
            stmts.append((st.name, st.n_out, str(st.domain), tuple(var[id(v)] for v in st.vars), st.accumulate,
                          _expressions_doc(st.values, var, tensor),
                          None if comb is None else (_expressions_doc(comb.result, {
                              **{id(x): ("lhs", i, x.dtype) for i, x in enumerate(comb.lhs)},
                              **{id(y): ("rhs", i, y.dtype) for i, y in enumerate(comb.rhs)}}, tensor),
                              _expressions_doc(comb.identity, {}, tensor))))
        op = self.spec.stage
        ists = tuple((i.name, i.index, i.role, i.kind, i.tile, i.vec, i.shift, str(i.domain))
                     for i in self.statements.values() if i.stage is op)
        return repr((self.lk.key, self.ctx.wide, self.spec.name, self.spec.local_size, self.spec.nontemporal,
                     None if self.spec.lane_sum is None else self.spec.lane_sum.name,
                     self.lk.grid_params, self.lk.grid_box, tuple(op.shape), tuple(tensor[id(t)] for t in self.args),
                     tuple(tensor[id(t)] for t in self.outputs), tuple(stmts), ists))

    def generate(self):
        ctx = self.ctx
        params = []
        for t in self.reads:
            params.append(cl.CLGlobal(c.Const(_RestrictPointer(c.Value(STORAGE[t.dtype], self.tensor_names[id(t)])))))
        for t in self.outputs:
            params.append(cl.CLGlobal(_RestrictPointer(c.Value(STORAGE[t.dtype], self.tensor_names[id(t)]))))
        body = []
        n = len(self.lk.grid_params)
        for d, (p, (lo, _)) in enumerate(zip(self.lk.grid_params, self.lk.grid_box)):
            gid = f"({ctx.idx})get_global_id({n - 1 - d})"
            body.append(c.Initializer(c.Const(c.Value(ctx.idx, p)), gid if lo == 0 else f"{gid} + {ctx.int_lit(lo)}"))
        if self.spec.local_size is not None and n:
            # the NDRange is rounded up to whole work-groups: the extra work-items do nothing
            out = " || ".join(f"{p} >= {ctx.int_lit(lo + size)}" for p, (lo, size) in zip(self.lk.grid_params, self.lk.grid_box))
            body.append(c.If(out, c.Statement("return")))
        for si, names in self.acc.items():
            st = self.spec.statements[si]
            for nm, v in zip(names, st.values):
                body.append(c.Statement(f"{ctx.ctype(v.dtype)} {nm}"))
        for si, (ist, names) in self.block_acc.items():
            size = math.prod(_block_box(ist))
            for nm, v in zip(names, ist.stmt.values):
                ty = ctx.ctype(v.dtype) + (str(ist.vec) if ist.vec > 1 else "")
                body.append(c.Statement(f"{ty} {nm}[{size}]"))
        body += self.nodes(self.lk.ast)
        decl = cl.CLKernel(c.FunctionDeclaration(c.Value("void", self.spec.name), params))
        return c.FunctionBody(decl, c.Block(body))

    # isl AST nodes -> a list of cgen statements (AST blocks and marks are spliced into their parent)
    def nodes(self, nd):
        t = nd.get_type()
        ctx, env = self.ctx, self._env
        if t == isl.ast_node_type.block:
            lst = nd.block_get_children()
            return [x for i in range(lst.n_ast_node()) for x in self.nodes(lst.get_at(i))]
        if t == isl.ast_node_type.mark:
            name = nd.mark_get_id().get_name()
            if name == POINTS_MARK:  # a block's point loops: unrolled here (tree._point_band)
                self._unrolling += 1
                try:
                    return self.nodes(nd.mark_get_node())
                finally:
                    self._unrolling -= 1
            return [c.LineComment(name)] + self.nodes(nd.mark_get_node())
        if t == isl.ast_node_type.for_:
            got = self._unrolled(nd) if self._unrolling else None
            if got is not None:
                return got
            it = nd.for_get_iterator().get_id().get_name()
            init = _strip(ast_expr(ctx, nd.for_get_init(), env))
            body = self.nodes(nd.for_get_body())
            if nd.for_is_degenerate():
                return [c.Block([c.Initializer(c.Const(c.Value(ctx.idx, it)), init)] + body)]
            cond = _strip(ast_expr(ctx, nd.for_get_cond(), env))
            inc = _strip(ast_expr(ctx, nd.for_get_inc(), env))
            return [c.For(f"{ctx.idx} {it} = {init}", cond, f"{it} += {inc}", _as_block(body))]
        if t == isl.ast_node_type.if_:
            v = ast_value(nd.if_get_cond(), env) if env else None
            if v is not None:  # decided by the unrolled points
                if v:
                    return self.nodes(nd.if_get_then_node())
                return self.nodes(nd.if_get_else_node()) if nd.if_has_else_node() else []
            cond = _strip(ast_expr(ctx, nd.if_get_cond(), env))
            then = _as_block(self.nodes(nd.if_get_then_node()))
            other = _as_block(self.nodes(nd.if_get_else_node())) if nd.if_has_else_node() else None
            return [c.If(cond, then, other)]
        if t == isl.ast_node_type.user:
            return [self.user(nd.user_get_expr())]
        raise ValueError(f"unsupported isl AST node {t}")

    def _unrolled(self, nd):
        """A point loop under a POINTS_MARK, unrolled: one copy of its body per value of its iterator, bound to that
        literal (a full tile's points are ``0 <= l < tile``: constant bounds).  In a partial block a bound may
        depend on the grid (``l <= 16 - 8*gid1``): each point whose bound the literal does not decide is guarded by
        it, and its accumulator index stays a literal.  None where the literals do not decide the loop's bounds
        and no statement below says the block's extent: the caller prints it as a loop (correct; its accumulator
        index then is not a literal, and the block's accumulators may leave the registers)."""
        env = self._env
        it = nd.for_get_iterator().get_id().get_name()
        init, cond = nd.for_get_init(), nd.for_get_cond()
        lo, step = ast_value(init, env), ast_value(nd.for_get_inc(), env)
        if step is None or step <= 0:
            return None
        end, exact = self._point_extent(nd, it)
        if lo is None and (not exact or step != 1):  # from 0 up, each point guarded: consecutive points only
            return None
        values = []
        for k in range(0 if lo is None else lo, max(lo or 0, end) + step, step):
            at = {**env, it: k}
            guard = _bound_guard(self.ctx, cond, at, self._grid)
            if lo is None and guard is not False:
                guard = _and_guards(guard, _bound_guard(self.ctx, init, at, self._grid, lower=it))
            if k >= end:
                if guard is False or (guard is not True and exact):
                    break
                return None  # the loop goes on past the block
            if guard is not False:
                values.append((k, guard))
        out = []
        for k, guard in values:
            self._env = {**env, it: k}
            try:
                body = self.nodes(nd.for_get_body())  # each statement a block: nothing of one point leaks
            finally:
                self._env = env
            out += body if guard is True else [c.If(guard, _as_block(body))]
        return out

    def _point_extent(self, nd, it):
        """``(extent, exact)``: the values point loop ``nd`` (iterator ``it``) may take.  Exact: the extent of the
        block dimension whose point coordinate it is, read off a statement call below it (``[b..., l..., r...]``),
        where the statements' domains keep the points in ``[0, extent)``; else the stage's largest tile extent."""
        stack = [nd.for_get_body()]
        while stack:
            x = stack.pop()
            t = x.get_type()
            if t == isl.ast_node_type.user:
                call = x.user_get_expr()
                ist = self.statements.get(call.get_op_arg(0).get_id().get_name())
                if ist is None or ist.tile is None:
                    continue
                n = ist.stmt.n_out
                for d in range(n):
                    a = call.get_op_arg(1 + n + d)
                    if a.get_type() == isl.ast_expr_type.id and a.get_id().get_name() == it:
                        return (_block_box(ist)[d] if ist.kind in ("block", "lane") else ist.tile[d]), True
            elif t == isl.ast_node_type.block:
                lst = x.block_get_children()
                stack += [lst.get_at(i) for i in range(lst.n_ast_node())]
            elif t == isl.ast_node_type.for_:
                stack.append(x.for_get_body())
            elif t == isl.ast_node_type.if_:
                stack.append(x.if_get_then_node())
                if x.if_has_else_node():
                    stack.append(x.if_get_else_node())
            elif t == isl.ast_node_type.mark:
                stack.append(x.mark_get_node())
        op = self.spec.stage
        return max((t for ist in self.statements.values() if ist.stage is op and ist.tile for t in ist.tile),
                   default=1), False

    def user(self, call):
        ctx = self.ctx
        name = call.get_op_arg(0).get_id().get_name()
        ist = self.statements[name]
        st = ist.stmt
        args = [_strip(ast_expr(ctx, call.get_op_arg(i), self._env)) for i in range(1, call.get_op_n_arg())]
        if ist.role in ("zero", "scatter"):
            return self.scatter_user(ist, args)
        if ist.kind == "block":
            return self.block_user(ist, args)
        if ist.kind == "lane":
            return self.lane_user(ist, args)
        if ist.kind == "tiled":  # a partial tile: [b, l, r] -> outputs tile * b + l, then scalar code
            n = st.n_out
            args = [_affine(ctx, [(t, b), (1, x)]) for t, b, x in zip(ist.tile, args[:n], args[n: 2 * n])] + args[2 * n:]
        vnames = self.var_names[id(st)]
        lines = [c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), a) for v, a in zip(st.vars, args)]
        env = {id(v): vnames[id(v)] for v in st.vars[: len(args)]}
        out_ix = flat_index(ctx, _out_indices(ctx, st, [vnames[id(v)] for v in st.out_vars]), self.spec.stage.shape)
        stores = [f"{self.tensor_names[id(t)]}[{out_ix}]" for t in self.outputs]
        printer = ExprPrinter(ctx, env, self.tensor_names, speculate=ist.role == "assign",
                              in_bounds=self._in_bounds(st) if ist.role == "assign" else frozenset())
        if ist.role == "assign":
            decls, vals = printer.emit(st.values)
            lines += [c.Statement(d) for d in decls]
            lines += [c.Statement(f"{s} = {_store(v, t)}") for s, v, t in zip(stores, vals, self.outputs)]
        elif ist.role == "init":
            accs = self.acc[ist.index]
            if st.accumulate:
                lines += [c.Statement(f"{a} = {_load(s, t)}") for a, s, t in zip(accs, stores, self.outputs)]
            else:
                lines += [c.Statement(f"{a} = {ctx.lit(i.value, i.dtype)}") for a, i in zip(accs, st.combiner.identity)]
        elif ist.role == "final":
            accs = self.acc[ist.index]
            lines += [c.Statement(f"{s} = {_store(a, t)}") for s, a, t in zip(stores, accs, self.outputs)]
        else:
            lines += self._update(st, ist.index, printer)
        return c.Block(lines)

    def scatter_user(self, ist, args):
        """A one-hot sum's scatter (poly/scatter.py): ``zero`` stores the sum's identity at an output point;
        ``scatter`` runs the condition's steps in order (a conjunct is tested; a compared value is bound, and
        tested against the values its comparison can match), tests that the values pick an output point, and adds
        the value there: each reads only where the gather's condition read it."""
        ctx, st, op = self.ctx, ist.stmt, self.spec.stage
        vnames = dict(self.var_names[id(st)])
        vars_ = st.out_vars if ist.role == "zero" else ist.scatter.loop
        used = set(vnames.values()) | set(self.tensor_names.values()) | set(self.lk.grid_params)
        for v in vars_:  # positions that replaced reduction variables (poly/scatter.py's _over_positions)
            if id(v) not in vnames:
                vnames[id(v)] = c_identifier(v.name, used)
        lines = [c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), a) for v, a in zip(vars_, args)]
        [t] = self.outputs
        ref = f"{self.tensor_names[id(t)]}[{flat_index(ctx, [vnames[id(v)] for v in st.out_vars], op.shape)}]"
        if ist.role == "zero":
            lines.append(c.Statement(f"{ref} = {ctx.lit(st.combiner.identity[0].value, t.dtype)}"))
            return c.Block(lines)
        form, env = ist.scatter, {id(v): vnames[id(v)] for v in vars_}
        printer = ExprPrinter(ctx, env, self.tensor_names)
        ranges = {id(a): (lo, hi) for a, lo, hi in form.ranges}
        steps = []  # (declarations, the if's condition), outermost first
        for a, e in form.steps:
            decls, [text] = printer.emit([e])
            if a is None:
                steps.append((decls, _strip(text)))
            else:  # the printer reads the bound value by the variable's name from here on
                name = env[id(a)] = printer._bind(decls, ctx.ctype(a.dtype), text)
                lo, hi = ranges[id(a)]
                steps.append((decls, f"{name} >= {ctx.lit(lo, a.dtype)} && {name} <= {ctx.lit(hi, a.dtype)}"))
        decls, [value] = printer.emit([form.value])
        # the value rounded on its own, as the gather's select rounds it: `T + a * b` in one statement contracts
        # to a fused multiply-add (one rounding fewer), a different number
        x = form.value
        y = value if isinstance(x, (Load, Const, Var)) else printer._bind(decls, ctx.ctype(x.dtype), value)
        body = [c.Statement(d) for d in decls] + [c.Statement(f"{ref} = {ref} + {y}")]
        decls, picks = printer.emit([p for _, p in form.picks])
        body = [c.Statement(d) for d in decls] + [
            c.Initializer(c.Const(c.Value(ctx.ctype(st.out_vars[d].dtype), vnames[id(st.out_vars[d])])), _strip(p))
            for (d, _), p in zip(form.picks, picks)] + body
        if form.check is not None:
            decls, [check] = printer.emit([form.check])
            body = [c.Statement(d) for d in decls] + [c.If(_strip(check), c.Block(body))]
        for decls, cond in reversed(steps):
            body = [c.Statement(d) for d in decls] + [c.If(cond, c.Block(body))]
        return c.Block(lines + body)

    def block_user(self, ist, args):
        """One point (or one vector of points) of a full tile: block coordinates b, point l, reductions r.

        The vector decisions are the statement's :class:`~polyad.codegen.vectorize.VecBlock`
        (:func:`~polyad.codegen.vectorize.vectorize_block`); here they are printed."""
        ctx, st = self.ctx, ist.stmt
        plan = self._vec_plan(ist)
        vec = plan.width
        n = st.n_out
        tile, box = ist.tile, _block_box(ist)
        b, l, r = args[:n], args[n: 2 * n], args[2 * n:]
        vnames = self.var_names[id(st)]
        lines = []
        for d, v in enumerate(st.out_vars):
            step = vec if d == n - 1 else 1
            o = _affine(ctx, [(tile[d], b[d]), (step, l[d])] + ([(-ist.shift, "1")] if d == n - 1 else []))
            lines.append(c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), o))
        for v, a in zip(st.red_vars, r):
            lines.append(c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), a))
        env = {id(v): vnames[id(v)] for v in st.vars[: n + len(r)]}
        # the local point index: a literal once the AST generator has unrolled the point loops
        terms, stride = [], 1
        for d in reversed(range(n)):
            terms.append((stride, l[d]))
            stride *= box[d]
        p = _affine(ctx, terms)
        flat = flat_index(ctx, _out_indices(ctx, st, [vnames[id(v)] for v in st.out_vars]), self.spec.stage.shape)

        def printer(exprs, extra=None, prefix="t"):
            assign = ist.role == "assign"
            # a vector select reads the arms isl proves in bounds in every lane, in an update too
            names, proven = {**env, **(extra or {})}, self._in_bounds(st) if assign or vec > 1 else frozenset()
            if vec == 1:
                return ExprPrinter(ctx, names, self.tensor_names, prefix, speculate=assign, in_bounds=proven)
            return VectorPrinter(ctx, names, self.tensor_names, exprs, prefix, speculate=assign, in_bounds=proven)

        def values(pr, exprs, roots):
            decls, texts = pr.emit(roots)
            if vec == 1:
                return decls, texts
            return decls, [f"({self._broadcast(f, _strip(t))})" if isinstance(f, vz.Broadcast) else t
                           for t, f in zip(texts, exprs.roots)]

        bound = []  # temporaries of strided stores

        def stores(s, value):
            """The statements of the VecStore ``s`` of ``value`` (C text)."""
            t = s.tensor
            buf = self.tensor_names[id(t)]
            if s.width == 1:
                return [f"{buf}[{flat}] = {_store(value, t)}"]
            if s.contiguous and self.spec.nontemporal:  # aligned: StageSchedule.nontemporal_stores
                return [f"__builtin_nontemporal_store({_to_storage(ctx, value, t.dtype, vec)}, "
                        f"(__global {STORAGE[t.dtype]}{vec} *)({buf} + {flat}))"]
            if s.contiguous:
                return [f"vstore{vec}({_to_storage(ctx, value, t.dtype, vec)}, 0, {buf} + {flat})"]
            out = []
            if not (_atomic(value) and not value.startswith("(")):  # n<k>: a generated name (tree._looks_generated)
                name = f"n{len(bound)}"
                bound.append(name)
                out.append(f"const {ctx.ctype(t.dtype)}{vec} {name} = {_strip(value)}")
                value = name
            return out + [f"{buf}[{_plus(flat, s.stride * k)}] = {_store(f'{value}.s{_LANE[k]}', t)}" for k in range(vec)]

        def load(f):
            """The VecLoad ``f`` of the block point's output element(s)."""
            buf = self.tensor_names[id(f.tensor)]
            if f.width == 1:
                return _load(f"{buf}[{flat}]", f.tensor)
            if f.contiguous:
                return _from_storage(ctx, f"vload{vec}(0, {buf} + {flat})", f.tensor.dtype, vec)
            parts = ", ".join(f"{buf}[{_plus(flat, f.stride * k)}]" for k in range(vec))
            return f"(({ctx.ctype(f.tensor.dtype)}{vec})({parts}))"

        if ist.role == "assign":
            decls, vals = values(printer(plan.values), plan.values, st.values)
            lines += [c.Statement(d) for d in decls]
            lines += [c.Statement(x) for s, v in zip(plan.stores, vals) for x in stores(s, v)]
            return c.Block(lines)
        accs = [f"{a}[{p}]" for a in self.block_acc[ist.index, ist.vec][1]]
        if ist.role == "init":
            for a, f in zip(accs, plan.init):
                if isinstance(f, vz.VecLoad):
                    lines.append(c.Statement(f"{a} = {load(f)}"))
                else:
                    lit = ctx.lit(f.expr.value, f.expr.dtype)
                    lines.append(c.Statement(f"{a} = {lit if f.width == 1 else self._broadcast(f, lit)}"))
        elif ist.role == "final" and self.spec.lane_sum is not None:
            lines += [c.Statement(x) for x in self._lane_sum(st, accs[0], vec, vnames, l[n - 1])]
        elif ist.role == "final":
            lines += [c.Statement(x) for a, s in zip(accs, plan.stores) for x in stores(s, a)]
        else:
            comb = st.combiner
            decls, vals = values(printer(plan.values), plan.values, st.values)
            lines += [c.Statement(d) for d in decls]
            extra = {}
            for x, a in zip(comb.lhs, accs):
                extra[id(x)] = a
            # a combine printed lane by lane would print a substituted value whole in every lane
            whole = plan.combine is None or not any(isinstance(f, (vz.Lanes, vz.ScalarLanes))
                                                    for f in plan.combine.forms.values())
            for k, (y, v) in enumerate(zip(comb.rhs, vals)):
                if whole and _used_once(comb, y):  # in the combine's expression: `acc + a * b` contracts to an FMA
                    extra[id(y)] = _parens(v)
                    continue
                ty = ctx.ctype(y.dtype) + (str(vec) if vec > 1 else "")
                lines.append(c.Statement(f"const {ty} y{k} = {_strip(v)}"))
                extra[id(y)] = f"y{k}"
            rp = printer(plan.combine, extra, "r")
            rdecls, res = values(rp, plan.combine, comb.result)
            lines += [c.Statement(d) for d in rdecls]
            if len(accs) == 1:
                lines.append(c.Statement(f"{accs[0]} = {_strip(res[0])}"))
            else:
                for k, (rv, x) in enumerate(zip(res, comb.lhs)):
                    ty = ctx.ctype(x.dtype) + (str(vec) if vec > 1 else "")
                    lines.append(c.Statement(f"const {ty} n{k} = {_strip(rv)}"))
                lines += [c.Statement(f"{a} = n{k}") for k, a in enumerate(accs)]
        return c.Block(lines)

    def _lane_sum(self, st, acc, vec, vnames, which):
        """The statements adding up the ``vec`` partials of the vector ``acc`` (the ``which``-th of an output point's,
        the block's whole last dimension) in halves, ``r8 = acc.lo + acc.hi`` ..., into the summing stage's output at
        the point: the first vector stores, the others add (the block's finals run in order)."""
        (t,) = self.outputs
        ct = self.ctx.ctype(t.dtype)
        out, cur, k = [], acc, vec
        while k > 1:
            k //= 2
            out.append(f"const {ct}{k if k > 1 else ''} r{k} = {cur}.lo + {cur}.hi")
            cur = f"r{k}"
        ref = f"{self.tensor_names[id(t)]}[{flat_index(self.ctx, [vnames[id(v)] for v in st.out_vars[:-1]], t.shape)}]"
        first = which.removesuffix("L")
        if not first.isdigit():  # the point loops are unrolled (the printer or isl): each final knows its vector
            raise ScheduleError(f"stage {self.spec.stage.name!r}: a lane sum's final statement at vector {which!r}")
        return out + [f"{ref} = {_store(cur if first == '0' else f'{_load(ref, t)} + {cur}', t)}"]

    def _in_bounds(self, st):
        """ids of ``st``'s loads whose every index isl proves within the tensor over the statement's domain:
        a speculated read of one needs no clamp.  A max-pool gradient's
        ``{ [b, c, y, x] -> [b, c, floor(y/2), floor(x/2)] }`` is; ``X[i - 1]`` at ``i = 0`` is not, nor is a
        read at a loaded index."""
        got = self._proven.get(id(st))
        if got is None:
            got = self._proven[id(st)] = frozenset(_proven_in_bounds(st))
        return got

    def _vec_plan(self, ist):
        """The statement's VecBlock (the vectorisation pass, once per statement)."""
        plan = self._vec_plans.get(ist.name)
        if plan is None:
            plan = self._vec_plans[ist.name] = vz.vectorize_block(ist)
        return plan

    def _broadcast(self, f, text):
        """C text of the Broadcast ``f`` of a lane-free value printed as ``text``."""
        return f"({self.ctx.ctype(f.expr.dtype)}{f.width})({text})"

    def lane_user(self, ist, args):
        """One reduction point of one lane of a ragged vector group: a scalar update of lane ``.sK``."""
        ctx, st, vec = self.ctx, ist.stmt, ist.vec
        n = st.n_out
        b, l, lane, r = args[:n], args[n: 2 * n], args[2 * n], args[2 * n + 1:]
        try:
            k = int(lane.removesuffix("L"))
        except ValueError:  # the lane's range depends on the reduction point: isl unrolls it as lb + i
            k = None
        vnames = self.var_names[id(st)]
        lines = []
        for d, v in enumerate(st.out_vars):
            terms = [(ist.tile[d], b[d]), (vec if d == n - 1 else 1, l[d])] + ([(1, lane)] if d == n - 1 else [])
            lines.append(c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), _affine(ctx, terms)))
        for v, a in zip(st.red_vars, r):
            lines.append(c.Initializer(c.Const(c.Value(ctx.ctype(v.dtype), vnames[id(v)])), a))
        box, terms, stride = _block_box(ist), [], 1
        for d in reversed(range(n)):
            terms.append((stride, l[d]))
            stride *= box[d]
        p = _affine(ctx, terms)
        if k is not None:
            accs = [f"{a}[{p}].s{_LANE[k]}" for a in self.block_acc[ist.index, ist.vec][1]]
        else:  # a computed lane: address the vector's element through a private pointer
            accs = [f"(({ctx.ctype(v.dtype)} *)&{a}[{p}])[{lane}]"
                    for a, v in zip(self.block_acc[ist.index, ist.vec][1], st.values)]
        env = {id(v): vnames[id(v)] for v in st.vars}
        lines += self._update(st, ist.index, ExprPrinter(ctx, env, self.tensor_names), accs)
        return c.Block(lines)

    def _update(self, st, si, printer, accs=None):
        ctx = self.ctx
        accs, comb = accs or self.acc[si], st.combiner
        decls, vals = printer.emit(st.values)
        lines = [c.Statement(d) for d in decls]
        env = {id(x): a for x, a in zip(comb.lhs, accs)}
        for k, (y, v) in enumerate(zip(comb.rhs, vals)):
            if _atomic(v) and not v.startswith("("):
                env[id(y)] = v
            elif _used_once(comb, y):  # in the combine's expression: `acc + a * b` contracts to an FMA
                env[id(y)] = _parens(v)
            else:
                lines.append(c.Statement(f"const {ctx.ctype(y.dtype)} y{k} = {_strip(v)}"))
                env[id(y)] = f"y{k}"
        rp = ExprPrinter(ctx, env, self.tensor_names, temp_prefix="r")
        rdecls, res = rp.emit(comb.result)
        lines += [c.Statement(d) for d in rdecls]
        if len(accs) == 1:
            lines.append(c.Statement(f"{accs[0]} = {_strip(res[0])}"))
        else:  # a tuple reduction updates all accumulators from the old values
            for k, (r, x) in enumerate(zip(res, comb.lhs)):
                lines.append(c.Statement(f"const {ctx.ctype(x.dtype)} n{k} = {_strip(r)}"))
            lines += [c.Statement(f"{a} = n{k}") for k, a in enumerate(accs)]
        return lines


def _expressions_doc(roots, var, tensor):
    """Expressions as a node list (children first, shared nodes once) with what printing them reads: operators,
    dtypes, constants exactly, variables by ``var`` (id -> their printed name and range) and buffers by ``tensor``
    (id -> C name, shape, dtype).  A variable or tensor missing from those is spelled by its own name and id."""
    index, nodes = {}, []
    for n in post_order(tuple(roots)):
        if id(n) in index:
            continue
        if isinstance(n, Var):
            e = ("var",) + tuple(var.get(id(n), (n.name, n.dtype, "free", id(n))))
        elif isinstance(n, Const):
            v = n.value
            e = ("const", n.dtype, v.hex() if isinstance(v, float) else repr(v))
        elif isinstance(n, Call):
            e = ("call", n.op, n.dtype) + tuple(index[id(a)] for a in n.args)
        elif isinstance(n, Load):
            t = n.tensor
            e = ("load", tensor.get(id(t), (t.name, id(t)))) + tuple(index[id(a)] for a in n.indices)
        else:  # a kind printing does not know: its own text, and never equal to another object's
            e = ("?", type(n).__name__, str(n), id(n))
        index[id(n)] = len(nodes)
        nodes.append(e)
    return tuple(nodes), tuple(index[id(r)] for r in roots)


def _used_once(comb, y):
    """True when the combiner's result reads its right-hand value ``y`` once (sum, max, min, product: not a
    tuple reducer's comparisons).  The value is then printed inside the update, one C expression, where
    FP_CONTRACT lets the compiler fuse ``acc + a * b`` into an FMA: split into ``y0 = a * b; acc = acc + y0``
    it may not, and on PoCL it did not (a 32x1000x1000 matmul: 1.19 -> 0.90 ms)."""
    return len(comb.result) == 1 and sum(1 for n in post_order(tuple(comb.result)) if n is y) == 1


def _parens(v):
    v = _strip(v)
    return v if _atomic(v) else f"({v})"


def _out_indices(ctx, st, names):
    """C index texts of the stage point a statement instance writes: its output variables' names, or
    ``s*q + p`` per dimension of a phased statement (codegen/phase.py)."""
    strides = getattr(st, "strides", None)
    if not strides:
        return names
    return [x if s == 1 and p == 0 else _affine(ctx, [(s, x), (p, "1")]) for x, s, p in zip(names, strides, st.offsets)]


def _plus(flat, k):
    """``flat + k`` (C text) for an int k >= 0."""
    return flat if k == 0 else f"{flat} + {k}"


def _block_box(ist):
    """Extents of the point loops of a full-tile statement (the last one counts vectors)."""
    return tuple(t // ist.vec if d == len(ist.tile) - 1 else t for d, t in enumerate(ist.tile))


def _affine(ctx, terms):
    """C text of sum(coef * x) for (int coef, C text x); literal terms are folded into one constant."""
    const, parts = 0, []
    for k, x in terms:
        try:
            const += k * int(x.removesuffix("L"))
            continue
        except ValueError:
            pass
        if k:
            x = x if _atomic(x) or len(terms) == 1 and k == 1 else f"({x})"
            parts.append(x if k == 1 else f"{k} * {x}")
    if const or not parts:
        parts.append(ctx.int_lit(const))
    return " + ".join(parts)


def _as_block(items):
    return items[0] if len(items) == 1 and isinstance(items[0], c.Block) else c.Block(items)


def _to_storage(ctx, value, dtype, vec):
    """A ``vec``-lane value as its buffer stores it: int32 computed in ``long`` (64-bit indexing) is
    narrowed explicitly (OpenCL converts no vector implicitly; ``vstore4`` of a long4 into an int buffer
    writes 32 bytes where there are 16: the capability probe caught it corrupting the heap)."""
    ct, st = ctx.ctype(dtype), STORAGE[dtype]
    return _strip(value) if ct == st or dtype == "bool" else f"convert_{st}{vec}({_strip(value)})"


def _from_storage(ctx, loaded, dtype, vec):
    """A ``vloadN`` widened to the type its values are computed in (int32 as ``long`` when indices are)."""
    ct, st = ctx.ctype(dtype), STORAGE[dtype]
    return loaded if ct == st or dtype == "bool" else f"convert_{ct}{vec}({loaded})"


def _store(value, tensor):
    return f"(uchar)({_strip(value)})" if tensor.dtype == "bool" else _strip(value)


def _load(ref, tensor):
    return f"({ref} != 0)" if tensor.dtype == "bool" else ref


def _reads(values):
    seen, out = set(), []
    for nd in post_order(tuple(values)):
        if isinstance(nd, Load) and id(nd.tensor) not in seen:
            seen.add(id(nd.tensor))
            out.append(nd.tensor)
    return out


def needs_wide_index(tensors, statements):
    """True when a buffer, a statement variable's range, or index arithmetic (an int32 expression of the
    variables and constants: ``X[(i * 1000000 + j) % 7]``) leaves the int32 range.  Arithmetic on loaded values
    is the data's, and wraps as it does wherever it is computed."""
    from ..poly.bounds import interval

    for t in tensors:
        if t.size > _INT32_MAX:
            return True
    for st in statements:
        for v in st.vars:
            if abs(v.lo) > _INT32_MAX or abs(v.lo + v.extent) > _INT32_MAX:
                return True
        ranges = {id(v): (v.lo, v.lo + v.extent - 1) for v in st.vars}
        memo = {}
        for nd in post_order(tuple(st.values)):
            if isinstance(nd, Call) and nd.dtype == "int32":
                lo, hi = interval(nd, lambda v: ranges.get(id(v), (-math.inf, math.inf)), memo)
                if math.isfinite(lo) and lo < -_INT32_MAX - 1 or math.isfinite(hi) and hi > _INT32_MAX:
                    return True
    return False


def program_source(ctx, kernel_sources):
    """The whole program: pragmas, the helpers used, the kernels."""
    head = ["// generated by polyad"]
    if ctx.fp64:
        head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    parts = ["\n".join(head)]
    parts += [_helper_source(h) for h in ctx.helpers]
    parts += [str(k) for k in kernel_sources]
    return "\n\n".join(parts) + "\n"


_KERNEL_START = "\n\n__kernel void "


def kernel_source(source, name):
    """The program of :func:`program_source` cut down to kernel ``name``: the pragmas, the helpers and that
    kernel alone, a program of its own (the tuner compiles each kernel apart, so a candidate that changes one
    stage recompiles one kernel). None when ``source`` has no kernel ``name``."""
    cut = source.find(_KERNEL_START)
    if cut < 0:
        return None
    head, at = source[:cut], source.find(f"{_KERNEL_START}{name}(")
    if at < 0:
        return None
    end = source.find(_KERNEL_START, at + 1)
    return head + (source[at:end] + "\n" if end >= 0 else source[at:])
