"""Classification metrics against plain float64 references (and scikit-learn / scipy)."""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from tests.factories import make_classification
from uqcore import UndefinedMetricWarning, evaluate, metric
from uqcore import predictions as P
from uqcore.classification import reliability_diagram


def _probs(seed: int, n: int, c: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if ties:
        p = rng.choice([1.0, 2.0, 4.0], size=(n, c))
    else:
        p = np.exp(rng.normal(scale=1.5, size=(n, c)))
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, c, size=n)
    return p, y


# -- quality -----------------------------------------------------------------------------------
@pytest.mark.parametrize("c", [2, 6])
def test_quality_metrics_match_formulas(c: int) -> None:
    p, y = _probs(1, 60, c)
    w = np.random.default_rng(2).uniform(0.2, 2.0, size=60)
    pred = P.Probs(p)
    acc = sum(wi * (int(np.argmax(pi)) == yi) for pi, yi, wi in zip(p, y, w, strict=True)) / w.sum()
    nll = sum(-wi * math.log(pi[yi]) for pi, yi, wi in zip(p, y, w, strict=True)) / w.sum()
    brier = (
        sum(
            wi * sum((pi[k] - (k == yi)) ** 2 for k in range(c))
            for pi, yi, wi in zip(p, y, w, strict=True)
        )
        / w.sum()
    )
    assert metric("accuracy", pred, y, sample_weight=w) == pytest.approx(acc, rel=1e-12)
    assert metric("nll", pred, y, sample_weight=w) == pytest.approx(nll, rel=1e-12)
    assert metric("brier", pred, y, sample_weight=w) == pytest.approx(brier, rel=1e-12)


def test_top5_accuracy_and_its_undefined_case() -> None:
    p, y = _probs(3, 80, 8)
    ref = np.mean([yi in np.argsort(-pi)[:5] for pi, yi in zip(p, y, strict=True)])
    assert metric("top5_accuracy", P.Probs(p), y) == pytest.approx(ref, rel=1e-12)
    assert metric("top5_accuracy", P.Probs(p), y, k=1) == metric("accuracy", P.Probs(p), y)
    p2, y2 = _probs(3, 10, 3)
    with pytest.warns(UndefinedMetricWarning, match="at least k = 5 classes"):
        assert metric("top5_accuracy", P.Probs(p2), y2) is None


def test_nll_with_a_zero_probability_label_is_null_with_warning() -> None:
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    with pytest.warns(UndefinedMetricWarning, match="row 0 has probability 0"):
        assert metric("nll", P.Probs(p), [1, 0]) is None
    # ... but not when that row has zero weight
    assert metric("nll", P.Probs(p), [1, 0], sample_weight=[0.0, 1.0]) == pytest.approx(math.log(2))


# -- calibration -------------------------------------------------------------------------------
def _ref_bins_width(conf: np.ndarray, n_bins: int) -> list[int]:
    out = []
    for s in conf:
        b = 0
        for k in range(n_bins):
            if k / n_bins < s <= (k + 1) / n_bins:
                b = k
        out.append(b)
    return out


def _ref_ece(conf, correct, w, bins, n_bins, how="ece"):
    gaps, shares = [], []
    for b in range(n_bins):
        sel = [i for i in range(len(conf)) if bins[i] == b and w[i] > 0]
        if not sel:
            continue
        wb = sum(w[i] for i in sel)
        acc = sum(w[i] * correct[i] for i in sel) / wb
        cb = sum(w[i] * conf[i] for i in sel) / wb
        gaps.append(acc - cb)
        shares.append(wb / sum(w))
    if how == "ece":
        return sum(s * abs(g) for s, g in zip(shares, gaps, strict=True))
    return max(abs(g) for g in gaps)


@pytest.mark.parametrize("ties", [False, True])
def test_ece_mce_and_adaptive_match_plain_references(ties: bool) -> None:
    p, y = _probs(4, 90, 4, ties)
    w = np.random.default_rng(5).integers(1, 4, size=90).astype(float)
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(float)
    pred = P.Probs(p)
    bins = _ref_bins_width(conf, 15)
    assert metric("ece", pred, y, sample_weight=w) == pytest.approx(
        _ref_ece(conf, correct, w, bins, 15), rel=1e-12
    )
    assert metric("mce", pred, y, sample_weight=w) == pytest.approx(
        _ref_ece(conf, correct, w, bins, 15, "mce"), rel=1e-12
    )
    # equal-mass: ⌊B · W(< s) / W⌋ with ties together
    mass = [min(14, math.floor(15 * w[conf < s].sum() / w.sum() + 1e-9)) for s in conf]
    assert metric("ece_adaptive", pred, y, sample_weight=w) == pytest.approx(
        _ref_ece(conf, correct, w, mass, 15), rel=1e-12
    )
    assert metric("ece", pred, y, binning="mass", sample_weight=w) == metric(
        "ece_adaptive", pred, y, sample_weight=w
    )
    if not ties:  # equal-mass bins are equally filled up to one row
        counts = np.bincount(
            [min(14, math.floor(15 * np.sum(conf < s) / 90 + 1e-9)) for s in conf], minlength=15
        )
        assert counts.max() - counts.min() <= 1


def test_bin_edges_are_right_closed() -> None:
    # confidences exactly on edges 0.6 and 0.8 with 5 bins: (0.4, 0.6] and (0.6, 0.8]
    p = np.array([[0.6, 0.4], [0.8, 0.2]])
    d = reliability_diagram(P.Probs(p), [0, 1], n_bins=5)
    assert d.count == (0, 0, 1, 1, 0)
    assert d.lower == (0.0, 0.2, 0.4, 0.6, 0.8)
    assert d.confidence[2] == pytest.approx(0.6)
    assert d.accuracy[3] == 0.0


def test_classwise_ece_matches_reference() -> None:
    p, y = _probs(6, 70, 5)
    w = np.random.default_rng(7).uniform(0.5, 2.0, size=70)
    total = 0.0
    for k in range(5):
        pk = p[:, k]
        bins = _ref_bins_width(pk, 15)
        total += _ref_ece(pk, (y == k).astype(float), w, bins, 15)
    assert metric("ece_classwise", P.Probs(p), y, sample_weight=w) == pytest.approx(
        total / 5, rel=1e-12
    )


@pytest.mark.parametrize("n_bins", [1, 4, 15])
def test_classwise_ece_with_many_classes_matches_reference(n_bins: int) -> None:
    """Most probabilities below the first edge 1/B (the bulk path), some exactly on edges."""
    rng = np.random.default_rng(11)
    n, c = 60, 40
    p = rng.dirichlet(np.full(c, 0.1), size=n)
    p[0] = 0.0
    p[0, :n_bins] = 1.0 / n_bins  # exactly on the first edge (and every edge after it)
    p[1] = 0.0
    p[1, 0] = 1.0
    y = rng.integers(0, c, size=n)
    y[:3] = 0
    w = rng.uniform(0.5, 2.0, size=n)
    w[5] = 0.0
    total = 0.0
    for k in range(c):
        pk = p[:, k]
        total += _ref_ece(pk, (y == k).astype(float), w, _ref_bins_width(pk, n_bins), n_bins)
    got = metric("ece_classwise", P.Probs(p), y, sample_weight=w, n_bins=n_bins)
    assert got == pytest.approx(total / c, rel=1e-12)


def test_ece_l2_plugin_and_debiased() -> None:
    p, y = _probs(8, 200, 3)
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(float)
    bins = np.asarray(_ref_bins_width(conf, 15))
    plug = deb = 0.0
    for b in range(15):
        sel = bins == b
        nb = sel.sum()
        if nb == 0:
            continue
        acc, cb = correct[sel].mean(), conf[sel].mean()
        plug += nb / 200 * (acc - cb) ** 2
        deb += nb / 200 * ((acc - cb) ** 2 - (acc * (1 - acc) / (nb - 1) if nb > 1 else 0.0))
    pred = P.Probs(p)
    assert metric("ece_l2", pred, y, debias=False) == pytest.approx(math.sqrt(plug), rel=1e-12)
    assert metric("ece_l2", pred, y) == pytest.approx(math.sqrt(max(deb, 0.0)), rel=1e-12)


def test_perfectly_calibrated_bins_give_zero_ece() -> None:
    # confidence 0.75 in every row and 3 of 4 correct
    p = np.array([[0.75, 0.25]] * 4)
    assert metric("ece", P.Probs(p), [0, 0, 0, 1]) == pytest.approx(0.0, abs=1e-15)


# -- correctness and OOD (AUROC, AUPR) ---------------------------------------------------------
def _ref_auroc(score, pos, w):
    num = den = 0.0
    for i in range(len(score)):
        for j in range(len(score)):
            if pos[i] and not pos[j]:
                pair = w[i] * w[j]
                den += pair
                num += pair * (1.0 if score[i] > score[j] else 0.5 if score[i] == score[j] else 0)
    return num / den


@pytest.mark.parametrize("ties", [False, True])
def test_auroc_correctness_matches_pairs_and_sklearn(ties: bool) -> None:
    pred, y, _ = make_classification("ensemble", 80, seed=9, ties=ties)
    w = np.random.default_rng(10).integers(1, 4, size=80).astype(float)
    u = pred.estimate("one_minus_max_prob_bma")
    err = pred.probs().argmax(axis=1) != y
    got = metric("auroc_correctness", pred, y, sample_weight=w)
    assert got == pytest.approx(_ref_auroc(u, err, w), rel=1e-12)
    assert got == pytest.approx(roc_auc_score(err, u, sample_weight=w), rel=1e-12)
    ap = metric("aupr_error", pred, y, estimator="score", sample_weight=w)
    assert ap == pytest.approx(
        average_precision_score(err, pred.estimate("score"), sample_weight=w), rel=1e-12
    )


def test_ood_metrics_match_sklearn() -> None:
    pred, y, t = make_classification("dirichlet", 120, seed=11, ties=True)
    w = np.random.default_rng(12).uniform(0.1, 2.0, size=120)
    for est in ("mutual_information", "score", "dempster_shafer"):
        u = pred.estimate(est)
        kw = {"ood": t["ood"], "estimator": est, "sample_weight": w}
        assert metric("auroc_ood", pred, y, **kw) == pytest.approx(
            roc_auc_score(t["ood"], u, sample_weight=w), rel=1e-12
        )
        assert metric("aupr_ood", pred, y, **kw) == pytest.approx(
            average_precision_score(t["ood"], u, sample_weight=w), rel=1e-12
        )
        fpr, tpr, _ = roc_curve(t["ood"], u, sample_weight=w, drop_intermediate=False)
        ref = fpr[np.argmax(tpr >= 0.95 - 1e-12)]
        assert metric("fpr_at_95tpr", pred, y, **kw) == pytest.approx(ref, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    "name", ["auroc_correctness", "auroc_ood", "aupr_ood", "fpr_at_95tpr", "raulc"]
)
def test_one_class_inputs_give_null_with_warning(name: str) -> None:
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
    y = np.array([0, 0, 1])  # all correct
    kw = {"ood": np.zeros(3, dtype=bool)} if "ood" in name or "fpr" in name else {}
    with pytest.warns(UndefinedMetricWarning):
        assert metric(name, P.Probs(p), y, **kw) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(P.Probs(p), y, metrics=[name], ood=np.zeros(3, dtype=bool))
    doc = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert doc["values"][name] is None
    assert any(name in m for m in doc["warnings"])


# -- selective prediction ----------------------------------------------------------------------
def _orders(u: np.ndarray) -> list[list[int]]:
    """Every ascending order of u that differs only within ties."""
    groups = [list(np.flatnonzero(u == v)) for v in np.unique(u)]
    out = []
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        out.append([i for g in combo for i in g])
    return out


def _ref_aurc_mean(u: np.ndarray, err: np.ndarray) -> float:
    vals = []
    for order in _orders(u):
        e = err[order]
        vals.append(np.mean([e[:k].sum() / k for k in range(1, len(u) + 1)]))
    return float(np.mean(vals))


def _selective_case() -> tuple[P.Probs, np.ndarray, np.ndarray, np.ndarray]:
    p = np.array(
        [[0.9, 0.1], [0.8, 0.2], [0.8, 0.2], [0.6, 0.4], [0.6, 0.4], [0.6, 0.4], [0.55, 0.45]]
    )
    y = np.array([0, 1, 0, 1, 0, 0, 1])
    u = 1 - p.max(axis=1)
    err = (p.argmax(axis=1) != y).astype(float)
    return P.Probs(p), y, u, err


def test_aurc_mean_convention_averages_over_tie_orders() -> None:
    pred, y, u, err = _selective_case()
    ref = _ref_aurc_mean(u, err)
    assert metric("aurc", pred, y) == pytest.approx(ref, rel=1e-12)
    assert metric("auac", pred, y) == pytest.approx(1 - ref, rel=1e-12)
    oracle = _ref_aurc_mean(err, err)
    assert metric("eaurc", pred, y) == pytest.approx(ref - oracle, rel=1e-12)
    acc = 1 - err.mean()
    assert metric("raulc", pred, y) == pytest.approx(
        ((1 - ref) - acc) / ((1 - oracle) - acc), rel=1e-12
    )
    # integer weights equal repeated rows, also through the digamma form
    w = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 2.0])
    idx = np.repeat(np.arange(7), w.astype(int))
    assert metric("aurc", pred, y, sample_weight=w) == pytest.approx(
        _ref_aurc_mean(u[idx], err[idx]), rel=1e-12
    )


def test_aurc_trapezoid_and_augrc_match_plain_curves() -> None:
    pred, y, u, err = _selective_case()
    cov, risk, gen = [], [], []
    for t in np.unique(u):
        sel = u <= t
        cov.append(sel.mean())
        risk.append(err[sel].mean())
        gen.append(err[sel].sum() / len(u))
    trap = sum((cov[i] - cov[i - 1]) * (risk[i] + risk[i - 1]) / 2 for i in range(1, len(cov)))
    assert metric("aurc", pred, y, convention="trapezoid") == pytest.approx(trap, rel=1e-12)
    c0, g0 = [0.0, *cov], [0.0, *gen]
    augrc = sum((c0[i] - c0[i - 1]) * (g0[i] + g0[i - 1]) / 2 for i in range(1, len(c0)))
    assert metric("augrc", pred, y) == pytest.approx(augrc, rel=1e-12)
    # AUGRC is the tie-averaged mean of the generalized risk over a continuum of coverages:
    # it equals the mean over random tie orders of the exact step-free integral
    assert 0.0 <= augrc <= err.mean() / 2 + 1e-15 or augrc <= err.mean()


def test_coverage_at_accuracy_and_risk_at_coverage() -> None:
    pred, y, _, err = _selective_case()
    # thresholds: u = 0.1 (1 row, acc 1), 0.2 (3 rows, acc 2/3), 0.4 (6 rows, 4/6), 0.45 (7, 4/7)
    assert metric("coverage_at_accuracy", pred, y) == pytest.approx(1 / 7)
    assert metric("coverage_at_accuracy", pred, y, target_accuracy=0.6) == pytest.approx(6 / 7)
    never = P.Probs(np.array([[0.6, 0.4], [0.7, 0.3]]))
    assert metric("coverage_at_accuracy", never, [1, 1]) == 0.0
    # coverage 2/7: the 0.2-block (2 rows, 1 error) is half accepted -> 0.5 expected errors
    got = metric("risk_at_coverage", pred, y, coverage=2 / 7)
    assert got == pytest.approx(0.5 / 2, rel=1e-12)
    gen = metric("risk_at_coverage", pred, y, coverage=2 / 7, risk="generalized")
    assert gen == pytest.approx(0.5 / 7, rel=1e-12)
    assert metric("risk_at_coverage", pred, y, coverage=1.0) == pytest.approx(err.mean())


# -- aleatoric and disentanglement -------------------------------------------------------------
def test_rank_correlations_match_scipy_with_ties() -> None:
    pred, y, t = make_classification("ensemble", 90, seed=13, ties=True)
    soft = t["soft_labels"]
    gt = -np.sum(np.where(soft > 0, soft * np.log(np.where(soft > 0, soft, 1)), 0), axis=1)
    for est in ("score", "expected_entropy", "one_minus_max_prob_bma"):
        u = pred.estimate(est)
        got = metric("aleatoric_rank_corr", pred, y, soft_labels=soft, estimator=est)
        assert got == pytest.approx(scipy.stats.spearmanr(u, gt).statistic, rel=1e-12)
        auc = metric("auroc_aleatoric", pred, y, soft_labels=soft, estimator=est)
        assert auc == pytest.approx(roc_auc_score(gt > 0, u), rel=1e-12)
    ale, epi = pred.estimate("expected_entropy"), pred.estimate("mutual_information")
    assert metric("disentanglement_rank_corr", pred, y) == pytest.approx(
        scipy.stats.spearmanr(ale, epi).statistic, rel=1e-12
    )


def test_rank_corr_matrix_is_the_pairwise_spearman() -> None:
    from uqcore.classification import rank_corr_matrix

    pred, _, _ = make_classification("ensemble", 50, seed=14)
    names = ["entropy_bma", "mutual_information", "score"]
    m = rank_corr_matrix(pred, names)
    assert m.names == tuple(names)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            ref = scipy.stats.spearmanr(pred.estimate(a), pred.estimate(b)).statistic
            assert m.matrix[i][j] == pytest.approx(ref, rel=1e-12)
    full = rank_corr_matrix(pred)
    assert full.names == tuple(pred.estimator_names())


def test_ensemble_of_one_has_undefined_disentanglement() -> None:
    p, y = _probs(15, 20, 3)
    with pytest.warns(UndefinedMetricWarning, match="constant"):
        assert metric("disentanglement_rank_corr", P.Ensemble(member_probs=p[None]), y) is None


# -- best values ---------------------------------------------------------------------------------
def test_oracle_inputs_get_the_best_values() -> None:
    from uqcore import registry

    rng = np.random.default_rng(16)
    n, c = 40, 4
    y = rng.integers(0, c, size=n)
    perfect = P.Probs(np.eye(c)[y])
    for name in ("accuracy", "nll", "brier", "ece", "mce", "ece_adaptive", "ece_classwise"):
        spec = registry.get(name, "classification")
        assert metric(name, perfect, y) == pytest.approx(spec.best, abs=1e-15), name
    for name in ("aurc", "eaurc", "augrc", "risk_at_coverage"):
        assert metric(name, perfect, y) == pytest.approx(0.0, abs=1e-15), name
    assert metric("coverage_at_accuracy", perfect, y, target_accuracy=0.99) == 1.0
    # an oracle estimator: higher on exactly the wrong predictions / the OOD rows
    p, y2 = _probs(17, n, c)
    wrong = (p.argmax(axis=1) != y2).astype(float)
    is_ood = rng.random(n) < 0.5
    pred = P.Probs(p, estimates={"oracle": wrong, "ood_oracle": is_ood.astype(float)})
    best = {"auroc_correctness": 1.0, "aupr_error": 1.0, "eaurc": 0.0, "raulc": 1.0}
    for name, value in best.items():
        assert metric(name, pred, y2, estimator="oracle") == pytest.approx(value, abs=1e-12)
    kw = {"ood": is_ood, "estimator": "ood_oracle"}
    assert metric("auroc_ood", pred, y2, **kw) == 1.0
    assert metric("aupr_ood", pred, y2, **kw) == 1.0
    assert metric("fpr_at_95tpr", pred, y2, **kw) == 0.0
