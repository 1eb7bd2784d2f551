"""Uncertainty Toolbox's ``get_all_metrics``, computed with uqcore's registered metrics.

:func:`uncertainty_toolbox_metrics` returns the same nested dictionary as
``uncertainty_toolbox.get_all_metrics(y_pred, y_std, y_true)`` (version 0.1.1, default
arguments) for a Gaussian prediction, with the same numbers (floating-point rounding aside)
except the adversarial group calibration, which Uncertainty Toolbox draws unseeded: here it is
seeded by ``seed`` and agrees with Uncertainty Toolbox in distribution.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uqcore import registry
from uqcore._validation import UQValidationError
from uqcore.batch import Batch, regression_batch

__all__ = ["uncertainty_toolbox_metrics"]

_UT = "uncertainty_toolbox"


def _run(batch: Batch, name: str, **options: Any) -> Any:
    return registry.call(registry.get(name), batch, options)


def uncertainty_toolbox_metrics(
    prediction: Any,
    y: Any,
    *,
    seed: int = 0,
    num_bins: int = 100,
    resolution: int = 99,
    sample_weight: Any = None,
) -> dict[str, Any]:
    """All of Uncertainty Toolbox's metrics, in the structure of its ``get_all_metrics``.

    Parameters
    ----------
    prediction : uqcore.predictions.Gaussian
    y : array_like, shape (N,)
    seed : int
        Seed of the adversarial group calibration draws (Uncertainty Toolbox does not seed).
    num_bins : int
        Uncertainty Toolbox's calibration grid ``linspace(0, 1, num_bins)`` (default 100).
    resolution : int
        Number of levels of the check and interval scores, ``linspace(0.01, 0.99,
        resolution)`` (default 99).
    sample_weight : array_like, optional
        Frequency weights (Uncertainty Toolbox has none; ``None`` reproduces it).

    Returns
    -------
    dict
        ``{"accuracy": {mae, rmse, mdae, marpd, r2, corr}, "avg_calibration": {rms_cal, ma_cal,
        miscal_area}, "adv_group_calibration": {"ma_adv_group_cal": {group_sizes,
        adv_group_cali_mean, adv_group_cali_stderr}, "rms_adv_group_cal": {...}},
        "sharpness": {"sharp"}, "scoring_rule": {nll, crps, check, interval}}`` — floats, and
        numpy arrays for the group calibration curves, as Uncertainty Toolbox returns them.
        ``adv_group_cali_stderr`` is, as there, the standard deviation (ddof = 1) over trials.

    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); mu = rng.normal(size=50); y = mu + rng.normal(size=50)
    >>> out = uncertainty_toolbox_metrics(P.Gaussian(mu, np.ones(50)), y)
    >>> sorted(out)
    ['accuracy', 'adv_group_calibration', 'avg_calibration', 'scoring_rule', 'sharpness']
    """
    if getattr(prediction, "kind", None) != "gaussian":
        raise UQValidationError(
            "uncertainty_toolbox_metrics needs a gaussian prediction (Uncertainty Toolbox "
            f"handles Gaussian predictions only), found {getattr(prediction, 'kind', prediction)!r}"
        )
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 2:
        raise UQValidationError(f"num_bins must be an integer >= 2, found {num_bins!r}")
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 1:
        raise UQValidationError(f"resolution must be an integer >= 1, found {resolution!r}")
    batch = regression_batch(prediction, y, sample_weight)
    grid = [float(v) for v in np.linspace(0.0, 1.0, num_bins)]
    score_levels = [float(v) for v in np.linspace(0.01, 0.99, resolution)]
    cal = {"compat": _UT, "levels": grid}

    accuracy = {name: _run(batch, name) for name in ("mae", "rmse", "mdae", "marpd", "r2", "corr")}
    avg_calibration = {
        "rms_cal": _run(batch, "rmsce", **cal),
        "ma_cal": _run(batch, "ece", **cal),
        "miscal_area": _run(batch, "miscalibration_area", **cal),
    }
    adv: dict[str, Any] = {}
    for key, cali_type in (("ma_adv_group_cal", "mean_abs"), ("rms_adv_group_cal", "root_mean_sq")):
        # The two curves are drawn from independent streams, as two unseeded calls would be.
        res = _run(
            batch,
            "adversarial_group_calibration",
            cali_type=cali_type,
            seed=seed if cali_type == "mean_abs" else seed + 1,
            **cal,
        )
        adv[key] = {
            "group_sizes": np.asarray(res["group_sizes"], dtype=np.float64),
            "adv_group_cali_mean": np.asarray(res["score_mean"], dtype=np.float64),
            "adv_group_cali_stderr": np.asarray(
                [np.nan if v is None else v for v in res["score_std"]], dtype=np.float64
            ),
        }
    sharp = {"sharp": _run(batch, "sharpness")}
    scoring = {
        # uqcore's defaults are Uncertainty Toolbox's conventions for these (scaled means).
        "nll": _run(batch, "nll"),
        "crps": _run(batch, "crps"),
        "check": _run(batch, "check_score", levels=score_levels),
        "interval": _run(batch, "interval_score", levels=score_levels),
    }
    return {
        "accuracy": accuracy,
        "avg_calibration": avg_calibration,
        "adv_group_calibration": adv,
        "sharpness": sharp,
        "scoring_rule": scoring,
    }
