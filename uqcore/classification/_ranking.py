"""Weighted, tie-aware rank statistics shared by the classification metrics (numpy, float64).

Ties are handled exactly: rows with equal scores form one block and every statistic treats a
block as a whole (AUROC counts a tied positive–negative pair as 1/2; curves have one point per
distinct score). Weights are frequency weights: an integer weight k equals k copies of a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore._stats import weighted_midranks, weighted_pearson

NDArray = np.ndarray[Any, Any]

__all__ = ["Blocks", "auroc", "average_precision", "blocks", "spearman"]


@dataclass(frozen=True)
class Blocks:
    """Per distinct score (ascending): its value, total weight and total positive weight."""

    value: NDArray
    weight: NDArray
    positive: NDArray


def blocks(score: NDArray, positive: NDArray, weights: NDArray | None) -> Blocks:
    """Group rows by distinct ``score`` (ascending) and sum weights and positive weights."""
    w = np.ones(score.shape[0]) if weights is None else weights
    order = np.argsort(score, kind="stable")
    s = score[order]
    new = np.empty(s.shape[0], dtype=bool)
    new[:1] = True
    new[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(new)
    ws = w[order]
    ps = ws * positive[order].astype(np.float64)
    return Blocks(s[starts], np.add.reduceat(ws, starts), np.add.reduceat(ps, starts))


def auroc(score: NDArray, positive: NDArray, weights: NDArray | None) -> float | None:
    """P(score_pos > score_neg) + ½ P(score_pos = score_neg) under the weights (Mann–Whitney);
    ``None`` when either class has no weight."""
    b = blocks(score, positive, weights)
    neg = b.weight - b.positive
    wp, wn = float(np.sum(b.positive)), float(np.sum(neg))
    if wp <= 0.0 or wn <= 0.0:
        return None
    below = np.cumsum(neg) - neg
    return float(np.sum(b.positive * (below + 0.5 * neg)) / (wp * wn))


def average_precision(score: NDArray, positive: NDArray, weights: NDArray | None) -> float | None:
    """AP = Σ_k (R_k − R_{k−1}) P_k over the distinct thresholds t_k (descending), predicting
    positive when score ≥ t_k (scikit-learn's ``average_precision_score``); ``None`` when the
    positives have no weight."""
    b = blocks(score, positive, weights)
    tp = np.cumsum(b.positive[::-1])
    pred = np.cumsum(b.weight[::-1])
    wp = float(tp[-1]) if tp.size else 0.0
    if wp <= 0.0:
        return None
    gain = b.positive[::-1] / wp
    keep = gain > 0
    return float(np.sum(gain[keep] * tp[keep] / pred[keep]))


def spearman(a: NDArray, b: NDArray, weights: NDArray | None) -> float | None:
    """Spearman correlation: Pearson correlation of (weighted) mid-ranks, ties averaged as in
    ``scipy.stats.spearmanr``; ``None`` when either variable is constant."""
    ra = weighted_midranks(np, a, weights, np.argsort(a, kind="stable"))
    rb = weighted_midranks(np, b, weights, np.argsort(b, kind="stable"))
    return weighted_pearson(np, ra, rb, weights)
