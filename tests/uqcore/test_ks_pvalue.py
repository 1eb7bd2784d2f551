"""The Kolmogorov-Smirnov p-value of ``pit``: scipy's exact values, at a cost independent of n."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats
from scipy.stats._ksstats import _kolmogn_PelzGood

from uqcore import metric
from uqcore import predictions as P
from uqcore._kolmogorov import EXACT_MAX_N, QUADRATURE_MAX_D, ks_sf, pelz_good_cdf, smirnov_sf

#: the bound stated in uqcore._kolmogorov
BOUND = 1e-11

# n·D² from scipy's switch to the one-sided sum (2.2) to where the p-value is 0 (370): the
# whole range of the quadrature, tails down to ~1e-320 included
NX2 = [2.2, 2.21, 2.5, 3.0, 4.0, 6.0, 10.0, 20.0, 50.0, 100.0, 200.0, 300.0, 369.0]


def _grid(ns: list[int]) -> list[tuple[int, float]]:
    return [
        (n, math.sqrt(t2 / n)) for n in ns for t2 in NX2 if math.sqrt(t2 / n) <= QUADRATURE_MAX_D
    ]


@pytest.mark.parametrize(("n", "d"), _grid([EXACT_MAX_N + 1, 1500, 4000, 10_000, 31_623, 100_000]))
def test_one_sided_tail_matches_scipys_exact_sum(n: int, d: float) -> None:
    exact = float(scipy.special.smirnov(n, d))
    got = smirnov_sf(n, d)
    if exact < 1e-300:  # subnormal or 0 in float64: no relative accuracy to compare
        assert got < 1e-300
    else:
        assert abs(got / exact - 1.0) <= BOUND


@pytest.mark.parametrize("n", [EXACT_MAX_N + 1, 2_500, 10_000, 100_000])
def test_two_sided_p_value_matches_kstwo_over_all_statistics(n: int) -> None:
    # every branch: the bulk (1 − CDF), the one-sided sums, the far tail, and large D
    ds = np.concatenate(
        [
            np.sqrt(np.array([0.05, 0.5, 1.0, 2.0, 2.19, *NX2, 369.9, 371.0]) / n),
            [0.3, QUADRATURE_MAX_D, 0.46, 0.7, 1.0],
        ]
    )
    for d in ds:
        exact = float(scipy.stats.kstwo.sf(d, n))
        got = ks_sf(float(d), n)
        if exact < 1e-300:
            assert got < 1e-300, (n, d)
        else:
            assert abs(got / exact - 1.0) <= BOUND, (n, d, got, exact)


def test_small_n_is_scipys_value_itself() -> None:
    # scipy's own routine bit for bit, but for Pelz and Good's series (n > 140), evaluated here
    # in scalar floats: numpy's vectorised exp and Python's may differ in the last bit, and do
    # on some processors (as in test_bulk_is_scipys_value_at_every_n)
    for n in (1, 2, 7, 140, 141, EXACT_MAX_N):
        for d in (0.5 / n, 0.01, 0.1, 0.3, 0.9):
            exact = float(scipy.stats.kstwo.sf(d, n))
            if _pelz_good(n, d):
                assert abs(ks_sf(d, n) / exact - 1.0) <= 1e-13, (n, d)
            else:
                assert ks_sf(d, n) == exact, (n, d)


def test_bulk_is_scipys_value_at_every_n() -> None:
    # below n·D² = 2.2 (and at the ends of D) the value is scipy's own routine's, bit for bit,
    # but for Pelz and Good's series, evaluated here in scalar floats (a few ulps: numpy's exp
    # and Python's may differ in the last bit)
    for n in (1, 3, 140, 141, EXACT_MAX_N + 1, 10_000, 100_000, 10**7):
        for nx2 in (0.01, 0.3, 0.754, 0.755, 1.0, 2.0, 2.19):
            d = float(np.sqrt(nx2 / n))
            exact = float(scipy.stats.kstwo.sf(d, n))
            if _pelz_good(n, d):
                assert abs(ks_sf(d, n) / exact - 1.0) <= 1e-13, (n, d)
            else:
                assert ks_sf(d, n) == exact, (n, d)
        for d in (0.0, 1e-12, 0.25 / n, 1.0 - 0.5 / n, 1.0):
            assert ks_sf(d, n) == float(scipy.stats.kstwo.sf(d, n)), (n, d)


def _pelz_good(n: int, d: float) -> bool:
    """Whether scipy's ``_kolmogn`` computes the SF from Pelz and Good's series."""
    return (
        n > 140
        and 1 < n * d < n - 1
        and d < 0.5
        and n * d * d < 2.2
        and not (n <= 100_000 and n * d**1.5 <= 1.4)
    )


def test_pelz_good_series_is_scipys() -> None:
    # the series itself against scipy's, and the p-value where it is used, over its whole
    # domain: n from 141 to 10^8, n·D² from the Durbin matrix's edge to 2.2
    rng = np.random.default_rng(5)
    used = 0
    for _ in range(4000):
        n = int(10 ** rng.uniform(math.log10(141), 8))
        d = math.sqrt(rng.uniform(1e-3, 2.2) / n)
        if not (0.0 < d < 0.5 and n * d > 1):
            continue
        assert abs(pelz_good_cdf(n, d) / _kolmogn_PelzGood(n, d) - 1.0) <= 1e-14, (n, d)
        exact = float(scipy.stats.kstwo.sf(d, n))
        assert abs(ks_sf(d, n) / exact - 1.0) <= 1e-13, (n, d, ks_sf(d, n), exact)
        used += _pelz_good(n, d)
    assert used > 2000


def test_pelz_good_is_used_where_scipy_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import uqcore._kolmogorov as kolmogorov

    calls: list[tuple[int, float]] = []
    real = kolmogorov.pelz_good_cdf

    def counted(n: int, d: float) -> float:
        calls.append((n, d))
        return real(n, d)

    monkeypatch.setattr(kolmogorov, "pelz_good_cdf", counted)
    for n in (140, 141, 5000, 100_000, 100_001, 10**7):
        for nx2 in (0.001, 0.01, 0.1, 1.0, 2.1999, 2.2, 3.0):
            d = math.sqrt(nx2 / n)
            calls.clear()
            ks_sf(d, n)
            assert bool(calls) == _pelz_good(n, d), (n, d)


def test_pit_p_value_at_n_1e5_on_miscalibrated_data() -> None:
    # the case that took scipy's O(n) sum: n·D² well above 2.2
    rng = np.random.default_rng(21)
    n = 100_000
    pred = P.Gaussian(mean=np.zeros(n), std=np.ones(n))
    y = rng.normal(scale=1.02, size=n)
    r = metric("pit", pred, y)
    assert r["p_value_method"] == "exact"
    d = float(scipy.stats.kstest(scipy.stats.norm.cdf(y), "uniform").statistic)
    assert n * d * d > 2.2
    assert abs(r["p_value"] / float(scipy.stats.kstwo.sf(d, n)) - 1.0) <= BOUND
