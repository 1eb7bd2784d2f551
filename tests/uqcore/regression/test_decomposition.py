"""CORP and WIS decompositions against independent references: a brute-force isotonic fit
written here, model-diagnostics' ``decompose``, scoringrules' ``weighted_interval_score`` and
the formulas of the papers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore import registry
from uqcore._isotonic import corp, pinball
from uqcore._validation import UQValidationError
from uqcore.regression.decomposition import HUB_COVERAGES, corp_dsc, corp_mcb, corp_unc, wis


def _minmax_isotonic_mean(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """O(m²) min-max formula of the isotonic (mean) regression on the distinct x:
    x̂_i = max_{j <= i} min_{k >= i} (weighted mean of the outcomes of groups j..k)."""
    ux = np.unique(x)
    g = np.searchsorted(ux, x)
    sw = np.array([w[g == i].sum() for i in range(ux.size)])
    swy = np.array([(w * y)[g == i].sum() for i in range(ux.size)])
    m = ux.size
    fit = np.empty(m)
    for i in range(m):
        fit[i] = max(
            min(swy[j : k + 1].sum() / sw[j : k + 1].sum() for k in range(i, m))
            for j in range(i + 1)
        )
    return fit[g]


def _brute_quantile_loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, a: float) -> float:
    """The least mean pinball loss over all non-decreasing functions of x (values among y)."""
    ux = np.unique(x)
    best = np.inf
    for comb in itertools.combinations_with_replacement(np.unique(y), ux.size):
        f = np.asarray(comb)[np.searchsorted(ux, x)]
        best = min(best, float(np.sum(w * pinball(y, f, a)) / w.sum()))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_mean_fit_is_the_min_max_isotonic_regression(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    x = rng.choice(np.linspace(-1, 1, 7), size=n)
    y = x + rng.normal(size=n)
    w = rng.uniform(0.1, 3.0, size=n)
    w[rng.random(n) < 0.2] = 0.0
    w[0] = 1.0
    d = corp(x, y, w)
    keep = w > 0
    xhat = _minmax_isotonic_mean(x[keep], y[keep], w[keep])
    total = w.sum()
    s_x = np.sum(w * (y - x) ** 2) / total
    s_hat = np.sum(w[keep] * (y[keep] - xhat) ** 2) / total
    ybar = np.sum(w * y) / total
    s_ref = np.sum(w * (y - ybar) ** 2) / total
    assert d.score == pytest.approx(s_x, rel=1e-12)
    assert d.mcb == pytest.approx(s_x - s_hat, rel=1e-10, abs=1e-12)
    assert d.dsc == pytest.approx(s_ref - s_hat, rel=1e-10, abs=1e-12)
    assert d.unc == pytest.approx(s_ref, rel=1e-12)
    assert abs(d.mcb - d.dsc + d.unc - d.score) <= 1e-12
    assert np.all(np.diff(d.fitted) >= 0) and np.array_equal(d.x, np.unique(x[keep]))


@pytest.mark.parametrize("seed", range(40))
def test_quantile_fit_attains_the_least_isotonic_pinball_loss(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 9))
    x = rng.choice([0.0, 1.0, 2.0, 3.0], size=n)
    y = rng.choice([-1.0, 0.0, 0.5, 2.0, 3.0], size=n)
    w = rng.integers(1, 4, size=n).astype(float)
    a = float(rng.choice([0.1, 0.25, 0.5, 0.8]))
    d = corp(x, y, w, functional="quantile", level=a)
    best = _brute_quantile_loss(x, y, w, a)
    assert d.score - d.mcb == pytest.approx(best, abs=1e-12)
    assert abs(d.mcb - d.dsc + d.unc - d.score) <= 1e-12
    assert np.all(np.diff(d.fitted) >= 0)
    # the climatology is the lower weighted α-quantile (every minimiser has its loss)
    ys = np.sort(np.repeat(y, w.astype(int)))
    lower = ys[int(np.ceil(a * ys.size)) - 1]
    assert d.reference == lower
    assert d.unc == pytest.approx(np.sum(w * pinball(y, np.full(n, lower), a)) / w.sum())


@pytest.mark.parametrize(("functional", "weighted"), [("mean", True), ("quantile", False)])
def test_agrees_with_model_diagnostics_decompose(functional: str, weighted: bool) -> None:
    md = pytest.importorskip("model_diagnostics.scoring")
    rng = np.random.default_rng(7)
    n = 400
    mu = rng.normal(size=n)
    y = 0.7 * mu + rng.normal(size=n) + 0.2
    w = rng.uniform(0.2, 2.0, size=n) if weighted else None
    pred = P.Gaussian(mu, np.full(n, 1.3))
    level = 0.3
    x = mu if functional == "mean" else np.asarray(pred.ppf([level]))[:, 0]
    if functional == "mean":
        ref = md.decompose(y, x, w, scoring_function=md.SquaredError())
    else:
        ref = md.decompose(
            y,
            x,
            w,
            scoring_function=md.PinballLoss(level=level),
            functional="quantile",
            level=level,
        )
    got = corp_mcb(pred, y, sample_weight=w, functional=functional, level=level)
    assert got["mcb"] == pytest.approx(ref["miscalibration"][0], rel=1e-10)
    assert got["dsc"] == pytest.approx(ref["discrimination"][0], rel=1e-10)
    assert got["unc"] == pytest.approx(ref["uncertainty"][0], rel=1e-10)
    assert got["score"] == pytest.approx(ref["score"][0], rel=1e-10)


def test_the_three_components_share_one_fit_and_the_identity_holds() -> None:
    from uqcore.batch import Batch

    rng = np.random.default_rng(3)
    n = 300
    mu = rng.normal(size=n)
    pred = P.Gaussian(mu, np.ones(n))
    y = mu + rng.normal(size=n)
    batch = Batch(pred, y, rng.uniform(0.5, 2.0, n))
    vals = [registry.call(registry.get(m), batch) for m in ("corp_mcb", "corp_dsc", "corp_unc")]
    assert [k for k in batch._own if k.startswith("corp:")] == ["corp:mean:0.5"]
    mcb, dsc, unc = (v["value"] for v in vals)
    assert abs(mcb - dsc + unc - vals[0]["score"]) <= 1e-12


def test_quantile_functional_is_undefined_without_quantiles() -> None:
    pred = P.PointUncertainty(np.zeros(5), np.ones(5))
    with pytest.warns(registry.UndefinedMetricWarning, match="quantiles"):
        assert corp_dsc(pred, np.arange(5.0), functional="quantile") is None
    assert corp_unc(pred, np.arange(5.0))["value"] == pytest.approx(2.0)
    assert registry.get("corp_mcb").why_not(P.Interval(np.zeros(2), np.ones(2))) is not None


# -- WIS ---------------------------------------------------------------------------------------
def _wis_formula(y, m, lo, up, alphas):
    k = len(alphas)
    total = 0.5 * np.abs(y - m)
    for j, a in enumerate(alphas):
        l_, u_ = lo[:, j], up[:, j]
        total = total + a / 2 * (
            (u_ - l_) + 2 / a * np.clip(l_ - y, 0, None) + 2 / a * np.clip(y - u_, 0, None)
        )
    return total / (k + 0.5)


@pytest.mark.parametrize("weighted", [False, True])
def test_wis_of_a_gaussian_against_scoringrules_and_the_formula(weighted: bool) -> None:
    # imported here: scoringrules compiles its numba functions at import (seconds), which
    # only the test processes that run this test should pay
    import scoringrules as sr
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    n = 200
    mu, sd = rng.normal(size=n), rng.uniform(0.3, 2.0, n)
    y = mu + sd * rng.standard_t(4, size=n)
    w = rng.uniform(0.1, 2.0, n) if weighted else np.ones(n)
    alphas = np.sort(1.0 - np.asarray(HUB_COVERAGES))
    lo = norm.ppf(alphas / 2)[None, :] * sd[:, None] + mu[:, None]
    up = norm.ppf(1 - alphas / 2)[None, :] * sd[:, None] + mu[:, None]
    per_row = _wis_formula(y, mu, lo, up, alphas)
    # scoringrules' interval scores, combined with Bracher et al.'s weights
    each = np.asarray(sr.interval_score(y[:, None], lo, up, alphas[None, :]))
    peer = (0.5 * np.abs(y - mu) + np.sum(alphas / 2 * each, axis=1)) / (len(alphas) + 0.5)
    np.testing.assert_allclose(peer, per_row, rtol=1e-12)
    # its weighted_interval_score (0.10.0): the numba backend is the paper's WIS; the numpy
    # backend adds w_median·median where the paper has w_0·|y − m|, so given |y − m| as the
    # "median" it is the paper's WIS too
    args = (lo, up, alphas, 0.5, alphas / 2)
    compiled = sr.weighted_interval_score(y, mu, *args, backend="numba")
    np.testing.assert_allclose(np.asarray(compiled), per_row, rtol=1e-12)
    wrapped = sr.weighted_interval_score(y, np.abs(y - mu), *args, backend="numpy")
    np.testing.assert_allclose(np.asarray(wrapped), per_row, rtol=1e-12)
    got = wis(P.Gaussian(mu, sd), y, sample_weight=w if weighted else None)
    assert got["value"] == pytest.approx(np.sum(w * per_row) / w.sum(), rel=1e-12)
    parts = got["dispersion"] + got["overprediction"] + got["underprediction"]
    assert parts == pytest.approx(got["value"], rel=1e-14, abs=1e-15)
    disp = np.sum(alphas / 2 * (up - lo), axis=1) / (len(alphas) + 0.5)
    assert got["dispersion"] == pytest.approx(np.sum(w * disp) / w.sum(), rel=1e-12)
    over = (np.sum(np.clip(lo - y[:, None], 0, None), axis=1) + 0.5 * np.clip(mu - y, 0, None)) / (
        len(alphas) + 0.5
    )
    assert got["overprediction"] == pytest.approx(np.sum(w * over) / w.sum(), rel=1e-12)


def test_wis_of_quantiles_uses_its_own_symmetric_pairs_and_needs_the_median() -> None:
    rng = np.random.default_rng(6)
    n = 50
    levels = np.array([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])
    q = np.sort(rng.normal(size=(n, levels.size)), axis=1)
    y = rng.normal(size=n)
    alphas = np.array([0.1, 0.2, 0.5])
    per_row = _wis_formula(y, q[:, 3], q[:, [0, 1, 2]], q[:, [6, 5, 4]], alphas)
    assert wis(P.Quantiles(levels, q), y)["value"] == pytest.approx(per_row.mean(), rel=1e-12)
    no_median = np.delete(levels, 3)
    with pytest.warns(registry.UndefinedMetricWarning, match="median"):
        assert wis(P.Quantiles(no_median, np.delete(q, 3, axis=1)), y) is None


def test_bootstrap_resamples_equal_the_decomposition_of_the_drawn_rows() -> None:
    """The stability engine's resamples (weights) against the rows drawn by index."""
    from uqcore.stability import bootstrap
    from uqcore.stability.weights import Resampler, counts_to_indices

    rng = np.random.default_rng(8)
    n = 60
    mu = np.round(rng.normal(size=n), 1)  # ties among the forecasts
    sd = rng.uniform(0.5, 1.5, n)
    y = mu + rng.normal(size=n)
    r = bootstrap(
        P.Gaussian(mu, sd),
        y,
        ["wis", "corp_mcb", "corp_dsc"],
        n_resamples=25,
        seed=4,
        keep_values=True,
    )
    resampler = Resampler(n)
    from scipy.stats import norm

    alphas = np.sort(1.0 - np.asarray(HUB_COVERAGES))
    lo = norm.ppf(alphas / 2)[None, :] * sd[:, None] + mu[:, None]
    up = norm.ppf(1 - alphas / 2)[None, :] * sd[:, None] + mu[:, None]
    per_row = _wis_formula(y, mu, lo, up, alphas)
    for i in range(25):
        idx = counts_to_indices(resampler.counts(4, i))
        d = corp(mu[idx], y[idx], None)
        assert r["corp_mcb"]["values"][i] == pytest.approx(d.mcb, rel=1e-9, abs=1e-12)
        assert r["corp_dsc"]["values"][i] == pytest.approx(d.dsc, rel=1e-9, abs=1e-12)
        assert r["wis"]["values"][i] == pytest.approx(per_row[idx].mean(), rel=1e-10)


# -- curves ------------------------------------------------------------------------------------
def _elementary(x: float, y: float, t: float, functional: str, a: float) -> float:
    """Ehm et al. (2016) eqs. 9 and 11, one row and one threshold."""
    x, y, t = float(x), float(y), float(t)
    if functional == "quantile":
        return (float(y < x) - a) * (float(t < x) - float(t < y))
    return abs(float(y < x) - a) * (max(y - t, 0.0) - max(x - t, 0.0) - (y - x) * float(t < x))


@pytest.mark.parametrize("functional", ["mean", "quantile"])
def test_murphy_diagram_against_the_elementary_scores_and_its_mixture(functional: str) -> None:
    from uqcore.score_curves import murphy_diagram

    rng = np.random.default_rng(11)
    n = 40
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    w = rng.uniform(0.2, 2.0, n)
    pred = P.Gaussian(mu, np.ones(n))
    a = 0.3 if functional == "quantile" else 0.5
    x = mu if functional == "mean" else np.asarray(pred.ppf([a]))[:, 0]
    d = murphy_diagram(pred, y, sample_weight=w, functional=functional, level=a, n_points=7)
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    np.testing.assert_allclose(d.theta, np.linspace(lo, hi, 7), rtol=0, atol=0)
    for t, s in zip(d.theta, d.score, strict=True):
        ref = sum(w[i] * _elementary(x[i], y[i], t, functional, a) for i in range(n)) / w.sum()
        assert s == pytest.approx(ref, rel=1e-12, abs=1e-15)
    # the mixture: ∫ S_θ dθ is the pinball loss, 4 ∫ S_θ dθ the squared error
    fine = murphy_diagram(pred, y, sample_weight=w, functional=functional, level=a, n_points=20001)
    area = np.trapezoid(fine.score, fine.theta)
    if functional == "quantile":
        score = np.sum(w * pinball(y, x, a)) / w.sum()
    else:
        score = np.sum(w * (y - x) ** 2) / w.sum() / 4.0
    assert area == pytest.approx(score, rel=1e-4)  # a step function: O(h) error


def test_corp_reliability_curve_is_the_fit_of_the_metric() -> None:
    from uqcore.curves import curve_from_json, curve_to_json, curves

    rng = np.random.default_rng(12)
    n = 50
    mu = np.round(rng.normal(size=n), 1)
    y = mu + rng.normal(size=n)
    got = curves(P.Gaussian(mu, np.ones(n)), y, ["corp_reliability", "murphy_diagram"])
    c = got["corp_reliability"]
    xhat = _minmax_isotonic_mean(mu, y, np.ones(n))
    # the steps cover the distinct forecasts in order; each row's x̂ is its step's value
    lo, hi = np.asarray(c.x_min), np.asarray(c.x_max)
    assert np.all(lo <= hi) and np.all(hi[:-1] < lo[1:]) and not c.merged
    assert lo[0] == mu.min() and hi[-1] == mu.max() and c.steps == len(c.fitted)
    step = np.searchsorted(lo, mu, side="right") - 1
    assert np.all(mu <= hi[step])
    np.testing.assert_allclose(np.asarray(c.fitted)[step], xhat, rtol=1e-12)
    assert np.all(np.diff(c.fitted) > 0)  # one step per run of equal x̂
    np.testing.assert_array_equal(c.weight, np.bincount(step, minlength=len(lo)))
    assert c.mcb == pytest.approx(corp_mcb(P.Gaussian(mu, np.ones(n)), y)["value"], rel=1e-15)
    for name, curve in got.items():
        assert curve_from_json(name, curve_to_json(curve)) == curve


def test_corp_reliability_merges_steps_beyond_max_steps() -> None:
    from uqcore.score_curves import corp_reliability

    # outcomes increasing with the forecast: the fit is the data, one step per row
    n = 1000
    x = np.arange(n, dtype=float)
    w = np.random.default_rng(5).uniform(0.5, 2.0, n)
    pred = P.PointUncertainty(x, np.ones(n))
    full = corp_reliability(pred, 2.0 * x, sample_weight=w, max_steps=None)
    assert full.steps == n and len(full.fitted) == n and not full.merged
    np.testing.assert_allclose(full.fitted, 2.0 * x, rtol=1e-12)
    c = corp_reliability(pred, 2.0 * x, sample_weight=w, max_steps=10)
    assert c.merged and c.steps == n and len(c.fitted) == 10
    # groups of consecutive rows of about equal weight, each with its weighted mean x̂
    lo = np.searchsorted(x, c.x_min)
    hi = np.searchsorted(x, c.x_max)
    assert lo[0] == 0 and hi[-1] == n - 1 and np.all(lo[1:] == hi[:-1] + 1)
    for k in range(10):
        rows = slice(lo[k], hi[k] + 1)
        assert c.weight[k] == pytest.approx(w[rows].sum(), rel=1e-12)
        assert c.fitted[k] == pytest.approx(np.average(2.0 * x[rows], weights=w[rows]), rel=1e-12)
    assert max(c.weight) < 2.5 * w.sum() / 10
    assert (c.mcb, c.dsc, c.unc) == (full.mcb, full.dsc, full.unc)
    with pytest.raises(UQValidationError, match="max_steps"):
        corp_reliability(pred, x, max_steps=0)
