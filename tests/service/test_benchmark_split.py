"""Public/private split of a benchmark on the live stack: validation of the split, answers
computed on the public rows only while open (checked against numpy on those rows), nothing
of the private rows in any answer a submitter gets while open (two benchmarks that differ
only on their private rows answer alike: results, boards as JSON and CSV, comparisons,
quality gates, suite boards and finals), finals, closing, and the private board."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from typing import Any

import numpy as np
import pytest

from tests.service._api import ADMIN, TestClient, error_of, wait_terminal

pytest_plugins = ["tests.service._api"]

N = 120
RNG_SEED = 18


def _mask() -> np.ndarray:
    m = np.zeros(N, dtype=bool)
    m[np.random.default_rng(RNG_SEED).choice(N, 40, replace=False)] = True
    return m


def _targets(private_shift: float = 0.0) -> np.ndarray:
    y = np.random.default_rng(RNG_SEED + 1).normal(size=N)
    return np.where(_mask(), y + private_shift, y)


def _bench(api: TestClient, y: np.ndarray, **extra: Any) -> dict[str, Any]:
    body = {
        "name": "split",
        "primary_metric": "mae",
        "metrics": ["mae", "crps"],
        "bootstrap": {"n_resamples": 50},
        "y": y.tolist(),
        **extra,
    }
    r = api.post("/v1/benchmarks", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _team(api: TestClient, name: str) -> dict[str, str]:
    team = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN).json()["team_id"]
    k = api.post("/v1/admin/keys", json={"name": name, "team_id": team}, headers=ADMIN)
    return {"Authorization": f"Bearer {k.json()['key']}"}


def _preds(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(RNG_SEED + 2)
    return [rng.normal(scale=0.5 + 0.3 * i, size=N) for i in range(count)]


def _submit(api: TestClient, key: dict[str, str], bid: str, mean: np.ndarray) -> dict[str, Any]:
    body = {
        "model_name": "m",
        "benchmark_id": bid,
        "visibility": "public",
        "prediction": {"kind": "gaussian", "mean": mean.tolist(), "std": [1.0] * N},
    }
    r = api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 202, r.text
    done = wait_terminal(api, key, r.json()["id"])
    assert done["status"] == "succeeded", done
    return done


def test_split_validation(api: TestClient) -> None:
    y = _targets().tolist()
    base = {"name": "v", "primary_metric": "mae", "y": y}
    cases = [
        ({"private_fraction": 0.3, "private_mask": _mask().tolist()}, "private_mask"),
        ({"private_mask": [True, False]}, "private_mask"),
        ({"private_mask": [1] * N}, "private_mask"),
        ({"private_mask": [False] * N}, "private_mask"),
        ({"private_mask": [True] * N}, "private_mask"),
        ({"private_fraction": 0.001}, "private_fraction"),
        ({"private_fraction": 1.0}, "private_fraction"),
    ]
    for extra, field in cases:
        r = api.post("/v1/benchmarks", json={**base, **extra}, headers=ADMIN)
        assert r.status_code == 422, (extra, r.text)
        assert field in str(error_of(r)["field"]), (extra, r.text)
    info = _bench(api, _targets(), private_fraction=0.25)
    assert info["n_public"] == N - 30 and info["private_fraction"] == pytest.approx(0.25)
    assert info["status"] == "open" and info["max_final"] == 2 and info["closed_at"] is None
    for change in ({"private_fraction": 0.5}, {"private_mask": _mask().tolist()}):
        r = api.patch(f"/v1/benchmarks/{info['id']}", json=change, headers=ADMIN)
        assert r.status_code == 422, r.text
    plain = _bench(api, _targets())
    assert plain["n_public"] == N and plain["private_fraction"] == 0.0


def _current(
    api: TestClient, key: dict[str, str], bid: str, params: dict[str, str]
) -> dict[str, Any]:
    """The board once its rank intervals are current (bounded wait)."""
    deadline = time.monotonic() + 60
    while True:
        r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params=params, headers=key)
        assert r.status_code == 200, r.text
        board: dict[str, Any] = r.json()
        if board["ranks"]["status"] == "current":
            return board
        assert time.monotonic() < deadline, board
        time.sleep(0.05)


def _view(api: TestClient, key: dict[str, str], bid: str, subs: list[str]) -> list[Any]:
    """Everything a submitter can read of the benchmark, with the ids made neutral."""
    out: list[Any] = []
    # a baseline: the boards' baseline flags and skill, and the suite's skill, depend on it
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_id": subs[1]}, headers=ADMIN)
    assert r.status_code == 200, r.text
    for sub in subs:
        doc = api.get(f"/v1/submissions/{sub}", headers=key).json()
        result = {k: v for k, v in doc["result"].items() if k != "provenance"}
        out.append([_neutral(result, [bid, *subs]), doc["private_result"]])
    for metric in ("mae", "crps"):
        _current(api, key, bid, {"metric": metric})
        for fmt in ("json", "csv"):
            r = api.get(
                f"/v1/benchmarks/{bid}/leaderboard",
                params={"format": fmt, "metric": metric},
                headers=key,
            )
            text = r.text
            for i, sub in enumerate(subs):
                text = text.replace(sub, f"S{i}")
            text = text.replace(bid, "B")
            if fmt == "json":
                doc = json.loads(text)
                for e in doc["entries"]:
                    del e["team_id"], e["created_at"]
                out.append(doc)
            else:
                rows = list(csv.DictReader(io.StringIO(text)))
                out.append(
                    [
                        {k: v for k, v in r.items() if k not in ("team_id", "created_at")}
                        for r in rows
                    ]
                )
    r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params={"part": "private"}, headers=key)
    assert r.status_code == 409 and error_of(r)["code"] == "benchmark_open", r.text
    finals = api.get(f"/v1/benchmarks/{bid}/finals", headers=key).json()
    out.append([[s["chosen"] for s in t["submissions"]] for t in finals["teams"]])
    r = api.post(
        "/v1/comparisons",
        json={"benchmark_id": bid, "submission_ids": subs, "metrics": ["mae"]},
        headers=key,
    )
    assert r.status_code == 202, r.text
    cid = r.json()["id"]
    for _ in range(600):
        c = api.get(f"/v1/comparisons/{cid}", headers=key).json()
        if c["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.05)
    assert c["status"] == "succeeded", c
    res = c["result"]
    out.append([res["pairs"][0]["metrics"], list(res["ranks"]["mae"].values())])
    # a quality gate (run as a comparison on the benchmark's rows) and a suite's board
    r = api.post(
        "/v1/gates",
        json={
            "benchmark_id": bid,
            "candidate": subs[1],
            "reference": subs[0],
            "checks": [{"metric": "mae", "allowed": 0.0, "mode": "absolute"}],
        },
        headers=key,
    )
    assert r.status_code == 202, r.text
    gid = r.json()["id"]
    for _ in range(600):
        g = api.get(f"/v1/gates/{gid}", headers=key).json()
        if g["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.05)
    assert g["status"] == "succeeded", g
    out.append(_neutral(g, [gid, bid, *subs]))
    r = api.post(
        "/v1/suites",
        json={"name": "one", "tasks": [{"benchmark_id": bid}], "n_resamples": 50},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    deadline = time.monotonic() + 60
    while True:
        suite = api.get(f"/v1/suites/{sid}/leaderboard", params={"view": "rows"}, headers=key)
        assert suite.status_code == 200, suite.text
        if suite.json()["intervals"]["status"] == "current":
            break
        assert time.monotonic() < deadline, suite.text
        time.sleep(0.05)
    out.append(_neutral(suite.json(), [sid, bid, *subs]))
    return out


_STAMPS = {"created_at", "finished_at", "started_at", "updated_at", "closed_at", "timings_s"}


def _neutral(doc: Any, ids: list[str]) -> Any:
    """``doc`` with the given ids (and any team or key id) replaced by placeholders, and
    times and timings dropped: what must be equal between the two benchmarks."""
    text = json.dumps(doc, sort_keys=True)
    for i, ident in enumerate(ids):
        text = text.replace(ident, f"ID{i}")
    text = re.sub(r"(team|key)_[0-9a-f]+", r"\1_X", text)

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in _STAMPS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(json.loads(text))


def test_open_answers_use_the_public_rows_only(api: TestClient, worker: Any) -> None:
    y_a, y_b = _targets(0.0), _targets(5.0)  # equal on the public rows only
    mask = _mask()
    views = []
    preds = _preds(2)
    for y in (y_a, y_b):
        bench = _bench(api, y, private_mask=mask.tolist())
        assert bench["n_public"] == N - 40
        key = _team(api, "eve")
        subs = [_submit(api, key, bench["id"], p) for p in preds]
        for sub, p in zip(subs, preds, strict=True):
            mae = sub["result"]["metrics"]["mae"]["value"]
            expected = float(np.mean(np.abs(y[~mask] - p[~mask])))
            assert mae == pytest.approx(expected, rel=1e-12)
            assert abs(mae - float(np.mean(np.abs(y - p)))) > 1e-6
            assert sub["private_result"] is None
        views.append(_view(api, key, bench["id"], [s["id"] for s in subs]))
    assert views[0] == views[1]


def test_finals_close_and_private_board(api: TestClient, worker: Any) -> None:
    y, mask = _targets(), _mask()
    bench = _bench(api, y, private_mask=mask.tolist(), max_final=2)
    bid = bench["id"]
    preds = _preds(6)
    alice, bob = _team(api, "alice"), _team(api, "bob")
    a = [_submit(api, alice, bid, p) for p in preds[:3]]
    b = [_submit(api, bob, bid, p) for p in preds[3:]]
    # bob marks none: his best two public by the public mae are his finals
    for s in a[:2]:
        r = api.patch(f"/v1/submissions/{s['id']}", json={"final": True}, headers=alice)
        assert r.status_code == 200 and r.json()["final"] is True, r.text
    r = api.patch(f"/v1/submissions/{a[2]['id']}", json={"final": True}, headers=alice)
    assert r.status_code == 409 and error_of(r)["code"] == "too_many_finals", r.text
    assert a[0]["id"] in error_of(r)["message"]
    pub = {
        s["id"]: float(np.mean(np.abs(y[~mask] - p[~mask])))
        for s, p in zip(b, preds[3:], strict=True)
    }
    finals = api.get(f"/v1/benchmarks/{bid}/finals", headers=ADMIN).json()["teams"]
    chosen = {t["team_id"]: {s["id"]: s["chosen"] for s in t["submissions"]} for t in finals}
    bob_default = sorted(pub, key=pub.__getitem__)[:2]
    assert sorted(chosen.values(), key=len)  # two teams
    assert any(
        set(c) == set(bob_default) and set(c.values()) == {"default"} for c in chosen.values()
    )
    assert any(set(c) == {a[0]["id"], a[1]["id"]} for c in chosen.values())
    own = api.get(f"/v1/benchmarks/{bid}/finals", headers=alice).json()["teams"]
    assert len(own) == 1
    # a suite ranking finals: while open, each team's best final by its public value; a
    # change of finals shows at once (the suite's cached answer is stamped with them)
    pub_a = {
        s["id"]: float(np.mean(np.abs(y[~mask] - p[~mask])))
        for s, p in zip(a, preds[:3], strict=True)
    }
    r = api.post(
        "/v1/suites",
        json={"name": "fin", "tasks": [{"benchmark_id": bid}], "selection": "final"},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]

    def suite_values() -> list[float]:
        doc = api.get(f"/v1/suites/{sid}/leaderboard", headers=bob).json()
        return sorted(e["values"][0] for e in doc["entries"])

    want = sorted([min(pub_a[a[0]["id"]], pub_a[a[1]["id"]]), min(pub[x] for x in bob_default)])
    assert suite_values() == pytest.approx(want, rel=1e-12)
    worse = max((a[0]["id"], a[1]["id"]), key=pub_a.__getitem__)
    better = min((a[0]["id"], a[1]["id"]), key=pub_a.__getitem__)
    r = api.patch(f"/v1/submissions/{better}", json={"final": False}, headers=alice)
    assert r.status_code == 200, r.text
    want = sorted([pub_a[worse], min(pub[x] for x in bob_default)])
    assert suite_values() == pytest.approx(want, rel=1e-12)
    r = api.patch(f"/v1/submissions/{better}", json={"final": True}, headers=alice)
    assert r.status_code == 200, r.text
    # the web board: public values while open, the private board not yet there
    page = api.get(f"/ui/benchmarks/{bid}", headers=bob)
    assert page.status_code == 200 and 'id="public-note"' in page.text
    page = api.get(f"/ui/benchmarks/{bid}", params={"part": "private"}, headers=bob)
    assert page.status_code == 404 and "revealed when the benchmark closes" in page.text
    # close: irreversible, no new submissions, finals fixed
    r = api.patch(f"/v1/benchmarks/{bid}", json={"status": "closed"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["status"] == "closed" and r.json()["closed_at"]
    r = api.patch(f"/v1/benchmarks/{bid}", json={"status": "open"}, headers=ADMIN)
    assert r.status_code == 409 and error_of(r)["code"] == "benchmark_closed"
    r = api.patch(f"/v1/submissions/{a[0]['id']}", json={"final": False}, headers=alice)
    assert r.status_code == 409 and error_of(r)["code"] == "benchmark_closed"
    r = api.post(
        "/v1/submissions",
        json={
            "model_name": "late",
            "benchmark_id": bid,
            "prediction": {"kind": "gaussian", "mean": [0.0] * N, "std": [1.0] * N},
        },
        headers=alice,
    )
    assert r.status_code == 409 and error_of(r)["code"] == "benchmark_closed", r.text
    # the private board: each team's best final by the private mae, computed here
    private = {
        s["id"]: float(np.mean(np.abs(y[mask] - p[mask])))
        for s, p in zip(a + b, preds, strict=True)
    }
    best = sorted(min(private[x] for x in ids) for ids in ([a[0]["id"], a[1]["id"]], bob_default))
    board = _current(api, bob, bid, {"part": "private"})
    assert board["part"] == "private" and board["total"] == 2, board
    assert [e["value"] for e in board["entries"]] == pytest.approx(best, rel=1e-12)
    assert all(e["low"] is not None and e["rank_low"] is not None for e in board["entries"])
    assert board["ranks"]["status"] == "current"
    # the web page of the private board: the board's rows, in its order
    page = api.get(f"/ui/benchmarks/{bid}", params={"part": "private"}, headers=bob)
    assert page.status_code == 200 and 'id="private-note"' in page.text, page.text
    rows = re.findall(r'<tr class="[^"]*" data-submission="([^"]+)"', page.text)
    assert rows == [e["submission_id"] for e in board["entries"]]
    page_csv = api.get(
        f"/ui/benchmarks/{bid}/leaderboard.csv", params={"part": "private"}, headers=bob
    )
    api_csv = api.get(
        f"/v1/benchmarks/{bid}/leaderboard",
        params={"part": "private", "format": "csv"},
        headers=bob,
    )
    assert page_csv.status_code == 200 and page_csv.text == api_csv.text
    # once closed, the suite of finals takes the private values (its private board's)
    assert suite_values() == pytest.approx(best, rel=1e-12)
    deadline = time.monotonic() + 60
    while True:  # and its rows view resamples the private rows: its job completes
        doc = api.get(f"/v1/suites/{sid}/leaderboard", params={"view": "rows"}, headers=bob)
        if doc.json()["intervals"]["status"] == "current":
            break
        assert time.monotonic() < deadline, doc.text
        time.sleep(0.05)
    csv = api.get(
        f"/v1/benchmarks/{bid}/leaderboard",
        params={"part": "private", "format": "csv"},
        headers=bob,
    )
    assert csv.status_code == 200 and csv.text.count("\n") == 3, csv.text
    # private_result: the team's own and admins, equal to numpy on the private rows
    mine = api.get(f"/v1/submissions/{a[0]['id']}", headers=alice).json()
    assert mine["private_result"]["metrics"]["mae"]["value"] == pytest.approx(private[a[0]["id"]])
    other = api.get(f"/v1/submissions/{a[0]['id']}", headers=bob).json()
    assert other["private_result"] is None


def test_a_deleted_final_frees_its_slot(api: TestClient, worker: Any) -> None:
    bench = _bench(api, _targets(), private_mask=_mask().tolist(), max_final=1)
    key = _team(api, "carol")
    first, second = (_submit(api, key, bench["id"], p) for p in _preds(2))
    r = api.patch(f"/v1/submissions/{first['id']}", json={"final": True}, headers=key)
    assert r.status_code == 200, r.text
    r = api.patch(f"/v1/submissions/{second['id']}", json={"final": True}, headers=key)
    assert r.status_code == 409 and error_of(r)["code"] == "too_many_finals", r.text
    assert api.delete(f"/v1/submissions/{first['id']}", headers=key).status_code == 204
    r = api.patch(f"/v1/submissions/{second['id']}", json={"final": True}, headers=key)
    assert r.status_code == 200, r.text
    finals = api.get(f"/v1/benchmarks/{bench['id']}/finals", headers=key).json()["teams"]
    assert [s["id"] for s in finals[0]["submissions"]] == [second["id"]]


def test_finals_candidates_include_earlier_versions_index(
    api: TestClient, worker: Any, store: Any
) -> None:
    """Default finals come from the index written with each submission; a submission that an
    earlier version indexed only once it succeeded (its own key) is still a candidate."""
    from service import keys

    bench = _bench(api, _targets(), private_mask=_mask().tolist(), max_final=2)
    key = _team(api, "dave")
    first, second = (_submit(api, key, bench["id"], p) for p in _preds(2))
    index = keys.bench_submissions(bench["id"])
    assert set(store.client.zrange(index, 0, -1)) == {first["id"].encode(), second["id"].encode()}
    # as an earlier version stored the first: only in the index of succeeded submissions
    store.client.zrem(index, first["id"])
    store.client.zadd(keys.bench_succeeded_legacy(bench["id"]), {first["id"]: 1.0})
    finals = api.get(f"/v1/benchmarks/{bench['id']}/finals", headers=key).json()["teams"]
    chosen = {s["id"]: s["chosen"] for s in finals[0]["submissions"]}
    assert chosen == {first["id"]: "default", second["id"]: "default"}
    # deleting it removes it from that index too
    assert api.delete(f"/v1/submissions/{first['id']}", headers=key).status_code == 204
    assert store.client.zcard(keys.bench_succeeded_legacy(bench["id"])) == 0
