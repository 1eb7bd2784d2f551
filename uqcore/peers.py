"""Which options give the numbers of other libraries and papers: the conventions by name.

Where the literature or a popular library computes a metric another way, uqcore offers that way
as a named option value (the defaults follow the papers this project reproduces). Each entry
below names the metric, the options that reproduce the peer, and the peer's function; the test
suite compares each with the peer's own implementation where it is installable (the ``bench``
and ``bench-torch`` extras) and with the formula otherwise, and checks that every entry's
options are accepted by the registry. ``docs/metrics.md`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PEER_CONVENTIONS", "PeerConvention"]


@dataclass(frozen=True)
class PeerConvention:
    """Metric ``metric`` of ``task`` with ``options`` gives ``peer``'s number."""

    task: str
    metric: str
    options: dict[str, Any] = field(hash=False)
    peer: str
    note: str = ""


_TU = "torch-uncertainty"

PEER_CONVENTIONS: tuple[PeerConvention, ...] = (
    # -- regression ---------------------------------------------------------------------------
    PeerConvention(
        "regression",
        "ause",
        {"rule": "trapezoid"},
        f"{_TU} `AUSE`",
        "trapezoid over the removal fractions, as the original sparsification code",
    ),
    PeerConvention("regression", "aurg", {"rule": "trapezoid"}, f"{_TU} (AUSE's curves)"),
    PeerConvention(
        "regression",
        "ence",
        {"binning": "width"},
        "netcal `ENCE`",
        "equal-width bins of σ between its min and max",
    ),
    PeerConvention(
        "regression",
        "nll",
        {"bandwidth": "scoringrules"},
        "scoringrules `logs_ensemble`",
        "samples: 1.06·min(σ̂, IQR/1.34)·S^(−1/5) per row",
    ),
    PeerConvention(
        "regression",
        "nll",
        {"bandwidth": 0.5},
        "scoringrules `logs_ensemble(bw=...)`",
        "samples: a fixed bandwidth, or one per row",
    ),
    PeerConvention(
        "regression",
        "ece",
        {"compat": "uncertainty_toolbox"},
        "Uncertainty Toolbox `mean_absolute_calibration_error`",
    ),
    PeerConvention(
        "regression",
        "rmsce",
        {"compat": "uncertainty_toolbox"},
        "Uncertainty Toolbox `root_mean_squared_calibration_error`",
    ),
    PeerConvention(
        "regression",
        "miscalibration_area",
        {"compat": "uncertainty_toolbox"},
        "Uncertainty Toolbox `miscalibration_area`",
    ),
    PeerConvention(
        "regression",
        "adversarial_group_calibration",
        {"compat": "uncertainty_toolbox"},
        "Uncertainty Toolbox `adversarial_group_calibration`",
    ),
    # -- classification -----------------------------------------------------------------------
    PeerConvention(
        "classification",
        "aurc",
        {"convention": "trapezoid_rows"},
        f"{_TU} `AURC`",
        "trapezoid over coverage divided by (1 − 1/N)",
    ),
    PeerConvention(
        "classification",
        "augrc",
        {"convention": "trapezoid_rows"},
        f"{_TU} `AUGRC`",
    ),
    PeerConvention(
        "classification",
        "aurc",
        {"convention": "trapezoid"},
        "scikit-learn `auc` of the risk–coverage curve",
    ),
    PeerConvention(
        "classification",
        "eaurc",
        {"optimum": "continuous"},
        "Geifman et al. 2019's code (and untangle)",
        "AURC* ≈ r + (1 − r) ln(1 − r)",
    ),
    PeerConvention(
        "classification",
        "ece",
        {"bins_closed": "left"},
        "torchmetrics `multiclass_calibration_error` (norm='l1')",
        "bins [lo, hi)",
    ),
    PeerConvention(
        "classification",
        "mce",
        {"bins_closed": "left"},
        "torchmetrics `multiclass_calibration_error` (norm='max')",
    ),
    PeerConvention(
        "classification",
        "ece_l2",
        {"bins_closed": "left", "debias": False},
        "torchmetrics `multiclass_calibration_error` (norm='l2')",
    ),
    PeerConvention(
        "classification",
        "ece",
        {"n_bins": 10, "bins_closed": "left_last_closed"},
        "netcal `ECE`",
        "bins [lo, hi), the last one closed",
    ),
    PeerConvention(
        "classification",
        "mce",
        {"n_bins": 10, "bins_closed": "left_last_closed"},
        "netcal `MCE`",
    ),
    PeerConvention(
        "classification",
        "ace",
        {"n_bins": 10, "bins_closed": "left_last_closed"},
        "netcal `ACE`",
        "unweighted mean over the non-empty equal-width bins",
    ),
    PeerConvention(
        "classification",
        "ece_adaptive",
        {"ties": "split"},
        f"{_TU} `AdaptiveCalibrationError`",
        "tied confidences split between bins by position",
    ),
    PeerConvention(
        "classification",
        "brier",
        {"variant": "members_mean"},
        f"{_TU} `BrierScore` of an ensemble",
        "the mean of the members' Brier scores",
    ),
    PeerConvention(
        "classification",
        "brier",
        {"variant": "top_class"},
        f"{_TU} `BrierScore(top_class=True)`",
    ),
    PeerConvention(
        "classification",
        "brier",
        {"variant": "binary"},
        "scikit-learn `brier_score_loss`",
        "two classes: half the sum over the classes",
    ),
)
