"""All pairwise comparisons and rank distributions at once equal the one-pair / one-metric
calls with the same seed."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.stability import compare, compare_all, rank_distribution

REG_METRICS = ["mae", "crps", "nll", "ece", "coverage", "ause", "spearman", "sharpness"]


def _close(got: Any, want: Any) -> None:
    """Equal, floats to 1e-12 relative (mean-type metrics go through one matrix product whose
    rounding may depend on how many metrics share it)."""
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            if k != "warnings":
                _close(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _close(g, w)
    elif isinstance(want, float) and not isinstance(got, str):
        if math.isnan(want):
            assert got is None or math.isnan(got)
        else:
            assert got == pytest.approx(want, rel=1e-12, abs=1e-14)
    else:
        assert got == want


def _regression(n: int, seed: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=n)
    mu, sd = np.sin(x), 0.2 + 0.3 * np.abs(x)
    y = mu + sd * rng.normal(size=n)
    preds = {
        "true": P.Gaussian(mu, sd),
        "biased": P.Gaussian(mu + 0.3, sd),
        "overconfident": P.Gaussian(mu, 0.5 * sd),
        "noisy": P.Gaussian(mu + 0.2 * rng.normal(size=n), sd),
    }
    groups = rng.integers(0, 25, size=n)
    return preds, y, groups


@pytest.mark.parametrize(
    ("method", "unit"), [("percentile", "row"), ("bca", "row"), ("bca", "cluster")]
)
def test_equals_compare_and_rank_distribution(method: str, unit: str) -> None:
    preds, y, groups = _regression(240, 3)
    opts: dict[str, Any] = {"n_resamples": 120, "seed": 7, "method": method, "unit": unit}
    if unit == "cluster":
        opts["groups"] = groups
    got = compare_all(preds, y, REG_METRICS, jackknife_blocks=20, **opts)
    names = list(preds)
    assert got.names == tuple(names)
    assert list(got.pairs) == [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    for (a, b), result in got.pairs.items():
        want = compare(preds[a], preds[b], y, REG_METRICS, jackknife_blocks=20, **opts)
        _close(result.to_dict(), want.to_dict())
    rank_opts = {k: v for k, v in opts.items() if k != "method"}
    for m in REG_METRICS:
        want_r = rank_distribution(preds, y, metric=m, **rank_opts)
        _close(got.ranks[m].to_dict(), want_r.to_dict())


def test_classification_with_estimators_and_targets() -> None:
    rng = np.random.default_rng(11)
    n, c = 150, 4
    labels = rng.integers(0, c, size=n)
    ood = rng.random(n) < 0.3
    soft = rng.dirichlet(np.ones(c), size=n)
    preds = {
        f"m{i}": P.Ensemble(
            member_probs=rng.dirichlet(np.full(c, 0.5 + i), size=(3, n)),
            estimates={"score": np.round(rng.random(n), 1)},
        )
        for i in range(3)
    }
    metrics = ["accuracy", "ece", "auroc_ood", "aleatoric_rank_corr", "auroc_correctness"]
    opts: dict[str, Any] = {"n_resamples": 60, "seed": 2, "ood": ood, "soft_labels": soft}
    ests = ["entropy_bma", "score"]
    got = compare_all(preds, labels, metrics, estimators=ests, **opts)
    assert "auroc_ood[score]" in got.ranks
    for (a, b), result in got.pairs.items():
        want = compare(preds[a], preds[b], labels, metrics, estimators=ests, **opts)
        _close(result.to_dict(), want.to_dict())
    want_r = rank_distribution(preds, labels, metric="auroc_ood", **opts)
    _close(got.ranks["auroc_ood"].to_dict(), want_r.to_dict())


def test_simultaneous_intervals_and_validation() -> None:
    preds, y, _ = _regression(100, 5)
    got = compare_all(preds, y, ["mae"], n_resamples=50, simultaneous=True)
    want = rank_distribution(preds, y, metric="mae", n_resamples=50, simultaneous=True)
    _close(got.ranks["mae"].to_dict(), want.to_dict())
    with pytest.raises(UQValidationError, match="at least 2"):
        compare_all({"only": preds["true"]}, y, ["mae"])
    with pytest.raises(UQValidationError, match="method"):
        compare_all(preds, y, ["mae"], method="basic")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="same length"):
        compare_all({"a": preds["true"], "b": P.Gaussian(np.zeros(3), np.ones(3))}, y, ["mae"])


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_progress_increases_to_one_and_leaves_the_results_unchanged(method: str) -> None:
    preds, y, _ = _regression(200, 11)
    opts: dict[str, Any] = {"n_resamples": 90, "seed": 5, "method": method, "block_size": 10}
    seen: list[float] = []
    with_cb = compare_all(preds, y, ["crps", "ause"], progress=seen.append, **opts)
    without = compare_all(preds, y, ["crps", "ause"], **opts)
    for pair in without.pairs:
        assert with_cb.pairs[pair].to_dict() == without.pairs[pair].to_dict()
    for m in without.ranks:
        assert with_cb.ranks[m].to_dict() == without.ranks[m].to_dict()
    assert seen[-1] == 1.0 and all(a < b for a, b in itertools.pairwise(seen)), seen
    assert len(seen) >= 9  # one report per block of 10 resamples
    if method == "percentile":
        assert seen[:9] == pytest.approx([(i + 1) / 9 for i in range(9)])
