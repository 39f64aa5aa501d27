"""``erf`` of float32 as codegen prints it: a polynomial, not the OpenCL library's.

PoCL's ``erf`` took 2.5 ms for 1.6 million float32s in 16 lanes on the Zen 5 VM (a GELU forward 18x torch's); this
one 0.86 ms, near what the copy of the data costs there::

    |x| < 1:        erf(x) = x * P(x^2)
    1 <= |x| < 4:   erf(x) = sign(x) * (1 - exp(-x^2) * Q(1/|x|))
    |x| >= 4:       erf(x) = sign(x)                       (erf(4) = 1 - 1.5e-8: 1 in float32)

``P`` (degree 6) and ``Q`` (degree 10) are least-squares fits, in relative error, of ``erf(x)/x`` and
``erfc(x) * exp(x^2)`` on 4000 Chebyshev nodes of each interval (:func:`fit`), rounded to float32.  Evaluated in
float32 (Horner's rule with ``mad``) they are within 2.5 ulp of erf, max relative error 1.8e-7 over [-5, 5]
(OpenCL allows its ``erf`` 16 ulp).  NaN, +-inf and -0.0 come out as erf's: NaN, +-1, -0.0.  float64 keeps the
library's ``erf``.
"""

#: erf(x) / x = P(x^2) on [0, 1), lowest degree first
P = (1.1283791065216064, -0.3761262595653534, 0.1128358244895935, -0.026853691786527634, 0.005188099108636379,
     -0.0008008189033716917, 7.847259257687256e-05)

#: erfc(x) * exp(x^2) = Q(1/x) on [1, 4), lowest degree first
Q = (2.596134800114669e-05, 0.5637192130088806, 0.0030154581181705, -0.2851863205432892, -0.06926850974559784,
     0.8994859457015991, -1.524053931236267, 1.4240049123764038, -0.8106041550636292, 0.26466262340545654,
     -0.03821760416030884)


def fit(nodes=4000):
    """``(P, Q)`` as this module's constants were made: float64 least squares in relative error (numpy)."""
    import math

    import numpy as np

    def rel_fit(f, xs, z, degree):
        y = np.array([f(x) for x in xs])
        basis = np.stack([z ** k for k in range(degree + 1)], 1) / np.abs(y)[:, None]
        return np.linalg.lstsq(basis, y / np.abs(y), rcond=None)[0]

    cheb = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    small = np.sqrt(0.5 * cheb + 0.5) + 1e-12
    large = 2.5 + 1.5 * cheb
    return (rel_fit(lambda x: math.erf(x) / x, small, small * small, len(P) - 1),
            rel_fit(lambda x: math.erfc(x) * math.exp(x * x), large, 1.0 / large, len(Q) - 1))


def _horner(coefficients, z):
    text = f"{coefficients[-1]!r}f"
    for c in reversed(coefficients[:-1]):
        text = f"mad({text}, {z}, {c!r}f)"
    return text


def helper_source(name, width):
    """The C function ``name`` (``pa_erf_f32`` or ``pa_erf_f32xW``) computing erf of a float or a ``floatW``."""
    v = f"float{width}" if width else "float"
    one = f"({v})(1.0f)" if width else "1.0f"
    # a vector's select takes the lanes where its mask is set; a scalar's ?: reads like it
    pick = (lambda c, a, b: f"select({b}, {a}, {c})") if width else (lambda c, a, b: f"({c}) ? {a} : {b}")
    tail = f"{one} - exp(-(ax * ax)) * {_horner(Q, 's')}"
    return (f"static inline {v} {name}({v} x) {{\n"
            f"  const {v} ax = fabs(x);\n"
            f"  const {v} s = {one} / fmax(ax, {one});\n"
            f"  const {v} small = x * {_horner(P, '(x * x)')};\n"
            f"  const {v} large = copysign({pick('ax >= 4.0f', one, tail)}, x);\n"
            f"  return {pick('ax < 1.0f', 'small', 'large')};\n}}")


__all__ = ["P", "Q", "fit", "helper_source"]
