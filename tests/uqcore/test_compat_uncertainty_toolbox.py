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
    out = []
    for seed, n in ((0, 40), (1, 120)):
        mu, sd, y = _data(n, seed)
        np.random.seed(seed)  # noqa: NPY002  (the peer draws from the legacy global RNG)
        ut = uct.get_all_metrics(mu, sd, y, verbose=False)
        out.append((ut, uncertainty_toolbox_metrics(P.Gaussian(mu, sd), y, seed=seed)))
    return out


def test_same_structure_and_numbers(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    for ut, ours in pairs:
        assert set(ut) == set(ours)
        for group in ("accuracy", "avg_calibration", "sharpness", "scoring_rule"):
            assert set(ut[group]) == set(ours[group]), group
            for key, value in ut[group].items():
                assert math.isclose(ours[group][key], float(value), rel_tol=1e-9, abs_tol=1e-12), (
                    group,
                    key,
                )
        for key in ("ma_adv_group_cal", "rms_adv_group_cal"):
            a, b = ut["adv_group_calibration"][key], ours["adv_group_calibration"][key]
            assert set(a) == set(b)
            np.testing.assert_allclose(b["group_sizes"], a["group_sizes"], rtol=1e-12)
            assert b["adv_group_cali_mean"].shape == a["adv_group_cali_mean"].shape
            # The whole-set group is deterministic: it equals the average calibration.
            assert math.isclose(
                b["adv_group_cali_mean"][-1], float(a["adv_group_cali_mean"][-1]), rel_tol=1e-9
            )


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
    mu, sd, y = _data(50, 4)
    np.random.seed(4)  # noqa: NPY002  (the peer draws from the legacy global RNG)
    runs = 8
    ut = np.array(
        [
            uct.metrics.get_all_adversarial_group_calibration(mu, sd, y, 100, verbose=False)[
                "rms_adv_group_cal"
            ]["adv_group_cali_mean"]
            for _ in range(runs)
        ]
    )
    pred = P.Gaussian(mu, sd)
    from uqcore import metric

    ours = np.array(
        [
            metric(
                "adversarial_group_calibration",
                pred,
                y,
                cali_type="root_mean_sq",
                compat="uncertainty_toolbox",
                seed=s,
            )["score_mean"]
            for s in range(80)
        ]
    )
    se = np.sqrt(ut.var(axis=0, ddof=1) / runs + ours.var(axis=0, ddof=1) / 80)
    assert np.all(np.abs(ut.mean(axis=0) - ours.mean(axis=0)) <= 5 * se + 1e-12)


def test_needs_gaussian() -> None:
    with pytest.raises(UQValidationError, match="gaussian"):
        uncertainty_toolbox_metrics(P.Laplace(np.zeros(3), np.ones(3)), np.zeros(3))
