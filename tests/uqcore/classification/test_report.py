"""evaluate() and metric() on classification predictions: task choice, estimator tables,
targets passed through, JSON without NaN; the public entry points of the issue."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from tests.factories import CLASSIFICATION_KINDS, make_classification
from uqcore import UQValidationError, evaluate, metric, registry
from uqcore import predictions as P


@pytest.mark.parametrize("kind", CLASSIFICATION_KINDS)
def test_all_metrics_all_estimators_is_json_without_nan(kind: str) -> None:
    pred, y, t = make_classification(kind, 64, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(pred, y, metrics="all", estimators="all", **t)
    doc = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert doc["task"] == "classification"
    assert doc["prediction_kind"] == pred.kind
    names = set(registry.names("classification"))
    assert set(doc["values"]) | set(doc["not_applicable"]) == names
    if not pred.estimator_names():  # prediction sets without probabilities
        assert "estimators" not in doc and "by_estimator" not in doc
        assert all(
            "estimator" not in registry.get(name, "classification").defaults
            for name in doc["values"]
        )
        return
    assert doc["estimators"] == pred.estimator_names()
    for name, row in doc["by_estimator"].items():
        assert "estimator" in registry.get(name, "classification").defaults
        assert list(row) == pred.estimator_names()
        assert row["one_minus_max_prob_bma"] == doc["values"][name]
    assert "auroc_ood" in doc["by_estimator"]


def test_table_entries_equal_single_metric_calls() -> None:
    pred, y, t = make_classification("ensemble", 80, seed=2)
    report = evaluate(
        pred,
        y,
        metrics=["auroc_ood", "aleatoric_rank_corr", "ece"],
        estimators=["mutual_information", "entropy_bma", "score"],
        **t,
    )
    table = report.by_estimator
    assert set(table) == {"auroc_ood", "aleatoric_rank_corr"}  # ece takes no estimator
    for est in ("mutual_information", "entropy_bma", "score"):
        assert table["auroc_ood"][est] == metric("auroc_ood", pred, y, ood=t["ood"], estimator=est)
        assert table["aleatoric_rank_corr"][est] == metric(
            "aleatoric_rank_corr", pred, y, soft_labels=t["soft_labels"], estimator=est
        )


def test_metrics_needing_absent_targets_are_not_applicable() -> None:
    pred, y, _ = make_classification("dirichlet", 30, seed=3)
    report = evaluate(pred, y)
    assert "ece" in report and "mutual_information" not in report
    assert "auroc_ood" in report.not_applicable
    assert "pass ood=" in report.not_applicable["auroc_ood"]
    assert "soft_labels" in report.not_applicable["aleatoric_rank_corr"]
    with pytest.raises(UQValidationError, match="auroc_ood needs ood"):
        evaluate(pred, y, metrics=["auroc_ood"])


def test_shared_names_resolve_by_task() -> None:
    pred, y, _ = make_classification("probs", 40, seed=4)
    from uqcore.batch import ClassificationBatch

    cls_ece = registry.get("ece", "classification")
    assert metric("ece", pred, y) == registry.call(cls_ece, ClassificationBatch(pred, y))
    assert registry.get("ece").task == "regression"
    assert registry.get("auroc_ood").task == "classification"
    gauss = P.Gaussian(mean=np.zeros(3), std=np.ones(3))
    assert evaluate(gauss, np.zeros(3), metrics=["ece"]).meta["task"] == "regression"
    assert evaluate(pred, y, metrics=["ece"]).meta["task"] == "classification"
    with pytest.raises(UQValidationError, match="crps is a regression metric and a probs"):
        evaluate(pred, y, metrics=["crps"])
    with pytest.raises(UQValidationError, match="auroc_ood is a classification metric"):
        metric("auroc_ood", gauss, np.zeros(3))
    with pytest.raises(UQValidationError, match="unknown metric 'nope'"):
        metric("nope", pred, y)


def test_estimator_errors() -> None:
    pred, y, _ = make_classification("probs", 10, seed=5)
    with pytest.raises(UQValidationError, match="'mutual_information' does not apply"):
        evaluate(pred, y, metrics=["aurc"], estimators=["mutual_information"])
    with pytest.raises(UQValidationError, match="'mutual_information' does not apply"):
        metric("aurc", pred, y, estimator="mutual_information")
    with pytest.raises(UQValidationError, match="estimators apply to classification"):
        evaluate(P.Gaussian(mean=[0.0], std=[1.0]), [0.0], estimators="all")


def test_issue_entry_points() -> None:
    rng = np.random.default_rng(6)
    probs = rng.dirichlet(np.ones(10), size=(5, 200))
    labels = rng.integers(0, 10, size=200)
    is_ood = rng.random(200) < 0.5
    soft = rng.dirichlet(np.ones(10), size=200)
    ens = P.Ensemble(member_probs=probs)
    conf = probs.mean(axis=0).max(axis=1)
    assert metric("ece", ens, labels) == metric("ece", P.Probs(probs.mean(axis=0)), labels)
    assert 0.0 <= metric("auroc_ood", ens, labels, ood=is_ood, estimator="mutual_information") <= 1
    v = metric("aleatoric_rank_corr", ens, labels, soft_labels=soft, estimator="expected_entropy")
    assert -1.0 <= v <= 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = evaluate(ens, labels, metrics="all", estimators="all", ood=is_ood, soft_labels=soft)
    assert len(table.by_estimator["auroc_ood"]) == len(ens.estimator_names())
    u = P.Ensemble(member_probs=probs).estimate("entropy_bma")
    assert u.shape == (200,)
    np.testing.assert_allclose(
        P.Ensemble(member_probs=probs).estimate("one_minus_max_prob_bma"), 1 - conf, rtol=1e-12
    )
