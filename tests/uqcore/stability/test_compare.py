"""Paired comparison and rank distributions."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore import registry
from uqcore._validation import UQValidationError
from uqcore.stability import bootstrap, compare, rank_distribution


def _data(n: int, seed: int) -> tuple[Any, Any, np.ndarray]:
    """The true distribution and a biased, overconfident one."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=n)
    mu, sd = np.sin(x), 0.2 + 0.3 * np.abs(x)
    y = mu + sd * rng.normal(size=n)
    return P.Gaussian(mu, sd), P.Gaussian(mu + 0.3, 0.6 * sd), y


def test_identical_predictions_give_zero_and_one_half() -> None:
    true, _, y = _data(80, 0)
    copy = P.Gaussian(np.asarray(true.mean()).copy(), np.asarray(true.std()).copy())
    r = compare(true, copy, y, "all", n_resamples=50, seed=1)
    assert len(r) > 10
    for name, e in r.items():
        assert e["diff"] == 0.0, name
        assert e["p_better"] == 0.5, name
        assert e["p_value"] == 1.0, name
        assert e["low"] == 0.0 and e["high"] == 0.0, name


def test_a_clearly_better_model_gets_an_interval_excluding_zero() -> None:
    true, biased, y = _data(400, 2)
    names = [n for n in ("mae", "rmse", "nll", "crps", "ece") if n in registry.names()]
    r = compare(true, biased, y, names, n_resamples=300, seed=3)
    for name in names:
        e = r[name]
        assert e["high"] < 0, name  # all are lower-is-better
        assert e["p_better"] > 0.99, name
        assert e["p_value"] < 0.01, name
        assert e["value_a"] - e["value_b"] == e["diff"]


def test_compare_is_antisymmetric_and_paired() -> None:
    true, biased, y = _data(100, 4)
    names = ["mae", "corr", "ence"]
    ab = compare(true, biased, y, names, n_resamples=100, seed=5)
    ba = compare(biased, true, y, names, n_resamples=100, seed=5)
    for name in names:
        assert ab[name]["diff"] == -ba[name]["diff"]
        assert math.isclose(ab[name]["p_better"] + ba[name]["p_better"], 1.0)
        assert math.isclose(ab[name]["low"], -ba[name]["high"], rel_tol=1e-12)
    # paired: the differences use the resamples bootstrap() draws with the same seed
    a = bootstrap(true, y, ["mae"], n_resamples=100, seed=5, keep_values=True)
    b = bootstrap(biased, y, ["mae"], n_resamples=100, seed=5, keep_values=True)
    d = np.asarray(a["mae"]["values"]) - np.asarray(b["mae"]["values"])
    lo, hi = np.quantile(d, [0.025, 0.975])
    assert math.isclose(ab["mae"]["low"], lo, rel_tol=1e-10)
    assert math.isclose(ab["mae"]["high"], hi, rel_tol=1e-10)
    diff = ab["mae"]["diff"]
    p = (1 + np.sum(np.abs(d - diff) >= abs(diff))) / 101
    assert math.isclose(ab["mae"]["p_value"], p)
    assert math.isclose(ab["mae"]["p_better"], np.mean(d < 0) + 0.5 * np.mean(d == 0))


def test_bca_interval_of_the_paired_difference() -> None:
    """N = 60 ≤ K = 100: the delete-a-block jackknife is the delete-one jackknife of A − B."""
    from scipy.special import ndtr, ndtri

    true, biased, y = _data(60, 12)
    r = compare(true, biased, y, ["mae", "mdae"], n_resamples=200, seed=5, method="bca")
    a = bootstrap(true, y, ["mae", "mdae"], n_resamples=200, seed=5, keep_values=True)
    b = bootstrap(biased, y, ["mae", "mdae"], n_resamples=200, seed=5, keep_values=True)
    ea = np.abs(y - np.asarray(true.mean()))
    eb = np.abs(y - np.asarray(biased.mean()))
    for name, stat in (("mae", np.mean), ("mdae", np.median)):
        d = np.asarray(a[name]["values"]) - np.asarray(b[name]["values"])
        diff = stat(ea) - stat(eb)
        jack = np.array([stat(np.delete(ea, i)) - stat(np.delete(eb, i)) for i in range(60)])
        u = jack.mean() - jack
        acc = np.sum(u**3) / (6 * np.sum(u**2) ** 1.5)
        z0 = ndtri(np.mean(d < diff) + 0.5 * np.mean(d == diff))
        z = ndtri(np.array([0.025, 0.975]))
        lo, hi = np.quantile(d, ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z))))
        e = r[name]
        assert e["method"] == "bca"
        assert math.isclose(e["acceleration"], acc, rel_tol=1e-9, abs_tol=1e-12), name
        assert math.isclose(e["low"], lo, rel_tol=1e-10), name
        assert math.isclose(e["high"], hi, rel_tol=1e-10), name
    assert r.meta["jackknife"]["blocks"] == 60
    # identical predictions: exactly 0 under BCa too
    copy = P.Gaussian(np.asarray(true.mean()).copy(), np.asarray(true.std()).copy())
    same = compare(true, copy, y, ["mae", "spearman"], n_resamples=50, method="bca")
    for e in same.values():
        assert (e["diff"], e["low"], e["high"], e["p_better"]) == (0.0, 0.0, 0.0, 0.5)
    # a clearly better model: the BCa interval excludes 0 as well
    true, biased, y = _data(400, 2)
    r = compare(true, biased, y, ["crps", "ause"], n_resamples=200, seed=3, method="bca")
    assert r["crps"]["high"] < 0 and r["ause"]["high"] < 0


def test_direction_higher_is_respected() -> None:
    true, _, y = _data(200, 6)
    noisy = P.Gaussian(
        np.asarray(true.mean()) + np.random.default_rng(7).normal(size=200), np.asarray(true.std())
    )
    r = compare(true, noisy, y, ["corr"], n_resamples=100, seed=0)
    assert r["corr"]["diff"] > 0 and r["corr"]["p_better"] > 0.95


def test_target_metrics_are_compared_by_distance_to_their_best_value() -> None:
    from uqcore.stability.compare import target_value

    if "coverage" not in registry.names():
        pytest.skip("coverage is not registered")
    spec = registry.get("coverage")
    assert target_value(spec, spec.defaults) == spec.best
    assert target_value(spec, {**spec.defaults, "level": 0.8}) == 0.8
    true, biased, y = _data(300, 11)  # biased is overconfident: it under-covers
    r = compare(true, biased, y, ["coverage"], n_resamples=100, seed=0)
    assert r["coverage"]["p_better"] > 0.95


def test_same_seed_same_output() -> None:
    true, biased, y = _data(60, 8)
    a = compare(true, biased, y, ["mae", "ece"], n_resamples=40, seed=9).to_dict()
    b = compare(true, biased, y, ["mae", "ece"], n_resamples=40, seed=9).to_dict()
    assert json.dumps(a, allow_nan=False) == json.dumps(b, allow_nan=False)
    assert "shifted bootstrap" in a["test"]
    # other blocks: the same resamples; only the matrix product's rounding may differ
    c = compare(true, biased, y, ["mae", "ece"], n_resamples=40, seed=9, block_size=3).to_dict()
    for name in ("mae", "ece"):
        for key in ("low", "high", "std", "p_better", "p_value"):
            assert math.isclose(a["results"][name][key], c["results"][name][key], rel_tol=1e-12)


def test_rank_distribution() -> None:
    true, biased, y = _data(300, 10)
    near = P.Gaussian(np.asarray(true.mean()) + 0.01, np.asarray(true.std()))
    preds = {"true": true, "biased": biased, "near": near, "twin": near}
    r = rank_distribution(preds, y, metric="mae", n_resamples=200, seed=1)
    probs = np.array([r[k]["rank_probabilities"] for k in preds])
    np.testing.assert_allclose(probs.sum(axis=0), 1.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert r["biased"]["rank_low"] == r["biased"]["rank_high"] == 4
    assert r["biased"]["p_best"] == 0.0
    assert r["near"]["p_best"] == r["twin"]["p_best"]  # ties share equally
    assert r["near"]["rank"] == r["twin"]["rank"]
    assert math.isclose(sum(r[k]["p_best"] for k in preds), 1.0)
    doc = r.to_dict()
    assert "not simultaneous" in doc["multiple_comparison_note"]
    assert doc["interval_level"] == 0.95
    json.dumps(doc, allow_nan=False)
    s = rank_distribution(preds, y, metric="mae", n_resamples=200, seed=1, simultaneous=True)
    assert s.meta["interval_level"] == pytest.approx(1 - 0.05 / 4)
    for k in preds:
        assert s[k]["rank_low"] <= r[k]["rank_low"] and s[k]["rank_high"] >= r[k]["rank_high"]


def test_validation() -> None:
    true, _, y = _data(20, 0)
    with pytest.raises(UQValidationError, match="same length"):
        compare(true, P.Gaussian(np.zeros(5), np.ones(5)), y, ["mae"])
    with pytest.raises(UQValidationError, match="method must be"):
        compare(true, true, y, ["mae"], method="basic")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="at least 2"):
        rank_distribution({"a": true}, y, metric="mae")
    with pytest.raises(UQValidationError, match="needs"):
        compare(true, P.PointUncertainty(np.zeros(20), np.ones(20)), y, ["ece"])
