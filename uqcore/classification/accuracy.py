"""Predictive quality of classification predictions: accuracy, top-k accuracy, NLL, Brier.

All are computed on the predictive distribution p̄ (the BMA for an ensemble, α/α_0 for a
Dirichlet) and are weighted means over samples: Σ_i w_i t_i / Σ_i w_i.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch
from uqcore.options import Range
from uqcore.registry import NO_TERMS, register, undefined

__all__ = ["accuracy", "brier", "nll", "top5_accuracy"]

_TASK = "classification"
BrierVariant = Literal["bma", "members_mean", "top_class", "binary"]


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


def _brier_undefined(batch: ClassificationBatch, variant: str) -> str | None:
    """Why ``variant`` of the Brier score is undefined for this prediction, or ``None``."""
    pred = batch.prediction
    if variant == "binary" and pred.n_classes != 2:
        return (
            f"variant='binary' is the Brier score of two classes; this prediction has "
            f"C = {pred.n_classes} classes (use variant='bma')"
        )
    if variant == "members_mean" and pred.kind == "dirichlet":
        return (
            "variant='members_mean' needs member predictions (an ensemble, or a first-order "
            "prediction as its one member); a dirichlet prediction has none"
        )
    return None


def _brier_terms(batch: ClassificationBatch, *, variant: BrierVariant = "bma") -> Any:
    """Per-row Brier terms of ``variant`` (see :func:`brier`)."""
    if variant not in ("bma", "members_mean", "top_class", "binary"):
        raise UQValidationError(
            f"variant must be 'bma', 'members_mean', 'top_class' or 'binary', found {variant!r}"
        )
    if variant == "top_class":
        gap = batch.confidence - batch.correct
        return gap * gap
    pred = batch.prediction
    if _brier_undefined(batch, variant) is not None:
        return NO_TERMS
    p = batch.probs
    py = p[np.arange(batch.n), batch.y]
    # Σ_c p_c² without an N×C temporary
    terms = np.einsum("nc,nc->n", p, p) - 2.0 * py + 1.0
    if variant == "binary":
        return terms / 2.0
    if variant == "members_mean" and pred.kind == "ensemble":
        # (1/M) Σ_m Σ_c (p_mc − y_c)² = Σ_c (p̄_c − y_c)² + Σ_c Var_m(p_mc): the BMA's term
        # plus C times the aggregator mean_variance_probs, from the one pass over the members
        return terms + pred.n_classes * batch.estimate("mean_variance_probs")
    return terms


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
def brier(batch: ClassificationBatch, *, variant: BrierVariant = "bma") -> float | None:
    """Multiclass Brier score, summed over classes: Σ_i w_i Σ_c (p̄_ic − 1{c = y_i})² / Σ_i w_i.

    Every variant is a weighted mean Σ_i w_i t_i / Σ_i w_i of per-row terms t_i:

    ``"bma"`` (default)  t_i = Σ_c (p̄_ic − 1{c = y_i})², the Brier score of the predictive
                         distribution (Brier 1950), in [0, 2]: the sum over the C classes;
                         divide by C for the per-class mean that some libraries report.
                         scikit-learn's ``brier_score_loss`` for C > 2 and torch-uncertainty's
                         ``BrierScore`` of an N×C input.
    ``"members_mean"``   t_i = (1/M) Σ_m Σ_c (p_mic − 1{c = y_i})², the mean of the members'
                         Brier scores, as torch-uncertainty's ``BrierScore`` computes it for a
                         (N, M, C) input. It equals the BMA's term plus Σ_c Var_m(p_mic), so
                         it is never below ``"bma"``. A first-order prediction is its one
                         member (the same as ``"bma"``); a Dirichlet has no members
                         (undefined: ``None`` with the reason).
    ``"top_class"``      t_i = (max_c p̄_ic − 1{ŷ_i = y_i})², the Brier score of the top-label
                         confidence as a forecast of being right, in [0, 1];
                         torch-uncertainty's ``BrierScore(top_class=True)``.
    ``"binary"``         t_i = ½ Σ_c (p̄_ic − 1{c = y_i})² = (p̄_i1 − 1{y_i = 1})² for C = 2, in
                         [0, 1]: scikit-learn's ``brier_score_loss`` of two classes (which
                         halves the sum over the classes); undefined (``None`` with the
                         reason) for C ≠ 2.

    Best value 0.
    """
    why = _brier_undefined(batch, variant)
    if why is not None:
        undefined("brier", why)
        return None
    return batch.mean(_brier_terms(batch, variant=variant))
