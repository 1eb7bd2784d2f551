"""Correctness prediction and abstained (selective) prediction.

An uncertainty estimate u_i (higher = more uncertain; default ``one_minus_max_prob_bma``)
ranks the predictions; an error is a row with argmax_c p̄_ic ≠ y_i. Abstaining on the most
uncertain rows leaves a coverage c (share of the weight kept) and a selective risk (share of
errors among the kept rows). Ties in u are exact: rows with equal u are accepted or rejected
together, and where a curve is needed between two distinct thresholds the tied block is taken
as a random order of its rows, i.e. its errors enter linearly in the accepted weight.

Conventions for the area under the risk–coverage curve (by name, ``convention=``):

``"mean"``            (default; Geifman et al. 2019, used by mucsanyi2024's code) the mean over
                      k = 1..N of the risk r_k of the k most certain rows, averaged over the
                      orders of tied rows. With weights, k runs over the accumulated weight and
                      Σ_{k=a+1}^{a+n} 1/k = ψ(a+n+1) − ψ(a+1) (ψ = digamma), so an integer
                      weight equals repeated rows (scaling all weights changes this estimator:
                      exempt).
``"trapezoid"``       the trapezoidal rule over the points (c_j, risk_j) at the distinct
                      thresholds (no point at coverage 0), as scikit-learn's ``auc`` of the
                      curve.
``"trapezoid_rows"``  torch-uncertainty's ``AURC`` and ``AUGRC``: the trapezoidal rule over one
                      point per row, (k/N, r_k) for k = 1..N, divided by the width 1 − 1/N of
                      its support, = [Σ_k r_k − (r_1 + r_N)/2] / (N − 1). Tied rows are taken
                      in a random order and the result is averaged over those orders (the
                      peer's sort leaves their order unspecified), which is exact because the
                      value is linear in the r_k. As for ``"mean"``, weights act as counts: N is
                      the total weight W, Σ_k r_k is the ``"mean"`` sum, and r_1 = E(1)/1 with
                      E(x) the errors among the first x of the weight (linear within a block
                      of ties). Undefined (``None``) when W ≤ 1, where the peer gives NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
import scipy.special as sps

from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch
from uqcore.classification._ranking import (
    Blocks,
    auroc,
    average_precision,
    blocks,
    estimate_order,
)
from uqcore.classification.aggregators import DEFAULT_ESTIMATOR
from uqcore.options import Range
from uqcore.registry import register, undefined

__all__ = [
    "auac",
    "augrc",
    "aupr_error",
    "aurc",
    "auroc_correctness",
    "coverage_at_accuracy",
    "eaurc",
    "raulc",
    "risk_at_coverage",
]

NDArray = np.ndarray[Any, Any]
Convention = Literal["mean", "trapezoid", "trapezoid_rows"]
Optimum = Literal["exact", "continuous"]
AugrcConvention = Literal["trapezoid", "trapezoid_rows"]

_TASK = "classification"
_GEIFMAN = (
    "Geifman et al. 2019, Bias-reduced uncertainty estimation for deep neural classifiers (ICLR)"
)
_NEEDS = {"probs", "estimates"}
_SCALE = {"scale_weights": "convention='mean' counts rows: weights act as counts (see module)"}


def _errors(batch: ClassificationBatch) -> NDArray:
    return batch.shared("errors", lambda: 1.0 - batch.correct)


def _blocks(batch: ClassificationBatch, estimator: str) -> Blocks:
    u = batch.estimate(estimator)
    return batch.weighted(
        f"selective:{estimator}",
        lambda: blocks(u, _errors(batch), batch.weights, estimate_order(batch, estimator)),
    )


#: Why ``convention="trapezoid_rows"`` is undefined.
ONE_ROW = "convention='trapezoid_rows' needs a total weight above 1 (more than one row)"


def _optimum_rules(options: Mapping[str, Any]) -> None:
    """``eaurc``'s continuous optimum stands for the optimum of ``convention="mean"`` only."""
    optimum, convention = options["optimum"], options["convention"]
    if optimum not in ("exact", "continuous"):
        raise UQValidationError(f"optimum must be 'exact' or 'continuous', found {optimum!r}")
    if optimum == "continuous" and convention != "mean":
        raise UQValidationError(
            "optimum='continuous' approximates the optimum of convention='mean' only, found "
            f"convention={convention!r}",
            argument="optimum",
        )


def _check_convention(convention: Any) -> None:
    if convention not in ("mean", "trapezoid", "trapezoid_rows"):
        raise UQValidationError(
            f"convention must be 'mean', 'trapezoid' or 'trapezoid_rows', found {convention!r}"
        )


def _errors_at_one(cw: NDArray, ce: NDArray) -> float:
    """E(1): the errors among the first unit of weight, linear within a block of ties."""
    return float(np.interp(1.0, np.concatenate([[0.0], cw]), np.concatenate([[0.0], ce])))


def _aurc_from_blocks(b: Blocks, convention: Convention) -> float | None:
    """AURC of the blocks under ``convention``; ``None`` where it is undefined (W ≤ 1 for
    ``"trapezoid_rows"``)."""
    keep = b.weight > 0
    w, e = b.weight[keep], b.positive[keep]
    cw = np.cumsum(w)
    ce = np.cumsum(e)
    total = float(cw[-1])
    if convention == "trapezoid":
        cov = cw / total
        risk = ce / cw
        if cov.size < 2:
            return 0.0
        return float(np.sum(np.diff(cov) * (risk[1:] + risk[:-1]) / 2.0))
    w0 = cw - w
    e0 = ce - e
    harmonic = sps.digamma(w0 + w + 1.0) - sps.digamma(w0 + 1.0)
    rate = e / w
    # Σ_k r_k over the unit steps of the accumulated weight, averaged over tie orders
    risk_sum = float(np.sum(e0 * harmonic + rate * (w - w0 * harmonic)))
    if convention == "mean":
        return risk_sum / total
    if total <= 1.0:
        return None
    ends = _errors_at_one(cw, ce) + float(ce[-1]) / total  # r_1 + r_N
    return (risk_sum - ends / 2.0) / (total - 1.0)


def _oracle(b: Blocks) -> Blocks:
    """The same rows ranked perfectly: every correct row before every error."""
    wc = float(np.sum(b.weight - b.positive))
    we = float(np.sum(b.positive))
    parts = [(wc, 0.0)] if wc > 0 else []
    if we > 0:
        parts.append((we, we))
    arr = np.asarray(parts, dtype=float)
    return Blocks(np.arange(arr.shape[0], dtype=float), arr[:, 0], arr[:, 1])


def _aurc(
    name: str, batch: ClassificationBatch, estimator: str, convention: Convention
) -> float | None:
    _check_convention(convention)
    value = _aurc_from_blocks(_blocks(batch, estimator), convention)
    if value is None:
        undefined(name, ONE_ROW)
    return value


@register(
    "auroc_correctness",
    task=_TASK,
    family="correctness",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="mucsanyi2024 §3.4; Hendrycks & Gimpel 2017",
)
def auroc_correctness(
    batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR
) -> float | None:
    """AUROC of the uncertainty for telling wrong from correct predictions (errors positive).

    AUROC = P(u_err > u_ok) + ½ P(u_err = u_ok) under the weights (exact with ties).
    Undefined (``None`` with a warning) when all predictions are correct or all wrong.
    Best value 1; 0.5 is chance.
    """
    u = batch.estimate(estimator)
    value = auroc(u, _errors(batch), batch.weights, estimate_order(batch, estimator))
    if value is None:
        undefined("auroc_correctness", "all predictions are correct, or all are wrong")
    return value


@register(
    "aupr_error",
    task=_TASK,
    family="correctness",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="Hendrycks & Gimpel 2017, A baseline for detecting misclassified examples (ICLR)",
)
def aupr_error(batch: ClassificationBatch, *, estimator: str = DEFAULT_ESTIMATOR) -> float | None:
    """Average precision of the uncertainty for finding errors (errors positive).

    AP = Σ_k (R_k − R_{k−1}) P_k over the distinct thresholds t_k, flagging u ≥ t_k
    (scikit-learn's ``average_precision_score``). Undefined when there is no error.
    Best value 1.
    """
    u = batch.estimate(estimator)
    value = average_precision(u, _errors(batch), batch.weights, estimate_order(batch, estimator))
    if value is None:
        undefined("aupr_error", "there is no wrong prediction")
    return value


@register(
    "aurc",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_GEIFMAN,
    exempt=_SCALE,
)
def aurc(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    convention: Convention = "mean",
) -> float | None:
    """Area under the risk–coverage curve (module docstring for the conventions).

    ``"mean"``: AURC = (1/N) Σ_{k=1}^{N} r_k, r_k the error rate of the k most certain rows;
    ``"trapezoid"``: the trapezoidal rule over the distinct thresholds;
    ``"trapezoid_rows"``: [Σ_k r_k − (r_1 + r_N)/2] / (N − 1), torch-uncertainty's ``AURC``
    (undefined for a single row). Best value 0 (no errors).
    """
    return _aurc("aurc", batch, estimator, convention)


@register(
    "auac",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="Galil et al. 2023 (ICLR); mucsanyi2024 §3.4",
    exempt=_SCALE,
)
def auac(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    convention: Convention = "mean",
) -> float | None:
    """Area under the accuracy–coverage curve: AUAC = 1 − AURC (same convention).

    Selective accuracy is 1 − selective risk at every coverage. Best value 1.
    """
    value = _aurc("auac", batch, estimator, convention)
    return None if value is None else 1.0 - value


@register(
    "eaurc",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_GEIFMAN + ", E-AURC",
    exempt=_SCALE,
    check_options=_optimum_rules,
)
def eaurc(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    convention: Convention = "mean",
    optimum: Optimum = "exact",
) -> float | None:
    """Excess AURC: AURC − AURC*, AURC* that of the perfect ranking (all errors last).

    ``optimum="exact"`` (default): AURC* is the AURC of the perfect ranking of these rows,
    computed with the same convention. ``optimum="continuous"``: Geifman et al.'s (2019)
    AURC* ≈ r + (1 − r) ln(1 − r), r = E/W the error rate (AURC* = 1 for r = 1): the area
    under the perfect ranking's risk curve over a continuum of coverages, as computed by the
    code of Geifman et al. and of Moon et al. 2020 (CRL). It is the limit of the exact
    ``"mean"`` optimum as N grows and lies below it (the mean of an increasing curve at the
    right ends of its steps), so the E-AURC stays ≥ 0; it stands for the optimum of
    ``convention="mean"`` only, and the other conventions raise. Best value 0.
    """
    _check_convention(convention)
    _optimum_rules({"optimum": optimum, "convention": convention})
    b = _blocks(batch, estimator)
    value = _aurc_from_blocks(b, convention)
    if optimum == "continuous":
        assert value is not None  # "mean" is always defined
        r = float(np.sum(b.positive)) / float(np.sum(b.weight))
        return value - (r + float(sps.xlogy(1.0 - r, 1.0 - r)))
    best = _aurc_from_blocks(_oracle(b), convention)
    if value is None or best is None:
        undefined("eaurc", ONE_ROW)
        return None
    return value - best


@register(
    "raulc",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="higher",
    bounds=(None, 1.0),
    best=1.0,
    reference="Kirchhof et al. 2023, URL (NeurIPS D&B) rAULC; mucsanyi2024 appendix H.5",
    exempt=_SCALE,
)
def raulc(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    convention: Convention = "mean",
) -> float | None:
    """Relative area under the lift curve: (AUAC − acc) / (AUAC* − acc).

    The lift curve is selective accuracy over overall accuracy acc; AULC = AUAC / acc, and
    rAULC = (AULC − 1) / (AULC* − 1) with * the perfect ranking, i.e. 1 for a perfect ranking
    and 0 for a random one. Undefined when all predictions are correct or all wrong.
    Best value 1.
    """
    _check_convention(convention)
    b = _blocks(batch, estimator)
    acc = 1.0 - float(np.sum(b.positive)) / float(np.sum(b.weight))
    value = _aurc_from_blocks(b, convention)
    oracle = _aurc_from_blocks(_oracle(b), convention)
    if value is None or oracle is None:
        undefined("raulc", ONE_ROW)
        return None
    best = 1.0 - oracle
    if acc <= 0.0 or best - acc <= 0.0:
        undefined("raulc", "all predictions are correct, or all are wrong")
        return None
    return (1.0 - value - acc) / (best - acc)


@register(
    "augrc",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="lower",
    bounds=(0.0, 0.5),
    best=0.0,
    reference="Traub et al. 2024, Overcoming common flaws in the evaluation of selective "
    "classification systems (NeurIPS)",
)
def augrc(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    convention: AugrcConvention = "trapezoid",
) -> float | None:
    """Area under the generalized risk–coverage curve.

    Generalized risk at coverage c: the weight of accepted errors over the total weight.

    ``convention="trapezoid"`` (default): the trapezoidal rule over the points at the distinct
    thresholds, from (0, 0) to (1, error rate), AUGRC = Σ_j (c_j − c_{j−1}) (g_j + g_{j−1}) / 2
    (Traub et al. 2024); it is the exact area under the curve with ties entering linearly.
    Scaling the weights changes nothing.

    ``convention="trapezoid_rows"``: torch-uncertainty's ``AUGRC``, the trapezoidal rule over
    one point per row, (k/N, g_k) with g_k = E_k/N the errors among the k most certain rows
    over N, divided by 1 − 1/N: [Σ_k g_k − (g_1 + g_N)/2] / (N − 1), averaged over the orders
    of tied rows (exact: the value is linear in the g_k). Weights act as counts, as for
    ``aurc``'s ``"trapezoid_rows"``: a block of ties of weight w and e errors after E_0 errors
    adds w E_0 + e (w + 1)/2 to Σ_k E_k, and N is the total weight. Undefined (``None``) when
    the total weight is at most 1. With every prediction wrong it is (N + 1)/(2N), above the
    bound 1/2 of the default convention by 1/(2N). Best value 0.
    """
    if convention not in ("trapezoid", "trapezoid_rows"):
        raise UQValidationError(
            f"convention must be 'trapezoid' or 'trapezoid_rows', found {convention!r}"
        )
    b = _blocks(batch, estimator)
    total = float(np.sum(b.weight))
    if convention == "trapezoid_rows":
        keep = b.weight > 0
        w, e = b.weight[keep], b.positive[keep]
        cw, ce = np.cumsum(w), np.cumsum(e)
        if total <= 1.0:
            undefined("augrc", ONE_ROW)
            return None
        error_sum = float(np.sum(w * (ce - e) + e * (w + 1.0) / 2.0))  # Σ_k E_k
        ends = _errors_at_one(cw, ce) + float(ce[-1])  # E_1 + E_N
        return (error_sum - ends / 2.0) / (total * (total - 1.0))
    cov = np.concatenate([[0.0], np.cumsum(b.weight) / total])
    g = np.concatenate([[0.0], np.cumsum(b.positive) / total])
    return float(np.sum(np.diff(cov) * (g[1:] + g[:-1]) / 2.0))


@register(
    "coverage_at_accuracy",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="higher",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="Geifman & El-Yaniv 2017, Selective classification for deep neural networks",
)
def coverage_at_accuracy(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    target_accuracy: Annotated[float, Range(0, 1, lo_open=True)] = 0.95,
) -> float:
    """Largest coverage at which the selective accuracy reaches ``target_accuracy``.

    Over the thresholds at the distinct values of u (accepting u ≤ t), the largest coverage
    c_j with selective accuracy 1 − E_j / W_j ≥ target; 0 when no threshold reaches it.
    Common targets are 0.95 and 0.99. Best value 1.
    """
    if not 0.0 < float(target_accuracy) <= 1.0:
        raise UQValidationError(f"target_accuracy must lie in (0, 1], found {target_accuracy!r}")
    b = _blocks(batch, estimator)
    keep = b.weight > 0
    cw = np.cumsum(b.weight[keep])
    acc = 1.0 - np.cumsum(b.positive[keep]) / cw
    ok = acc >= float(target_accuracy) - 1e-12
    if not bool(np.any(ok)):
        return 0.0
    return float(np.max(cw[ok]) / cw[-1])


@register(
    "risk_at_coverage",
    task=_TASK,
    family="selective",
    needs=_NEEDS,
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_GEIFMAN + "; Traub et al. 2024 (generalized risk)",
)
def risk_at_coverage(
    batch: ClassificationBatch,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    coverage: Annotated[float, Range(0, 1, lo_open=True)] = 0.8,
    risk: Literal["selective", "generalized"] = "selective",
) -> float:
    """Risk when the most certain share ``coverage`` of the weight is accepted.

    ``risk="selective"`` (default): errors among the accepted over the accepted weight, E(c)/cW;
    ``risk="generalized"``: accepted errors over the total weight, E(c)/W. A tied block that
    straddles the cut contributes its error rate times the part of it accepted. Best value 0.
    """
    c = float(coverage)
    if not 0.0 < c <= 1.0:
        raise UQValidationError(f"coverage must lie in (0, 1], found {coverage!r}")
    if risk not in ("selective", "generalized"):
        raise UQValidationError(f"risk must be 'selective' or 'generalized', found {risk!r}")
    b = _blocks(batch, estimator)
    keep = b.weight > 0
    w, e = b.weight[keep], b.positive[keep]
    cw = np.cumsum(w)
    total = float(cw[-1])
    cut = c * total
    j = min(int(np.searchsorted(cw, cut * (1 - 1e-12), side="left")), w.shape[0] - 1)
    before_w = float(cw[j] - w[j])
    before_e = float(np.sum(e[:j]))
    errs = before_e + (cut - before_w) * float(e[j] / w[j])
    return errs / cut if risk == "selective" else errs / total
