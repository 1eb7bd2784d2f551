"""Calibration metrics against plain float64 references written from their formulas, and the
compatibility mode against Uncertainty Toolbox's own functions."""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import matplotlib
import numpy as np
import pytest
import scipy.stats

from tests.factories import make_prediction, to_backend
from uqcore import UQValidationError, metric
from uqcore import predictions as P
from uqcore.regression.calibration import DEFAULT_LEVELS, CalibrationCurve, calibration_curve
from uqcore.regression.recalibration import fit_isotonic

matplotlib.use("Agg")
warnings.filterwarnings("ignore", category=DeprecationWarning)

import uncertainty_toolbox as uct  # noqa: E402

RTOL = 1e-10
GRID = [i / 100 for i in range(1, 100)]

# -- plain references -----------------------------------------------------------------------


def _pit_loop(pred: Any, y: np.ndarray) -> list[float]:
    """F_i(y_i) row by row with scipy.stats (independent of uqcore's CDFs)."""
    a = {k: np.asarray(v) for k, v in pred.arrays().items()}
    out = []
    for i in range(len(y)):
        if pred.kind == "gaussian":
            out.append(scipy.stats.norm.cdf(y[i], a["mean"][i], a["std"][i]))
        elif pred.kind == "laplace":
            out.append(scipy.stats.laplace.cdf(y[i], a["loc"][i], a["scale"][i]))
        elif pred.kind == "student_t":
            out.append(scipy.stats.t.cdf(y[i], a["df"][i], a["loc"][i], a["scale"][i]))
        elif pred.kind == "mixture":
            out.append(
                sum(
                    wk * scipy.stats.norm.cdf(y[i], mk, sk)
                    for wk, mk, sk in zip(a["weights"][i], a["means"][i], a["stds"][i], strict=True)
                )
            )
        elif pred.kind == "samples":
            out.append(sum(1.0 for d in a["draws"][i] if d <= y[i]) / a["draws"].shape[1])
        else:
            raise ValueError(pred.kind)
    return [float(v) for v in out]


def _ref_props(u: list[float], w: list[float], kind: str, levels: list[float]) -> list[float]:
    tw = sum(w)
    out = []
    for p in levels:
        acc = 0.0
        for ui, wi in zip(u, w, strict=True):
            inside = ui <= p if kind == "quantile" else (1 - p) / 2 <= ui <= (1 + p) / 2
            acc += wi if inside else 0.0
        out.append(acc / tw)
    return out


def _ref_quantiles_props(
    lv: list[float], vals: np.ndarray, y: np.ndarray, w: list[float], kind: str
) -> tuple[list[float], list[float]]:
    tw = sum(w)
    exp, obs = [], []
    if kind == "quantile":
        for j, p in enumerate(lv):
            exp.append(p)
            obs.append(sum(wi for i, wi in enumerate(w) if y[i] <= vals[i, j]) / tw)
        return exp, obs
    pairs = []
    for j, p in enumerate(lv):
        for k, q in enumerate(lv):
            if p < 0.5 and abs(q - (1 - p)) < 1e-9:
                pairs.append((q - p, j, k))
    for cov, j, k in sorted(pairs):
        exp.append(cov)
        obs.append(sum(wi for i, wi in enumerate(w) if vals[i, j] <= y[i] <= vals[i, k]) / tw)
    return exp, obs


def _ref_area(x: list[float], d: list[float]) -> float:
    total = 0.0
    for j in range(len(x) - 1):
        xl, xr, dl, dr = x[j], x[j + 1], d[j], d[j + 1]
        if (dl > 0 and dr < 0) or (dl < 0 and dr > 0):
            x0 = xl + (xr - xl) * abs(dl) / (abs(dl) + abs(dr))
            total += 0.5 * abs(dl) * (x0 - xl) + 0.5 * abs(dr) * (xr - x0)
        else:
            total += 0.5 * (xr - xl) * (abs(dl) + abs(dr))
    return total


def _close(a: float | None, b: float, rtol: float = RTOL) -> None:
    assert a is not None
    assert math.isclose(a, b, rel_tol=rtol, abs_tol=1e-13), (a, b)


def _case(kind: str, n: int, seed: int, style: str) -> tuple[Any, np.ndarray, np.ndarray]:
    pred, y = make_prediction(kind, n, seed, ties=(style == "ties"))
    rng = np.random.default_rng(seed + 100)
    if style == "heavy":
        y = np.asarray(y) + rng.standard_cauchy(n) * 5
    if style == "range" and kind == "gaussian":
        sd = 10.0 ** rng.uniform(-6, 6, n)
        mu = rng.normal(size=n) * 1e3
        pred = P.Gaussian(mu, sd)
        y = mu + sd * rng.normal(size=n)
    w = rng.integers(0, 4, size=n).astype(float)
    w[0] = max(w[0], 1.0)
    if style == "real_weights":
        w = rng.uniform(0.1, 3.0, size=n)
    return pred, np.asarray(y, dtype=float), w


CDF_KINDS = ("gaussian", "laplace", "student_t", "mixture", "samples")
STYLES = ("plain", "ties", "heavy", "range", "real_weights")


@pytest.mark.parametrize("kind", CDF_KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 40])
@pytest.mark.parametrize("style", STYLES)
def test_average_calibration_against_reference(kind: str, n: int, style: str) -> None:
    pred, y, w = _case(kind, n, seed=n + 7, style=style)
    u = _pit_loop(pred, y)
    for weights in (None, w):
        ww = [1.0] * n if weights is None else list(weights)
        for pt in ("interval", "quantile"):
            obs = _ref_props(u, ww, pt, GRID)
            d = [o - p for o, p in zip(obs, GRID, strict=True)]
            _close(
                metric("ece", pred, y, sample_weight=weights, prop_type=pt),
                sum(abs(v) for v in d) / len(d),
            )
            _close(
                metric("rmsce", pred, y, sample_weight=weights, prop_type=pt),
                math.sqrt(sum(v * v for v in d) / len(d)),
            )
            full = [0.0, *GRID, 1.0]
            obs_full = _ref_props(u, ww, pt, full)
            _close(
                metric("miscalibration_area", pred, y, sample_weight=weights, prop_type=pt),
                _ref_area(full, [o - p for o, p in zip(obs_full, full, strict=True)]),
            )
            sq = sum(v * v for v in d)
            _close(metric("calibration_error", pred, y, sample_weight=weights, prop_type=pt), sq)
            _close(
                metric(
                    "calibration_error",
                    pred,
                    y,
                    sample_weight=weights,
                    prop_type=pt,
                    level_weights="mean",
                ),
                sq / len(d),
            )
            curve = calibration_curve(pred, y, prop_type=pt, sample_weight=weights)
            np.testing.assert_allclose(curve.observed, obs, rtol=RTOL, atol=1e-14)


def test_calibration_error_defaults_to_quantile_proportions() -> None:
    pred, y, _ = _case("gaussian", 30, 3, "plain")
    a = metric("calibration_error", pred, y)
    b = metric("calibration_error", pred, y, prop_type="quantile")
    c = metric("calibration_error", pred, y, prop_type="interval")
    assert a == b and a != c


@pytest.mark.parametrize("n", [1, 2, 3, 60])
@pytest.mark.parametrize("weighted", [False, True])
def test_quantiles_kind_uses_its_own_levels(n: int, weighted: bool) -> None:
    pred, y, w = _case("quantiles", n, seed=n, style="plain")
    weights = w if weighted else None
    ww = list(w) if weighted else [1.0] * n
    lv = [float(v) for v in np.asarray(pred.levels)]
    vals = np.asarray(pred.values)
    for pt in ("interval", "quantile"):
        exp, obs = _ref_quantiles_props(lv, vals, y, ww, pt)
        d = [o - e for o, e in zip(obs, exp, strict=True)]
        _close(
            metric("ece", pred, y, sample_weight=weights, prop_type=pt),
            sum(abs(v) for v in d) / len(d),
        )
        _close(
            metric("rmsce", pred, y, sample_weight=weights, prop_type=pt),
            math.sqrt(sum(v * v for v in d) / len(d)),
        )
        x = [0.0, *exp, 1.0]
        o = [0.0, *obs, 1.0]
        _close(
            metric("miscalibration_area", pred, y, sample_weight=weights, prop_type=pt),
            _ref_area(x, [a - b for a, b in zip(o, x, strict=True)]),
        )
        curve = calibration_curve(pred, y, prop_type=pt, sample_weight=weights)
        np.testing.assert_allclose(curve.expected, exp, rtol=RTOL)
        np.testing.assert_allclose(curve.observed, obs, rtol=RTOL, atol=1e-14)


def test_quantiles_without_pairs_is_undefined() -> None:
    pred = P.Quantiles([0.1, 0.5, 0.7], np.array([[0.0, 1.0, 2.0]]))
    with pytest.warns(UserWarning, match="no symmetric pair"):
        assert metric("ece", pred, np.array([0.5])) is None
    assert metric("ece", pred, np.array([0.5]), prop_type="quantile") is not None


def test_curve_is_a_frozen_dataclass_with_default_grid() -> None:
    pred, y, _ = _case("gaussian", 10, 1, "plain")
    c = calibration_curve(pred, y)
    assert isinstance(c, CalibrationCurve)
    assert c.levels == DEFAULT_LEVELS == tuple(GRID) and c.expected == c.levels
    assert c.prop_type == "interval"
    with pytest.raises(AttributeError):
        c.prop_type = "quantile"  # type: ignore[misc]


def test_one_sided_proportions_are_the_textbook_ones() -> None:
    # y far above every predicted median: P(y <= q_p) = 0 for p < 1/2 (UT's mirror gives 1).
    pred = P.Gaussian(np.zeros(5), np.ones(5))
    y = np.full(5, 10.0)
    c = calibration_curve(pred, y, prop_type="quantile", levels=[0.1, 0.9])
    assert c.observed == (0.0, 0.0)
    ut = calibration_curve(
        pred, y, prop_type="quantile", levels=[0.1, 0.9], compat="uncertainty_toolbox"
    )
    assert ut.observed == (1.0, 1.0)


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"prop_type": "centred"}, "prop_type must be"),
        ({"levels": [0.5, 0.2]}, "strictly increasing"),
        ({"levels": [0.5, 1.2]}, r"levels\[1\]"),
        ({"levels": []}, "non-empty"),
        ({"compat": "ut"}, "compat must be"),
    ],
)
def test_bad_options_raise(opts: dict[str, Any], match: str) -> None:
    pred, y, _ = _case("gaussian", 5, 1, "plain")
    with pytest.raises(UQValidationError, match=match):
        metric("ece", pred, y, **opts)


def test_compat_needs_gaussian() -> None:
    pred, y, _ = _case("laplace", 5, 1, "plain")
    with pytest.raises(UQValidationError, match="gaussian"):
        metric("ece", pred, y, compat="uncertainty_toolbox")


# -- Uncertainty Toolbox compatibility -------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 3, 150])
def test_compat_matches_uncertainty_toolbox(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.2, 2.0, size=n)
    y = mu + sd * rng.standard_t(4, size=n)
    if seed == 2:  # ties and exact hits at the centre
        y = np.round(y, 1)
        y[: n // 3] = mu[: n // 3]
    pred = P.Gaussian(mu, sd)
    ut = "uncertainty_toolbox"
    for pt in ("interval", "quantile"):
        exp, obs = uct.metrics_calibration.get_proportion_lists_vectorized(mu, sd, y, prop_type=pt)
        c = calibration_curve(pred, y, prop_type=pt, compat=ut)
        np.testing.assert_allclose(c.expected, exp, rtol=1e-12)
        np.testing.assert_array_equal(c.observed, obs)
        _close(
            metric("ece", pred, y, prop_type=pt, compat=ut),
            uct.mean_absolute_calibration_error(mu, sd, y, prop_type=pt),
            1e-9,
        )
        _close(
            metric("rmsce", pred, y, prop_type=pt, compat=ut),
            uct.root_mean_squared_calibration_error(mu, sd, y, prop_type=pt),
            1e-9,
        )
        _close(
            metric("miscalibration_area", pred, y, prop_type=pt, compat=ut),
            uct.miscalibration_area(mu, sd, y, prop_type=pt),
            1e-9,
        )
    _close(metric("sharpness", pred, y), float(uct.sharpness(sd)), 1e-12)
    levels = np.linspace(0, 1, 37)
    _close(
        metric("ece", pred, y, compat=ut, levels=levels),
        uct.mean_absolute_calibration_error(mu, sd, y, num_bins=37),
        1e-9,
    )


# -- PIT -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CDF_KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 50])
def test_pit_against_reference(kind: str, n: int) -> None:
    pred, y, w = _case(kind, n, seed=n + 3, style="ties" if kind == "samples" else "plain")
    u = _pit_loop(pred, y)
    for weights in (None, w):
        ww = [1.0] * n if weights is None else list(weights)
        tw = sum(ww)
        # sup_t |F_w(t) - t| is attained at a PIT value (from the left or the right).
        d = 0.0
        for t in u:
            f_right = sum(wi for ui, wi in zip(u, ww, strict=True) if ui <= t) / tw
            f_left = sum(wi for ui, wi in zip(u, ww, strict=True) if ui < t) / tw
            d = max(d, f_right - t, t - f_left)
        hist = [0.0] * 10
        for ui, wi in zip(u, ww, strict=True):
            hist[min(int(ui * 10), 9)] += wi / tw
        r = metric("pit", pred, y, sample_weight=weights)
        _close(r["value"], d)
        assert r["ks_statistic"] == r["value"]
        np.testing.assert_allclose(r["histogram"], hist, rtol=RTOL, atol=1e-14)
        n_eff = tw**2 / sum(v * v for v in ww)
        _close(r["n_eff"], n_eff)
        _close(r["p_value"], float(scipy.stats.kstwo.sf(d, max(1, round(n_eff)))), 1e-9)
        if weights is None and kind != "samples":
            ks = scipy.stats.kstest(u, "uniform", method="exact")
            _close(r["value"], float(ks.statistic))
            _close(r["p_value"], float(ks.pvalue), 1e-9)


def test_pit_p_value_methods() -> None:
    rng = np.random.default_rng(11)
    n = 2000
    pred = P.Gaussian(mean=np.zeros(n), std=np.ones(n))
    y = rng.normal(scale=1.1, size=n)
    u = scipy.stats.norm.cdf(y)
    d = float(scipy.stats.kstest(u, "uniform").statistic)
    exact = metric("pit", pred, y, p_value="exact")
    asym = metric("pit", pred, y, p_value="asymptotic")
    auto = metric("pit", pred, y)
    assert exact["p_value_method"] == "exact" == auto["p_value_method"]
    assert asym["p_value_method"] == "asymptotic"
    _close(exact["p_value"], float(scipy.stats.kstwo.sf(d, n)), 1e-9)
    # Kolmogorov's limit law: P(K > D·sqrt(n)) = 2 Σ_k≥1 (−1)^(k−1) exp(−2k²nD²)
    t = d * math.sqrt(n)
    series = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * t * t) for k in range(1, 200))
    _close(asym["p_value"], series, 1e-9)
    assert asym["value"] == exact["value"]
    with pytest.raises(UQValidationError, match="p_value must be one of"):
        metric("pit", pred, y, p_value="bootstrap")


def test_pit_auto_is_the_exact_law_at_large_n() -> None:
    """Above n = 10^5 (where earlier versions switched to the limit law) ``auto`` is still the
    finite-n p-value: scipy's exact ``kstwo.sf`` to 1e-11, not Kolmogorov's limit, which
    differs from it by far more there."""
    n = 200_000
    pred = P.Gaussian(mean=np.zeros(n), std=np.ones(n))
    y = np.random.default_rng(12).normal(scale=1.006, size=n)
    got = metric("pit", pred, y)
    assert got["p_value_method"] == "exact"
    d = got["value"]
    exact = float(scipy.stats.kstwo.sf(d, n))
    assert 1e-6 < exact < 0.5  # the quadrature's range (n·D² >= 2.2), a p-value of interest
    _close(got["p_value"], exact, 1e-11)
    limit = float(scipy.stats.kstwobign.sf(d * math.sqrt(n)))
    assert abs(limit - exact) > 1e3 * 1e-11 * exact


# -- ENCE / UCE ----------------------------------------------------------------------------


def _ref_binned(
    sd: np.ndarray, e2: np.ndarray, w: list[float], n_bins: int, how: str
) -> list[tuple[float, float, float]]:
    """(weight, mean σ², mean e²) per non-empty bin: ``how="count"`` equal-weight bins of σ
    (σ_{k−1}, σ_k], ``"width"`` equal-width bins of σ² (σ²_{k−1}, σ²_k], ``"sigma_width"``
    equal-width bins of σ [σ_{k−1}, σ_k) with edges placed as ``numpy.linspace`` places them;
    the ranges are those of the rows of positive weight."""
    n = len(sd)
    order = sorted(range(n), key=lambda i: sd[i])
    tw = sum(w)
    left_closed = how == "sigma_width"
    if how == "sigma_width":
        pos = [sd[i] for i in range(n) if w[i] > 0]
        lo, hi = min(pos), max(pos)
        edges = list(np.linspace(lo, hi, n_bins + 1)[1:-1]) if hi > lo else []
        key = list(sd)
    elif how == "count":
        edges = []
        for k in range(1, n_bins):
            acc = 0.0
            for i in order:
                acc += w[i]
                if acc >= tw * k / n_bins:
                    edges.append(sd[i])
                    break
            else:
                edges.append(sd[order[-1]])
        key = list(sd)
    else:
        var = [s * s for s in sd]
        pos = [var[i] for i in range(n) if w[i] > 0]
        lo, hi = min(pos), max(pos)
        edges = [lo + (hi - lo) * k / n_bins for k in range(1, n_bins)] if hi > lo else []
        key = var
    bins: dict[int, list[int]] = {}
    for i in range(n):
        b = sum(1 for e in edges if (key[i] >= e if left_closed else key[i] > e))
        bins.setdefault(b, []).append(i)
    out = []
    for b in sorted(bins):
        wb = sum(w[i] for i in bins[b])
        if wb > 0:
            v = sum(w[i] * sd[i] ** 2 for i in bins[b]) / wb
            m = sum(w[i] * e2[i] for i in bins[b]) / wb
            out.append((wb, v, m))
    return out


@pytest.mark.parametrize("kind", ["gaussian", "laplace", "mixture", "samples", "recalibrated"])
@pytest.mark.parametrize("n", [1, 2, 3, 45])
@pytest.mark.parametrize("style", ["plain", "ties", "range", "real_weights"])
def test_ence_uce_against_reference(kind: str, n: int, style: str) -> None:
    if kind == "recalibrated":  # a kind whose std is not its ranking uncertainty's cache
        base, y, w = _case("student_t", n, seed=n + 11, style=style)
        pred = fit_isotonic(*_case("student_t", 30, seed=3, style="plain")[:2]).apply(base)
    else:
        pred, y, w = _case(kind, n, seed=n + 11, style=style)
    sd = np.asarray(pred.std())
    e2 = (y - np.asarray(pred.point())) ** 2
    for weights in (None, w):
        ww = [1.0] * n if weights is None else list(weights)
        tw = sum(ww)
        for nb in (1, 4, 10):
            for binning, how in (("count", "count"), ("width", "sigma_width")):
                bins = _ref_binned(sd, e2, ww, nb, how)
                ref = sum(abs(math.sqrt(v) - math.sqrt(m)) / math.sqrt(v) for _, v, m in bins)
                got = metric("ence", pred, y, sample_weight=weights, n_bins=nb, binning=binning)
                _close(got, ref / len(bins))
            bins = _ref_binned(sd, e2, ww, nb, "width")
            ref = sum(wb * abs(m - v) for wb, v, m in bins) / tw
            _close(metric("uce", pred, y, sample_weight=weights, n_bins=nb), ref)


def _netcal_case(seed: int, ties: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    mu = rng.normal(size=n)
    # ties: a few σ, many of them exactly on the edges 0.5 + 4j/K (exact in binary for most K)
    levels = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5]
    sd = rng.choice(levels, size=n) if ties else rng.lognormal(size=n)
    y = mu + sd * rng.normal(size=n) * rng.uniform(0.5, 2.0)
    return mu, sd, y


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("ties", [False, True], ids=["continuous", "ties"])
@pytest.mark.parametrize("n_bins", [1, 2, 4, 5, 8, 10, 16])
def test_ence_width_and_uce_match_netcal(seed: int, ties: bool, n_bins: int) -> None:
    """``binning="width"`` is ``netcal.metrics.ENCE`` (equal-width σ bins, left-closed), also
    where many σ lie exactly on the edges; UCE is ``netcal.metrics.UCE`` wherever no σ² lies
    exactly on an inner edge (there ours is right-closed, as Laves et al.'s code)."""
    netcal = pytest.importorskip("netcal.metrics")
    mu, sd, y = _netcal_case(seed, ties)
    pred = P.Gaussian(mu, sd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # netcal warns on empty bins (NaN means)
        ref_ence = float(netcal.ENCE(bins=n_bins).measure((mu, sd), y))
        ref_uce = float(netcal.UCE(bins=n_bins).measure((mu, sd), y))
    _close(metric("ence", pred, y, n_bins=n_bins, binning="width"), ref_ence, 1e-12)
    if not ties:
        _close(metric("uce", pred, y, n_bins=n_bins), ref_uce, 1e-12)


def test_ence_width_bins_are_left_closed_and_span_the_weighted_rows() -> None:
    """σ = 1, 2, 3 with K = 2: the edge 2 opens the upper bin [2, 3]; rows of zero weight
    outside the range of the others change nothing; a constant σ is one bin."""
    sd = np.array([1.0, 2.0, 3.0, 0.1, 9.0])
    y = np.array([1.0, 4.0, 3.0, 5.0, -7.0])
    pred = P.Gaussian(np.zeros(5), sd)
    w = np.array([1.0, 1.0, 1.0, 0.0, 0.0])
    lower = abs(1.0 - 1.0) / 1.0
    upper = abs(math.sqrt(6.5) - math.sqrt(12.5)) / math.sqrt(6.5)
    got = metric("ence", pred, y, sample_weight=w, n_bins=2, binning="width")
    _close(got, (lower + upper) / 2)
    _close(got, metric("ence", pred.take([0, 1, 2]), y[:3], n_bins=2, binning="width"))
    const = P.Gaussian(np.zeros(3), np.ones(3))
    one_bin = metric("ence", const, y[:3], n_bins=1)
    _close(metric("ence", const, y[:3], n_bins=5, binning="width"), one_bin)
    with pytest.raises(UQValidationError, match="binning"):
        metric("ence", pred, y, binning="equal")


def test_binning_is_a_registry_default_and_recorded_in_the_report() -> None:
    from uqcore import evaluate, registry

    assert registry.get("ence").defaults["binning"] == "count"
    pred, y, _ = _case("gaussian", 30, seed=2, style="plain")
    report = evaluate(pred, y, ["ence"], params={"ence": {"binning": "width"}})
    assert report.params["ence"] == {"n_bins": 10, "binning": "width"}


@pytest.mark.parametrize("ties", [False, True])
def test_ence_width_weights(ties: bool) -> None:
    """Integer weights equal repeated rows, zero weights dropped rows, scaled weights the same
    value, for the equal-width bins."""
    pred, y, w = _case("gaussian", 60, seed=4, style="ties" if ties else "plain")

    def value(p: Any, yy: Any, ww: Any = None) -> float:
        v = metric("ence", p, yy, sample_weight=ww, n_bins=7, binning="width")
        assert isinstance(v, float)
        return v

    idx = np.repeat(np.arange(60), w.astype(int))
    _close(value(pred, y, w), value(pred.take(idx), y[idx]))
    real = np.random.default_rng(5).uniform(0.1, 3.0, size=60)
    _close(value(pred, y, real), value(pred, y, 3.7 * real))
    keep = np.flatnonzero(w > 0)
    _close(value(pred, y, np.where(w > 0, real, 0.0)), value(pred.take(keep), y[keep], real[keep]))


def test_uce_bins_sigma_squared_exactly_at_the_edges() -> None:
    """A row whose σ·σ equals a bin edge belongs to the lower bin, its float neighbour above
    to the next one: the bins are decided on σ² as computed, not on σ against sqrt(edge)."""
    lo_sd, hi_sd = 1.0, 3.0
    lo, hi = lo_sd * lo_sd, hi_sd * hi_sd
    m = 4
    edges = [lo + (hi - lo) * j / m for j in range(1, m)]
    sd = [lo_sd, hi_sd]
    for e in edges:
        root = math.sqrt(e)
        for x in (math.nextafter(root, 0.0), root, math.nextafter(root, math.inf)):
            sd.append(x)
    sd_arr = np.asarray(sd * 3)
    rng = np.random.default_rng(5)
    y = rng.normal(size=sd_arr.shape[0]) * sd_arr
    pred = P.Gaussian(np.zeros_like(y), sd_arr)
    e2 = y * y
    for weights in (None, rng.uniform(0.5, 2.0, size=y.shape[0])):
        ww = [1.0] * len(y) if weights is None else list(weights)
        bins = _ref_binned(sd_arr, e2, ww, m, "width")
        ref = sum(wb * abs(mm - v) for wb, v, mm in bins) / sum(ww)
        _close(metric("uce", pred, y, sample_weight=weights, n_bins=m), ref)


def test_largest_square_root_is_the_boundary_of_the_squares() -> None:
    from uqcore.regression.calibration import _largest_square_root

    rng = np.random.default_rng(0)
    values = [0.0, 5e-324, 1e-320, 1e-300, 0.5, 1.0, 2.0, 3.0, 1e300, sys.float_info.max]
    values += list(10.0 ** rng.uniform(-300, 300, 200)) + list(rng.uniform(0, 10, 200))
    for v in values:
        t = _largest_square_root(v)
        assert t * t <= v, v
        above = math.nextafter(t, math.inf)
        assert above * above > v, v


def test_sharpness_and_mean_std() -> None:
    pred, y, w = _case("mixture", 30, 5, "plain")
    sd = np.asarray(pred.std())
    _close(metric("sharpness", pred, y), math.sqrt(sum(s * s for s in sd) / 30))
    _close(metric("mean_std", pred, y), sum(sd) / 30)
    tw = sum(w)
    _close(
        metric("sharpness", pred, y, sample_weight=w),
        math.sqrt(sum(wi * s * s for wi, s in zip(w, sd, strict=True)) / tw),
    )
    _close(metric("mean_std", pred, y, sample_weight=w), sum(w * sd) / tw)


def test_backends_agree(xp: Any) -> None:
    pred, y, w = _case("gaussian", 64, 2, "plain")
    pb, yb = to_backend(pred, y, xp)
    wb = to_backend(pred, w, xp)[1]
    for name, opts in [
        ("ece", {}),
        ("ece", {"compat": "uncertainty_toolbox"}),
        ("miscalibration_area", {"prop_type": "quantile"}),
        ("calibration_error", {}),
        ("ence", {}),
        ("uce", {}),
    ]:
        _close(
            metric(name, pb, yb, sample_weight=wb, **opts),
            metric(name, pred, y, sample_weight=w, **opts),
            1e-12,
        )
    r = metric("pit", pb, yb, sample_weight=wb)
    _close(r["value"], metric("pit", pred, y, sample_weight=w)["value"], 1e-12)
