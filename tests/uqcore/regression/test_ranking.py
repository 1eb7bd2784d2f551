"""Ranking metrics (AUSE, AURG, Spearman, Pearson, MeRCI, n-MeRCI) against plain references."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.special
import scipy.stats

from tests.factories import to_backend
from tests.peers import torch_uncertainty_metrics
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.registry import UndefinedMetricWarning
from uqcore.regression.ranking import (
    aurg,
    ause,
    merci,
    nmerci,
    pearson,
    sparsification_curve,
    spearman,
)

RTOL = 1e-10


def close(a: float | None, b: float | None, rtol: float = RTOL) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-13)


# -- plain references ----------------------------------------------------------------------------
def ref_remaining(u: np.ndarray, err: np.ndarray, w: np.ndarray, r: float) -> float:
    """Mean of ``err`` after removing ``r`` units of weight, most uncertain first.

    Rows with equal ``u`` are removed together at an even rate (the average over all orders of
    the tied rows, by linearity of expectation); the boundary row keeps its remaining weight.
    """
    rows = list(zip(u, err, w, strict=True))
    levels = sorted(set(u), reverse=True)
    left = r
    kept_sum = 0.0
    kept_w = 0.0
    for lv in levels:
        block = [(e, wi) for ui, e, wi in rows if ui == lv]
        m = sum(wi for _, wi in block)
        take = min(left, m)
        left -= take
        keep = 1.0 - take / m if m > 0 else 0.0
        for e, wi in block:
            kept_sum += e * wi * keep
            kept_w += wi * keep
    return kept_sum / kept_w


def ref_oracle(err: np.ndarray, w: np.ndarray, r: float) -> float:
    """Mean of ``err`` after removing ``r`` units of weight, largest errors first."""
    left = r
    s = 0.0
    tot = 0.0
    for i in np.argsort(-err, kind="stable"):
        take = min(left, w[i])
        left -= take
        s += err[i] * (w[i] - take)
        tot += w[i] - take
    return s / tot


def ref_ause(
    u: np.ndarray,
    e: np.ndarray,
    w: np.ndarray,
    *,
    error: str = "mae",
    grid: Any = "exact",
    normalize: bool = True,
    rule: str = "left",
    gain: bool = False,
) -> float | None:
    """AUSE (or AURG with ``gain``) by loops: remove k steps, recompute, then the left Riemann
    sum or the trapezoid rule (``numpy.trapezoid``) over the points, step 1/(number of points)."""
    err = np.abs(e) if error == "mae" else e**2
    f = math.sqrt if error == "rmse" else (lambda v: v)
    total = float(np.sum(w))
    rs = (
        [float(t) for t in range(round(total))]
        if grid == "exact"
        else [k * total / grid for k in range(grid)]
    )
    full = f(sum(err * w) / total)
    ys = []
    for r in rs:
        model = f(ref_remaining(u, err, w, r))
        other = full if gain else f(ref_oracle(err, w, r))
        ys.append((other - model) if gain else (model - other))
    if rule == "left":
        area = sum(ys) / len(rs)
    else:
        area = float(np.trapezoid(ys, dx=1.0 / len(rs)))
        area = area if gain else max(area, 0.0)
    if not normalize:
        return area
    return None if full == 0 else area / full


def data(n: int, seed: int, ties: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.standard_t(2, size=n) * 10.0 ** rng.integers(-2, 3, size=n)  # heavy, wide range
    u = rng.lognormal(size=n)
    y = p + u * rng.standard_cauchy(size=n)
    if ties:
        u = rng.choice([0.5, 1.0, 2.0], size=n)
        y = p + rng.choice([-1.0, 0.0, 0.5, 2.0], size=n)
    return p, u, y


CASES = [
    pytest.param(n, seed, ties, id=f"n{n}-s{seed}-{'ties' if ties else 'cont'}")
    for n in (1, 2, 3, 10, 40)
    for seed in (0, 1)
    for ties in (False, True)
]


@pytest.mark.parametrize(("n", "seed", "ties"), CASES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"error": "rmse"},
        {"normalize": False},
        {"grid": 7},
        {"grid": 20, "error": "rmse"},
        {"rule": "trapezoid"},
        {"rule": "trapezoid", "error": "rmse"},
        {"rule": "trapezoid", "normalize": False},
        {"rule": "trapezoid", "grid": 7},
        {"rule": "trapezoid", "grid": 20, "error": "rmse"},
    ],
    ids=[
        "default",
        "rmse",
        "unnormalised",
        "grid7",
        "grid20-rmse",
        "trapezoid",
        "trapezoid-rmse",
        "trapezoid-unnormalised",
        "trapezoid-grid7",
        "trapezoid-grid20-rmse",
    ],
)
def test_ause_and_aurg_match_reference(
    n: int, seed: int, ties: bool, weighted: bool, opts: dict[str, Any]
) -> None:
    p, u, y = data(n, seed, ties)
    rng = np.random.default_rng(seed + 100)
    w = rng.integers(1, 4, size=n).astype(float) if weighted else np.ones(n)
    pred = P.PointUncertainty(p, u)
    sw = w if weighted else None
    warnings.simplefilter("ignore", UndefinedMetricWarning)
    assert close(ause(pred, y, sample_weight=sw, **opts), ref_ause(u, y - p, w, **opts))
    assert close(aurg(pred, y, sample_weight=sw, **opts), ref_ause(u, y - p, w, gain=True, **opts))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ause_non_integer_weights(seed: int) -> None:
    """MAE exact grid with fractional weights: the digamma continuation, block by block."""
    p, u, y = data(25, seed, ties=True)
    w = np.random.default_rng(seed).uniform(0.1, 3.0, size=25)
    err = np.abs(y - p)

    def exact_sum(keys: np.ndarray, descending_err: bool) -> float:
        # Σ_{j=0}^{m-1} (S - j ē)/(R - j) for a block of weight m, continued to real m as
        # m ē + (S - R ē)(ψ(R + 1) - ψ(R - m + 1)); blocks taken in removal order.
        total = 0.0
        order = np.argsort(-err) if descending_err else None
        blocks = (
            [[i] for i in order]  # type: ignore[union-attr]
            if descending_err
            else [list(np.flatnonzero(keys == lv)) for lv in sorted(set(keys), reverse=True)]
        )
        s_rem = float(np.sum(w * err))
        r_rem = float(np.sum(w))
        for b in blocks:
            m = float(np.sum(w[b]))
            eb = float(np.sum(w[b] * err[b])) / m
            dpsi = scipy.special.digamma(r_rem + 1) - scipy.special.digamma(r_rem - m + 1)
            total += m * eb + (s_rem - r_rem * eb) * dpsi
            s_rem -= m * eb
            r_rem -= m
        return total

    tw = float(np.sum(w))
    mae_full = float(np.sum(w * err)) / tw
    ref = (exact_sum(u, False) - exact_sum(u, True)) / tw / mae_full
    assert close(ause(P.PointUncertainty(p, u), y, sample_weight=w), ref)
    # integer weights through the same path equal the expanded sum
    with pytest.raises(UQValidationError, match="grid=<int>"):
        ause(P.PointUncertainty(p, u), y, sample_weight=w, error="rmse")
    # an integer grid is invariant to scaling the weights
    a = ause(P.PointUncertainty(p, u), y, sample_weight=w, grid=50)
    b = ause(P.PointUncertainty(p, u), y, sample_weight=3.7 * w, grid=50)
    assert close(a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gain", [False, True], ids=["ause", "aurg"])
def test_trapezoid_with_non_integer_weights(seed: int, gain: bool) -> None:
    """The trapezoid rule is the left sum minus half a step of the last point, the curve where
    ⌈W⌉ − 1 units (exact grid) or (K − 1)/K of the weight (grid K) are removed."""
    p, u, y = data(25, seed, ties=True)
    w = np.random.default_rng(seed).uniform(0.1, 3.0, size=25)
    err = np.abs(y - p)
    tw = float(np.sum(w))
    full = float(np.sum(w * err)) / tw
    pred = P.PointUncertainty(p, u)
    fn = aurg if gain else ause
    for grid, step, removed in (
        ("exact", 1.0 / tw, math.ceil(tw) - 1.0),
        (40, 1.0 / 40, 39 * tw / 40),
    ):
        model = ref_remaining(u, err, w, removed)
        last = (full - model) if gain else (model - ref_oracle(err, w, removed))
        left = fn(pred, y, sample_weight=w, grid=grid)
        assert left is not None
        ref = left - step * last / 2 / full
        assert close(fn(pred, y, sample_weight=w, grid=grid, rule="trapezoid"), ref)
    ref40 = ref_ause(u, y - p, w, grid=40, rule="trapezoid", gain=gain)
    assert close(fn(pred, y, sample_weight=w, grid=40, rule="trapezoid"), ref40)


@pytest.mark.parametrize("n", [2, 3, 17, 250])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ause_trapezoid_matches_torch_uncertainty(n: int, seed: int) -> None:
    """torch-uncertainty's ``AUSE`` (scores = u, errors = |e|): ``torch.trapezoid`` over
    α = k/N of the normalised model − oracle curves, i.e. ``rule="trapezoid"`` on the exact
    grid (distinct u: its argsort breaks ties in the uncertainty by position)."""
    tu = torch_uncertainty_metrics()
    import torch

    rng = np.random.default_rng(seed)
    p = rng.normal(size=n)
    u = rng.lognormal(size=n)
    y = p + u * rng.standard_t(3, size=n)
    peer = tu.AUSE()
    peer.update(torch.from_numpy(u), torch.from_numpy(np.abs(y - p)))
    ref = float(peer.compute())
    got = ause(P.PointUncertainty(p, u), y, rule="trapezoid")
    assert got is not None and math.isclose(got, ref, rel_tol=1e-12, abs_tol=1e-15)
    # integer weights are repeated rows for the peer too
    k = rng.integers(1, 4, size=n)
    peer = tu.AUSE()
    idx = np.repeat(np.arange(n), k)
    peer.update(torch.from_numpy(u[idx]), torch.from_numpy(np.abs(y - p)[idx]))
    got = ause(P.PointUncertainty(p, u), y, sample_weight=k.astype(float), rule="trapezoid")
    assert got is not None and math.isclose(got, float(peer.compute()), rel_tol=1e-12)


def test_ties_equal_the_average_over_all_orders() -> None:
    """Enumerate every order of the tied rows: the AUSE is the mean of the untied AUSEs."""
    rng = np.random.default_rng(5)
    n = 7
    p = np.zeros(n)
    y = rng.normal(size=n)
    u = np.array([1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 0.5])
    for error in ("mae", "rmse"):
        vals = []
        blocks = [np.flatnonzero(u == lv) for lv in sorted(set(u), reverse=True)]
        for perms in itertools.product(*(itertools.permutations(b) for b in blocks)):
            order = np.concatenate([np.array(pm) for pm in perms])
            strict = np.empty(n)
            strict[order] = np.arange(n, 0, -1, dtype=float)  # distinct, same block order
            err = np.abs(y) if error == "mae" else y**2
            f = np.sqrt if error == "rmse" else (lambda v: v)
            kept = [float(f(np.mean(err[order[k:]]))) for k in range(n)]
            vals.append(kept)
        mean_curve = np.mean(np.array(vals), axis=0)  # average of the curves over orders
        curve = sparsification_curve(P.PointUncertainty(p, u), y, error=error, grid="exact")
        if error == "mae":
            np.testing.assert_allclose(np.asarray(curve.model), mean_curve, rtol=1e-12)
        else:
            # rmse: the order average is taken on the squared errors, before the root
            msq = np.mean(np.array([[v**2 for v in c] for c in vals]), axis=0)
            np.testing.assert_allclose(np.asarray(curve.model), np.sqrt(msq), rtol=1e-12)


def test_grid_100_matches_fregu856_convention() -> None:
    """fregu856: keep sorted_inds[0:(1 - k/100)·N] rows, normalise by the full error."""
    rng = np.random.default_rng(11)
    n = 500  # divisible by 100: every α_k·N is an integer
    p = rng.normal(size=n)
    u = rng.lognormal(size=n)
    y = p + u * rng.normal(size=n)
    for error in ("mae", "rmse"):
        sq = (y - p) ** 2 if error == "rmse" else np.abs(y - p)
        f = np.sqrt if error == "rmse" else (lambda v: v)
        inds_sigma = np.argsort(u)
        inds_err = np.argsort(sq)
        fractions = np.arange(100) / 100
        model, oracle = [], []
        for k in range(100):
            keep = n - k * n // 100  # exact integer form of int((1 - fraction) * N)
            model.append(float(f(np.mean(sq[inds_sigma[:keep]]))))
            oracle.append(float(f(np.mean(sq[inds_err[:keep]]))))
        m = np.array(model) / oracle[0]
        o = np.array(oracle) / oracle[0]
        pred = P.PointUncertainty(p, u)
        curve = sparsification_curve(pred, y, error=error, grid=100)
        np.testing.assert_allclose(np.asarray(curve.model) / oracle[0], m, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(curve.oracle) / oracle[0], o, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(curve.fractions), fractions)
        ours = ause(pred, y, error=error, grid=100)
        assert close(ours, float(np.mean(m - o)))
        # fregu856 integrates with np.trapz: rule="trapezoid"
        trapz = float(np.trapezoid(m - o, fractions))
        assert close(ause(pred, y, error=error, grid=100, rule="trapezoid"), trapz)


def _tied_curve_reference(u: np.ndarray, err: np.ndarray, removed: float) -> float:
    """Mean error of what is kept after removing ``removed`` rows, the most uncertain first,
    a block of tied uncertainties removed pro rata (each removed unit takes the block's mean
    error): written directly from that definition."""
    kept = len(u) - removed
    count = total = 0.0
    for value in np.unique(u):  # blocks in ascending uncertainty
        block = err[u == value]
        if count + len(block) >= kept:
            return (total + (kept - count) * float(np.mean(block))) / kept
        count += len(block)
        total += float(np.sum(block))
    raise AssertionError("nothing kept")


@pytest.mark.parametrize("grid", [7, 100])
def test_grid_curve_with_tied_uncertainty_matches_the_definition(grid: int) -> None:
    rng = np.random.default_rng(12)
    n = 1003  # not divisible by the grid: fractional removals
    p = rng.normal(size=n)
    u = rng.integers(1, 40, n).astype(np.float64)
    y = p + u * rng.normal(size=n)
    err = np.abs(y - p)
    curve = sparsification_curve(P.PointUncertainty(p, u), y, grid=grid)
    fractions = np.arange(grid) / grid
    want = [_tied_curve_reference(u, err, f * n) for f in fractions]
    np.testing.assert_allclose(np.asarray(curve.model), want, rtol=1e-12)
    oracle = [_tied_curve_reference(err, err, f * n) for f in fractions]
    np.testing.assert_allclose(np.asarray(curve.oracle), oracle, rtol=1e-12)


@pytest.mark.parametrize("error", ["mae", "rmse"])
def test_unit_weight_grid_curve_is_the_weighted_curve_bit_for_bit(error: str) -> None:
    """The unweighted grid curve reads only the blocks its points fall in (no N-long block
    arrays); with weights of one the curve takes the general block path: the same bits,
    across chunks of the prefix sums and with ties."""
    from uqcore._stats import CHUNK_ROWS

    rng = np.random.default_rng(13)
    n = 2 * CHUNK_ROWS + 777
    p = rng.normal(size=n)
    for u in (rng.lognormal(size=n), rng.integers(1, 500, n).astype(np.float64)):
        y = p + u * rng.normal(size=n)
        pred = P.PointUncertainty(p, u)
        for grid in (3, 100, 997):
            a = sparsification_curve(pred, y, error=error, grid=grid)
            b = sparsification_curve(pred, y, error=error, grid=grid, sample_weight=np.ones(n))
            for name in ("fractions", "model", "oracle", "random"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_constant_uncertainty_is_random_minus_oracle_and_perfect_is_zero() -> None:
    rng = np.random.default_rng(3)
    n = 60
    p = rng.normal(size=n)
    y = p + rng.standard_t(3, size=n)
    const = P.PointUncertainty(p, np.full(n, 2.0))
    c = sparsification_curve(const, y, grid="exact")
    area = float(np.mean(np.asarray(c.random) - np.asarray(c.oracle))) / float(c.random[0])
    assert close(ause(const, y), area)
    assert close(aurg(const, y), 0.0)
    perfect = P.PointUncertainty(p, np.abs(y - p))
    assert ause(perfect, y) == 0.0
    # ause + aurg = random - oracle for any uncertainty and any grid
    pred = P.PointUncertainty(p, rng.lognormal(size=n))
    for grid in ("exact", 10):
        total = ause(pred, y, grid=grid) + aurg(pred, y, grid=grid)
        assert close(total, ause(const, y, grid=grid))


def test_ause_undefined_and_options_validated() -> None:
    pred = P.PointUncertainty(np.zeros(3), np.array([1.0, 2.0, 3.0]))
    with pytest.warns(UndefinedMetricWarning):
        assert ause(pred, np.zeros(3)) is None
    assert ause(pred, np.zeros(3), normalize=False) == 0.0
    bad_options = ({"grid": 0}, {"grid": "fine"}, {"grid": True}, {"error": "mse"}, {"rule": "mid"})
    for bad in bad_options:
        with pytest.raises(UQValidationError):
            ause(pred, np.ones(3), **bad)


def test_rule_is_a_registry_default_and_recorded_in_the_report() -> None:
    from uqcore import evaluate, registry

    for name in ("ause", "aurg"):
        assert registry.get(name).defaults["rule"] == "left"
    p, u, y = data(20, 3, ties=False)
    report = evaluate(
        P.PointUncertainty(p, u), y, ["ause", "aurg"], params={"ause": {"rule": "trapezoid"}}
    )
    assert report.params["ause"]["rule"] == "trapezoid"
    assert report.params["aurg"]["rule"] == "left"


def test_ause_on_every_backend(xp: Any) -> None:
    p, u, y = data(40, 4, ties=True)
    w = np.random.default_rng(4).integers(0, 3, size=40).astype(float)
    w[0] = 1.0
    pred = P.PointUncertainty(p, u)
    pb, yb = to_backend(pred, y, xp)
    wb = to_backend(pred, w, xp)[1]
    for opts in ({}, {"error": "rmse"}, {"grid": 30}, {"rule": "trapezoid"}):
        expected = ref_ause(u, y - p, w, **opts)
        assert close(ause(pb, yb, sample_weight=wb, **opts), expected, 1e-9)
    c = sparsification_curve(pb, yb, sample_weight=wb, grid=10)
    assert c.model.shape == (10,)


def test_ause_large_n_is_vectorised() -> None:
    """Closed form vs the step-by-step curve at N = 2·10^5 with ties (no loop over N)."""
    rng = np.random.default_rng(8)
    n = 200_000
    p = rng.normal(size=n)
    u = np.round(rng.lognormal(size=n), 2)
    y = p + u * rng.normal(size=n)
    pred = P.PointUncertainty(p, u)
    c = sparsification_curve(pred, y, grid="exact")
    ref = float(np.mean(np.asarray(c.model) - np.asarray(c.oracle))) / float(c.random[0])
    assert math.isclose(ause(pred, y), ref, rel_tol=1e-9)


# -- correlations --------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "seed", "ties"), CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_correlations_match_scipy(n: int, seed: int, ties: bool, weighted: bool) -> None:
    p, u, y = data(n, seed, ties)
    w = np.random.default_rng(seed).integers(1, 4, size=n) if weighted else np.ones(n, int)
    idx = np.repeat(np.arange(n), w)  # frequency weights = repeated rows
    e = np.abs(y - p)[idx]
    ue = u[idx]
    pred = P.PointUncertainty(p, u)
    sw = w.astype(float) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = scipy.stats.spearmanr(ue, e).statistic if len(set(ue)) > 1 < len(set(e)) else None
        r = scipy.stats.pearsonr(ue, e).statistic if len(set(ue)) > 1 < len(set(e)) else None
        got_rho = spearman(pred, y, sample_weight=sw)
        got_r = pearson(pred, y, sample_weight=sw)
    assert close(got_rho, None if rho is None else float(rho))
    assert close(got_r, None if r is None else float(r))


def test_correlations_undefined_on_constant_input() -> None:
    pred = P.PointUncertainty(np.zeros(4), np.ones(4))
    with pytest.warns(UndefinedMetricWarning):
        assert spearman(pred, np.array([1.0, 2.0, 3.0, 4.0])) is None
    with pytest.warns(UndefinedMetricWarning):
        assert pearson(pred, np.array([1.0, 2.0, 3.0, 4.0])) is None


# -- MeRCI / n-MeRCI ----------------------------------------------------------------------------
def ref_nmerci(
    u: np.ndarray, e: np.ndarray, alpha: float, variant: str = "paper"
) -> tuple[float, float]:
    """(MeRCI, n-MeRCI) by the paper's recipe with numpy percentiles (unit weights)."""
    a = np.abs(e)
    ratios = [
        ai / ui if ui > 0 else (0.0 if ai == 0 else math.inf) for ai, ui in zip(a, u, strict=True)
    ]
    lam = float(np.percentile(ratios, 100 * alpha))
    q = float(np.percentile(a, 100 * alpha))
    mer = lam * float(np.mean(u))
    if variant == "paper":
        mae = float(np.mean(a))
        top = mer
    else:
        inl = [i for i in range(len(a)) if a[i] <= q]
        mae = sum(a[i] for i in inl) / len(inl)
        top = lam * sum(u[i] for i in inl) / len(inl)
    return mer, (top - mae) / (q - mae) if q > mae else math.nan


@pytest.mark.parametrize(("n", "seed", "ties"), [c for c in CASES if c.values[0] >= 3])
@pytest.mark.parametrize("alpha", [0.5, 0.95, 1.0])
@pytest.mark.parametrize("variant", ["paper", "inlier"])
def test_nmerci_matches_reference(
    n: int, seed: int, ties: bool, alpha: float, variant: str
) -> None:
    p, u, y = data(n, seed, ties)
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 3, size=n)
    idx = np.repeat(np.arange(n), w)
    mer, nm = ref_nmerci(u[idx], (y - p)[idx], alpha, variant)
    pred = P.PointUncertainty(p, u)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        got = nmerci(pred, y, sample_weight=w.astype(float), alpha=alpha, variant=variant)
    assert close(merci(pred, y, sample_weight=w.astype(float), alpha=alpha), mer)
    q = float(np.percentile(np.abs(y - p)[idx], 100 * alpha))
    if got is None:  # only when the normaliser is not positive
        a = np.abs(y - p)[idx]
        mae = a.mean() if variant == "paper" else a[a <= q].mean()
        assert q - mae <= 0
    else:
        assert close(got, nm)


def test_nmerci_properties() -> None:
    rng = np.random.default_rng(21)
    n = 300
    p = rng.normal(size=n)
    s = rng.lognormal(size=n)
    y = p + s * rng.normal(size=n)
    for variant in ("paper", "inlier"):
        for alpha in (0.8, 0.95):
            kw = {"alpha": alpha, "variant": variant}
            assert close(nmerci(P.PointUncertainty(p, np.full(n, 0.3)), y, **kw), 1.0)
            assert nmerci(P.PointUncertainty(p, np.abs(y - p)), y, **kw) == 0.0
            base = nmerci(P.PointUncertainty(p, s), y, **kw)
            assert close(nmerci(P.PointUncertainty(p, 123.0 * s), y, **kw), base)
            # scale invariance in the units of y too
            assert close(nmerci(P.PointUncertainty(7 * p, 7 * s), 7 * y, **kw), base)
            assert 0.0 < base < 1.0  # an informative uncertainty beats a constant one


def test_nmerci_zero_uncertainty_convention() -> None:
    e = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    pred = P.PointUncertainty(np.zeros(5), np.array([0.0, 1.0, 1.0, 1.0, 1.0]))
    # σ = 0 with error 0 has ratio 0: covered by any λ
    assert close(merci(pred, e, alpha=1.0), 4.0 * 0.8)
    bad = P.PointUncertainty(np.zeros(5), np.array([1.0, 1.0, 1.0, 1.0, 0.0]))
    # σ = 0 with error 4 has ratio +inf: fine while it is an outlier, undefined otherwise
    assert close(merci(bad, e, alpha=0.75), 3.0 * 0.8)
    with pytest.warns(UndefinedMetricWarning, match="uncertainty 0"):
        assert merci(bad, e, alpha=0.8) is None
    with pytest.warns(UndefinedMetricWarning):
        assert nmerci(bad, e, alpha=1.0) is None


def test_nmerci_validation_and_negative_denominator() -> None:
    pred = P.PointUncertainty(np.zeros(5), np.ones(5))
    y = np.array([1.0, 1.0, 1.0, 1.0, 100.0])
    with pytest.warns(UndefinedMetricWarning, match="inlier"):
        assert nmerci(pred, y, alpha=0.75) is None  # Q = 1 < MAE = 20.8
    for bad in ({"alpha": 0.0}, {"alpha": 1.5}, {"variant": "x"}, {"quantile_method": "x"}):
        with pytest.raises(UQValidationError):
            nmerci(pred, y, **bad)
