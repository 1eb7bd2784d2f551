"""Benchmark suites over HTTP with the real worker: the definition routes and their checks, the
suite leaderboard's aggregates against an independent computation from the definitions
(3 tasks × 4 teams, one team lacking a task, both missing rules), the rows-view and
tasks-view intervals against an independent resampling written here, the CSV export and the
web page."""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.service._api import ADMIN, TestClient, error_of, wait_terminal
from tests.stack import clear_store
from uqcore.stability.weights import Resampler

N = 40
B = 60
SEED = 11

#: task -> (metric, direction, best value)
TASKS = [("mae", "lower", 0.0), ("r2", "higher", 1.0), ("mae", "lower", 0.0)]
TEAMS = ("red", "blue", "green", "gold")
#: noise scale of each team's prediction on each task (gold has no entry on task 3)
SCALES = {
    "red": (0.6, 0.6, 0.6),
    "blue": (0.2, 0.9, 0.3),
    "green": (0.4, 0.3, 1.0),
    "gold": (0.1, 0.5, None),
}


def targets(k: int) -> np.ndarray:
    return np.random.default_rng(100 + k).normal(size=N)


def prediction(k: int, scale: float, seed: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    return {
        "kind": "gaussian",
        "mean": (targets(k) + scale * rng.normal(size=N)).tolist(),
        "std": np.full(N, 0.5 + scale).tolist(),
    }


@dataclass
class Setup:
    api: TestClient
    store: Store
    benches: list[str]
    team_ids: dict[str, str]
    keys: dict[str, dict[str, str]]
    #: team -> per task (value, submission id) or None
    values: dict[str, list[tuple[float, str] | None]]


@pytest.fixture(scope="module")
def setup(session_settings: Settings, worker: Any) -> Iterator[Setup]:
    assert session_settings.redis_url is not None
    store = Store.from_url(session_settings.redis_url, session_settings)
    try:
        with TestClient(create_app(session_settings.model_copy(), store=store)) as api:
            benches = []
            for k in range(len(TASKS)):
                r = api.post(
                    "/v1/benchmarks",
                    json={
                        "name": f"task{k}",
                        "primary_metric": "mae",
                        "metrics": ["mae", "r2"],
                        "bootstrap": {"n_resamples": 20},
                        "seed": 3,
                        "y": targets(k).tolist(),
                    },
                    headers=ADMIN,
                )
                assert r.status_code == 201, r.text
                benches.append(r.json()["id"])
            team_ids, keys = {}, {}
            for name in TEAMS:
                team = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN)
                team_ids[name] = team.json()["team_id"]
                r = api.post(
                    "/v1/admin/keys",
                    json={"name": name, "team_id": team_ids[name]},
                    headers=ADMIN,
                )
                keys[name] = {"Authorization": f"Bearer {r.json()['key']}"}
            values: dict[str, list[tuple[float, str] | None]] = {}
            pending = []
            for i, name in enumerate(TEAMS):
                for k, bench in enumerate(benches):
                    scale = SCALES[name][k]
                    if scale is None:
                        continue
                    body = {
                        "model_name": f"{name}-{k}",
                        "benchmark_id": bench,
                        "visibility": "public",
                        "prediction": prediction(k, scale, 10 * i + k),
                    }
                    r = api.post("/v1/submissions", json=body, headers=keys[name])
                    assert r.status_code == 202, r.text
                    pending.append((name, k, r.json()["id"]))
            for name in TEAMS:
                values[name] = [None] * len(benches)
            for name, k, sub in pending:
                doc = wait_terminal(api, keys[name], sub)
                assert doc["status"] == "succeeded", doc
                metric = TASKS[k][0]
                values[name][k] = (float(doc["result"]["metrics"][metric]["value"]), sub)
            yield Setup(api, store, benches, team_ids, keys, values)
    finally:
        clear_store(store)
        store.close()


def create(s: Setup, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "suite",
        "tasks": [
            {"benchmark_id": b, "metric": m} for b, (m, _, _) in zip(s.benches, TASKS, strict=True)
        ],
        "baseline_team": s.team_ids["red"],
        "n_resamples": B,
        "seed": SEED,
        **fields,
    }
    r = s.api.post("/v1/suites", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    doc: dict[str, Any] = r.json()
    return doc


def board(s: Setup, suite_id: str, **params: Any) -> dict[str, Any]:
    r = s.api.get(f"/v1/suites/{suite_id}/leaderboard", params=params, headers=s.keys["blue"])
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def wait_current(s: Setup, suite_id: str, **params: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        doc = board(s, suite_id, **params)
        if doc["intervals"]["status"] == "current":
            return doc
        assert time.monotonic() < deadline, doc["intervals"]
        time.sleep(0.1)


# --- an independent computation from the definitions -----------------------------------------


def badness(k: int, v: float) -> float:
    return v if TASKS[k][1] == "lower" else -v


def loss(k: int, v: float) -> float:
    return abs(v - TASKS[k][2])


def reference(vals: dict[str, list[float | None]], base: str, missing: str) -> dict[str, Any]:
    """mean rank (average ranks), win rate (ties one half), gm skill per kept team, from
    per-team per-task values (None: missing), by plain loops."""
    kept, excluded = {}, {}
    for team, row in vals.items():
        if all(v is not None for v in row):
            kept[team] = list(row)
        elif missing == "impute_baseline":
            kept[team] = [v if v is not None else vals[base][k] for k, v in enumerate(row)]
        else:
            excluded[team] = [k for k, v in enumerate(row) if v is None]
    out = {}
    for team, row in kept.items():
        ranks, wins, pairs, logs = [], 0.0, 0, []
        for k, v in enumerate(row):
            mine = badness(k, v)
            others = [badness(k, r[k]) for t, r in kept.items() if t != team]
            better = sum(1 for o in others if o < mine)
            ties = sum(1 for o in others if o == mine)
            ranks.append(1 + better + ties / 2)
            wins += sum(1.0 if mine < o else 0.5 if mine == o else 0.0 for o in others)
            pairs += len(others)
            logs.append(math.log(loss(k, v) / loss(k, vals[base][k])))
        out[team] = {
            "values": row,
            "ranks": ranks,
            "mean_rank": sum(ranks) / len(ranks),
            "win_rate": wins / pairs,
            "gm_skill": 1 - math.exp(sum(logs) / len(logs)),
        }
    return {"teams": out, "excluded": excluded}


def by_name(s: Setup) -> dict[str, str]:
    return {v: k for k, v in s.team_ids.items()}


@pytest.mark.parametrize("missing", ["exclude", "impute_baseline"])
def test_aggregates_equal_an_independent_computation(setup: Setup, missing: str) -> None:
    s = setup
    suite = create(s, missing=missing)
    doc = board(s, suite["id"])
    vals = {t: [None if e is None else e[0] for e in s.values[t]] for t in TEAMS}
    ref = reference(vals, "red", missing)
    names = by_name(s)
    got = {names[e["team_id"]]: e for e in doc["entries"]}
    assert set(got) == set(ref["teams"])
    for team, want in ref["teams"].items():
        for agg in ("mean_rank", "win_rate", "gm_skill"):
            assert got[team][agg]["value"] == pytest.approx(want[agg], rel=1e-9, abs=1e-12)
        assert got[team]["values"] == pytest.approx(want["values"])
        assert got[team]["task_ranks"] == want["ranks"]
    order = sorted(ref["teams"], key=lambda t: ref["teams"][t]["mean_rank"])
    assert [names[e["team_id"]] for e in doc["entries"]] == order
    assert [e["rank"] for e in doc["entries"]] == [1, 2, 3, 4][: len(order)]
    excluded = {names[e["team_id"]]: e for e in doc["excluded"]}
    assert set(excluded) == set(ref["excluded"])
    if missing == "exclude":
        assert [t["benchmark_id"] for t in excluded["gold"]["missing_tasks"]] == [s.benches[2]]
    else:
        assert got["gold"]["imputed"] == [2]
        assert got["gold"]["values"][2] == pytest.approx(vals["red"][2])
        assert got["gold"]["n_tasks"] == 2
    assert got["red"]["gm_skill"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert doc["missing"] == missing and doc["view"] == "rows"
    assert doc["unit"] == "rows within tasks"
    assert doc["intervals"]["status"] in ("computing", "stale", "current")


def _q(values: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(values, [a, 1 - a])
    return float(lo), float(hi)


def test_rows_and_tasks_intervals_equal_an_independent_resampling(setup: Setup) -> None:
    """Two mae tasks, three teams that have both: each task's rows resampled with the
    suite's seed (+ the task's index), every team's MAE recomputed on the same counts here
    with numpy, the aggregates by their definitions; the tasks view from the documented draws
    of tasks."""
    s = setup
    two = [0, 2]
    suite = create(
        s,
        tasks=[{"benchmark_id": s.benches[k], "metric": "mae"} for k in two],
        missing="exclude",
    )
    rows = wait_current(s, suite["id"], view="rows")
    tasks = board(s, suite["id"], view="tasks")
    assert tasks["intervals"]["status"] == "current"
    assert tasks["unit"] == "tasks within the suite"
    names = by_name(s)
    teams = [names[e["team_id"]] for e in rows["entries"]]
    assert set(teams) == {"red", "blue", "green"}
    # per-row absolute errors from the submissions' own arrays (the predictions above)
    errors = {}
    for i, name in enumerate(TEAMS):
        if name not in teams:
            continue
        errors[name] = [
            np.abs(np.asarray(prediction(k, SCALES[name][k], 10 * i + k)["mean"]) - targets(k))
            for k in two
        ]
    mae = {  # team -> (B, T) resampled MAE
        t: np.stack(
            [
                Resampler(N).block(SEED + j, list(range(B))) @ errors[t][j] / N
                for j in range(len(two))
            ],
            axis=1,
        )
        for t in teams
    }
    cube = np.stack([mae[t] for t in teams], axis=-1)  # (B, T, K)
    k_count = len(teams)
    ranks = np.empty_like(cube)
    for b in range(B):
        for j in range(len(two)):
            col = cube[b, j]
            ranks[b, j] = [1 + (col < v).sum() + ((col == v).sum() - 1) / 2 for v in col]
    mean_rank = ranks.mean(axis=1)
    win_rate = ((k_count - ranks).sum(axis=1)) / ((k_count - 1) * len(two))
    base = teams.index("red")
    gm = 1 - np.exp(np.log(cube / cube[:, :, [base]]).mean(axis=1))
    level = rows["level"]
    for j, team in enumerate(teams):
        e = rows["entries"][j]
        for agg, arr in (("mean_rank", mean_rank), ("win_rate", win_rate), ("gm_skill", gm)):
            lo, hi = _q(arr[:, j], level)
            if agg == "gm_skill" and team == "red":
                lo = hi = 0.0
            assert e[agg]["low"] == pytest.approx(lo, abs=1e-9), (team, agg)
            assert e[agg]["high"] == pytest.approx(hi, abs=1e-9), (team, agg)
        assert e["rank_low"] <= e["rank"] <= e["rank_high"]
    # tasks view: draws of the task indices with replacement (the documented generator)
    rng = np.random.default_rng([SEED, len(two)])
    draws = rng.integers(0, len(two), size=(B, len(two)))
    point = np.array([[s.values[t][k][0] for t in teams] for k in two])  # (T, K)
    pranks = np.array([[1 + (c < v).sum() + ((c == v).sum() - 1) / 2 for v in c] for c in point])
    for j, team in enumerate(teams):
        e = next(x for x in tasks["entries"] if names[x["team_id"]] == team)
        mr = pranks[draws, j].mean(axis=1)
        assert (e["mean_rank"]["low"], e["mean_rank"]["high"]) == pytest.approx(_q(mr, level))
        lr = np.log(point[:, j] / point[:, base])[draws].mean(axis=1)
        if team != "red":
            assert (e["gm_skill"]["low"], e["gm_skill"]["high"]) == pytest.approx(
                _q(1 - np.exp(lr), level)
            )
    # deterministic with the seed: a new suite with the same definition answers the same
    again = create(
        s,
        tasks=[{"benchmark_id": s.benches[k], "metric": "mae"} for k in two],
        missing="exclude",
    )
    same = wait_current(s, again["id"], view="rows")
    assert [e["mean_rank"] for e in same["entries"]] == [e["mean_rank"] for e in rows["entries"]]


def test_csv_columns_and_rows(setup: Setup) -> None:
    s = setup
    suite = create(s, missing="impute_baseline")
    r = s.api.get(
        f"/v1/suites/{suite['id']}/leaderboard",
        params={"format": "csv", "view": "tasks"},
        headers=s.keys["gold"],
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert suite["id"] in r.headers["content-disposition"]
    table = list(csv.reader(io.StringIO(r.text)))
    head = table[0]
    assert head[:6] == ["rank", "rank_low", "rank_high", "team_id", "team_name", "n_tasks"]
    assert head[6:15] == [
        f"{a}{s_}" for a in ("mean_rank", "win_rate", "gm_skill") for s_ in ("", "_low", "_high")
    ]
    assert head[15:] == [f"value:{b}:{m}" for b, (m, _, _) in zip(s.benches, TASKS, strict=True)]
    assert len(table) == 1 + len(TEAMS)
    doc = board(s, suite["id"], view="tasks")
    for row, e in zip(table[1:], doc["entries"], strict=True):
        assert row[3] == e["team_id"] and int(row[0]) == e["rank"]
        assert float(row[6]) == pytest.approx(e["mean_rank"]["value"])
    gold = next(row for row in table[1:] if row[4] == "gold")
    assert gold[-1] == ""  # an imputed value is not the team's own


def test_crud_and_validation(setup: Setup) -> None:
    s = setup
    api, b = s.api, s.benches
    ok = {"name": "x", "tasks": [{"benchmark_id": b[0]}]}
    r = api.post("/v1/suites", json=ok, headers=s.keys["red"])
    assert r.status_code == 403
    cases = [
        ({"tasks": [{"benchmark_id": "nope"}]}, "unknown_benchmark", "tasks.benchmark_id"),
        ({"tasks": [{"benchmark_id": b[0], "metric": "crps"}]}, "unknown_metric", "tasks.metric"),
        (
            {"tasks": [{"benchmark_id": b[0]}, {"benchmark_id": b[0], "metric": "r2"}]},
            "duplicate_task",
            "tasks.benchmark_id",
        ),
        ({"tasks": []}, None, None),
        ({"tasks": [{"benchmark_id": f"b{i}"} for i in range(101)]}, None, None),
        ({"baseline_team": "no-such-team"}, "unknown_team", "baseline_team"),
        ({"missing": "drop"}, None, None),
    ]
    for change, code, field in cases:
        r = api.post("/v1/suites", json={**ok, **change}, headers=ADMIN)
        assert r.status_code == 422, (change, r.text)
        err = error_of(r)
        if code is not None:
            assert (err["code"], err["field"]) == (code, field), err
    r = api.post("/v1/suites", json=ok, headers=ADMIN)
    assert r.status_code == 201
    created = r.json()
    assert created["tasks"] == [{"benchmark_id": b[0], "metric": "mae"}]  # the primary metric
    assert created["missing"] == "exclude" and created["selection"] == "board"
    assert created["n_resamples"] == 1000 and created["level"] == 0.95 and created["seed"] == 0
    sid = created["id"]
    got = api.get(f"/v1/suites/{sid}", headers=s.keys["green"])
    assert got.status_code == 200 and got.json() == created
    listed = api.get("/v1/suites", headers=s.keys["green"]).json()["suites"]
    assert sid in [x["id"] for x in listed]
    r = api.patch(f"/v1/suites/{sid}", json={"name": "y"}, headers=s.keys["green"])
    assert r.status_code == 403
    r = api.patch(
        f"/v1/suites/{sid}",
        json={"name": "y", "tasks": [{"benchmark_id": b[1], "metric": "r2"}]},
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "y" and r.json()["tasks"][0]["metric"] == "r2"
    r = api.patch(f"/v1/suites/{sid}", json={"tasks": [{"benchmark_id": "nope"}]}, headers=ADMIN)
    assert error_of(r)["code"] == "unknown_benchmark"
    assert api.get(f"/v1/suites/{sid}/leaderboard").status_code == 401
    assert api.delete(f"/v1/suites/{sid}", headers=ADMIN).status_code == 204
    assert api.get(f"/v1/suites/{sid}", headers=ADMIN).status_code == 404
    r = api.get(f"/v1/suites/{sid}/leaderboard", headers=ADMIN)
    assert r.status_code == 404 and error_of(r)["field"] == "suite_id"
    assert api.delete(f"/v1/suites/{sid}", headers=ADMIN).status_code == 404


def test_web_page(setup: Setup) -> None:
    """/ui/suites/{id}: the API's rows, both views, the CSV, a link from the benchmarks page;
    without a key only while the suite's public_board is set."""
    s = setup
    suite = create(s, name="Web suite", missing="exclude")
    sid = suite["id"]
    key = s.keys["blue"]
    r = s.api.get(f"/ui/suites/{sid}", headers=key)
    assert r.status_code == 200, r.text
    assert "rows within tasks" in r.text and 'id="suite-board"' in r.text
    assert "cdn" not in r.text.lower()
    doc = board(s, sid)
    for e in doc["entries"]:
        assert f'data-team="{e["team_id"]}"' in r.text
    assert "Excluded teams" in r.text and "gold" in r.text
    r = s.api.get(f"/ui/suites/{sid}", params={"view": "tasks"}, headers=key)
    assert r.status_code == 200 and "tasks within the suite" in r.text
    r = s.api.get(f"/ui/suites/{sid}/leaderboard.csv", headers=key)
    assert r.status_code == 200 and r.text.startswith("rank,rank_low,rank_high,team_id")
    assert f"/ui/suites/{sid}" in s.api.get("/ui/benchmarks", headers=key).text
    # no key: refused while the suite is not public, shown once it is
    assert s.api.get(f"/ui/suites/{sid}").status_code == 401
    assert f"/ui/suites/{sid}" not in s.api.get("/ui/benchmarks").text
    r = s.api.patch(f"/v1/suites/{sid}", json={"public_board": True}, headers=ADMIN)
    assert r.status_code == 200
    r = s.api.get(f"/ui/suites/{sid}")
    assert r.status_code == 200 and "read-only view" in r.text
    assert f"/ui/suites/{sid}" in s.api.get("/ui/benchmarks").text
    assert s.api.get("/ui/suites/nope", headers=key).status_code == 404


def test_benchmark_baselines(setup: Setup) -> None:
    """baseline_team null: each task's benchmark baseline submission; gm_skill is null with
    the reason while a task has none, and relative to those submissions once set."""
    s = setup
    suite = create(s, baseline_team=None, missing="exclude")
    doc = board(s, suite["id"])
    assert doc["baseline"] == "benchmark baselines"
    assert all(e["gm_skill"]["value"] is None for e in doc["entries"])
    assert "baseline has no value" in doc["gm_skill_reason"]
    try:
        for k, bench in enumerate(s.benches):
            base = s.values["green"][k]
            assert base is not None
            r = s.api.patch(f"/v1/benchmarks/{bench}", json={"baseline_id": base[1]}, headers=ADMIN)
            assert r.status_code == 200, r.text
        doc = board(s, suite["id"])  # the member records changed: a fresh answer
        assert doc["gm_skill_reason"] is None
        vals = {t: [None if e is None else e[0] for e in s.values[t]] for t in TEAMS}
        ref = reference(vals, "green", "exclude")
        names = by_name(s)
        for e in doc["entries"]:
            want = ref["teams"][names[e["team_id"]]]["gm_skill"]
            assert e["gm_skill"]["value"] == pytest.approx(want, rel=1e-9, abs=1e-12)
    finally:
        for bench in s.benches:
            s.api.patch(f"/v1/benchmarks/{bench}", json={"baseline_id": None}, headers=ADMIN)


def test_answers_follow_the_member_boards(setup: Setup) -> None:
    """A cached answer is served while the boards are unchanged and replaced when one
    changes (a new submission on a member benchmark makes the intervals stale)."""
    s = setup
    suite = create(s, tasks=[{"benchmark_id": s.benches[1], "metric": "r2"}])
    first = wait_current(s, suite["id"])
    assert board(s, suite["id"]) == first
    team = s.api.post("/v1/admin/teams", json={"name": "late"}, headers=ADMIN).json()
    key = s.api.post(
        "/v1/admin/keys", json={"name": "late", "team_id": team["team_id"]}, headers=ADMIN
    ).json()["key"]
    headers = {"Authorization": f"Bearer {key}"}
    body = {
        "model_name": "late",
        "benchmark_id": s.benches[1],
        "visibility": "public",
        "prediction": prediction(1, 0.05, 99),
    }
    r = s.api.post("/v1/submissions", json=body, headers=headers)
    assert r.status_code == 202
    assert wait_terminal(s.api, headers, r.json()["id"])["status"] == "succeeded"
    after = board(s, suite["id"])
    assert after["total"] == first["total"] + 1
    assert after["entries"][0]["team_id"] == team["team_id"]
    assert after["intervals"]["status"] in ("stale", "current")
    wait_current(s, suite["id"])
