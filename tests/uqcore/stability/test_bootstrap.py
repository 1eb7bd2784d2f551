"""Bootstrap: the resampling engine is exact for every registered metric; intervals, BCa,
reproducibility, undefined resamples, coverage."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from tests.factories import KINDS, make_prediction, to_backend
from tests.uqcore.test_registry_invariances import assert_same
from uqcore import predictions as P
from uqcore import registry
from uqcore._compiled import kernels
from uqcore._validation import UQValidationError
from uqcore.batch import Batch
from uqcore.stability import bootstrap
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.weights import Resampler, counts_to_indices

N = 29


def _cases() -> list[Any]:
    out = []
    for spec in registry.specs("regression"):
        for kind in KINDS:
            pred, _ = make_prediction(kind, 5)
            if spec.why_not(pred) is None:
                out.append(pytest.param(spec.name, kind, id=f"{spec.name}-{kind}"))
    return out


def _plain(name: str, pred: Any, y: Any, w: Any = None) -> float:
    """The metric's scalar on explicit arrays (NaN when undefined)."""
    spec = registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        v = registry.call(spec, Batch(pred, y, w))
    if isinstance(v, dict):
        v = v["value"]
    return math.nan if v is None else float(v)


def _engine(name: str, pred: Any, y: Any, w: Any = None, **kw: Any) -> Engine:
    chosen, _ = select_metrics([pred], [name], None)
    return Engine(Batch(pred, y, w), chosen, **kw)


def _same(a: float, b: float, where: str) -> None:
    if math.isnan(a) or math.isnan(b):
        assert math.isnan(a) and math.isnan(b), f"{where}: {a} vs {b}"
    else:
        assert_same(a, b, where)


@pytest.mark.parametrize(("name", "kind"), _cases())
@pytest.mark.parametrize("ties", [False, True])
def test_resample_weights_equal_the_metric_on_resampled_arrays(
    name: str, kind: str, ties: bool
) -> None:
    """The core property: counts as weights == the metric on the index resample (1e-10)."""
    pred, y = make_prediction(kind, N, seed=20, ties=ties)
    resampler = Resampler(N)
    counts = resampler.block(3, [0, 1, 2])
    engine = _engine(name, pred, y)
    got = engine.values([Resample(row) for row in counts])[name]
    for i, row in enumerate(counts):
        idx = counts_to_indices(row)
        _same(float(got[i]), _plain(name, pred.take(idx), y[idx]), f"{name}-{kind}[{i}]")


@pytest.mark.parametrize(("name", "kind"), _cases())
def test_base_weights_and_small_subsets_are_exact(name: str, kind: str) -> None:
    """With integer base weights, and for a small gathered subset, the engine is still exact."""
    pred, y = make_prediction(kind, N, seed=21)
    base = np.random.default_rng(22).integers(1, 3, size=N).astype(float)
    counts = Resampler(N).counts(4, 0).astype(float)
    engine = _engine(name, pred, y, base)
    small = np.zeros(N)
    small[[2, 5, 11]] = [1.0, 2.0, 1.0]
    got = engine.values([Resample(counts), Resample(small)])[name]
    for i, c in enumerate((counts, small)):
        idx = counts_to_indices(c * base)
        _same(float(got[i]), _plain(name, pred.take(idx), y[idx]), f"{name}-{kind}[{i}]")


def _mean_cases() -> list[Any]:
    return [p for p in _cases() if registry.get(p.values[0]).mean_terms is not None]


@pytest.mark.parametrize(("name", "kind"), _mean_cases())
def test_matrix_product_path_equals_per_resample_path(name: str, kind: str) -> None:
    pred, y = make_prediction(kind, N, seed=23)
    w = np.random.default_rng(24).uniform(0.5, 2.0, size=N)
    block = Resampler(N, scheme="poisson").block(5, range(6))
    resamples = [Resample(row) for row in block]
    fast = _engine(name, pred, y, w)
    assert fast.is_mean_type(fast.chosen[0])
    slow = _engine(name, pred, y, w, use_mean_terms=False)
    np.testing.assert_allclose(
        fast.values(resamples)[name], slow.values(resamples)[name], rtol=1e-10
    )


def _data(n: int, seed: int) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    return P.Gaussian(mu, sd), mu + sd * rng.normal(size=n)


def test_same_seed_same_output_and_json() -> None:
    pred, y = _data(60, 1)
    a = bootstrap(pred, y, "all", n_resamples=30, seed=7, method="bca")
    b = bootstrap(pred, y, "all", n_resamples=30, seed=7, method="bca")
    assert json.dumps(a.to_dict(), allow_nan=False) == json.dumps(b.to_dict(), allow_nan=False)
    # other blocks: the same resamples; only the matrix product's rounding may differ
    d = bootstrap(pred, y, "all", n_resamples=30, seed=7, method="bca", block_size=4)
    for name in a:
        assert_same(a[name]["low"], d[name]["low"], name, rtol=1e-12)
        assert_same(a[name]["high"], d[name]["high"], name, rtol=1e-12)
    c = bootstrap(pred, y, ["mae"], n_resamples=30, seed=8)
    assert c["mae"]["low"] != a["mae"]["low"]
    doc = a.to_dict()
    assert doc["seed"] == 7 and doc["n_resamples"] == 30 and doc["method"] == "bca"
    assert doc["resampling"] == {"scheme": "multinomial", "unit": "row"}
    assert doc["level"] == 0.95 and doc["jackknife"]["blocks"] == 60


def test_percentile_interval_matches_a_plain_bootstrap() -> None:
    """Reference: index resamples of the same counts, MAE and RMSE written from the formula."""
    pred, y = _data(80, 2)
    mu = np.asarray(pred.mean())
    r = bootstrap(pred, y, ["mae", "rmse", "mdae"], n_resamples=50, seed=3, keep_values=True)
    resampler = Resampler(80)
    mae, rmse, mdae = [], [], []
    for i in range(50):
        idx = counts_to_indices(resampler.counts(3, i))
        e = y[idx] - mu[idx]
        mae.append(np.mean(np.abs(e)))
        rmse.append(math.sqrt(np.mean(e**2)))
        mdae.append(np.median(np.abs(e)))
    for name, ref in (("mae", mae), ("rmse", rmse), ("mdae", mdae)):
        np.testing.assert_allclose(r[name]["values"], ref, rtol=1e-10)
        lo, hi = np.quantile(ref, [0.025, 0.975])
        assert math.isclose(r[name]["low"], lo, rel_tol=1e-10)
        assert math.isclose(r[name]["high"], hi, rel_tol=1e-10)
        assert math.isclose(r[name]["std"], np.std(ref, ddof=1), rel_tol=1e-10)


def _bca_reference(values: np.ndarray, theta: float, jack: np.ndarray, level: float) -> tuple:
    z0 = ndtri((np.sum(values < theta) + 0.5 * np.sum(values == theta)) / len(values))
    d = jack.mean() - jack
    a = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    out = []
    for z in (ndtri((1 - level) / 2), ndtri((1 + level) / 2)):
        out.append(np.quantile(values, ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))))
    return out[0], out[1], a


def test_bca_matches_a_plain_implementation() -> None:
    """MAE: closed-form influence == delete-one jackknife; mdae: delete-a-block jackknife with
    one row per block (N ≤ K) is the delete-one jackknife."""
    pred, y = _data(40, 4)
    mu = np.asarray(pred.mean())
    e = np.abs(y - mu)
    r = bootstrap(pred, y, ["mae", "mdae"], n_resamples=200, seed=5, method="bca", keep_values=True)
    for name, stat in (("mae", np.mean), ("mdae", np.median)):
        vals = np.asarray(r[name]["values"])
        jack = np.array([stat(np.delete(e, i)) for i in range(40)])
        lo, hi, a = _bca_reference(vals, stat(e), jack, 0.95)
        assert math.isclose(r[name]["acceleration"], a, rel_tol=1e-9, abs_tol=1e-12), name
        assert math.isclose(r[name]["low"], lo, rel_tol=1e-10), name
        assert math.isclose(r[name]["high"], hi, rel_tol=1e-10), name


def test_undefined_resamples_are_counted_and_reported() -> None:
    pred = P.PointUncertainty(np.zeros(5), np.ones(5))
    y = np.array([0.0, 0.0, 0.0, 0.0, 1.0])  # r2 is undefined when row 4 is not drawn
    r = bootstrap(pred, y, ["r2", "mae"], n_resamples=100, seed=0, keep_values=True)
    n_undef = r["r2"]["n_undefined"]
    assert 10 < n_undef < 60
    assert sum(v is None for v in r["r2"]["values"]) == n_undef
    assert r["r2"]["n_valid"] == 100 - n_undef
    assert r["mae"]["n_undefined"] == 0
    assert any("r2: undefined on" in w for w in r.warnings)
    json.dumps(r.to_dict(), allow_nan=False)


def test_biased_metrics_carry_a_warning() -> None:
    pred, y = _data(50, 6)
    r = bootstrap(pred, y, ["ece", "mae"], n_resamples=20)
    assert any("finite-sample bias" in w for w in r["ece"]["warnings"])
    assert not any("finite-sample bias" in w for w in r["mae"]["warnings"])


def test_stratified_and_cluster_bootstrap() -> None:
    rng = np.random.default_rng(7)
    g = np.repeat(np.arange(10), 6)
    # rows of a group share their error: the cluster bootstrap must see wider intervals
    mu = np.zeros(60)
    y = np.repeat(rng.normal(size=10), 6) + 0.01 * rng.normal(size=60)
    pred = P.Gaussian(mu, np.ones(60))
    row = bootstrap(pred, y, ["rmse"], n_resamples=200, seed=1)
    clu = bootstrap(pred, y, ["rmse"], n_resamples=200, seed=1, unit="cluster", groups=g)
    strat = bootstrap(pred, y, ["rmse"], n_resamples=200, seed=1, unit="stratified", groups=g)
    assert clu["rmse"]["std"] > 1.8 * row["rmse"]["std"]
    assert strat["rmse"]["std"] < 0.2 * row["rmse"]["std"]  # groups kept: only noise varies
    assert clu.to_dict()["resampling"] == {
        "scheme": "multinomial",
        "unit": "cluster",
        "n_groups": 10,
    }
    bca = bootstrap(
        pred, y, ["rmse", "mdae"], n_resamples=50, unit="cluster", groups=g, method="bca"
    )
    assert bca.meta["jackknife"]["blocks"] == 10
    with pytest.raises(UQValidationError, match="groups"):
        bootstrap(pred, y, ["mae"], unit="cluster")


def test_validation() -> None:
    pred, y = _data(10, 0)
    with pytest.raises(UQValidationError, match="method"):
        bootstrap(pred, y, ["mae"], method="basic")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="level"):
        bootstrap(pred, y, ["mae"], level=95)
    with pytest.raises(UQValidationError, match="n_resamples"):
        bootstrap(pred, y, ["mae"], n_resamples=0)
    with pytest.raises(UQValidationError, match="seed"):
        bootstrap(pred, y, ["mae"], seed=-1)
    with pytest.raises(UQValidationError, match="unknown keyword"):
        bootstrap(pred, y, ["mae"], n_resamples=5, nonsense=1)
    with pytest.raises(UQValidationError, match="needs"):
        bootstrap(P.PointUncertainty(np.zeros(10), np.ones(10)), y, ["ece"])


def test_backends_agree_with_numpy(xp: Any) -> None:
    pred, y = make_prediction("gaussian", 25, seed=30)
    names = ["mae", "rmse", "ence", "mdae"]
    ref = bootstrap(pred, y, names, n_resamples=8, seed=2)
    pb, yb = to_backend(pred, y, xp)
    got = bootstrap(pb, yb, names, n_resamples=8, seed=2)
    for name in names:
        for key in ("low", "high", "std"):
            assert math.isclose(got[name][key], ref[name][key], rel_tol=1e-9), (name, key)


def _available(*names: str) -> list[str]:
    known = set(registry.names())
    return [n for n in names if n in known]


def test_coverage_of_mean_type_metrics() -> None:
    """Coverage simulation, kept small for CI: 200 repetitions, N = 200, B = 200.

    Data y ~ N(0, 1) with the true predictive N(0, 1); population values MAE = √(2/π),
    RMSE = 1, NLL = ½log(2π) + ½, CRPS = 1/√π. Observed (seed 0): MAE 0.935, RMSE 0.935,
    NLL 0.935, CRPS 0.94 (percentile intervals under-cover slightly at N = 200). The
    acceptance band [0.89, 0.985] is about ±2.5 binomial standard errors around 0.95 with 200
    repetitions; scripts/stability_coverage.py runs the large version (93–97% target).
    """
    truth = {
        "mae": math.sqrt(2 / math.pi),
        "rmse": 1.0,
        "nll": 0.5 * math.log(2 * math.pi) + 0.5,
        "crps": 1 / math.sqrt(math.pi),
    }
    names = _available(*truth)
    reps, n = 200, 200
    hits = dict.fromkeys(names, 0)
    pred = P.Gaussian(np.zeros(n), np.ones(n))
    rng = np.random.default_rng(0)
    for rep in range(reps):
        y = rng.normal(size=n)
        r = bootstrap(pred, y, names, n_resamples=200, seed=rep)
        for name in names:
            hits[name] += r[name]["low"] <= truth[name] <= r[name]["high"]
    for name in names:
        rate = hits[name] / reps
        assert 0.89 <= rate <= 0.985, (name, rate)


def test_poisson_scheme_and_empty_resamples() -> None:
    pred = P.PointUncertainty(np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    y = np.array([0.5, 0.0])
    r = bootstrap(pred, y, ["mae"], n_resamples=200, seed=0, scheme="poisson", keep_values=True)
    # both counts are 0 with probability e^-2: those resamples are undefined, not NaN
    n_empty = r["mae"]["n_undefined"]
    assert 10 < n_empty < 50 and sum(v is None for v in r["mae"]["values"]) == n_empty
    assert any("zero total weight" in w for w in r.warnings)
    assert r.meta["resampling"] == {"scheme": "poisson", "unit": "row"}


def test_all_lists_what_does_not_apply() -> None:
    pred = P.PointUncertainty(np.zeros(30), np.linspace(1, 2, 30))
    y = np.random.default_rng(0).normal(size=30)
    r = bootstrap(pred, y, "all", n_resamples=10)
    doc = r.to_dict()
    assert "mae" in doc["results"] and "ause" in doc["results"]
    assert "ece" in doc["not_applicable"] and "ece" not in doc["results"]
    assert set(doc) >= {"seed", "n_resamples", "method", "level", "resampling", "warnings"}


def test_delete_a_block_jackknife_agrees_with_the_influence_values() -> None:
    """At N = 4000 with K = 100 blocks, the block jackknife's acceleration of a skewed mean
    (MAE of heavy-tailed errors) has the size and sign of the closed-form influence value.

    A third moment from 100 blocks is noisy: partitions 0..3 give 0.42–0.98 of the closed form
    (0.0129); a wrong sign or scale (e.g. no 1/6, or n-scaling) falls outside [0.3, 2]."""
    from uqcore.stability.bootstrap import _jackknife_acceleration

    rng = np.random.default_rng(3)
    n = 4000
    pred = P.PointUncertainty(np.zeros(n), np.ones(n))
    y = rng.standard_t(3, size=n)
    chosen, _ = select_metrics([pred], ["mae"], None)
    fast = Engine(Batch(pred, y), chosen)
    closed = fast.mean_acceleration(fast.chosen[0])
    slow = Engine(Batch(pred, y), chosen, use_mean_terms=False)
    blocks, k = _jackknife_acceleration(slow, slow.chosen, Resampler(n), 0, 100)
    assert k == 100 and closed is not None and closed > 0.002
    assert blocks["mae"] is not None
    assert 0.3 * closed < blocks["mae"] < 2 * closed


BLOCK_METRICS = [
    "spearman",
    "ause",
    "aurg",
    "pit",
    "ece",
    "rmsce",
    "calibration_error",
    "miscalibration_area",
    "adversarial_group_calibration",
    "pearson",
    "corr",
    "r2",
    "coverage",
    "mean_width",
    "mdae",
    "ence",
    "uce",
    "merci",
    "nmerci",
    "cwc",
    "coverage_pvalue",
    "size_stratified_coverage",
    "crps_skill",
    "check_score_skill",
    "interval_score_skill",
    "nll_skill",
    "corp_mcb",
    "corp_dsc",
    "corp_unc",
    # compiled kernels only (numba is a dependency); from 1,024 rows kept (see
    # tests/uqcore/stability/test_hsic_kernel.py), below which a resample goes through the
    # implementation
    "hsic_width_coverage",
]


#: Metrics evaluated resample by resample (no block path), and why.
PER_RESAMPLE: dict[str, str] = {}


def test_every_metric_of_a_gaussian_has_a_block_path() -> None:
    pred, y = _data(50, 39)
    chosen, _ = select_metrics([pred], "all", None)
    engine = Engine(Batch(pred, y), chosen)
    rest = [c.name for c in chosen if not engine.is_mean_type(c) and c.name not in PER_RESAMPLE]
    want = BLOCK_METRICS
    if kernels() is None:  # HSIC's path is compiled only: resample by resample without numba
        want = [m for m in BLOCK_METRICS if m != "hsic_width_coverage"]
        rest = [m for m in rest if m != "hsic_width_coverage"]
    assert sorted(engine._fast) == sorted(rest) == sorted(want)
    assert set(PER_RESAMPLE) <= {c.name for c in chosen}


@pytest.mark.parametrize("scheme", ["multinomial", "poisson"])
def test_block_evaluators_equal_the_metric_on_resampled_arrays(scheme: Any) -> None:
    """The metrics evaluated a block at a time (row sums by one matrix product, cumulative sums
    of the weight matrix along fixed orders) equal the metric on the explicit index resample,
    with integer base weights too, and the per-resample path to 1e-12."""
    pred, y = _data(300, 40)
    base = np.random.default_rng(41).integers(1, 4, size=300).astype(float)
    counts = Resampler(300, scheme=scheme).block(6, range(7))
    chosen, _ = select_metrics([pred], BLOCK_METRICS, None)
    for w in (None, base):
        fast = Engine(Batch(pred, y, w), chosen)
        assert sorted(fast._fast) == sorted(BLOCK_METRICS)
        got = fast.values([Resample(row) for row in counts])
        slow = Engine(Batch(pred, y, w), chosen, use_blocks=False)
        assert not slow._fast
        ref = slow.values([Resample(row) for row in counts])
        for name in BLOCK_METRICS:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-14, err_msg=name)
            for i, row in enumerate(counts):
                idx = counts_to_indices(row if w is None else row * w)
                _same(float(got[name][i]), _plain(name, pred.take(idx), y[idx]), f"{name}[{i}]")


@pytest.mark.parametrize("name", BLOCK_METRICS)
def test_each_block_evaluator_alone_with_small_windows(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone (no cumulative sums shared with other metrics: quantiles and the calibration tally
    are searched and summed without them), with windows, chunks and blocks far smaller than
    N so that every search widens its window and every bin spans several chunks; non-integer
    base weights (the float paths) too. Equal to the per-resample path to 1e-12."""
    from uqcore.stability.blocks import tuning

    monkeypatch.setattr(tuning, "LOCAL_MARGIN_FACTOR", 0)
    monkeypatch.setattr(tuning, "LOCAL_MARGIN", 1)
    monkeypatch.setattr(tuning, "PREFIX_CHUNK", 7)
    monkeypatch.setattr(tuning, "CHUNK", 5)
    monkeypatch.setattr(tuning, "BLOCK_ELEMENTS", 2 * 500)  # two resamples per block
    monkeypatch.setattr(tuning, "LINEAR_EINSUM_MAX", 0)  # row sums by the BLAS product
    pred, y = _data(500, 44)
    counts = Resampler(500).block(8, range(5))
    chosen, _ = select_metrics([pred], [name], None)
    for w in (None, np.random.default_rng(45).uniform(0.5, 2.0, size=500)):
        fast = Engine(Batch(pred, y, w), chosen)
        assert name in fast._fast
        got = fast.values([Resample(row) for row in counts])[name]
        ref = Engine(Batch(pred, y, w), chosen, use_blocks=False)
        np.testing.assert_allclose(
            got, ref.values([Resample(row) for row in counts])[name], rtol=1e-12, atol=1e-14
        )


def test_calibration_block_paths_follow_the_options() -> None:
    """Other levels and proportion types take the block path; Uncertainty Toolbox's z-space
    proportions and non-integer weights for adversarial group calibration do not (and agree)."""
    pred, y = _data(200, 46)
    counts = Resampler(200).block(2, range(4))
    params: dict[str, dict[str, Any]] = {
        "ece": {"prop_type": "quantile", "levels": [0.1, 0.5, 0.9]},
        "calibration_error": {"level_weights": "mean", "prop_type": "interval"},
        "miscalibration_area": {"compat": "uncertainty_toolbox"},
        "adversarial_group_calibration": {"cali_type": "root_mean_sq", "num_trials": 3},
    }
    chosen, _ = select_metrics([pred], list(params), params)
    for w in (None, np.random.default_rng(47).uniform(0.5, 2.0, size=200)):
        fast = Engine(Batch(pred, y, w), chosen)
        assert sorted(fast._fast) == ["adversarial_group_calibration", "calibration_error", "ece"]
        got = fast.values([Resample(r) for r in counts])
        ref = Engine(Batch(pred, y, w), chosen, use_blocks=False)
        ref_values = ref.values([Resample(r) for r in counts])
        for name in params:
            np.testing.assert_allclose(got[name], ref_values[name], rtol=1e-12, atol=1e-14)
    assert np.all(np.isnan(got["adversarial_group_calibration"]))  # non-integer weights


def test_block_evaluators_fall_back_where_their_conditions_fail() -> None:
    pred, y = _data(200, 42)
    ties = P.Gaussian(np.asarray(pred.mean()), np.round(np.asarray(pred.std()), 1))
    params: dict[str, dict[str, Any]] = {"ause": {"grid": 50}, "aurg": {"error": "rmse"}}
    chosen, _ = select_metrics([pred], ["ause", "aurg", "spearman", "mdae"], params)
    engine = Engine(Batch(pred, y), chosen)
    assert sorted(engine._fast) == ["mdae", "spearman"]  # non-default grid / error
    chosen, _ = select_metrics([ties], ["ause", "spearman", "pearson", "pit"], None)
    assert sorted(Engine(Batch(ties, y), chosen)._fast) == ["pit"]  # ties in the uncertainty
    # non-integer weights: the sparsification block falls back resample by resample, exactly
    chosen, _ = select_metrics([pred], ["ause", "aurg"], None)
    w = np.random.default_rng(43).uniform(0.5, 2.0, size=200)
    counts = Resampler(200).block(1, range(3))
    fast = Engine(Batch(pred, y, w), chosen).values([Resample(r) for r in counts])
    slow = Engine(Batch(pred, y, w), chosen, use_blocks=False).values([Resample(r) for r in counts])
    for name in ("ause", "aurg"):
        np.testing.assert_array_equal(fast[name], slow[name])


def test_block_evaluators_report_undefined_resamples() -> None:
    pred = P.Gaussian(np.zeros(6), np.arange(1.0, 7.0))
    y = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # ause undefined without row 5
    counts = np.zeros((2, 6))
    counts[0, [0, 1, 2]] = 2.0
    counts[1] = 1.0
    chosen, _ = select_metrics([pred], ["ause", "spearman"], None)
    engine = Engine(Batch(pred, y), chosen)
    assert "ause" in engine._fast
    got = engine.values([Resample(r) for r in counts])
    assert math.isnan(got["ause"][0]) and math.isfinite(got["ause"][1])
    assert any("every error is zero" in m for m in engine.undefined_reasons["ause"])


def test_bias_note_advises_bca_only_for_the_percentile_interval() -> None:
    rng = np.random.default_rng(0)
    n = 12
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.standard_t(2, size=n)
    pred = P.Gaussian(mu, sd)
    notes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in ("percentile", "bca"):
            res = bootstrap(pred, y, metrics=["r2"], n_resamples=200, seed=0, method=method)
            entry = res.to_dict()["results"]["r2"]
            assert abs(entry["bias"]) > 0.25 * entry["std"]  # a biased case
            notes[method] = [w for w in entry["warnings"] if "standard errors" in w]
    assert len(notes["percentile"]) == 1 and "prefer method='bca'" in notes["percentile"][0]
    assert len(notes["bca"]) == 1 and "BCa interval corrects" in notes["bca"][0]


def test_background_draws_change_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversarial group calibration's random groups run in the helper thread or not: the
    same values, bit for bit, for every metric of the block."""
    from uqcore.stability.blocks import tuning

    pred, y = _data(400, 48)
    counts = Resampler(400).block(3, range(6))
    chosen, _ = select_metrics([pred], "all", None)
    got = {}
    for background in (True, False):
        monkeypatch.setattr(tuning, "BACKGROUND", background)
        engine = Engine(Batch(pred, y), chosen)
        got[background] = engine.values([Resample(row) for row in counts])
    for name, values in got[True].items():
        np.testing.assert_array_equal(values, got[False][name], err_msg=name)
    assert np.all(np.isfinite(got[True]["adversarial_group_calibration"]))


@pytest.mark.parametrize("c", [1e-200, 1e100, 1e160])
def test_block_paths_that_square_the_data_at_extreme_scales(c: float) -> None:
    """The block paths of corr, pearson, r2, ence and uce square the data, as the metrics do:
    at data × c their intervals are those of the data (× c² for uce, undefined beyond
    float64's range)."""
    from tests.factories import scale_prediction

    pred, y = make_prediction("gaussian", 60, seed=30)
    names = ["corr", "pearson", "r2", "ence", "uce"]
    base = bootstrap(pred, y, names, n_resamples=16, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        got = bootstrap(scale_prediction(pred, c), y * c, names, n_resamples=16, seed=1)
    for name in names:
        for key in ("low", "high"):
            b, g = base[name][key], got[name][key]
            if name != "uce":
                assert g == pytest.approx(b, rel=1e-9), (name, key)
            elif c == 1e160:  # about 1e320
                assert g is None, (name, key)
            elif c == 1e100:
                assert g / c / c == pytest.approx(b, rel=1e-9), (name, key)
            else:  # 1e-400: 0 in float64
                assert g is not None and abs(g) < 1e-300, (name, key)


@pytest.mark.parametrize("c", [1e-300, 1e300])
def test_spearman_block_path_with_weights_of_extreme_scale(c: float) -> None:
    """Its block path sums cubes of the total weight: where they would leave float64's range
    the resamples take the implementation, which is scale-free."""
    pred, y = make_prediction("gaussian", 60, seed=31)
    w = np.random.default_rng(32).uniform(0.5, 2.0, size=60)
    base = bootstrap(pred, y, ["spearman"], n_resamples=16, seed=1, sample_weight=w)
    got = bootstrap(pred, y, ["spearman"], n_resamples=16, seed=1, sample_weight=w * c)
    for key in ("low", "high", "std"):
        assert got["spearman"][key] == pytest.approx(base["spearman"][key], rel=1e-9), key


@pytest.mark.parametrize("name", ["ence", "uce"])
def test_binned_block_with_one_sigma_in_some_resamples(name: str) -> None:
    """A block where one resample draws rows of a single σ (one bin) and another several: the
    block path gives each resample the metric on its resampled arrays (the one-bin resample
    once made the block's bin edges ragged and failed the whole bootstrap)."""
    sd = np.array([0.5, 0.5, 0.5, 1.0, 1.0, 2.0])
    pred = P.Gaussian(np.zeros(6), sd)
    y = np.array([0.3, -0.7, 1.1, 0.2, -1.5, 2.5])
    one_sigma = np.array([2.0, 1.0, 3.0, 0.0, 0.0, 0.0])
    several = np.array([1.0, 0.0, 1.0, 2.0, 0.0, 2.0])
    engine = _engine(name, pred, y)
    got = engine.values([Resample(one_sigma), Resample(several)])[name]
    for i, c in enumerate((one_sigma, several)):
        idx = counts_to_indices(c)
        _same(float(got[i]), _plain(name, pred.take(idx), y[idx]), f"{name}[{i}]")


def test_progress_increases_to_one_and_leaves_the_results_unchanged() -> None:
    pred, y = _data(300, 40)
    for method in ("percentile", "bca"):
        seen: list[float] = []
        kw: dict[str, Any] = {"n_resamples": 200, "seed": 3, "method": method, "block_size": 16}
        with_cb = bootstrap(pred, y, ["mae", "ause", "ence"], progress=seen.append, **kw)
        without = bootstrap(pred, y, ["mae", "ause", "ence"], **kw)
        assert json.dumps(with_cb.to_dict()) == json.dumps(without.to_dict())
        assert seen[-1] == 1.0 and all(0 < f <= 1 for f in seen)
        assert all(a < b for a, b in itertools.pairwise(seen)), seen
        # one report per block of 16 resamples (13 blocks), plus BCa's jackknife blocks
        assert len(seen) >= 13


def test_progress_that_raises_stops_the_bootstrap() -> None:
    pred, y = _data(100, 41)
    calls: list[float] = []

    class Stop(Exception):
        pass

    def stop(f: float) -> None:
        calls.append(f)
        raise Stop

    with pytest.raises(Stop):
        bootstrap(pred, y, ["mae"], n_resamples=100, block_size=10, progress=stop)
    assert calls == [0.1]
    with pytest.raises(UQValidationError, match="progress must be a callable"):
        bootstrap(pred, y, ["mae"], n_resamples=10, progress=0.5)  # type: ignore[arg-type]


#: The skill scores and the interval metrics of row sums (block paths on every kind).
SKILL_METRICS = [
    "crps_skill",
    "check_score_skill",
    "interval_score_skill",
    "nll_skill",
    "cwc",
    "coverage_pvalue",
    "size_stratified_coverage",
]


@pytest.mark.parametrize("kind", ["samples", "quantiles", "interval", "laplace"])
@pytest.mark.parametrize("ties", [False, True])
def test_skill_block_paths_equal_the_metric_on_resampled_arrays(kind: str, ties: bool) -> None:
    """The block paths of the skill scores (the prediction's score as row sums, the climatology
    from the cumulative weights along the order of y) and of cwc and coverage_pvalue equal the
    metric on the explicit resample, with integer base weights, tied targets and every kind
    they apply to."""
    pred, y = make_prediction(kind, 120, seed=43, ties=ties)
    names = [m for m in SKILL_METRICS if registry.get(m).why_not(pred) is None]
    assert names  # every kind here has one
    base = np.random.default_rng(44).integers(1, 4, size=120).astype(float)
    counts = Resampler(120).block(5, range(6))
    chosen, _ = select_metrics([pred], names, None)
    for w in (None, base):
        fast = Engine(Batch(pred, y, w), chosen)
        assert sorted(fast._fast) == sorted(names)
        got = fast.values([Resample(row) for row in counts])
        for name in names:
            for i, row in enumerate(counts):
                idx = counts_to_indices(row if w is None else row * w)
                _same(float(got[name][i]), _plain(name, pred.take(idx), y[idx]), f"{name}[{i}]")


def test_skill_block_path_reports_constant_targets_as_undefined() -> None:
    pred = P.Gaussian(np.zeros(6), np.ones(6))
    y = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    chosen, _ = select_metrics([pred], ["crps_skill"], None)
    engine = Engine(Batch(pred, y), chosen)
    assert "crps_skill" in engine._fast
    only_ones = np.array([[2, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    got = engine.values([Resample(row) for row in only_ones])["crps_skill"]
    assert math.isnan(got[0]) and not math.isnan(got[1])
