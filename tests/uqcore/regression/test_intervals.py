"""Interval metrics against MAPIE's own functions (mapie.metrics.regression) and formulas
written out here: coverage, width and interval score of Interval predictions, cwc,
size-stratified coverage, HSIC between width and coverage, and the binomial coverage test."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from mapie.metrics import regression as mapie_reg

from uqcore import metric
from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.registry import UndefinedMetricWarning
from uqcore.regression import intervals
from uqcore.regression._intervals import interval_at
from uqcore.stability import bootstrap
from uqcore.stability.weights import Resampler, counts_to_indices


def _data(n: int, seed: int, level: float | None = 0.9) -> tuple[Any, np.ndarray]:
    """Asymmetric intervals whose coverage depends on the width, some of zero width."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.2, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    half = 1.645 * np.sqrt(sd)  # too narrow for wide rows: coverage falls with the width
    skew = rng.uniform(0.6, 1.4, size=n)
    lo, hi = mu - half * skew, mu + half / skew
    lo[::7] = hi[::7] = mu[::7]
    return P.Interval(lo, hi, level=level), y


def _mapie_intervals(pred: Any) -> np.ndarray:
    return np.stack([pred.lower, pred.upper], axis=1)[:, :, None]


# -- the level rule ---------------------------------------------------------------------------
def test_interval_at_follows_the_level_rule() -> None:
    pred, y = _data(20, 0, level=0.8)
    lo, hi, c = interval_at(Batch(pred, y), 0.95)
    assert c == 0.8 and np.array_equal(lo, pred.lower) and np.array_equal(hi, pred.upper)
    bare, _ = _data(20, 0, level=None)
    assert interval_at(Batch(bare, y), 0.95)[2] == 0.95
    g = P.Gaussian(np.zeros(3), np.ones(3))
    lo, hi, c = interval_at(Batch(g, np.zeros(3)), 0.5)
    assert c == 0.5 and np.allclose(hi, 0.6744897501960817) and np.allclose(lo, -hi)
    q = P.Quantiles(levels=[0.1, 0.5, 0.9], values=np.tile([-1.0, 0.0, 1.0], (3, 1)))
    lo, hi, _ = interval_at(Batch(q, np.zeros(3)), 0.8)
    assert np.array_equal(lo, [-1.0] * 3) and np.array_equal(hi, [1.0] * 3)
    assert interval_at(Batch(q, np.zeros(3)), 0.9) is None  # 0.05 is below its levels


# -- coverage, mean_width, interval_score on Interval -----------------------------------------
def test_coverage_width_and_interval_score_equal_mapie() -> None:
    pred, y = _data(500, 1)
    pis = _mapie_intervals(pred)
    cov = metric("coverage", pred, y)
    assert cov["value"] == pytest.approx(mapie_reg.regression_coverage_score(y, pis)[0], abs=0)
    assert cov["level"] == 0.9 and cov["levels"] == [0.9]
    width = metric("mean_width", pred, y)["value"]
    assert width == pytest.approx(mapie_reg.regression_mean_width_score(pis)[0], rel=1e-12)
    score = metric("interval_score", pred, y)
    assert score == pytest.approx(mapie_reg.regression_mwi_score(y, pis, 0.9), rel=1e-12)


def test_interval_without_level_takes_the_options() -> None:
    pred, y = _data(200, 2, level=None)
    pis = _mapie_intervals(pred)
    assert metric("coverage", pred, y, level=0.8)["level"] == 0.8
    got = metric("interval_score", pred, y, levels=[0.8])
    assert got == pytest.approx(mapie_reg.regression_mwi_score(y, pis, 0.8), rel=1e-12)
    with pytest.warns(UndefinedMetricWarning, match="no level"):
        assert metric("interval_score", pred, y) is None


def test_own_level_wins_over_the_options() -> None:
    pred, y = _data(200, 3, level=0.9)
    assert metric("interval_score", pred, y, levels=[0.5]) == metric("interval_score", pred, y)
    assert metric("cwc", pred, y, level=0.5)["level"] == 0.9


# -- cwc -----------------------------------------------------------------------------------------
def _cwc_reference(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, mu: float, eta: float) -> float:
    picp = np.mean((y >= lo) & (y <= hi))
    pinaw = np.mean(hi - lo) / (y.max() - y.min())
    gamma = 1.0 if picp < mu else 0.0
    return float(pinaw * (1 + gamma * np.exp(-eta * (picp - mu))))


@pytest.mark.parametrize("level", [0.5, 0.95])
def test_cwc_is_khosravis_formula_and_gives_mapies_variant(level: float) -> None:
    pred, y = _data(300, 4, level=level)
    got = metric("cwc", pred, y)
    ref = _cwc_reference(pred.lower, pred.upper, y, level, 50.0)
    assert got["value"] == pytest.approx(ref, rel=1e-12)
    # MAPIE's coverage_width_based is another criterion built from the same two parts
    mapie = mapie_reg.coverage_width_based(y, pred.lower, pred.upper, 50.0, level)
    ours = (1 - got["pinaw"]) * math.exp(-50.0 * (got["picp"] - level) ** 2)
    assert ours == pytest.approx(mapie, rel=1e-12)


def test_cwc_undefined_for_constant_targets() -> None:
    pred = P.Interval(np.zeros(4), np.ones(4), level=0.9)
    with pytest.warns(UndefinedMetricWarning, match="constant"):
        assert metric("cwc", pred, np.full(4, 0.5)) is None


# -- size-stratified coverage ------------------------------------------------------------------
@pytest.mark.parametrize("bins", [2, 3, 5])
def test_mapie_strata_equal_regression_ssc_score(bins: int) -> None:
    rng = np.random.default_rng(5)
    n = 301
    lo = rng.normal(size=n)
    hi = lo + rng.uniform(0.1, 3.0, size=n)  # distinct widths: MAPIE's split is well defined
    y = lo + rng.uniform(0, 2.5, size=n)
    got = metric("size_stratified_coverage", P.Interval(lo, hi), y, bins=bins, strata="mapie")
    pis = np.stack([lo, hi], axis=1)[:, :, None]
    assert got["value"] == pytest.approx(mapie_reg.regression_ssc_score(y, pis, bins)[0], abs=0)
    np.testing.assert_allclose(got["coverage"], mapie_reg.regression_ssc(y, pis, bins)[0])


def _ssc_by_stable_argsort(width: np.ndarray, covered: np.ndarray, bins: int) -> list[float]:
    """MAPIE's strata written from its definition: the rows in stable width order cut by
    numpy.array_split into equal-count parts, coverage of each non-empty part."""
    order = np.argsort(width, kind="stable")
    return [
        float(np.mean(covered[order][p]))
        for p in np.array_split(np.arange(width.size), bins)
        if p.size
    ]


@pytest.mark.parametrize("seed", range(6))
def test_mapie_strata_split_tied_widths_by_row_order(seed: int) -> None:
    """The sort-only path of MAPIE's strata (no argsort) against the stable-argsort definition,
    with many tied widths across the cuts, fewer rows than strata, and one row."""
    rng = np.random.default_rng(40 + seed)
    for n, bins in [(1, 3), (2, 5), (37, 4), (500, 7), (2000, 3)]:
        lo = rng.normal(size=n)
        hi = lo + rng.integers(0, 4, size=n) * 0.5  # ties, some of zero width
        y = lo + rng.uniform(-0.2, 1.5, size=n)
        covered = ((y >= lo) & (y <= hi)).astype(float)
        got = metric("size_stratified_coverage", P.Interval(lo, hi), y, bins=bins, strata="mapie")
        assert got["coverage"] == _ssc_by_stable_argsort(hi - lo, covered, bins)
        # the weighted path (argsort) with unit weights gives the same strata
        unit = metric(
            "size_stratified_coverage",
            P.Interval(lo, hi),
            y,
            bins=bins,
            strata="mapie",
            sample_weight=np.ones(n),
        )
        assert got == unit


def test_quantile_strata_keep_ties_together_and_weigh_rows() -> None:
    lo = np.zeros(6)
    hi = np.array([1.0, 1.0, 1.0, 2.0, 3.0, 3.0])
    y = np.array([0.5, 0.5, 5.0, 0.5, 5.0, 0.5])
    w = np.array([1.0, 1.0, 1.0, 3.0, 1.0, 1.0])  # F(1) = 3/8, F(2) = 6/8, F(3) = 1
    got = metric("size_stratified_coverage", P.Interval(lo, hi), y, sample_weight=w, bins=2)
    # stratum ⌈2F⌉: width 1 -> 1, widths 2 and 3 -> 2
    assert got["coverage"] == pytest.approx([2 / 3, 4 / 5])
    assert got["share"] == pytest.approx([3 / 8, 5 / 8])
    assert got["value"] == pytest.approx(2 / 3)
    assert got["violation"] == pytest.approx(0.9 - 2 / 3)
    mean_width = 15 / 8
    np.testing.assert_allclose(got["width_range"], [[1 / mean_width] * 2, [2 / mean_width, 1.6]])


# -- HSIC ----------------------------------------------------------------------------------------
def _hsic_dense(width: np.ndarray, b: np.ndarray, w: np.ndarray, s: float, t: float) -> float:
    """(1/W²) Σ w_i w_j K_ij L̃_ij with L̃ the weighted double centring of L, all N×N."""
    k = np.exp(-((width[:, None] - width[None, :]) ** 2) / s)
    ell = np.exp(-((b[:, None] - b[None, :]) ** 2) / t)
    p = w / w.sum()
    row = ell @ p
    lc = ell - row[:, None] - row[None, :] + p @ ell @ p
    return float(p @ (k * lc) @ p)


@pytest.mark.parametrize("n", [400, 3000])  # 3000: the boxed kernel sum (over 1024 widths)
@pytest.mark.parametrize("weighted", [False, True])
def test_hsic_equals_the_dense_weighted_formula(weighted: bool, n: int) -> None:
    pred, y = _data(n, 6)
    w = np.random.default_rng(7).integers(0, 4, size=n).astype(float) if weighted else None
    got = metric("hsic_width_coverage", pred, y, sample_weight=w, indicator_kernel_size=0.7)
    width = pred.upper - pred.lower
    b = ((y >= pred.lower) & (y <= pred.upper)).astype(float)
    ww = np.ones(n) if w is None else w
    keep = ww > 0
    sd = math.sqrt(np.cov(width[keep], aweights=ww[keep], bias=True))
    ref = _hsic_dense(width[keep], b[keep], ww[keep], 2 * sd * sd, 0.7)
    assert got["value"] == pytest.approx(ref, rel=1e-9)
    assert got["value"] > 0


@pytest.mark.parametrize("n", [300, 2500])
def test_hsic_mapie_statistic_equals_mapie(n: int) -> None:
    pred, y = _data(n, 8)
    got = metric("hsic_width_coverage", pred, y, kernel_size=0.5, statistic="mapie")
    ref = mapie_reg.hsic(y, _mapie_intervals(pred), kernel_sizes=(0.5, 1.0))[0]
    assert got["value"] == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("spread", [0.05, 1.0, 40.0, 5000.0])
def test_boxed_kernel_sum_equals_the_direct_sum(spread: float) -> None:
    """The fast Gauss transform of the HSIC's kernel sum against the direct double sum, for
    values a fraction of a kernel scale apart up to thousands of scales apart (clustered,
    so that most boxes are empty), with centred coefficients (the HSIC's: they cancel)."""
    rng = np.random.default_rng(int(spread))
    u = np.unique(np.r_[rng.normal(size=1500), 30.0 + rng.normal(size=700)] * spread)
    a = rng.normal(size=u.shape[0])
    a -= a.mean()
    d = u[:, None] - u[None, :]
    direct = float(a @ np.exp(-(d * d)) @ a)
    got = intervals._kernel_sum_boxed(u, 1.0, a)
    assert got == pytest.approx(direct, rel=1e-12, abs=1e-13 * float(np.abs(a).sum()) ** 2)


def _pair_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(21)
    n = 2500
    w = rng.integers(0, 4, size=n).astype(float)
    out = [
        ("normal", rng.normal(size=n), rng.normal(size=n)),
        ("weighted", rng.normal(size=n) * 3.0, w * (rng.random(n) < 0.8) - 0.4 * w),
        ("ties", np.round(rng.normal(size=n) * 2.0, 1), rng.normal(size=n)),
        (
            "clusters",
            np.r_[rng.normal(size=1500), 40.0 + rng.normal(size=1000)] * 3.0,
            rng.normal(size=n),
        ),
        ("many scales", rng.uniform(0.0, 150.0, size=n) + 1e5, rng.normal(size=n)),
        ("narrow", 1e-3 * rng.normal(size=n), rng.normal(size=n)),
        ("constant", np.full(n, 2.5), rng.normal(size=n)),
        ("one row", np.array([0.3]), np.array([1.7])),
    ]
    return [(k, t, a - (a.mean() if k != "one row" else 0.0)) for k, t, a in out]


@pytest.mark.parametrize(
    ("case", "t", "a"), _pair_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_box_to_box_kernel_sum_equals_the_direct_sum(
    case: str, t: np.ndarray, a: np.ndarray
) -> None:
    """The box-to-box expansion of Σ_k Σ_l a_k a_l exp(−(t_k − t_l)²) over rows (ties not
    merged) against the direct double sum written from the formula, at 1e-12 of Σ|a_k||a_l|."""
    d = t[:, None] - t[None, :]
    direct = float(a @ np.exp(-(d * d)) @ a)
    got = intervals._kernel_sum_pairs(t, a)
    assert abs(got - direct) <= 1e-12 * float(np.abs(a).sum()) ** 2


def _hsic_by_distinct_widths(width: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """The std-kernel HSIC over the distinct widths with the fast Gauss transform (the other
    path: merged ties, Taylor series per target)."""
    u, inv = np.unique(width, return_inverse=True)
    p = w / w.max()
    cbar = float(np.sum(w * b) / np.sum(w))
    a = np.bincount(inv, weights=p * (b - cbar))
    sd = math.sqrt(np.cov(width, aweights=w, bias=True))
    kernel = intervals._kernel_sum_boxed(u, math.sqrt(2.0) * sd, a)
    return 2.0 * (1.0 - math.exp(-1.0)) * kernel / float(np.sum(p)) ** 2


@pytest.mark.parametrize("weighted", [False, True])
def test_hsic_of_many_distinct_widths_is_defined_by_default(weighted: bool) -> None:
    """60,000 continuous widths were over the default max_distinct (undefined); the box-to-box
    path needs no distinct widths, and agrees with the fast Gauss transform over them."""
    n = 60_000
    pred, y = _data(n, 22)
    w = np.random.default_rng(23).integers(1, 5, size=n).astype(float) if weighted else None
    got = metric("hsic_width_coverage", pred, y, sample_weight=w)
    width = pred.upper - pred.lower
    b = ((y >= pred.lower) & (y <= pred.upper)).astype(float)
    ref = _hsic_by_distinct_widths(width, b, np.ones(n) if w is None else w)
    assert got["value"] == pytest.approx(ref, rel=1e-10) and got["distinct_widths"] is None


def test_hsic_of_widths_over_very_many_scales_merges_ties() -> None:
    """Widths spread over far more kernel scales than rows/16 boxes take the distinct-width
    path; the value is still the dense formula's."""
    rng = np.random.default_rng(24)
    n = 1500
    lo = rng.normal(size=n)
    hi = lo + np.exp(rng.uniform(-2, 12, size=n))
    y = lo + rng.uniform(0, 1.0, size=n) * (hi - lo) * rng.uniform(0.5, 1.5, size=n)
    got = metric("hsic_width_coverage", P.Interval(lo, hi), y, kernel_size=0.5)
    width = hi - lo
    b = ((y >= lo) & (y <= hi)).astype(float)
    ref = _hsic_dense(width, b, np.ones(n), 0.5, 1.0)
    assert got["distinct_widths"] == n
    assert got["value"] == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_hsic_is_zero_for_constant_widths_or_full_coverage() -> None:
    lo = np.arange(10.0)
    y = lo + np.r_[np.full(5, 0.5), np.full(5, 3.0)]
    assert metric("hsic_width_coverage", P.Interval(lo, lo + 1.0), y)["value"] == 0.0
    all_in = metric("hsic_width_coverage", P.Interval(lo - 5, lo + np.arange(10.0) + 5), y)
    assert all_in["value"] == 0.0 and all_in["coverage"] == 1.0


def test_hsic_std_kernel_reads_rounding_noise_in_equal_widths_as_constant() -> None:
    """Bounds made as centre ± 0.1 give widths equal up to rounding (u − l is not exactly 0.2 for
    most centres); with the "std" kernel (scaled to the widths' spread) that noise must not
    read as a width that depends on coverage: the value is that of exactly equal widths."""
    centre = np.linspace(-3.7, 1e6 / 3.0, 40)
    lo, hi = centre - 0.1, centre + 0.1
    assert np.unique(hi - lo).shape[0] > 1  # the noise is there
    y = centre + np.r_[np.full(20, 0.05), np.full(20, 3.0)]  # covered: the first half only
    noisy = metric("hsic_width_coverage", P.Interval(lo, hi), y)
    exact = metric("hsic_width_coverage", P.Interval(lo, lo + 0.25), y)
    assert exact["value"] == 0.0 and noisy["value"] == 0.0


def test_hsic_refuses_quadratic_work_beyond_max_distinct() -> None:
    pred, y = _data(200, 9)
    with pytest.warns(UndefinedMetricWarning, match="over max_distinct = 50"):
        assert metric("hsic_width_coverage", pred, y, max_distinct=50) is None


# -- binomial test -------------------------------------------------------------------------------
def _binom_two_sided(k: int, n: int, p: float) -> float:
    """Sum of the probabilities of the counts no more likely than k (exact binomial test)."""
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    return min(1.0, sum(v for v in pmf if v <= pmf[k] * (1 + 1e-7)))


@pytest.mark.parametrize(("n", "level"), [(40, 0.9), (25, 0.5), (60, 0.8)])
def test_coverage_pvalue_is_the_exact_binomial_test(n: int, level: float) -> None:
    pred, y = _data(n, 10, level=level)
    got = metric("coverage_pvalue", pred, y)
    k = int(np.sum((y >= pred.lower) & (y <= pred.upper)))
    assert got["covered"] == k and got["n"] == n
    assert got["value"] == pytest.approx(_binom_two_sided(k, n, level), rel=1e-9)


def test_coverage_pvalue_counts_integer_weights_as_rows() -> None:
    pred, y = _data(30, 11)
    w = np.random.default_rng(12).integers(0, 4, size=30)
    idx = np.repeat(np.arange(30), w)
    a = metric("coverage_pvalue", pred, y, sample_weight=w.astype(float))
    b = metric("coverage_pvalue", pred.take(idx), y[idx])
    assert a == b
    with pytest.raises(Exception, match="needs integer sample weights"):
        metric("coverage_pvalue", pred, y, sample_weight=np.full(30, 0.5))


def test_quantiles_not_spanning_the_level_are_undefined() -> None:
    q = P.Quantiles(levels=[0.25, 0.5, 0.75], values=np.tile([-1.0, 0.0, 1.0], (4, 1)))
    y = np.array([-2.0, 0.0, 0.5, 3.0])
    for name in ("cwc", "size_stratified_coverage", "hsic_width_coverage", "coverage_pvalue"):
        with pytest.warns(UndefinedMetricWarning, match="does not span"):
            assert metric(name, q, y) is None
    assert metric("cwc", q, y, level=0.5)["picp"] == 0.5


# -- bootstrap -----------------------------------------------------------------------------------
def test_bootstrap_resamples_equal_the_metrics_on_resampled_rows() -> None:
    pred, y = _data(80, 13)
    names = ["coverage", "interval_score", "cwc", "size_stratified_coverage", "coverage_pvalue"]
    b = 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        r = bootstrap(pred, y, names, n_resamples=b, seed=3, keep_values=True)
    resampler = Resampler(80)
    for i in range(b):
        idx = counts_to_indices(resampler.counts(3, i))
        for name in names:
            ref = metric(name, pred.take(idx), y[idx])
            ref = ref["value"] if isinstance(ref, dict) else ref
            assert r[name]["values"][i] == pytest.approx(ref, rel=1e-10, abs=1e-12), (name, i)
    assert r["coverage"]["low"] <= r["coverage"]["value"] <= r["coverage"]["high"]


@pytest.mark.parametrize("weighted", [False, True])
def test_the_interval_metrics_of_a_kept_batch_share_their_rows(
    monkeypatch: pytest.MonkeyPatch, weighted: bool
) -> None:
    """In a reusing_batches block (a worker's small job) the four interval metrics at one
    level read one set of rows; at another level, rows of their own; the values are those of
    separate calls."""
    import uqcore

    rng = np.random.default_rng(40)
    mu, sd = rng.normal(size=300), rng.uniform(0.3, 2.0, size=300)
    pred, y = P.Gaussian(mu, sd), mu + sd * rng.standard_t(3, size=300)
    w = rng.integers(0, 4, size=300).astype(float) if weighted else None
    names = ["cwc", "coverage_pvalue", "size_stratified_coverage", "hsic_width_coverage"]
    built: list[float] = []
    real = intervals._Rows.__init__

    def counted(self: Any, batch: Any, level: Any) -> None:
        built.append(level)
        real(self, batch, level)

    alone = {name: metric(name, pred, y, sample_weight=w) for name in names}
    monkeypatch.setattr(intervals._Rows, "__init__", counted)
    with uqcore.reusing_batches():
        got = uqcore.evaluate(pred, y, metrics=names, sample_weight=w)
        assert built == [0.9]
        other = uqcore.evaluate(
            pred, y, metrics=["cwc"], sample_weight=w, params={"cwc": {"level": 0.5}}
        )
    assert built == [0.9, 0.5]
    assert other["cwc"] == metric("cwc", pred, y, sample_weight=w, level=0.5)
    for name in names:
        assert got[name] == alone[name], name
