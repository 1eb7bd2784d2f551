"""Brier score decompositions of classification probabilities: CORP (isotonic, Dimitriadis,
Gneiting & Jordan 2021) and the binned decomposition of Murphy (1973).

Both score a probability x_i of a binary event o_i ∈ {0, 1} by the Brier score (x_i − o_i)²:
``target="top_label"`` (default) takes the top-label confidence max_c p_ic and o_i = 1 when
the predicted class is the label (the Brier score of the confidence, not scikit-learn's
multiclass ``brier_score_loss``); ``target="binary"`` takes p_i1, the probability of class 1,
and o_i = 1{label_i = 1}, for two classes only (undefined otherwise, with the reason; the
curve ``corp_reliability`` raises it as an error).

CORP (:mod:`uqcore._isotonic`): x̂ the isotonic (PAV) recalibration of o on x, ō the weighted
event rate; MCB = B̄(x) − B̄(x̂), DSC = B̄(ō) − B̄(x̂), UNC = B̄(ō) = ō(1 − ō), and
B̄(x) = MCB − DSC + UNC exactly.

Murphy (1973), binned: equal-width bins of x on [0, 1] with edges e_j = j/J (``numpy.linspace(0, 1, J + 1)``), each bin
(e_{j−1}, e_j] closed on the right and the first bin [0, e_1] closed on both sides; bin k with
weight W_k, mean forecast x̄_k and event rate ō_k; W = Σ W_k:

    REL = Σ_k W_k (x̄_k − ō_k)² / W,   RES = Σ_k W_k (ō_k − ō)² / W,   UNC = ō(1 − ō).

REL − RES + UNC equals the Brier score only up to the within-bin terms
WBV = Σ_k Σ_{i∈k} w_i (x_i − x̄_k)² / W (within-bin variance of the forecasts) and
WBC = −2 Σ_k Σ_{i∈k} w_i (x_i − x̄_k)(o_i − ō_k) / W (within-bin covariance): B̄ = REL − RES
+ UNC + WBV + WBC exactly (Stephenson, Coelho & Jolliffe 2008, Weather Forecast. 23:752).
The details give both, so the identity can be checked.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from uqcore._isotonic import Corp, corp_events
from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch
from uqcore.options import Bins
from uqcore.registry import register, undefined

__all__ = [
    "brier_reliability",
    "brier_resolution",
    "brier_uncertainty",
    "corp_dsc",
    "corp_mcb",
    "corp_of",
    "corp_unc",
    "event_forecast",
]

Target = Literal["top_label", "binary"]
NDArray = np.ndarray[Any, Any]

_CORP = "Dimitriadis, Gneiting & Jordan 2021, PNAS 118(8) e2016191118 (CORP)"
_MURPHY = (
    "Murphy 1973, J. Appl. Meteor. 12:595; Stephenson, Coelho & Jolliffe 2008, Weather "
    "Forecast. 23:752 (within-bin terms)"
)


def event_forecast(batch: ClassificationBatch, target: str) -> tuple[NDArray, NDArray]:
    """(forecast probability x, event indicator o) of ``target`` (see the module docstring)."""
    if target == "binary":
        c = batch.prediction.n_classes
        if c != 2:
            raise UQValidationError(
                f"target='binary' needs 2 classes, found {c}; use target='top_label'",
                argument="target",
                value=target,
            )
        return batch.probs[:, 1], (batch.y == 1).astype(np.float64)
    return batch.confidence, batch.correct


def binary_undefined(batch: ClassificationBatch, target: str) -> str | None:
    """Why ``target`` does not apply to the batch (``"binary"`` needs two classes), or None."""
    c = batch.prediction.n_classes
    if target == "binary" and c != 2:
        return f"target='binary' needs 2 classes, found {c}; use target='top_label'"
    return None


def _events(batch: ClassificationBatch, target: str) -> tuple[NDArray, NDArray]:
    """(forecast x, event o as booleans) of ``target`` (cached, weight-free): one argmax and
    a gather for the top label (two columns: one comparison and one maximum)."""

    def compute() -> tuple[NDArray, NDArray]:
        p, y = batch.probs, batch.y
        if target == "binary":
            return p[:, 1], y == 1
        if p.shape[1] == 2:
            # argmax takes the first of tied maxima: class 1 only where p1 > p0
            top1 = p[:, 1] > p[:, 0]
            return np.maximum(p[:, 0], p[:, 1]), top1 == (y == 1)
        pred = batch.predicted
        return np.take_along_axis(p, pred[:, None], axis=1)[:, 0], pred == y

    return batch.shared(f"corp-events:{target}", compute)


def corp_of(batch: ClassificationBatch, target: str) -> Corp:
    """The CORP decomposition of the Brier score of ``target`` (cached on the batch): one sort
    of the forecasts and one PAV (:func:`uqcore._isotonic.corp_events`), shared by the three
    components."""

    def compute() -> Corp:
        x, o = _events(batch, target)
        if batch.weights is None:
            return corp_events(x, o, None)
        # the sort of the forecasts is weight-free: resamples of the batch share it
        order = batch.shared(f"corp-order:{target}", lambda: np.argsort(x))
        return corp_events(x, o, batch.weights, order=order)

    return batch.weighted(f"corp:{target}", compute)


def _corp_value(batch: ClassificationBatch, part: str, target: str) -> dict[str, Any] | None:
    why = binary_undefined(batch, target)
    if why is not None:
        undefined(f"corp_{part}", why)
        return None
    d = corp_of(batch, target)
    parts = {"mcb": d.mcb, "dsc": d.dsc, "unc": d.unc}
    return {"value": parts[part], "score": d.score, **parts}


_ARGS: dict[str, Any] = {
    "family": "calibration",
    "needs": {"probs"},
    "task": "classification",
    "reference": _CORP,
}


@register("corp_mcb", direction="lower", bounds=(0.0, 1.0), best=0.0, biased=True, **_ARGS)
def corp_mcb(batch: ClassificationBatch, *, target: Target = "top_label") -> dict[str, Any] | None:
    """CORP miscalibration of the Brier score: MCB = B̄(x) − B̄(x̂), x̂ the isotonic recalibration.

    x the top-label confidence against correctness (``target="top_label"``) or the
    probability of class 1 against label 1 (``"binary"``, two classes). The dict gives
    ``mcb``, ``dsc``, ``unc`` and ``score`` = B̄(x) = MCB − DSC + UNC. Best 0; lower is better.
    Dimitriadis, Gneiting & Jordan 2021 (their ``reliabilitydiag`` R package).

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6], [0.9, 0.1]]))
    >>> d = corp_mcb(p, np.array([1, 0, 1]), target="binary")
    >>> round(d["value"], 6), round(d["dsc"], 6), round(d["unc"], 6)
    (0.236667, 0.055556, 0.222222)
    """
    return _corp_value(batch, "mcb", target)


@register("corp_dsc", direction="higher", bounds=(0.0, 0.25), biased=True, **_ARGS)
def corp_dsc(batch: ClassificationBatch, *, target: Target = "top_label") -> dict[str, Any] | None:
    """CORP discrimination of the Brier score: DSC = B̄(ō) − B̄(x̂), ō the event rate.

    Options and details as ``corp_mcb``. 0 <= DSC <= UNC <= 1/4; higher is better.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6], [0.9, 0.1]]))
    >>> round(corp_dsc(p, np.array([1, 1, 0]), target="binary")["value"], 6)
    0.222222
    """
    return _corp_value(batch, "dsc", target)


@register("corp_unc", direction="lower", bounds=(0.0, 0.25), **_ARGS)
def corp_unc(batch: ClassificationBatch, *, target: Target = "top_label") -> dict[str, Any] | None:
    """CORP uncertainty of the Brier score: UNC = B̄(ō) = ō(1 − ō), ō the weighted event rate.

    A property of the events (correctness, or label 1); its direction is nominal. Options and
    details as ``corp_mcb``.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6]]))
    >>> corp_unc(p, np.array([1, 0]), target="binary")["value"]
    0.25
    """
    return _corp_value(batch, "unc", target)


# -- Murphy (1973), binned ------------------------------------------------------------------------
def murphy_of(batch: ClassificationBatch, target: str, n_bins: int) -> dict[str, float]:
    """REL, RES, UNC and the within-bin terms of the binned decomposition (cached)."""

    def compute() -> dict[str, float]:
        x, o = event_forecast(batch, target)
        w = batch.weights_or_ones()
        total = float(np.sum(w))
        # bin (e_{j−1}, e_j], the first [0, e_1], with e = numpy.linspace(0, 1, J + 1)
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        k = np.clip(np.searchsorted(edges, x, side="left") - 1, 0, n_bins - 1)
        wk = np.bincount(k, weights=w, minlength=n_bins)
        sx = np.bincount(k, weights=w * x, minlength=n_bins)
        so = np.bincount(k, weights=w * o, minlength=n_bins)
        full = wk > 0
        xbar = np.where(full, sx / np.where(full, wk, 1.0), 0.0)
        obar_k = np.where(full, so / np.where(full, wk, 1.0), 0.0)
        obar = float(np.sum(so) / total)
        rel = float(np.sum(wk * (xbar - obar_k) ** 2) / total)
        res = float(np.sum(wk * (obar_k - obar) ** 2) / total)
        unc = obar * (1.0 - obar)
        dx, do = x - xbar[k], o - obar_k[k]
        wbv = float(np.sum(w * dx * dx) / total)
        wbc = float(-2.0 * np.sum(w * dx * do) / total)
        score = float(np.sum(w * (x - o) ** 2) / total)
        return {
            "score": score,
            "reliability": rel,
            "resolution": res,
            "uncertainty": unc,
            "within_bin_variance": wbv,
            "within_bin_covariance": wbc,
        }

    return batch.weighted(f"murphy:{target}:{n_bins}", compute)


def _murphy_value(batch: ClassificationBatch, part: str, target: str, n_bins: int) -> Any:
    why = binary_undefined(batch, target)
    if why is not None:
        undefined(f"brier_{part}", why)
        return None
    d = murphy_of(batch, target, n_bins)
    return {"value": d[part], **d, "n_bins": n_bins}


_MURPHY_ARGS: dict[str, Any] = {
    "family": "calibration",
    "needs": {"probs"},
    "task": "classification",
    "reference": _MURPHY,
    "biased": True,
}


@register("brier_reliability", direction="lower", bounds=(0.0, 1.0), best=0.0, **_MURPHY_ARGS)
def brier_reliability(
    batch: ClassificationBatch, *, target: Target = "top_label", n_bins: Bins = 10
) -> Any:
    """Brier reliability (Murphy 1973, binned): REL = Σ_k W_k (x̄_k − ō_k)² / W.

    ``n_bins`` equal-width bins on [0, 1], (e_{j−1}, e_j] with the first [0, e_1]; ``target``
    as for ``corp_mcb``. The dict gives ``reliability``, ``resolution``, ``uncertainty``,
    ``score`` (the Brier score) and the within-bin terms, with score = REL − RES + UNC +
    within_bin_variance + within_bin_covariance exactly (the binned REL − RES + UNC alone
    is not the Brier score). Best 0; lower is better; a binned estimator (biased).

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6], [0.9, 0.1]]))
    >>> round(brier_reliability(p, np.array([1, 0, 1]), target="binary", n_bins=2)["value"], 6)
    0.296667
    """
    return _murphy_value(batch, "reliability", target, n_bins)


@register("brier_resolution", direction="higher", bounds=(0.0, 0.25), **_MURPHY_ARGS)
def brier_resolution(
    batch: ClassificationBatch, *, target: Target = "top_label", n_bins: Bins = 10
) -> Any:
    """Brier resolution (Murphy 1973, binned): RES = Σ_k W_k (ō_k − ō)² / W.

    Bins, options and details as ``brier_reliability``. Higher is better.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6], [0.9, 0.1]]))
    >>> round(brier_resolution(p, np.array([1, 0, 1]), target="binary", n_bins=2)["value"], 6)
    0.055556
    """
    return _murphy_value(batch, "resolution", target, n_bins)


@register(
    "brier_uncertainty",
    direction="lower",
    bounds=(0.0, 0.25),
    **{**_MURPHY_ARGS, "biased": False},
)
def brier_uncertainty(
    batch: ClassificationBatch, *, target: Target = "top_label", n_bins: Bins = 10
) -> Any:
    """Brier uncertainty (Murphy 1973): UNC = ō(1 − ō), ō the weighted event rate.

    A property of the events (its direction is nominal); options and details as
    ``brier_reliability``.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs(np.array([[0.2, 0.8], [0.4, 0.6]]))
    >>> brier_uncertainty(p, np.array([1, 0]), target="binary")["value"]
    0.25
    """
    return _murphy_value(batch, "uncertainty", target, n_bins)
