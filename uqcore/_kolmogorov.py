"""The two-sided Kolmogorov-Smirnov p-value for n observations, at a cost independent of n.

scipy's ``kstwo.sf`` (Simard & L'Ecuyer 2011) takes, for n·D² >= 2.2 and n > 140, twice the
one-sided Smirnov tail P(D⁺_n >= D), an exact sum of about n(1 − D) terms in double-double
arithmetic: about 1 µs a term, 0.1 s at n = 10^5, where everything else the p-value needs is a
few hundred µs. :func:`ks_sf` follows the same algorithm and replaces only that sum (for
n > :data:`EXACT_MAX_N`) by a quadrature of its terms, which costs the same for every n.

The sum. With b_j = D + j/n, Smirnov's formula (Birnbaum & Tingey 1951) is

    P(D⁺_n >= D) = Σ_{j=0}^{⌊n(1−D)⌋} D/b_j · binom(j; n, b_j),

binom(k; n, p) = C(n, k) p^k (1 − p)^(n−k) the binomial probability. For non-integer k that
probability (Loader's saddle-point form, ``stirlerr`` and ``bd0``, as R's ``dbinom_raw``)
continues the terms to a smooth, positive function g(s) on [0, n(1 − D)], and the sum equals
the integral of g up to the Euler-Maclaurin / Poisson-summation terms of the two ends, where
g is of the order of (1 − D)^n against a total near exp(−2nD²): relatively below 10^−60 for
n > :data:`EXACT_MAX_N`, D <= :data:`QUADRATURE_MAX_D`. The integral is a Gauss-Legendre rule
of :data:`_NODES` nodes on each of :data:`_PANELS` equal panels (a fixed 256 evaluations); g
is computed in the log domain relative to its largest node value, so tails down to the
smallest normal float keep their relative accuracy.

Error bound. Against scipy's value the relative difference is below 1e-11 (measured over
n = 10^3 ... 10^6 and n·D² = 2.2 ... 370, the whole range where the quadrature is used; the
test suite checks 1e-11 on a grid with n up to 10^5); Loader's form keeps each term's relative
error near 10^−14 whatever n, so the bound does not grow with n. Where the quadrature is not
used the value is scipy's routine's: bit for bit, but for Pelz and Good's series of the bulk
(n > 140, n·D² < 2.2), which :func:`pelz_good_cdf` evaluates term for term as scipy does in
scalar floats instead of small numpy arrays (0.08 → 0.01 ms; within 1e-13 relative, a few
ulps, in the tests). (scipy's own value takes the two-sided tail as twice the
one-sided one — Miller's approximation, relatively off by at most ~2·10^−6 at n·D² = 2.2 and
exp(−6nD²)-fast less beyond; :func:`ks_sf` inherits it.)
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import scipy.special as sps

__all__ = ["EXACT_MAX_N", "QUADRATURE_MAX_D", "ks_sf", "pelz_good_cdf", "smirnov_sf"]

#: Up to this n scipy's exact sum is used as it is (at most ~1 ms).
EXACT_MAX_N = 1000
#: The quadrature is used for D up to this (larger D at n > EXACT_MAX_N gives p = 0 anyway
#: from n·D² >= 370, except for n < 1480).
QUADRATURE_MAX_D = 0.45
#: scipy's branch points (scipy.stats._ksstats._kolmogn): below MILLER_MIN_NX2 the two-sided
#: tail is 1 − CDF (Durbin's matrix or Pelz-Good: bounded cost), from ZERO_NX2 it is 0.
MILLER_MIN_NX2 = 2.2
ZERO_NX2 = 370.0

_NODES = 32
_PANELS = 8
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_NODES)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_STIRLING = (1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188)


def _stirlerr(z: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """log Γ(z + 1) − (z + 1/2) log z + z − log(2π)/2 (Stirling's error), z > 0."""
    out = np.empty_like(z)
    big = z > 15.0
    zb = z[big]
    z2 = zb * zb
    s0, s1, s2, s3, s4 = _STIRLING
    out[big] = (s0 - (s1 - (s2 - (s3 - s4 / z2) / z2) / z2) / z2) / zb
    zs = z[~big]
    out[~big] = sps.gammaln(zs + 1.0) - (zs + 0.5) * np.log(zs) + zs - _HALF_LOG_2PI
    return out


def _bd0(x: np.ndarray[Any, Any], m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """x log(x/m) + m − x, without cancellation near x = m (Loader 2000)."""
    d = x - m
    near = np.abs(d) < 0.1 * (x + m)
    out: np.ndarray[Any, Any] = x * np.log(x / m) + m - x
    if np.any(near):
        xn, dn = x[near], d[near]
        v = dn / (x[near] + m[near])
        s = dn * v
        ej = 2.0 * xn * v
        v2 = v * v
        for k in range(1, 10):  # |v| < 0.1: the 9th term is below 10^-18 of the first
            ej = ej * v2
            s = s + ej / (2 * k + 1)
        out[near] = s
    return out


def _log_terms(s: np.ndarray[Any, Any], n: int, d: float) -> np.ndarray[Any, Any]:
    """log of D/b · binom(s; n, b), b = D + s/n, for 0 < s < n(1 − D)."""
    p = d + s / n
    q = 1.0 - p
    rest = n - s
    log_binom = (
        _stirlerr(np.asarray(float(n)))
        - _stirlerr(s)
        - _stirlerr(rest)
        - _bd0(s, n * p)
        - _bd0(rest, n * q)
        + 0.5 * np.log(n / (2.0 * math.pi * s * rest))
    )
    out: np.ndarray[Any, Any] = log_binom + math.log(d) - np.log(p)
    return out


def smirnov_sf(n: int, d: float) -> float:
    """P(D⁺_n >= d), the one-sided Smirnov tail, by quadrature (see the module docstring);
    for n > :data:`EXACT_MAX_N` and 0 < d <= :data:`QUADRATURE_MAX_D`."""
    top = n * (1.0 - d)
    edges = np.linspace(0.0, top, _PANELS + 1)
    half = 0.5 * (edges[1:] - edges[:-1])[:, None]
    s = (0.5 * (edges[1:] + edges[:-1]))[:, None] + half * _GL_X[None, :]
    lg = _log_terms(s.ravel(), n, d)
    peak = float(np.max(lg))
    total = float(np.sum((half * _GL_W[None, :]).ravel() * np.exp(lg - peak)))
    return math.exp(peak) * total


@functools.cache
def _scipy_kolmogn() -> Any:
    """The scalar routine behind ``kstwo.sf`` (``scipy.stats._ksstats._kolmogn``), or None
    where scipy has moved it: the same value without the distribution machinery's argument
    handling (~0.2 ms a call, most of the p-value's cost at n <= 10^5). Imported at the first
    call: importing uqcore does not load scipy.stats."""
    try:
        from scipy.stats._ksstats import _kolmogn
    except ImportError:  # pragma: no cover - a scipy that moved it
        return None
    return _kolmogn


def _scipy_sf(d: float, n: int) -> float:
    """``scipy.stats.kstwo.sf(d, n)`` for one finite d and n >= 1 (for n > 140 and
    n·d² < 2.2, outside Durbin's matrix's range, by :func:`pelz_good_cdf`)."""
    _kolmogn = _scipy_kolmogn()
    if _kolmogn is None or not math.isfinite(d):
        import scipy.stats

        return float(scipy.stats.kstwo.sf(d, n))
    if n > _PELZ_GOOD_MIN_N and 1.0 < n * d < n - 1 and d < 0.5:
        nx2 = n * d * d
        if nx2 < MILLER_MIN_NX2 and not (n <= _DURBIN_MAX_N and n * d**1.5 <= _DURBIN_MAX_NX15):
            return min(max(1.0 - pelz_good_cdf(n, d), 0.0), 1.0)
    return float(_kolmogn(n, d, cdf=False))


#: scipy's ``_kolmogn`` takes Pelz and Good's series for the CDF from n > 140 where
#: n·d² < 18, except (up to 10^5 observations) where n·d^1.5 <= 1.4 (Durbin's matrix).
_PELZ_GOOD_MIN_N = 140
_DURBIN_MAX_N = 100_000
_DURBIN_MAX_NX15 = 1.4
_PI2 = math.pi**2
_PI4 = _PI2 * _PI2
_PI6 = _PI4 * _PI2
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT3 = math.sqrt(3.0)


def pelz_good_cdf(n: int, x: float) -> float:
    """P(D_n <= x) by Pelz and Good's (1976) series, as scipy computes it
    (``scipy.stats._ksstats._kolmogn_PelzGood``): the Li-Chien/Korolyuk expansion
    K0(z) + K1(z)/√n + K2(z)/n + K3(z)/n^1.5, z = x√n, each K_j summed in its small-z form
    (Jacobi theta functions) by the same Horner scheme over the same terms, in the same
    order, with scalar floats instead of numpy's four-element arrays (scipy's call costs about
    0.1 ms of numpy overhead for a few dozen flops). Agrees with scipy's value to a few ulps
    (the tests check 1e-13 relative on the SF where :func:`_scipy_sf` uses it); 0 < x < 1.

    >>> import scipy.stats._ksstats as k
    >>> bool(abs(pelz_good_cdf(10_000, 0.008) - k._kolmogn_PelzGood(10_000, 0.008)) < 1e-15)
    True
    """
    z = math.sqrt(n) * x
    z2, z3, z4, z6 = z**2, z**3, z**4, z**6
    qlog = -_PI2 / 8 / z2
    if qlog < -708:  # scipy's _MIN_LOG: the series is 0 to double precision
        return 0.0
    q = math.exp(qlog)
    k1a, k1b = -z2, _PI2 / 4
    k2a = 6 * z6 + 2 * z4
    k2b = (2 * z4 - 5 * z2) * _PI2 / 4
    k2c = _PI4 * (1 - 2 * z2) / 16
    k3d = _PI6 * (5 - 30 * z2) / 64
    k3c = _PI4 * (-60 * z2 + 212 * z4) / 16
    k3b = _PI2 * (135 * z4 - 96 * z6) / 4
    k3a = -30 * z6 - 90 * z**8
    s0 = s1 = s2 = s3 = 0.0
    maxk = math.ceil(16 * z / math.pi)
    for k in range(maxk, 0, -1):  # Horner in q^8k over the odd m = 2k - 1
        m = 2 * k - 1
        m2, m4, m6 = m**2, m**4, m**6
        qp = math.pow(q, 8 * k)
        s0 = s0 * qp + 1.0
        s1 = s1 * qp + (k1a + k1b * m2)
        s2 = s2 * qp + (k2a + k2b * m2 + k2c * m4)
        s3 = s3 * qp + (k3a + k3b * m2 + k3c * m4 + k3d * m6)
    s0, s1, s2, s3 = (v * q * _SQRT_2PI for v in (s0, s1, s2, s3))
    s0, s1, s2, s3 = s0 / z, s1 / (6 * z4), s2 / (72 * z**7), s3 / (6480 * z**10)
    # the sums over all integers k (no cancellation to fear: summed directly, k descending)
    q = math.exp(-_PI2 / 2 / z2)
    sqrt3z = _SQRT3 * z
    k2extra = k3extra = 0.0
    for k in range(maxk, 0, -1):
        k2 = k * k
        qk = q ** float(k2)
        kpi = math.pi * k
        k2extra += k2 * qk
        k3extra += (sqrt3z + kpi) * (sqrt3z - kpi) * k2 * qk
    s2 += k2extra * (_PI2 * _SQRT_2PI / (-36 * z3))
    s3 += k3extra * (_PI2 * _SQRT_2PI / (216 * z6))
    n1 = n * 1.0
    s1 /= math.pow(n1, 0.5)
    s2 /= math.pow(n1, 1.0)
    s3 /= math.pow(n1, 1.5)
    return s0 + s1 + s2 + s3


def ks_sf(d: float, n: int) -> float:
    """Two-sided Kolmogorov-Smirnov p-value P(D_n >= d) for n observations: the value of
    ``scipy.stats.kstwo.sf(d, n)`` within a relative 1e-11, at a cost bounded independently of
    n (see the module docstring for the method and the bound).

    >>> import scipy.stats
    >>> round(ks_sf(0.02, 10_000), 10) == round(float(scipy.stats.kstwo.sf(0.02, 10_000)), 10)
    True
    """
    if n <= EXACT_MAX_N or not 0.0 < d <= QUADRATURE_MAX_D:
        return _scipy_sf(d, n)
    nx2 = n * d * d
    if nx2 < MILLER_MIN_NX2:
        return _scipy_sf(d, n)
    if nx2 >= ZERO_NX2:
        return 0.0
    return min(1.0, 2.0 * smirnov_sf(n, d))
