"""Weighted, tie-aware rank statistics shared by the classification metrics (numpy, float64).

Ties are handled exactly: rows with equal scores form one block and every statistic treats a
block as a whole (AUROC counts a tied positive–negative pair as 1/2; curves have one point per
distinct score). Weights are frequency weights: an integer weight k equals k copies of a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore._backend import argsort_host
from uqcore._scaling import exponent, rescaled
from uqcore._stats import weighted_midranks, weighted_pearson

NDArray = np.ndarray[Any, Any]

__all__ = [
    "Blocks",
    "auroc",
    "average_precision",
    "blocks",
    "cached_order",
    "estimate_order",
    "spearman",
]


@dataclass(frozen=True)
class Blocks:
    """Per distinct score (ascending): its value, total weight and total positive weight."""

    value: NDArray
    weight: NDArray
    positive: NDArray


def cached_order(batch: Any, key: str, values: Callable[[], NDArray]) -> NDArray:
    """The stable ascending argsort of ``values()``, cached on ``batch`` under ``key``.

    Orders do not depend on the weights, so re-weighted copies of the batch (bootstrap
    resamples) share them, and every metric of one estimator sorts it once.
    """
    return batch.shared(f"order:{key}", lambda: argsort_host(values(), stable=True))  # type: ignore[no-any-return]


def estimate_order(batch: Any, name: str) -> NDArray:
    """The cached stable argsort of the batch's estimate ``name``."""
    return cached_order(batch, f"estimate:{name}", lambda: batch.estimate(name))


def blocks(
    score: NDArray, positive: NDArray, weights: NDArray | None, order: NDArray | None = None
) -> Blocks:
    """Group rows by distinct ``score`` (ascending) and sum weights and positive weights;
    ``order`` is the stable argsort of ``score`` when the caller has it."""
    w = np.ones(score.shape[0]) if weights is None else weights
    if order is None:
        order = argsort_host(score, stable=True)
    s = score[order]
    new = np.empty(s.shape[0], dtype=bool)
    new[:1] = True
    new[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(new)
    ws = w[order]
    ps = ws * positive[order].astype(np.float64)
    return Blocks(s[starts], np.add.reduceat(ws, starts), np.add.reduceat(ps, starts))


def auroc(
    score: NDArray, positive: NDArray, weights: NDArray | None, order: NDArray | None = None
) -> float | None:
    """P(score_pos > score_neg) + ½ P(score_pos = score_neg) under the weights (Mann–Whitney);
    ``None`` when either class has no weight."""
    if weights is not None:
        # products of two weights (wp·wn) overflow for weights of 1e160 and underflow for
        # 1e-160: the AUROC does not change when the weights are divided by a power of two
        # (exactly), so that the largest lies in [1/2, 1)
        weights = rescaled(weights, exponent(float(np.max(weights))))
    b = blocks(score, positive, weights, order)
    neg = b.weight - b.positive
    wp, wn = float(np.sum(b.positive)), float(np.sum(neg))
    if wp <= 0.0 or wn <= 0.0:
        return None
    below = np.cumsum(neg) - neg
    return float(np.sum(b.positive * (below + 0.5 * neg)) / (wp * wn))


def average_precision(
    score: NDArray, positive: NDArray, weights: NDArray | None, order: NDArray | None = None
) -> float | None:
    """AP = Σ_k (R_k − R_{k−1}) P_k over the distinct thresholds t_k (descending), predicting
    positive when score ≥ t_k (scikit-learn's ``average_precision_score``); ``None`` when the
    positives have no weight."""
    b = blocks(score, positive, weights, order)
    tp = np.cumsum(b.positive[::-1])
    pred = np.cumsum(b.weight[::-1])
    wp = float(tp[-1]) if tp.size else 0.0
    if wp <= 0.0:
        return None
    gain = b.positive[::-1] / wp
    keep = gain > 0
    return float(np.sum(gain[keep] * tp[keep] / pred[keep]))


def spearman(
    a: NDArray,
    b: NDArray,
    weights: NDArray | None,
    orders: tuple[NDArray, NDArray] | None = None,
) -> float | None:
    """Spearman correlation: Pearson correlation of (weighted) mid-ranks, ties averaged as in
    ``scipy.stats.spearmanr``; ``None`` when either variable is constant. ``orders`` are the
    stable argsorts of ``a`` and ``b`` when the caller has them."""
    if orders is None:
        orders = (argsort_host(a, stable=True), argsort_host(b, stable=True))
    ra = weighted_midranks(np, a, weights, orders[0])
    rb = weighted_midranks(np, b, weights, orders[1])
    return weighted_pearson(np, ra, rb, weights)
