"""Aggregators and decompositions against plain float64 references written from the formulas."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.special as sps

from uqcore import UQValidationError, evaluate
from uqcore import predictions as P
from uqcore.classification import AGGREGATORS, decompose_bregman, decompose_it
from uqcore.predictions import classification as pc


def _members(seed: int, m: int, n: int, c: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(m, n, c))
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def _h(p: list[float]) -> float:
    return -sum(x * math.log(x) for x in p if x > 0)


def _reference(members: np.ndarray) -> dict[str, list[float]]:
    """Every ensemble aggregator, row by row with Python floats."""
    m, n, c = members.shape
    out: dict[str, list[float]] = {k: [] for k in AGGREGATORS}
    for i in range(n):
        rows = [[float(members[j, i, k]) for k in range(c)] for j in range(m)]
        bma = [sum(r[k] for r in rows) / m for k in range(c)]
        top = sorted(bma, reverse=True)
        out["one_minus_max_prob_bma"].append(1 - top[0])
        out["margin"].append(1 - (top[0] - top[1]))
        out["one_minus_expected_max_prob"].append(1 - sum(max(r) for r in rows) / m)
        out["entropy_bma"].append(_h(bma))
        out["expected_entropy"].append(sum(_h(r) for r in rows) / m)
        out["mutual_information"].append(
            sum(sum(r[k] * math.log(r[k] / bma[k]) for k in range(c) if r[k] > 0) for r in rows) / m
        )
        g = [sum(math.log(r[k]) for r in rows) / m for k in range(c)]
        z = sum(math.exp(v) for v in g)
        dual = [math.exp(v) / z for v in g]
        out["one_minus_max_prob_dual_bma"].append(1 - max(dual))
        out["entropy_dual_bma"].append(_h(dual))
        out["expected_divergence"].append(
            sum(sum(dual[k] * math.log(dual[k] / r[k]) for k in range(c)) for r in rows) / m
        )
        out["bregman_total"].append(
            sum(-sum(dual[k] * math.log(r[k]) for k in range(c)) for r in rows) / m
        )
        out["mean_variance_probs"].append(
            sum(sum((r[k] - bma[k]) ** 2 for r in rows) / m for k in range(c)) / c
        )
    return out


@pytest.mark.parametrize(("m", "c"), [(4, 6), (3, 2), (10, 5)])
def test_ensemble_aggregators_match_reference(m: int, c: int) -> None:
    members = _members(1, m, 25, c)
    ens = P.Ensemble(member_probs=members)
    ref = _reference(members)
    for name in ens.estimator_names():
        np.testing.assert_allclose(ens.estimate(name), ref[name], rtol=1e-12, atol=1e-14)


def test_logit_aggregators_match_reference() -> None:
    rng = np.random.default_rng(2)
    z = rng.normal(size=(3, 20, 4))
    ens = P.Ensemble(member_logits=z)
    mean_var = [float(np.mean([np.var(z[:, i, k]) for k in range(4)])) for i in range(20)]
    zbar = z.mean(axis=0)
    ds = [4 / (4 + sum(math.exp(v) for v in zbar[i])) for i in range(20)]
    np.testing.assert_allclose(ens.estimate("mean_variance_logits"), mean_var, rtol=1e-12)
    np.testing.assert_allclose(ens.estimate("dempster_shafer"), ds, rtol=1e-12)
    np.testing.assert_allclose(
        P.Logits(z[0]).estimate("dempster_shafer"),
        [4 / (4 + sum(math.exp(v) for v in z[0, i])) for i in range(20)],
        rtol=1e-12,
    )
    # from logits the members are their softmax
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(
        ens.estimate("mutual_information"),
        P.Ensemble(member_probs=p).estimate("mutual_information"),
        rtol=1e-10,
    )


def test_probability_ensembles_lack_logit_aggregators() -> None:
    ens = P.Ensemble(member_probs=_members(3, 2, 5, 3))
    assert "mean_variance_logits" not in ens.estimator_names()
    with pytest.raises(UQValidationError, match="'dempster_shafer' does not apply"):
        ens.estimate("dempster_shafer")
    with pytest.raises(UQValidationError, match="unknown estimator 'nope'"):
        ens.estimate("nope")


@pytest.mark.parametrize("c", [2, 7])
def test_decomposition_identities_hold_to_1e_12(c: int) -> None:
    ens = P.Ensemble(member_probs=_members(4, 5, 200, c))
    for d in (decompose_it(ens), decompose_bregman(ens)):
        np.testing.assert_allclose(d.total, d.aleatoric + d.epistemic, rtol=0, atol=1e-12)
        assert np.all(d.epistemic >= -1e-15)
    dirichlet = P.Dirichlet(np.random.default_rng(5).uniform(0.1, 20.0, size=(200, c)))
    for d in (decompose_it(dirichlet), decompose_bregman(dirichlet)):
        np.testing.assert_allclose(d.total, d.aleatoric + d.epistemic, rtol=0, atol=1e-12)


def test_ensemble_of_one_has_exactly_zero_epistemic() -> None:
    members = _members(6, 1, 40, 5)
    members[0, 0] = [0.5, 0.5, 0.0, 0.0, 0.0]  # zero probabilities too
    ens = P.Ensemble(member_probs=members)
    for name in ("mutual_information", "expected_divergence", "mean_variance_probs"):
        assert np.all(ens.estimate(name) == 0.0), name
    probs = P.Probs(members[0])
    for name in ("one_minus_max_prob_bma", "entropy_bma", "margin"):
        np.testing.assert_allclose(ens.estimate(name), probs.estimate(name), rtol=1e-15)
    np.testing.assert_allclose(ens.estimate("expected_entropy"), ens.estimate("entropy_bma"))
    np.testing.assert_allclose(ens.estimate("bregman_total"), ens.estimate("entropy_bma"))


def test_dirichlet_closed_forms_match_monte_carlo_and_formulas() -> None:
    rng = np.random.default_rng(7)
    alpha = rng.uniform(0.5, 6.0, size=(4, 3))
    d = P.Dirichlet(alpha)
    # closed forms written out again
    a0 = alpha.sum(axis=1)
    exp_ent = sps.digamma(a0 + 1) - np.sum(alpha / a0[:, None] * sps.digamma(alpha + 1), axis=1)
    np.testing.assert_allclose(d.estimate("expected_entropy"), exp_ent, rtol=1e-12)
    var = np.mean(alpha * (a0[:, None] - alpha) / (a0[:, None] ** 2 * (a0[:, None] + 1)), axis=1)
    np.testing.assert_allclose(d.estimate("mean_variance_probs"), var, rtol=1e-12)
    np.testing.assert_allclose(d.estimate("dempster_shafer"), 3 / a0, rtol=1e-12)
    # Monte Carlo: an ensemble of many Dirichlet draws approaches the closed forms
    draws = np.stack([rng.dirichlet(a, size=200_000) for a in alpha], axis=1)
    mc = P.Ensemble(member_probs=draws)
    for name, tol in [
        ("expected_entropy", 5e-3),
        ("mutual_information", 5e-3),
        ("mean_variance_probs", 1e-3),
        ("entropy_dual_bma", 1e-2),
        ("expected_divergence", 1e-2),
    ]:
        np.testing.assert_allclose(mc.estimate(name), d.estimate(name), atol=tol, err_msg=name)


def test_chunking_and_float32_give_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    members = _members(8, 3, 50, 4)
    whole = P.Ensemble(member_probs=members)
    expected = {k: whole.estimate(k) for k in whole.estimator_names()}
    monkeypatch.setattr(pc, "_chunk_rows", lambda arr: 7)
    chunked = P.Ensemble(member_probs=members)
    for k, v in expected.items():
        np.testing.assert_array_equal(chunked.estimate(k), v, err_msg=k)
    np.testing.assert_array_equal(chunked.probs(), whole.probs())
    f32 = P.Ensemble(member_probs=members.astype(np.float32))
    assert f32.arrays()["member_probs"].dtype == np.float32  # kept, not copied to float64
    np.testing.assert_allclose(f32.estimate("entropy_bma"), expected["entropy_bma"], atol=1e-6)


def test_every_aggregator_is_described() -> None:
    for a in AGGREGATORS.values():
        assert a.formula and a.reference and a.summary, a.name
        assert a.decomposition in (None, "it", "bregman")
    comps = {(a.decomposition, a.component) for a in AGGREGATORS.values() if a.decomposition}
    assert comps == {(d, c) for d in ("it", "bregman") for c in ("total", "aleatoric", "epistemic")}


def test_decompositions_need_second_order_predictions() -> None:
    with pytest.raises(UQValidationError, match="needs a second-order prediction"):
        decompose_it(P.Probs(np.array([[0.5, 0.5]])))


def test_members_are_read_once_for_the_bma_and_every_aggregator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """evaluate(metrics="all", estimators="all") traverses the M×N×C members once (after
    validation), whether the BMA or an estimate is asked for first."""
    traversals = []
    chunks = pc.Ensemble.member_chunks

    def counted(ens: Any) -> Any:
        traversals.append(ens.n)
        yield from chunks(ens)

    monkeypatch.setattr(pc.Ensemble, "member_chunks", counted)
    members = _members(12, 3, 40, 5)
    labels = np.random.default_rng(12).integers(0, 5, size=40)
    evaluate(P.Ensemble(member_probs=members), labels, metrics="all", estimators="all")
    assert traversals == [40]
    ens = P.Ensemble(member_probs=members)
    ens.probs()
    ens.estimate("mutual_information")
    assert traversals == [40, 40]


# -- Dempster–Shafer at extreme logits ----------------------------------------------------------
def _ds_reference(z: np.ndarray) -> list[float]:
    """C / (C + Σ_c exp z_c) row by row in 60-digit decimal arithmetic (no float range limit)."""
    from decimal import Context, Decimal

    ctx = Context(prec=60)
    c = Decimal(z.shape[-1])
    out = []
    for row in z:
        total = sum((ctx.exp(Decimal(float(v))) for v in row), Decimal(0))
        out.append(float(ctx.divide(c, ctx.add(c, total))))
    return out


_EXTREME_LOGITS = np.array(
    [
        [-1000.0, -1000.0],  # Σ exp z underflows to 0: u = 1
        [1000.0, 1000.0],  # Σ exp z overflows: u = e^-1000 / ... underflows to 0
        [-1000.0, 1000.0],  # mixed: the largest dominates
        [-1000.0, 0.0],  # u = 2 / (2 + 1)
        [-745.0, -740.0],  # exp(-m) of the largest overflows in a naive shift
        [700.0, 705.0],  # u near the smallest normal float
        [-30.0, 2.5],
        [0.0, 0.0],
    ]
)


def test_dempster_shafer_is_finite_and_exact_at_extreme_logits() -> None:
    ref = _ds_reference(_EXTREME_LOGITS)
    got = P.Logits(_EXTREME_LOGITS).estimate("dempster_shafer")
    assert np.all(np.isfinite(got))
    assert got[0] == 1.0 and got[1] == 0.0 and got[7] == 0.5
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0.0)


def test_dempster_shafer_of_an_ensemble_uses_the_mean_logits_stably() -> None:
    rng = np.random.default_rng(40)
    # members around the extreme rows, so that the mean logits are extreme as well
    z = _EXTREME_LOGITS[None] + rng.normal(scale=3.0, size=(4, *_EXTREME_LOGITS.shape))
    got = P.Ensemble(member_logits=z).estimate("dempster_shafer")
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, _ds_reference(z.mean(axis=0)), rtol=1e-12, atol=0.0)
    # many classes, all logits far below zero: u is 1 to rounding
    low = np.full((2, 3, 7), -900.0) + rng.normal(size=(2, 3, 7))
    np.testing.assert_allclose(P.Ensemble(member_logits=low).estimate("dempster_shafer"), 1.0)


def test_dempster_shafer_at_extreme_logits_ranks_ood_samples() -> None:
    # the ID rows have confident logits, the OOD rows have all logits at -1000 (no evidence)
    z = np.array([[5.0, -5.0], [-4.0, 6.0], [-1000.0, -1000.0], [-999.0, -1000.0]])
    ood = np.array([False, False, True, True])
    value = evaluate(
        P.Logits(z),
        [0, 1, 0, 1],
        ["auroc_ood"],
        ood=ood,
        params={"auroc_ood": {"estimator": "dempster_shafer"}},
    )
    assert value["auroc_ood"] == 1.0


def test_a_non_finite_built_in_estimate_never_reaches_a_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a defect that made an aggregator NaN on one row must fail loudly, not rank the NaN
    from uqcore import metric
    from uqcore.predictions import _aggregators

    def broken(probs: np.ndarray, logits: np.ndarray | None = None) -> dict[str, np.ndarray]:
        out = {k: v.copy() for k, v in first_order_ok(probs, logits).items()}
        out["entropy_bma"][2] = np.nan
        return out

    first_order_ok = _aggregators.first_order
    monkeypatch.setattr(pc, "first_order", broken)
    p = np.array([[0.9, 0.1], [0.6, 0.4], [0.5, 0.5], [0.2, 0.8]])
    with pytest.raises(FloatingPointError, match=r"'entropy_bma' of a probs prediction .* row 2"):
        metric("auroc_ood", P.Probs(p), [0, 0, 1, 1], ood=[0, 1, 0, 1], estimator="entropy_bma")
    with pytest.raises(FloatingPointError, match="row 2"):
        P.Probs(p).estimate("entropy_bma")
    # the other estimators of the same pass are unaffected
    assert np.all(np.isfinite(P.Probs(p).estimate("margin")))
    # user-supplied estimates are refused at construction already
    with pytest.raises(UQValidationError, match=r"estimates\['mine'\] must be finite"):
        P.Probs(p, estimates={"mine": [0.1, np.nan, 0.2, 0.3]})
