"""Exact rescaling by powers of two, which keeps squares and products inside float64's range.

float64 holds magnitudes from about 2.2e-308 (4.9e-324 with subnormals) to 1.8e308, so the
square of a value above about 1.3e154 overflows, and the square of one below about 1.5e-154
loses digits in the subnormal range or becomes 0. Multiplying by a power of two changes only
the exponent of a float: x·2^−e is exact (unless it leaves the normal range), and a metric
computed on rescaled values and scaled back is the same number up to the rounding of the
computation itself. Every metric is scale-equivariant, scale-invariant or, for log scores,
shifts by log c when the data are multiplied by c, so this loses nothing.

The rescaling is by one power of two per array (from its largest magnitude): it is needed only
where squares or products can leave the range, which the callers detect from the largest
magnitude or from the sums themselves, so data of ordinary magnitudes pay nothing. Values in
one array that differ by more than about 2^500 keep float64's own limits.
"""

from __future__ import annotations

import math

from uqcore._backend import Array, Namespace

__all__ = [
    "SAFE_EXPONENT",
    "TINY_SQUARES",
    "exponent",
    "format_scaled",
    "in_safe_range",
    "max_abs",
    "rescaled",
    "squares_in_range",
    "std",
]

#: Largest magnitudes within [2^−SAFE_EXPONENT, 2^SAFE_EXPONENT] are used as they are: their
#: squares and triple products (times up to 2^53 rows) stay well inside the normal range.
SAFE_EXPONENT = 250

#: A sum of squares at least this large (and finite) lost nothing to underflow: a term below
#: the normal range (2^−1022) is then smaller than 2^−400 of the sum.
TINY_SQUARES = 2.0**-600


def max_abs(xp: Namespace, x: Array) -> float:
    """max |x_i| in two reductions and no temporary (0.0 for an empty array)."""
    if int(x.shape[0]) == 0:
        return 0.0
    return max(float(xp.max(x)), -float(xp.min(x)), 0.0)


def exponent(*magnitudes: float) -> int:
    """The power of two to divide by: 0 when the largest of ``magnitudes`` (each >= 0) lies
    within [2^−SAFE_EXPONENT, 2^SAFE_EXPONENT] or is 0, else its binary exponent e
    (2^(e−1) <= largest < 2^e, :func:`math.frexp`), so that values divided by 2^e have
    magnitudes below 1 and the largest at least 1/2.

    >>> exponent(3.0), exponent(0.0), exponent(1e300), exponent(1e-300, 2e-300)
    (0, 0, 997, -995)
    """
    top = max(magnitudes, default=0.0)
    if top == 0.0 or 2.0**-SAFE_EXPONENT <= top <= 2.0**SAFE_EXPONENT:
        return 0
    return math.frexp(top)[1]


def in_safe_range(*magnitudes: float) -> bool:
    """Whether every one of ``magnitudes`` (each >= 0) lies within
    [2^−SAFE_EXPONENT, 2^SAFE_EXPONENT] or is 0: squares and products of values between the
    smallest and the largest of them stay inside float64's normal range.

    >>> in_safe_range(0.0, 1e-3, 1e70), in_safe_range(1.0, 1e-160)
    (True, False)
    """
    lo, hi = 2.0**-SAFE_EXPONENT, 2.0**SAFE_EXPONENT
    return all(m == 0.0 or lo <= m <= hi for m in magnitudes)


def rescaled(x: Array, e: int) -> Array:
    """x·2^−e, a new array (``x`` itself when e = 0). Exact: the factor is a power of two, split
    in two factors where 2^−e alone would leave the normal range (|e| > 1000)."""
    if e == 0:
        return x
    if abs(e) <= 1000:
        return x * math.ldexp(1.0, -e)
    half = -e // 2
    return (x * math.ldexp(1.0, half)) * math.ldexp(1.0, -e - half)


def std(x: Array, ddof: int = 0) -> float:
    """``numpy.std(x, ddof=ddof)`` of a finite 1-D numpy array for values of any magnitude:
    of x/2^e (exactly), times 2^e, where the squares would leave float64's range.

    >>> import numpy as np
    >>> std(np.array([1e200, -1e200])) == 1e200, std(np.array([1.0, 3.0]), ddof=1) == 2**0.5
    (True, True)
    """
    import numpy as np

    e = exponent(max_abs(np, x))
    return math.ldexp(float(np.std(rescaled(x, e), ddof=ddof)), e)


def squares_in_range(*sums: float) -> bool:
    """Whether sums of squares (or of weighted squares) were computed without overflow or
    underflow: each is finite and at least :data:`TINY_SQUARES`. A sum that fails may be 0 or
    tiny legitimately; callers then rescale and compute again, which costs one more pass."""
    return all(math.isfinite(s) and s >= TINY_SQUARES for s in sums)


def format_scaled(mantissa: float, e2: int) -> str:
    """``mantissa``·2^e2 in decimal scientific notation (for values outside float64's range).

    >>> format_scaled(1.5, 1100)
    '2.04e+331'
    """
    if mantissa == 0.0:
        return "0"
    log10 = math.log10(abs(mantissa)) + e2 * math.log10(2.0)
    power = math.floor(log10)
    digits = 10.0 ** (log10 - power)
    sign = "-" if mantissa < 0 else ""
    return f"{sign}{digits:.3g}e{power:+d}"
