"""Decompositions of total predictive uncertainty into aleatoric and epistemic parts.

Information-theoretic (IT; Depeweg et al. 2018, mucsanyi2024 eq. 1):
    H(p̄) = E_m[H(p_m)] + (1/M) Σ_m KL(p_m ‖ p̄)
    total = entropy_bma, aleatoric = expected_entropy, epistemic = mutual_information.

Bregman, for the log score (Gruber & Buettner 2023; mucsanyi2024 appendix B), with the dual
BMA p̃ ∝ exp(E[log p]):
    E_m[CE(p̃, p_m)] = H(p̃) + (1/M) Σ_m KL(p̃ ‖ p_m)
    total = bregman_total, aleatoric = entropy_dual_bma, epistemic = expected_divergence.

Each component is computed from its own formula (not as a difference), so the identity
total = aleatoric + epistemic is a check; it holds to rounding (1e-12 for moderate C) and
:func:`decompose_it` / :func:`decompose_bregman` verify it to :data:`IDENTITY_ATOL`. With
M = 1 the epistemic part is exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.predictions.classification import ClassificationPrediction

__all__ = ["IDENTITY_ATOL", "Decomposition", "decompose_bregman", "decompose_it"]

#: Largest |total − (aleatoric + epistemic)| (relative to max(1, |total|)) accepted.
IDENTITY_ATOL = 1e-9


@dataclass(frozen=True)
class Decomposition:
    """Per-sample components (arrays of N) of one decomposition."""

    kind: str
    total: np.ndarray[Any, Any]
    aleatoric: np.ndarray[Any, Any]
    epistemic: np.ndarray[Any, Any]


def _decompose(pred: Any, kind: str, names: tuple[str, str, str]) -> Decomposition:
    if not isinstance(pred, ClassificationPrediction) or "second_order" not in pred.capabilities:
        raise UQValidationError(
            f"decompose_{kind} needs a second-order prediction (Ensemble or Dirichlet), found "
            f"{type(pred).__name__}"
        )
    total, ale, epi = (pred.estimate(n) for n in names)
    gap = np.abs(total - (ale + epi)) / np.maximum(1.0, np.abs(total))
    if gap.size and float(np.max(gap)) > IDENTITY_ATOL:  # pragma: no cover - a bug guard
        i = int(np.argmax(gap))
        raise RuntimeError(f"{kind} decomposition identity fails at row {i}: gap {gap[i]:.3g}")
    return Decomposition(kind, total, ale, epi)


def decompose_it(pred: Any) -> Decomposition:
    """Information-theoretic decomposition: H(p̄) = E[H(p_m)] + mutual information.

    >>> import numpy as np
    >>> from uqcore.predictions import Ensemble
    >>> d = decompose_it(Ensemble(member_probs=np.array([[[0.9, 0.1]], [[0.1, 0.9]]])))
    >>> [round(float(v[0]), 6) for v in (d.total, d.aleatoric, d.epistemic)]
    [0.693147, 0.325083, 0.368064]
    """
    return _decompose(pred, "it", ("entropy_bma", "expected_entropy", "mutual_information"))


def decompose_bregman(pred: Any) -> Decomposition:
    """Bregman (log-score) decomposition: E[CE(p̃, p_m)] = H(p̃) + E[KL(p̃ ‖ p_m)].

    >>> import numpy as np
    >>> from uqcore.predictions import Ensemble
    >>> d = decompose_bregman(Ensemble(member_probs=np.array([[[0.9, 0.1]], [[0.1, 0.9]]])))
    >>> [round(float(v[0]), 6) for v in (d.total, d.aleatoric, d.epistemic)]
    [1.203973, 0.693147, 0.510826]
    """
    return _decompose(pred, "bregman", ("bregman_total", "entropy_dual_bma", "expected_divergence"))
