"""The Brier score's variants by name, against torch-uncertainty, scikit-learn and the formulas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss

from tests.peers import torch_uncertainty_float64
from uqcore import UQValidationError, evaluate, metric, registry
from uqcore import predictions as P
from uqcore.registry import UndefinedMetricWarning


@pytest.fixture
def tu() -> Iterator[Any]:
    """torch-uncertainty's metrics, with torch's default float type float64 meanwhile (its
    running sum starts as ``torch.tensor(0.0)``, of the default type)."""
    with torch_uncertainty_float64() as mod:
        yield mod


def _members(seed: int, m: int, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(m, n, c))
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return p, rng.integers(0, c, size=n)


def _peer_brier(tu: Any, probs: np.ndarray, y: np.ndarray, **options: Any) -> float:
    import torch

    m = tu.BrierScore(num_classes=probs.shape[-1], **options)
    m.update(torch.as_tensor(probs), torch.as_tensor(y))
    return float(m.compute())


@pytest.mark.parametrize(("m", "c"), [(5, 4), (2, 2), (1, 3)])
def test_members_mean_equals_torch_uncertainty_on_members(tu: Any, m: int, c: int) -> None:
    members, y = _members(m * 10 + c, m, 70, c)
    ours = metric("brier", P.Ensemble(member_probs=members), y, variant="members_mean")
    peer = _peer_brier(tu, np.transpose(members, (1, 0, 2)), y)  # the peer's (N, M, C)
    assert ours == pytest.approx(peer, rel=1e-12)
    # from member logits the members are their softmax
    z = np.log(members)
    assert metric("brier", P.Ensemble(member_logits=z), y, variant="members_mean") == pytest.approx(
        peer, rel=1e-12
    )
    # never below the BMA's Brier score (their difference is the members' variance)
    assert ours >= metric("brier", P.Ensemble(member_probs=members), y) - 1e-15


def test_members_mean_with_weights_is_the_weighted_mean_of_member_scores(tu: Any) -> None:
    members, y = _members(1, 4, 50, 3)
    w = np.random.default_rng(2).uniform(0.0, 2.0, size=50)
    onehot = np.eye(3)[y]
    per_row = ((members - onehot[None]) ** 2).sum(axis=-1).mean(axis=0)
    ens = P.Ensemble(member_probs=members)
    assert metric("brier", ens, y, sample_weight=w, variant="members_mean") == pytest.approx(
        float(np.sum(w * per_row) / np.sum(w)), rel=1e-12
    )
    counts = np.random.default_rng(3).integers(0, 4, size=50)
    counts[0] = 1
    idx = np.repeat(np.arange(50), counts)
    assert metric(
        "brier", ens, y, sample_weight=counts.astype(float), variant="members_mean"
    ) == pytest.approx(_peer_brier(tu, np.transpose(members[:, idx], (1, 0, 2)), y[idx]), rel=1e-12)


def test_members_mean_of_first_order_predictions_and_dirichlet() -> None:
    members, y = _members(4, 1, 30, 4)
    probs = P.Probs(members[0])
    assert metric("brier", probs, y, variant="members_mean") == metric("brier", probs, y)
    with pytest.warns(UndefinedMetricWarning, match="a dirichlet prediction has none"):
        assert metric("brier", P.Dirichlet(members[0] * 5.0), y, variant="members_mean") is None


@pytest.mark.parametrize("c", [2, 5])
def test_top_class_equals_torch_uncertainty_and_the_formula(tu: Any, c: int) -> None:
    members, y = _members(5 + c, 1, 80, c)
    p = members[0]
    assert metric("brier", P.Probs(p), y, variant="top_class") == pytest.approx(
        _peer_brier(tu, p, y, top_class=True), rel=1e-12
    )
    w = np.random.default_rng(c).uniform(0.0, 3.0, size=80)
    conf, right = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    assert metric("brier", P.Probs(p), y, sample_weight=w, variant="top_class") == pytest.approx(
        float(np.sum(w * (conf - right) ** 2) / np.sum(w)), rel=1e-12
    )


def test_bma_default_equals_torch_uncertainty_on_the_predictive_distribution(tu: Any) -> None:
    members, y = _members(9, 3, 60, 5)
    bma = members.mean(axis=0)
    assert metric("brier", P.Ensemble(member_probs=members), y) == pytest.approx(
        _peer_brier(tu, bma, y), rel=1e-12
    )


def test_binary_equals_scikit_learn() -> None:
    members, y = _members(10, 1, 90, 2)
    p = members[0]
    w = np.random.default_rng(11).uniform(0.0, 2.0, size=90)
    for weights in (None, w):
        ours = metric("brier", P.Probs(p), y, sample_weight=weights, variant="binary")
        assert ours == pytest.approx(brier_score_loss(y, p[:, 1], sample_weight=weights), rel=1e-12)
        assert ours == pytest.approx(brier_score_loss(y, p, sample_weight=weights), rel=1e-12)
    # from logits as well
    z = np.log(p)
    assert metric("brier", P.Logits(z), y, variant="binary") == pytest.approx(
        brier_score_loss(y, p[:, 1]), rel=1e-12
    )


def test_binary_is_undefined_for_more_than_two_classes() -> None:
    members, y = _members(12, 1, 10, 3)
    with pytest.warns(UndefinedMetricWarning, match="C = 3 classes"):
        assert metric("brier", P.Probs(members[0]), y, variant="binary") is None
    with pytest.raises(UQValidationError, match="variant must be one of 'bma'"):
        metric("brier", P.Probs(members[0]), y, variant="mean")


@pytest.mark.parametrize("variant", ["members_mean", "top_class", "binary"])
def test_variants_keep_every_weight_invariance_and_their_mean_terms(variant: str) -> None:
    from uqcore.batch import ClassificationBatch

    members, y = _members(13, 3, 40, 2)
    pred = P.Ensemble(member_probs=members)
    rng = np.random.default_rng(14)
    w = rng.uniform(0.2, 3.0, size=40)

    def value(pr: Any, labels: Any, weights: Any = None) -> float:
        return float(metric("brier", pr, labels, sample_weight=weights, variant=variant))

    base = value(pred, y, w)
    perm = rng.permutation(40)
    assert value(pred.take(perm), y[perm], w[perm]) == pytest.approx(base, rel=1e-12)
    assert value(pred, y, np.ones(40)) == pytest.approx(value(pred, y), rel=1e-12)
    assert value(pred, y, 3.7 * w) == pytest.approx(base, rel=1e-12)
    w0 = w.copy()
    w0[::3] = 0.0
    keep = np.flatnonzero(w0 > 0)
    assert value(pred, y, w0) == pytest.approx(value(pred.take(keep), y[keep], w0[keep]), rel=1e-12)
    counts = rng.integers(0, 4, size=40)
    counts[0] = 1
    idx = np.repeat(np.arange(40), counts)
    assert value(pred, y, counts.astype(float)) == pytest.approx(
        value(pred.take(idx), y[idx]), rel=1e-12
    )
    # the per-row terms that resampling uses agree with the metric
    spec = registry.get("brier", "classification")
    assert spec.mean_terms is not None
    terms = spec.mean_terms(ClassificationBatch(pred, y, w), variant=variant)
    assert float(np.sum(w * terms) / np.sum(w)) == pytest.approx(base, rel=1e-12)


def test_variant_is_in_the_registry_defaults_and_the_report() -> None:
    assert registry.get("brier", "classification").defaults == {"variant": "bma"}
    members, y = _members(15, 3, 20, 3)
    report = evaluate(
        P.Ensemble(member_probs=members), y, ["brier"], params={"brier": {"variant": "top_class"}}
    )
    assert report.params["brier"] == {"variant": "top_class"}
