"""Quality of prediction sets (e.g. conformal classification): coverage, marginal and by class
or set size, and the size of the sets.

Every metric reads the N×C booleans of a ``PredictionSet`` (capability ``sets``); the label
y_i is covered when it is in row i's set. Weighted means are Σ w_i t_i / Σ w_i over rows;
classes and strata of zero total weight are left out, so that a zero weight is the same as no
row.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np

from uqcore.batch import ClassificationBatch
from uqcore.options import Coverage, Range
from uqcore.predictions.classification import PredictionSet
from uqcore.registry import register

__all__ = [
    "class_conditional_coverage_gap",
    "coverage",
    "empty_rate",
    "mean_set_size",
    "singleton_rate",
    "size_stratified_coverage",
    "worst_class_coverage",
]

_TASK = "classification"
_ANGELOPOULOS = (
    "Angelopoulos, Bates, Malik & Jordan 2021, Uncertainty sets for image classifiers using "
    "conformal prediction (ICLR), §4 and Table 3 (size-stratified coverage)"
)
_DING = (
    "Ding, Angelopoulos, Bates, Jordan & Tibshirani 2023, Class-conditional conformal "
    "prediction with many classes (NeurIPS), §2 (CovGap)"
)
_MAPIE = "MAPIE (mapie.metrics.classification)"

FloatArray = np.ndarray[Any, Any]
#: Strata of ``size_stratified_coverage``: one per set size, Angelopoulos et al.'s size ranges,
#: or MAPIE's ``classification_ssc`` bins.
SizeStrata = Literal["size", "angelopoulos", "mapie"]

#: Angelopoulos et al. 2021's strata of set sizes (their Table 3), as [lo, hi] inclusive.
ANGELOPOULOS_STRATA: tuple[tuple[int, int], ...] = (
    (0, 1),
    (2, 3),
    (4, 6),
    (7, 10),
    (11, 100),
    (101, 1000),
)


def _in_set(batch: ClassificationBatch) -> FloatArray:
    """1.0 where the label is in the row's set."""

    def compute() -> FloatArray:
        sets = _sets_of(batch).sets()
        out: FloatArray = sets[np.arange(batch.n), batch.y].astype(np.float64)
        return out

    return batch.shared("in_set", compute)


def _sets_of(batch: ClassificationBatch) -> PredictionSet:
    pred = batch.prediction
    assert isinstance(pred, PredictionSet)  # the registry checked the capability "sets"
    return pred


def _sizes(batch: ClassificationBatch) -> FloatArray:
    return batch.shared("set_sizes", lambda: _sets_of(batch).set_sizes().astype(np.float64))


def _per_class(batch: ClassificationBatch) -> tuple[FloatArray, FloatArray]:
    """(coverage of each class with positive weight, its total weight)."""
    w = batch.weights_or_ones()
    c = batch.prediction.n_classes
    total = np.bincount(batch.y, weights=w, minlength=c)
    hit = np.bincount(batch.y, weights=w * _in_set(batch), minlength=c)
    present = total > 0
    return hit[present] / total[present], total[present]


@register(
    "coverage",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="target",
    bounds=(0.0, 1.0),
    best=0.9,
    reference=_MAPIE + " classification_coverage_score; " + _ANGELOPOULOS,
    mean_terms=lambda batch, level=0.9: _in_set(batch),
)
def coverage(batch: ClassificationBatch, *, level: Coverage = 0.9) -> float:
    """Coverage of prediction sets: Σ w_i 1{y_i ∈ S_i} / Σ w_i.

    The best value is the nominal coverage ``level`` 1 − α (default 0.9; direction "target"),
    which only says what the value is compared with. MAPIE's ``classification_coverage_score``
    is the unweighted value.

    >>> import numpy as np; from uqcore import predictions as P
    >>> coverage(P.PredictionSet([[1, 0], [1, 1], [0, 0]]), np.array([0, 1, 1]))
    0.6666666666666666
    """
    return batch.mean(_in_set(batch))


@register(
    "mean_set_size",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="lower",
    bounds=(0.0, None),
    reference=_MAPIE + " classification_mean_width_score; " + _ANGELOPOULOS,
    mean_terms=_sizes,
)
def mean_set_size(batch: ClassificationBatch) -> float:
    """Mean size of prediction sets: Σ w_i |S_i| / Σ w_i.

    Smaller sets are more informative, but only at the same coverage; no best value. MAPIE's
    ``classification_mean_width_score`` is the unweighted value.

    >>> import numpy as np; from uqcore import predictions as P
    >>> mean_set_size(P.PredictionSet([[1, 0], [1, 1], [0, 0]]), np.array([0, 1, 1]))
    1.0
    """
    return batch.mean(_sizes(batch))


def _singleton(batch: ClassificationBatch) -> FloatArray:
    out: FloatArray = (_sizes(batch) == 1).astype(np.float64)
    return out


def _empty(batch: ClassificationBatch) -> FloatArray:
    out: FloatArray = (_sizes(batch) == 0).astype(np.float64)
    return out


@register(
    "singleton_rate",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="higher",
    bounds=(0.0, 1.0),
    reference=_ANGELOPOULOS,
    mean_terms=_singleton,
)
def singleton_rate(batch: ClassificationBatch) -> float:
    """Share of prediction sets with exactly one class: Σ w_i 1{|S_i| = 1} / Σ w_i.

    Higher is more decisive (at the same coverage); no best value.

    >>> import numpy as np; from uqcore import predictions as P
    >>> singleton_rate(P.PredictionSet([[1, 0], [1, 1], [0, 0]]), np.array([0, 1, 1]))
    0.3333333333333333
    """
    return batch.mean(_singleton(batch))


@register(
    "empty_rate",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_ANGELOPOULOS,
    mean_terms=_empty,
)
def empty_rate(batch: ClassificationBatch) -> float:
    """Share of empty prediction sets: Σ w_i 1{|S_i| = 0} / Σ w_i.

    An empty set never covers (conformal methods without randomisation produce them at
    small α); best value 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> empty_rate(P.PredictionSet([[1, 0], [1, 1], [0, 0]]), np.array([0, 1, 1]))
    0.3333333333333333
    """
    return batch.mean(_empty(batch))


@register(
    "class_conditional_coverage_gap",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_DING,
)
def class_conditional_coverage_gap(batch: ClassificationBatch, *, level: Coverage = 0.9) -> float:
    """Mean over classes of the distance of class-conditional coverage from the nominal level.

    CovGap = (1/|K|) Σ_{k∈K} |ĉ_k − (1 − α)|, ĉ_k = Σ_{y_i=k} w_i 1{y_i ∈ S_i} / Σ_{y_i=k} w_i,
    K the classes present among the labels (positive total weight), 1 − α = ``level``
    (default 0.9). Ding et al. 2023 report it in percent; this is the fraction (× 100 gives
    theirs). Best value 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> s = P.PredictionSet([[1, 0], [1, 0], [0, 1], [1, 0]])
    >>> round(class_conditional_coverage_gap(s, np.array([0, 0, 1, 1]), level=0.5), 12)
    0.25
    """
    cov, _ = _per_class(batch)
    return float(np.mean(np.abs(cov - level)))


@register(
    "worst_class_coverage",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="target",
    bounds=(0.0, 1.0),
    best=0.9,
    reference=_DING,
    structured=True,
)
def worst_class_coverage(batch: ClassificationBatch, *, level: Coverage = 0.9) -> dict[str, Any]:
    """Lowest class-conditional coverage: min_k ĉ_k over the classes present among the labels.

    ĉ_k = Σ_{y_i=k} w_i 1{y_i ∈ S_i} / Σ_{y_i=k} w_i. Its target is the nominal coverage
    ``level`` (default 0.9): class-conditional conformal prediction (Ding et al. 2023) aims
    at ĉ_k ≥ 1 − α for every class. Returns ``{"value", "class": the class (its index),
    "level"}``; the first of tied classes.

    >>> import numpy as np; from uqcore import predictions as P
    >>> s = P.PredictionSet([[1, 0], [1, 0], [0, 1], [1, 0]])
    >>> worst_class_coverage(s, np.array([0, 0, 1, 1]))
    {'value': 0.5, 'class': 1, 'level': 0.9}
    """
    w = batch.weights_or_ones()
    c = batch.prediction.n_classes
    total = np.bincount(batch.y, weights=w, minlength=c)
    hit = np.bincount(batch.y, weights=w * _in_set(batch), minlength=c)
    cov = np.where(total > 0, hit / np.where(total > 0, total, 1.0), np.inf)
    k = int(np.argmin(cov))
    return {"value": float(cov[k]), "class": k, "level": float(level)}


def _size_strata(strata: str, bins: int | None, n_classes: int) -> list[tuple[int, int]]:
    """The strata of set sizes as [lo, hi] inclusive."""
    if strata == "angelopoulos":
        return [*ANGELOPOULOS_STRATA, (1001, max(1001, n_classes))]
    if strata == "mapie" and bins is not None:
        # MAPIE's classification_ssc: bins start at the first size of each array_split part
        starts = [int(part[0]) for part in np.array_split(np.arange(n_classes + 1), bins)]
        return [(a, b - 1) for a, b in zip(starts, [*starts[1:], n_classes + 1], strict=True)]
    return [(s, s) for s in range(n_classes + 1)]


@register(
    "size_stratified_coverage",
    task=_TASK,
    family="sets",
    needs={"sets"},
    direction="target",
    bounds=(0.0, 1.0),
    best=0.9,
    reference=_ANGELOPOULOS + "; " + _MAPIE + " classification_ssc",
    structured=True,
)
def size_stratified_coverage(
    batch: ClassificationBatch,
    *,
    level: Coverage = 0.9,
    strata: SizeStrata = "size",
    bins: Annotated[int, Range(1, 100_000)] | None = None,
) -> dict[str, Any]:
    """Coverage of prediction sets in each set-size stratum; the value is the worst stratum.

    SSC = min_k Σ_{i∈k} w_i 1{y_i ∈ S_i} / Σ_{i∈k} w_i over the non-empty strata k of the set
    sizes |S_i| (MAPIE's ``classification_ssc_score``, the minimum; Angelopoulos et al. 2021
    report per stratum). Its target is the nominal coverage ``level`` (default 0.9).
    ``strata``: ``"size"`` (default) one stratum per set size 0, ..., C (MAPIE's
    ``classification_ssc`` with ``num_bins=None``); ``"angelopoulos"`` their sizes 0–1, 2–3,
    4–6, 7–10, 11–100, 101–1000 (and > 1000); ``"mapie"`` with ``bins`` MAPIE's
    ``num_bins``: the sizes 0, ..., C cut by ``numpy.array_split`` into ``bins`` ranges
    (without ``bins`` as ``"size"``).
    Returns ``{"value", "coverage": [per stratum], "sizes": [[lo, hi] per stratum], "share",
    "violation", "level", "strata"}`` for the non-empty strata; ``violation`` is
    Angelopoulos et al.'s SSCV, max_k |coverage_k − level|.

    >>> import numpy as np; from uqcore import predictions as P
    >>> s = P.PredictionSet([[1, 0], [0, 1], [1, 1], [1, 1]])
    >>> size_stratified_coverage(s, np.array([0, 0, 1, 0]))["coverage"]
    [0.5, 1.0]
    """
    edges = _size_strata(strata, bins, batch.prediction.n_classes)
    c = batch.prediction.n_classes
    table = np.zeros(c + 1, dtype=np.int64)  # stratum of each set size
    for k, (lo, hi) in enumerate(edges):
        table[lo : min(hi, c) + 1] = k
    codes = table[_sizes(batch).astype(np.int64)]
    w = batch.weights_or_ones()
    tw = np.bincount(codes, weights=w, minlength=len(edges))
    hit = np.bincount(codes, weights=w * _in_set(batch), minlength=len(edges))
    total = float(np.sum(w))
    cov: list[float] = []
    share: list[float] = []
    kept: list[list[int]] = []
    for k, (lo, hi) in enumerate(edges):
        if tw[k] > 0:
            cov.append(float(hit[k] / tw[k]))
            share.append(float(tw[k]) / total)
            kept.append([lo, hi])
    return {
        "value": min(cov),
        "coverage": cov,
        "sizes": kept,
        "share": share,
        "violation": max(abs(v - level) for v in cov),
        "level": float(level),
        "strata": strata,
    }
