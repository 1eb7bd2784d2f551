"""CORP and Murphy (1973) Brier decompositions of classification probabilities against
brute-force references written here and model-diagnostics' ``decompose``."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.classification.corp import (
    brier_reliability,
    brier_resolution,
    brier_uncertainty,
    corp_dsc,
    corp_mcb,
    corp_unc,
)


def _isotonic_minmax(x: np.ndarray, o: np.ndarray, w: np.ndarray) -> np.ndarray:
    ux = np.unique(x)
    g = np.searchsorted(ux, x)
    sw = np.bincount(g, weights=w)
    so = np.bincount(g, weights=w * o)
    m = ux.size
    fit = np.array(
        [
            max(
                min(so[j : k + 1].sum() / sw[j : k + 1].sum() for k in range(i, m))
                for j in range(i + 1)
            )
            for i in range(m)
        ]
    )
    return fit[g]


def _probs(n: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=1.5, size=(n, c))
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    p = np.round(p, 2)  # ties among the confidences
    p[:, -1] = 1.0 - p[:, :-1].sum(axis=1)
    p = np.clip(p, 0, 1)
    p /= p.sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(c, p=row) for row in p])
    return p, labels


@pytest.mark.parametrize(("target", "c"), [("top_label", 4), ("binary", 2)])
@pytest.mark.parametrize("weighted", [False, True])
def test_corp_against_the_min_max_isotonic_fit(target: str, c: int, weighted: bool) -> None:
    p, labels = _probs(80, c, 1)
    w = np.random.default_rng(2).uniform(0.2, 2.0, 80) if weighted else np.ones(80)
    if target == "binary":
        x, o = p[:, 1], (labels == 1).astype(float)
    else:
        x, o = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    xhat = _isotonic_minmax(x, o, w)
    total = w.sum()
    obar = np.sum(w * o) / total
    b_x = np.sum(w * (x - o) ** 2) / total
    b_hat = np.sum(w * (xhat - o) ** 2) / total
    sw = w if weighted else None
    d = corp_mcb(P.Probs(p), labels, sample_weight=sw, target=target)
    assert d["score"] == pytest.approx(b_x, rel=1e-12)
    assert d["value"] == pytest.approx(b_x - b_hat, rel=1e-10, abs=1e-14)
    assert corp_dsc(P.Probs(p), labels, sample_weight=sw, target=target)["value"] == pytest.approx(
        obar * (1 - obar) - b_hat, rel=1e-10, abs=1e-14
    )
    assert corp_unc(P.Probs(p), labels, sample_weight=sw, target=target)["value"] == pytest.approx(
        obar * (1 - obar), rel=1e-12
    )
    assert abs(d["mcb"] - d["dsc"] + d["unc"] - d["score"]) <= 1e-12


def _brute_corp(x: np.ndarray, o: np.ndarray, w: np.ndarray) -> tuple[float, ...]:
    keep = w > 0
    x, o, w = x[keep], o[keep], w[keep]
    xhat = _isotonic_minmax(x, o, w)
    total = w.sum()
    obar = np.sum(w * o) / total
    b_x, b_hat = np.sum(w * (x - o) ** 2) / total, np.sum(w * (xhat - o) ** 2) / total
    return b_x, b_x - b_hat, obar * (1 - obar) - b_hat, obar * (1 - obar)


@pytest.mark.parametrize(
    "case", ["plain", "ties", "zero_weights", "one_row", "constant", "negative_zero", "all_events"]
)
@pytest.mark.parametrize("weighted", [False, True])
def test_event_fit_against_the_min_max_fit(case: str, weighted: bool) -> None:
    """The 0/1 path (a sort of packed keys unweighted, tied forecasts merged by counts)
    against the min-max formula of the isotonic fit, row by row."""
    from uqcore._isotonic import corp_events

    rng = np.random.default_rng(11)
    n = 1 if case == "one_row" else 60
    x = rng.uniform(0, 1, n)
    if case in ("ties", "zero_weights"):
        x = np.round(x, 1)
    if case == "constant":
        x = np.full(n, 0.3)
    if case == "negative_zero":
        x[: n // 3] = -0.0
        x[n // 3 : n // 2] = 0.0
    o = rng.random(n) < x
    if case == "all_events":
        o[:] = True
    w = rng.uniform(0.2, 2.0, n) if weighted else np.ones(n)
    if case == "zero_weights" and weighted:
        w[::4] = 0.0
    got = corp_events(x, o, w if weighted else None)
    want = _brute_corp(x, o.astype(float), w)
    for mine, theirs in zip((got.score, got.mcb, got.dsc, got.unc), want, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    # the steps: the fit at each distinct forecast, of their total weight
    keep = w > 0
    ux = np.unique(x[keep] + 0.0)
    np.testing.assert_array_equal(got.x, ux)
    fit = _isotonic_minmax(x[keep], o[keep].astype(float), w[keep])
    np.testing.assert_allclose(got.fitted, [fit[x[keep] == v][0] for v in ux], rtol=1e-12)
    np.testing.assert_allclose(got.weight, [w[keep][x[keep] == v].sum() for v in ux], rtol=1e-12)


def test_top_label_of_two_classes_takes_the_first_of_tied_maxima() -> None:
    """The two-column shortcut of the top label (a comparison, not an argmax) agrees with
    argmax's first-maximum rule, ties of p0 = p1 included."""
    rng = np.random.default_rng(12)
    p1 = np.round(rng.uniform(0, 1, 50), 1)
    p = np.stack([1 - p1, p1], axis=1)
    labels = rng.integers(0, 2, 50)
    x, o = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    want = _brute_corp(x, o, np.ones(50))
    d = corp_mcb(P.Probs(p), labels)
    assert (d["score"], d["mcb"], d["dsc"], d["unc"]) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_corp_agrees_with_model_diagnostics() -> None:
    md = pytest.importorskip("model_diagnostics.scoring")
    p, labels = _probs(300, 3, 3)
    w = np.random.default_rng(4).uniform(0.2, 2.0, 300)
    x, o = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    ref = md.decompose(o, x, w, scoring_function=md.SquaredError())
    d = corp_mcb(P.Probs(p), labels, sample_weight=w)
    for mine, theirs in (
        ("mcb", "miscalibration"),
        ("dsc", "discrimination"),
        ("unc", "uncertainty"),
    ):
        assert d[mine] == pytest.approx(ref[theirs][0], rel=1e-10)


def test_binary_target_needs_two_classes() -> None:
    from uqcore.registry import UndefinedMetricWarning
    from uqcore.score_curves import corp_reliability

    p, labels = _probs(20, 3, 5)
    with pytest.warns(UndefinedMetricWarning, match="2 classes"):
        assert corp_mcb(P.Probs(p), labels, target="binary") is None
    with pytest.warns(UndefinedMetricWarning, match="2 classes"):
        assert brier_resolution(P.Probs(p), labels, target="binary") is None
    with pytest.raises(UQValidationError, match="2 classes"):
        corp_reliability(P.Probs(p), labels, functional="binary")


@pytest.mark.parametrize("weighted", [False, True])
def test_murphy_terms_against_loops_over_the_bins(weighted: bool) -> None:
    p, labels = _probs(150, 2, 6)
    p[:8, 1] = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0]  # on the edges
    p[:8, 0] = 1.0 - p[:8, 1]
    w = np.random.default_rng(7).uniform(0.2, 2.0, 150) if weighted else np.ones(150)
    x, o = p[:, 1], (labels == 1).astype(float)
    n_bins = 10
    total = w.sum()
    obar = np.sum(w * o) / total
    rel = res = wbv = wbc = 0.0
    edges = np.linspace(0, 1, n_bins + 1)
    for k in range(n_bins):
        lo, hi = edges[k], edges[k + 1]
        inside = (x > lo) & (x <= hi) if k else (x >= lo) & (x <= hi)
        if not inside.any():
            continue
        wk = w[inside].sum()
        xb = np.sum(w[inside] * x[inside]) / wk
        ob = np.sum(w[inside] * o[inside]) / wk
        rel += wk * (xb - ob) ** 2
        res += wk * (ob - obar) ** 2
        wbv += np.sum(w[inside] * (x[inside] - xb) ** 2)
        wbc += -2 * np.sum(w[inside] * (x[inside] - xb) * (o[inside] - ob))
    sw = w if weighted else None
    d = brier_reliability(P.Probs(p), labels, sample_weight=sw, target="binary", n_bins=n_bins)
    assert d["value"] == pytest.approx(rel / total, rel=1e-10)
    assert d["resolution"] == pytest.approx(res / total, rel=1e-10)
    assert d["within_bin_variance"] == pytest.approx(wbv / total, rel=1e-10)
    assert d["within_bin_covariance"] == pytest.approx(wbc / total, rel=1e-10, abs=1e-15)
    brier = np.sum(w * (x - o) ** 2) / total
    parts = d["reliability"] - d["resolution"] + d["uncertainty"]
    assert d["score"] == pytest.approx(brier, rel=1e-12)
    assert abs(parts + d["within_bin_variance"] + d["within_bin_covariance"] - brier) <= 1e-12
    assert abs(parts - brier) > 1e-6  # without the within-bin terms it is not the score
    r = brier_resolution(P.Probs(p), labels, sample_weight=sw, target="binary", n_bins=n_bins)
    u = brier_uncertainty(P.Probs(p), labels, sample_weight=sw, target="binary", n_bins=n_bins)
    assert r["value"] == d["resolution"] and u["value"] == pytest.approx(obar * (1 - obar))


def test_bootstrap_of_the_classification_decompositions() -> None:
    from uqcore.stability import bootstrap
    from uqcore.stability.weights import Resampler, counts_to_indices

    p, labels = _probs(60, 3, 8)
    r = bootstrap(
        P.Probs(p),
        labels,
        ["corp_mcb", "brier_reliability"],
        n_resamples=20,
        seed=2,
        keep_values=True,
    )
    resampler = Resampler(60)
    for i in range(20):
        idx = counts_to_indices(resampler.counts(2, i))
        ref = corp_mcb(P.Probs(p[idx]), labels[idx])["value"]
        assert r["corp_mcb"]["values"][i] == pytest.approx(ref, rel=1e-9, abs=1e-12)
        ref = brier_reliability(P.Probs(p[idx]), labels[idx])["value"]
        assert r["brier_reliability"]["values"][i] == pytest.approx(ref, rel=1e-9, abs=1e-12)
