"""Predictive quality of classification predictions: accuracy, top-k accuracy, NLL, Brier.

All are computed on the predictive distribution p̄ (the BMA for an ensemble, α/α_0 for a
Dirichlet) and are weighted means over samples: Σ_i w_i t_i / Σ_i w_i.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

from uqcore.batch import ClassificationBatch
from uqcore.options import Range
from uqcore.registry import register, undefined

__all__ = ["accuracy", "brier", "nll", "top5_accuracy"]

_TASK = "classification"


def _correct_terms(batch: ClassificationBatch) -> Any:
    return batch.correct


@register(
    "accuracy",
    task=_TASK,
    family="quality",
    needs={"probs"},
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="standard",
    mean_terms=_correct_terms,
)
def accuracy(batch: ClassificationBatch) -> float:
    """Share of samples whose predicted class argmax_c p̄_c equals the label.

    accuracy = Σ_i w_i 1{ŷ_i = y_i} / Σ_i w_i, ŷ_i = argmax_c p̄_ic (the first of tied maxima).
    Best value 1.
    """
    return batch.mean(batch.correct)


@register(
    "top5_accuracy",
    task=_TASK,
    family="quality",
    needs={"probs"},
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="Russakovsky et al. 2015, ImageNet large scale visual recognition challenge",
)
def top5_accuracy(
    batch: ClassificationBatch, *, k: Annotated[int, Range(lo=1)] = 5
) -> float | None:
    """Share of samples whose label is among the k most probable classes (k = 5 by default).

    The label y_i counts as in the top k when fewer than k classes have a strictly larger
    probability: #{c : p̄_ic > p̄_iy_i} < k (ties are counted in the label's favour).
    Undefined (``None`` with a warning) when C < k or k < 1. Best value 1.
    """
    c = batch.prediction.n_classes
    if k < 1 or c < k:
        undefined("top5_accuracy", f"needs at least k = {k} classes, found C = {c}")
        return None
    p = batch.probs
    py = p[np.arange(batch.n), batch.y]
    above = np.sum(p > py[:, None], axis=1)
    return batch.mean((above < k).astype(float))


@register(
    "nll",
    task=_TASK,
    family="quality",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, None),
    best=0.0,
    reference="Good 1952, Rational decisions (log loss); Gneiting & Raftery 2007",
)
def nll(batch: ClassificationBatch) -> float | None:
    """Negative log-likelihood (log loss) of the labels: Σ_i w_i (−log p̄_iy_i) / Σ_i w_i.

    Natural log, no clipping: a zero probability on a label of positive weight makes the NLL
    infinite, reported as ``None`` with a warning. Best value 0.
    """
    py = batch.probs[np.arange(batch.n), batch.y]
    w = batch.weights_or_ones()
    bad = (py <= 0) & (w > 0)
    if bool(np.any(bad)):
        i = int(np.argmax(bad))
        undefined("nll", f"the label of row {i} has probability 0 (infinite log loss)")
        return None
    with np.errstate(divide="ignore"):
        terms = -np.log(np.where(w > 0, py, 1.0))
    return batch.mean(terms)


def _brier_terms(batch: ClassificationBatch) -> Any:
    p = batch.probs
    py = p[np.arange(batch.n), batch.y]
    # Σ_c p_c² without an N×C temporary
    return np.einsum("nc,nc->n", p, p) - 2.0 * py + 1.0


@register(
    "brier",
    task=_TASK,
    family="quality",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 2.0),
    best=0.0,
    reference="Brier 1950, Verification of forecasts expressed in terms of probability",
    mean_terms=_brier_terms,
)
def brier(batch: ClassificationBatch) -> float:
    """Multiclass Brier score, summed over classes: Σ_i w_i Σ_c (p̄_ic − 1{c = y_i})² / Σ_i w_i.

    Scaling: the sum over the C classes (Brier's original definition), in [0, 2]; divide by C
    for the per-class mean that some libraries report. Best value 0.
    """
    return batch.mean(_brier_terms(batch))
