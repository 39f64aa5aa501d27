"""``erf`` of float32 as codegen prints it: polynomials, not the OpenCL library's.

PoCL's ``erf`` took 2.5 ms for 1.6 million float32s in 16 lanes on the Zen 5 VM (a GELU forward 18x torch's)::

    |x| < 1:        erf(x) = x * P(x^2)
    1 <= |x| < 4:   erf(x) = sign(x) * (1 - exp(R(|x|)))     (R(x) = log erfc(x))
    |x| >= 4:       erf(x) = sign(x)                          (erf(4) = 1 - 1.5e-8: 1 in float32)

``P`` (degree 6) is a least-squares fit, in relative error, of ``erf(x)/x``; ``R`` (degree 7) one of
``log erfc(x)`` weighted by ``erfc(x)``, the error it makes in ``erf``; each on 4000 Chebyshev nodes of its
interval (:func:`fit`), rounded to float32.  Evaluated in float32 they are within 2.5 ulp of erf over [-5, 5]
(OpenCL allows its ``erf`` 16 ulp).  The form before it, ``erfc(x) * exp(x^2) = Q(1/x)`` with ``mad``, compiled
to 1.28x these instructions (408 against 318 in PoCL's object code for float16): a division a lane, and ``mad``
as a multiply and an add.  Horner's rule is printed as ``a * z + c``, which PoCL contracts to FMAs.  NaN, +-inf
and -0.0 come out as erf's: NaN, +-1, -0.0.  float64 keeps the library's ``erf``.
"""

#: erf(x) / x = P(x^2) on [0, 1), lowest degree first
P = (1.1283791065216064, -0.3761262595653534, 0.1128358244895935, -0.026853691786527634, 0.005188099108636379,
     -0.0008008189033716917, 7.847259257687256e-05)

#: log erfc(x) = R(x) on [1, 4), lowest degree first
R = (0.00019147849525325, -1.1295939683914185, -0.6331905722618103, -0.10844884812831879, 0.02522662840783596,
     -0.004211114253848791, 0.0004426076775416732, -2.1790321625303477e-05)


def fit(nodes=4000):
    """``(P, R)`` as this module's constants were made: float64 weighted least squares (numpy)."""
    import math

    import numpy as np

    def lsq(y, z, degree, weight):
        basis = np.stack([z ** k for k in range(degree + 1)], 1) * weight[:, None]
        return np.linalg.lstsq(basis, y * weight, rcond=None)[0]

    cheb = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    small = np.sqrt(0.5 * cheb + 0.5) + 1e-12
    large = 2.5 + 1.5 * cheb
    ratio = np.array([math.erf(x) / x for x in small])
    tail = np.array([math.erfc(x) for x in large])
    return (lsq(ratio, small * small, len(P) - 1, 1.0 / ratio),  # relative error of erf
            lsq(np.log(tail), large, len(R) - 1, tail))  # an error d in R is erfc(x) * d in erf


def _horner(coefficients, z):
    text = f"{coefficients[-1]!r}f"
    for c in reversed(coefficients[:-1]):
        text = f"({text} * {z} + {c!r}f)"  # contracted to an FMA
    return text


def helper_source(name, width):
    """The C function ``name`` (``pa_erf_f32`` or ``pa_erf_f32xW``) computing erf of a float or a ``floatW``."""
    v = f"float{width}" if width else "float"
    one = f"({v})(1.0f)" if width else "1.0f"
    # a vector's select takes the lanes where its mask is set; a scalar's ?: reads like it
    pick = (lambda c, a, b: f"select({b}, {a}, {c})") if width else (lambda c, a, b: f"({c}) ? {a} : {b}")
    tail = f"{one} - exp({_horner(R, 'ax')})"
    return (f"static inline {v} {name}({v} x) {{\n"
            f"  const {v} ax = fabs(x);\n"
            f"  const {v} x2 = x * x;\n"
            f"  const {v} small = x * {_horner(P, 'x2')};\n"
            f"  const {v} large = copysign({pick('ax >= 4.0f', one, tail)}, x);\n"
            f"  return {pick('ax < 1.0f', 'small', 'large')};\n}}")


__all__ = ["P", "R", "fit", "helper_source"]
