"""The two-sided exact binomial test's p-value: scipy's ``binomtest`` in three calls.

``scipy.stats.binomtest(k, n, p).pvalue`` (alternative "two-sided") sums the probabilities of
the counts no more likely than k (within a relative 1e-7): it takes d = P(X = k), finds by a
binary search on the other side of the mode the last count whose probability is at most
d·(1 + 1e-7), and adds the two tails, ``binom.cdf`` and ``binom.sf``. Each probability the
search reads is one call of ``binom.pmf`` (about log2(n) of them), and every call of a scipy
distribution method costs about 0.1 ms of argument handling whatever it computes: the test
takes about 1 ms at n = 10^4, where its arithmetic is a few µs.

:func:`binomtest_pvalue` runs the same binary search over the same probabilities, with all of
them from one vectorised ``binom.pmf`` call made beforehand. Which counts the search will read
is found by running it first on a stand-in, log P(X = x) from ``math.lgamma`` (accurate to far
better than the 1e-7 that decides the comparisons, except within that of a tie): the counts it
visits, a few around the count it ends on, and k. Only the stand-in is approximate, and it
only chooses what to fetch: the search itself compares scipy's probabilities, and a count it
reads that was not fetched (after a near-tie, or in a run of probabilities that underflow to
0) is fetched then, with the next levels of the search below it. So the counts found, the two
tails and the p-value are ``binomtest``'s exactly (the tests compare them for equality), from
three calls of scipy's distribution methods instead of about log2(n) + 3.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["binom_ppf", "binomtest_pvalue"]

# scipy's binomial distribution computes each public method (pmf, cdf, sf, ppf) by checking and
# broadcasting the arguments, choosing the entries inside the support and calling the
# distribution's own routine (``_pmf``, ``_cdf``, ``_sf``, ``_ppf``: Boost's binomial) on them:
# about 0.1-0.2 ms a call, where the routine takes a few µs. For arguments inside the support,
# which the functions below check, the routine's value is the public method's (the tests compare
# them for equality); a scipy without the routines takes the public methods. scipy.stats is
# imported at the first call (importing uqcore does not load it).
#: Whether the routines are taken where scipy has them (the tests turn it off to compare).
_FAST = True


@functools.cache
def _stats() -> Any:
    """``scipy.stats``, imported at the first call."""
    import scipy.stats

    return scipy.stats


@functools.cache
def _scipy_routines() -> tuple[Any, ...] | None:
    got = tuple(getattr(_stats().binom, f"_{m}", None) for m in ("pmf", "cdf", "sf", "ppf"))
    return got if all(callable(f) for f in got) else None


def _routines() -> tuple[Any, ...] | None:
    """binom's routines (pmf, cdf, sf, ppf), or None: take the public methods."""
    return _scipy_routines() if _FAST else None


def _pmf(x: np.ndarray[Any, Any], n: int, p: float) -> np.ndarray[Any, Any]:
    """``binom.pmf(x, n, p)`` for integer counts 0 <= x <= n (float64), n >= 1, 0 < p < 1."""
    fast = _routines()
    got = fast[0](x, n, p) if fast else _stats().binom.pmf(x, n, p)
    return np.atleast_1d(np.asarray(got, dtype=np.float64))


def _tail(k: int, n: int, p: float, *, upper: bool) -> float:
    """``binom.cdf(k, n, p)``, or ``binom.sf(k, n, p)`` where ``upper`` (an integer k, n >= 1,
    0 < p < 1)."""
    if k < 0:
        return 1.0 if upper else 0.0
    if k >= n:
        return 0.0 if upper else 1.0
    fast = _routines()
    if fast:
        return float(fast[2 if upper else 1](k, n, p))
    binom = _stats().binom
    return float((binom.sf if upper else binom.cdf)(k, n, p))


def binom_ppf(q: float, n: int, p: float) -> float:
    """``scipy.stats.binom.ppf(q, n, p)``, the same value, without the argument handling of
    scipy's method (see above): for 0 < q < 1, an integer n >= 1 and 0 <= p <= 1; other
    arguments go to ``binom.ppf`` itself.

    >>> import scipy.stats
    >>> binom_ppf(0.025, 10_000, 0.1) == float(scipy.stats.binom.ppf(0.025, 10_000, 0.1))
    True
    """
    ok = 0.0 < q < 1.0 and 0.0 <= p <= 1.0 and n >= 1 and int(n) == n
    fast = _routines()
    if fast and ok:
        return float(fast[3](q, n, p))
    return float(_stats().binom.ppf(q, n, p))


#: scipy's tolerance: counts whose probability is at most d·(1 + 1e-7) are "no more likely".
_RERR = 1.0 + 1e-7

#: Counts fetched on either side of the count the stand-in search ends on.
_AROUND = 3

#: Levels of the search below a count that was not fetched, fetched with it.
_LEVELS = 8


def _search(a: Callable[[int, int, int], float], d: float, lo: int, hi: int) -> int:
    """scipy's ``_binary_search_for_binom_tst``: the index i in [lo, hi] with
    a(i) <= d < a(i + 1) for ascending a, by the same steps (``a(x, lo, hi)`` is also given
    the span still searched)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        midval = a(mid, lo, hi)
        if midval < d:
            lo = mid + 1
        elif midval > d:
            hi = mid - 1
        else:
            return mid
    return lo if a(lo, lo, lo) <= d else lo - 1


class _Probabilities:
    """P(X = x) of Binomial(n, p) from ``binom.pmf``: the counts given first in one call, any
    other count when it is read (with the next search levels below it)."""

    def __init__(self, n: int, p: float, first: Iterable[int]) -> None:
        self.n, self.p = n, p
        self.known: dict[int, float] = {}
        self._fetch(first)

    def _fetch(self, xs: Iterable[int]) -> None:
        todo = sorted({x for x in xs if 0 <= x <= self.n and x not in self.known})
        if todo:
            got = _pmf(np.asarray(todo, dtype=np.float64), self.n, self.p)
            self.known.update(zip(todo, (float(v) for v in got), strict=True))

    def at(self, x: int, lo: int, hi: int) -> float:
        """P(X = x), read by the search while it searches [lo, hi]."""
        if x not in self.known:
            todo, spans = [x, lo], [(lo, hi)]
            for _ in range(_LEVELS):
                nxt = []
                for a, b in spans:
                    mid = a + (b - a) // 2
                    todo += [mid, a]
                    if a < b:
                        nxt += [(mid + 1, b), (a, mid - 1)]
                spans = nxt
            self._fetch(todo)
        return self.known[x]


def binomtest_pvalue(k: int, n: int, p: float) -> float:
    """``scipy.stats.binomtest(k, n, p).pvalue`` (two-sided), the same value, from fewer calls
    of scipy's distribution methods (see the module docstring).

    Integers 0 <= k <= n, n >= 1 and 0 < p < 1; other arguments are passed to ``binomtest``
    itself, which answers (p = 0 or 1) or refuses them.

    >>> import scipy.stats
    >>> bool(binomtest_pvalue(880, 1000, 0.9) == scipy.stats.binomtest(880, 1000, 0.9).pvalue)
    True
    """
    if not (0 <= k <= n and 0.0 < p < 1.0):
        return float(_stats().binomtest(k, n, p).pvalue)
    if k == p * n:
        return 1.0
    below = k < p * n
    # the search's function and span, as scipy's (ascending: −pmf beyond the mode, pmf before)
    sign, lo, hi = (-1.0, math.ceil(p * n), n) if below else (1.0, 0, math.floor(p * n))
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1.0)

    def log_pmf(x: int) -> float:
        return log_n - math.lgamma(x + 1.0) - math.lgamma(n - x + 1.0) + x * log_p + (n - x) * log_q

    visited: list[int] = []

    def stand_in(x: int, a: int, b: int) -> float:
        visited.append(x)
        return sign * log_pmf(x)

    guess = _search(stand_in, sign * (log_pmf(k) + math.log(_RERR)), lo, hi)
    near = range(guess - _AROUND, guess + _AROUND + 1)
    probs = _Probabilities(n, p, [k, lo - 1, *visited, *near])
    d = probs.known[k]
    ix = _search(lambda x, a, b: sign * probs.at(x, a, b), sign * d * _RERR, lo, hi)
    if below:
        y = n - ix + int(d * _RERR == probs.at(ix, ix, ix))
        pval = _tail(k, n, p, upper=False) + _tail(n - y, n, p, upper=True)
    else:
        pval = _tail(ix, n, p, upper=False) + _tail(k - 1, n, p, upper=True)
    return float(min(1.0, pval))
