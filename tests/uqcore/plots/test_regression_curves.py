"""The regression curves of uqcore.curves against references written from their formulas."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import scipy.stats

from tests.factories import make_classification, make_prediction
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.curves import CURVES, curve_from_json, curve_names, curve_to_json, curves
from uqcore.regression.curves import (
    interval_width_curve,
    pit_histogram,
    stratified_metrics,
)

REGRESSION = [
    "calibration_curve",
    "quantile_calibration_curve",
    "pit_histogram",
    "sparsification_curve",
    "group_calibration",
    "stratified",
    "interval_width",
    "corp_reliability",
    "murphy_diagram",
]


def gaussian(n: int = 200, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """A miscalibrated Gaussian prediction (too narrow, shifted) and its targets."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    s = np.exp(rng.normal(scale=0.4, size=n))
    y = mu + 1.4 * s * rng.normal(size=n) + 0.3
    return P.Gaussian(mu, s), y, mu, s


def test_registered_names() -> None:
    assert sorted(curve_names("regression")) == sorted(REGRESSION)
    assert all(CURVES[n].task in ("regression", "any") for n in REGRESSION)


@pytest.mark.parametrize("weighted", [False, True])
def test_pit_histogram_is_the_histogram_of_the_normal_cdf(weighted: bool) -> None:
    pred, y, mu, s = gaussian(300, seed=1)
    w = np.random.default_rng(2).uniform(0.2, 3.0, size=300) if weighted else None
    h = pit_histogram(pred, y, n_bins=8, level=0.9, sample_weight=w)
    u = scipy.stats.norm.cdf(y, loc=mu, scale=s)
    counts, edges = np.histogram(u, bins=8, range=(0.0, 1.0), weights=w)
    np.testing.assert_allclose(h.edges, edges, rtol=0, atol=1e-15)
    np.testing.assert_allclose(h.counts, counts, rtol=1e-12)
    total = 300.0 if w is None else float(w.sum())
    n_eff = 300.0 if w is None else float(w.sum() ** 2 / (w * w).sum())
    n = round(n_eff)
    lo = scipy.stats.binom.ppf(0.05, n, 1 / 8) * total / n_eff
    hi = scipy.stats.binom.ppf(0.95, n, 1 / 8) * total / n_eff
    np.testing.assert_allclose(h.band_low, [lo] * 8, rtol=1e-12)
    np.testing.assert_allclose(h.band_high, [hi] * 8, rtol=1e-12)
    np.testing.assert_allclose(h.expected, [total / 8] * 8, rtol=1e-12)
    assert h.n_eff == pytest.approx(n_eff, rel=1e-12)
    if w is None:
        assert h.ks_statistic == pytest.approx(scipy.stats.kstest(u, "uniform").statistic)


def test_pit_band_holds_about_the_level_for_a_calibrated_forecast() -> None:
    # a calibrated forecast: the bins' counts fall inside the 95% band about 95% of the time
    rng = np.random.default_rng(3)
    inside = []
    for _ in range(40):
        mu = rng.normal(size=500)
        y = mu + rng.normal(size=500)
        h = pit_histogram(P.Gaussian(mu, np.ones(500)), y, n_bins=10)
        c = np.asarray(h.counts)
        inside.append(np.mean((c >= h.band_low[0]) & (c <= h.band_high[0])))
    assert 0.9 <= float(np.mean(inside)) <= 1.0


def test_calibration_curves_run_from_level_0_to_1() -> None:
    pred, y, mu, s = gaussian()
    got = curves(pred, y, ["calibration_curve", "quantile_calibration_curve"])
    p = np.linspace(0, 1, 101)
    interval, quantile = got["calibration_curve"], got["quantile_calibration_curve"]
    np.testing.assert_allclose(interval.levels, p, atol=1e-15)
    lo = scipy.stats.norm.ppf((1 - p) / 2, loc=mu[:, None], scale=s[:, None])
    hi = scipy.stats.norm.ppf((1 + p) / 2, loc=mu[:, None], scale=s[:, None])
    inside = (y[:, None] >= lo) & (y[:, None] <= hi)
    np.testing.assert_allclose(interval.observed[1:], inside.mean(axis=0)[1:], atol=1e-12)
    q = scipy.stats.norm.ppf(p, loc=mu[:, None], scale=s[:, None])
    np.testing.assert_allclose(quantile.observed, (y[:, None] <= q).mean(axis=0), atol=1e-12)
    assert interval.prop_type == "interval" and quantile.prop_type == "quantile"


def test_sparsification_curve_by_sorting() -> None:
    pred, y, mu, s = gaussian(200)
    c = curves(pred, y, ["sparsification_curve"])["sparsification_curve"]
    e = np.abs(y - mu)
    by_u = e[np.argsort(-s)]
    by_e = np.sort(e)[::-1]
    k = np.arange(100) * 2  # alpha = k/100 of 200 rows
    np.testing.assert_allclose(c.model, [by_u[r:].mean() for r in k], rtol=1e-12)
    np.testing.assert_allclose(c.oracle, [by_e[r:].mean() for r in k], rtol=1e-12)
    np.testing.assert_allclose(c.random, np.full(100, e.mean()), rtol=1e-12)
    np.testing.assert_allclose(c.fractions, np.arange(100) / 100)


def test_group_calibration_ends_at_the_whole_data() -> None:
    pred, y, mu, s = gaussian(150)
    c = curves(pred, y, ["group_calibration"], seed=4)["group_calibration"]
    assert len(c.group_sizes) == 10 and c.group_rows[-1] == 150
    # the largest "group" drawn without replacement is the whole data: its error is the ECE
    p = np.arange(1, 100) / 100
    u = scipy.stats.norm.cdf(y, loc=mu, scale=s)
    observed = ((u[:, None] >= (1 - p) / 2) & (u[:, None] <= (1 + p) / 2)).mean(axis=0)
    assert c.score_mean[-1] == pytest.approx(np.mean(np.abs(observed - p)), rel=1e-12)
    assert c.score_std[-1] == pytest.approx(0.0, abs=1e-15)
    assert c == curves(pred, y, ["group_calibration"], seed=4)["group_calibration"]
    assert c != curves(pred, y, ["group_calibration"], seed=5)["group_calibration"]


def test_group_calibration_needs_integer_weights() -> None:
    pred, y, _, _ = gaussian(60)
    w = np.full(60, 0.5)
    assert "group_calibration" not in curves(pred, y, sample_weight=w)
    with pytest.raises(UQValidationError, match="integer"):
        curves(pred, y, ["group_calibration"], sample_weight=w)
    assert "group_calibration" in curves(pred, y, sample_weight=np.full(60, 2.0))


def test_stratified_metrics_per_group() -> None:
    pred, y, mu, _ = gaussian(120)
    groups = np.random.default_rng(5).choice([4, 9, 2], size=120)
    c = stratified_metrics(pred, y, groups)
    assert c.metrics == ("mae", "nmerci", "ece") and c.groups == (2, 4, 9)
    e = np.abs(y - mu)
    for g, count, mae in zip(c.groups, c.counts, c.values[0], strict=True):
        assert count == int(np.sum(groups == g))
        assert mae == pytest.approx(e[groups == g].mean(), rel=1e-12)
    point, y2 = make_prediction("point_uncertainty", 80, seed=2)
    assert stratified_metrics(point, y2, np.arange(80) % 3).metrics == ("mae", "nmerci")
    only = stratified_metrics(pred, y, groups, metrics=["rmse"])
    assert only.metrics == ("rmse",)
    assert only.values[0][0] == pytest.approx(np.sqrt(np.mean((y - mu)[groups == 2] ** 2)))
    with pytest.raises(UQValidationError, match="groups"):
        curves(pred, y, ["stratified"])
    assert "stratified" not in curves(pred, y)


def test_interval_width_points_and_scale() -> None:
    pred, y, mu, s = gaussian(2600, seed=6)
    c = interval_width_curve(pred, y, alpha=0.9, seed=3)
    rows = np.asarray(c.rows)
    assert len(rows) == 2000 and c.n == 2600 and len(set(rows.tolist())) == 2000
    assert np.all(np.diff(rows) > 0)
    e = np.abs(y - mu)
    np.testing.assert_array_equal(c.uncertainty, s[rows])
    np.testing.assert_array_equal(c.abs_error, e[rows])
    lam = np.quantile(e / s, 0.9)  # moukari2019 eq. 1 (numpy's linear percentile)
    q = np.quantile(e, 0.9)
    assert c.scale == pytest.approx(lam, rel=1e-12)
    assert c.q_error == pytest.approx(q, rel=1e-12)
    assert c.nmerci == pytest.approx((lam * s.mean() - e.mean()) / (q - e.mean()), rel=1e-10)
    assert c.uncertainty_label == "std" and c.weights is None
    small = interval_width_curve(pred, y, max_points=5000)
    np.testing.assert_array_equal(small.rows, np.arange(2600))
    point, y2 = make_prediction("point_uncertainty", 50, seed=1)
    assert interval_width_curve(point, y2).uncertainty_label == "uncertainty"


def test_json_round_trip_of_every_curve() -> None:
    pred, y, _, _ = gaussian(90)
    groups = np.arange(90) % 3
    got = curves(pred, y, groups=groups, seed=1)
    assert list(got) == REGRESSION
    for name, c in got.items():
        back = curve_from_json(name, json.loads(json.dumps(curve_to_json(c))))
        assert type(back) is type(c)
        if name == "sparsification_curve":
            np.testing.assert_array_equal(back.model, np.asarray(c.model))
        else:
            assert back == c, name


def test_classification_prediction_gets_no_regression_curve() -> None:
    pred, labels, _ = make_classification("probs", 40)
    with pytest.raises(UQValidationError, match="regression curve"):
        curves(pred, labels, ["pit_histogram"])
    both = {n for n in REGRESSION if CURVES[n].task == "any"}
    assert not set(curves(pred, labels)) & (set(REGRESSION) - both)


def test_quantiles_prediction() -> None:
    pred, y = make_prediction("quantiles", 100, seed=3)
    got = curves(pred, y)
    assert "calibration_curve" in got and "pit_histogram" not in got
