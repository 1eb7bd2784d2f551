"""The exact binomial test's p-value (uqcore._binomial) against scipy's ``binomtest``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import uqcore._binomial as binomial
from uqcore._binomial import binomtest_pvalue


def _cases() -> list[tuple[int, int, float]]:
    rng = np.random.default_rng(20261201)
    cases = [
        (k, n, p) for n in (1, 2, 7, 20, 33) for p in (0.25, 0.5, 0.6, 0.9) for k in range(n + 1)
    ]
    for n in (100, 1000, 10**4, 10**5, 10**6, 10**8):
        for p in (1e-6, 0.01, 0.1, 1 / 3, 0.5, 0.9, 0.95, 1 - 1e-6):
            mu, sd = p * n, (n * p * (1 - p)) ** 0.5
            ks = {0, n, n // 2, int(mu), int(mu) + 1, max(int(mu) - 1, 0)}
            ks |= {
                int(min(max(mu + t * sd, 0), n))
                for t in (-40, -10, -3, -1, -0.1, 0.1, 1, 3, 10, 40)
            }
            ks |= {int(x) for x in rng.integers(0, n + 1, size=3)}
            cases += [(k, n, p) for k in sorted(ks)]
    return cases


CASES = _cases()


def test_the_p_value_is_scipys_exactly() -> None:
    # every branch of binomtest: k below and above the mode, k = pn, the far tails whose
    # probabilities underflow to 0 (runs of equal values in the search), tiny and huge n
    differ = [
        (k, n, p, binomtest_pvalue(k, n, p), stats.binomtest(k, n, p).pvalue)
        for k, n, p in CASES
        if binomtest_pvalue(k, n, p) != stats.binomtest(k, n, p).pvalue
    ]
    assert len(CASES) > 1000
    assert differ == []


@pytest.mark.parametrize(("k", "n", "p"), [(0, 5, 0.0), (5, 5, 1.0), (3, 5, 0.0), (2, 5, 1.0)])
def test_degenerate_levels_are_scipys(k: int, n: int, p: float) -> None:
    assert binomtest_pvalue(k, n, p) == stats.binomtest(k, n, p).pvalue


@pytest.mark.parametrize(("k", "n", "p"), [(6, 5, 0.5), (-1, 5, 0.5), (2, 5, 1.5), (1, 0, 0.5)])
def test_invalid_arguments_are_refused_as_scipy_refuses_them(k: int, n: int, p: float) -> None:
    with pytest.raises(ValueError, match=r"must|greater|range") as theirs:
        stats.binomtest(k, n, p)
    with pytest.raises(ValueError, match=r"must|greater|range") as ours:
        binomtest_pvalue(k, n, p)
    assert str(ours.value) == str(theirs.value)


@pytest.fixture
def pmf_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the probability fetches (scipy's ``binom.pmf`` values) made from now on."""
    calls: list[int] = []
    pmf = binomial._pmf

    def counted(x: np.ndarray, n: int, p: float) -> np.ndarray:
        calls.append(int(np.size(x)))
        return pmf(x, n, p)

    monkeypatch.setattr(binomial, "_pmf", counted)
    return calls


def test_one_call_of_the_pmf_where_the_stand_in_search_is_right(pmf_calls: list[int]) -> None:
    calls = pmf_calls
    for k, n, p in [(8950, 10**4, 0.9), (9050, 10**4, 0.9), (899_000, 10**6, 0.9), (30, 100, 0.25)]:
        calls.clear()
        ours = binomtest_pvalue(k, n, p)
        assert len(calls) == 1, (k, n, p, calls)
        assert ours == stats.binomtest(k, n, p).pvalue


@pytest.mark.parametrize(("k", "n", "p"), [(8950, 10**4, 0.9), (9050, 10**4, 0.9), (30, 1000, 0.5)])
def test_counts_the_stand_in_did_not_foresee_are_fetched_when_read(
    monkeypatch: pytest.MonkeyPatch, pmf_calls: list[int], k: int, n: int, p: float
) -> None:
    # a stand-in that leads the prefetch astray: the search still reads scipy's probabilities
    # (fetched when first read) and finds scipy's counts
    monkeypatch.setattr(binomial, "_AROUND", 0)
    real = binomial._search
    runs = []

    def wrong_first(a, d, lo, hi):  # type: ignore[no-untyped-def]
        runs.append(lo)
        if len(runs) == 1:
            return real(lambda x, a_, b_: -a(x, a_, b_), -d, lo, hi)  # the opposite order
        return real(a, d, lo, hi)

    monkeypatch.setattr(binomial, "_search", wrong_first)
    ours = binomtest_pvalue(k, n, p)
    assert len(pmf_calls) >= 2  # the prefetch, then what the search read beyond it
    assert ours == stats.binomtest(k, n, p).pvalue


def _grid() -> list[tuple[int, int, float]]:
    rng = np.random.default_rng(7)
    cases = []
    for n in (1, 2, 3, 10, 137, 10**4, 10**6, 10**8):
        for p in (1e-12, 1e-3, 0.1, 0.5, 0.9, 1 - 1e-9, float(rng.random())):
            mode = round(n * p)
            for k in {-3, -1, 0, 1, mode - 1, mode, mode + 1, n - 1, n, n + 1, n + 5}:
                cases.append((k, n, p))
    return cases


@pytest.mark.parametrize("fast", [True, False])
def test_the_routines_are_scipys_public_methods(
    monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    # the distribution's own routines inside the support, the edges outside it, and the public
    # methods where scipy lacks the routines (fast=False): the same values, compared with ==
    monkeypatch.setattr(binomial, "_FAST", fast)
    wrong = []
    for k, n, p in _grid():
        if binomial._tail(k, n, p, upper=False) != stats.binom.cdf(k, n, p):
            wrong.append(("cdf", k, n, p))
        if binomial._tail(k, n, p, upper=True) != stats.binom.sf(k, n, p):
            wrong.append(("sf", k, n, p))
        if 0 <= k <= n:
            x = np.array([k, 0, n], dtype=np.float64)
            if not np.array_equal(binomial._pmf(x, n, p), stats.binom.pmf(x, n, p)):
                wrong.append(("pmf", k, n, p))
    for n in (1, 2, 7, 100, 10**4, 10**7):
        for p in (0.0, 1e-9, 0.01, 0.1, 1 / 3, 0.5, 1.0):
            for q in (1e-12, 0.005, 0.025, 0.5, 0.975, 0.995, 1 - 1e-12):
                if binomial.binom_ppf(q, n, p) != float(stats.binom.ppf(q, n, p)):
                    wrong.append(("ppf", q, n, p))
    assert wrong == []


def test_ppf_outside_its_domain_is_scipys_answer() -> None:
    for q, n, p in [(0.0, 10, 0.5), (1.0, 10, 0.5), (0.5, 0, 0.5), (0.5, 10, 1.5), (1.5, 10, 0.5)]:
        ours, theirs = binomial.binom_ppf(q, n, p), float(stats.binom.ppf(q, n, p))
        assert ours == theirs or (np.isnan(ours) and np.isnan(theirs)), (q, n, p)
