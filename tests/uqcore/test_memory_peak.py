"""Peak memory of a full regression report on tie-heavy float32 inputs, and its values.

float32 inputs (depth maps) hold many tied values, which send Spearman's ρ and the
sparsification areas down their tie paths; these must stay within a bounded number of
N-long float64 arrays (a worker computes 10^8 points), with the values unchanged.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.stats

from uqcore import evaluate
from uqcore import predictions as P

N = 200_000
#: Traced peaks in units of 8·N bytes (one N-long float64 array). Both include the float64
#: copies of the three float32 inputs (3) and the arrays the metrics share (|e|, two
#: argsorts, sorted copies). The ranking metrics alone (Spearman's ρ, AUSE, AURG, n-MeRCI)
#: hold |e| in three orders and two argsorts; ties add their run starts and one int32 rank
#: vector. The full report also holds the PIT and its sorted copy, and at this N the row
#: blocks of the scoring rules are a third of the rows. Since the decompositions and skill
#: scores it also holds the forecast's argsort (CORP, shared by its three components and by
#: resamples) and the sorted targets (the climatology of the skill scores).
RANKING_BOUND = 12.0
REPORT_BOUND = 19.0
RANKING = ["spearman", "ause", "aurg", "nmerci", "pearson"]


def _tied_gaussian(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 inputs on coarse grids: many ties in the std and in |e|."""
    rng = np.random.default_rng(20260516)
    mean = (rng.normal(size=n) * 8.0).round().astype(np.float32) / 8
    std = ((rng.random(n) + 0.5) * 256).round().astype(np.float32) / 256
    y = ((mean + std * rng.normal(size=n)) * 64).round().astype(np.float32) / 64
    return mean, std, y


def _ause_reference(u: np.ndarray, e: np.ndarray) -> float:
    """AUSE (exact grid, MAE, ties in u averaged over their orders) from the formula: after
    removing the N − k most uncertain rows, k rows remain; a tie block cut by the removal
    keeps its share of the block's mean error."""
    n = u.size
    order = np.argsort(u, kind="stable")
    us, es = u[order], e[order]
    cum = np.concatenate([[0.0], np.cumsum(es)])
    _, first, counts = np.unique(us, return_index=True, return_counts=True)
    block_of = np.repeat(np.arange(first.size), counts)
    k = np.arange(1, n + 1)
    b = block_of[k - 1]
    start = first[b]
    mean_b = (cum[start + counts[b]] - cum[start]) / counts[b]
    model = (cum[start] + (k - start) * mean_b) / k
    oracle = np.cumsum(np.sort(e)) / k
    full = e.mean()
    return float(max(np.sum(model - oracle) / n, 0.0) / full)


@pytest.fixture(scope="module")
def tied() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _tied_gaussian(N)


def test_the_data_is_tie_heavy(tied: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    mean, std, y = tied
    e = np.abs(y.astype(np.float64) - mean.astype(np.float64))
    assert np.unique(std).size < N // 50
    assert np.unique(e).size < N // 10


def _peak(mean: np.ndarray, std: np.ndarray, y: np.ndarray, metrics: str | list[str]) -> float:
    """The traced peak of one evaluation, in units of 8·N bytes."""
    evaluate(P.Gaussian(mean[:1000], std[:1000]), y[:1000], metrics)  # imports and caches
    tracemalloc.start()
    try:
        evaluate(P.Gaussian(mean, std), y, metrics)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / (8 * mean.size)


def test_ranking_metrics_peak_is_bounded(
    tied: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    assert _peak(*tied, RANKING) <= RANKING_BOUND


def test_full_report_peak_is_bounded(tied: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    assert _peak(*tied, "all") <= REPORT_BOUND


def test_tied_values_match_independent_references(
    tied: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    mean, std, y = tied
    out = evaluate(P.Gaussian(mean, std), y, ["spearman", "ause", "aurg"])
    u = std.astype(np.float64)
    e = np.abs(y.astype(np.float64) - mean.astype(np.float64))
    rho = scipy.stats.spearmanr(u, e).statistic
    assert out["spearman"] == pytest.approx(rho, rel=1e-13, abs=0)
    ause = _ause_reference(u, e)
    assert out["ause"] == pytest.approx(ause, rel=1e-12, abs=0)
    # AUSE + AURG is the area between the random curve and the oracle
    oracle = np.sum(np.cumsum(np.sort(e)) / np.arange(1, N + 1)) / N
    assert out["ause"] + out["aurg"] == pytest.approx(1.0 - oracle / e.mean(), rel=1e-12)
