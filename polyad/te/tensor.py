"""Tensors and the operations that define them: placeholders and computes.

A :class:`Tensor` is output ``value_index`` of an operation.  Tensors and
operations are identity objects (two placeholders of the same name are two
inputs); expressions inside compute bodies are hash-consed.
"""

import inspect
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import ArityError, AxisError, DtypeError, IndexingError, OutOfBoundsError, PolyadError, ShapeError
from . import dtype as dt
from .construct import as_expr
from .expr import Const, IterVar, Load, Reduce, Var
from .visit import free_vars, input_tensors, post_order


def check_shape(shape, what):
    """A shape as a tuple of positive Python ints; raise ShapeError naming ``what`` otherwise."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what}: shape must be a tuple of integers, got {shape!r}") from None
    out = []
    for ax, s in enumerate(shape):
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            if isinstance(s, Const) and dt.is_int(s.dtype):
                s = s.value
            else:
                raise ShapeError(f"{what}: axis {ax} has a non-integer size {s!r}; shapes are constant integers")
        if s <= 0:
            raise ShapeError(f"{what}: axis {ax} has size {s}; sizes must be positive")
        out.append(int(s))
    return tuple(out)


_tensor_ops = None


def set_tensor_ops(namespace):
    """Install the op library (``add``, ``less``, ``matmul``, ...) the Tensor operators call: polyad.ops."""
    global _tensor_ops
    _tensor_ops = namespace


@dataclass(frozen=True, eq=False)
class Tensor:
    """Output ``value_index`` of ``op``.  Index it to read elements: ``X[i, k]``.

    Tensors are made by ``pa.placeholder``, ``pa.compute`` and the ops, not constructed directly.  ``X[i, k]``
    raises ``IndexingError`` for a wrong number of indices, a slice or a non-integer index, and
    ``OutOfBoundsError`` for a constant index outside the axis; arithmetic operators (``X + Y``, ``X @ W``,
    ``X > 0``) are the ``pa.ops`` functions of the same meaning, while ``==`` and ``!=`` compare identity (tensors
    are dict keys).

    :param op: the operation that defines the tensor (a placeholder or a compute).
    :param value_index: which output of ``op`` this is (0 except for tuple reductions).
    """

    op: object
    value_index: int = 0

    @property
    def shape(self):
        return self.op.shape

    @property
    def ndim(self):
        return len(self.op.shape)

    @property
    def dtype(self):
        return self.op.output_dtype(self.value_index)

    @property
    def name(self):
        n = self.op.name
        return n if self.op.num_outputs == 1 else f"{n}.v{self.value_index}"

    @property
    def size(self):
        return math.prod(self.shape)  # Python ints: no int64 overflow on huge shapes

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexingError(
                f"tensor {self.name!r} has {self.ndim} dimensions {self.shape} but is indexed with {len(indices)} indices"
            )
        out = []
        for ax, ix in enumerate(indices):
            if isinstance(ix, slice):
                raise IndexingError(f"tensor {self.name!r}, axis {ax}: slices are not expressions; use pa.ops.strided_slice")
            e = as_expr(ix)
            if not dt.is_int(e.dtype):
                raise IndexingError(
                    f"tensor {self.name!r}, axis {ax}: index {e} has dtype {e.dtype}; indices must be integers"
                )
            if isinstance(e, Const) and not 0 <= e.value < self.shape[ax]:
                raise OutOfBoundsError(
                    f"tensor {self.name!r}, axis {ax}: constant index {e.value} is outside [0, {self.shape[ax]})"
                )
            out.append(e)
        return Load(self, tuple(out))

    def __call__(self, *indices):
        return self[indices]

    # Tensor-level arithmetic goes through the op library (numpy broadcasting), which sits above te
    # and installs itself with set_tensor_ops.
    def _op(self, name, *args):
        if _tensor_ops is None:
            raise PolyadError(f"tensor {self.name!r}: tensor arithmetic needs the op library (import polyad)")
        return getattr(_tensor_ops, name)(*args)

    def __add__(self, o):
        return self._op("add", self, o)

    def __radd__(self, o):
        return self._op("add", o, self)

    def __sub__(self, o):
        return self._op("subtract", self, o)

    def __rsub__(self, o):
        return self._op("subtract", o, self)

    def __mul__(self, o):
        return self._op("multiply", self, o)

    def __rmul__(self, o):
        return self._op("multiply", o, self)

    def __truediv__(self, o):
        return self._op("divide", self, o)

    def __rtruediv__(self, o):
        return self._op("divide", o, self)

    def __floordiv__(self, o):
        return self._op("floor_divide", self, o)

    def __rfloordiv__(self, o):
        return self._op("floor_divide", o, self)

    def __mod__(self, o):
        return self._op("mod", self, o)

    def __rmod__(self, o):
        return self._op("mod", o, self)

    def __pow__(self, o):
        return self._op("power", self, o)

    def __rpow__(self, o):
        return self._op("power", o, self)

    def __neg__(self):
        return self._op("negative", self)

    def __abs__(self):
        return self._op("abs", self)

    def __matmul__(self, o):
        return self._op("matmul", self, o)

    def __lshift__(self, o):
        return self._op("left_shift", self, o)

    def __rlshift__(self, o):
        return self._op("left_shift", o, self)

    def __rshift__(self, o):
        return self._op("right_shift", self, o)

    def __rrshift__(self, o):
        return self._op("right_shift", o, self)

    # & | ^ ~ are numpy's on bool tensors (logical); polyad has no bitwise integer operations
    def _logical(self, symbol, name, *args):
        for a in args:
            if not (isinstance(a, (bool, np.bool_)) or isinstance(a, Tensor) and a.dtype == "bool"):
                what = f"tensor {a.name!r} of {a.dtype}" if isinstance(a, Tensor) else repr(a)
                raise DtypeError(f"{symbol} of tensors is the logical {name} of bool tensors (as numpy's on bools); "
                                 f"got {what}: polyad has no bitwise integer operations (pa.ops.logical_{name} takes "
                                 f"truth values of numbers)")
        return self._op(f"logical_{name}", *args)

    def __and__(self, o):
        return self._logical("&", "and", self, o)

    def __rand__(self, o):
        return self._logical("&", "and", o, self)

    def __or__(self, o):
        return self._logical("|", "or", self, o)

    def __ror__(self, o):
        return self._logical("|", "or", o, self)

    def __invert__(self):
        return self._logical("~", "not", self)

    # Ordering comparisons are elementwise (bool tensors).  == and != stay identity:
    # tensors are dict keys everywhere (feeds, adjoints); use pa.ops.equal for values.
    def __lt__(self, o):
        return self._op("less", self, o)

    def __le__(self, o):
        return self._op("less_equal", self, o)

    def __gt__(self, o):
        return self._op("greater", self, o)

    def __ge__(self, o):
        return self._op("greater_equal", self, o)

    def __repr__(self):
        return f"Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__


class Operation:
    """Base of the operations that define tensors."""

    num_outputs = 1

    def output(self, i=0):
        return self._outputs[i]

    @property
    def outputs(self):
        return list(self._outputs)


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    name: str
    shape: tuple
    dtype: str

    def output_dtype(self, i):
        return self.dtype

    @cached_property
    def _outputs(self):
        return (Tensor(self, 0),)

    @property
    def input_tensors(self):
        return []

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """``name[axis] = body``; body is one expression per output (several only for tuple reductions)."""

    name: str
    axis: tuple
    body: tuple
    tag: str = ""
    attrs: dict = field(default_factory=dict)

    @property
    def shape(self):
        return tuple(a.extent for a in self.axis)

    @property
    def num_outputs(self):
        return len(self.body)

    def output_dtype(self, i):
        return self.body[i].dtype

    @property
    def reduce_axis(self):
        b = self.body[0]
        return b.axis if isinstance(b, Reduce) else ()

    @cached_property
    def _outputs(self):
        return tuple(Tensor(self, i) for i in range(len(self.body)))

    @cached_property
    def input_tensors(self):
        return input_tensors(self.body)

    __hash__ = object.__hash__


def placeholder(shape, dtype="float32", name="placeholder"):
    """``pa.placeholder(shape, dtype="float32", name=...)``: an input tensor.

    :param shape: the shape: an int or a tuple of positive ints.
    :param dtype: the dtype: ``"float32"`` (default), ``"float64"``, ``"int32"``, ``"int64"``, ``"bool"``, or a
        numpy dtype.
    :param name: the name, used in printouts, error messages and kernels.
    :returns: the new input tensor (two placeholders of the same name are two inputs).
    :raises ShapeError: when ``shape`` is not a tuple of positive integers.
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports.
    """
    shape = check_shape(shape, f"placeholder {name!r}")
    return PlaceholderOp(str(name), shape, dt.canonical(dtype)).output(0)


def _arity(fcompute):
    """(number of positional params, accepts *args, param names) of fcompute."""
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return None, True, ()
    names, star = [], False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            star = True
    return len(names), star, tuple(names)


def compute(shape, fcompute, name="compute", tag="", attrs=None):
    """``pa.compute(shape, lambda i, j: ..., name=...)``: a tensor defined elementwise.

    The body may be an expression, a reduction (``pa.sum(..., axis=k)``) at
    the top, or a tuple of reductions of one tuple reducer (several outputs:
    a list of tensors is returned then).

    :param shape: the shape: an int or a tuple of positive ints.
    :param fcompute: a function of one index variable per axis (its parameter names name the axes) returning the
        element: an expression, a number, a reduction, or a tuple of reductions of one tuple reducer.
    :param name: the name, used in printouts, error messages and kernels.
    :param tag: a TOPI-style tag ("elementwise", "broadcast", "injective", "reduction", ...) the scheduler reads.
    :param attrs: a dict of attributes kept on the operation (strides, padding, ...), or None.
    :returns: the new tensor, or a list of tensors for a tuple body.
    :raises ShapeError: when ``shape`` is not a tuple of positive integers.
    :raises ArityError: when ``fcompute`` takes more index arguments than ``shape`` has axes, or fewer without
        ``*args``.
    :raises AxisError: when the body uses a reduce axis outside its reduction, or a variable that is not an axis of
        this compute.
    :raises DtypeError: when the body is not an expression or a number.
    :raises PolyadError: when ``fcompute`` returns nothing, some but not all outputs are reductions, tuple outputs
        are not one tuple reduction, or a reduction is only part of the body.
    """
    name = str(name)
    shape = check_shape(shape, f"compute {name!r}")
    n, star, names = _arity(fcompute)
    if n is not None and (n > len(shape) or (n < len(shape) and not star)):
        raise ArityError(
            f"compute {name!r}: fcompute takes {n} index argument{'s' if n != 1 else ''} "
            f"but the shape {shape} has {len(shape)} axes"
        )
    names = list(names) + [f"i{d}" for d in range(len(names), len(shape))]
    axis = tuple(IterVar(names[d], "int32", lo=0, extent=s, kind="data") for d, s in enumerate(shape))
    body = fcompute(*axis)
    multi = isinstance(body, (tuple, list))
    body = tuple(as_expr(b) for b in (body if multi else (body,)))
    if not body:
        raise PolyadError(f"compute {name!r}: fcompute returned nothing")
    _check_body(name, axis, body)
    op = ComputeOp(name, axis, body, tag, dict(attrs or {}))
    outs = op.outputs
    return outs if multi else outs[0]


#: The ``attrs`` key that marks a :func:`stop_gradient` stage: reverse mode does not differentiate through it.
STOP_GRADIENT = "stop_gradient"


def stop_gradient(x, name=None):
    """``pa.stop_gradient(x)``: ``x``'s values, through which no gradient flows (JAX's ``lax.stop_gradient``,
    PyTorch's ``detach``).

    An identity stage marked in its ``attrs``: ``pa.differentiate`` treats it as a constant, so nothing behind
    it gets an adjoint, and its Jacobian is zero.  The scheduler inlines it like any copy.  The op library uses
    it where a value is subtracted only for numerical range, as softmax's row max: the function does not
    depend on it, so its derivative terms cancel exactly and computing them is wasted work (and rounding).

    :param x: the tensor.
    :param name: the stage's name; None for ``<x's name>_stopgrad``.
    :returns: a new tensor of ``x``'s shape and dtype.
    :raises PolyadError: when ``x`` is not a tensor.
    """
    if not isinstance(x, Tensor):
        raise PolyadError(f"stop_gradient: expected a tensor, got {x!r}")
    name = f"{x.name}_stopgrad" if name is None else str(name)
    return compute(x.shape, lambda *i: x[i], name=name, tag="elementwise", attrs={STOP_GRADIENT: True})


def is_stop_gradient(op):
    """Whether ``op`` is a :func:`stop_gradient` stage."""
    return isinstance(op, ComputeOp) and bool(op.attrs.get(STOP_GRADIENT))


def _check_body(name, axis, body):
    reduces = [isinstance(b, Reduce) for b in body]
    if any(reduces) and not all(reduces):
        raise PolyadError(f"compute {name!r}: either every output or none is a reduction")
    if all(reduces) and len(body) > 1:
        b0 = body[0]
        for b in body[1:]:
            if b.combiner is not b0.combiner or b.source is not b0.source or b.axis != b0.axis:
                raise PolyadError(f"compute {name!r}: the outputs must come from one tuple reduction")
    for b in body:
        inner = b.source + (b.condition,) if isinstance(b, Reduce) else (b,)
        for n in post_order(inner):
            if isinstance(n, Reduce):
                raise PolyadError(
                    f"compute {name!r}: a reduction must be the whole body, not part of {b}; "
                    "compute the reduction as its own tensor"
                )
        axis_ids = {id(a) for a in axis}
        for v in free_vars(b):
            if id(v) in axis_ids:
                continue
            if isinstance(v, IterVar) and v.kind == "reduce":
                raise AxisError(
                    f"compute {name!r}: reduce axis {v.name!r} is used outside its reduction "
                    "(wrap the expression in pa.sum/pa.max/... with axis=" + v.name + ")"
                )
            if isinstance(v, Var):
                raise AxisError(f"compute {name!r}: variable {v.name!r} is not an axis of this compute")


def walk_ops(outputs, given=()):
    """The operations that ``outputs`` depend on, each once, in dependency order (inputs first).

    Reads of a tensor in ``given`` (tensors fed as data) are not followed: the stages
    only it needs are not listed (its own op is, when ``outputs`` need another of its outputs).
    """
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    stop = {id(t) for t in given}
    order, seen = [], set()
    stack = [(t.op, False) for t in reversed(list(outputs))]
    while stack:
        op, done = stack.pop()
        if id(op) in seen:
            continue
        if done:
            seen.add(id(op))
            order.append(op)
            continue
        stack.append((op, True))
        for t in reversed(op.input_tensors):
            if id(t.op) not in seen and id(t) not in stop:
                stack.append((t.op, False))
    return order


def placeholders(outputs, given=()):
    """The placeholder tensors ``outputs`` depend on, in dependency order (not through ``given`` tensors)."""
    return [op.output(0) for op in walk_ops(outputs, given) if isinstance(op, PlaceholderOp)]


def array_for(t, a, what, shape_error, dtype_error):
    """``a`` as the array of tensor ``t``, in native byte order: the one place where arrays given by a
    user (``pa.evaluate``'s feed, a Module's arguments) are normalised or rejected.

    Lists and scalars take ``t``'s dtype where their numbers fit it (ints and bools into a float tensor too; floats
    into an integer one not: that would truncate); a non-native byte order (``">f4"``) is swapped, since
    kernels read the bytes as they lie; ``shape_error`` or ``dtype_error`` (an exception class)
    names the tensor when the shape or dtype differs, or a list is ragged.  ``what`` names the
    array in the message ("the fed array").
    """
    if not isinstance(a, np.ndarray):
        try:
            a = np.asarray(a)
        except (ValueError, TypeError) as e:  # ragged nesting: numpy's "inhomogeneous shape"
            raise shape_error(f"input tensor {t.name!r} has shape {t.shape}, but {what} is not a rectangular "
                              f"array ({str(e).splitlines()[0]})") from None
        if a.dtype.kind in ("fiub" if dt.is_float(t.dtype) else "iub" if dt.is_int(t.dtype) else "b"):
            a = _converted(t, a, what, dtype_error)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.shape != t.shape:
        raise shape_error(f"input tensor {t.name!r} has shape {t.shape}, but {what} has shape {a.shape}")
    if a.dtype.name != t.dtype:
        raise dtype_error(
            f"input tensor {t.name!r} has dtype {t.dtype}, but {what} has dtype {a.dtype.name} "
            f"(convert it with .astype({t.dtype!r}))"
        )
    return a


def _converted(t, a, what, dtype_error):
    """Python numbers (a list's array) as ``t``'s dtype, refused where a value does not fit it: numpy's
    ``astype`` wraps ``2**40`` to 0 in int32 and makes ``1e300`` inf in float32."""
    with np.errstate(all="ignore"):
        b = a.astype(t.dtype)
    if a.dtype.kind == "f":
        lost = np.isinf(b) & np.isfinite(a)
    elif a.dtype.kind in "iu":
        lost = b.astype(a.dtype) != a if dt.is_int(t.dtype) else np.zeros(a.shape, bool)
    else:
        lost = np.zeros(a.shape, bool)
    if lost.any():
        raise dtype_error(f"input tensor {t.name!r} is {t.dtype}, but {what} holds "
                          f"{a[tuple(np.argwhere(lost)[0])].item()!r}, outside its range")
    return b


def as_tensor_list(tensors, what="outputs"):
    if isinstance(tensors, Tensor):
        return [tensors]
    try:
        tensors = list(tensors)
    except TypeError:
        raise PolyadError(f"{what}: expected a tensor or a list of tensors, got {tensors!r}") from None
    for t in tensors:
        if not isinstance(t, Tensor):
            raise PolyadError(f"{what}: {t!r} is not a tensor")
    return tensors


__all__ = [
    "Tensor", "Operation", "PlaceholderOp", "ComputeOp", "placeholder", "compute",
    "walk_ops", "placeholders", "check_shape", "as_tensor_list", "set_tensor_ops",
]
