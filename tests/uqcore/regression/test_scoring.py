"""Scoring rules against independent float64 references written from the formulas.

References: scipy.stats log-densities (NLL), scipy.integrate.quad of (F(x) − 1{x ≥ y})² (CRPS),
plain loops in exact rational arithmetic (check and interval scores, from scipy.stats quantiles),
and the peers scoringrules, properscoring and Uncertainty Toolbox where they have the quantity.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.stats as st
from scipy.integrate import IntegrationWarning, quad
from scipy.optimize import brentq
from scipy.special import logsumexp

from tests.factories import make_prediction
from uqcore import metric
from uqcore import predictions as P
from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError
from uqcore.registry import UndefinedMetricWarning
from uqcore.regression import scoring
from uqcore.regression.scoring import (
    check_score,
    coverage,
    crps,
    interval_score,
    mean_width,
    nll,
)

RTOL = 1e-10
GRID = np.asarray([round(k / 100, 2) for k in range(1, 100)])


def close(a: float, b: float, rtol: float = RTOL) -> None:
    assert math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=1e-300), (a, b)


# -- random inputs: (name, mu, sd, y, w) ---------------------------------------------------------
def _inputs() -> list[Any]:
    rng = np.random.default_rng(20240501)
    out = []
    for n in (1, 2, 3, 40):
        mu = rng.normal(size=n)
        sd = rng.uniform(0.3, 2.0, size=n)
        y = mu + sd * rng.standard_t(3, size=n)
        out.append(pytest.param(mu, sd, y, None, id=f"n{n}"))
    n = 30
    w = rng.integers(0, 4, size=n).astype(float)
    w[0] = 1.0
    mu = rng.choice([-1.0, 0.0, 1.0], size=n)
    sd = rng.choice([0.5, 1.0, 2.0], size=n)
    y = mu + rng.choice([-1.0, 0.0, 0.5, 2.0], size=n)
    out.append(pytest.param(mu, sd, y, w, id="ties-weighted"))
    mu = rng.normal(size=n) * 10.0 ** rng.uniform(-3, 6, size=n)
    sd = 10.0 ** rng.uniform(-3, 3, size=n)
    y = mu + sd * rng.standard_cauchy(size=n)
    out.append(pytest.param(mu, sd, y, rng.uniform(0.1, 5.0, size=n), id="dynamic-range"))
    return out


INPUTS = _inputs()


def wmean(t: np.ndarray, w: np.ndarray | None) -> float:
    if w is None:
        return math.fsum(t) / len(t)
    return math.fsum(w * t) / math.fsum(w)


def exact_wmean(terms: list[Fraction], w: np.ndarray | None) -> float:
    if w is None:
        return float(sum(terms, Fraction(0)) / len(terms))
    ws = [Fraction(float(v)) for v in w]
    return float(sum((a * b for a, b in zip(ws, terms, strict=True)), Fraction(0)) / sum(ws))


# -- NLL -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mu", "sd", "y", "w"), INPUTS)
def test_nll_closed_forms_match_scipy(mu: Any, sd: Any, y: Any, w: Any) -> None:
    close(nll(P.Gaussian(mu, sd), y, sample_weight=w), wmean(-st.norm.logpdf(y, mu, sd), w))
    close(nll(P.Laplace(mu, sd), y, sample_weight=w), wmean(-st.laplace.logpdf(y, mu, sd), w))
    df = np.linspace(0.5, 30.0, len(mu))
    close(
        nll(P.StudentT(mu, sd, df), y, sample_weight=w),
        wmean(-st.t.logpdf(y, df, loc=mu, scale=sd), w),
    )


def test_nll_mixture_matches_loop() -> None:
    rng = np.random.default_rng(1)
    n, k = 25, 4
    wts = rng.dirichlet(np.ones(k), size=n)
    wts[0] = [1.0, 0.0, 0.0, 0.0]  # a zero component weight
    means = rng.normal(scale=3.0, size=(n, k))
    stds = rng.uniform(0.1, 2.0, size=(n, k))
    y = rng.normal(scale=10.0, size=n)  # far tails: log-sum-exp needed
    ref = []
    for i in range(n):
        comps = [
            math.log(wts[i, j]) + st.norm.logpdf(y[i], means[i, j], stds[i, j])
            for j in range(k)
            if wts[i, j] > 0
        ]
        ref.append(-logsumexp(comps))
    close(nll(P.Mixture(wts, means, stds), y), wmean(np.asarray(ref), None))


PER_ROW = [0.3, 1.1, 0.05, 2.0, 0.7, 0.9, 1.4]


@pytest.mark.parametrize("bandwidth", ["silverman", "scott", "scoringrules", 0.7, PER_ROW])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_samples_kde_matches_loop(bandwidth: Any, weighted: bool) -> None:
    """The Gaussian KDE log density written out row by row, for each bandwidth (a rule, one
    number, one number per row), unweighted and weighted."""
    rng = np.random.default_rng(2)
    n, s = 7, 50
    draws = rng.normal(size=(n, s)) * rng.uniform(0.5, 3, size=(n, 1))
    y = rng.normal(size=n) * 2.0
    w = rng.uniform(0.0, 3.0, size=n) if weighted else None
    ref = []
    for i in range(n):
        x = draws[i]
        sdv = np.std(x, ddof=1)
        iqr = (np.percentile(x, 75) - np.percentile(x, 25)) / 1.34
        if bandwidth == "silverman":
            h = 0.9 * min(sdv, iqr) * s ** (-0.2)
        elif bandwidth == "scott":
            h = 1.06 * sdv * s ** (-0.2)
        elif bandwidth == "scoringrules":
            h = 1.06 * min(sdv, iqr) * s ** (-0.2)
        elif isinstance(bandwidth, list):
            h = bandwidth[i]
        else:
            h = bandwidth
        dens = math.fsum(st.norm.pdf((y[i] - xs) / h) / h for xs in x) / s
        ref.append(-math.log(dens))
    got = nll(P.Samples(draws), y, sample_weight=w, bandwidth=bandwidth)
    close(got, wmean(np.asarray(ref), w), 1e-9)


def _ensemble(seed: int, n: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    """Draws of varied spread and targets between two of them (where scoringrules' density,
    computed without log-sum-exp, does not underflow)."""
    rng = np.random.default_rng(seed)
    scale = rng.lognormal(size=(n, 1))
    draws = rng.normal(size=(n, 1)) + scale * rng.standard_t(4, size=(n, s))
    t = rng.uniform(size=n)
    y = draws[:, 0] + t * (draws[:, -1] - draws[:, 0])
    return draws, y


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n", "s"), [(1, 2), (3, 5), (40, 10), (200, 51)])
def test_nll_samples_match_scoringrules_logs_ensemble(seed: int, n: int, s: int) -> None:
    """``scoringrules.logs_ensemble`` gives −log f_i(y_i) per row (the same sign as our terms):
    its default bandwidth is ``bandwidth="scoringrules"``, its ``bw`` one bandwidth per row;
    the metric is the (weighted) mean of its scores."""
    sr = pytest.importorskip("scoringrules")
    draws, y = _ensemble(seed, n, s)
    spread = np.std(draws, axis=1)
    h = np.random.default_rng(seed + 50).uniform(0.2, 2.0, size=n) * spread
    one = 0.3 * float(np.max(spread))
    w = np.random.default_rng(seed + 60).uniform(0.0, 3.0, size=n)
    pred = P.Samples(draws)
    for ours, theirs in (
        ("scoringrules", sr.logs_ensemble(y, draws, backend="numpy")),
        (h, sr.logs_ensemble(y, draws, bw=h, backend="numpy")),
        (list(h), sr.logs_ensemble(y, draws, bw=h, backend="numpy")),
        (one, sr.logs_ensemble(y, draws, bw=np.full(n, one), backend="numpy")),
    ):
        theirs = np.asarray(theirs, dtype=float)
        assert np.all(np.isfinite(theirs))
        close(nll(pred, y, bandwidth=ours), wmean(theirs, None), 1e-12)
        close(nll(pred, y, sample_weight=w, bandwidth=ours), wmean(theirs, w), 1e-12)


def test_nll_scoringrules_bandwidth_where_the_iqr_is_zero() -> None:
    """Where a row's quartiles coincide scoringrules' bandwidth is 0 (its score is not
    finite); ours falls back to σ̂, as for Silverman's rule: 1.06·σ̂·S^(−1/5)."""
    sr = pytest.importorskip("scoringrules")
    draws = np.array([[0.0, 1.0, 1.0, 1.0, 1.0, 3.0], [0.0, 0.5, 1.0, 2.0, 2.5, 4.0]])
    y = np.array([1.2, 1.7])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not np.isfinite(sr.logs_ensemble(y, draws, backend="numpy")[0])
    bw = np.std(draws, axis=1, ddof=1) * 1.06 * 6 ** (-0.2)
    bw[1] = min(
        bw[1],
        1.06 * (np.quantile(draws[1], 0.75) - np.quantile(draws[1], 0.25)) / 1.34 * 6 ** (-0.2),
    )
    theirs = np.asarray(sr.logs_ensemble(y, draws, bw=bw, backend="numpy"))
    close(nll(P.Samples(draws), y, bandwidth="scoringrules"), wmean(theirs, None), 1e-12)


def test_nll_per_row_bandwidth_follows_its_rows() -> None:
    """One bandwidth per row belongs to its row: permuting, repeating (integer weights) and
    dropping (zero weights) rows with their bandwidths changes nothing, nor does scaling the
    weights; it is recorded in ``Report.params`` as a list, and checked."""
    import json

    from uqcore import evaluate

    draws, y = _ensemble(7, 30, 8)
    h = np.random.default_rng(8).uniform(0.1, 2.0, size=30)
    pred = P.Samples(draws)
    base = nll(pred, y, bandwidth=h)
    perm = np.random.default_rng(9).permutation(30)
    close(nll(pred.take(perm), y[perm], bandwidth=h[perm]), base, 1e-12)
    k = np.random.default_rng(10).integers(0, 4, size=30)
    k[0] = 1
    idx = np.repeat(np.arange(30), k)
    expanded = nll(pred.take(idx), y[idx], bandwidth=h[idx])
    close(nll(pred, y, sample_weight=k.astype(float), bandwidth=h), expanded, 1e-12)
    keep = np.flatnonzero(k > 0)
    w = np.random.default_rng(11).uniform(0.5, 2.0, size=30) * (k > 0)
    dropped = nll(pred.take(keep), y[keep], sample_weight=w[keep], bandwidth=h[keep])
    close(nll(pred, y, sample_weight=w, bandwidth=h), dropped, 1e-12)
    close(nll(pred, y, sample_weight=3.7 * w, bandwidth=h), dropped, 1e-12)
    report = evaluate(pred, y, ["nll"], params={"nll": {"bandwidth": h}})
    assert json.loads(json.dumps(report.to_dict()))["params"]["nll"]["bandwidth"] == h.tolist()
    for bad, match in (
        (h[:-1], "one value per row: 30 rows, found 29"),
        (np.where(np.arange(30) == 4, -1.0, h), r"bandwidth\[4\] = -1.0"),
        (np.where(np.arange(30) == 2, np.nan, h), r"bandwidth\[2\] = nan"),
        (h.reshape(3, 10), "found an array of shape"),
        ("nrd", "'scoringrules'"),
    ):
        with pytest.raises(UQValidationError, match=match):
            nll(pred, y, bandwidth=bad)


def test_nll_per_row_bandwidth_on_every_backend(xp: Any) -> None:
    from tests.factories import to_backend

    draws, y = _ensemble(12, 20, 6)
    h = np.random.default_rng(13).uniform(0.1, 2.0, size=20)
    w = np.random.default_rng(14).uniform(0.0, 2.0, size=20)
    expected = nll(P.Samples(draws), y, sample_weight=w, bandwidth=h)
    pb, yb = to_backend(P.Samples(draws), y, xp)
    wb = to_backend(P.Samples(draws), w, xp)[1]
    for given in (h, list(h), to_backend(P.Samples(draws), h, xp)[1]):
        close(nll(pb, yb, sample_weight=wb, bandwidth=given), expected, 1e-12)


def test_nll_kde_converges_to_closed_form() -> None:
    rng = np.random.default_rng(3)
    n, s = 40, 4000
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    draws = mu[:, None] + sd[:, None] * rng.normal(size=(n, s))
    diff = nll(P.Samples(draws), y) - nll(P.Gaussian(mu, sd), y)
    assert abs(diff) < 0.03, diff


def test_nll_samples_with_equal_draws_is_undefined_unless_weight_zero() -> None:
    draws = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    y = np.array([1.0, 0.5])
    with pytest.warns(UndefinedMetricWarning):
        assert nll(P.Samples(draws), y) is None
    got = nll(P.Samples(draws), y, sample_weight=np.array([0.0, 2.0]))
    close(got, nll(P.Samples(draws[1:]), y[1:]))


# -- CRPS ------------------------------------------------------------------------------------------
def crps_quad(cdf: Any, y: float, points: list[float]) -> float:
    """∫ (F(x) − 1{x ≥ y})² dx by quadrature, split at the given points."""
    pts = sorted({*points, y})
    kw = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 500}

    def part(a: float, b: float) -> float:
        below = b <= y  # left of y the integrand is F², right of it (1 − F)²
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntegrationWarning)  # tolerance near roundoff
            if below:
                return float(quad(lambda x: cdf(x) ** 2, a, b, **kw)[0])
            return float(quad(lambda x: (1.0 - cdf(x)) ** 2, a, b, **kw)[0])

    edges = [-np.inf, *pts, np.inf]
    return math.fsum(part(a, b) for a, b in itertools.pairwise(edges))


@pytest.mark.parametrize(("mu", "sd", "y", "w"), INPUTS)
def test_crps_location_scale_match_quadrature(mu: Any, sd: Any, y: Any, w: Any) -> None:
    z = (y - mu) / sd
    df = np.linspace(1.5, 20.0, len(mu))
    cases = [
        (P.Gaussian(mu, sd), [st.norm.cdf] * len(mu)),
        (P.Laplace(mu, sd), [st.laplace.cdf] * len(mu)),
        (P.StudentT(mu, sd, df), [lambda t, d=d: st.t.cdf(t, d) for d in df]),
    ]
    for pred, cdfs in cases:
        ref = np.array([sd[i] * crps_quad(cdfs[i], z[i], [0.0]) for i in range(len(mu))])
        close(crps(pred, y, sample_weight=w), wmean(ref, w), 1e-9)


@pytest.mark.parametrize(("mu", "sd", "y", "w"), INPUTS)
def test_crps_location_scale_match_scoringrules(mu: Any, sd: Any, y: Any, w: Any) -> None:
    import properscoring as ps
    import scoringrules as sr

    close(crps(P.Gaussian(mu, sd), y, sample_weight=w), wmean(sr.crps_normal(y, mu, sd), w))
    close(crps(P.Gaussian(mu, sd), y, sample_weight=w), wmean(ps.crps_gaussian(y, mu, sd), w))
    close(crps(P.Laplace(mu, sd), y, sample_weight=w), wmean(sr.crps_laplace(y, mu, sd), w))
    df = np.linspace(1.5, 20.0, len(mu))
    ref = sr.crps_t(y, df, mu, sd)
    close(crps(P.StudentT(mu, sd, df), y, sample_weight=w), wmean(ref, w), 1e-9)


def test_crps_mixture_matches_quadrature_and_scoringrules() -> None:
    import scoringrules as sr

    rng = np.random.default_rng(4)
    n, k = 12, 3
    wts = rng.dirichlet(np.ones(k), size=n)
    means = rng.normal(scale=2.0, size=(n, k))
    stds = rng.uniform(0.2, 2.0, size=(n, k))
    y = rng.normal(scale=3.0, size=n)
    ref = []
    for i in range(n):

        def cdf(x: float, i: int = i) -> float:
            return float(np.sum(wts[i] * st.norm.cdf(x, means[i], stds[i])))

        ref.append(crps_quad(cdf, y[i], list(means[i])))
    got = crps(P.Mixture(wts, means, stds), y)
    close(got, wmean(np.asarray(ref), None), 1e-9)
    close(got, wmean(sr.crps_mixnorm(y, means, stds, wts), None), 1e-9)
    # one component is the Gaussian
    one = crps(P.Mixture(np.ones((n, 1)), means[:, :1], stds[:, :1]), y)
    close(one, crps(P.Gaussian(means[:, 0], stds[:, 0]), y))


def ensemble_reference(x: np.ndarray, y: float, estimator: str) -> float:
    s = len(x)
    e1 = math.fsum(abs(v - y) for v in x) / s
    pair = math.fsum(abs(a - b) for a in x for b in x)
    if estimator == "nrg":
        return e1 - pair / (2 * s * s)
    if estimator == "fair":
        return e1 - pair / (2 * s * (s - 1))
    xs = np.sort(x)
    beta0 = math.fsum(xs) / s
    beta1 = math.fsum(i * xs[i] for i in range(s)) / (s * (s - 1))
    return e1 + beta0 - 2 * beta1


@pytest.mark.parametrize("estimator", ["nrg", "fair", "pwm"])
@pytest.mark.parametrize("ties", [False, True])
def test_crps_samples_match_loop_and_peers(estimator: str, ties: bool) -> None:
    import scoringrules as sr

    rng = np.random.default_rng(5)
    n, s = 9, 13
    draws = rng.normal(size=(n, s)) * 3.0 + 1000.0  # an offset the sums must not feel
    y = rng.normal(size=n) * 3.0 + 1000.0
    if ties:
        draws = np.round(draws)
        y = np.round(y)
        y[0] = draws[0, 3]
    w = rng.uniform(0.0, 2.0, size=n)
    ref = np.array([ensemble_reference(draws[i], y[i], estimator) for i in range(n)])
    got = crps(P.Samples(draws), y, sample_weight=w, estimator=estimator)
    close(got, wmean(ref, w), 1e-9)
    close(got, wmean(sr.crps_ensemble(y, draws, estimator=estimator), w), 1e-9)
    if estimator == "nrg":
        import properscoring as ps

        close(got, wmean(ps.crps_ensemble(y, draws), w), 1e-9)


def test_crps_samples_single_draw() -> None:
    draws = np.array([[1.0], [2.0]])
    y = np.array([0.0, 5.0])
    close(crps(P.Samples(draws), y), 2.0)  # |x − y|
    with pytest.warns(UndefinedMetricWarning):
        assert crps(P.Samples(draws), y, estimator="fair") is None


def test_crps_samples_converge_to_closed_form() -> None:
    rng = np.random.default_rng(6)
    n, s = 200, 2000
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    draws = mu[:, None] + sd[:, None] * rng.normal(size=(n, s))
    exact = crps(P.Gaussian(mu, sd), y)
    for est in ("nrg", "fair", "pwm"):
        assert abs(crps(P.Samples(draws), y, estimator=est) - exact) < 0.01


def pinball(y: float, q: float, p: float) -> Fraction:
    d = Fraction(q) - Fraction(y)
    return (Fraction(int(d >= 0)) - Fraction(p)) * d


def test_crps_quantiles_is_twice_mean_pinball() -> None:
    import scoringrules as sr

    rng = np.random.default_rng(7)
    n = 15
    lv = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    vals = np.sort(rng.normal(size=(n, 5)), axis=1)
    vals[0, 1] = vals[0, 2]  # a tie between quantiles
    y = rng.normal(size=n)
    y[1] = vals[1, 2]
    ref = [2 * sum(pinball(y[i], vals[i, j], lv[j]) for j in range(5)) / 5 for i in range(n)]
    got = crps(P.Quantiles(lv, vals), y)
    close(got, exact_wmean(ref, None))
    close(got, float(np.mean(sr.crps_quantile(y, vals, lv))), 1e-9)


def test_crps_student_t_df_le_one_is_undefined() -> None:
    mu, sd, y = np.zeros(3), np.ones(3), np.array([0.5, 1.0, -2.0])
    df = np.array([3.0, 1.0, 5.0])
    with pytest.warns(UndefinedMetricWarning):
        assert crps(P.StudentT(mu, sd, df), y) is None
    w = np.array([1.0, 0.0, 2.0])
    keep = [0, 2]
    close(
        crps(P.StudentT(mu, sd, df), y, sample_weight=w),
        crps(P.StudentT(mu[keep], sd[keep], df[keep]), y[keep], sample_weight=w[keep]),
    )


@pytest.mark.parametrize("df", [1.2, 3.0, 30.0, 1e6, 1e9, 1e12, 1e100])
def test_crps_student_t_at_large_df_keeps_its_digits(df: float) -> None:
    """The closed form with its Γ ratios evaluated in 40-digit arithmetic (mpmath), the CDF
    from scipy's ``stdtr``: the Γ ratios as Pochhammer symbols keep every digit where
    differences of log Γ lost them (3e-3 absolute at ν = 10¹²); ν → ∞ gives the Gaussian's."""
    import mpmath as mp
    from scipy.special import stdtr

    mp.mp.dps = 40
    mu = np.array([0.0, 1.5, -2.0, 0.25])
    sd = np.array([1.0, 0.5, 3.0, 2.0])
    y = np.array([0.3, -0.4, 4.0, 0.25])
    nu = mp.mpf(df)
    ratio = mp.gamma((nu + 1) / 2) / mp.gamma(nu / 2) if df < 1e15 else mp.sqrt(nu / 2)
    if df >= 1e15:  # Γ(a + ½)/Γ(a) = √a (1 − 1/(8a) + …): the first term is exact in doubles
        ratio *= 1 - 1 / (4 * nu)
    b1 = mp.sqrt(mp.pi) * mp.gamma(nu - mp.mpf(0.5)) / mp.gamma(nu) if df < 1e15 else None
    want = []
    for m, s, t in zip(mu, sd, y, strict=True):
        z = (t - m) / s
        zm = mp.mpf(z)
        pdf = ratio / mp.sqrt(nu * mp.pi) * mp.exp(-(nu + 1) / 2 * mp.log1p(zm * zm / nu))
        b2 = mp.sqrt(mp.pi) / ratio
        const = (
            2 * mp.sqrt(nu) * b1 / ((nu - 1) * b2 * b2) if b1 is not None else 1 / mp.sqrt(mp.pi)
        )
        cdf = mp.mpf(float(stdtr(df, z)))
        want.append(float(s * (zm * (2 * cdf - 1) + 2 * pdf * (nu + zm * zm) / (nu - 1) - const)))
    got = scoring._crps_student_t(P.StudentT(mu, sd, df), y)
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, atol=1e-14)
    if df >= 1e9:
        z = (y - mu) / sd  # the Gaussian's closed form: σ[z(2Φ(z) − 1) + 2φ(z) − 1/√π]
        gauss = sd * (z * (2 * st.norm.cdf(z) - 1) + 2 * st.norm.pdf(z) - 1 / math.sqrt(math.pi))
        np.testing.assert_allclose(to_numpy(got), gauss, rtol=2.0 / df + 1e-13)


# -- check and interval scores ---------------------------------------------------------------------
def _ppf_reference(kind: str, mu: Any, sd: Any, df: Any = None) -> Any:
    """Row i's quantile function, from scipy.stats (exact rationals of its float outputs)."""
    if kind == "gaussian":
        return lambda i, p: Fraction(mu[i]) + Fraction(sd[i]) * Fraction(float(st.norm.ppf(p)))
    if kind == "laplace":
        return lambda i, p: Fraction(mu[i]) + Fraction(sd[i]) * Fraction(float(st.laplace.ppf(p)))
    return lambda i, p: Fraction(mu[i]) + Fraction(sd[i]) * Fraction(float(st.t.ppf(p, df[i])))


def check_reference(ppf: Any, y: Any, levels: Any, w: Any) -> float:
    terms = []
    for i in range(len(y)):
        t = Fraction(0)
        for p in levels:
            d = ppf(i, p) - Fraction(y[i])
            t += (Fraction(int(d >= 0)) - Fraction(p)) * d
        terms.append(t / len(levels))
    return exact_wmean(terms, w)


def interval_reference(ppf: Any, y: Any, cov: Any, w: Any) -> float:
    terms = []
    for i in range(len(y)):
        t = Fraction(0)
        for c in cov:
            lo, hi = ppf(i, 0.5 - c / 2.0), ppf(i, 0.5 + c / 2.0)
            a = 2 / (Fraction(1) - Fraction(c))
            yi = Fraction(y[i])
            t += (hi - lo) + a * max(lo - yi, Fraction(0)) + a * max(yi - hi, Fraction(0))
        terms.append(t / len(cov))
    return exact_wmean(terms, w)


LEVELS_SMALL = [0.01, 0.1, 0.37, 0.5, 0.9, 0.99]


@pytest.mark.parametrize(("mu", "sd", "y", "w"), INPUTS)
@pytest.mark.parametrize("kind", ["gaussian", "laplace", "student_t", "student_t_rows"])
def test_check_and_interval_scores_location_scale(
    kind: str, mu: Any, sd: Any, y: Any, w: Any
) -> None:
    n = len(mu)
    if kind == "gaussian":
        pred, ppf = P.Gaussian(mu, sd), _ppf_reference("gaussian", mu, sd)
    elif kind == "laplace":
        pred, ppf = P.Laplace(mu, sd), _ppf_reference("laplace", mu, sd)
    else:
        df = np.full(n, 1.3) if kind == "student_t" else np.linspace(0.8, 9.0, n)
        pred, ppf = P.StudentT(mu, sd, df), _ppf_reference("student_t", mu, sd, df)
    levels = GRID if n <= 3 else LEVELS_SMALL
    opt = None if n <= 3 else levels
    close(check_score(pred, y, sample_weight=w, levels=opt), check_reference(ppf, y, levels, w))
    close(
        interval_score(pred, y, sample_weight=w, levels=opt), interval_reference(ppf, y, levels, w)
    )


def test_check_and_interval_scores_mixture_samples_quantiles() -> None:
    rng = np.random.default_rng(8)
    n, k = 6, 2
    wts = rng.dirichlet(np.ones(k), size=n)
    means = rng.normal(size=(n, k)) * 2
    stds = rng.uniform(0.3, 1.5, size=(n, k))
    y = rng.normal(size=n) * 2
    lv = [0.05, 0.3, 0.5, 0.8, 0.95]

    def mix_ppf(i: int, p: float) -> Fraction:
        f = lambda x: float(np.sum(wts[i] * st.norm.cdf(x, means[i], stds[i]))) - p  # noqa: E731
        return Fraction(brentq(f, -50, 50, xtol=1e-14, rtol=1e-15, maxiter=500))

    pred = P.Mixture(wts, means, stds)
    close(check_score(pred, y, levels=lv), check_reference(mix_ppf, y, lv, None), 1e-9)
    close(interval_score(pred, y, levels=lv), interval_reference(mix_ppf, y, lv, None), 1e-9)

    draws = rng.normal(size=(n, 11))
    draws[0, :3] = 0.25
    spred = P.Samples(draws)

    def samp_ppf(i: int, p: float) -> Fraction:
        return Fraction(float(np.quantile(draws[i], p)))

    w = rng.uniform(0.5, 2.0, size=n)
    close(check_score(spred, y, levels=lv, sample_weight=w), check_reference(samp_ppf, y, lv, w))
    close(
        interval_score(spred, y, levels=lv, sample_weight=w),
        interval_reference(samp_ppf, y, lv, w),
    )

    qlv = np.array([0.1, 0.2, 0.5, 0.8, 0.9])
    vals = np.sort(rng.normal(size=(n, 5)), axis=1)
    qpred = P.Quantiles(qlv, vals)
    col = {p: j for j, p in enumerate(qlv)}

    def q_ppf(i: int, p: float) -> Fraction:
        j = int(np.argmin(np.abs(qlv - p)))
        assert abs(qlv[j] - p) < 1e-12
        return Fraction(vals[i, col[qlv[j]]])

    # defaults: the prediction's own levels, and its symmetric pairs (coverages 0.8, 0.6)
    close(check_score(qpred, y), check_reference(q_ppf, y, list(qlv), None))
    close(interval_score(qpred, y), interval_reference(q_ppf, y, [0.8, 0.6], None))


@pytest.mark.parametrize("seed", [0, 1])
def test_match_uncertainty_toolbox(seed: int) -> None:
    from uncertainty_toolbox import metrics_scoring_rule as ut

    rng = np.random.default_rng(seed)
    n = 500
    mu = rng.normal(size=n)
    sd = rng.uniform(0.1, 3.0, size=n)
    y = mu + sd * rng.standard_t(4, size=n)
    pred = P.Gaussian(mu, sd)
    close(nll(pred, y), ut.nll_gaussian(mu, sd, y), 1e-9)
    close(crps(pred, y), ut.crps_gaussian(mu, sd, y), 1e-9)
    close(check_score(pred, y), ut.check_score(mu, sd, y), 1e-9)
    close(interval_score(pred, y), ut.interval_score(mu, sd, y), 1e-9)
    grid = [float(v) for v in np.linspace(0.01, 0.99, 20)]
    close(
        check_score(pred, y, levels=grid, scaled=False),
        ut.check_score(mu, sd, y, resolution=20, scaled=False),
        1e-9,
    )
    close(
        interval_score(pred, y, levels=grid, scaled=False),
        ut.interval_score(mu, sd, y, resolution=20, scaled=False),
        1e-9,
    )


def test_check_score_quadrature_limit_is_half_crps() -> None:
    """Mean pinball over a fine uniform grid tends to CRPS/2 (the quantile decomposition)."""
    rng = np.random.default_rng(9)
    mu, sd = rng.normal(size=50), rng.uniform(0.5, 2.0, size=50)
    y = mu + sd * rng.normal(size=50)
    grid = (np.arange(4000) + 0.5) / 4000
    pred = P.Gaussian(mu, sd)
    assert abs(2 * check_score(pred, y, levels=grid) - crps(pred, y)) < 1e-3


# -- coverage and width ----------------------------------------------------------------------------
def test_coverage_and_width_match_loops() -> None:
    rng = np.random.default_rng(10)
    n = 60
    mu, sd = rng.normal(size=n), rng.uniform(0.2, 2.0, size=n)
    y = mu + sd * rng.standard_t(3, size=n)
    w = rng.integers(0, 3, size=n).astype(float)
    w[0] = 1
    df = np.linspace(1.0, 8.0, n)
    draws = mu[:, None] + sd[:, None] * rng.normal(size=(n, 21))
    cases = [
        (P.Gaussian(mu, sd), lambda i, p: mu[i] + sd[i] * st.norm.ppf(p)),
        (P.Laplace(mu, sd), lambda i, p: mu[i] + sd[i] * st.laplace.ppf(p)),
        (P.StudentT(mu, sd, df), lambda i, p: mu[i] + sd[i] * st.t.ppf(p, df[i])),
        (P.Samples(draws), lambda i, p: np.quantile(draws[i], p)),
    ]
    levels = [0.5, 0.8, 0.9, 0.95, 0.99]
    for pred, ppf in cases:
        cov = coverage(pred, y, sample_weight=w)
        wid = mean_width(pred, y, sample_weight=w)
        for j, c in enumerate(levels):
            lo = np.array([ppf(i, 0.5 - c / 2) for i in range(n)])
            hi = np.array([ppf(i, 0.5 + c / 2) for i in range(n)])
            close(cov["coverage"][j], wmean(((lo <= y) & (y <= hi)).astype(float), w))
            close(wid["width"][j], wmean(hi - lo, w))
        assert cov["value"] == cov["coverage"][3] and cov["level"] == 0.95
        assert wid["value"] == wid["width"][3]
    got = coverage(cases[0][0], y, level=0.5)
    assert got["value"] == got["coverage"][0]


def test_coverage_quantiles_outside_levels_is_none() -> None:
    lv = np.round(np.linspace(0.05, 0.95, 19), 10)
    vals = np.sort(np.random.default_rng(11).normal(size=(8, 19)), axis=1)
    y = np.zeros(8)
    with pytest.warns(UndefinedMetricWarning):
        cov = coverage(P.Quantiles(lv, vals), y)
    assert cov["value"] is None and cov["coverage"][3] is None and cov["coverage"][4] is None
    # the 90% interval is the outermost columns
    ref = float(np.mean((vals[:, 0] <= y) & (y <= vals[:, -1])))
    close(cov["coverage"][2], ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wid = mean_width(P.Quantiles(lv, vals), y, level=0.9)
    close(wid["value"], float(np.mean(vals[:, -1] - vals[:, 0])))


def test_interval_score_quantiles_without_pairs_is_undefined() -> None:
    pred = P.Quantiles([0.2, 0.5], np.array([[0.0, 1.0]]))
    with pytest.warns(UndefinedMetricWarning):
        assert interval_score(pred, np.array([0.0])) is None


# -- blocks, options -------------------------------------------------------------------------------
def test_blockwise_paths_equal_single_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few rows give the single-block values: metric, mean_terms, weighted or not."""
    from uqcore.batch import Batch

    rng = np.random.default_rng(12)
    n = 50
    preds = [
        P.Gaussian(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)),
        P.Laplace(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)),
        P.StudentT(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n), 4.0),
        P.Samples(rng.normal(size=(n, 9))),
        P.Mixture(rng.dirichlet(np.ones(3), size=n), rng.normal(size=(n, 3)), np.ones((n, 3))),
        P.Quantiles([0.1, 0.5, 0.9], np.sort(rng.normal(size=(n, 3)), axis=1)),
        P.StudentT(rng.normal(size=n), np.ones(n), rng.uniform(2, 5, size=n)),
    ]
    y = rng.normal(size=n)
    w = rng.uniform(0.0, 3.0, size=n)
    fns = [crps, check_score, interval_score]
    term_fns = [scoring._crps_terms, scoring._check_terms, scoring._interval_terms]

    def values(p: Any, weights: Any) -> list[Any]:
        out = [f(p, y, sample_weight=weights) for f in fns]
        out += [coverage(p, y, level=0.8, sample_weight=weights)["value"]]
        out += [mean_width(p, y, level=0.8, sample_weight=weights)["value"]]
        if p.kind != "quantiles":
            out.append(nll(p, y, sample_weight=weights))
        return out

    def terms(p: Any) -> list[np.ndarray]:
        batch = Batch(p, y)
        return [np.asarray(f(batch)) for f in term_fns]

    whole = [values(p, wt) for p in preds for wt in (None, w)]
    whole_terms = [terms(p) for p in preds]
    monkeypatch.setattr(scoring, "_CHUNK_ELEMENTS", 7)
    parts = [values(p, wt) for p in preds for wt in (None, w)]
    parts_terms = [terms(p) for p in preds]
    for a, b in zip(parts, whole, strict=True):
        np.testing.assert_allclose(np.array(a, float), np.array(b, float), rtol=1e-13)
    for ta, tb in zip(parts_terms, whole_terms, strict=True):
        for a, b in zip(ta, tb, strict=True):
            assert a.shape == (n,)
            np.testing.assert_allclose(a, b, rtol=1e-13)


def test_blockwise_paths_on_backends(xp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block-by-block reductions and the block-filled terms work on every array backend."""
    from tests.factories import to_backend
    from uqcore.batch import Batch

    rng = np.random.default_rng(13)
    n = 23
    preds = [
        P.Gaussian(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)),
        P.Samples(rng.normal(size=(n, 5))),
        P.Quantiles([0.1, 0.5, 0.9], np.sort(rng.normal(size=(n, 3)), axis=1)),
    ]
    y = rng.normal(size=n)
    w = rng.uniform(0.0, 3.0, size=n)
    expected = [
        [
            crps(p, y, sample_weight=w),
            interval_score(p, y),
            np.asarray(scoring._crps_terms(Batch(p, y))),
        ]
        for p in preds
    ]
    monkeypatch.setattr(scoring, "_CHUNK_ELEMENTS", 4)
    for p, (want_crps, want_is, want_terms) in zip(preds, expected, strict=True):
        pb, yb = to_backend(p, y, xp)
        wb = to_backend(p, w, xp)[1]
        close(crps(pb, yb, sample_weight=wb), want_crps, rtol=1e-12)
        close(interval_score(pb, yb), want_is, rtol=1e-12)
        got = scoring._crps_terms(Batch(pb, yb))
        np.testing.assert_allclose(np.asarray(to_numpy(got)), want_terms, rtol=1e-12)


def test_option_validation() -> None:
    pred, y = P.Gaussian([0.0], [1.0]), np.array([0.0])
    with pytest.raises(
        UQValidationError, match=r"levels must be .* each in \(0, 1\).*; levels\[0\] = 0.0"
    ):
        check_score(pred, y, levels=[0.0, 0.5])
    with pytest.raises(UQValidationError, match="estimator"):
        crps(pred, y, estimator="qd")
    with pytest.raises(UQValidationError, match="bandwidth"):
        nll(pred, y, bandwidth=-1.0)
    with pytest.raises(UQValidationError, match="level must be one of levels"):
        coverage(pred, y, level=0.7)
    with pytest.raises(UQValidationError, match="scaled"):
        interval_score(pred, y, scaled="no")
    with pytest.raises(UQValidationError, match="needs logpdf"):
        nll(P.Quantiles([0.5], [[0.0]]), y)


def test_quadrature_crps_for_kinds_without_closed_form_is_close_to_gaussian_closed_form() -> None:
    """The fallback quadrature (used e.g. for recalibrated predictions) against the closed form."""
    from uqcore.batch import Batch
    from uqcore.regression import scoring

    rng = np.random.default_rng(77)
    n = 60
    g = P.Gaussian(rng.normal(size=n), rng.uniform(0.1, 3.0, n))
    y = 2.0 * rng.normal(size=n)
    batch = Batch(g, y)
    exact = np.asarray(scoring._terms(batch, 1, scoring._crps_gaussian))
    approx = np.asarray(
        scoring._terms(batch, scoring.QUADRATURE_LEVELS, scoring._crps_quadrature(batch))
    )
    np.testing.assert_allclose(approx, exact, rtol=5e-5)


@pytest.mark.parametrize(
    ("name", "levels"),
    [("check_score", [0.01, 0.5]), ("check_score", [0.5, 0.97]), ("interval_score", [0.95])],
)
def test_levels_a_quantiles_prediction_does_not_span_are_undefined(
    name: str, levels: list[float]
) -> None:
    # Levels 0.05..0.95: quantile level 0.01, 0.97 or 0.5 ± 0.95/2 cannot be interpolated.
    pred, y = make_prediction("quantiles", 30, seed=4)
    with pytest.warns(UndefinedMetricWarning, match="spans the levels"):
        assert metric(name, pred, y, levels=levels) is None
    inside = metric(name, pred, y, levels=[0.1, 0.9])
    assert inside is not None and np.isfinite(inside)
