"""Creation ops: tensors of one value, ``full zeros ones`` and their ``*_like`` forms.

They read no input: each is one ``compute`` of a constant, tagged
"elementwise", that the scheduler inlines into its consumers.  The default
dtype is polyad's float32 (numpy's would be float64); ``full`` without a dtype
takes the fill value's: bool, int32 (int64 when it does not fit), float32,
or a numpy scalar's own dtype.
"""

from ..errors import DtypeError
from ..te import dtype as dt
from ..te.expr import Expr
from ..te.tensor import Tensor, check_shape, compute
from ._util import check_operand, check_tensor, scalar_const

__all__ = ["full", "zeros", "ones", "full_like", "zeros_like", "ones_like"]


def _fill(name, shape, fill_value, dtype):
    shape = check_shape(shape, name)
    value = check_operand(fill_value, name)
    if isinstance(value, (Tensor, Expr)):
        raise DtypeError(f"{name}: the fill value must be a Python or numpy scalar, got {fill_value!r}")
    try:
        dtype = dt.const_dtype(value) if dtype is None else dt.canonical(dtype)
    except DtypeError as e:
        raise DtypeError(f"{name}: {e}") from None
    c = scalar_const(value, dtype, f"{name} (fill value)")
    return compute(shape, lambda *idx: c, name=name, tag="elementwise")


def full(shape, fill_value, dtype=None):
    """A tensor of ``shape`` filled with ``fill_value`` (converted to ``dtype`` as numpy's ``astype``).

    :param shape: the shape: an int or a tuple of positive ints.
    :param fill_value: the value: a Python or numpy scalar (not a tensor or an expression).
    :param dtype: the dtype; None takes the fill value's (bool, int32 or int64 when it does not fit, float32, or a
        numpy scalar's own dtype).
    :returns: a new tensor of ``shape`` and that dtype, tagged "elementwise".
    :raises ShapeError: when ``shape`` is not a tuple of positive integers.
    :raises DtypeError: when ``fill_value`` is not a Python or numpy scalar, ``dtype`` is not a dtype polyad
        supports, or the value does not fit an integer ``dtype``.
    """
    return _fill("full", shape, fill_value, dtype)


def zeros(shape, dtype="float32"):
    """A tensor of zeros.

    :param shape: the shape: an int or a tuple of positive ints.
    :param dtype: the dtype (float32 by default).
    :returns: a new tensor of ``shape`` and ``dtype``, tagged "elementwise".
    :raises ShapeError: when ``shape`` is not a tuple of positive integers.
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports.
    """
    return _fill("zeros", shape, 0, dtype)


def ones(shape, dtype="float32"):
    """A tensor of ones.

    :param shape: the shape: an int or a tuple of positive ints.
    :param dtype: the dtype (float32 by default).
    :returns: a new tensor of ``shape`` and ``dtype``, tagged "elementwise".
    :raises ShapeError: when ``shape`` is not a tuple of positive integers.
    :raises DtypeError: when ``dtype`` is not a dtype polyad supports.
    """
    return _fill("ones", shape, 1, dtype)


def _like(name, x):
    return check_tensor(x, name, "the prototype")


def full_like(x, fill_value, dtype=None):
    """A tensor of ``x``'s shape (and dtype unless given) filled with ``fill_value``.

    :param x: the prototype tensor, whose shape (and dtype) the result takes; its values are not read.
    :param fill_value: the value: a Python or numpy scalar (not a tensor or an expression).
    :param dtype: the dtype; None takes ``x``'s.
    :returns: a new tensor of ``x``'s shape, tagged "elementwise".
    :raises DtypeError: when ``x`` is not a tensor, ``fill_value`` is not a Python or numpy scalar, ``dtype`` is not
        a dtype polyad supports, or the value does not fit an integer dtype.
    """
    x = _like("full_like", x)
    return _fill("full_like", x.shape, fill_value, x.dtype if dtype is None else dtype)


def zeros_like(x, dtype=None):
    """Zeros of ``x``'s shape and dtype (unless given).

    :param x: the prototype tensor, whose shape (and dtype) the result takes; its values are not read.
    :param dtype: the dtype; None takes ``x``'s.
    :returns: a new tensor of ``x``'s shape, tagged "elementwise".
    :raises DtypeError: when ``x`` is not a tensor or ``dtype`` is not a dtype polyad supports.
    """
    x = _like("zeros_like", x)
    return _fill("zeros_like", x.shape, 0, x.dtype if dtype is None else dtype)


def ones_like(x, dtype=None):
    """Ones of ``x``'s shape and dtype (unless given).

    :param x: the prototype tensor, whose shape (and dtype) the result takes; its values are not read.
    :param dtype: the dtype; None takes ``x``'s.
    :returns: a new tensor of ``x``'s shape, tagged "elementwise".
    :raises DtypeError: when ``x`` is not a tensor or ``dtype`` is not a dtype polyad supports.
    """
    x = _like("ones_like", x)
    return _fill("ones_like", x.shape, 1, x.dtype if dtype is None else dtype)
