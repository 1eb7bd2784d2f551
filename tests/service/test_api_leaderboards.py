"""Leaderboards over HTTP with the real worker: ordering in both directions, failed and private
submissions kept off, best vs latest, the baseline row, ties, pagination and CSV, and rank
intervals and separability flags equal to uqcore's bootstrap run directly with the same seed."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import numpy as np
import pytest

from service.store import Store
from tests.service._api import ADMIN, TestClient, error_of, wait_terminal
from uqcore import predictions as P
from uqcore.stability import compare, rank_distribution

pytest_plugins = ["tests.service._api"]

N = 80
B = 60
SEED = 7


def targets(n: int = N) -> np.ndarray:
    return np.random.default_rng(123).normal(size=n)


def prediction(scale: float, seed: int, n: int = N) -> dict[str, np.ndarray]:
    """A Gaussian prediction whose mean is off the targets by noise of size ``scale``."""
    rng = np.random.default_rng(seed)
    return {"mean": targets(n) + scale * rng.normal(size=n), "std": np.full(n, 0.5 + scale)}


@pytest.fixture
def board(api: TestClient) -> dict[str, Any]:
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": "board",
            "primary_metric": "mae",
            "metrics": ["mae", "r2", "crps"],
            "bootstrap": {"n_resamples": B},
            "seed": SEED,
            "y": targets().tolist(),
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bench: dict[str, Any] = r.json()
    return bench


@pytest.fixture
def teams(api: TestClient) -> dict[str, dict[str, str]]:
    out = {}
    for name in ("red", "blue", "green", "gold"):
        team = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN).json()["team_id"]
        r = api.post("/v1/admin/keys", json={"name": name, "team_id": team}, headers=ADMIN)
        out[name] = {"Authorization": f"Bearer {r.json()['key']}", "team": team}
    return out


def submit(
    api: TestClient,
    key: dict[str, str],
    bench_id: str,
    arrays: dict[str, np.ndarray],
    *,
    visibility: str = "public",
    model_name: str = "m",
    wait: bool = True,
) -> str:
    headers = {"Authorization": key["Authorization"]}
    body = {
        "model_name": model_name,
        "metadata": {"model": model_name},
        "visibility": visibility,
        "benchmark_id": bench_id,
        "prediction": {
            "kind": "gaussian",
            "mean": arrays["mean"].tolist(),
            "std": arrays["std"].tolist(),
        },
    }
    r = api.post("/v1/submissions", json=body, headers=headers)
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    if wait:
        assert wait_terminal(api, headers, sub_id)["status"] == "succeeded"
    return sub_id


def read(api: TestClient, key: dict[str, str], bench_id: str, **params: Any) -> dict[str, Any]:
    headers = {"Authorization": key["Authorization"]} if "Authorization" in key else key
    r = api.get(f"/v1/benchmarks/{bench_id}/leaderboard", params=params, headers=headers)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def wait_ranks(api: TestClient, key: dict[str, str], bench_id: str, **params: Any) -> dict:
    deadline = time.monotonic() + 60
    while True:
        doc = read(api, key, bench_id, **params)
        if doc["ranks"]["status"] == "current":
            return doc
        assert time.monotonic() < deadline, doc["ranks"]
        time.sleep(0.1)


def test_ordering_in_both_directions_failed_and_private_off_the_board(
    api: TestClient, store: Store, board: dict[str, Any], teams: dict[str, dict[str, str]], worker
):
    bid = board["id"]
    subs = {
        "red": submit(api, teams["red"], bid, prediction(0.1, 1)),
        "blue": submit(api, teams["blue"], bid, prediction(0.5, 2)),
        "green": submit(api, teams["green"], bid, prediction(1.0, 3)),
    }
    # gold: the best prediction, but private — and a public one that fails.
    submit(api, teams["gold"], bid, prediction(0.01, 4), visibility="private")
    gold = {"Authorization": teams["gold"]["Authorization"]}
    for _ in range(20):
        failing = submit(api, teams["gold"], bid, prediction(0.01, 5), wait=False)
        if store.fail(failing, "invalid input: made to fail by the test") == "failed":
            break
        # the idle worker finished it first: it must not stay on the board
        assert wait_terminal(api, gold, failing)["status"] == "succeeded"
        assert api.delete(f"/v1/submissions/{failing}", headers=gold).status_code == 204
    assert wait_terminal(api, gold, failing)["status"] == "failed"

    mae = read(api, teams["blue"], bid)
    assert mae["metric"] == "mae"
    assert mae["direction"] == "lower"
    assert mae["bounds"][0] == 0
    assert mae["rule"] == "best"
    assert mae["total"] == 3
    assert [e["submission_id"] for e in mae["entries"]] == [
        subs["red"],
        subs["blue"],
        subs["green"],
    ]
    assert [e["team_id"] for e in mae["entries"]] == [
        teams[t]["team"] for t in ("red", "blue", "green")
    ]
    # each entry names its team, as the team records hold it
    assert [e["team_name"] for e in mae["entries"]] == ["red", "blue", "green"]
    values = [e["value"] for e in mae["entries"]]
    assert values == sorted(values)
    assert [e["rank"] for e in mae["entries"]] == [1, 2, 3]
    for e in mae["entries"]:
        assert e["low"] is not None and e["low"] <= e["value"] <= e["high"]
        assert e["model_name"] == "m" and e["metadata"] == {"model": "m"}
    # Values equal the results' values.
    red_doc = wait_terminal(api, {"Authorization": teams["red"]["Authorization"]}, subs["red"])
    assert mae["entries"][0]["value"] == red_doc["result"]["metrics"]["mae"]["value"]

    r2 = read(api, teams["blue"], bid, metric="r2")
    assert r2["direction"] == "higher"
    assert [e["submission_id"] for e in r2["entries"]] == [subs["red"], subs["blue"], subs["green"]]
    values = [e["value"] for e in r2["entries"]]
    assert values == sorted(values, reverse=True)

    r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params={"metric": "nll"}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "metric"
    r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params={"metric": "crsp"}, headers=ADMIN)
    assert r.status_code == 422
    assert (error_of(r)["field"], error_of(r)["code"]) == ("metric", "validation_error")
    assert "did you mean 'crps'?" in error_of(r)["message"]
    assert api.get("/v1/benchmarks/bench_nope/leaderboard", headers=ADMIN).status_code == 404
    assert api.get(f"/v1/benchmarks/{bid}/leaderboard").status_code == 401


def test_best_vs_latest_ties_deletion_pagination_and_csv(
    api: TestClient, board: dict[str, Any], teams: dict[str, dict[str, str]], worker
):
    bid = board["id"]
    good = submit(api, teams["red"], bid, prediction(0.1, 1), model_name="good")
    worse = submit(api, teams["red"], bid, prediction(0.8, 2), model_name="worse")
    tie_a = submit(api, teams["blue"], bid, prediction(0.3, 9))
    tie_b = submit(api, teams["green"], bid, prediction(0.3, 9))

    best = read(api, teams["red"], bid)
    assert best["entries"][0]["submission_id"] == good
    assert best["total"] == 3
    tied = [e for e in best["entries"] if e["submission_id"] in (tie_a, tie_b)]
    assert tied[0]["value"] == tied[1]["value"]
    assert [e["rank"] for e in best["entries"]] == [1, 2, 2]

    r = api.patch(f"/v1/benchmarks/{bid}", json={"rule": "latest"}, headers=ADMIN)
    assert r.status_code == 200
    latest = read(api, teams["red"], bid)
    assert latest["rule"] == "latest"
    assert [e["submission_id"] for e in latest["entries"]][-1] == worse
    assert [e["rank"] for e in latest["entries"]] == [1, 1, 3]

    # Deleting the ranked submission falls back to the team's other one.
    red = {"Authorization": teams["red"]["Authorization"]}
    assert api.delete(f"/v1/submissions/{worse}", headers=red).status_code == 204
    latest = read(api, teams["red"], bid)
    assert latest["entries"][0]["submission_id"] == good

    page = read(api, teams["red"], bid, limit=2, offset=1)
    assert page["total"] == 3 and page["offset"] == 1 and page["limit"] == 2
    assert [e["rank"] for e in page["entries"]] == [2, 2]

    r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params={"format": "csv"}, headers=red)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["submission_id"] for row in rows] == [
        e["submission_id"] for e in read(api, teams["red"], bid)["entries"]
    ]
    assert rows[0]["model_name"] == "good"
    assert rows[0]["metadata"] == '{"model":"good"}'
    team_of = {good: "red", tie_a: "blue", tie_b: "green"}  # blue and green tie: any order
    assert [row["team_name"] for row in rows] == [team_of[row["submission_id"]] for row in rows]
    assert list(rows[0]).index("team_name") == list(rows[0]).index("team_id") + 1


def test_rank_intervals_and_flags_equal_uqcore_with_the_same_seed(
    api: TestClient, board: dict[str, Any], teams: dict[str, dict[str, str]], worker
):
    bid = board["id"]
    preds = {
        "red": prediction(0.2, 1),
        "blue": prediction(0.25, 2),
        "green": prediction(0.9, 3),
    }
    subs = {t: submit(api, teams[t], bid, a) for t, a in preds.items()}
    baseline = submit(api, {"Authorization": ADMIN["Authorization"]}, bid, prediction(0.6, 4))
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_id": baseline}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["baseline_id"] == baseline

    doc = wait_ranks(api, teams["red"], bid)
    assert doc["ranks"]["n_resamples"] == B and doc["ranks"]["seed"] == SEED
    note = doc["ranks"]["multiple_comparison_note"]
    # the API's words: no Python keyword, the comparison route instead of compare()
    assert "simultaneous=True" not in note and "POST /v1/comparisons" in note
    by_sub = {e["submission_id"]: e for e in doc["entries"]}
    assert by_sub[baseline]["is_baseline"] is True
    # the baseline was submitted with the admin key, which has no team: no team name
    assert by_sub[baseline]["team_name"] is None
    # the baseline row shows its display name and nothing of its submission
    assert "team_name" not in doc["baseline"] and "submission_id" not in doc["baseline"]
    assert by_sub[subs["red"]]["team_name"] == "red"
    assert doc["baseline"]["model_name"] == "baseline"
    assert doc["baseline"]["value"] == by_sub[baseline]["value"]
    assert doc["baseline"]["is_baseline"] is True
    assert sum(e["is_baseline"] for e in doc["entries"]) == 1

    y = targets()
    models = {sub: P.Gaussian(preds[t]["mean"], preds[t]["std"]) for t, sub in subs.items()}
    base_arrays = prediction(0.6, 4)
    models[baseline] = P.Gaussian(base_arrays["mean"], base_arrays["std"])
    ordered = {e["submission_id"]: models[e["submission_id"]] for e in doc["entries"]}
    direct = rank_distribution(ordered, y, metric="mae", n_resamples=B, seed=SEED)
    for sub, e in by_sub.items():
        assert e["rank_low"] == direct[sub]["rank_low"], sub
        assert e["rank_high"] == direct[sub]["rank_high"], sub
        assert e["p_best"] == pytest.approx(direct[sub]["p_best"], abs=0)
        assert e["separable_from_leader"] == (direct[sub]["rank_low"] > 1)
        if sub == baseline:
            assert e["separable_from_baseline"] is None
            continue
        c = compare(models[sub], models[baseline], y, ["mae"], n_resamples=B, seed=SEED)["mae"]
        assert e["separable_from_baseline"] == (not c["low"] <= 0.0 <= c["high"])
        assert e["p_value_vs_baseline"] == pytest.approx(c["p_value"], abs=0)
    # red and blue are close: not separable; green is far behind.
    assert by_sub[subs["green"]]["separable_from_leader"] is True

    # A new submission makes the ranks stale until the job ran again.
    submit(api, teams["gold"], bid, prediction(0.3, 5))
    assert read(api, teams["red"], bid)["ranks"]["status"] in ("stale", "current")
    again = wait_ranks(api, teams["red"], bid)
    assert again["total"] == 5
    assert all(e["rank_low"] is not None for e in again["entries"])


def test_comparisons_equal_uqcore_compare_with_the_same_seed(
    api: TestClient, board: dict[str, Any], teams: dict[str, dict[str, str]], worker
):
    bid = board["id"]
    preds = {"a": prediction(0.2, 1), "b": prediction(0.3, 2), "c": prediction(0.9, 3)}
    red = {"Authorization": teams["red"]["Authorization"]}
    subs = {
        name: submit(api, teams["red"], bid, a, visibility="private") for name, a in preds.items()
    }
    body = {
        "benchmark_id": bid,
        "submission_ids": [subs["a"], subs["b"], subs["c"]],
        "metrics": ["mae", "crps"],
    }
    # A team's comparison on a benchmark uses the benchmark's seed and B (hidden targets).
    r = api.post("/v1/comparisons", json=body, headers=red)
    assert r.status_code == 202, r.text
    cmp_id = r.json()["id"]
    assert r.headers["Location"] == f"/v1/comparisons/{cmp_id}"
    deadline = time.monotonic() + 60
    while True:
        doc = api.get(f"/v1/comparisons/{cmp_id}", headers=red).json()
        if doc["status"] in ("succeeded", "failed"):
            break
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)
    assert doc["status"] == "succeeded", doc
    assert doc["progress"] == 100.0
    result = doc["result"]
    assert "Holm" in result["correction"]
    # each compared submission's model and team, by name
    assert result["submissions"] == {
        sub: {"model_name": "m", "team_id": teams["red"]["team"], "team_name": "red"}
        for sub in subs.values()
    }
    assert result["seed"] == SEED and result["n_resamples"] == B
    y = targets()
    models = {n: P.Gaussian(a["mean"], a["std"]) for n, a in preds.items()}
    name_of = {sub: n for n, sub in subs.items()}
    assert len(result["pairs"]) == 3
    p_mae = []
    for pair in result["pairs"]:
        direct = compare(
            models[name_of[pair["a"]]],
            models[name_of[pair["b"]]],
            y,
            ["mae", "crps"],
            n_resamples=B,
            seed=SEED,
        )
        for m in ("mae", "crps"):
            got, want = pair["metrics"][m], direct[m]
            for field in ("diff", "low", "high", "std", "p_better", "p_value"):
                assert got[field] == pytest.approx(want[field], abs=0), (m, field)
        p_mae.append(pair["metrics"]["mae"])
    # Holm: the smallest p-value times 3, monotone, capped at 1.
    ordered = sorted(p_mae, key=lambda e: e["p_value"])
    assert ordered[0]["p_value_adjusted"] == pytest.approx(min(1.0, 3 * ordered[0]["p_value"]))
    adjusted = [e["p_value_adjusted"] for e in ordered]
    assert adjusted == sorted(adjusted)
    assert all(e["p_value_adjusted"] >= e["p_value"] for e in p_mae)
    ranks = rank_distribution(
        {sub: models[n] for sub, n in name_of.items()}, y, metric="crps", n_resamples=B, seed=SEED
    )
    for sub in subs.values():
        assert result["ranks"]["crps"][sub]["rank_low"] == ranks[sub]["rank_low"]
        assert result["ranks"]["crps"][sub]["p_best"] == pytest.approx(ranks[sub]["p_best"], abs=0)

    # Another team: the private submissions and the comparison are not theirs.
    blue = {"Authorization": teams["blue"]["Authorization"]}
    assert api.get(f"/v1/comparisons/{cmp_id}", headers=blue).status_code == 404
    assert api.get(f"/v1/comparisons/{cmp_id}", headers=ADMIN).status_code == 200
    r = api.post("/v1/comparisons", json=body, headers=blue)
    assert r.status_code == 404
    assert error_of(r)["field"] == "submission_ids" and error_of(r)["index"] == 0
    for bad, field in [
        ({**body, "submission_ids": [subs["a"]]}, "submission_ids"),
        ({**body, "submission_ids": [subs["a"], subs["a"]]}, "submission_ids"),
        ({**body, "metrics": ["nll"]}, "metrics"),
        ({**body, "benchmark_id": "bench_nope"}, "benchmark_id"),
        ({**body, "n_resamples": 1}, "n_resamples"),
        # only admins choose the bootstrap of a comparison on hidden targets
        ({**body, "n_resamples": 80}, "n_resamples"),
        ({**body, "seed": 3}, "seed"),
        ({**body, "level": 0.9}, "level"),
        ({**body, "method": "bca"}, "method"),
    ]:
        r = api.post("/v1/comparisons", json=bad, headers=red)
        assert r.status_code in (404, 422), r.text
        assert error_of(r)["field"] == field
    r = api.post("/v1/comparisons", json={**body, "metrics": ["mae", "cprs"]}, headers=red)
    err = error_of(r)
    assert (r.status_code, err["field"], err["index"]) == (422, "metrics", 1)
    assert err["message"].endswith("did you mean 'crps'?")
    # Giving the benchmark's own values is accepted; an admin chooses freely.
    same = {**body, "n_resamples": B, "seed": SEED, "level": 0.95, "method": "percentile"}
    assert api.post("/v1/comparisons", json=same, headers=red).status_code == 202
    r = api.post("/v1/comparisons", json={**body, "n_resamples": 80, "seed": 3}, headers=ADMIN)
    assert r.status_code == 202, r.text
    assert api.get(r.json()["status_url"], headers=ADMIN).json()["request"]["seed"] == 3
