"""Stratified evaluation: per-group and per-bin values equal the metric on the subset."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from tests.factories import make_prediction, to_backend
from uqcore import metric
from uqcore._validation import UQValidationError
from uqcore.regression.stratified import stratified


@pytest.mark.parametrize(
    ("name", "kind", "params"),
    [
        ("mae", "gaussian", {}),
        ("ause", "point_uncertainty", {"grid": 10}),
        ("nmerci", "gaussian", {"alpha": 0.9}),
        ("spearman", "samples", {}),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_groups_equal_metric_on_subset(
    name: str, kind: str, params: dict[str, Any], weighted: bool
) -> None:
    pred, y = make_prediction(kind, 90, seed=1)
    rng = np.random.default_rng(2)
    groups = rng.choice([3, -1, 7], size=90)
    w = rng.uniform(0.5, 2.0, size=90) if weighted else None
    res = stratified(name, pred, y, groups=groups, sample_weight=w, **params)
    json.dumps(res)
    assert res["groups"] == [-1, 3, 7]
    for gid, value, count, tw in zip(
        res["groups"], res["values"], res["counts"], res["weights"], strict=True
    ):
        idx = np.flatnonzero(groups == gid)
        sw = None if w is None else w[idx]
        expected = metric(name, pred.take(idx), y[idx], sample_weight=sw, **params)
        assert count == idx.size
        assert math.isclose(tw, float(idx.size if w is None else w[idx].sum()), rel_tol=1e-12)
        assert value == expected


def test_bins_by_edges_and_width() -> None:
    pred, _ = make_prediction("gaussian", 50, seed=3)
    y = np.linspace(0.0, 0.95, 50)
    res = stratified("mae", pred, y, bins=[0.0, 0.2, 0.4, 0.5, 0.95])
    assert res["counts"] == [11, 10, 5, 24]  # the last bin is closed: y = 0.95 counts
    assert res["out_of_range"] == 0
    for k, value in enumerate(res["values"]):
        lo, hi = res["edges"][k], res["edges"][k + 1]
        sel = (y >= lo) & ((y < hi) if k < 3 else (y <= hi))
        idx = np.flatnonzero(sel)
        assert value == metric("mae", pred.take(idx), y[idx])
    # outside the edges: counted, not silently dropped; empty bins: count 0 and None
    res = stratified("mae", pred, y, bins=[0.1, 0.2, 0.3, 10.0, 11.0])
    assert res["out_of_range"] == 6
    assert res["counts"][-1] == 0 and res["values"][-1] is None
    assert sum(res["counts"]) + res["out_of_range"] == 50
    # a bin width (0.1 m as in moukari2019 Fig. 5): edges 0.0, 0.1, ..., cover y
    res = stratified("ause", pred, y + 1.0, bins=0.1)
    assert sum(res["counts"]) == 50 and res["out_of_range"] == 0
    assert res["edges"][0] <= 1.0 and res["edges"][-1] > 1.95
    json.dumps(res)


def test_zero_weight_stratum_reported() -> None:
    pred, y = make_prediction("gaussian", 6, seed=4)
    groups = np.array([0, 0, 1, 1, 2, 2])
    w = np.array([1.0, 2.0, 0.0, 0.0, 1.0, 1.0])
    res = stratified("rmse", pred, y, groups=groups, sample_weight=w)
    assert res["counts"] == [2, 2, 2]
    assert res["weights"] == [3.0, 0.0, 2.0]
    assert res["values"][1] is None and res["values"][0] is not None


def test_backends(xp: Any) -> None:
    pred, y = make_prediction("point_uncertainty", 40, seed=5)
    groups = np.arange(40) % 3
    expected = stratified("spearman", pred, y, groups=groups)
    pb, yb = to_backend(pred, y, xp)
    got = stratified("spearman", pb, yb, groups=groups)
    np.testing.assert_allclose(got["values"], expected["values"], rtol=1e-12)


def test_validation() -> None:
    pred, y = make_prediction("gaussian", 5, seed=6)
    g = np.arange(5)
    cases = [
        ({}, "exactly one"),
        ({"groups": g, "bins": 0.1}, "exactly one"),
        ({"groups": g[:4]}, "same length"),
        ({"groups": g.astype(float)}, "integer"),
        ({"groups": g.astype(bool)}, "integer"),
        ({"bins": [0.0, 1.0, 1.0]}, "strictly increasing"),
        ({"bins": [0.0]}, "at least 2"),
        ({"bins": -0.1}, "> 0"),
        ({"bins": [0.0, math.nan]}, "finite"),
        ({"bins": 1e-9}, "at most"),
    ]
    for kwargs, match in cases:
        with pytest.raises(UQValidationError, match=match):
            stratified("mae", pred, y, **kwargs)
    with pytest.raises(UQValidationError, match="unknown parameter"):
        stratified("mae", pred, y, groups=g, alpha=0.5)
    with pytest.raises(UQValidationError, match="unknown metric"):
        stratified("nope", pred, y, groups=g)
