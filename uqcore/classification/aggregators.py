"""Uncertainty aggregators: second-order prediction -> one scalar uncertainty per sample.

Every aggregator returns u_i with *higher = more uncertain*. Notation: member probabilities
p_m (m = 1..M), the Bayesian model average (BMA) p̄ = (1/M) Σ_m p_m, the entropy
H(p) = −Σ_c p_c log p_c (natural log, 0 log 0 = 0), KL(p‖q) = Σ_c p_c log(p_c / q_c), and the
"dual BMA" p̃ ∝ exp((1/M) Σ_m log p_m), the normalised geometric mean (Gruber & Buettner
2023). For a Dirichlet(α), α_0 = Σ_c α_c, p̄ = α/α_0 and the expectations have closed forms
(ψ is the digamma function): E[log p_c] = ψ(α_c) − ψ(α_0) and
E[H(p)] = ψ(α_0 + 1) − Σ_c (α_c/α_0) ψ(α_c + 1) (Malinin & Gales 2018, eq. 17).

For the dual BMA the member probabilities enter through log max(p, 2.2e-308) (the smallest
normal float64), so that a zero probability gives a large finite log. With M = 1 the dual BMA
is the member itself and every epistemic term is exactly 0.

An ensemble's aggregators are computed together in one pass over the M×N×C input, chunk by
chunk over N (a chunk holds about 2**21 float64 values), and cached on the prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sps

from uqcore._validation import UQValidationError
from uqcore.predictions.classification import (
    ClassificationPrediction,
    Dirichlet,
    Ensemble,
    Logits,
    Probs,
)

__all__ = ["AGGREGATORS", "DEFAULT_ESTIMATOR", "Aggregator", "applicable", "compute"]

NDArray = np.ndarray[Any, Any]

#: The estimator metrics use when none is given.
DEFAULT_ESTIMATOR = "one_minus_max_prob_bma"

_TINY = float(np.finfo(np.float64).tiny)
_GRUBER = "Gruber & Buettner 2023, Uncertainty estimates of predictions via a general bias-variance decomposition (AISTATS); mucsanyi2024 appendix B"
_DEPEWEG = "Depeweg et al. 2018 (ICML); Houlsby et al. 2011; mucsanyi2024 eq. 1"
_MUCSANYI = "mucsanyi2024 appendix D (uncertainty aggregators)"


@dataclass(frozen=True)
class Aggregator:
    """One registered aggregator: its formula, reference, and place in a decomposition."""

    name: str
    summary: str
    formula: str
    reference: str
    decomposition: str | None  # "it", "bregman" or None
    component: str | None  # "total", "aleatoric", "epistemic" or None
    kinds: frozenset[str]

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description."""
        return {
            "name": self.name,
            "summary": self.summary,
            "formula": self.formula,
            "reference": self.reference,
            "decomposition": self.decomposition,
            "component": self.component,
            "kinds": sorted(self.kinds),
        }


_ALL = frozenset({"probs", "logits", "ensemble", "dirichlet"})
_SECOND = frozenset({"ensemble", "dirichlet"})

AGGREGATORS: dict[str, Aggregator] = {
    a.name: a
    for a in (
        Aggregator(
            "one_minus_max_prob_bma",
            "One minus the largest BMA probability",
            "1 − max_c p̄_c",
            _MUCSANYI,
            None,
            None,
            _ALL,
        ),
        Aggregator(
            "one_minus_expected_max_prob",
            "One minus the members' mean largest probability",
            "1 − (1/M) Σ_m max_c p_mc",
            _MUCSANYI,
            None,
            None,
            frozenset({"ensemble"}),
        ),
        Aggregator(
            "entropy_bma",
            "Entropy of the BMA (IT total uncertainty)",
            "H(p̄)",
            _DEPEWEG,
            "it",
            "total",
            _ALL,
        ),
        Aggregator(
            "expected_entropy",
            "Mean entropy of the members (IT aleatoric uncertainty)",
            "(1/M) Σ_m H(p_m); Dirichlet: ψ(α_0+1) − Σ_c (α_c/α_0) ψ(α_c+1)",
            _DEPEWEG,
            "it",
            "aleatoric",
            _SECOND,
        ),
        Aggregator(
            "mutual_information",
            "Mutual information between label and model (IT epistemic uncertainty)",
            "(1/M) Σ_m KL(p_m ‖ p̄) (generalised Jensen–Shannon divergence) = H(p̄) − E[H(p)]; "
            "Dirichlet: H(p̄) − E[H(p)] in closed form",
            _DEPEWEG,
            "it",
            "epistemic",
            _SECOND,
        ),
        Aggregator(
            "one_minus_max_prob_dual_bma",
            "One minus the largest dual-BMA probability",
            "1 − max_c p̃_c",
            _GRUBER,
            None,
            None,
            _SECOND,
        ),
        Aggregator(
            "entropy_dual_bma",
            "Entropy of the dual BMA (Bregman aleatoric uncertainty)",
            "H(p̃)",
            _GRUBER,
            "bregman",
            "aleatoric",
            _SECOND,
        ),
        Aggregator(
            "expected_divergence",
            "Mean KL divergence from the dual BMA to the members (Bregman epistemic)",
            "(1/M) Σ_m KL(p̃ ‖ p_m) = −log Σ_c exp(E[log p_c])",
            _GRUBER,
            "bregman",
            "epistemic",
            _SECOND,
        ),
        Aggregator(
            "bregman_total",
            "Mean cross-entropy of the members under the dual BMA (Bregman total)",
            "(1/M) Σ_m CE(p̃, p_m) = −Σ_c p̃_c E[log p_c] = H(p̃) + E[KL(p̃ ‖ p)]",
            _GRUBER,
            "bregman",
            "total",
            _SECOND,
        ),
        Aggregator(
            "dempster_shafer",
            "Dempster–Shafer uncertainty mass of the evidence exp(logits)",
            "C / (C + Σ_c exp(z̄_c)) with z̄ the (member-mean) logits; Dirichlet: C / α_0",
            "Sensoy et al. 2018, Evidential deep learning (NeurIPS); mucsanyi2024 appendix D",
            None,
            None,
            frozenset({"logits", "ensemble", "dirichlet"}),
        ),
        Aggregator(
            "mean_variance_probs",
            "Mean over classes of the variance of the member probabilities",
            "(1/C) Σ_c Var_m(p_mc) (population variance, divisor M); Dirichlet: "
            "(1/C) Σ_c α_c(α_0 − α_c) / (α_0² (α_0 + 1))",
            _MUCSANYI,
            None,
            None,
            _SECOND,
        ),
        Aggregator(
            "mean_variance_logits",
            "Mean over classes of the variance of the member logits",
            "(1/C) Σ_c Var_m(z_mc) (population variance, divisor M)",
            _MUCSANYI,
            None,
            None,
            frozenset({"ensemble"}),
        ),
        Aggregator(
            "margin",
            "One minus the margin between the two largest BMA probabilities",
            "1 − (p̄_(1) − p̄_(2)), p̄_(1) ≥ p̄_(2) the two largest",
            _MUCSANYI,
            None,
            None,
            _ALL,
        ),
    )
}


def applicable(pred: ClassificationPrediction) -> list[str]:
    """Names of the built-in aggregators that ``pred`` provides, in catalogue order."""
    out = []
    for a in AGGREGATORS.values():
        if pred.kind not in a.kinds:
            continue
        if a.name == "dempster_shafer" and isinstance(pred, Ensemble) and not pred.from_logits:
            continue
        if a.name == "mean_variance_logits" and isinstance(pred, Ensemble) and not pred.from_logits:
            continue
        out.append(a.name)
    return out


def compute(pred: ClassificationPrediction, name: str) -> dict[str, NDArray]:
    """Compute aggregator ``name`` for ``pred`` (with the others computed in the same pass)."""
    if name not in AGGREGATORS:
        known = ", ".join([*AGGREGATORS, *pred.estimates])
        raise UQValidationError(f"unknown estimator {name!r}; known estimators: {known}")
    if name not in applicable(pred):
        raise UQValidationError(
            f"estimator {name!r} does not apply to a {pred.kind} prediction"
            + (" built from probabilities" if isinstance(pred, Ensemble) else "")
            + f"; it applies to: {', '.join(applicable(pred))}"
        )
    if isinstance(pred, Ensemble):
        return _ensemble(pred)
    if isinstance(pred, Dirichlet):
        return _dirichlet(pred)
    if isinstance(pred, (Probs, Logits)):
        return _first_order(pred)
    raise TypeError(type(pred).__name__)  # pragma: no cover - every kind is listed above


def entropy(p: NDArray, axis: int = -1) -> NDArray:
    """H(p) = −Σ p log p along ``axis`` (0 log 0 = 0)."""
    return np.asarray(np.sum(sps.entr(p), axis=axis))


def _top_two(p: NDArray) -> tuple[NDArray, NDArray]:
    part = np.partition(p, -2, axis=-1)
    return part[..., -1], part[..., -2]


def _from_bma(pbar: NDArray) -> dict[str, NDArray]:
    first, second = _top_two(pbar)
    return {
        "one_minus_max_prob_bma": 1.0 - first,
        "entropy_bma": entropy(pbar),
        "margin": 1.0 - (first - second),
    }


def _dempster_shafer(z: NDArray) -> NDArray:
    # C / (C + Σ exp z) computed stably as C e^{-m} / (C e^{-m} + Σ exp(z − m)), m = max z.
    c = z.shape[-1]
    m = np.max(z, axis=-1)
    s = np.sum(np.exp(z - m[..., None]), axis=-1)
    cm = c * np.exp(-m)
    return np.asarray(cm / (cm + s))


def _first_order(pred: Probs | Logits) -> dict[str, NDArray]:
    out = _from_bma(pred.probs())
    if isinstance(pred, Logits):
        out["dempster_shafer"] = _dempster_shafer(pred.logits())
    return out


def _dual(mean_log: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """From G_c = E[log p_c]: the dual BMA p̃, −log Z (expected divergence), −Σ p̃ G."""
    top = np.max(mean_log, axis=-1, keepdims=True)
    q = np.exp(mean_log - top)
    zs = np.sum(q, axis=-1, keepdims=True)
    dual = q / zs
    log_z = (np.log(zs) + top)[..., 0]
    total = -np.sum(dual * mean_log, axis=-1)
    return dual, -log_z, total


def _ensemble(pred: Ensemble) -> dict[str, NDArray]:
    n = pred.n
    names = applicable(pred)
    out = {k: np.empty(n) for k in names}
    bma = np.empty((n, pred.n_classes))
    single = pred.n_members == 1
    for lo, hi, p, z in pred.member_chunks():
        pbar = np.mean(p, axis=0)
        bma[lo:hi] = pbar
        for k, v in _from_bma(pbar).items():
            out[k][lo:hi] = v
        out["one_minus_expected_max_prob"][lo:hi] = 1.0 - np.mean(np.max(p, axis=-1), axis=0)
        out["expected_entropy"][lo:hi] = np.mean(entropy(p), axis=0)
        out["mutual_information"][lo:hi] = np.mean(
            np.sum(sps.rel_entr(p, pbar[None]), axis=-1), axis=0
        )
        out["mean_variance_probs"][lo:hi] = np.mean(np.var(p, axis=0), axis=-1)
        if single:
            dual = p[0]
            log_p = np.log(np.maximum(dual, _TINY))
            div = np.zeros(hi - lo)
            total = -np.sum(dual * log_p, axis=-1)
        else:
            dual, div, total = _dual(np.mean(np.log(np.maximum(p, _TINY)), axis=0))
        out["one_minus_max_prob_dual_bma"][lo:hi] = 1.0 - np.max(dual, axis=-1)
        out["entropy_dual_bma"][lo:hi] = entropy(dual)
        out["expected_divergence"][lo:hi] = div
        out["bregman_total"][lo:hi] = total
        if z is not None:
            out["mean_variance_logits"][lo:hi] = np.mean(np.var(z, axis=0), axis=-1)
            out["dempster_shafer"][lo:hi] = _dempster_shafer(np.mean(z, axis=0))
    pred._cache["__bma__"] = bma
    return out


def _dirichlet(pred: Dirichlet) -> dict[str, NDArray]:
    a = pred.alpha()
    a0 = np.sum(a, axis=1)
    pbar = a / a0[:, None]
    out = _from_bma(pbar)
    exp_ent = sps.digamma(a0 + 1.0) - np.sum(pbar * sps.digamma(a + 1.0), axis=1)
    out["expected_entropy"] = exp_ent
    out["mutual_information"] = out["entropy_bma"] - exp_ent
    dual, div, total = _dual(sps.digamma(a) - sps.digamma(a0)[:, None])
    out["one_minus_max_prob_dual_bma"] = 1.0 - np.max(dual, axis=1)
    out["entropy_dual_bma"] = entropy(dual)
    out["expected_divergence"] = div
    out["bregman_total"] = total
    c = a.shape[1]
    out["dempster_shafer"] = c / a0
    out["mean_variance_probs"] = np.mean(a * (a0[:, None] - a), axis=1) / (a0**2 * (a0 + 1.0))
    return out
