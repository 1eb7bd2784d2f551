"""The stability engine on classification predictions: the task's metrics, the targets and
estimators passed through, and resamples (counts as weights) equal to resampled arrays."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from uqcore import metric
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.stability import bootstrap, compare, convergence, rank_distribution
from uqcore.stability.weights import Resampler, counts_to_indices

N = 90
C = 4


def _data(seed: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    members = rng.dirichlet(np.full(C, 0.7), size=(3, N))
    labels = np.argmax(members.mean(axis=0), axis=1)
    flip = rng.random(N) < 0.35
    labels[flip] = rng.integers(0, C, size=int(flip.sum()))
    ood = rng.random(N) < 0.3
    soft = rng.dirichlet(np.ones(C), size=N)
    soft[rng.random(N) < 0.3] = np.eye(C)[0]  # some unambiguous rows
    est = {"my_score": np.round(rng.random(N), 1)}  # ties on purpose
    return P.Ensemble(member_probs=members, estimates=est), labels, ood, soft


# Metrics whose values depend on ties, bins, orders and the soft-label entropy, plus the two
# names that exist for regression too.
METRICS = [
    "accuracy",
    "nll",
    "brier",
    "ece",
    "ece_adaptive",
    "auroc_correctness",
    "aurc",
    "augrc",
    "auroc_ood",
    "fpr_at_95tpr",
    "aleatoric_rank_corr",
]


def test_resamples_equal_the_metric_on_resampled_arrays() -> None:
    """Bootstrap counts as weights == each metric recomputed on the rows repeated c_i times."""
    ens, y, ood, soft = _data(0)
    b = 12
    r = bootstrap(
        ens,
        y,
        METRICS,
        n_resamples=b,
        seed=4,
        keep_values=True,
        ood=ood,
        soft_labels=soft,
        params={"aurc": {"estimator": "my_score"}, "auroc_ood": {"estimator": "expected_entropy"}},
    )
    resampler = Resampler(N)
    for i in range(b):
        idx = counts_to_indices(resampler.counts(4, i))
        sub = ens.take(idx)
        for name in METRICS:
            opts = r.to_dict()["params"][name]
            ref = metric(name, sub, y[idx], ood=ood[idx], soft_labels=soft[idx], **opts)
            got = r[name]["values"][i]
            assert ref is not None and got is not None, name
            assert math.isclose(got, ref, rel_tol=1e-10, abs_tol=1e-12), (name, i, got, ref)


def test_full_values_are_the_classification_metrics() -> None:
    """ "ece" and "nll" resolve to the classification metrics, as in uqcore.metric."""
    ens, y, ood, _ = _data(1)
    r = bootstrap(ens, y, ["ece", "nll", "auroc_ood"], n_resamples=20, ood=ood)
    for name in ("ece", "nll"):
        assert r[name]["value"] == metric(name, ens, y)
    assert r["auroc_ood"]["value"] == metric("auroc_ood", ens, y, ood=ood)


def test_estimators_add_one_entry_per_estimator() -> None:
    ens, y, ood, _ = _data(2)
    r = bootstrap(
        ens,
        y,
        ["auroc_ood", "accuracy"],
        n_resamples=20,
        ood=ood,
        estimators=["mutual_information", "one_minus_max_prob_bma", "my_score"],
    )
    # the metric's own estimator keeps the plain entry; metrics without an estimator get none
    assert set(r) == {
        "auroc_ood",
        "accuracy",
        "auroc_ood[mutual_information]",
        "auroc_ood[my_score]",
    }
    for est in ("mutual_information", "my_score"):
        expected = metric("auroc_ood", ens, y, ood=ood, estimator=est)
        assert r[f"auroc_ood[{est}]"]["value"] == expected
    assert r.to_dict()["params"]["auroc_ood[my_score]"]["estimator"] == "my_score"
    with pytest.raises(UQValidationError, match="estimator 'nope' does not apply"):
        bootstrap(ens, y, ["auroc_ood"], n_resamples=5, ood=ood, estimators=["nope"])


def test_targets_decide_applicability() -> None:
    ens, y, ood, soft = _data(3)
    r = bootstrap(ens, y, "all", n_resamples=5)
    assert "auroc_ood" in r.not_applicable and "aleatoric_rank_corr" in r.not_applicable
    assert "auroc_ood" not in r and "ece" in r
    with_targets = bootstrap(ens, y, "all", n_resamples=5, ood=ood, soft_labels=soft)
    assert "auroc_ood" in with_targets and "aleatoric_rank_corr" in with_targets
    with pytest.raises(UQValidationError, match="ood"):
        bootstrap(ens, y, ["auroc_ood"], n_resamples=5)
    with pytest.raises(UQValidationError, match="unknown keyword argument"):
        bootstrap(ens, y, ["ece"], n_resamples=5, groups_typo=np.zeros(N))


def test_same_seed_same_output_for_every_analysis() -> None:
    ens, y, ood, soft = _data(4)
    other = P.Ensemble(member_probs=np.random.default_rng(9).dirichlet(np.ones(C), size=(2, N)))
    kw: dict[str, Any] = {"ood": ood, "soft_labels": soft}
    names = ["ece", "aurc", "auroc_ood", "aleatoric_rank_corr"]

    def runs(seed: int) -> list[str]:
        out = [
            bootstrap(ens, y, names, n_resamples=15, seed=seed, method="bca", **kw),
            convergence(ens, y, names, repeats=4, sizes=[20, 45, N], seed=seed, **kw),
            compare(ens, other, y, names, n_resamples=15, seed=seed, estimators="all", **kw),
            rank_distribution(
                {"a": ens, "b": other},
                y,
                metric="auroc_ood",
                params={"estimator": "mutual_information"},
                n_resamples=15,
                seed=seed,
                **kw,
            ),
        ]
        return [json.dumps(x.to_dict(), sort_keys=True) for x in out]

    first = runs(7)
    assert first == runs(7)
    assert all(a != b for a, b in zip(first, runs(8), strict=True))


def test_convergence_subsets_equal_the_metric_on_the_subset() -> None:
    """At the full size every subset is the whole set: its value is the full value."""
    ens, y, ood, _ = _data(5)
    c = convergence(ens, y, ["ece", "auroc_ood"], repeats=3, sizes=[30, N], seed=1, ood=ood)
    assert c["ece"]["value"] == metric("ece", ens, y)
    full = c.to_dict()["results"]["auroc_ood"]
    assert full["value"] == metric("auroc_ood", ens, y, ood=ood)
