"""The classification curves of uqcore.curves against scikit-learn's curves, an independent
numpy reference for risk–coverage, and the metrics whose areas they record."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_curve

import uqcore
from uqcore import UQValidationError
from uqcore import predictions as P
from uqcore.classification import curves as cc
from uqcore.curves import CURVES, curve_from_json, curve_names, curve_to_json, curves

NAMES = [
    "reliability_diagram",
    "risk_coverage_curve",
    "roc_ood",
    "pr_ood",
    "roc_correctness",
    "pr_correctness",
    "corp_reliability",
]


def _case(seed: int, n: int = 240, *, ties: bool = True, weighted: bool = False) -> dict[str, Any]:
    """Probabilities (rounded, so the estimates tie), labels, OOD flags, weights with zeros."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(3, 0.8), size=n)
    if ties:
        p = np.round(p, 1) + 1e-3
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, 3, size=n)
    y[: n // 2] = np.argmax(p[: n // 2], axis=1)  # a sensible accuracy
    ood = rng.random(n) < 0.35
    w = rng.integers(0, 4, size=n).astype(float) if weighted else None
    return {"pred": P.Probs(p), "y": y, "ood": ood, "w": w}


CASES = [
    pytest.param(0, True, False, id="ties"),
    pytest.param(1, True, True, id="ties-weighted"),
    pytest.param(2, False, True, id="distinct-weighted"),
]


def _errors(case: dict[str, Any]) -> np.ndarray:
    probs = case["pred"].probs()
    return (np.argmax(probs, axis=1) != case["y"]).astype(float)


@pytest.mark.parametrize(("seed", "ties", "weighted"), CASES)
@pytest.mark.parametrize("estimator", [None, "entropy_bma"])
def test_roc_and_pr_agree_with_sklearn(
    seed: int, ties: bool, weighted: bool, estimator: str | None
) -> None:
    case = _case(seed, ties=ties, weighted=weighted)
    est = estimator or uqcore.classification.DEFAULT_ESTIMATOR
    u = case["pred"].estimate(est)
    kw: dict[str, Any] = {"sample_weight": case["w"]}
    if estimator is not None:
        kw["estimator"] = estimator
    flags = {"ood": case["ood"].astype(int), "error": _errors(case).astype(int)}
    made = {
        "roc_ood": cc.roc_ood(case["pred"], case["y"], ood=case["ood"], **kw),
        "pr_ood": cc.pr_ood(case["pred"], case["y"], ood=case["ood"], **kw),
        "roc_correctness": cc.roc_correctness(case["pred"], case["y"], **kw),
        "pr_correctness": cc.pr_correctness(case["pred"], case["y"], **kw),
    }
    for name, curve in made.items():
        positive = "ood" if name.endswith("ood") else "error"
        assert curve.positive == positive
        assert curve.estimator == est
        truth = flags[positive]
        if name.startswith("roc"):
            fpr, tpr, thr = roc_curve(truth, u, sample_weight=case["w"], drop_intermediate=False)
            np.testing.assert_allclose(curve.fpr, fpr, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(curve.tpr, tpr, rtol=1e-12, atol=1e-12)
            assert np.isinf(thr[0])  # scikit-learn's "flag nothing" point, kept without inf
            np.testing.assert_array_equal(curve.thresholds, thr[1:])
            assert curve.n_thresholds == len(thr) - 1
        else:
            prec, rec, thr = precision_recall_curve(
                truth, u, sample_weight=case["w"], drop_intermediate=False
            )
            np.testing.assert_allclose(curve.precision, prec, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(curve.recall, rec, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(curve.thresholds, thr)
            w = np.ones(len(u)) if case["w"] is None else case["w"]
            assert curve.prevalence == pytest.approx(np.sum(w * truth) / np.sum(w))


@pytest.mark.parametrize(("seed", "ties", "weighted"), CASES)
def test_areas_are_the_metric_values(seed: int, ties: bool, weighted: bool) -> None:
    case = _case(seed, ties=ties, weighted=weighted)
    report = uqcore.evaluate(
        case["pred"],
        case["y"],
        ["aurc", "augrc", "auroc_ood", "aupr_ood", "auroc_correctness", "aupr_error"],
        sample_weight=case["w"],
        ood=case["ood"],
        curves=True,
    )
    c = report.curves
    assert set(c) == set(NAMES)
    assert c["risk_coverage_curve"].aurc == pytest.approx(report["aurc"], rel=1e-12)
    assert c["risk_coverage_curve"].augrc == pytest.approx(report["augrc"], rel=1e-12)
    assert c["roc_ood"].auroc == pytest.approx(report["auroc_ood"], rel=1e-12)
    assert c["pr_ood"].average_precision == pytest.approx(report["aupr_ood"], rel=1e-12)
    assert c["roc_correctness"].auroc == pytest.approx(report["auroc_correctness"], rel=1e-12)
    assert c["pr_correctness"].average_precision == pytest.approx(report["aupr_error"], rel=1e-12)
    # and the areas of the drawn (exact) curves by their own rule
    roc = c["roc_ood"]
    assert np.trapezoid(roc.tpr, roc.fpr) == pytest.approx(report["auroc_ood"], rel=1e-12)
    pr = c["pr_correctness"]
    ap = -np.sum(np.diff(pr.recall) * np.array(pr.precision[:-1]))
    assert ap == pytest.approx(report["aupr_error"], rel=1e-12)


def _reference_risk_coverage(u: np.ndarray, err: np.ndarray, w: np.ndarray) -> dict[str, Any]:
    """Brute force: accept u <= t for each distinct t of the rows of positive weight."""
    keep = w > 0
    u, err, w = u[keep], err[keep], w[keep]
    cov, risk = [], []
    for t in np.unique(u):
        acc = u <= t
        cov.append(w[acc].sum() / w.sum())
        risk.append((w * err)[acc].sum() / w[acc].sum())
    return {"thresholds": np.unique(u), "coverage": np.array(cov), "risk": np.array(risk)}


def _reference_mean_aurc(u: np.ndarray, err: np.ndarray, w: np.ndarray) -> float:
    """Geifman's mean over k = 1..N of the risk of the k most certain rows, rows repeated by
    their integer weight, a block of ties taken in every order (its errors enter linearly)."""
    total = int(w.sum())
    acc_w, acc_e, out = 0.0, 0.0, 0.0
    for t in np.unique(u[w > 0]):
        blk = (u == t) & (w > 0)
        bw, be = w[blk].sum(), (w * err)[blk].sum()
        for j in range(1, int(bw) + 1):
            out += (acc_e + j * be / bw) / (acc_w + j)
        acc_w += bw
        acc_e += be
    return out / total


@pytest.mark.parametrize(("seed", "ties", "weighted"), CASES)
def test_risk_coverage_against_numpy_reference(seed: int, ties: bool, weighted: bool) -> None:
    case = _case(seed, ties=ties, weighted=weighted)
    u = case["pred"].estimate("one_minus_max_prob_bma")
    err = _errors(case)
    w = np.ones(len(u)) if case["w"] is None else case["w"]
    ref = _reference_risk_coverage(u, err, w)
    curve = cc.risk_coverage_curve(case["pred"], case["y"], sample_weight=case["w"])
    np.testing.assert_array_equal(curve.threshold, ref["thresholds"])
    np.testing.assert_allclose(curve.coverage, ref["coverage"], rtol=1e-12)
    np.testing.assert_allclose(curve.risk, ref["risk"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(curve.accuracy, 1 - ref["risk"], rtol=1e-12)
    np.testing.assert_allclose(
        curve.generalized_risk, ref["risk"] * ref["coverage"], rtol=1e-12, atol=1e-15
    )
    assert curve.coverage[-1] == 1.0
    assert curve.error_rate == pytest.approx(np.sum(w * err) / np.sum(w))
    assert curve.aurc == pytest.approx(_reference_mean_aurc(u, err, w), rel=1e-10)
    # the oracle: every correct row before every error
    oracle_u = err + 0.0
    assert curve.oracle_aurc == pytest.approx(_reference_mean_aurc(oracle_u, err, w), rel=1e-10)
    trap = cc.risk_coverage_curve(
        case["pred"], case["y"], sample_weight=case["w"], convention="trapezoid"
    )
    assert trap.aurc == pytest.approx(np.trapezoid(ref["risk"], ref["coverage"]), rel=1e-12)
    value = uqcore.metric(
        "aurc", case["pred"], case["y"], sample_weight=case["w"], convention="trapezoid"
    )
    assert trap.aurc == pytest.approx(value, rel=1e-12)


def test_thinning_keeps_exact_vertices_and_areas() -> None:
    case = _case(7, n=4000, ties=False)
    full = {
        "risk_coverage_curve": cc.risk_coverage_curve(case["pred"], case["y"], max_points=10**6),
        "roc_ood": cc.roc_ood(case["pred"], case["y"], ood=case["ood"], max_points=10**6),
        "pr_ood": cc.pr_ood(case["pred"], case["y"], ood=case["ood"], max_points=10**6),
    }
    assert full["roc_ood"].n_thresholds == 4000
    thin = {
        "risk_coverage_curve": cc.risk_coverage_curve(case["pred"], case["y"], max_points=60),
        "roc_ood": cc.roc_ood(case["pred"], case["y"], ood=case["ood"], max_points=60),
        "pr_ood": cc.pr_ood(case["pred"], case["y"], ood=case["ood"], max_points=60),
    }
    axes = {
        "risk_coverage_curve": ("coverage", "risk", "threshold"),
        "roc_ood": ("fpr", "tpr", "thresholds"),
        "pr_ood": ("recall", "precision", "thresholds"),
    }
    for name, (xa, ya, ta) in axes.items():
        f, t = full[name], thin[name]
        xs, ys = getattr(t, xa), getattr(t, ya)
        assert 30 <= len(xs) <= 60
        assert (xs[0], ys[0]) == (getattr(f, xa)[0], getattr(f, ya)[0])
        assert (xs[-1], ys[-1]) == (getattr(f, xa)[-1], getattr(f, ya)[-1])
        assert t.n_thresholds == f.n_thresholds
        assert len(getattr(t, ta)) == len(xs) - (0 if name == "risk_coverage_curve" else 1)
        for key in ("aurc", "auroc", "average_precision"):
            if hasattr(f, key):
                assert getattr(t, key) == getattr(f, key)
        # every kept vertex is an exact vertex, still with its own threshold
        if name == "risk_coverage_curve":
            pts = zip(t.threshold, zip(xs, ys, strict=True), strict=True)
        elif name == "roc_ood":
            pts = zip(t.thresholds, zip(xs[1:], ys[1:], strict=True), strict=True)
        else:
            pts = zip(t.thresholds, zip(xs[:-1], ys[:-1], strict=True), strict=True)
        full_map = _vertex_map(name, f)
        for thr, pt in pts:
            assert full_map[thr] == pt


def _vertex_map(name: str, c: Any) -> dict[float, tuple[float, float]]:
    if name == "risk_coverage_curve":
        return dict(zip(c.threshold, zip(c.coverage, c.risk, strict=True), strict=True))
    if name == "roc_ood":
        return dict(zip(c.thresholds, zip(c.fpr[1:], c.tpr[1:], strict=True), strict=True))
    return dict(zip(c.thresholds, zip(c.recall[:-1], c.precision[:-1], strict=True), strict=True))


def test_thin_indices_rule() -> None:
    x = np.linspace(0, 1, 500)
    idx = cc.thin_indices(x, x**2, 20)
    assert idx[0] == 0 and idx[-1] == 499 and len(idx) <= 20
    assert np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(cc.thin_indices(x[:10], x[:10], 20), np.arange(10))
    flat = cc.thin_indices(np.zeros(100), np.zeros(100), 5)
    assert flat[0] == 0 and flat[-1] == 99 and len(flat) <= 5


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip(name: str) -> None:
    case = _case(3, weighted=True)
    curve = curves(case["pred"], case["y"], [name], sample_weight=case["w"], ood=case["ood"])[name]
    doc = json.loads(json.dumps(curve_to_json(curve), allow_nan=False))
    again = curve_from_json(name, doc)
    assert again == curve
    assert isinstance(again, CURVES[name].type)


def test_registration_and_applicability() -> None:
    assert sorted(curve_names("classification")) == sorted(NAMES)
    case = _case(4)
    got = curves(case["pred"], case["y"])  # no ood: the OOD curves are skipped
    assert set(got) == set(NAMES) - {"roc_ood", "pr_ood"}
    diagram = got["reliability_diagram"]
    assert len(diagram.count) == 15 and sum(diagram.count) == 240
    with pytest.raises(UQValidationError, match="roc_ood needs ood"):
        curves(case["pred"], case["y"], ["roc_ood"])


def test_clear_errors() -> None:
    case = _case(5)
    with pytest.raises(UQValidationError, match="roc_ood needs OOD flags"):
        cc.roc_ood(case["pred"], case["y"], ood=None)
    with pytest.raises(UQValidationError, match="max_points must be an integer >= 2"):
        cc.roc_correctness(case["pred"], case["y"], max_points=1)
    with pytest.raises(UQValidationError, match="convention"):
        cc.risk_coverage_curve(case["pred"], case["y"], convention="area")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="mutual_information"):
        cc.pr_correctness(case["pred"], case["y"], estimator="mutual_information")
    reg = P.Gaussian(np.zeros(4), np.ones(4))
    with pytest.raises(UQValidationError, match="needs a classification prediction"):
        cc.risk_coverage_curve(reg, np.zeros(4))


def test_undefined_areas_are_none() -> None:
    p = P.Probs(np.array([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4]]))
    y = np.array([0, 0, 0])  # every prediction right: no error to find
    roc = cc.roc_correctness(p, y)
    pr = cc.pr_correctness(p, y)
    assert roc.auroc is None and pr.average_precision is None
    assert pr.recall[:-1] == (1.0, 1.0, 1.0)  # scikit-learn's convention without positives
    rc = cc.risk_coverage_curve(p, y)
    assert rc.aurc == 0.0 and rc.risk == (0.0, 0.0, 0.0)
