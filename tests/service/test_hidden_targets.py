"""An attacker against a small benchmark's hidden targets, on the live stack (real Redis, real
worker): it submits up to the quota with predictions of its choosing and reconstructs y from
every number it gets back.

The predictions put every mean far below the targets (mean −1000), so each row's absolute
error is y_i + 1000, linear in y; each submission orders the rows by a fresh random
permutation through its std (the removal order of the sparsification curve). The attacker
then solves the least-squares problem over every linear number it received (the MAE, each
point of the model sparsification curve, each row of an ``interval_width`` curve if one came
back) — the minimum-norm solution around the mean it learnt, which is the posterior mean
under an isotropic Gaussian prior — and also tries the row-by-row differencing attack
(consecutive points of the sparsification curve give the mean error of the rows removed in
between).

The bound (docs/hidden-targets.md): R linear measurements of N iid targets of variance σ²
leave a mean squared error per row of at least σ²(1 − R/N) for the best estimate. The test
counts R as every distinct number of the results that depends on the targets, and requires
RMSE ≥ 0.9 · sqrt(1 − R/N) · sd(y) for both attacks. The control runs the same attacker on
the curves at row resolution (uqcore.curves directly, what an inline submission gets): it
recovers y to 1e-6 — so the test detects a leak (and it fails when the worker's coarsening
is switched off).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from tests.service._api import ADMIN, TestClient, wait_terminal
from uqcore import predictions as P
from uqcore.coarse import COARSE_MIN_ROWS, coarse_points
from uqcore.curves import curve_to_json, curves
from uqcore.plots import PLOTS

pytest_plugins = ["tests.service._api"]

N = 200
QUOTA = 3
OFFSET = 1000.0
MARGIN = 0.9

#: Fields of curves and metric details that hold no information on the targets: fixed grids,
#: the prediction's own values, counts of the prediction's bins.
FIXED = frozenset(
    {
        "fractions",
        "levels",
        "expected",
        "edges",
        "bin_edges",
        "band_low",
        "band_high",
        "level",
        "n_eff",
        "total",
        "grid",
        "threshold",
        "thresholds",
        "lower",
        "upper",
        "confidence",
        "weight",
        "weights",
        "count",
        "counts_rows",
        "n_thresholds",
        "rows",
        "n",
        "alpha",
        "uncertainty",
        "mean_uncertainty",
        "params",
        "bounds",
        "n_resamples",
    }
)


def targets() -> np.ndarray:
    return np.random.default_rng(2024).normal(5.0, 2.0, size=N)


def attacker_predictions() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(99)
    return [
        {"mean": np.full(N, -OFFSET), "std": 1.0 + rng.permutation(N).astype(float)}
        for _ in range(QUOTA)
    ]


def _numbers(value: Any, field: str = "") -> Iterable[float]:
    if field in FIXED:
        return
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            yield float(value)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, k)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v, field)


def received(results: list[dict[str, Any]]) -> int:
    """R: the distinct numbers of the results that may depend on the targets."""
    seen: set[float] = set()
    for r in results:
        seen.update(_numbers({"metrics": r["metrics"], "curves": r.get("curves") or {}}))
    return len(seen)


def _kept(std: np.ndarray, fraction: float) -> np.ndarray:
    """Coefficients of the mean over the rows left after removing the most uncertain
    ``fraction`` (fractional removal at the boundary, as uqcore does)."""
    order = np.argsort(std, kind="stable")
    k = N * (1.0 - fraction)
    coef = np.zeros(N)
    coef[order] = np.clip(k - np.arange(N), 0.0, 1.0)
    return coef / coef.sum()


def attack(results: list[dict[str, Any]], preds: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """The attacker's two estimates of y: least squares over every linear number, and
    row-by-row differencing. Returns each estimate's values."""
    rows: list[np.ndarray] = []
    rhs: list[float] = []
    block_means: list[list[float]] = [[] for _ in range(N)]
    for res, pred in zip(results, preds, strict=True):
        std = pred["std"]
        mae = res["metrics"]["mae"]["value"]
        rows.append(np.full(N, 1.0 / N))
        rhs.append(mae - OFFSET)
        c = (res.get("curves") or {}).get("sparsification_curve")
        if c is not None:
            fr, model = c["fractions"], c["model"]
            for f, v in zip(fr, model, strict=True):
                rows.append(_kept(std, f))
                rhs.append(v - OFFSET)
            bounds = [*fr, 1.0]
            for j in range(len(fr)):
                # sum over the kept rows at j minus at j+1: the rows removed in between
                s_j = N * (1 - bounds[j]) * (model[j] - OFFSET)
                nxt = N * (1 - bounds[j + 1]) * (model[j + 1] - OFFSET) if j + 1 < len(fr) else 0
                between = _kept(std, bounds[j]) * N * (1 - bounds[j])
                between -= (
                    _kept(std, bounds[j + 1]) * N * (1 - bounds[j + 1]) if j + 1 < len(fr) else 0
                )
                width = between.sum()
                for i in np.nonzero(between > 0.5)[0]:
                    block_means[i].append((s_j - nxt) / width)
        w = (res.get("curves") or {}).get("interval_width")
        if w is not None:
            for i, e in zip(w["rows"], w["abs_error"], strict=True):
                row = np.zeros(N)
                row[i] = 1.0
                rows.append(row)
                rhs.append(e - OFFSET)
    a, b = np.array(rows), np.array(rhs)
    mu = b[0]  # the mean of y, from the MAE
    lsq = mu + np.linalg.lstsq(a, b - a @ np.full(N, mu), rcond=None)[0]
    diff = np.array([np.mean(m) if m else mu for m in block_means])
    return {"least_squares": lsq, "differencing": diff}


def rmse(estimate: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((estimate - y) ** 2)))


def bound(r: int, y: np.ndarray) -> float:
    return MARGIN * math.sqrt(max(0.0, 1.0 - r / N)) * float(np.std(y))


def private_rows() -> np.ndarray:
    """The private part of the split variant: a third of the rows."""
    mask = np.zeros(N, dtype=bool)
    mask[np.random.default_rng(7).choice(N, N // 3, replace=False)] = True
    return mask


def _benchmark(api: TestClient, curves_setting: str, split: bool = False) -> str:
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": f"small-{curves_setting}",
            "primary_metric": "mae",
            "bootstrap": {"n_resamples": 0},
            "quota": {"total": QUOTA},
            "curves": curves_setting,
            "y": targets().tolist(),
            **({"private_mask": private_rows().tolist()} if split else {}),
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    assert r.json()["curves"] == curves_setting
    return str(r.json()["id"])


def _play(api: TestClient, bid: str) -> tuple[list[dict[str, Any]], list[str]]:
    team = api.post("/v1/admin/teams", json={"name": "eve"}, headers=ADMIN).json()["team_id"]
    k = api.post("/v1/admin/keys", json={"name": "eve", "team_id": team}, headers=ADMIN)
    key = {"Authorization": f"Bearer {k.json()['key']}"}
    results, ids = [], []
    for pred in attacker_predictions():
        body = {
            "model_name": "eve",
            "benchmark_id": bid,
            "visibility": "private",
            "prediction": {"kind": "gaussian", **{f: v.tolist() for f, v in pred.items()}},
        }
        r = api.post("/v1/submissions", json=body, headers=key)
        assert r.status_code == 202, r.text
        detail = wait_terminal(api, key, r.json()["id"])
        assert detail["status"] == "succeeded", detail
        results.append(detail["result"])
        ids.append(r.json()["id"])
    # the quota stops the attacker here
    extra = {**body, "model_name": "eve-more"}
    assert api.post("/v1/submissions", json=extra, headers=key).status_code == 429
    return results, [key["Authorization"], *ids]


def test_control_row_resolution_curves_give_the_targets_away() -> None:
    y = targets()
    preds = attacker_predictions()
    results = []
    for p in preds:
        pred = P.Gaussian(p["mean"], p["std"])
        fine = curves(pred, y)
        results.append(
            {
                "metrics": {"mae": {"value": float(np.mean(np.abs(y - p["mean"])))}},
                "curves": {name: curve_to_json(c) for name, c in fine.items()},
            }
        )
    found = attack(results, preds)
    assert rmse(found["least_squares"], y) < 1e-6 * float(np.std(y))


@pytest.mark.parametrize("setting", ["coarse", "none"])
def test_attacker_does_no_better_than_the_bound(api: TestClient, worker: Any, setting: str) -> None:
    y = targets()
    bid = _benchmark(api, setting)
    results, _ = _play(api, bid)
    r = received(results)
    found = attack(results, attacker_predictions())
    limit = bound(r, y)
    for name, estimate in found.items():
        assert rmse(estimate, y) >= limit, (name, rmse(estimate, y), limit, r)
    assert r < N, r
    if setting == "coarse":
        m = coarse_points(N)
        for res in results:
            c = res["curves"]["sparsification_curve"]
            assert len(c["fractions"]) == m <= N // COARSE_MIN_ROWS
            assert "interval_width" not in res["curves"]
            assert "group_calibration" not in res["curves"]
    else:
        assert all(res["curves"] == {} for res in results)


def test_attacker_learns_nothing_of_the_private_rows_of_an_open_benchmark(
    api: TestClient, worker: Any
) -> None:
    """The same attacker on a benchmark with a private third: every number it receives is
    computed on the public rows (each answer is a function of them alone, see
    tests/service/test_benchmark_split.py), so on the private rows none of its estimates, nor
    the best constant it can learn (the public mean), does better than the spread of y."""
    y, mask = targets(), private_rows()
    bid = _benchmark(api, "coarse", split=True)
    results, _ = _play(api, bid)
    public_mean = results[0]["metrics"]["mae"]["value"] - OFFSET  # predictions far below y
    assert public_mean == pytest.approx(float(np.mean(y[~mask])), rel=1e-12)
    limit = MARGIN * float(np.std(y[mask]))
    found = attack(results, attacker_predictions())
    for name, estimate in {**found, "public_mean": np.full(N, public_mean)}.items():
        assert rmse(estimate[mask], y[mask]) >= limit, (name, rmse(estimate[mask], y[mask]))
    for res in results:  # the coarse curves cover the public rows only
        c = res["curves"]["sparsification_curve"]
        assert len(c["fractions"]) == coarse_points(int((~mask).sum()))


def test_coarse_curve_plots_are_listed_and_served_to_the_submitter(
    api: TestClient, worker: Any
) -> None:
    bid = _benchmark(api, "coarse")
    results, (auth, *_) = _play(api, bid)
    listed = {p["name"]: p for p in results[0]["plots"]}
    drawn = {n for n, s in PLOTS.items() if s.curves and set(s.curves) <= set(results[0]["curves"])}
    assert drawn and drawn <= set(listed), (drawn, listed)
    # no plot of a curve the result does not hold (interval_width: rows) is listed
    assert all(set(PLOTS[n].curves) <= set(results[0]["curves"]) for n in listed)
    plot = listed[sorted(drawn)[0]]
    r = api.get(plot["url"], headers={"Authorization": auth})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
