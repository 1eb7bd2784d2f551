"""n-MeRCI's ratio quantile and AUSE's prefix means on both numpy paths: the compiled kernels
(a radix select with no array of ratios; one running-sum pass) and the numpy algorithms that
run without numba, against references written from the formulas (Moukari et al. 2019, eq. 1-2:
λ^α the α-quantile of |e_i|/σ_i; the sparsification curve's mean of the remaining errors)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import uqcore
from uqcore import _compiled
from uqcore import predictions as P
from uqcore.regression import ranking


@pytest.fixture(params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on both paths; the compiled one also below its size threshold."""
    if request.param == "compiled":
        assert _compiled.kernels() is not None
        monkeypatch.setattr(ranking, "_RADIX_SELECT_MIN", 1)
    else:
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
    return str(request.param)


def _ratios(e: np.ndarray, s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(s > 0, e / np.where(s > 0, s, 1.0), np.where(e > 0, np.inf, 0.0))


def _gaussian(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(μ, σ, y) of a calibrated Gaussian with σ ~ U(0.5, 2)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    s = rng.uniform(0.5, 2.0, n)
    return mu, s, mu + s * rng.normal(size=n)


def _cases(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for n in (1, 2, 3, 7, 100, 3000):
        e = np.abs(rng.normal(size=n))
        s = rng.uniform(0.2, 2.0, n)
        out.append((e, s))
        out.append((np.round(e, 1), np.round(s, 1) + 0.1))  # many tied ratios
        z = e.copy()
        z[rng.random(n) < 0.3] = 0.0
        out.append((z, s))  # zero errors: ratio +0.0
        s0 = s.copy()
        s0[rng.random(n) < 0.02] = 0.0
        out.append((e, s0))  # a few infinite ratios
        out.append((z, s0))  # and 0/0 := 0
        out.append((e * 1e300, s * 1e-300))  # overflow to +inf
        out.append((e * 1e-300, s))  # subnormal ratios
        out.append((np.full(n, 2.0), np.full(n, 4.0)))  # one bucket holds every ratio
    return out


def test_ratio_order_stats_equal_a_sort_of_the_ratios() -> None:
    jit = _compiled.kernels()
    assert jit is not None  # numba is a dependency
    rng = np.random.default_rng(7)
    for e, s in _cases(rng):
        r = np.sort(_ratios(e, s))
        finite = r[np.isfinite(r)]
        top = float(finite.max()) if finite.size else 0.0
        n = e.size
        for lo in sorted({0, n // 2, int(0.95 * (n - 1)), n - 2, n - 1} - {-1}):
            for hi in {lo, min(lo + 1, n - 1)}:
                a, b, t = jit.ratio_order_stats(e, s, lo, hi)
                assert (a, b) == (r[lo], r[hi]), (n, lo, hi)
                assert t == top
                assert not (a == 0.0 and math.copysign(1.0, a) < 0)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("method", ["linear", "inverted_cdf"])
@pytest.mark.parametrize("alpha", [0.5, 0.9, 0.95, 1.0])
def test_merci_and_nmerci_equal_the_formula(method: str, alpha: float) -> None:
    rng = np.random.default_rng(int(alpha * 100))
    for e, s in _cases(rng):
        n = e.size
        mu = rng.normal(size=n)
        y = mu + e * np.where(rng.random(n) < 0.5, -1.0, 1.0)
        pred = P.PointUncertainty(mu, s)
        e_true = np.abs(y - mu)
        ratios = _ratios(e_true, s)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            got = uqcore.evaluate(
                pred,
                y,
                metrics=["merci", "nmerci"],
                params={"merci": {"alpha": alpha, "quantile_method": method}},
            )
        if np.isinf(ratios).any():
            finite = ratios[np.isfinite(ratios)]
            top = float(finite.max()) if finite.size else 0.0
            lo = np.quantile(np.where(np.isinf(ratios), top, ratios), alpha, method=method)
            hi = np.quantile(np.where(np.isinf(ratios), 2 * top + 1, ratios), alpha, method=method)
            lam = float(lo) if lo == hi else None
        else:
            lam = float(np.quantile(ratios, alpha, method=method))
        if lam is None:
            assert got["merci"] is None
            continue
        expect = lam * float(np.mean(s))
        assert got["merci"] == pytest.approx(expect, rel=1e-12, abs=1e-300)


@pytest.mark.usefixtures("path")
def test_nmerci_at_scale_equals_the_formula() -> None:
    """Above the size threshold of the radix select, with the paper's defaults."""
    mu, s, y = _gaussian(70_001, 3)
    got = uqcore.evaluate(P.Gaussian(mu, s), y, metrics=["merci", "nmerci"])
    e = np.abs(y - mu)
    lam = float(np.percentile(e / s, 95))
    mae = float(np.mean(e))
    merci = lam * float(np.mean(s))
    assert got["merci"] == pytest.approx(merci, rel=1e-12)
    q = float(np.percentile(e, 95))
    assert got["nmerci"] == pytest.approx((merci - mae) / (q - mae), rel=1e-11)


@pytest.mark.usefixtures("path")
def test_merci_undefined_where_the_quantile_lands_on_an_infinite_ratio() -> None:
    n = 80_000
    mu = np.zeros(n)
    s = np.ones(n)
    s[: n // 10] = 0.0  # 10% of the rows: σ = 0 with a nonzero error
    y = np.full(n, 0.5)
    with pytest.warns(uqcore.registry.UndefinedMetricWarning, match="no finite scale"):
        assert uqcore.metric("merci", P.PointUncertainty(mu, s), y, alpha=0.95) is None
    assert uqcore.metric("merci", P.PointUncertainty(mu, s), y, alpha=0.85) == pytest.approx(
        0.5 * 0.9
    )


@pytest.mark.usefixtures("path")
def test_prefix_mean_sum_of_the_sparsification_curve() -> None:
    """Σ_j (Σ_{i<j} err_i)/j for j = 1..N and Σ err, against exact sums (``math.fsum``), along
    a contiguous array and a reversed view."""
    rng = np.random.default_rng(11)
    for n in (1, 2, 5, 1000, 100_003):
        err = np.abs(rng.standard_cauchy(n))
        for x in (err, err[::-1]):
            cum = np.cumsum(x)
            expect = math.fsum(float(c) / (j + 1) for j, c in enumerate(cum))
            total, last = ranking._exact_sum_unit(np, x)
            assert total == pytest.approx(expect, rel=1e-12)
            assert last == pytest.approx(math.fsum(x.tolist()), rel=1e-12)


@pytest.mark.usefixtures("path")
def test_ause_at_scale_equals_the_sparsification_areas() -> None:
    """AUSE (left rule, exact grid) against the curves built row by row from the formula."""
    n = 20_000
    mu, s, y = _gaussian(n, 5)
    e = np.abs(y - mu)
    by_u = e[np.argsort(s, kind="stable")]
    by_e = np.sort(e)

    def area(err: np.ndarray) -> float:
        # remove the largest key first: the mean of the j remaining rows for j = N..1
        return math.fsum(np.cumsum(err) / np.arange(1, n + 1)) / n

    expect = (area(by_u) - area(by_e)) / float(np.mean(e))  # normalised by the full MAE
    got = uqcore.metric("ause", P.Gaussian(mu, s), y)
    assert got == pytest.approx(expect, rel=1e-9)
