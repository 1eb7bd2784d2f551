"""uqcore.compat.uncertainty_toolbox_metrics against Uncertainty Toolbox's get_all_metrics."""

from __future__ import annotations

import math
import warnings
from typing import Any

import matplotlib
import numpy as np
import pytest

from uqcore import UQValidationError
from uqcore import predictions as P
from uqcore.compat import uncertainty_toolbox_metrics

matplotlib.use("Agg")
warnings.filterwarnings("ignore", category=DeprecationWarning)

import uncertainty_toolbox as uct  # noqa: E402


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.2, 2.0, size=n)
    y = mu + 1.2 * sd * rng.standard_t(5, size=n)
    return mu, sd, y


@pytest.fixture(scope="module")
def pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Uncertainty Toolbox's metrics and ours on two data sets: the first through
    get_all_metrics; the second through the parts it calls (with its num_bins, resolution and
    scaling) but the adversarial one. That part's structure is the same on any data, and its
    random groups (2 × 1000 calibration errors) give one deterministic number, the whole-set
    group's: the average calibration, which the calibration part gives."""
    mu, sd, y = _data(40, 0)
    np.random.seed(0)  # noqa: NPY002  (the peer draws from the legacy global RNG)
    whole = uct.get_all_metrics(mu, sd, y, verbose=False)
    out = [(whole, uncertainty_toolbox_metrics(P.Gaussian(mu, sd), y, seed=0))]
    mu, sd, y = _data(120, 1)
    m = uct.metrics
    parts = {
        "accuracy": m.get_all_accuracy_metrics(mu, y, verbose=False),
        "avg_calibration": m.get_all_average_calibration(mu, sd, y, 100, verbose=False),
        "sharpness": m.get_all_sharpness_metrics(sd, verbose=False),
        "scoring_rule": m.get_all_scoring_rule_metrics(mu, sd, y, 99, True, verbose=False),
    }
    out.append((parts, uncertainty_toolbox_metrics(P.Gaussian(mu, sd), y, seed=1)))
    return out


def test_same_structure_and_numbers(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    (whole, ours_whole), _ = pairs
    assert set(whole) == set(ours_whole)
    for ut, ours in pairs:
        for group in ("accuracy", "avg_calibration", "sharpness", "scoring_rule"):
            assert set(ut[group]) == set(ours[group]), group
            for key, value in ut[group].items():
                assert math.isclose(ours[group][key], float(value), rel_tol=1e-9, abs_tol=1e-12), (
                    group,
                    key,
                )
        for key, average in (("ma_adv_group_cal", "ma_cal"), ("rms_adv_group_cal", "rms_cal")):
            b = ours["adv_group_calibration"][key]
            # The whole-set group is deterministic: it equals the average calibration.
            whole_set = b["adv_group_cali_mean"][-1]
            assert math.isclose(whole_set, float(ut["avg_calibration"][average]), rel_tol=1e-9)
            if "adv_group_calibration" not in ut:
                continue
            a = ut["adv_group_calibration"][key]
            assert set(a) == set(b)
            np.testing.assert_allclose(b["group_sizes"], a["group_sizes"], rtol=1e-12)
            assert b["adv_group_cali_mean"].shape == a["adv_group_cali_mean"].shape
            assert math.isclose(whole_set, float(a["adv_group_cali_mean"][-1]), rel_tol=1e-9)


def test_average_parts_without_scoring() -> None:
    """The calibration and accuracy parts, independently of the scoring metrics."""
    mu, sd, y = _data(90, 3)
    pred = P.Gaussian(mu, sd)
    from uqcore import metric

    ut = "uncertainty_toolbox"
    acc = uct.metrics_accuracy.prediction_error_metrics(mu, y)
    for key, value in acc.items():
        assert math.isclose(metric(key, pred, y), float(value), rel_tol=1e-9)
    cal = uct.metrics.get_all_average_calibration(mu, sd, y, 100, verbose=False)
    assert math.isclose(metric("rmsce", pred, y, compat=ut), cal["rms_cal"], rel_tol=1e-9)
    assert math.isclose(metric("ece", pred, y, compat=ut), cal["ma_cal"], rel_tol=1e-9)
    assert math.isclose(
        metric("miscalibration_area", pred, y, compat=ut), cal["miscal_area"], rel_tol=1e-9
    )


@pytest.mark.slow
def test_adversarial_part_agrees_in_distribution() -> None:
    """The root-mean-squared half of the adversarial part (what get_all_metrics reports as
    ``rms_adv_group_cal``: the peer's adversarial_group_calibration with num_bins = 100, as
    get_all_adversarial_group_calibration calls it; its mean-absolute half, drawn there too, is
    left out) agrees in distribution with ours."""
    mu, sd, y = _data(50, 4)
    np.random.seed(4)  # noqa: NPY002  (the peer draws from the legacy global RNG)
    runs, ours_runs, trials = 7, 80, 10  # trials: both procedures' default num_trials
    ut = [
        uct.adversarial_group_calibration(mu, sd, y, cali_type="root_mean_sq", num_bins=100)
        for _ in range(runs)
    ]
    pred = P.Gaussian(mu, sd)
    from uqcore import metric

    ours = [
        metric(
            "adversarial_group_calibration",
            pred,
            y,
            cali_type="root_mean_sq",
            compat="uncertainty_toolbox",
            seed=s,
        )
        for s in range(ours_runs)
    ]
    ut_mean = np.array([r.score_mean for r in ut])
    ours_mean = np.array([r["score_mean"] for r in ours])
    # Means over runs per group size agree within 3.9 standard errors of the difference. A
    # run's score is the mean over its trials of the worst of 10 random groups, and each run
    # reports the trials' standard deviation (ddof = 1; the peer calls it score_stderr): the
    # trials are independent within and across runs, so the variance of a run mean is the
    # trials' variance pooled over the runs (7 · 9 degrees of freedom, where the spread of 7
    # run means has 6) over the trials. Simulated from 10⁵ trials of each size: on agreeing
    # procedures some size fails with probability 3·10⁻³ (8 runs, their means' spread and 5
    # standard errors: 5·10⁻³), and a shift of the means by 0.2 of the trials' standard
    # deviation or more is detected at least as often as with those.
    ut_var = np.mean(np.array([r.score_stderr for r in ut]) ** 2, axis=0)
    ours_var = np.mean(np.array([r["score_std"] for r in ours], dtype=float) ** 2, axis=0)
    se = np.sqrt(ut_var / (trials * runs) + ours_var / (trials * ours_runs))
    diff = np.abs(ut_mean.mean(axis=0) - ours_mean.mean(axis=0))
    assert np.all(diff <= 3.9 * se + 1e-12), (diff, se)


def test_needs_gaussian() -> None:
    with pytest.raises(UQValidationError, match="gaussian"):
        uncertainty_toolbox_metrics(P.Laplace(np.zeros(3), np.ones(3)), np.zeros(3))
