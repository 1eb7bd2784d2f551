"""Out-of-distribution detection with an uncertainty estimate (OOD samples positive).

Given ``ood`` flags (True = out of distribution) for a mixed ID/OOD set, the estimate u_i
(higher = more uncertain; default ``one_minus_max_prob_bma``) should be higher on OOD rows
(mucsanyi2024 §3.2). Ties are exact (see :mod:`uqcore.classification._ranking`).
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch
from uqcore.classification._ranking import auroc, average_precision, blocks, estimate_order
from uqcore.classification.aggregators import DEFAULT_ESTIMATOR
from uqcore.options import Range
from uqcore.registry import register, undefined

__all__ = ["aupr_ood", "auroc_ood", "fpr_at_95tpr"]

_TASK = "classification"
_NEEDS = {"probs", "estimates", "ood"}
_HENDRYCKS = "Hendrycks & Gimpel 2017 (ICLR); mucsanyi2024 §3.2"


def _flags(batch: ClassificationBatch) -> Any:
    assert batch.ood is not None  # guaranteed by needs={"ood"}
    return batch.ood.astype(float)


@register(
    "auroc_ood",
    task=_TASK,
    family="out_of_distribution",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference=_HENDRYCKS,
)
def auroc_ood(batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR) -> float | None:
    """AUROC of the uncertainty for telling OOD from ID samples (OOD positive).

    AUROC = P(u_ood > u_id) + ½ P(u_ood = u_id) under the weights. Undefined when all rows are
    OOD or none is. Best value 1; 0.5 is chance.
    """
    u = batch.estimate(estimator)
    value = auroc(u, _flags(batch), batch.weights, estimate_order(batch, estimator))
    if value is None:
        undefined("auroc_ood", "needs both OOD and ID samples")
    return value


@register(
    "aupr_ood",
    task=_TASK,
    family="out_of_distribution",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference=_HENDRYCKS,
)
def aupr_ood(batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR) -> float | None:
    """Average precision of the uncertainty for finding OOD samples (OOD positive).

    AP = Σ_k (R_k − R_{k−1}) P_k over the distinct thresholds (scikit-learn's definition).
    Undefined when no row is OOD. Best value 1.
    """
    u = batch.estimate(estimator)
    value = average_precision(u, _flags(batch), batch.weights, estimate_order(batch, estimator))
    if value is None:
        undefined("aupr_ood", "no sample is OOD")
    return value


@register(
    "fpr_at_95tpr",
    task=_TASK,
    family="out_of_distribution",
    needs=_NEEDS,
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Liang et al. 2018, ODIN (ICLR); Hendrycks & Gimpel 2017",
)
def fpr_at_95tpr(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    tpr: Annotated[float, Range(0, 1, lo_open=True)] = 0.95,
) -> float | None:
    """False-positive rate on ID samples at the threshold where the OOD recall reaches ``tpr``.

    Flagging u ≥ t, the threshold is the largest distinct value t of u with
    TPR(t) = W_ood(u ≥ t) / W_ood ≥ tpr; the result is FPR(t) = W_id(u ≥ t) / W_id (no
    interpolation between thresholds). Undefined without both OOD and ID samples. Best value 0.
    """
    if not 0.0 < float(tpr) <= 1.0:
        raise UQValidationError(f"tpr must lie in (0, 1], found {tpr!r}")
    u = batch.estimate(estimator)
    b = blocks(u, _flags(batch), batch.weights, estimate_order(batch, estimator))
    pos = b.positive[::-1]
    neg = (b.weight - b.positive)[::-1]
    wp, wn = float(np.sum(pos)), float(np.sum(neg))
    if wp <= 0.0 or wn <= 0.0:
        undefined("fpr_at_95tpr", "needs both OOD and ID samples")
        return None
    tprs = np.cumsum(pos) / wp
    j = int(np.argmax(tprs >= float(tpr) - 1e-12))
    return float(np.cumsum(neg)[j] / wn)
