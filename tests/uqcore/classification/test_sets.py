"""Prediction-set metrics against MAPIE's own functions (mapie.metrics.classification) and
formulas written out here, with the edge cases: empty sets, classes absent, full coverage."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mapie.metrics import classification as mapie_cls

from uqcore import metric
from uqcore import predictions as P
from uqcore.stability import bootstrap
from uqcore.stability.weights import Resampler, counts_to_indices

C = 5


def _data(n: int, seed: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """Threshold sets of Dirichlet probabilities: some empty, some full, sizes 0..C."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(C, 0.6), size=n)
    labels = np.array([rng.choice(C, p=p) for p in probs])
    sets = probs >= rng.uniform(0.0, 0.5, size=(n, 1))
    sets[::11] = False
    sets[::13] = True
    return P.PredictionSet(sets, probs), labels, sets


def test_coverage_and_mean_size_equal_mapie() -> None:
    pred, y, sets = _data(400, 0)
    assert metric("coverage", pred, y) == pytest.approx(
        float(mapie_cls.classification_coverage_score(y, sets[:, :, None])[0]), abs=1e-15
    )
    assert metric("mean_set_size", pred, y) == pytest.approx(
        float(mapie_cls.classification_mean_width_score(sets[:, :, None])[0]), rel=1e-15
    )


@pytest.mark.parametrize("bins", [None, 2, 3])
def test_size_stratified_coverage_equals_mapie(bins: int | None) -> None:
    pred, y, sets = _data(500, 1)
    strata = "size" if bins is None else "mapie"
    got = metric("size_stratified_coverage", pred, y, strata=strata, bins=bins)
    ref = mapie_cls.classification_ssc(y, sets[:, :, None], num_bins=bins)[0]
    np.testing.assert_allclose(got["coverage"], ref[~np.isnan(ref)], rtol=1e-15)
    score = mapie_cls.classification_ssc_score(y, sets[:, :, None], num_bins=bins)[0]
    assert got["value"] == pytest.approx(float(score), abs=1e-15)


def test_angelopoulos_strata() -> None:
    sets = np.zeros((6, 12), dtype=bool)
    for i, size in enumerate([0, 1, 2, 3, 5, 12]):
        sets[i, :size] = True
    y = np.array([0, 0, 5, 1, 0, 11])
    got = metric("size_stratified_coverage", P.PredictionSet(sets), y, strata="angelopoulos")
    assert got["sizes"] == [[0, 1], [2, 3], [4, 6], [11, 100]]
    assert got["coverage"] == [0.5, 0.5, 1.0, 1.0]
    assert got["value"] == 0.5 and got["violation"] == pytest.approx(0.4)


def test_rates_and_class_coverage_are_the_written_out_formulas() -> None:
    pred, y, sets = _data(300, 2)
    w = np.random.default_rng(3).uniform(0, 2, size=300)
    sizes = sets.sum(axis=1)
    covered = sets[np.arange(300), y]
    mean = lambda v: float(np.sum(w * v) / np.sum(w))  # noqa: E731
    assert metric("singleton_rate", pred, y, sample_weight=w) == pytest.approx(mean(sizes == 1))
    assert metric("empty_rate", pred, y, sample_weight=w) == pytest.approx(mean(sizes == 0))
    per_class = [float(np.sum(w[y == k] * covered[y == k]) / np.sum(w[y == k])) for k in range(C)]
    gap = np.mean([abs(c - 0.8) for c in per_class])
    got = metric("class_conditional_coverage_gap", pred, y, sample_weight=w, level=0.8)
    assert got == pytest.approx(gap, rel=1e-12)
    worst = metric("worst_class_coverage", pred, y, sample_weight=w)
    assert worst["value"] == pytest.approx(min(per_class), rel=1e-12)
    assert worst["class"] == int(np.argmin(per_class))


def test_absent_classes_are_left_out() -> None:
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=bool)
    y = np.array([0, 0, 2, 2])  # class 1 never occurs
    pred = P.PredictionSet(sets)
    assert metric("class_conditional_coverage_gap", pred, y, level=0.9) == pytest.approx(
        (abs(1.0 - 0.9) + abs(0.5 - 0.9)) / 2
    )
    assert metric("worst_class_coverage", pred, y)["class"] == 2
    # a class of zero total weight is absent too
    w = np.array([1.0, 1.0, 0.0, 0.0])
    assert metric("worst_class_coverage", pred, y, sample_weight=w)["value"] == 1.0


def test_empty_sets_never_cover_and_full_sets_always_do() -> None:
    y = np.array([0, 1, 2])
    empty = P.PredictionSet(np.zeros((3, 3), dtype=bool))
    assert metric("coverage", empty, y) == 0.0 and metric("empty_rate", empty, y) == 1.0
    assert metric("mean_set_size", empty, y) == 0.0
    full = P.PredictionSet(np.ones((3, 3), dtype=bool))
    assert metric("coverage", full, y) == 1.0 and metric("singleton_rate", full, y) == 0.0
    assert metric("class_conditional_coverage_gap", full, y) == pytest.approx(0.1)
    got = metric("size_stratified_coverage", full, y)
    assert got["sizes"] == [[3, 3]] and got["value"] == 1.0


def test_set_metrics_need_sets() -> None:
    probs = P.Probs(np.full((2, 3), 1 / 3))
    with pytest.raises(Exception, match="needs sets"):
        metric("mean_set_size", probs, np.array([0, 1]))


def test_bootstrap_resamples_equal_the_metrics_on_resampled_rows() -> None:
    pred, y, _ = _data(90, 4)
    names = ["coverage", "mean_set_size", "worst_class_coverage", "size_stratified_coverage"]
    r = bootstrap(pred, y, names, n_resamples=8, seed=2, keep_values=True)
    resampler = Resampler(90)
    for i in range(8):
        idx = counts_to_indices(resampler.counts(2, i))
        for name in names:
            ref = metric(name, pred.take(idx), y[idx])
            ref = ref["value"] if isinstance(ref, dict) else ref
            assert r[name]["values"][i] == pytest.approx(ref, rel=1e-10, abs=1e-12), (name, i)


def test_set_coverage_per_group_is_the_coverage_of_each_group() -> None:
    """``stratified`` takes classification predictions by groups: each group's value is the
    metric on its rows (coverage of sets, conditional on a group)."""
    from uqcore._validation import UQValidationError
    from uqcore.regression.stratified import stratified

    rng = np.random.default_rng(8)
    n = 90
    sets = rng.random((n, 4)) < 0.5
    labels = rng.integers(0, 4, size=n)
    groups = rng.integers(0, 3, size=n)
    w = rng.integers(1, 4, size=n).astype(float)
    out = stratified("coverage", P.PredictionSet(sets), labels, groups=groups, sample_weight=w)
    assert out["groups"] == [0, 1, 2]
    hit = sets[np.arange(n), labels]
    for g in range(3):
        rows = groups == g
        want = float(np.sum(w[rows] * hit[rows]) / np.sum(w[rows]))
        assert out["values"][g] == pytest.approx(want, rel=1e-12)
    with pytest.raises(UQValidationError, match="stratified by groups"):
        stratified("coverage", P.PredictionSet(sets), labels, bins=[0.0, 1.0])
