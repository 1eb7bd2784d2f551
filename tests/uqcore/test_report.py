"""evaluate() and metric(): applicability, parameters, errors, warnings, JSON provenance."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import warnings
from typing import Any

import numpy as np
import pytest

import uqcore
from tests.factories import KINDS, make_prediction
from uqcore import UQValidationError, evaluate, metric, registry
from uqcore import predictions as P


@pytest.mark.parametrize("kind", KINDS)
def test_all_metrics_report_is_json_without_nan(kind: str) -> None:
    pred, y = make_prediction(kind, 64, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(pred, y, metrics="all")
    doc = report.to_dict()
    text = json.dumps(doc, allow_nan=False)  # raises on NaN/inf
    assert json.loads(text)["uqcore_version"] == uqcore.__version__
    assert doc["prediction_kind"] == kind
    assert doc["n"] == 64
    # every regression metric is either computed or explained
    assert set(doc["values"]) | set(doc["not_applicable"]) == set(registry.names("regression"))
    assert not set(doc["values"]) & set(doc["not_applicable"])
    for name in doc["values"]:
        assert set(doc["params"][name]) == set(registry.get(name).defaults)
    for name, why in doc["not_applicable"].items():
        assert name in why
        assert kind in why


def test_point_uncertainty_is_not_scored_by_distribution_metrics() -> None:
    pred, y = make_prediction("point_uncertainty", 20)
    report = evaluate(pred, y)
    assert "mae" in report
    assert "spearman" in report
    for name in ("nll", "crps", "ece", "calibration_error", "sharpness"):
        assert name in report.not_applicable, name


def test_explicit_list_with_params() -> None:
    pred, y = make_prediction("gaussian", 30)
    report = evaluate(pred, y, metrics=["mae", "mdae"], params={"mdae": {"method": "inverted_cdf"}})
    assert list(report) == ["mae", "mdae"]
    assert report.params["mdae"] == {"method": "inverted_cdf"}
    assert report["mae"] == metric("mae", pred, y)
    assert report.scalar("mae") == report["mae"]


def test_unknown_metric_unknown_param_and_stray_params_are_errors() -> None:
    pred, y = make_prediction("gaussian", 10)
    with pytest.raises(UQValidationError, match="unknown metric 'maee'"):
        evaluate(pred, y, metrics=["maee"])
    with pytest.raises(
        UQValidationError,
        match=re.escape("unknown parameter(s) 'alpha' for metric 'mae'; allowed: none"),
    ):
        evaluate(pred, y, metrics=["mae"], params={"mae": {"alpha": 1}})
    with pytest.raises(UQValidationError, match="params given for metric"):
        evaluate(pred, y, metrics=["mae"], params={"rmse": {}})
    with pytest.raises(UQValidationError, match="at least one metric"):
        evaluate(pred, y, metrics=[])
    with pytest.raises(UQValidationError, match="'all' or a list"):
        evaluate(pred, y, metrics="mae")


def test_inapplicable_metric_requested_explicitly_says_why() -> None:
    pred = P.PointUncertainty([0.0, 1.0], [1.0, 2.0])
    name = next(s.name for s in registry.specs("regression") if s.why_not(pred) is not None)
    with pytest.raises(UQValidationError, match=f"{name} needs"):
        evaluate(pred, np.zeros(2), metrics=[name])
    with pytest.raises(UQValidationError, match=f"{name} needs"):
        metric(name, pred, np.zeros(2))


def test_undefined_value_is_null_with_warning() -> None:
    pred = P.PointUncertainty([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    y = np.full(3, 5.0)
    report = evaluate(pred, y, metrics=["r2", "mae"])
    assert report["r2"] is None
    assert any("r2 is undefined" in w for w in report.warnings)
    with pytest.warns(uqcore.UndefinedMetricWarning, match="targets are constant"):
        assert metric("r2", pred, y) is None


def test_finiteness_check_finds_the_first_bad_entry_and_accepts_overflowing_sums() -> None:
    # The check sums first (a finite sum proves every entry finite): an overflowing sum of
    # finite values must still pass, and a bad entry must still be found by its index.
    big = np.full(4, 1e308)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the overflow of the sum stays internal
        assert metric("mae", P.Gaussian(big, np.ones(4)), big) == 0.0
    pred = P.Gaussian(np.zeros(5), np.ones(5))
    for bad, shown in [(np.inf, "inf"), (-np.inf, "-inf"), (np.nan, "nan")]:
        y = np.array([0.0, 1e308, 1e308, bad, np.nan])
        with pytest.raises(UQValidationError, match=re.escape(f"y must be finite; y[3] = {shown}")):
            metric("mae", pred, y)
    # +inf and -inf cancel to NaN in the sum; both are still caught.
    with pytest.raises(UQValidationError, match=re.escape("y[0] = inf")):
        metric("mae", P.Gaussian(np.zeros(2), np.ones(2)), np.array([np.inf, -np.inf]))


def test_mean_of_squares_equals_the_textbook_expression() -> None:
    rng = np.random.default_rng(4)
    mu, sd, y = rng.normal(size=1001), rng.uniform(0.1, 3.0, size=1001), rng.normal(size=1001)
    w = rng.uniform(0.0, 2.0, size=1001)
    pred = P.Gaussian(mu, sd)
    assert metric("sharpness", pred, y) == pytest.approx(np.sqrt(np.mean(sd**2)), rel=1e-14)
    assert metric("rmse", pred, y) == pytest.approx(np.sqrt(np.mean((y - mu) ** 2)), rel=1e-14)
    want = np.sqrt(np.sum(w * sd**2) / np.sum(w))
    assert metric("sharpness", pred, y, sample_weight=w) == pytest.approx(want, rel=1e-14)


def test_targets_and_weights_are_validated() -> None:
    pred = P.Gaussian([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(
        UQValidationError,
        match=re.escape("y must have the same length as the prediction (2), found 3"),
    ):
        metric("mae", pred, [1.0, 2.0, 3.0])
    with pytest.raises(UQValidationError, match=re.escape("y must be finite; y[1] = nan")):
        metric("mae", pred, [1.0, np.nan])
    with pytest.raises(
        UQValidationError, match=re.escape("sample_weight must be >= 0; sample_weight[0] = -1")
    ):
        metric("mae", pred, [1.0, 2.0], sample_weight=[-1.0, 1.0])
    with pytest.raises(UQValidationError, match="sample_weight must not be all zero"):
        metric("mae", pred, [1.0, 2.0], sample_weight=[0.0, 0.0])
    with pytest.raises(UQValidationError, match="prediction must be a uqcore prediction object"):
        metric("mae", np.zeros(2), [1.0, 2.0])


def test_public_metric_functions_have_documented_signatures() -> None:
    import inspect

    from uqcore.regression.accuracy import mdae

    sig = inspect.signature(mdae)
    assert list(sig.parameters) == ["prediction", "y", "sample_weight", "method"]
    assert sig.parameters["method"].default == "linear"
    assert mdae.spec.name == "mdae"  # type: ignore[attr-defined]


def test_catalogue_description_is_json() -> None:
    for spec in registry.specs():
        json.dumps(spec.describe(), allow_nan=False)


_AGC_WHY = "it draws groups of rows, a row of weight k being k rows"


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("point_uncertainty", "interval")])
def test_fractional_weights_leave_the_default_report_whole(kind: str) -> None:
    """A metric that needs integer weights is not applicable to fractional ones (with the
    reason), in the default report ("all"), instead of failing it."""
    pred, y = make_prediction(kind, 40, seed=2)
    w = np.random.default_rng(3).uniform(0.1, 3.0, size=40)
    w[:2] = [1.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(pred, y, metrics="all", sample_weight=w)
    assert report.not_applicable["adversarial_group_calibration"] == (
        f"adversarial_group_calibration needs integer sample weights ({_AGC_WHY}); "
        f"sample_weight[2] = {w[2]:.6g}"
    )
    json.dumps(report.to_dict(), allow_nan=False)
    assert "adversarial_group_calibration" not in report
    assert "crps" in report
    # asked for by name, it is an error of the argument "metrics"
    with pytest.raises(UQValidationError, match="needs integer sample weights") as info:
        evaluate(pred, y, metrics=["mae", "adversarial_group_calibration"], sample_weight=w)
    assert (info.value.argument, info.value.index) == ("metrics", 1)
    assert info.value.value == "adversarial_group_calibration"
    with pytest.raises(UQValidationError, match="needs integer sample weights"):
        metric("adversarial_group_calibration", pred, y, sample_weight=w)
    # integer weights: computed
    whole = evaluate(pred, y, metrics="all", sample_weight=np.ceil(w))
    assert "adversarial_group_calibration" in whole


def test_integer_weights_needed_under_some_options_only() -> None:
    """AUSE's exact RMSE grid steps whole units of weight; its other options take any."""
    pred, y = make_prediction("gaussian", 30, seed=4)
    w = np.full(30, 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rmse_exact = evaluate(pred, y, sample_weight=w, params={"ause": {"error": "rmse"}})
        rmse_grid = evaluate(
            pred, y, sample_weight=w, params={"ause": {"error": "rmse", "grid": 100}}
        )
        default = evaluate(pred, y, sample_weight=w)
    why = rmse_exact.not_applicable["ause"]
    assert why.startswith("ause with error='rmse', grid='exact' needs integer sample weights")
    assert why.endswith("sample_weight[0] = 1.5")
    assert "ause" in rmse_grid and "ause" in default
    assert registry.get("ause").why_not(pred, sample_weight=np.ones(30) * 2, params=None) is None


def test_resampling_with_fractional_weights_skips_what_needs_integers() -> None:
    from uqcore.stability import bootstrap

    pred, y = make_prediction("gaussian", 40, seed=5)
    w = np.random.default_rng(6).uniform(0.1, 3.0, size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bootstrap(pred, y, metrics="all", sample_weight=w, n_resamples=8, seed=0)
    assert "integer sample weights" in result.not_applicable["adversarial_group_calibration"]
    assert "crps" in result


def test_group_calibration_on_too_many_rows_is_undefined() -> None:
    """numpy draws groups without replacement from fewer than 10^9 rows: beyond that the
    metric is undefined, with the reason, instead of an error from numpy."""
    pred, y = make_prediction("gaussian", 20, seed=7)
    w = np.full(20, 1e8)
    with pytest.warns(registry.UndefinedMetricWarning, match="10\\^9 rows"):
        assert metric("adversarial_group_calibration", pred, y, sample_weight=w) is None
    value = metric(
        "adversarial_group_calibration", pred, y, sample_weight=w, draw_with_replacement=True
    )
    assert value is not None and 0.0 <= value["value"] <= 1.0


def test_metrics_with_their_own_working_memory_run_first_and_leave_nothing_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CORP, the HSIC, the skill scores and the PIT-based metrics run before the others
    (their peaks do not add to the shared arrays), each group in its listed order, and what
    they cached is dropped after them; the report lists the values in the requested order,
    each equal to the metric computed alone."""
    from uqcore import report
    from uqcore.batch import Batch

    rng = np.random.default_rng(3)
    mu, sd = rng.normal(size=500), rng.uniform(0.5, 2.0, 500)
    y = mu + sd * rng.normal(size=500)
    names = [
        "mae",
        "corp_mcb",
        "crps",
        "crps_skill",
        "hsic_width_coverage",
        "corp_dsc",
        "spearman",
        "nll_skill",
        "ece",
    ]
    ran: list[tuple[str, frozenset[str]]] = []
    real = report._run_one

    def spy(spec: registry.MetricSpec, batch: Batch, *args: object) -> object:
        ran.append((spec.name, batch.cached_keys()[0] | batch.cached_keys()[1]))
        return real(spec, batch, *args)

    monkeypatch.setattr(report, "_run_one", spy)
    got = evaluate(P.Gaussian(mu, sd), y, names)
    order = [name for name, _ in ran]
    assert order == [
        "hsic_width_coverage",
        "corp_mcb",
        "corp_dsc",
        "crps_skill",
        "nll_skill",
        "ece",
        "crps",
        "mae",
        "spearman",
    ]
    first_cached = ran[0][1]
    assert ran[1][1] <= first_cached  # the HSIC's caches dropped before CORP
    assert any(k.startswith("corp") for k in ran[2][1])  # the CORP parts share one fit
    assert ran[3][1] <= first_cached  # dropped after the last CORP part
    assert any(k.startswith("skill") for k in ran[4][1])  # the skill scores share the sort
    assert ran[5][1] <= first_cached  # dropped after the skill scores
    assert "pit" in ran[6][1]  # the CRPS reads Φ(z) from the PIT values the ECE made
    assert ran[7][1] <= first_cached  # after every group: only what was cached before
    assert list(got) == names
    for name in names:
        alone = metric(name, P.Gaussian(mu, sd), y)
        assert got[name] == alone, name


def test_forget_since_drops_only_what_was_cached_later() -> None:
    from uqcore.batch import Batch

    batch = Batch(P.Gaussian(np.zeros(4), np.ones(4)), np.arange(4.0))
    batch.shared("a", lambda: 1)
    batch.weighted("b", lambda: 2)
    keys = batch.cached_keys()
    batch.shared("c", lambda: 3)
    batch.weighted("d", lambda: 4)
    batch.forget_since(keys)
    assert batch.cached_keys() == (frozenset({"a"}), frozenset({"b"}))
    assert batch.shared("c", lambda: 5) == 5  # computed again when asked


def test_free_heap_memory_is_given_back_where_glibc_can() -> None:
    """glibc's malloc_trim gives freed heap pages back: the resident set falls after a burst
    of small arrays is freed (where the allocator is not glibc, nothing is asked)."""
    import platform

    from uqcore._memory import release_free_memory

    if not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"):
        assert release_free_memory() is False
        return

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    release_free_memory()
    held = [np.ones(4096) for _ in range(20_000)]  # 32 KiB each: heap, not mapped
    keep = np.ones(16)  # allocated last: the heap's top stays in use
    after_alloc = rss()
    del held
    assert release_free_memory() is True
    assert rss() < after_alloc - 200 * 2**20  # most of the 640 MiB given back
    del keep


def _json_safe_one_by_one(value: Any, where: str, notes: list[str]) -> Any:
    """json_safe's rule element by element: a float that is not finite is null, with a note."""
    out = []
    for i, v in enumerate(value):
        if isinstance(v, float) and not math.isfinite(v):
            notes.append(f"{where}[{i}] was {v} and is reported as null")
            out.append(None)
        else:
            out.append(v)
    return out


@pytest.mark.parametrize(
    "values",
    [
        [0.5 * i for i in range(20)],
        [float(i) for i in range(19)] + [math.nan],
        [math.inf] + [1.0] * 12,
        [1.0] * 7 + [-math.inf, math.inf] + [2.0] * 5,
        [1e308] * 12,  # finite, but their sum overflows
        [-1e308, 1e308] * 6,
        list(range(30)),
        [1, 2.0] * 6,  # mixed types
        [True, False] * 6,
        [0.1, np.float64(0.2)] * 6,
        (1.0,) * 10,
    ],
)
def test_json_safe_lists_are_element_by_element(values: list[Any]) -> None:
    from uqcore.report import json_safe

    notes: list[str] = []
    got = json_safe(values, "curve.x", notes)
    ref_notes: list[str] = []
    ref = _json_safe_one_by_one(values, "curve.x", ref_notes)
    assert got == ref and [type(v) for v in got] == [
        type(v) if not isinstance(v, np.floating) else float for v in ref
    ]
    assert isinstance(got, list) and notes == ref_notes


def test_reported_params_are_each_reports_own_and_the_resolved_options() -> None:
    pred, y = make_prediction("gaussian", 50, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = evaluate(pred, y, metrics="all")
        first.params["coverage"]["levels"].append(0.5)  # a caller changes its own report
        first.params["pit"]["n_bins"] = 3
        second = evaluate(pred, y, metrics="all", params={"ece": {"levels": np.array([0.2, 0.7])}})
    for name, used in second.params.items():
        spec = registry.get(name)
        given = {"levels": np.array([0.2, 0.7])} if name == "ece" else None
        assert used == uqcore.report.json_safe(spec.resolve_params(given), name, []), name
    assert second.params["ece"]["levels"] == [0.2, 0.7]
    assert second.params["pit"]["n_bins"] == 10
    assert second.params["coverage"]["levels"] == list(registry.get("coverage").defaults["levels"])
    assert second.params["coverage"]["levels"] is not first.params["coverage"]["levels"]


def test_a_finalizers_resource_warning_is_no_note_of_a_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ResourceWarning raised while a metric runs comes from a finalizer (an unclosed
    socket collected by the garbage collector, say), not from the metric: it is no note of
    the report (beside a skill score that shares the score too); the metric's own warnings
    still are. (A bootstrap's resamples filter the same way, in uqcore.stability._engine.)"""
    spec = registry.get("crps", "regression")

    def noisy(batch: Any, **params: Any) -> Any:
        warnings.warn("unclosed <socket.socket fd=18>", ResourceWarning, stacklevel=1)
        warnings.warn("the metric's own note", UserWarning, stacklevel=1)
        return spec.impl(batch, **params)

    monkeypatch.setitem(
        registry._REGISTRY, ("regression", "crps"), dataclasses.replace(spec, impl=noisy)
    )
    rng = np.random.default_rng(0)
    mu, sd = rng.normal(size=200), rng.uniform(0.5, 2.0, 200)
    y = mu + sd * rng.normal(size=200)
    pred = P.Gaussian(mu, sd)
    for metrics in (["crps"], ["crps", "crps_skill"]):
        report = evaluate(pred, y, metrics)
        assert "the metric's own note" in report.warnings, metrics
        assert not [w for w in report.warnings if "unclosed" in w], metrics
