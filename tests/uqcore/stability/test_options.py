"""The resampling engine with the options that select another convention: AUSE/AURG's
trapezoid rule and ENCE's equal-width bins on their block paths (and the fallbacks where a
path's conditions fail), and NLL with one kernel bandwidth per row, which resamples take with
their rows."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore import registry
from uqcore.batch import Batch
from uqcore.stability import bootstrap, convergence
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.weights import Resampler, counts_to_indices

OPTIONS: dict[str, dict[str, Any]] = {
    "ause": {"rule": "trapezoid"},
    "aurg": {"rule": "trapezoid"},
    "ence": {"binning": "width", "n_bins": 7},
}


def _data(n: int, seed: int, ties: bool = False) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = (
        rng.choice([0.5, 0.6, 1.0, 1.25, 2.0, 3.5], size=n) if ties else rng.uniform(0.5, 2, size=n)
    )
    return P.Gaussian(mu, sd), mu + sd * rng.standard_t(4, size=n)


def _plain(name: str, pred: Any, y: Any, params: dict[str, Any]) -> float:
    """The metric on explicit arrays (NaN when undefined)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        v = registry.call(registry.get(name), Batch(pred, y), params)
    return math.nan if v is None else float(v)  # type: ignore[arg-type]


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("weights", ["none", "integer", "real"])
def test_block_paths_of_the_new_options_equal_the_metric(ties: bool, weights: str) -> None:
    """The trapezoid rule and equal-width bins take their block paths where the conditions
    hold (no ties in the uncertainty, integer weights for AUSE/AURG) and fall back resample by
    resample elsewhere; either way equal to the per-resample path, and for integer weights to
    the metric on the explicit index resample."""
    n = 240
    pred, y = _data(n, 3, ties)
    rng = np.random.default_rng(4)
    w = {
        "none": None,
        "integer": rng.integers(0, 4, size=n).astype(float),
        "real": rng.uniform(0.2, 2.0, size=n),
    }[weights]
    counts = Resampler(n).block(6, range(5))
    chosen, _ = select_metrics([pred], list(OPTIONS), OPTIONS)
    fast = Engine(Batch(pred, y, w), chosen)
    sparsification = not ties  # ties in the uncertainty: AUSE/AURG resample by resample
    assert sorted(fast._fast) == (["aurg", "ause", "ence"] if sparsification else ["ence"])
    got = fast.values([Resample(row) for row in counts])
    slow = Engine(Batch(pred, y, w), chosen, use_blocks=False)
    ref = slow.values([Resample(row) for row in counts])
    for name in OPTIONS:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-14, err_msg=name)
        if weights == "real":
            continue
        for i, row in enumerate(counts):
            idx = counts_to_indices(row if w is None else row * w)
            want = _plain(name, pred.take(idx), y[idx], OPTIONS[name])
            assert math.isclose(float(got[name][i]), want, rel_tol=1e-10), (name, i)


def test_block_paths_with_small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENCE's equal-width bins across many chunks and blocks (the prefix sums of the large
    path), against the per-resample path."""
    from uqcore.stability.blocks import tuning

    monkeypatch.setattr(tuning, "PREFIX_CHUNK", 7)
    monkeypatch.setattr(tuning, "CHUNK", 5)
    monkeypatch.setattr(tuning, "BLOCK_ELEMENTS", 2 * 500)
    pred, y = _data(500, 5, ties=True)
    counts = Resampler(500).block(8, range(5))
    chosen, _ = select_metrics([pred], ["ence"], {"ence": OPTIONS["ence"]})
    for w in (None, np.random.default_rng(6).uniform(0.5, 2.0, size=500)):
        fast = Engine(Batch(pred, y, w), chosen)
        assert "ence" in fast._fast
        got = fast.values([Resample(row) for row in counts])["ence"]
        ref = Engine(Batch(pred, y, w), chosen, use_blocks=False)
        want = ref.values([Resample(row) for row in counts])["ence"]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _samples(n: int, seed: int) -> tuple[Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    draws = rng.normal(size=(n, 1)) + rng.lognormal(size=(n, 1)) * rng.normal(size=(n, 12))
    y = rng.normal(size=n) * 2.0
    h = rng.uniform(0.2, 2.0, size=n)
    return P.Samples(draws), y, h


@pytest.mark.parametrize("support", ["dense", "sparse"])
def test_per_row_bandwidth_is_resampled_with_its_rows(support: str) -> None:
    """NLL with one bandwidth per row: the per-row terms (mean-type path) and the metric on
    each resample (gathered rows take their bandwidths along) equal the metric on the
    explicit index resample with the bandwidths of those rows."""
    n = 80
    pred, y, h = _samples(n, 7)
    params = {"nll": {"bandwidth": h}}
    chosen, _ = select_metrics([pred], ["nll"], params)
    rng = np.random.default_rng(8)
    if support == "dense":
        resamples = [Resample(row) for row in Resampler(n).block(5, range(4))]
    else:  # a few rows each: the per-resample path gathers them into a small batch
        resamples = [Resample(np.ones(6), rng.choice(n, 6, replace=False)) for _ in range(4)]
    for use_mean_terms in (True, False):
        engine = Engine(Batch(pred, y), chosen, use_mean_terms=use_mean_terms)
        assert engine.is_mean_type(engine.chosen[0]) is use_mean_terms
        got = engine.values(resamples)["nll"]
        for i, r in enumerate(resamples):
            idx = counts_to_indices(r.dense(n))
            want = _plain("nll", pred.take(idx), y[idx], {"bandwidth": h[idx]})
            assert math.isclose(float(got[i]), want, rel_tol=1e-10), (use_mean_terms, i)


def test_public_stability_functions_take_the_new_options() -> None:
    """bootstrap and convergence with every new option value run and report the options'
    values on the full data."""
    pred, y = _data(120, 9)
    params = dict(OPTIONS)
    b = bootstrap(pred, y, list(params), n_resamples=40, seed=1, params=params)
    for name in params:
        assert math.isclose(b[name]["value"], _plain(name, pred, y, params[name]), rel_tol=1e-12)
        assert b[name]["low"] <= b[name]["value"] <= b[name]["high"]
    spred, sy, h = _samples(120, 10)
    nparams = {"nll": {"bandwidth": list(h)}}
    b = bootstrap(spred, sy, ["nll"], n_resamples=40, seed=1, params=nparams)
    full = _plain("nll", spred, sy, {"bandwidth": h})
    assert math.isclose(b["nll"]["value"], full, rel_tol=1e-12)
    c = convergence(spred, sy, ["nll"], repeats=3, sizes=[10, 40, 120], seed=2, params=nparams)
    assert c["nll"] is not None
