"""The coarse curves of uqcore.coarse, checked against their definitions computed here with
plain numpy: the fixed grids, the rows behind every point and step, the dropped bins and
groups, and the curves that are never given."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.coarse import (
    COARSE_LEVELS,
    COARSE_MAX_POINTS,
    COARSE_MIN_ROWS,
    COARSE_PIT_BINS,
    ROW_LEVEL_CURVES,
    coarse_curves,
    coarse_details,
    coarse_points,
)
from uqcore.curves import CURVES
from uqcore.predictions.classification import Probs


def test_constants_are_the_documented_ones() -> None:
    assert COARSE_MAX_POINTS <= 100 and COARSE_MAX_POINTS == 20
    assert COARSE_MIN_ROWS == 50
    assert len(COARSE_LEVELS) <= COARSE_MAX_POINTS
    assert [coarse_points(n) for n in (0, 99, 100, 200, 1000, 5000)] == [0, 1, 2, 4, 20, 20]


@pytest.mark.parametrize("n", [120, 200, 1234])
def test_sparsification_points_are_means_over_fixed_blocks_of_the_std_order(n: int) -> None:
    rng = np.random.default_rng(n)
    y = rng.normal(size=n)
    mean, std = rng.normal(size=n), rng.permutation(n) + 1.0
    found, _ = coarse_curves(P.Gaussian(mean, std), y)
    c = found["sparsification_curve"]
    m = min(COARSE_MAX_POINTS, n // COARSE_MIN_ROWS)
    np.testing.assert_allclose(c.fractions, np.arange(m) / m)
    err = np.abs(y - mean)[np.argsort(std)]  # most certain first
    for f, v, o in zip(c.fractions, c.model, c.oracle, strict=True):
        keep = n * (1 - f)
        coef = np.clip(keep - np.arange(n), 0, 1)  # fractional removal at the boundary
        assert v == pytest.approx(np.sum(coef * err) / keep)
        assert o == pytest.approx(np.sum(coef * np.sort(np.abs(y - mean))) / keep)
    # every step removes at least COARSE_MIN_ROWS rows
    assert n / m >= COARSE_MIN_ROWS


def test_too_small_a_benchmark_gets_no_curves_and_a_reason() -> None:
    n = 2 * COARSE_MIN_ROWS - 1
    found, notes = coarse_curves(P.Gaussian(np.zeros(n), np.ones(n)), np.zeros(n))
    assert found == {}
    assert any("no" in note and str(2 * COARSE_MIN_ROWS) in note for note in notes)


def test_row_level_curves_are_never_given() -> None:
    n = 300
    rng = np.random.default_rng(1)
    q = np.sort(rng.normal(size=(n, 3)), axis=1)
    found, notes = coarse_curves(P.Gaussian(np.zeros(n), np.ones(n)), rng.normal(size=n))
    assert not (set(found) & ROW_LEVEL_CURVES)
    assert any("interval_width" in note for note in notes)
    found, _ = coarse_curves(P.Quantiles(np.array([0.1, 0.5, 0.9]), q), rng.normal(size=n))
    assert "group_calibration" not in found


def test_calibration_points_are_shares_of_all_rows_at_fixed_levels() -> None:
    n = 400
    rng = np.random.default_rng(2)
    y = rng.normal(size=n)
    std = rng.uniform(0.5, 2, n)
    found, _ = coarse_curves(P.Gaussian(np.zeros(n), std), y)
    c = found["quantile_calibration_curve"]
    assert c.levels == COARSE_LEVELS
    from scipy.stats import norm

    for p, obs in zip(c.levels, c.observed, strict=True):
        assert obs == pytest.approx(np.mean(y <= norm.ppf(p) * std))
    h = found["pit_histogram"]
    assert len(h.counts) == COARSE_PIT_BINS
    want, _ = np.histogram(norm.cdf(y / std), bins=np.linspace(0, 1, COARSE_PIT_BINS + 1))
    np.testing.assert_allclose(h.counts, want)


def test_stratified_keeps_only_groups_of_enough_rows() -> None:
    n = 300
    rng = np.random.default_rng(3)
    groups = np.repeat([0, 1, 2], [200, 60, 40])
    y = rng.normal(size=n)
    found, _ = coarse_curves(P.Gaussian(np.zeros(n), np.ones(n)), y, groups=groups)
    s = found["stratified"]
    assert s.groups == (0, 1) and s.counts == (200, 60)
    mae = s.values[s.metrics.index("mae")]
    assert mae[0] == pytest.approx(np.mean(np.abs(y[:200])))
    assert mae[1] == pytest.approx(np.mean(np.abs(y[200:260])))


def _probs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(3), size=n)
    labels = rng.integers(0, 3, size=n)
    return p, labels


def test_classification_points_are_shares_of_fixed_blocks_of_the_uncertainty_order() -> None:
    n = 1000
    p, labels = _probs(n, 4)
    rng = np.random.default_rng(5)
    ood = rng.random(n) < 0.3
    found, _ = coarse_curves(Probs(p), labels, ood=ood)
    m = coarse_points(n)
    u = 1 - p.max(axis=1)  # one_minus_max_prob_bma, distinct values
    wrong = (p.argmax(axis=1) != labels).astype(float)
    order = np.argsort(u)
    rc = found["risk_coverage_curve"]
    np.testing.assert_allclose(rc.coverage, np.arange(1, m + 1) / m)
    for j, risk in enumerate(rc.risk, start=1):
        k = j * n // m
        assert risk == pytest.approx(wrong[order[:k]].mean())
    roc = found["roc_ood"]
    assert len(roc.fpr) == m + 1 and roc.fpr[0] == 0.0
    desc = order[::-1]
    for j in range(1, m + 1):
        flagged = desc[: j * n // m]
        assert roc.tpr[j] == pytest.approx(ood[flagged].sum() / ood.sum())
        assert roc.fpr[j] == pytest.approx((~ood[flagged]).sum() / (~ood).sum())
    pr = found["pr_correctness"]
    assert pr.recall[-1] == 0.0 and pr.precision[-1] == 1.0 and len(pr.recall) == m + 1
    flagged = desc[: n // m]
    assert pr.precision[-2] == pytest.approx(wrong[flagged].mean())


def test_reliability_bins_of_few_rows_are_dropped() -> None:
    n = 600
    p, labels = _probs(n, 6)
    found, _ = coarse_curves(Probs(p), labels)
    r = found["reliability_diagram"]
    conf = p.max(axis=1)
    correct = p.argmax(axis=1) == labels
    edges = np.linspace(0, 1, 16)
    for b in range(15):
        inside = (conf > edges[b]) & (conf <= edges[b + 1])
        if inside.sum() < COARSE_MIN_ROWS:
            assert r.accuracy[b] is None and r.confidence[b] is None
        else:
            assert r.accuracy[b] == pytest.approx(correct[inside].mean())
    assert any(a is None for a in r.accuracy) and any(a is not None for a in r.accuracy)


def test_every_registered_curve_is_coarse_or_never_given() -> None:
    from uqcore.coarse import _COARSE

    assert set(CURVES) == set(_COARSE) | ROW_LEVEL_CURVES


def test_details_of_small_groups_are_left_out() -> None:
    details = {"group_rows": [2, 49, 50, 300], "score_mean": [1.0, 2.0, 3.0, 4.0], "x": 7}
    assert coarse_details(details) == {"group_rows": [50, 300], "score_mean": [3.0, 4.0], "x": 7}
    assert coarse_details({"histogram": [0.5, 0.5]}) == {"histogram": [0.5, 0.5]}
