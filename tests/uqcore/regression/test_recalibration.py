"""Tests of isotonic recalibration and std scaling (fit on one set, apply to another)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from uqcore import UQValidationError, evaluate
from uqcore import predictions as P
from uqcore.regression.calibration import calibration_error
from uqcore.regression.recalibration import (
    IsotonicRecalibrated,
    StdScaling,
    fit_isotonic,
    fit_std_scaling,
)


def _miscalibrated(n: int, seed: int, factor: float = 2.5) -> tuple[P.Gaussian, np.ndarray]:
    """Gaussian predictions whose std is too small by ``factor`` (and slightly biased)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = mu + 0.3 * sd + factor * sd * rng.standard_normal(n)
    return P.Gaussian(mean=mu, std=sd), y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_isotonic_calibrates_held_out_data(seed: int) -> None:
    fit_pred, fit_y = _miscalibrated(2000, seed)
    test_pred, test_y = _miscalibrated(2000, seed + 100)
    before = calibration_error(test_pred, test_y)
    recal = fit_isotonic(fit_pred, fit_y).apply(test_pred)
    after = calibration_error(recal, test_y)
    assert before > 1.0
    # A calibrated prediction has E[cal] = Σ p(1-p)/N ≈ 99/6/2000 ≈ 0.008 (plus the fit's noise).
    assert after < 0.05
    u = np.asarray(recal.cdf(test_y))
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_isotonic_map_is_monotone_and_maps_pit_to_uniform() -> None:
    pred, y = _miscalibrated(3000, 7, factor=1.8)
    u = np.asarray(pred.cdf(y))
    assert np.all((u > 0) & (u < 1))  # no PIT value saturates in float64 here
    m = fit_isotonic(pred, y)
    assert m.knots[0] == 0.0 and m.knots[-1] == 1.0
    assert m.values[0] == 0.0 and m.values[-1] == 1.0
    assert np.all(np.diff(m.knots) > 0)
    assert np.all(np.diff(m.values) > 0)  # strictly increasing with midpoint positions
    mapped = m(u)
    # On the fitting set the mapped PIT values are the Hazen positions (k - 1/2)/N exactly.
    n = y.shape[0]
    np.testing.assert_allclose(np.sort(mapped), (np.arange(n) + 0.5) / n, atol=1e-12)
    grid = np.linspace(0.0, 1.0, 1001)
    np.testing.assert_allclose(m.inverse(m(grid)), grid, atol=1e-9)


def test_isotonic_ecdf_positions_and_weights_as_repeats() -> None:
    pred, y = _miscalibrated(50, 3)
    m = fit_isotonic(pred, y, positions="ecdf")
    u = np.sort(np.asarray(pred.cdf(y)))
    np.testing.assert_allclose(m(u), np.arange(1, 51) / 50, atol=1e-12)
    w = np.random.default_rng(0).integers(0, 4, size=50).astype(float)
    rep = np.repeat(np.arange(50), w.astype(int))
    a = fit_isotonic(pred, y, sample_weight=w)
    b = fit_isotonic(pred.take(rep), y[rep])
    np.testing.assert_allclose(a.knots, b.knots)
    np.testing.assert_allclose(a.values, b.values, atol=1e-12)


def test_recalibrated_prediction_is_consistent() -> None:
    pred, y = _miscalibrated(500, 11)
    m = fit_isotonic(pred, y)
    r = m.apply(pred)
    assert isinstance(r, IsotonicRecalibrated)
    assert r.capabilities == {"point", "uncertainty", "std", "cdf", "logpdf", "quantiles"}
    levels = np.array([0.01, 0.1, 0.5, 0.9, 0.99])
    q = np.asarray(r.ppf(levels))
    np.testing.assert_allclose(np.asarray(r.cdf(q[:, 2])), 0.5, atol=1e-9)
    for j, p in enumerate(levels):
        np.testing.assert_allclose(np.asarray(r.cdf(q[:, j])), p, atol=1e-9)
    np.testing.assert_allclose(np.asarray(r.point()), q[:, 2])
    # density = derivative of the CDF (central difference within a segment)
    t = np.asarray(pred.mean()) + 0.37 * np.asarray(pred.std())
    h = 1e-7
    fd = (np.asarray(r.cdf(t + h)) - np.asarray(r.cdf(t - h))) / (2 * h)
    dens = np.exp(np.asarray(r.logpdf(t)))
    close = np.isclose(fd, dens, rtol=1e-4)
    assert close.mean() > 0.95  # the few misses straddle a knot of R
    # std: exact Gaussian partial moments vs a fine quantile quadrature of one row
    mids = (np.arange(200_000) + 0.5) / 200_000
    row = r.take([0])
    qq = np.asarray(row.ppf(mids))[0]
    assert math.isclose(float(np.asarray(row.std())[0]), float(np.std(qq)), rel_tol=2e-3)
    sub = r.take([3, 1])
    np.testing.assert_allclose(np.asarray(sub.cdf(y[[3, 1]])), np.asarray(r.cdf(y))[[3, 1]])


def test_recalibrated_mixture_and_metrics_accept_it() -> None:
    rng = np.random.default_rng(5)
    n = 150
    mu = rng.normal(size=n)
    mix = P.Mixture(
        weights=np.full((n, 2), 0.5),
        means=np.stack([mu - 0.2, mu + 0.2], axis=1),
        stds=np.full((n, 2), 0.5),
    )
    y = mu + 2.0 * rng.standard_normal(n)
    r = fit_isotonic(mix, y).apply(mix)
    std = np.asarray(r.std())
    assert np.all(std > 1.5) and np.all(std < 2.5)
    rep = evaluate(r, y, metrics=["calibration_error", "ece", "sharpness", "mae", "ause"])
    assert rep["calibration_error"] is not None and rep["calibration_error"] < 0.2
    assert math.isclose(rep["sharpness"], math.sqrt(np.mean(std**2)), rel_tol=1e-12)


def test_std_scaling_closed_form_gaussian() -> None:
    rng = np.random.default_rng(1)
    n = 300
    mu, sd = rng.normal(size=n), rng.uniform(0.2, 3.0, size=n)
    y = mu + 1.7 * sd * rng.standard_normal(n)
    w = rng.uniform(0.0, 2.0, size=n)
    z = (y - mu) / sd
    s = fit_std_scaling(P.Gaussian(mu, sd), y, sample_weight=w)
    assert math.isclose(s.factor, math.sqrt(np.sum(w * z * z) / np.sum(w)), rel_tol=1e-12)
    # the closed form is the minimiser of the NLL: a numeric search on a Student-t with huge df
    # (nearly Gaussian) lands next to it
    t = fit_std_scaling(P.StudentT(mu, sd, df=1e7), y, sample_weight=w)
    assert math.isclose(t.factor, s.factor, rel_tol=1e-4)
    scaled = s.apply(P.Gaussian(mu, sd))
    np.testing.assert_allclose(np.asarray(scaled.std()), s.factor * sd)


def test_std_scaling_kinds_and_calibration_objective() -> None:
    pred, y = _miscalibrated(1500, 4, factor=3.0)
    s = fit_std_scaling(pred, y, objective="calibration_error")
    assert 2.5 < s.factor < 3.6
    assert calibration_error(s.apply(pred), y) < calibration_error(pred, y) / 10
    lap = P.Laplace(np.zeros(3), np.ones(3))
    assert np.allclose(np.asarray(StdScaling(2.0, "nll").apply(lap).std()), 2.0 * math.sqrt(2))
    mix = P.Mixture(np.full((2, 2), 0.5), np.array([[0.0, 1.0], [0.0, 1.0]]), np.ones((2, 2)))
    scaled = StdScaling(2.0, "nll").apply(mix)
    np.testing.assert_allclose(np.asarray(scaled.stds), 2.0)
    np.testing.assert_allclose(np.asarray(scaled.means), np.asarray(mix.means))
    samples = P.Samples(np.zeros((2, 3)) + np.arange(3))
    with pytest.raises(UQValidationError, match="to scale its std"):
        fit_std_scaling(samples, np.zeros(2))
    with pytest.raises(UQValidationError, match="objective"):
        fit_std_scaling(pred, y, objective="ece")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="sample_weight"):
        fit_std_scaling(pred, y, sample_weight=-np.ones(y.shape[0]))
    with pytest.raises(UQValidationError, match="CDF"):
        fit_isotonic(P.PointUncertainty(np.zeros(2), np.ones(2)), np.zeros(2))
    with pytest.raises(UQValidationError, match="y must be finite"):
        fit_isotonic(pred, np.full(y.shape[0], np.nan))
