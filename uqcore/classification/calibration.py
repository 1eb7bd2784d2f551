"""Calibration of classification predictions: top-label ECE (equal-width and equal-mass bins),
MCE, the average calibration error ACE, class-wise ECE, the debiased L2 ECE, and
reliability-diagram data.

Binning conventions (recorded in every result's parameters):

``"width"``  B equal-width bins with edges e_b = b / B (correctly rounded). Which side of a bin
             is closed is the option ``bins_closed``:

             ``"right"`` (default)      (e_b, e_{b+1}], the first bin also holding 0: a
                                        confidence s goes to bin
                                        ``clip(searchsorted(edges, s, "left") − 1, 0, B − 1)``.
             ``"left"``                 [e_b, e_{b+1}) for every bin, so a confidence of
                                        exactly 1 lies in a bin of its own after the B bins:
                                        bin ``searchsorted(edges, s, "right") − 1`` of B + 1.
                                        This is torchmetrics' ``calibration_error`` (and
                                        torch-uncertainty's ``CalibrationError``, the same
                                        code): ``bucketize(s, linspace(0, 1, B + 1),
                                        right=True) − 1`` over B + 1 bins.
             ``"left_last_closed"``     [e_b, e_{b+1}), the last bin closed, [e_{B−1}, 1]:
                                        numpy.histogram's rule, used by netcal's ``ECE``,
                                        ``MCE`` and ``ACE``.

             The peers compute their edges with ``linspace`` in floating point: torchmetrics in
             float32, with the confidences cast to float32 as well, netcal as b · (1/B) in
             float64, which lies one rounding above b/B for some b (B = 10: 0.3, 0.6 and 0.7).
             A confidence within such a rounding of an edge can therefore fall into the
             neighbouring bin there; elsewhere the bins are the same.
             Default B = 15, as in mucsanyi2024 and Guo et al. 2017.
``"mass"``   B equal-mass bins. How tied confidences are treated is the option ``ties``:

             ``"together"`` (default)   a row goes to bin ⌊B · W(< s) / W + 1e-9⌋ (capped at
                                        B − 1), where W(< s) is the weight of rows with a
                                        strictly smaller confidence and W the total weight.
                                        Tied confidences share a bin, so bins hold about
                                        W/B each.
             ``"split"``                by position, as torch-uncertainty's
                                        ``AdaptiveCalibrationError``: the rows sorted by
                                        confidence are cut into B runs of consecutive rows,
                                        the first N mod B of them one row longer
                                        (``tensor_split``): bin k holds the positions
                                        [β_k, β_{k+1}) with β_k = k ⌊N/B⌋ + min(k, N mod B).
                                        A block of tied rows that straddles a cut is split
                                        by weight, each part carrying the block's mean
                                        outcome: the peer's sort leaves the order of tied
                                        rows unspecified, and these are its bin sums
                                        averaged over those orders. Weights act as counts
                                        (N is the total weight W, positions run over the
                                        accumulated weight, and N mod B is W − B ⌊W/B⌋), so
                                        scaling the weights changes the bins.

With sample weights each bin's accuracy and confidence are weighted means and its share is
its weight over the total weight. The confidence of a row is the top-label probability
max_c p̄_c and its outcome 1{argmax_c p̄_c = y}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._backend import argsort_host
from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch, make_batch
from uqcore.options import Bins
from uqcore.registry import register

__all__ = [
    "ReliabilityDiagram",
    "ace",
    "ece",
    "ece_adaptive",
    "ece_classwise",
    "ece_l2",
    "mce",
    "reliability_diagram",
]

NDArray = np.ndarray[Any, Any]
Binning = Literal["width", "mass"]
BinsClosed = Literal["right", "left", "left_last_closed"]
Ties = Literal["together", "split"]

_TASK = "classification"
_GUO = "Guo et al. 2017, On calibration of modern neural networks (ICML); mucsanyi2024 §3.4"


def _check_bins(n_bins: Any) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise UQValidationError(f"n_bins must be an integer >= 1, found {n_bins!r}")
    return int(n_bins)


def _binning_rules(options: Mapping[str, Any]) -> None:
    """The rules across the binning options of ``ece``, ``mce`` and ``ece_l2``."""
    _check_binning(options["binning"], options["bins_closed"], options["ties"])


def _check_binning(
    binning: Any, bins_closed: Any = "right", ties: Any = "together", *, mass: bool = True
) -> None:
    """Check the binning options; ``mass=False`` where equal-mass bins are not offered."""
    if binning not in (("width", "mass") if mass else ("width",)):
        allowed = "'width' or 'mass'" if mass else "'width'"
        raise UQValidationError(f"binning must be {allowed}, found {binning!r}")
    if bins_closed not in ("right", "left", "left_last_closed"):
        raise UQValidationError(
            f"bins_closed must be 'right', 'left' or 'left_last_closed', found {bins_closed!r}"
        )
    if ties not in ("together", "split"):
        raise UQValidationError(f"ties must be 'together' or 'split', found {ties!r}")
    if binning == "mass" and bins_closed != "right":
        raise UQValidationError(
            f"bins_closed applies to binning='width' (bin edges), found bins_closed="
            f"{bins_closed!r} with binning='mass'",
            argument="bins_closed",
        )
    if binning == "width" and ties != "together":
        raise UQValidationError(
            f"ties applies to binning='mass', found ties={ties!r} with binning='width'",
            argument="ties",
        )


def _slots(n_bins: int, bins_closed: BinsClosed) -> int:
    """Number of width bins: B, and one more for a confidence of 1 when ``"left"``."""
    return n_bins + 1 if bins_closed == "left" else n_bins


def width_bins(values: NDArray, n_bins: int, bins_closed: BinsClosed = "right") -> NDArray:
    """Equal-width bin index of each value in [0, 1] (module docstring for ``bins_closed``)."""
    edges = np.arange(n_bins + 1) / n_bins
    if bins_closed == "right":
        return np.clip(np.searchsorted(edges, values, side="left") - 1, 0, n_bins - 1)
    idx = np.searchsorted(edges, values, side="right") - 1
    return idx if bins_closed == "left" else np.minimum(idx, n_bins - 1)


def mass_bins(values: NDArray, weights: NDArray | None, n_bins: int) -> NDArray:
    """Equal-mass bin index: ⌊B · W(< v) / W + 1e-9⌋ capped at B − 1 (ties share a bin)."""
    w = np.ones(values.shape[0]) if weights is None else weights
    order = argsort_host(values, stable=True)
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


def split_mass_tally(
    values: NDArray, outcome: NDArray, weights: NDArray, n_bins: int
) -> tuple[NDArray, NDArray, NDArray]:
    """Per-bin weight, weighted outcome sum and weighted value sum of equal-mass bins cut by
    position (``ties="split"``, module docstring).

    Along the rows sorted by value, the accumulated weight x and the accumulated sums are
    piecewise linear in x (linear inside a block of ties, which is spread evenly), so each
    bin's sums are the differences of those functions at its cuts β_k.
    """
    keep = weights > 0
    v, o, w = values[keep], outcome[keep], weights[keep]
    order = argsort_host(v, stable=True)
    v, o, w = v[order], o[order], w[order]
    new = np.empty(v.shape[0], dtype=bool)
    new[:1] = True
    new[1:] = v[1:] != v[:-1]
    starts = np.flatnonzero(new)
    knots = np.concatenate([[0.0], np.cumsum(np.add.reduceat(w, starts))])
    total = float(knots[-1])
    q = np.floor(total / n_bins)
    r = total - n_bins * q
    k = np.arange(n_bins + 1)
    cuts = k * q + np.minimum(k, r)
    cuts[-1] = total

    def at_cuts(x: NDArray) -> NDArray:
        cum = np.concatenate([[0.0], np.cumsum(np.add.reduceat(x, starts))])
        return np.diff(np.interp(cuts, knots, cum))

    return np.diff(cuts), at_cuts(w * o), at_cuts(w * v)


@dataclass(frozen=True)
class _Bins:
    weight: NDArray  # W_b
    outcome: NDArray  # Σ_b w o
    conf: NDArray  # Σ_b w s


def _bin_index(
    batch: ClassificationBatch, n_bins: int, binning: Binning, bins_closed: BinsClosed
) -> NDArray:
    conf = batch.confidence
    if binning == "width":
        return width_bins(conf, n_bins, bins_closed)
    return mass_bins(conf, batch.weights, n_bins)


def _tally(
    batch: ClassificationBatch,
    n_bins: int,
    binning: Binning,
    bins_closed: BinsClosed = "right",
    ties: Ties = "together",
) -> _Bins:
    w = batch.weights_or_ones()
    if binning == "mass" and ties == "split":
        return _Bins(*split_mass_tally(batch.confidence, batch.correct, w, n_bins))
    idx = _bin_index(batch, n_bins, binning, bins_closed)
    slots = _slots(n_bins, bins_closed) if binning == "width" else n_bins
    return _Bins(
        np.bincount(idx, weights=w, minlength=slots),
        np.bincount(idx, weights=w * batch.correct, minlength=slots),
        np.bincount(idx, weights=w * batch.confidence, minlength=slots),
    )


def _ece_value(
    batch: ClassificationBatch,
    n_bins: int,
    binning: Binning,
    bins_closed: BinsClosed = "right",
    ties: Ties = "together",
) -> float:
    t = _tally(batch, n_bins, binning, bins_closed, ties)
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
    check_options=_binning_rules,
)
def ece(
    batch: ClassificationBatch,
    *,
    n_bins: Bins = 15,
    binning: Binning = "width",
    bins_closed: BinsClosed = "right",
    ties: Ties = "together",
) -> float:
    """Expected calibration error of the top-label confidence, equal-width bins by default.

    ECE = Σ_b (W_b / W) |acc_b − conf_b| = Σ_b |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W, with
    s_i = max_c p̄_ic and B = ``n_bins`` bins (see the module docstring for the binning
    conventions; ``binning="mass"`` gives :func:`ece_adaptive`). ``bins_closed`` chooses the
    closed side of equal-width bins: ``"right"`` (default), ``"left"`` (torchmetrics'
    ``multiclass_calibration_error`` with ``norm="l1"``), ``"left_last_closed"`` (netcal's
    ``ECE``); ``ties`` the treatment of ties in equal-mass bins: ``"together"`` (default) or
    ``"split"`` (torch-uncertainty's ``AdaptiveCalibrationError``). Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning, bins_closed, ties)
    return _ece_value(batch, n_bins, binning, bins_closed, ties)


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
def ece_adaptive(
    batch: ClassificationBatch, *, n_bins: Bins = 15, ties: Ties = "together"
) -> float:
    """Top-label ECE with equal-mass (adaptive) bins.

    The same sum as :func:`ece`, Σ_b |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W, over B bins that
    each hold about W/B of the weight (module docstring). ``ties="together"`` (default) keeps
    tied confidences in one bin; ``ties="split"`` cuts the sorted rows by position, as
    torch-uncertainty's ``AdaptiveCalibrationError`` (norm "l1"), with weights as counts.
    Called "ACE" by Nixon et al.; netcal's "ACE" is another metric, :func:`ace`.
    Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning("mass", "right", ties)
    return _ece_value(batch, n_bins, "mass", "right", ties)


@register(
    "mce",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Naeini et al. 2015, Obtaining well calibrated probabilities using Bayesian binning",
    check_options=_binning_rules,
)
def mce(
    batch: ClassificationBatch,
    *,
    n_bins: Bins = 15,
    binning: Binning = "width",
    bins_closed: BinsClosed = "right",
    ties: Ties = "together",
) -> float:
    """Maximum calibration error: max over bins of positive weight of |acc_b − conf_b|.

    MCE = max_{b: W_b > 0} |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W_b, with the bins of
    :func:`ece` (``bins_closed="left"``: torchmetrics with ``norm="max"``;
    ``"left_last_closed"``: netcal's ``MCE``; ``ties="split"``: torch-uncertainty's
    ``AdaptiveCalibrationError`` with ``norm="max"``). Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning, bins_closed, ties)
    t = _tally(batch, n_bins, binning, bins_closed, ties)
    keep = t.weight > 0
    return float(np.max(np.abs(t.outcome[keep] - t.conf[keep]) / t.weight[keep]))


@register(
    "ace",
    biased=True,
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Neumann et al. 2018, Relaxed softmax (NeurIPS-W MLITS), ACE; netcal "
    "(Küppers et al. 2020) metrics.ACE",
)
def ace(
    batch: ClassificationBatch, *, n_bins: Bins = 15, bins_closed: BinsClosed = "right"
) -> float:
    """Average calibration error: the unweighted mean of |acc_b − conf_b| over non-empty bins.

    ACE = (1/|B⁺|) Σ_{b∈B⁺} |Σ_{i∈b} w_i (1{ŷ_i = y_i} − s_i)| / W_b over the equal-width
    bins of positive weight B⁺ = {b : W_b > 0}, with the bins of :func:`ece` (module
    docstring). Unlike the ECE every non-empty bin counts the same, however few rows it
    holds. This is netcal's ``ACE`` (Neumann et al. 2018); netcal's bins are
    ``bins_closed="left_last_closed"`` with B = 10 by default, and netcal clips the
    probabilities to [ε, 1 − ε] (ε the float64 epsilon) first, which moves a confidence of 1
    by 2.2e-16. Not Nixon et al.'s adaptive ECE, also called "ACE" (:func:`ece_adaptive`).
    Best value 0.

    >>> import numpy as np
    >>> from uqcore.predictions import Probs
    >>> p = Probs(np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3]]))
    >>> round(ace(p, [0, 1, 0], n_bins=2), 6)  # bins (0.5, 1]: |2/3 − 11/15|; [0, 0.5]: empty
    0.066667
    """
    n_bins = _check_bins(n_bins)
    _check_binning("width", bins_closed)
    t = _tally(batch, n_bins, "width", bins_closed)
    keep = t.weight > 0
    return float(np.mean(np.abs(t.outcome[keep] - t.conf[keep]) / t.weight[keep]))


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
    check_options=_binning_rules,
)
def ece_l2(
    batch: ClassificationBatch,
    *,
    n_bins: Bins = 15,
    binning: Binning = "width",
    debias: bool = True,
    bins_closed: BinsClosed = "right",
    ties: Ties = "together",
) -> float:
    """Top-label L2 calibration error, debiased (Kumar et al. 2019) by default.

    Plug-in: ECE₂² = Σ_b (W_b/W)(acc_b − conf_b)². Debiased: each bin with W_b > 1 subtracts
    acc_b (1 − acc_b) / (W_b − 1), the expected excess of the squared gap from sampling noise;
    the result is √max(0, ECE₂²). Weights act as counts in W_b − 1. The bins are those of
    :func:`ece` (``bins_closed``, ``ties``: module docstring); with ``debias=False``,
    ``bins_closed="left"`` is torchmetrics' ``calibration_error`` with ``norm="l2"`` and
    ``binning="mass", ties="split"`` torch-uncertainty's ``AdaptiveCalibrationError`` with
    ``norm="l2"``. Best value 0.
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning, bins_closed, ties)
    t = _tally(batch, n_bins, binning, bins_closed, ties)
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
    bins_closed : str
        The closed side of equal-width bins (module docstring).
    """

    lower: tuple[float | None, ...]
    upper: tuple[float | None, ...]
    confidence: tuple[float | None, ...]
    accuracy: tuple[float | None, ...]
    weight: tuple[float, ...]
    count: tuple[int, ...]
    binning: str
    bins_closed: str = "right"


def reliability_diagram(
    prediction: Any,
    labels: Any,
    *,
    n_bins: Bins = 15,
    binning: Binning = "width",
    bins_closed: BinsClosed = "right",
    sample_weight: Any = None,
) -> ReliabilityDiagram:
    """Reliability-diagram data with the bins of :func:`ece` (module docstring).

    With ``bins_closed="left"`` there are B + 1 bins, the last one [1, 1] holding the
    confidences of exactly 1. Equal-mass bins keep ties together (``ties="together"``).

    >>> import numpy as np
    >>> from uqcore.predictions import Probs
    >>> d = reliability_diagram(Probs(np.array([[0.9, 0.1], [0.6, 0.4]])), [0, 1], n_bins=2)
    >>> d.confidence, d.accuracy, d.count
    ((None, 0.75), (None, 0.5), (0, 2))
    """
    n_bins = _check_bins(n_bins)
    _check_binning(binning, bins_closed)
    batch = make_batch(prediction, labels, sample_weight)
    if not isinstance(batch, ClassificationBatch):
        raise UQValidationError("reliability_diagram needs a classification prediction")
    t = _tally(batch, n_bins, binning, bins_closed)
    keep = t.weight > 0
    slots = t.weight.shape[0]
    idx = _bin_index(batch, n_bins, binning, bins_closed)
    pos = batch.weights_or_ones() > 0
    count = np.bincount(idx[pos], minlength=slots)

    def per_bin(num: NDArray) -> tuple[float | None, ...]:
        return tuple(float(num[b] / t.weight[b]) if keep[b] else None for b in range(slots))

    if binning == "width":
        edges = np.arange(n_bins + 1) / n_bins
        if bins_closed == "left":
            edges = np.append(edges, 1.0)  # the bin [1, 1]
        lower: tuple[float | None, ...] = tuple(float(e) for e in edges[:-1])
        upper: tuple[float | None, ...] = tuple(float(e) for e in edges[1:])
    else:
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
        count=tuple(int(v) for v in count),
        binning=binning,
        bins_closed=bins_closed,
    )
