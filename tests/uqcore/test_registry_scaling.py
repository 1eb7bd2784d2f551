"""Registry-wide properties at extreme scales, for every registered metric × prediction kind.

Weights: multiplying every sample weight by c = 1e±200 or 1e±300 (where products and squares
of weights leave float64's range) changes nothing, except where the registry exempts
``scale_weights`` by definition; even there no value is NaN or infinite. Non-integer weights
make a metric fail only where the registry declares that it needs integer weights
(``MetricSpec.integer_weights``).

Data (regression): multiplying the targets and the prediction (locations, scales, quantiles,
draws, point and uncertainty) by c = 1e-300, 1e-200, 1e160, 1e300 — powers of ten, so that the
rescaling by powers of two inside uqcore is not exact by accident — changes every metric by
its scaling law (``MetricSpec.scaling``): invariant, equivariant (×c), quadratic (×c²; ``None``
with a warning where that leaves float64's range) or log (+log c), to 1e-9 relative. No value
is NaN or infinite, and no numpy overflow warning reaches the report.

Classification: weights as above; a user-supplied estimate multiplied by c leaves every metric
that ranks by it unchanged; logits and Dirichlet concentrations multiplied by c give no NaN or
infinite value, and no NaN estimate.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import numpy as np
import pytest

from tests.factories import (
    CLASSIFICATION_KINDS,
    KINDS,
    SCALABLE_CLASSIFICATION_KINDS,
    make_classification,
    make_prediction,
    scale_classification,
    scale_prediction,
)
from tests.uqcore.test_registry_invariances import assert_same
from uqcore import metric, registry
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.batch import Batch, ClassificationBatch

N = 37
RTOL = 1e-9
WEIGHT_SCALES = (1e-300, 1e-200, 1e200, 1e300)
DATA_SCALES = (1e-300, 1e-200, 1e160, 1e300)
TARGETS = frozenset({"ood", "soft_labels"})
SMALLEST_NORMAL = 2.0**-1022


def _weights(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.1, 3.0, size=N)


def _cases(task: str, kinds: tuple[str, ...], keep: Any = lambda spec: True) -> list[Any]:
    out = []
    for spec in registry.specs(task):
        if not keep(spec):
            continue
        for kind in kinds:
            if task == "regression":
                pred, _ = make_prediction(kind, 5)
            else:
                pred = make_classification(kind, 5)[0]
            if spec.why_not(pred, TARGETS) is None:
                out.append(pytest.param(spec.name, kind, id=f"{spec.name}-{kind}"))
    return out


def _call(spec: registry.MetricSpec, batch: Any, **options: Any) -> Any:
    """The value, with numpy's floating-point warnings (overflow, invalid value) as failures:
    they reach ``Report.warnings``; a metric's own "undefined" warning is allowed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = registry.call(spec, batch, options)
    numeric = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numeric, numeric
    return value


def _regression(name: str, pred: Any, y: Any, w: Any = None, **options: Any) -> Any:
    return _call(registry.get(name, "regression"), Batch(pred, y, w), **options)


def _classification(name: str, pred: Any, y: Any, t: dict[str, Any], w: Any = None) -> Any:
    batch = ClassificationBatch(pred, y, w, **t)
    return _call(registry.get(name, "classification"), batch)


def assert_finite(value: Any, where: str = "value") -> None:
    """Every number in a metric value is finite (``None`` is an undefined value)."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert_finite(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            assert_finite(v, f"{where}[{i}]")
    elif isinstance(value, (float, int, np.floating)) and not isinstance(value, bool):
        assert math.isfinite(float(value)), f"{where} = {value!r}"


def _scalar(value: Any) -> float | None:
    inner = value.get("value") if isinstance(value, dict) else value
    return None if inner is None else float(inner)


# -- weights ------------------------------------------------------------------------------------
@pytest.mark.parametrize("c", WEIGHT_SCALES)
@pytest.mark.parametrize(("name", "kind"), _cases("regression", KINDS))
def test_weights_of_extreme_scale(name: str, kind: str, c: float) -> None:
    spec = registry.get(name, "regression")
    pred, y = make_prediction(kind, N, seed=40)
    w = _weights(41)
    if spec.integer_weights is not None:
        w = np.ceil(w)  # integer weights (scaled by 1e±200 they stay so only for c >= 1)
    why = spec.why_not(pred, TARGETS, w * c)
    if why is not None:
        # integer weights × 1e-200 are not integers: the metric does not apply, and says so
        assert c < 1 and "needs integer sample weights" in why, why
        return
    scaled = _regression(name, pred, y, w * c)
    assert_finite(scaled)
    if "scale_weights" not in spec.exempt:
        assert_same(scaled, _regression(name, pred, y, w), rtol=RTOL)


@pytest.mark.parametrize("c", WEIGHT_SCALES)
@pytest.mark.parametrize(("name", "kind"), _cases("classification", CLASSIFICATION_KINDS))
def test_classification_weights_of_extreme_scale(name: str, kind: str, c: float) -> None:
    spec = registry.get(name, "classification")
    pred, y, t = make_classification(kind, N, seed=42)
    w = _weights(43)
    scaled = _classification(name, pred, y, t, w * c)
    assert_finite(scaled)
    if "scale_weights" not in spec.exempt:
        assert_same(scaled, _classification(name, pred, y, t, w), rtol=RTOL)


@pytest.mark.parametrize(("name", "kind"), _cases("regression", KINDS))
def test_non_integer_weights_fail_only_where_declared(name: str, kind: str) -> None:
    """A metric either takes fractional weights or says so through its spec: then it is not
    applicable (with the reason naming the first fractional weight) and a call raises."""
    spec = registry.get(name, "regression")
    pred, y = make_prediction(kind, N, seed=44)
    w = np.ones(N)
    w[3] = 0.5
    reason = spec.why_not(pred, TARGETS, w)
    if reason is None:
        assert_finite(_regression(name, pred, y, w))
        return
    assert spec.integer_weights is not None
    assert "integer sample weights" in reason and "sample_weight[3] = 0.5" in reason
    with pytest.raises(UQValidationError, match="integer sample weights"):
        _regression(name, pred, y, w)


# -- data (regression) --------------------------------------------------------------------------
def _check_law(law: str, base: Any, got: Any, c: float) -> None:
    """``got`` (on data × c) against ``base`` (on the data) under the scaling ``law``."""
    if law == "invariant":
        assert_same(got, base, rtol=RTOL)
        return
    b, g = _scalar(base), _scalar(got)
    if b is None:
        assert g is None, f"undefined on the data, {g!r} on the scaled data"
        return
    if law == "log":
        assert g is not None
        assert math.isclose(g, b + math.log(c), rel_tol=RTOL, abs_tol=RTOL), (g, b, c)
        return
    power = {"equivariant": 1, "quadratic": 2}[law]
    log_ideal = math.log(abs(b)) + power * math.log(c) if b != 0.0 else -math.inf
    if log_ideal > math.log(sys.float_info.max):
        assert g is None, f"{g!r}: beyond float64's range, the value must be undefined"
    elif log_ideal >= math.log(SMALLEST_NORMAL):
        assert g is not None
        # compared in the data's units (g/c^power), where the value is exact up to rounding
        for _ in range(power):
            g /= c
        assert math.isclose(g, b, rel_tol=RTOL), (g, b, c)
    else:  # 0, or below float64's normal range: 0 or a subnormal
        assert g is not None and abs(g) <= 2.0 * SMALLEST_NORMAL, (g, b, c)


@pytest.mark.parametrize("c", DATA_SCALES)
@pytest.mark.parametrize(("name", "kind"), _cases("regression", KINDS))
def test_data_of_extreme_scale_follow_the_scaling_law(name: str, kind: str, c: float) -> None:
    spec = registry.get(name, "regression")
    assert spec.scaling is not None
    pred, y = make_prediction(kind, N, seed=45)
    w = np.random.default_rng(46).integers(1, 4, size=N).astype(float)
    base = _regression(name, pred, y, w)
    got = _regression(name, scale_prediction(pred, c), y * c, w)
    assert_finite(got)
    _check_law(spec.scaling, base, got, c)


@pytest.mark.parametrize("c", DATA_SCALES)
@pytest.mark.parametrize(
    ("name", "options", "law"),
    [
        ("ause", {"normalize": False}, "equivariant"),
        ("ause", {"error": "rmse"}, "invariant"),
        ("ause", {"error": "rmse", "grid": 100, "normalize": False}, "equivariant"),
        ("aurg", {"error": "rmse", "normalize": False}, "equivariant"),
        ("crps", {"estimator": "fair"}, "equivariant"),
        ("nll", {"bandwidth": "scott"}, "log"),
        ("nmerci", {"variant": "inlier"}, "invariant"),
        ("check_score", {"scaled": False}, "equivariant"),
    ],
)
@pytest.mark.parametrize("kind", ["samples", "mixture", "gaussian"])
def test_options_that_square_the_data(
    name: str, options: dict[str, Any], law: str, kind: str, c: float
) -> None:
    """Options with their own squares or scaling law (the registry's law is the defaults')."""
    pred, y = make_prediction(kind, N, seed=47)
    if registry.get(name, "regression").why_not(pred) is not None:
        pytest.skip("not applicable to this kind")
    base = _regression(name, pred, y, **options)
    got = _regression(name, scale_prediction(pred, c), y * c, **options)
    assert_finite(got)
    _check_law(law, base, got, c)


def test_every_regression_metric_states_its_scaling_law() -> None:
    for spec in registry.specs():
        if spec.task == "regression":
            assert spec.scaling in registry.SCALING_LAWS, spec.name
        else:
            assert spec.scaling is None, spec.name


# -- classification estimates and logits ---------------------------------------------------------
@pytest.mark.parametrize("c", DATA_SCALES)
@pytest.mark.parametrize(
    ("name", "kind"),
    _cases("classification", CLASSIFICATION_KINDS, lambda spec: "estimator" in spec.defaults),
)
def test_scaled_estimates_change_nothing(name: str, kind: str, c: float) -> None:
    """Metrics that rank by an estimate depend on its order only."""
    spec = registry.get(name, "classification")
    pred, y, t = make_classification(kind, N, seed=48)
    scaled = type(pred)(**pred.arrays(), estimates={"score": pred.estimates["score"] * c})
    w = _weights(49)
    got = _call(spec, ClassificationBatch(scaled, y, w, **t), estimator="score")
    assert_finite(got)
    assert_same(got, _call(spec, ClassificationBatch(pred, y, w, **t), estimator="score"))


@pytest.mark.parametrize("c", DATA_SCALES)
@pytest.mark.parametrize(("name", "kind"), _cases("classification", SCALABLE_CLASSIFICATION_KINDS))
def test_logits_of_extreme_scale(name: str, kind: str, c: float) -> None:
    """Logits × c tend to one-hot or uniform probabilities: values stay finite (or undefined);
    the Dirichlet mean α/α_0 does not change with c, nor any metric of it."""
    spec = registry.get(name, "classification")
    pred, y, t = make_classification(kind, N, seed=50)
    w = _weights(51)
    batch = ClassificationBatch(scale_classification(pred, c), y, w, **t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = registry.call(spec, batch)
    assert_finite(got)
    if kind == "dirichlet" and "second_order" not in spec.needs:
        assert_same(got, _classification(name, pred, y, t, w), rtol=RTOL)


def _estimator_cases() -> list[Any]:
    out = []
    for kind in SCALABLE_CLASSIFICATION_KINDS:
        for est in make_classification(kind, 5)[0].estimator_names():
            out.append(pytest.param(kind, est, id=f"{kind}-{est}"))
    return out


@pytest.mark.parametrize("c", DATA_SCALES)
@pytest.mark.parametrize(("kind", "estimator"), _estimator_cases())
def test_estimates_of_extreme_logits_are_numbers(kind: str, estimator: str, c: float) -> None:
    pred = scale_classification(make_classification(kind, N, seed=52)[0], c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = np.asarray(pred.estimate(estimator))
    assert not np.any(np.isnan(u))
    if estimator == "mean_variance_logits" and c > 1.0:
        # a variance of logits spread beyond 1e154 exceeds float64: +inf, never NaN
        assert np.all(np.isfinite(u) | (u == np.inf))
    else:
        assert np.all(np.isfinite(u)), estimator


# -- the reported cases ------------------------------------------------------------------------
def test_weighted_spearman_at_any_weight_scale() -> None:
    y = np.arange(5.0)
    pred = P.PointUncertainty(np.zeros(5), np.array([1.0, 3.0, 2.0, 5.0, 4.0]))
    # ranks of |e| = y and of u: Pearson correlation of (0..4) and (0, 2, 1, 4, 3)
    expected = float(np.corrcoef(np.arange(5.0), [0.0, 2.0, 1.0, 4.0, 3.0])[0, 1])
    assert expected == pytest.approx(0.8, abs=1e-12)
    for c in (1.0, 1e100, 1e110, 1e-110, 1e300, 1e-300):
        assert metric("spearman", pred, y, sample_weight=np.full(5, c)) == pytest.approx(
            expected, abs=1e-12
        )


@pytest.mark.parametrize("name", ["aleatoric_rank_corr", "disentanglement_rank_corr"])
def test_classification_rank_correlations_at_any_weight_scale(name: str) -> None:
    pred, y, t = make_classification("ensemble", 30, seed=53)
    w = _weights(54)[:30]
    expected = metric(name, pred, y, sample_weight=w, **t)
    assert expected is not None
    for c in (1e110, 1e-110, 1e300, 1e-300):
        got = metric(name, pred, y, sample_weight=w * c, **t)
        assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("c", [1e-200, 1e200, 1e-300, 1e300])
def test_pit_with_weights_of_extreme_scale(c: float) -> None:
    pred, y = make_prediction("gaussian", 50, seed=55)
    w = np.random.default_rng(56).uniform(0.1, 3.0, size=50)
    expected = metric("pit", pred, y, sample_weight=w)
    got = metric("pit", pred, y, sample_weight=w * c)
    assert got["n_eff"] == pytest.approx(np.sum(w) ** 2 / np.sum(w * w), rel=1e-12)
    assert_same(got, expected, rtol=1e-12)


def test_values_at_1e160_and_1e_minus_200() -> None:
    """Squares of values beyond ~1e154 overflow and those of values below ~1e-154 underflow:
    the metrics that square are computed on rescaled values."""
    pred, y = make_prediction("gaussian", 40, seed=57)
    mu, sd = pred.arrays()["mean"], pred.arrays()["std"]
    corr_ref = float(np.corrcoef(mu, y)[0, 1])
    pearson_ref = float(np.corrcoef(sd, np.abs(y - mu))[0, 1])
    rmse_ref = float(np.sqrt(np.mean((y - mu) ** 2)))
    sharp_ref = float(np.sqrt(np.mean(sd**2)))
    r2_ref = 1.0 - np.sum((y - mu) ** 2) / np.sum((y - y.mean()) ** 2)
    ence_ref = metric("ence", pred, y)
    for c in (1e160, 1e-200):
        scaled, yc = scale_prediction(pred, c), y * c
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "constant" warning, no overflow
            assert metric("corr", scaled, yc) == pytest.approx(corr_ref, rel=1e-12)
            assert metric("pearson", scaled, yc) == pytest.approx(pearson_ref, rel=1e-12)
            assert metric("rmse", scaled, yc) / c == pytest.approx(rmse_ref, rel=1e-12)
            assert metric("sharpness", scaled, yc) / c == pytest.approx(sharp_ref, rel=1e-12)
            assert metric("r2", scaled, yc) == pytest.approx(r2_ref, rel=1e-12)
            assert metric("ence", scaled, yc) == pytest.approx(ence_ref, rel=1e-12)
    # UCE is in units of y²: at 1e160 it is about 1e320, beyond float64: undefined, said so
    with pytest.warns(registry.UndefinedMetricWarning, match="exceeds the float64 range"):
        assert metric("uce", scale_prediction(pred, 1e160), y * 1e160) is None
    uce_ref = metric("uce", pred, y)
    assert metric("uce", scale_prediction(pred, 1e100), y * 1e100) / 1e200 == pytest.approx(
        uce_ref, rel=1e-12
    )
