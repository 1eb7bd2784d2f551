"""Calibration of classification predictions: top-label ECE (equal-width and equal-mass bins),
MCE, class-wise ECE, the debiased L2 ECE, and reliability-diagram data.

Binning conventions (recorded in every result's parameters):

``"width"``  B equal-width bins with edges e_b = b / B (correctly rounded); bins are closed on
             the right, (e_b, e_{b+1}], and the first bin also holds 0: a confidence s goes
             to bin ``clip(searchsorted(edges, s, side="left") − 1, 0, B − 1)``.
             Default B = 15, as in mucsanyi2024 and Guo et al. 2017.
``"mass"``   B equal-mass bins: a row goes to bin ⌊B · W(< s) / W + 1e-9⌋ (capped at B − 1),
             where W(< s) is the weight of rows with a strictly smaller confidence and W the
             total weight. Tied confidences share a bin, so bins hold about W/B each.

With sample weights each bin's accuracy and confidence are weighted means and its share is
its weight over the total weight. The confidence of a row is the top-label probability
max_c p̄_c and its outcome 1{argmax_c p̄_c = y}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch, make_batch
from uqcore.options import Bins
from uqcore.registry import register

__all__ = [
    "ReliabilityDiagram",
    "ece",
    "ece_adaptive",
    "ece_classwise",
    "ece_l2",
    "mce",
    "reliability_diagram",
]

NDArray = np.ndarray[Any, Any]
Binning = Literal["width", "mass"]

_TASK = "classification"
_GUO = "Guo et al. 2017, On calibration of modern neural networks (ICML); mucsanyi2024 §3.4"


def _check_bins(n_bins: Any) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise UQValidationError(f"n_bins must be an integer >= 1, found {n_bins!r}")
    return int(n_bins)


def _check_binning(binning: Any) -> None:
    if binning not in ("width", "mass"):
        raise UQValidationError(f"binning must be 'width' or 'mass', found {binning!r}")


def width_bins(values: NDArray, n_bins: int) -> NDArray:
    """Equal-width bin index of each value in [0, 1] (right-closed bins, 0 in the first)."""
    edges = np.arange(n_bins + 1) / n_bins
    idx = np.searchsorted(edges, values, side="left") - 1
    return np.clip(idx, 0, n_bins - 1)


def mass_bins(values: NDArray, weights: NDArray | None, n_bins: int) -> NDArray:
    """Equal-mass bin index: ⌊B · W(< v) / W + 1e-9⌋ capped at B − 1 (ties share a bin)."""
    w = np.ones(values.shape[0]) if weights is None else weights
    order = np.argsort(values, kind="stable")
    s = values[order]
    ws = w[order]
    new = np.empty(s.shape[0], dtype=bool)
    new[:1] = True
    new[1:] = s[1:] != s[:-1]
    before = np.cumsum(ws) - ws
    block = np.cumsum(new) - 1
    start_before = before[np.flatnonzero(new)][block]
    idx_sorted = np.minimum(np.floor(n_bins * start_before / np.sum(w) + 1e-9), n_bins - 1)
    out = np.empty(values.shape[0], dtype=np.int64)
    out[order] = idx_sorted.astype(np.int64)
    return out


@dataclass(frozen=True)
class _Bins:
    weight: NDArray  # W_b
    outcome: NDArray  # Σ_b w o
    conf: NDArray  # Σ_b w s
    count: NDArray  # rows with positive weight


def _tally(batch: ClassificationBatch, n_bins: int, binning: Binning) -> _Bins:
    conf = batch.confidence
    idx = width_bins(conf, n_bins) if binning == "width" else mass_bins(conf, batch.weights, n_bins)
    w = batch.weights_or_ones()
    return _Bins(
        np.bincount(idx, weights=w, minlength=n_bins),
        np.bincount(idx, weights=w * batch.correct, minlength=n_bins),
        np.bincount(idx, weights=w * conf, minlength=n_bins),
        np.bincount(idx, weights=(w > 0).astype(float), minlength=n_bins),
    )


def _ece_value(batch: ClassificationBatch, n_bins: int, binning: Binning) -> float:
    t = _tally(batch, n_bins, binning)
    return float(np.sum(np.abs(t.outcome - t.conf)) / np.sum(t.weight))


@register(
    "ece",
    biased=True,
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_GUO,
)
def ece(batch: ClassificationBatch, *, n_bins: int = 15, binning: Binning = "width") -> float:
    """Expected calibration error of the top-label confidence, equal-width bins by default.

    ECE = Σ_b (W_b / W) |acc_b − conf_b| = Σ_b |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W, with
    s_i = max_c p̄_ic and B = ``n_bins`` bins (see the module docstring for the binning
    conventions; ``binning="mass"`` gives :func:`ece_adaptive`). Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning)
    return _ece_value(batch, n_bins, binning)


@register(
    "ece_adaptive",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Nixon et al. 2019, Measuring calibration in deep learning (CVPR-W), 'ACE'",
)
def ece_adaptive(batch: ClassificationBatch, *, n_bins: int = 15) -> float:
    """Top-label ECE with equal-mass (adaptive) bins.

    The same sum as :func:`ece`, Σ_b |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W, over B bins that
    each hold about W/B of the weight (module docstring). Called "ACE" by Nixon et al.; note
    that some libraries use "ACE" for equal-width bins. Best value 0.
    """
    return _ece_value(batch, _check_bins(n_bins), "mass")


@register(
    "mce",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Naeini et al. 2015, Obtaining well calibrated probabilities using Bayesian binning",
)
def mce(batch: ClassificationBatch, *, n_bins: int = 15, binning: Binning = "width") -> float:
    """Maximum calibration error: max over bins of positive weight of |acc_b − conf_b|.

    MCE = max_{b: W_b > 0} |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W_b. Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning)
    t = _tally(batch, n_bins, binning)
    keep = t.weight > 0
    return float(np.max(np.abs(t.outcome[keep] - t.conf[keep]) / t.weight[keep]))


@register(
    "ece_classwise",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Kull et al. 2019, Beyond temperature scaling (NeurIPS), classwise-ECE",
)
def ece_classwise(batch: ClassificationBatch, *, n_bins: Bins = 15) -> float:
    """Class-wise ECE: the mean over classes of the ECE of each class probability.

    classwise-ECE = (1/C) Σ_c Σ_b |Σ_{i∈b(c)} w_i (1{y_i = c} − p̄_ic)| / W, with equal-width
    bins of p̄_ic (module docstring). Best value 0.
    """
    n_bins = _check_bins(n_bins)
    p = batch.probs
    n, c = p.shape
    w = batch.weights_or_ones()
    # sums[c·B + b] = Σ_{i: p̄_ic in bin b} w_i (1{y_i = c} − p̄_ic), in three parts: the labels'
    # indicator terms (N of them); the probabilities above the first edge 1/B, binned; and
    # those in the first bin, summed per class as one matrix-vector product. With many
    # classes most probabilities lie in the first bin, so few values need a bin search.
    sums = np.zeros(c * n_bins)
    rows = np.arange(n)
    label_bins = width_bins(p[rows, batch.y], n_bins)
    sums += np.bincount(batch.y * n_bins + label_bins, weights=w, minlength=c * n_bins)
    first_edge = 1.0 / n_bins  # = edges[1] of width_bins, correctly rounded
    step = max(1, (1 << 18) // c)
    first_bin = np.zeros(c)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        pc = p[lo:hi]
        above = pc > first_edge
        r, k = np.nonzero(above)
        vals = pc[r, k]
        idx = k * n_bins + width_bins(vals, n_bins)
        sums -= np.bincount(idx, weights=vals * w[lo:hi][r], minlength=c * n_bins)
        first_bin += w[lo:hi] @ np.where(above, 0.0, pc)
    sums[::n_bins] -= first_bin
    return float(np.sum(np.abs(sums)) / (c * float(np.sum(w))))


@register(
    "ece_l2",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Kumar et al. 2019, Verified uncertainty calibration (NeurIPS), debiased estimator",
    exempt={"scale_weights": "the debiasing term treats weights as counts (W_b − 1)"},
)
def ece_l2(
    batch: ClassificationBatch,
    *,
    n_bins: int = 15,
    binning: Binning = "width",
    debias: bool = True,
) -> float:
    """Top-label L2 calibration error, debiased (Kumar et al. 2019) by default.

    Plug-in: ECE₂² = Σ_b (W_b/W)(acc_b − conf_b)². Debiased: each bin with W_b > 1 subtracts
    acc_b (1 − acc_b) / (W_b − 1), the expected excess of the squared gap from sampling noise;
    the result is √max(0, ECE₂²). Weights act as counts in W_b − 1. Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning)
    t = _tally(batch, n_bins, binning)
    keep = t.weight > 0
    wb = t.weight[keep]
    acc = t.outcome[keep] / wb
    gap2 = (acc - t.conf[keep] / wb) ** 2
    if debias:
        corr = np.zeros_like(gap2)
        big = wb > 1
        corr[big] = acc[big] * (1.0 - acc[big]) / (wb[big] - 1.0)
        gap2 = gap2 - corr
    total = float(np.sum(wb * gap2) / np.sum(t.weight))
    return float(np.sqrt(max(0.0, total)))


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Per-bin data of a reliability diagram (top-label confidence against accuracy).

    Attributes
    ----------
    lower, upper : tuple of float
        Bin bounds: the edges for ``"width"`` bins; for ``"mass"`` bins the smallest and
        largest confidence in the bin (``None`` for an empty bin).
    confidence, accuracy : tuple of float or None
        Weighted mean confidence and accuracy per bin (``None`` for an empty bin).
    weight : tuple of float
        Total weight per bin (the row count when unweighted).
    count : tuple of int
        Rows of positive weight per bin.
    binning : str
    """

    lower: tuple[float | None, ...]
    upper: tuple[float | None, ...]
    confidence: tuple[float | None, ...]
    accuracy: tuple[float | None, ...]
    weight: tuple[float, ...]
    count: tuple[int, ...]
    binning: str


def reliability_diagram(
    prediction: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: Binning = "width",
    sample_weight: Any = None,
) -> ReliabilityDiagram:
    """Reliability-diagram data with the bins of :func:`ece` (module docstring).

    >>> import numpy as np
    >>> from uqcore.predictions import Probs
    >>> d = reliability_diagram(Probs(np.array([[0.9, 0.1], [0.6, 0.4]])), [0, 1], n_bins=2)
    >>> d.confidence, d.accuracy, d.count
    ((None, 0.75), (None, 0.5), (0, 2))
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning)
    batch = make_batch(prediction, labels, sample_weight)
    if not isinstance(batch, ClassificationBatch):
        raise UQValidationError("reliability_diagram needs a classification prediction")
    t = _tally(batch, n_bins, binning)
    keep = t.weight > 0

    def per_bin(num: NDArray) -> tuple[float | None, ...]:
        return tuple(float(num[b] / t.weight[b]) if keep[b] else None for b in range(n_bins))

    if binning == "width":
        edges = np.arange(n_bins + 1) / n_bins
        lower: tuple[float | None, ...] = tuple(float(e) for e in edges[:-1])
        upper: tuple[float | None, ...] = tuple(float(e) for e in edges[1:])
    else:
        idx = mass_bins(batch.confidence, batch.weights, n_bins)
        pos = batch.weights_or_ones() > 0
        lo_l: list[float | None] = []
        hi_l: list[float | None] = []
        for b in range(n_bins):
            sel = batch.confidence[(idx == b) & pos]
            lo_l.append(float(sel.min()) if sel.size else None)
            hi_l.append(float(sel.max()) if sel.size else None)
        lower, upper = tuple(lo_l), tuple(hi_l)
    return ReliabilityDiagram(
        lower=lower,
        upper=upper,
        confidence=per_bin(t.conf),
        accuracy=per_bin(t.outcome),
        weight=tuple(float(v) for v in t.weight),
        count=tuple(int(v) for v in t.count),
        binning=binning,
    )
