"""Uncertainty aggregators: second-order prediction -> one scalar uncertainty per sample.

The catalogue of the built-in aggregators and their computations on arrays, below the
classification prediction kinds that call them (``Probs.estimate("entropy_bma")``); nothing
here knows the prediction classes. The public home of these names is
:mod:`uqcore.classification.aggregators`.

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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sps

from uqcore._scaling import exponent, rescaled

__all__ = [
    "AGGREGATORS",
    "DEFAULT_ESTIMATOR",
    "Aggregator",
    "builtin_names",
    "dirichlet",
    "ensemble",
    "entropy",
    "first_order",
]

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


#: Aggregators of the logits: an ensemble given as member probabilities has none.
_LOGIT_ONLY = frozenset({"dempster_shafer", "mean_variance_logits"})


def builtin_names(kind: str, from_logits: bool = False) -> list[str]:
    """Names of the built-in aggregators that a prediction of ``kind`` provides, in catalogue
    order; ``from_logits`` says whether an ensemble was given as member logits."""
    return [
        a.name
        for a in AGGREGATORS.values()
        if kind in a.kinds
        and not (kind == "ensemble" and not from_logits and a.name in _LOGIT_ONLY)
    ]


def entropy(p: NDArray, axis: int = -1) -> NDArray:
    """H(p) = −Σ p log p along ``axis`` (0 log 0 = 0), for p >= 0.

    Computed as −Σ p · log max(p, tiny) (the product is 0 where p = 0), which numpy
    vectorises; ``scipy.special.entr`` gives the same values to rounding, several times slower.
    """
    p = np.moveaxis(np.asarray(p, dtype=np.float64), axis, -1)
    out = np.empty(p.shape[:-1])
    flat_p = p.reshape(-1, p.shape[-1]) if p.ndim != 1 else p[None]
    flat_out = out.reshape(-1) if p.ndim != 1 else out.reshape(1)
    step = max(1, (1 << 18) // max(p.shape[-1], 1))
    for lo in range(0, flat_p.shape[0], step):
        chunk = flat_p[lo : lo + step]
        flat_out[lo : lo + step] = _entropy_from_log(chunk, np.log(np.maximum(chunk, _TINY)))
    return out


def _top_two(p: NDArray) -> tuple[NDArray, NDArray]:
    """The largest and the second largest value of each row (equal when the top is tied)."""
    rows = np.arange(p.shape[0])
    top = np.argmax(p, axis=-1)
    first = p[rows, top]
    rest = p.copy()
    rest[rows, top] = -np.inf
    return first, np.max(rest, axis=-1)


def _entropy_from_log(p: NDArray, log_p: NDArray) -> NDArray:
    """H(p) = −Σ_c p_c log p_c from a log that is finite where p = 0 (0 log 0 = 0)."""
    return np.asarray(-np.einsum("nc,nc->n", p, log_p))


def _from_bma(pbar: NDArray, log_pbar: NDArray | None = None) -> dict[str, NDArray]:
    """The BMA's aggregators; ``log_pbar`` is log max(p̄, tiny) when the caller has it."""
    first, second = _top_two(pbar)
    if log_pbar is None:
        log_pbar = np.log(np.maximum(pbar, _TINY))
    return {
        "one_minus_max_prob_bma": 1.0 - first,
        "entropy_bma": _entropy_from_log(pbar, log_pbar),
        "margin": 1.0 - (first - second),
    }


def _dempster_shafer(z: NDArray) -> NDArray:
    """u = C / (C + Σ_c exp z_c) for every row of ``z``, with no overflow for any finite z.

    With m = max_c z_c and s = Σ_c exp(z_c − m) ∈ [1, C], u = C e^{−m} / (C e^{−m} + s) for
    m ≥ 0 and u = C / (C + s e^{m}) for m < 0: every exponential is at most 1, so nothing
    overflows, and where e^{−|m|} underflows u is its limit (0 for m ≫ 0, 1 for m ≪ 0).
    """
    c = z.shape[-1]
    m = np.max(z, axis=-1)
    s = np.sum(np.exp(z - m[..., None]), axis=-1)
    a = np.exp(-np.abs(m))  # e^{−|m|} in (0, 1], 0 where it underflows
    ca = c * a
    return np.asarray(np.where(m >= 0, ca / (ca + s), c / (c + s * a)))


def first_order(probs: NDArray, logits: NDArray | None = None) -> dict[str, NDArray]:
    """The aggregators of a first-order prediction: probabilities ``probs`` (N×C), and
    its ``logits`` when it was given as logits."""
    out = _from_bma(probs)
    if logits is not None:
        out["dempster_shafer"] = _dempster_shafer(logits)
    return out


def _dual(mean_log: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """From G_c = E[log p_c]: the dual BMA p̃ = exp(G − log Z), −log Z (expected
    divergence), −Σ p̃ G (Bregman total) and H(p̃) = −Σ p̃ (G − log Z)."""
    top = np.max(mean_log, axis=-1, keepdims=True)
    shifted = mean_log - top
    q = np.exp(shifted)
    zs = np.sum(q, axis=-1, keepdims=True)
    dual = q / zs
    log_zs = np.log(zs)
    log_z = (log_zs + top)[..., 0]
    total = -np.einsum("nc,nc->n", dual, mean_log)
    shifted -= log_zs
    return dual, -log_z, total, _entropy_from_log(dual, shifted)


def _mean_variance(z: NDArray) -> NDArray:
    """(1/C) Σ_c Var_m(z_mc) of M×n×C logits (population variance), for logits of any
    magnitude: where the squares overflow or underflow, that of z/2^e (exact) times 4^e — and
    +inf where the variance itself exceeds float64's range (logits spread beyond 1e154)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # checked just below
        out: NDArray = np.mean(np.var(z, axis=0), axis=-1)
    if bool(np.all(np.isfinite(out))) and float(np.min(out)) >= 2.0**-600:
        return out
    e = exponent(float(np.max(z)), -float(np.min(z)))
    if e == 0:
        return out
    scaled: NDArray = np.mean(np.var(rescaled(z, e), axis=0), axis=-1)
    with np.errstate(over="ignore"):
        return np.asarray(np.ldexp(scaled, 2 * e))


#: ``(lo, hi, p, z)``: the float64 member probabilities M×(hi−lo)×C of rows lo:hi, and their
#: member logits (``None`` for probability input), as ``Ensemble.member_chunks`` yields them.
Chunk = tuple[int, int, NDArray, NDArray | None]


def ensemble(
    chunks: Iterable[Chunk],
    shape: tuple[int, int, int],
    names: list[str],
    min_member: float | None,
) -> tuple[dict[str, NDArray], NDArray]:
    """Every ensemble aggregator in ``names`` and the BMA p̄ (N×C), in one chunked pass over
    the members of an M×N×C ``shape``; ``min_member`` is the smallest member probability
    (``None`` for logits).

    Per element of the M×N×C input the pass takes one logarithm, L = log max(p, tiny), and
    a few multiply-adds: Σ_c p L (expected entropy), Σ_c p (L − log p̄) (mutual
    information, as the mean KL divergence of the members from the BMA), Σ_m (p − p̄)²
    (variance) and Σ_m L (the dual BMA); everything else works on N×C arrays. Scratch
    buffers of one chunk's size are reused, so the pass allocates nothing per chunk that
    grows with M.
    """
    m, n, c = shape
    out = {k: np.empty(n) for k in names}
    bma = np.empty((n, c))
    single = m == 1
    scratch: dict[str, NDArray] = {}

    def buffer(name: str, shape: tuple[int, ...]) -> NDArray:
        buf = scratch.get(name)
        if buf is None or buf.shape[1] < shape[1]:
            buf = scratch[name] = np.empty(shape)
        return buf[:, : shape[1]]

    # np.add.reduce(x, axis) / m is what np.mean computes, without its per-call overhead
    add = np.add.reduce
    no_clamp = min_member is not None and min_member >= _TINY
    for lo, hi, p, z in chunks:
        pbar = add(p, axis=0, out=bma[lo:hi])
        pbar /= m
        log_pbar = np.log(np.maximum(pbar, _TINY))
        for k, v in _from_bma(pbar, log_pbar).items():
            out[k][lo:hi] = v
        out["one_minus_expected_max_prob"][lo:hi] = 1.0 - add(np.max(p, axis=-1), axis=0) / m
        log_p = buffer("log_p", p.shape)
        if no_clamp or float(np.min(p)) >= _TINY:  # the usual case: no clamp pass needed
            np.log(p, out=log_p)
        else:
            np.log(np.maximum(p, _TINY, out=log_p), out=log_p)
        # entr(p) = −p log p, with 0 log 0 = 0: p · log max(p, tiny) is 0 at p = 0
        plogp = np.einsum("mnc,mnc->mn", p, log_p)
        out["expected_entropy"][lo:hi] = -add(plogp, axis=0) / m
        work = np.subtract(log_p, log_pbar[None], out=buffer("work", p.shape))
        work *= p
        # Σ_c p_m (log p_m − log p̄) = KL(p_m ‖ p̄); exactly 0 when every member equals p̄
        out["mutual_information"][lo:hi] = add(add(work, axis=-1), axis=0) / m
        np.subtract(p, pbar[None], out=work)
        work *= work
        var = add(work, axis=0)
        var /= m
        out["mean_variance_probs"][lo:hi] = add(var, axis=-1) / var.shape[-1]
        if single:
            dual = p[0]
            div = np.zeros(hi - lo)
            total = _entropy_from_log(dual, log_p[0])
            dual_entropy = total
        else:
            mean_log = add(log_p, axis=0)
            mean_log /= m
            dual, div, total, dual_entropy = _dual(mean_log)
        out["one_minus_max_prob_dual_bma"][lo:hi] = 1.0 - np.max(dual, axis=-1)
        out["entropy_dual_bma"][lo:hi] = dual_entropy
        out["expected_divergence"][lo:hi] = div
        out["bregman_total"][lo:hi] = total
        if z is not None:
            out["mean_variance_logits"][lo:hi] = _mean_variance(z)
            out["dempster_shafer"][lo:hi] = _dempster_shafer(np.mean(z, axis=0))
    return out, bma


def dirichlet(a: NDArray) -> dict[str, NDArray]:
    """The aggregators of Dirichlet concentrations ``a`` (N×C), in closed form."""
    a0 = np.sum(a, axis=1)
    pbar = a / a0[:, None]
    out = _from_bma(pbar)
    exp_ent = sps.digamma(a0 + 1.0) - np.sum(pbar * sps.digamma(a + 1.0), axis=1)
    out["expected_entropy"] = exp_ent
    out["mutual_information"] = out["entropy_bma"] - exp_ent
    dual, div, total, dual_entropy = _dual(sps.digamma(a) - sps.digamma(a0)[:, None])
    out["one_minus_max_prob_dual_bma"] = 1.0 - np.max(dual, axis=1)
    out["entropy_dual_bma"] = dual_entropy
    out["expected_divergence"] = div
    out["bregman_total"] = total
    c = a.shape[1]
    out["dempster_shafer"] = c / a0
    # α_c(α_0 − α_c)/α_0² = p̄_c(1 − p̄_c): no α_0² to overflow or underflow at extreme α
    out["mean_variance_probs"] = np.mean(pbar * (1.0 - pbar), axis=1) / (a0 + 1.0)
    return out
