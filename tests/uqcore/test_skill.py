"""Skill scores against climatology (regression and classification) and against a baseline
(``uqcore.skill``), checked against scikit-learn's D² scores and brute-force references."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
import sklearn.metrics as skm
from scipy.stats import norm

import uqcore
from tests.uqcore.test_registry_invariances import assert_same
from uqcore import predictions as P
from uqcore import registry
from uqcore._validation import UQValidationError
from uqcore.batch import make_batch
from uqcore.registry import UndefinedMetricWarning
from uqcore.stability import bootstrap
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.weights import Resampler, counts_to_indices


def _data(n: int, seed: int) -> tuple[P.Gaussian, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n) * 2.0
    sd = rng.uniform(0.5, 1.5, size=n)
    y = mu + sd * rng.normal(size=n)
    w = rng.uniform(0.0, 3.0, size=n)
    return P.Gaussian(mu, sd), y, w


def _value(name: str, pred: Any, y: Any, w: Any = None, **options: Any) -> Any:
    return uqcore.metric(name, pred, y, sample_weight=w, **options)


def _pinball(y: np.ndarray, q: Any, tau: float, w: np.ndarray) -> float:
    d = y - q
    return float(np.sum(w * np.maximum(tau * d, (tau - 1.0) * d)) / np.sum(w))


def _weighted_quantile(y: np.ndarray, w: np.ndarray, tau: float) -> float:
    """Inverse CDF: the smallest y_(k) with F(y_(k)) >= tau (written out here)."""
    order = np.argsort(y)
    cdf = np.cumsum(w[order]) / np.sum(w)
    return float(y[order][np.argmax(cdf >= tau - 1e-12)])


# -- regression -------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
def test_crps_skill_reference_is_half_the_mean_pair_distance(weighted: bool) -> None:
    pred, y, w = _data(200, 1)
    w = w if weighted else np.ones_like(y)
    p = w / np.sum(w)
    ref = 0.5 * float(np.sum(p[:, None] * p[None, :] * np.abs(y[:, None] - y[None, :])))
    got = _value("crps_skill", pred, y, w if weighted else None)
    assert got == pytest.approx(1.0 - _value("crps", pred, y, w) / ref, rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_climatology_in_chunks_equals_the_reference(
    weighted: bool, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The references are summed chunk by chunk of the sorted targets (the running weights
    continued across chunks): with chunks far smaller than N, the brute-force CRPS reference
    and the best constants' pinball losses, as above."""
    from uqcore import _stats

    pred, y, w = _data(301, 9)
    nll_whole = _value("nll_skill", pred, y, w if weighted else None)  # one chunk
    monkeypatch.setattr(_stats, "CHUNK_ROWS", chunk)
    assert _value("nll_skill", pred, y, w if weighted else None) == pytest.approx(
        nll_whole, rel=1e-12
    )
    w = w if weighted else np.ones_like(y)
    p = w / np.sum(w)
    crps_ref = 0.5 * float(np.sum(p[:, None] * p[None, :] * np.abs(y[:, None] - y[None, :])))
    got = _value("crps_skill", pred, y, w if weighted else None)
    assert got == pytest.approx(1.0 - _value("crps", pred, y, w) / crps_ref, rel=1e-12)
    levels = [0.05, 0.3, 0.5, 0.9]
    ref = np.mean([_pinball(y, _weighted_quantile(y, w, t), t, w) for t in levels])
    got = _value("check_score_skill", pred, y, w if weighted else None, levels=levels)
    model = _value("check_score", pred, y, w, levels=levels)
    assert got == pytest.approx(1.0 - model / ref, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.77])
def test_check_score_skill_equals_sklearn_d2_pinball_with_weights(alpha: float) -> None:
    pred, y, w = _data(301, 2)
    q = np.asarray(pred.ppf(np.array([alpha])))[:, 0]
    got = _value("check_score_skill", pred, y, w, levels=[alpha])
    want = skm.d2_pinball_score(y, q, alpha=alpha, sample_weight=w)
    assert got == pytest.approx(want, rel=1e-10)


def test_check_score_skill_at_the_median_equals_d2_absolute_error() -> None:
    for n in (300, 301):  # even and odd: numpy's median is a minimiser either way
        pred, y, _ = _data(n, 3)
        q = np.asarray(pred.ppf(np.array([0.5])))[:, 0]
        got = _value("check_score_skill", pred, y, levels=[0.5])
        assert got == pytest.approx(skm.d2_absolute_error_score(y, q), rel=1e-10)


def test_check_score_skill_over_a_grid_takes_the_best_constant_per_level() -> None:
    pred, y, w = _data(150, 4)
    levels = [0.05, 0.3, 0.5, 0.9]
    ref = np.mean([_pinball(y, _weighted_quantile(y, w, t), t, w) for t in levels])
    # no constant does better than the reference quantile (it is the minimiser)
    for t in levels:
        best = min(_pinball(y, c, t, w) for c in y)
        assert _pinball(y, _weighted_quantile(y, w, t), t, w) == pytest.approx(best, rel=1e-12)
    model = _value("check_score", pred, y, w, levels=levels)
    got = _value("check_score_skill", pred, y, w, levels=levels)
    assert got == pytest.approx(1.0 - model / ref, rel=1e-12)


@pytest.mark.parametrize("own_level", [0.8, None])
def test_interval_score_skill_of_an_interval(own_level: float | None) -> None:
    rng = np.random.default_rng(5)
    y = rng.normal(size=120)
    lo, hi = y - rng.uniform(0, 2, 120), y + rng.uniform(-0.5, 2, 120)
    hi = np.maximum(hi, lo)
    w = rng.integers(0, 4, size=120).astype(float)
    c = own_level if own_level is not None else 0.6
    a = 1.0 - c

    def score(lo_: Any, hi_: Any) -> float:
        s = (hi_ - lo_) + (2 / a) * (np.maximum(lo_ - y, 0) + np.maximum(y - hi_, 0))
        return float(np.sum(w * s) / np.sum(w))

    ref = score(_weighted_quantile(y, w, a / 2), _weighted_quantile(y, w, 1 - a / 2))
    got = _value("interval_score_skill", P.Interval(lo, hi, level=own_level), y, w, level=0.6)
    assert got == pytest.approx(1.0 - score(lo, hi) / ref, rel=1e-12)


def test_interval_score_skill_of_a_distribution_averages_the_coverages() -> None:
    pred, y, w = _data(90, 6)
    levels = [0.5, 0.9]
    refs = []
    for c in levels:
        a = 1.0 - c
        lo, hi = _weighted_quantile(y, w, a / 2), _weighted_quantile(y, w, 1 - a / 2)
        s = (hi - lo) + (2 / a) * (np.maximum(lo - y, 0) + np.maximum(y - hi, 0))
        refs.append(float(np.sum(w * s) / np.sum(w)))
    model = _value("interval_score", pred, y, w, levels=levels)
    got = _value("interval_score_skill", pred, y, w, levels=levels)
    assert got == pytest.approx(1.0 - model / np.mean(refs), rel=1e-12)


def test_nll_skill_against_the_fitted_gaussian() -> None:
    pred, y, w = _data(80, 7)
    m = np.average(y, weights=w)
    s = math.sqrt(np.average((y - m) ** 2, weights=w))
    ref = -float(np.average(norm.logpdf(y, m, s), weights=w))
    model = _value("nll", pred, y, w)
    got = _value("nll_skill", pred, y, w)
    assert got == pytest.approx(1.0 - math.exp(model) / math.exp(ref), rel=1e-12)


@pytest.mark.parametrize("name", ["crps_skill", "check_score_skill", "nll_skill"])
def test_constant_targets_make_regression_skill_undefined(name: str) -> None:
    pred = P.Gaussian(np.zeros(5), np.ones(5))
    with pytest.warns(UndefinedMetricWarning, match="targets are constant"):
        assert _value(name, pred, np.full(5, 2.0)) is None


def test_interval_skill_constant_targets_undefined() -> None:
    with pytest.warns(UndefinedMetricWarning, match="targets are constant"):
        v = _value("interval_score_skill", P.Interval(np.zeros(3), np.ones(3)), np.ones(3))
    assert v is None


# -- classification -----------------------------------------------------------------------------
def _probs(n: int, c: int, seed: int) -> tuple[P.Probs, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(c), size=n)
    y = np.array([rng.choice(c, p=row) for row in p])
    return P.Probs(p), y, rng.uniform(0.0, 2.0, size=n)


def test_brier_skill_binary_equals_sklearn_d2_brier() -> None:
    pred, y, w = _probs(200, 2, 8)
    want = skm.d2_brier_score(y, pred.probs()[:, 1], sample_weight=w)
    got = _value("brier_skill", pred, y, w, variant="binary")
    assert got == pytest.approx(want, rel=1e-10)


def test_brier_skill_multiclass_equals_sklearn_d2_brier() -> None:
    pred, y, w = _probs(200, 4, 9)
    want = skm.d2_brier_score(y, pred.probs(), sample_weight=w, labels=[0, 1, 2, 3])
    assert _value("brier_skill", pred, y, w) == pytest.approx(want, rel=1e-10)


def test_brier_skill_top_class_reference_is_the_accuracy_rate() -> None:
    pred, y, w = _probs(150, 3, 10)
    p = pred.probs()
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    a = np.average(correct, weights=w)
    model = np.average((conf - correct) ** 2, weights=w)
    got = _value("brier_skill", pred, y, w, variant="top_class")
    assert got == pytest.approx(1.0 - model / (a * (1 - a)), rel=1e-12)


def test_log_loss_skill_equals_sklearn_d2_log_loss() -> None:
    pred, y, w = _probs(300, 5, 11)
    want = skm.d2_log_loss_score(y, pred.probs(), sample_weight=w, labels=list(range(5)))
    assert _value("log_loss_skill", pred, y, w) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("name", ["brier_skill", "log_loss_skill"])
def test_one_class_makes_classification_skill_undefined(name: str) -> None:
    pred, _, _ = _probs(10, 3, 12)
    with pytest.warns(UndefinedMetricWarning, match="one class"):
        assert _value(name, pred, np.ones(10, dtype=int)) is None


# -- against a baseline ---------------------------------------------------------------------------
def test_skill_against_a_baseline_is_one_minus_the_ratio() -> None:
    pred, y, w = _data(100, 13)
    base = P.Gaussian(np.zeros(100), np.full(100, 3.0))
    for name, opts in (("crps", {}), ("check_score", {"levels": [0.2, 0.7]}), ("mae", {})):
        want = 1.0 - _value(name, pred, y, w, **opts) / _value(name, base, y, w, **opts)
        got = uqcore.skill(name, pred, base, y, sample_weight=w, **opts)
        assert got == pytest.approx(want, rel=1e-12)
        assert uqcore.skill_from_values(name, 0.5, 2.0) == 0.75


def test_skill_of_classification_predictions() -> None:
    pred, y, w = _probs(100, 3, 14)
    base = P.Probs(np.full((100, 3), 1 / 3))
    want = 1.0 - _value("brier", pred, y, w) / _value("brier", base, y, w)
    assert uqcore.skill("brier", pred, base, y, sample_weight=w) == pytest.approx(want)
    # "nll" of classification is a score with best 0 (the regression one is not)
    assert uqcore.skill_from_values("nll", 0.5, 1.0, task="classification") == 0.5


@pytest.mark.parametrize(
    ("name", "task", "why"),
    [
        ("r2", None, "direction 'higher'"),
        ("coverage", None, "direction 'target'"),
        ("nll", "regression", "no best value"),
        ("mean_width", None, "no best value"),
    ],
)
def test_skill_refuses_metrics_that_are_not_scores(name: str, task: Any, why: str) -> None:
    with pytest.raises(UQValidationError, match=why):
        uqcore.skill_from_values(name, 0.5, 1.0, task=task)
    pred, y, _ = _data(10, 15)
    if task is None:
        with pytest.raises(UQValidationError, match=why):
            uqcore.skill(name, pred, pred, y)


def test_skill_undefined_values_and_perfect_reference() -> None:
    assert uqcore.skill_from_values("crps", None, 1.0) is None
    assert uqcore.skill_from_values("crps", {"value": 0.25}, {"value": 1.0}) == 0.75
    with pytest.warns(UndefinedMetricWarning, match="scores 0"):
        assert uqcore.skill_from_values("crps", 0.5, 0.0) is None
    pred = _data(10, 16)[0]
    with pytest.raises(UQValidationError, match="classification"):
        uqcore.skill("brier", P.Probs(np.full((10, 2), 0.5)), pred, np.zeros(10, dtype=int))


# -- resampling ------------------------------------------------------------------------------------
def test_bootstrap_resamples_equal_the_skill_on_resampled_rows() -> None:
    pred, y, w = _data(40, 17)
    cpred, labels, _ = _probs(40, 3, 18)
    counts = Resampler(40).block(3, [0, 1, 2])
    cases = [
        (pred, y, ["crps_skill", "check_score_skill", "interval_score_skill", "nll_skill"]),
        (cpred, labels, ["brier_skill", "log_loss_skill", "smooth_ece", "spiegelhalter_z"]),
    ]
    for p, t, names in cases:
        chosen, _ = select_metrics([p], names, None)
        task = getattr(p, "task", "regression")
        got = Engine(make_batch(p, t, None), chosen).values([Resample(row) for row in counts])
        for name in names:
            for i, row in enumerate(counts):
                idx = counts_to_indices(row)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UndefinedMetricWarning)
                    v = registry.call(
                        registry.get(name, task), make_batch(p.take(idx), t[idx], None)
                    )
                v = v["value"] if isinstance(v, dict) else v
                assert_same(float(got[name][i]), v, f"{name}[{i}]")
    result = bootstrap(pred, y, ["crps_skill"], n_resamples=200, seed=3, sample_weight=w)
    got = result["crps_skill"]
    assert got["value"] == pytest.approx(_value("crps_skill", pred, y, w), rel=1e-12)
    assert got["n_valid"] == 200 and got["low"] < got["value"] < got["high"] < 1.0


# -- a skill score's own score, reported by evaluate ----------------------------------------
SKILL_OF = {
    "crps_skill": "crps",
    "check_score_skill": "check_score",
    "interval_score_skill": "interval_score",
    "nll_skill": "nll",
}


@pytest.mark.parametrize("weighted", [False, True])
def test_evaluate_computes_a_score_once_for_it_and_its_skill(
    monkeypatch: pytest.MonkeyPatch, weighted: bool
) -> None:
    """Each score is computed once (by its skill score, which runs first) and reported with
    the value it has alone; the skill scores' values are theirs alone too."""
    import dataclasses

    pred, y, w = _data(300, 31)
    weights = w if weighted else None
    alone = {name: _value(name, pred, y, weights) for pair in SKILL_OF.items() for name in pair}
    calls: dict[str, int] = dict.fromkeys(SKILL_OF.values(), 0)
    for name in SKILL_OF.values():
        spec = registry.get(name, "regression")

        def counted(batch: Any, _impl: Any = spec.impl, _name: str = name, **options: Any) -> Any:
            calls[_name] += 1
            return _impl(batch, **options)

        monkeypatch.setitem(
            registry._REGISTRY, ("regression", name), dataclasses.replace(spec, impl=counted)
        )
    names = [n for pair in SKILL_OF.items() for n in pair]
    report = uqcore.evaluate(pred, y, metrics=names, sample_weight=weights)
    assert calls == dict.fromkeys(SKILL_OF.values(), 1)
    for name in names:
        assert report[name] == alone[name], name
    # different options are other scores: computed again
    report = uqcore.evaluate(
        pred,
        y,
        metrics=["check_score", "check_score_skill"],
        params={"check_score": {"scaled": False}},
    )
    assert report["check_score"] == _value("check_score", pred, y, scaled=False)
    assert report["check_score_skill"] == _value("check_score_skill", pred, y)


def test_an_undefined_score_keeps_its_warning_beside_its_skill() -> None:
    """A score undefined for the options (quantiles that do not span the levels) is reported
    with its own warning, as alone, and its skill score with the skill's."""
    rng = np.random.default_rng(32)
    q = np.sort(rng.normal(size=(40, 3)), axis=1)
    pred = P.Quantiles([0.25, 0.5, 0.75], q)
    y = rng.normal(size=40)
    params = {"levels": [0.1, 0.5]}
    both = uqcore.evaluate(
        pred,
        y,
        metrics=["check_score_skill", "check_score"],
        params={"check_score": params, "check_score_skill": params},
    )
    alone = uqcore.evaluate(pred, y, metrics=["check_score"], params={"check_score": params})
    assert both["check_score"] is None and both["check_score_skill"] is None
    own = [m for m in both.warnings if m.startswith("check_score:") or "'check_score'" in m]
    assert alone.warnings and set(alone.warnings) <= set(both.warnings), (alone.warnings, own)
    skill_notes = [m for m in both.warnings if "check_score_skill" in m]
    assert skill_notes and all(m not in alone.warnings for m in skill_notes)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_a_reweighted_batch_remembers_no_score_of_the_batch_it_copies(task: str) -> None:
    """The resamples of the stability engine are re-weighted copies: each computes its own
    scores (a copy that kept the full batch's would report them for every resample)."""
    if task == "regression":
        pred, y, w = _data(50, 33)
        name, skill = "crps", "crps_skill"
    else:
        rng = np.random.default_rng(33)
        probs = rng.dirichlet(np.ones(3), size=50)
        pred, y, w = P.Probs(probs), rng.integers(0, 3, size=50), rng.uniform(0, 2, 50)
        name, skill = "brier", "brier_skill"
    batch = make_batch(pred, y)
    full = registry.call(registry.get(skill, task), batch)
    assert batch.remembered_score(name, registry.get(name, task).resolve_params(None))
    copy = batch.with_weights(w)
    assert copy.remembered_score(name, registry.get(name, task).resolve_params(None)) is None
    assert registry.call(registry.get(skill, task), copy) == _value(skill, pred, y, w) != full


def test_options_are_keyed_by_their_values() -> None:
    from uqcore.batch import options_key

    a = {"levels": [0.1, 0.5], "scaled": True, "grid": np.arange(3.0)}
    assert options_key(a) == options_key(dict(reversed(list(a.items()))))
    assert options_key(a) == options_key({**a, "grid": np.arange(3.0), "levels": [0.1, 0.5]})
    for other in (
        {**a, "levels": [0.1, 0.50000001]},
        {**a, "levels": (0.1, 0.5)},
        {**a, "scaled": 1},  # a bool is not an int here
        {**a, "grid": np.arange(3)},  # nor an int array a float one
        {**a, "grid": np.arange(4.0)[:3].reshape(3, 1)},
        {**a, "extra": None},
    ):
        assert options_key(other) != options_key(a), other
    assert options_key({"x": {"b": 1, "a": [2.0]}}) == options_key({"x": {"a": [2.0], "b": 1}})
    assert options_key({"x": np.float64(0.5)}) != options_key({"x": 0.5})
    assert options_key({"x": {1, 2}}) is None  # a value not keyed by value: not remembered
    assert options_key({"x": object()}) is None
