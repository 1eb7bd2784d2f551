"""Aleatoric alignment with human label disagreement, and disentanglement of estimators.

Given soft labels (label distributions per sample, e.g. ImageNet-ReaL or CIFAR-10H votes),
the ground-truth aleatoric uncertainty of a sample is the entropy of its soft label
H(s_i) = −Σ_c s_ic log s_ic (mucsanyi2024 §3.3). Rank correlations are Spearman's ρ with
tied values given their average rank (``scipy.stats.spearmanr``), weighted mid-ranks with
sample weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch, host_weights
from uqcore.classification._ranking import auroc, cached_order, estimate_order, spearman
from uqcore.classification.aggregators import DEFAULT_ESTIMATOR, entropy
from uqcore.predictions.classification import ClassificationPrediction
from uqcore.registry import register, undefined

__all__ = [
    "RankCorrMatrix",
    "aleatoric_rank_corr",
    "auroc_aleatoric",
    "disentanglement_rank_corr",
    "rank_corr_matrix",
]

_TASK = "classification"
_NEEDS = {"probs", "estimates", "soft_labels"}
_REF = "mucsanyi2024 §3.3; Kirchhof et al. 2023; Tran et al. 2022"


def _gt_entropy(batch: ClassificationBatch) -> Any:
    assert batch.soft_labels is not None  # guaranteed by needs={"soft_labels"}
    soft = batch.soft_labels
    return batch.shared("soft_label_entropy", lambda: entropy(soft))


@register(
    "aleatoric_rank_corr",
    task=_TASK,
    family="aleatoric",
    needs=_NEEDS,
    direction="higher",
    bounds=(-1.0, 1.0),
    best=1.0,
    reference=_REF,
)
def aleatoric_rank_corr(
    batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR
) -> float | None:
    """Spearman correlation between the estimate and the entropy of the soft labels.

    ρ = Pearson correlation of the mid-ranks of u_i and H(s_i). Undefined when either is
    constant (e.g. all soft labels one-hot). Best value 1 (not reachable with ties in H(s)).
    """
    gt = _gt_entropy(batch)
    orders = (
        estimate_order(batch, estimator),
        cached_order(batch, "soft_label_entropy", lambda: gt),
    )
    value = spearman(batch.estimate(estimator), gt, batch.weights, orders)
    if value is None:
        undefined("aleatoric_rank_corr", "the estimate or the soft-label entropy is constant")
    return value


@register(
    "auroc_aleatoric",
    task=_TASK,
    family="aleatoric",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="mucsanyi2024 appendix H.4",
)
def auroc_aleatoric(
    batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR
) -> float | None:
    """AUROC of the estimate for telling ambiguous samples (H(s_i) > 0) from unambiguous ones.

    Positives are the samples whose soft label is not one-hot. Undefined when all or none are.
    Best value 1.
    """
    ambiguous = (_gt_entropy(batch) > 0).astype(float)
    u = batch.estimate(estimator)
    value = auroc(u, ambiguous, batch.weights, estimate_order(batch, estimator))
    if value is None:
        undefined("auroc_aleatoric", "needs samples with and without label disagreement")
    return value


@register(
    "disentanglement_rank_corr",
    task=_TASK,
    family="disentanglement",
    needs={"probs", "estimates", "second_order"},
    direction="target",
    bounds=(-1.0, 1.0),
    best=0.0,
    reference="mucsanyi2024 §3.1, Fig. 2",
)
def disentanglement_rank_corr(
    batch: ClassificationBatch,
    *,
    aleatoric: str = "expected_entropy",
    epistemic: str = "mutual_information",
) -> float | None:
    """Spearman correlation between an aleatoric and an epistemic estimate.

    Disentangled estimators need a low correlation (mucsanyi2024 find 0.78–0.99 for the IT
    decomposition). Any two estimators can be named, user-supplied ones included. Undefined
    when either is constant. Target value 0.
    """
    orders = (estimate_order(batch, aleatoric), estimate_order(batch, epistemic))
    value = spearman(batch.estimate(aleatoric), batch.estimate(epistemic), batch.weights, orders)
    if value is None:
        undefined("disentanglement_rank_corr", f"{aleatoric!r} or {epistemic!r} is constant")
    return value


@dataclass(frozen=True)
class RankCorrMatrix:
    """Spearman correlations between estimators: ``matrix[i][j]`` for ``names[i], names[j]``
    (``None`` where undefined: a constant estimator)."""

    names: tuple[str, ...]
    matrix: tuple[tuple[float | None, ...], ...]


def rank_corr_matrix(
    prediction: ClassificationPrediction,
    estimators: Any = None,
    *,
    sample_weight: Any = None,
) -> RankCorrMatrix:
    """The estimator × estimator Spearman matrix (all applicable estimators by default).

    >>> import numpy as np
    >>> from uqcore.predictions import Ensemble
    >>> p = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 20))
    >>> m = rank_corr_matrix(Ensemble(member_probs=p), ["entropy_bma", "entropy_bma"])
    >>> m.matrix
    ((1.0, 1.0), (1.0, 1.0))
    """
    if not isinstance(prediction, ClassificationPrediction):
        raise UQValidationError(
            f"prediction must be a classification prediction, found {type(prediction).__name__}"
        )
    names = tuple(prediction.estimator_names() if estimators is None else estimators)
    weights = host_weights(sample_weight, prediction.n)
    values = [prediction.estimate(n) for n in names]
    rows = []
    for i in range(len(names)):
        rows.append(tuple(spearman(values[i], values[j], weights) for j in range(len(names))))
    return RankCorrMatrix(names, tuple(rows))
