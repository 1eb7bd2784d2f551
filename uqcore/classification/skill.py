"""Skill scores of classification predictions against climatology: 1 − S/S_ref, D²-style.

The reference ("climatology") forecasts for every row the weighted class frequencies of the
evaluated set's labels, p̄_c = Σ_i w_i 1{y_i = c} / Σ_i w_i — the best constant forecast
under the Brier and log scores. As for regression (:mod:`uqcore.regression.skill`) the
skill is 1 − S(prediction)/S(climatology): 1 is perfect, 0 is climatology, negative is
worse; undefined (``None`` with a warning) where the reference scores 0 (one class only).

They are ratios of two weighted means whose reference moves with the resample's own class
frequencies, not weighted means of fixed per-row terms, so they declare no ``mean_terms``;
a resample costs O(N·C), as the score itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uqcore.batch import ClassificationBatch
from uqcore.classification.accuracy import BrierVariant
from uqcore.registry import register, undefined
from uqcore.regression.skill import model_score

__all__ = ["brier_skill", "class_frequencies", "log_loss_skill"]

_TASK = "classification"
_D2 = "scikit-learn's d2_brier_score and d2_log_loss_score"
_SKILL: dict[str, Any] = {
    "task": _TASK,
    "family": "skill",
    "needs": {"probs"},
    "direction": "higher",
    "bounds": (None, 1.0),
    "best": 1.0,
}
#: Why a classification skill score is undefined when the reference scores 0.
ONE_CLASS = "every label is of one class (the climatological reference scores 0)"


def _unit_weights(batch: ClassificationBatch) -> np.ndarray[Any, Any] | None:
    """The weights divided by their largest (the frequencies do not change; no overflow)."""
    w = batch.weights
    return None if w is None else w / float(np.max(w))


def class_frequencies(batch: ClassificationBatch) -> np.ndarray[Any, Any]:
    """p̄_c = Σ_i w_i 1{y_i = c} / Σ_i w_i, length C (the climatological forecast)."""
    w = _unit_weights(batch)
    counts = np.bincount(batch.y, weights=w, minlength=batch.prediction.n_classes)
    return counts / float(np.sum(counts))


def _ratio(name: str, score: float | None, reference: float) -> float | None:
    if score is None:
        return None
    if not reference > 0.0:
        undefined(name, ONE_CLASS)
        return None
    return 1.0 - score / reference


@register("brier_skill", reference=_D2 + "; Murphy 1973; Brier 1950", **_SKILL)
def brier_skill(batch: ClassificationBatch, *, variant: BrierVariant = "bma") -> float | None:
    """Brier skill score against climatology: 1 − BS(prediction) / BS(class frequencies).

    BS is the ``brier`` metric with the same ``variant``; the reference forecasts p̄ (the
    weighted class frequencies) for every row, whose score is 1 − Σ_c p̄_c² for ``"bma"``
    (the sum over classes) and ``"members_mean"`` (climatology is one member), half of it for
    ``"binary"`` (C = 2: p̄_0 p̄_1, scikit-learn's ``d2_brier_score``), and a(1 − a) for
    ``"top_class"``, whose event is "the top label is right" and whose climatology is the
    weighted accuracy a. Undefined where the reference is 0 (one class only; for
    ``"top_class"``: all right or all wrong) or the variant is (see ``brier``). Best 1.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs([[0.9, 0.1], [0.2, 0.8]])  # BS = (0.02 + 0.08)/2; climatology: 1 − ½ = 0.5
    >>> round(brier_skill(p, np.array([0, 1])), 10)  # 1 − 0.05/0.5
    0.9
    """
    score = model_score(batch, "brier", "brier_skill", _TASK, variant=variant)
    if score is None:
        return None
    if variant == "top_class":
        correct = batch.correct
        w = _unit_weights(batch)
        a = float(np.average(correct, weights=w))
        ref = a * (1.0 - a)
    else:
        freq = class_frequencies(batch)
        ref = 1.0 - float(np.sum(freq * freq))
        if variant == "binary":
            ref /= 2.0
    return _ratio("brier_skill", score, ref)


@register("log_loss_skill", reference=_D2 + "; Good 1952 (log loss)", **_SKILL)
def log_loss_skill(batch: ClassificationBatch) -> float | None:
    """Log-loss skill against climatology (D² log loss): 1 − LL(prediction) / H(p̄).

    LL is the ``nll`` metric (natural log, no clipping); the reference forecasts the weighted
    class frequencies p̄ for every row, whose log loss is their entropy
    H(p̄) = −Σ_c p̄_c log p̄_c (absent classes count 0). This is scikit-learn's
    ``d2_log_loss_score`` (with ``sample_weight`` and ``labels`` = all C classes), which
    clips probabilities to [ε, 1 − ε] (ε of the dtype) where ours does not: they differ only
    where a probability lies within ε of 0 or 1. Undefined where LL is (a label of probability
    0) or H(p̄) = 0 (one class only). Best 1.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs([[0.5, 0.5], [0.5, 0.5]])  # the climatology itself
    >>> log_loss_skill(p, np.array([0, 1]))
    0.0
    """
    score = model_score(batch, "nll", "log_loss_skill", _TASK)
    if score is None:
        return None
    freq = class_frequencies(batch)
    nz = freq[freq > 0]
    return _ratio("log_loss_skill", score, float(-np.sum(nz * np.log(nz))))
