"""Facts the registry holds about each metric for other code: whether its estimator is biased,
and its badness (the lower-is-better sort key of comparisons, ranks and leaderboards)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from uqcore import registry
from uqcore.registry import MetricSpec
from uqcore.stability import BIASED_METRICS
from uqcore.stability.compare import target_value

#: The estimators with a known finite-sample bias (binned or rank-based), as (task, name).
BIASED = {
    ("regression", "ece"),
    ("regression", "rmsce"),
    ("regression", "miscalibration_area"),
    ("regression", "calibration_error"),
    ("regression", "ence"),
    ("regression", "uce"),
    ("regression", "pit"),
    ("regression", "adversarial_group_calibration"),
    ("regression", "ause"),
    ("regression", "aurg"),
    ("regression", "spearman"),
    ("regression", "merci"),
    ("regression", "nmerci"),
    ("classification", "ece"),
    ("classification", "ace"),
    ("classification", "smooth_ece"),
    ("regression", "corp_mcb"),
    ("regression", "corp_dsc"),
    ("classification", "corp_mcb"),
    ("classification", "corp_dsc"),
    ("classification", "brier_reliability"),
    ("classification", "brier_resolution"),
}

#: The best value of each "target" metric under its options, from its definition.
TARGETS: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "coverage": lambda params: float(params.get("level", 0.95)),  # the nominal level
    "disentanglement_rank_corr": lambda params: 0.0,  # no correlation
    "spiegelhalter_z": lambda params: 0.0,  # the Brier score as expected under calibration
    # worst stratum or class coverage: the nominal level (0.9 by default)
    "size_stratified_coverage": lambda params: float(params.get("level", 0.9)),
    "worst_class_coverage": lambda params: float(params.get("level", 0.9)),
}
#: Targets of metrics whose name another task uses with another target, by (task, name).
TASK_TARGETS: dict[tuple[str, str], Callable[[Mapping[str, Any]], float]] = {
    ("classification", "coverage"): lambda params: float(params.get("level", 0.9)),
}


def _target(spec: MetricSpec) -> Callable[[Mapping[str, Any]], float]:
    return TASK_TARGETS.get((spec.task, spec.name), TARGETS.get(spec.name, _no_target))


def _no_target(params: Mapping[str, Any]) -> float:
    raise KeyError("no reference target")


def _reference(spec: MetricSpec, value: float, params: Mapping[str, Any]) -> float:
    """Lower is better: the value, its negation, or its distance from the target."""
    if spec.direction == "lower":
        return value
    if spec.direction == "higher":
        return -value
    return abs(value - _target(spec)(params))


def test_biased_metrics_are_marked_in_the_registry() -> None:
    assert {(s.task, s.name) for s in registry.specs() if s.biased} == BIASED
    assert {name for _, name in BIASED} == BIASED_METRICS


def test_every_target_metric_has_a_reference_target() -> None:
    assert {s.name for s in registry.specs() if s.direction == "target"} == set(TARGETS)


@pytest.mark.parametrize("spec", registry.specs(), ids=lambda s: f"{s.task}-{s.name}")
def test_badness_follows_the_direction(spec: MetricSpec) -> None:
    values = np.array([-1.5, -0.25, 0.0, 0.3, 0.8, 0.95, 1.0, 2.0])
    options: list[dict[str, Any]] = [{}, dict(spec.defaults)]
    if spec.name == "coverage":
        options += [{"level": 0.8}, {"level": 0.5, "levels": [0.5, 0.9]}]
    for params in options:
        got = spec.badness(values, params)
        assert isinstance(got, np.ndarray)
        want = np.array([_reference(spec, float(v), params) for v in values])
        np.testing.assert_array_equal(got, want)
        for v in values:
            one = spec.badness(float(v), params)
            assert type(one) is float
            assert one == _reference(spec, float(v), params)
    if spec.direction == "target":
        assert spec.target(None) == target_value(spec, {}) == _target(spec)({})


def test_badness_orders_better_values_first() -> None:
    mae, r2, coverage = (registry.get(n) for n in ("mae", "r2", "coverage"))
    assert mae.badness(0.1) < mae.badness(0.2)
    assert r2.badness(0.9) < r2.badness(0.2)
    assert coverage.badness(0.94) < coverage.badness(0.99) < coverage.badness(0.8)
    assert coverage.badness(0.79, {"level": 0.8}) < coverage.badness(0.9, {"level": 0.8})


def test_why_not_remembered_per_kind_and_targets_is_the_reasons_of_the_moment() -> None:
    # why_not is remembered per (task, kind, capabilities, targets): the remembered answer is
    # the one computed afresh, for every metric, prediction kind and set of targets, in any
    # order of the calls; weights are checked on every call
    from tests.factories import CLASSIFICATION_KINDS, KINDS, make_classification, make_prediction

    preds = [make_prediction(kind, 12, seed=2)[0] for kind in KINDS]
    preds += [make_classification(kind, 12, seed=2)[0] for kind in CLASSIFICATION_KINDS]
    for targets in (frozenset(), frozenset({"ood"}), frozenset({"ood", "soft_labels"})):
        for spec in registry.specs():
            for pred in [*preds, *reversed(preds)]:
                assert spec.why_not(pred, targets) == spec._why_not(pred, targets)
    spec = registry.get("adversarial_group_calibration")
    gauss = make_prediction("gaussian", 12, seed=2)[0]
    assert spec.why_not(gauss) is None
    assert spec.why_not(gauss, sample_weight=np.full(12, 0.5)) is not None
    assert spec.why_not(gauss, sample_weight=np.full(12, 2.0)) is None
