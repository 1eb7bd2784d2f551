"""Classification prediction kinds: validation messages, estimates, take(), targets."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import UQValidationError, metric
from uqcore import predictions as P
from uqcore.batch import ClassificationBatch
from uqcore.predictions.classification import PROBS_ATOL


def test_probs_rows_must_be_on_the_simplex() -> None:
    p = np.full((4, 3), 1 / 3)
    p[2] = [0.5, 0.6, -0.1]
    with pytest.raises(UQValidationError, match=r"probs must be >= 0; probs\[2, 2\] = -0.1"):
        P.Probs(p)
    p[2] = [0.5, 0.5, 0.01]
    with pytest.raises(
        UQValidationError,
        match=r"probs rows must sum to 1 \(tolerance 0.0001\); sum\(probs\[2\]\) = 1.01",
    ):
        P.Probs(p)
    p[2] = [0.5, 0.5, PROBS_ATOL / 2]  # within the stated tolerance
    assert P.Probs(p).n == 4


def test_shapes_finiteness_and_classes() -> None:
    with pytest.raises(UQValidationError, match="probs must be 2-D, found shape"):
        P.Probs(np.ones(3) / 3)
    with pytest.raises(UQValidationError, match="at least 2 classes, found C = 1"):
        P.Probs(np.ones((3, 1)))
    with pytest.raises(UQValidationError, match="must not be empty"):
        P.Logits(np.ones((0, 3)))
    z = np.zeros((2, 5, 3))
    z[1, 4, 2] = np.nan
    with pytest.raises(
        UQValidationError, match=r"member_logits must be finite; member_logits\[1, 4, 2\] = nan"
    ):
        P.Ensemble(member_logits=z)
    with pytest.raises(UQValidationError, match="exactly one of member_probs and member_logits"):
        P.Ensemble()
    with pytest.raises(UQValidationError, match=r"alpha must be > 0; alpha\[1, 0\] = 0"):
        P.Dirichlet(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(UQValidationError, match="probs must hold real numbers"):
        P.Probs(np.array([["a", "b"]]))


def test_ensemble_members_are_checked_with_the_first_bad_index() -> None:
    p = np.full((3, 4, 2), 0.5)
    p[2, 3] = [0.7, 0.7]
    with pytest.raises(UQValidationError, match=r"sum\(member_probs\[2, 3\]\) = 1.4"):
        P.Ensemble(member_probs=p)


def test_estimates_are_validated_and_named() -> None:
    p = np.full((3, 2), 0.5)
    pred = P.Probs(p, estimates={"maha": [1.0, 2.0, 3.0]})
    assert pred.estimate("maha").tolist() == [1.0, 2.0, 3.0]
    assert pred.estimator_names() == ["one_minus_max_prob_bma", "entropy_bma", "margin", "maha"]
    with pytest.raises(UQValidationError, match=r"estimates\['maha'\] must have shape \(3,\)"):
        P.Probs(p, estimates={"maha": [1.0, 2.0]})
    with pytest.raises(UQValidationError, match=r"estimates\['m'\] must be finite; .*\[1\] = inf"):
        P.Probs(p, estimates={"m": [1.0, np.inf, 0.0]})
    with pytest.raises(UQValidationError, match="name of a built-in aggregator"):
        P.Probs(p, estimates={"entropy_bma": [1.0, 2.0, 3.0]})


def test_take_keeps_kind_estimates_and_dtype() -> None:
    rng = np.random.default_rng(0)
    m = rng.dirichlet(np.ones(3), size=(2, 5)).astype(np.float32)
    ens = P.Ensemble(member_probs=m, estimates={"s": np.arange(5.0)})
    sub = ens.take([4, 0])
    assert isinstance(sub, P.Ensemble) and sub.n == 2 and sub.n_members == 2
    assert sub.estimate("s").tolist() == [4.0, 0.0]
    assert sub.arrays()["member_probs"].dtype == np.float32
    np.testing.assert_array_equal(sub.probs(), ens.probs()[[4, 0]])


def test_targets_are_validated() -> None:
    pred = P.Probs(np.full((3, 2), 0.5))
    with pytest.raises(UQValidationError, match=r"labels must lie in \[0, 2\); labels\[1\] = 2"):
        ClassificationBatch(pred, [0, 2, 1])
    with pytest.raises(UQValidationError, match=r"labels must be integers; labels\[0\] = 0.5"):
        ClassificationBatch(pred, [0.5, 1.0, 1.0])
    with pytest.raises(UQValidationError, match="labels must have the same length"):
        ClassificationBatch(pred, [0, 1])
    with pytest.raises(UQValidationError, match=r"ood must be booleans or 0/1; ood\[2\] = 2"):
        ClassificationBatch(pred, [0, 1, 1], ood=[0, 1, 2])
    with pytest.raises(UQValidationError, match=r"soft_labels must have shape \(3, 2\)"):
        ClassificationBatch(pred, [0, 1, 1], soft_labels=np.ones((3, 3)) / 3)
    with pytest.raises(UQValidationError, match=r"sum\(soft_labels\[0\]\) = 2"):
        ClassificationBatch(pred, [0, 1, 1], soft_labels=np.ones((3, 2)))
    batch = ClassificationBatch(pred, np.array([0.0, 1.0, 1.0]), ood=[True, False, False])
    assert batch.targets == frozenset({"ood"})


def test_metrics_that_need_targets_say_so() -> None:
    pred = P.Probs(np.full((3, 2), 0.5))
    with pytest.raises(UQValidationError, match=r"auroc_ood needs ood, which was not given"):
        metric("auroc_ood", pred, [0, 1, 1])
    with pytest.raises(UQValidationError, match="needs second_order, which a probs prediction"):
        metric("disentanglement_rank_corr", pred, [0, 1, 1])
    with pytest.raises(UQValidationError, match="classification predictions only"):
        metric("mae", P.Gaussian([0.0], [1.0]), [0.0], ood=[True])


def test_arrays_of_any_backend_are_accepted(xp: object) -> None:
    """Inputs of other array libraries are copied to the host; values equal numpy's."""
    from tests.factories import make_classification
    from uqcore import evaluate

    ref, y, t = make_classification("ensemble", 30, seed=3)
    arrays = ref.arrays()["member_probs"], y, t["ood"], t["soft_labels"]
    if getattr(xp, "__name__", "") == "torch":
        import torch

        conv = [torch.from_numpy(np.asarray(a)) for a in arrays]
    else:
        conv = [xp.asarray(a) for a in arrays]  # type: ignore[attr-defined]
    pred = P.Ensemble(member_probs=conv[0], estimates={"score": ref.estimate("score")})
    got = evaluate(pred, conv[1], estimators="all", ood=conv[2], soft_labels=conv[3])
    want = evaluate(ref, y, estimators="all", **t)
    assert got.to_dict()["values"] == want.to_dict()["values"]
    assert got.by_estimator == want.by_estimator
