"""``pa.differentiate`` and ``pa.jacobian``: autodiff's reverse mode with the exact ISL simplifier.

Autodiff sits below this layer and takes its simplifier as an argument; this is where the two meet, so
neither layer installs anything into the other.
"""

from ..autodiff import reverse
from ..te.tensor import Tensor
from .bounds import check_reads
from .simplify import simplify

__all__ = ["differentiate", "jacobian"]


def differentiate(output, inputs=None, head=None, *, fdiff=None, override=None, optimize=True):
    """Reverse-mode gradients of ``output`` w.r.t. ``inputs``.

    * ``inputs=None``: every placeholder ``output`` depends on.
    * ``head=None``: the identity head; each result is the full Jacobian, of
      shape ``output.shape + input.shape``.  A head of shape
      ``prefix + output.shape`` gives results of shape ``prefix + input.shape``
      (``head`` = the adjoint of the output, e.g. dLoss/dOutput).
    * ``fdiff(out, inp, head)``: replaces the building block
      (:func:`polyad.autodiff.diff_building_block`) on every edge.
    * ``override={Y: ([X1, X2], fn)}``: ``fn(Y, [X1, X2], adjoint_of_Y)``
      returns one adjoint contribution per named input (which need not be
      immediate inputs of ``Y``); the other edges of ``Y`` are cut.

    Returns a list-like :class:`~polyad.autodiff.Gradients` with ``.adjoints`` and
    ``.adjoint_summands``.  Integer inputs, and inputs ``output`` does not
    depend on, get a zero gradient of the right shape.

    :param output: the float tensor to differentiate.
    :param inputs: a tensor or a list of tensors to differentiate with respect to; None for every placeholder
        ``output`` depends on.
    :param head: the adjoint of ``output``, a tensor of shape ``prefix + output.shape`` and ``output``'s dtype; None
        for the identity (full Jacobians).
    :param fdiff: ``fdiff(out, inp, head)`` -> the adjoint contribution of ``out`` to its immediate input ``inp``,
        used on every edge instead of the built-in building block; None for the built-in one.
    :param override: ``{Y: (inputs, fn)}``: custom gradients, ``fn(Y, inputs, adjoint_of_Y)`` -> one adjoint (or
        None) per input; None for none.
    :param optimize: simplify every adjoint: the building blocks' own simplifications, then the exact ISL
        simplifier (:func:`polyad.poly.simplify`).
    :returns: a :class:`~polyad.autodiff.Gradients`: the gradients in the order of ``inputs``, with ``.adjoints`` and
        ``.adjoint_summands``.
    :raises PolyadError: when ``output`` or an input is not a tensor, ``head`` is not a tensor, ``fdiff`` or an
        override's ``fn`` is not callable, ``override`` is malformed, or an ``fdiff``/override returns something
        other than a tensor or the wrong number of adjoints.
    :raises DtypeError: when ``output`` is not a float tensor, ``head``'s dtype differs from it, or a custom
        contribution's dtype differs from its input's.
    :raises ShapeError: when ``head``'s shape does not end with ``output.shape``, or a custom contribution does not
        have shape ``prefix + input.shape``.
    :raises NotDifferentiableError: when a tensor on a path from an input to ``output`` is defined by an operation
        or an operator with no derivative rule (give it an ``override``).
    :raises OutOfBoundsError: when a stage of ``output``'s graph surely reads outside a tensor
        (:func:`polyad.poly.bounds.check_reads`).
    """
    if isinstance(output, Tensor):  # else reverse.differentiate says what is wrong with it
        check_reads([output])
    return reverse.differentiate(output, inputs, head, fdiff=fdiff, override=override, optimize=optimize,
                                 simplifier=simplify)


def jacobian(output, input, optimize=True):  # noqa: A002 - TVM's name
    """The Jacobian of ``output`` w.r.t. its immediate input ``input``: shape output.shape + input.shape.

    :param output: the float tensor, a compute.
    :param input: a tensor ``output``'s compute reads directly.
    :param optimize: simplify the result (as ``pa.differentiate``'s ``optimize``).
    :returns: a new tensor of shape ``output.shape + input.shape`` (zero when ``input`` is not a float tensor).
    :raises PolyadError: when ``output`` or ``input`` is not a tensor, or ``input`` is not an immediate input of
        ``output``'s compute (use ``pa.differentiate`` for indirect dependencies).
    :raises DtypeError: when ``output`` is not a float tensor.
    :raises NotDifferentiableError: when ``output``'s body uses an operator with no derivative rule.
    """
    return reverse.jacobian(output, input, optimize=optimize, simplifier=simplify)
