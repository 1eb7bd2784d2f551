"""Convergence curves, bias of the mean and the minimum reliable test-set size."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from typing import Any

import numpy as np
import pytest

from uqcore import metric
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.stability import convergence, minimum_reliable_size
from uqcore.stability.weights import STREAM_PATH, STREAM_SUBSETS, resample_rng


def _data(n: int, seed: int) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    return P.Gaussian(mu, sd), mu + sd * rng.normal(size=n)


def _value(name: str, pred: Any, y: Any) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = metric(name, pred, y)
    v = v["value"] if isinstance(v, dict) else v
    return math.nan if v is None else float(v)


def test_path_and_subsets_equal_the_metric_on_explicit_subsets() -> None:
    pred, y = _data(200, 0)
    names = ["mae", "mdae", "ence", "pit"]
    cur = convergence(pred, y, names, repeats=5, seed=3)
    sizes = cur.meta["sizes"]
    assert sizes == [8, 16, 32, 64, 128, 200]
    order = resample_rng(3, STREAM_PATH).permutation(200)
    for name in names:
        e = cur[name]
        for j, m in enumerate(sizes):
            idx = order[:m]
            assert math.isclose(e["path"][j], _value(name, pred.take(idx), y[idx]), rel_tol=1e-10)
        for j, m in enumerate(sizes[:-1]):
            vals = []
            for r in range(5):
                idx = resample_rng(3, STREAM_SUBSETS, m, r).choice(200, size=m, replace=False)
                vals.append(_value(name, pred.take(idx), y[idx]))
            assert math.isclose(e["mean"][j], np.mean(vals), rel_tol=1e-10), (name, m)
            assert math.isclose(e["std"][j], np.std(vals, ddof=1), rel_tol=1e-9), (name, m)
            assert math.isclose(e["quantiles"]["0.5"][j], np.median(vals), rel_tol=1e-10)
            assert math.isclose(e["bias"][j], np.mean(vals) - e["value"], rel_tol=1e-9)
        assert e["path"][-1] == e["value"] == e["mean"][-1] and e["std"][-1] == 0.0


def test_same_seed_same_output_and_json() -> None:
    pred, y = _data(100, 1)
    a = convergence(pred, y, "all", repeats=4, seed=2).to_dict()
    b = convergence(pred, y, "all", repeats=4, seed=2).to_dict()
    assert json.dumps(a, allow_nan=False) == json.dumps(b, allow_nan=False)
    assert a["repeats"] == 4 and a["seed"] == 2 and a["resampling"]["unit"] == "row"
    c = convergence(pred, y, ["mae"], repeats=4, seed=3)
    assert c["mae"]["path"] != a["results"]["mae"]["path"]


def test_spread_shrinks_and_reliable_size_is_found() -> None:
    pred, y = _data(1024, 2)
    cur = convergence(pred, y, ["mae"], repeats=40, seed=0, tolerance=0.1)
    std = cur["mae"]["std"]
    assert std[0] > std[3] > std[6] > 0
    m = cur["mae"]["min_reliable_size"]
    assert m is not None and 64 <= m <= 1024
    lows, highs, full = cur["mae"]["spread_low"], cur["mae"]["spread_high"], cur["mae"]["value"]
    j = cur.meta["sizes"].index(m)
    assert all(
        full * 0.9 <= lo and hi <= full * 1.1 for lo, hi in zip(lows[j:], highs[j:], strict=True)
    )
    if j > 0:
        assert not (full * 0.9 <= lows[j - 1] and highs[j - 1] <= full * 1.1)
    absolute = convergence(
        pred, y, ["mae"], repeats=40, seed=0, tolerance=1e-9, tolerance_type="absolute"
    )
    assert absolute["mae"]["min_reliable_size"] == 1024  # only the full set


def test_minimum_reliable_size_rule() -> None:
    sizes = [8, 16, 32, 64]
    assert minimum_reliable_size(sizes, [0.0, 0.95, 0.9, 1.0], [2, 1.05, 1.1, 1.0], 1.0, 0.1) == 16
    # a size that leaves the band again breaks the run: only sizes after it count
    assert (
        minimum_reliable_size(sizes, [0.95, 0.5, 0.95, 1.0], [1.05, 1.0, 1.0, 1.0], 1.0, 0.1) == 32
    )
    assert minimum_reliable_size(sizes, [0.0] * 4, [0.0] * 4, None, 0.1) is None
    assert (
        minimum_reliable_size(sizes, [None, 0, 0, 0], [None, 0, 0, 0], 0.0, 0.1, "absolute") == 16
    )
    assert minimum_reliable_size(sizes, [0, 0, 0, 0.5], [0, 0, 0, 0.5], 1.0, 0.1) is None


def test_undefined_subsets_are_counted() -> None:
    pred = P.PointUncertainty(np.zeros(64), np.ones(64))
    y = np.zeros(64)
    y[:4] = 1.0  # r2 is undefined on subsets without any of the first four rows
    cur = convergence(pred, y, ["r2"], repeats=20, seed=0)
    assert cur["r2"]["n_undefined"][0] > 0
    assert cur["r2"]["n_undefined"][-1] == 0
    assert any("r2: undefined on some subsets" in w for w in cur.warnings)
    json.dumps(cur.to_dict(), allow_nan=False)


def test_backends_agree_with_numpy(xp: Any) -> None:
    from tests.factories import make_prediction, to_backend

    pred, y = make_prediction("gaussian", 64, seed=3)
    names = ["mae", "ence", "spearman"]
    ref = convergence(pred, y, names, repeats=3, seed=1)
    pb, yb = to_backend(pred, y, xp)
    got = convergence(pb, yb, names, repeats=3, seed=1)
    for name in names:
        np.testing.assert_allclose(got[name]["path"], ref[name]["path"], rtol=1e-9)
        np.testing.assert_allclose(got[name]["mean"], ref[name]["mean"], rtol=1e-9)


def test_validation() -> None:
    pred, y = _data(20, 0)
    with pytest.raises(UQValidationError, match="sizes"):
        convergence(pred, y, ["mae"], sizes=[4, 40])
    with pytest.raises(UQValidationError, match="tolerance_type"):
        convergence(pred, y, ["mae"], tolerance_type="percent")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="repeats"):
        convergence(pred, y, ["mae"], repeats=0)
    with pytest.raises(UQValidationError, match="quantiles"):
        convergence(pred, y, ["mae"], quantiles=[1.5])


def test_group_unit_subsamples_whole_groups() -> None:
    pred, y = _data(300, 4)
    groups = np.random.default_rng(5).integers(0, 40, size=300)  # 40 groups of varying size
    labels = np.array([f"img{g:02d}" for g in groups])  # any labels: codes follow sorted labels
    names = ["mae", "spearman", "ece"]
    cur = convergence(pred, y, names, repeats=4, seed=2, unit="group", groups=labels)
    sizes = cur.meta["sizes"]
    assert sizes == [8, 16, 32, 40]
    assert cur.meta["n_groups"] == 40 and cur.meta["resampling"]["unit"] == "group"
    codes = np.unique(labels, return_inverse=True)[1]
    order = resample_rng(2, STREAM_PATH).permutation(40)
    rows_seen = []
    for name in names:
        e = cur[name]
        for j, m in enumerate(sizes):
            idx = np.flatnonzero(np.isin(codes, order[:m]))
            assert math.isclose(e["path"][j], _value(name, pred.take(idx), y[idx]), rel_tol=1e-10)
        for j, m in enumerate(sizes[:-1]):
            vals = []
            for r in range(4):
                chosen = resample_rng(2, STREAM_SUBSETS, m, r).choice(40, size=m, replace=False)
                idx = np.flatnonzero(np.isin(codes, chosen))
                rows_seen.append(idx.shape[0])
                vals.append(_value(name, pred.take(idx), y[idx]))
            assert math.isclose(e["mean"][j], np.mean(vals), rel_tol=1e-10), (name, m)
            assert math.isclose(e["std"][j], np.std(vals, ddof=1), rel_tol=1e-9), (name, m)
    per_size = np.array(rows_seen[:12]).reshape(3, 4).mean(axis=1)
    assert np.allclose(cur.meta["mean_rows_per_size"], [*per_size, 300.0])
    json.dumps(cur.to_dict())


def test_group_unit_is_wider_than_row_unit_for_dependent_rows() -> None:
    # 64 groups of 16 rows sharing one error offset: rows of a group are strongly dependent,
    # so subsets of whole groups vary far more than row subsets of the same number of rows
    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(64), 16)
    y = rng.normal(size=64)[groups] * 3.0 + 0.1 * rng.normal(size=1024)
    pred = P.Gaussian(np.zeros(1024), np.ones(1024))
    by_group = convergence(pred, y, ["mae"], repeats=50, seed=0, unit="group", groups=groups)
    by_row = convergence(pred, y, ["mae"], repeats=50, seed=0, sizes=[16 * 16, 1024])
    j = by_group.meta["sizes"].index(16)  # 16 groups = 256 rows
    assert by_group["mae"]["std"][j] > 2 * by_row["mae"]["std"][0]


def test_group_unit_validation() -> None:
    pred, y = _data(50, 7)
    with pytest.raises(UQValidationError, match="groups must be given"):
        convergence(pred, y, ["mae"], unit="group")
    with pytest.raises(UQValidationError, match="unit must be"):
        convergence(pred, y, ["mae"], unit="pixel")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match=r"sizes must be integers in \[1, 5\]"):
        convergence(pred, y, ["mae"], unit="group", groups=np.arange(50) % 5, sizes=[8])


def test_progress_increases_to_one_and_leaves_the_results_unchanged() -> None:
    rng = np.random.default_rng(8)
    y = rng.normal(size=200)
    pred = P.Gaussian(np.zeros(200), np.full(200, 1.1))
    seen: list[float] = []
    opts: dict[str, Any] = {"repeats": 30, "seed": 2, "block_size": 10}
    with_cb = convergence(pred, y, ["mae", "ence"], progress=seen.append, **opts)
    without = convergence(pred, y, ["mae", "ence"], **opts)
    assert json.dumps(with_cb.to_dict()) == json.dumps(without.to_dict())
    assert seen[-1] == 1.0 and all(a < b for a, b in itertools.pairwise(seen)), seen
    # sizes 8..128 below N = 200, 3 blocks of 10 subsets each: a size's share is its size
    sizes = [8, 16, 32, 64, 128]
    ends = np.cumsum(sizes) / sum(sizes)
    for end in ends:
        assert any(abs(f - end) < 1e-12 for f in seen), (end, seen)
    assert len(seen) == 3 * len(sizes)
