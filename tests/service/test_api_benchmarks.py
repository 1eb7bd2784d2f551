"""Benchmarks with hidden targets over HTTP: admin CRUD, submissions against a benchmark (N and
kind checked before the 202), results equal to uqcore on the hidden targets, quotas with the
system-failure exemption, and targets unreadable through every route."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from service import keys
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays, npz_bytes
from tests.service._api import ADMIN, NPZ, TestClient, error_of, new_key, wait_terminal
from uqcore import evaluate
from uqcore import predictions as P

pytest_plugins = ["tests.service._api"]

N = 60


def bench_body(n: int = N, seed: int = 11, **fields: Any) -> dict[str, Any]:
    y = gaussian_arrays(n, seed)["y"]
    body: dict[str, Any] = {
        "name": "hidden-gauss",
        "description": "seeded Gaussian targets",
        "primary_metric": "crps",
        "metrics": ["crps", "mae", "nll"],
        "bootstrap": {"n_resamples": 40},
        "seed": 5,
        "y": y.tolist(),
    }
    body.update(fields)
    return body


def create_bench(client: TestClient, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/benchmarks", json=bench_body(**fields), headers=ADMIN)
    assert r.status_code == 201, r.text
    doc: dict[str, Any] = r.json()
    return doc


def prediction_json(bench_id: str, n: int = N, seed: int = 11, **fields: Any) -> dict[str, Any]:
    a = gaussian_arrays(n, seed)
    body: dict[str, Any] = {
        "model_name": "m",
        "benchmark_id": bench_id,
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
    }
    body.update(fields)
    return body


def test_admin_benchmark_crud_without_targets(api: TestClient, submitter: dict[str, str]):
    created = create_bench(api, quota={"per_day": 3, "total": 10})
    bench_id = created["id"]
    assert created["n"] == N
    assert created["metrics"] == ["crps", "mae", "nll"]
    assert created["rule"] == "best"
    assert created["quota"] == {"per_day": 3, "total": 10}
    assert created["baseline_id"] is None
    assert "y" not in created and "groups" not in created
    # Submitters read the metadata, never the targets, and cannot change anything.
    got = api.get(f"/v1/benchmarks/{bench_id}", headers=submitter)
    assert got.status_code == 200
    assert got.json() == created
    assert [b["id"] for b in api.get("/v1/benchmarks", headers=submitter).json()["benchmarks"]] == [
        bench_id
    ]
    assert api.post("/v1/benchmarks", json=bench_body(), headers=submitter).status_code == 403
    r = api.patch(f"/v1/benchmarks/{bench_id}", json={"rule": "latest"}, headers=submitter)
    assert r.status_code == 403
    assert api.delete(f"/v1/benchmarks/{bench_id}", headers=submitter).status_code == 403
    # Update.
    r = api.patch(
        f"/v1/benchmarks/{bench_id}",
        json={"rule": "latest", "primary_metric": "nll", "description": "new"},
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["rule"] == "latest"
    assert updated["primary_metric"] == "nll"
    assert updated["metrics"] == ["nll", "crps", "mae"]
    assert updated["description"] == "new"
    assert updated["n"] == N
    r = api.patch(f"/v1/benchmarks/{bench_id}", json={"y": [1.0]}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "y"
    r = api.patch(f"/v1/benchmarks/{bench_id}", json={"baseline_id": "sub_x"}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "baseline_id"
    # Delete.
    assert api.delete(f"/v1/benchmarks/{bench_id}", headers=ADMIN).status_code == 204
    for method in ("GET", "DELETE"):
        r = api.request(method, f"/v1/benchmarks/{bench_id}", headers=ADMIN)
        assert r.status_code == 404
        assert error_of(r)["field"] == "bench_id"
    assert api.get("/v1/benchmarks", headers=submitter).json()["benchmarks"] == []
    assert api.get("/v1/benchmarks").status_code == 401


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"primary_metric": "no_such_metric"}, "primary_metric"),
        ({"metrics": ["crps", "nope"]}, "metrics"),
        ({"groups": [1, 2]}, "groups"),
        ({"bootstrap": {"unit": "cluster"}}, "bootstrap.unit"),
        ({"params": {"coverage": {"nope": 1}}}, "params.coverage"),
        (
            {"metrics": ["coverage"], "params": {"coverage": {"level": 1.5}}},
            "params.coverage.level",
        ),
        ({"metrics": ["crps", "mdae"], "params": {"mdae": {"method": "x"}}}, "params.mdae.method"),
        ({"y": [1.0, "2"]}, "y"),
        ({"quota": {"per_day": 0}}, "quota.per_day"),
    ],
)
def test_benchmark_creation_errors(api: TestClient, fields: dict[str, Any], field: str):
    r = api.post("/v1/benchmarks", json=bench_body(**fields), headers=ADMIN)
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == field


def test_submission_against_a_benchmark_uses_the_hidden_targets(
    api: TestClient, submitter: dict[str, str], worker
):
    bench = create_bench(api)
    r = api.post("/v1/submissions", json=prediction_json(bench["id"]), headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert doc["benchmark_id"] == bench["id"]
    assert doc["analyses"]["metrics"] == ["crps", "mae", "nll"]
    assert doc["analyses"]["seed"] == 5
    a = gaussian_arrays(N, 11)
    expected = evaluate(P.Gaussian(a["mean"], a["std"]), a["y"], ["crps", "mae", "nll"])
    for name in ("crps", "mae", "nll"):
        got = doc["result"]["metrics"][name]
        assert got["value"] == pytest.approx(expected.scalar(name), rel=1e-12)
        assert got["interval"]["n_resamples"] == 40
    # NPZ upload: the prediction only.
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "npz", "benchmark_id": bench["id"]},
        mean=a["mean"],
        std=a["std"],
    )
    r = api.post("/v1/submissions", content=body, headers={**submitter, **NPZ})
    assert r.status_code == 202, r.text
    doc2 = wait_terminal(api, submitter, r.json()["id"])
    assert doc2["result"]["metrics"]["mae"]["value"] == doc["result"]["metrics"]["mae"]["value"]


def test_benchmark_submission_errors_before_the_202(idle_api: TestClient):
    headers = new_key(idle_api)
    bench = create_bench(idle_api, kinds=["gaussian", "point_uncertainty"])
    bid = bench["id"]
    cases: list[tuple[dict[str, Any], int, str | None]] = [
        (prediction_json(bid, n=N - 1), 422, "prediction.mean"),
        (prediction_json("bench_unknown"), 404, "benchmark_id"),
        (prediction_json(bid, y=[0.0] * N), 422, None),
        (prediction_json(bid, analyses={"metrics": ["mae"]}), 422, None),
        (
            prediction_json(
                bid, prediction={"kind": "laplace", "loc": [0.0] * N, "scale": [1.0] * N}
            ),
            422,
            "prediction.kind",
        ),
        (
            # crps (primary) needs a distribution; a point + uncertainty has none.
            prediction_json(
                bid,
                prediction={
                    "kind": "point_uncertainty",
                    "prediction": [0.0] * N,
                    "uncertainty": [1.0] * N,
                },
            ),
            422,
            "prediction.kind",
        ),
    ]
    for body, status, field in cases:
        r = idle_api.post("/v1/submissions", json=body, headers=headers)
        assert r.status_code == status, (body.keys(), r.text)
        err = error_of(r)
        if field is not None:
            assert err["field"] == field, err
    # NPZ with a y member against a benchmark is refused.
    a = gaussian_arrays(N)
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "npz", "benchmark_id": bid},
        mean=a["mean"],
        std=a["std"],
        y=a["y"],
    )
    r = idle_api.post("/v1/submissions", content=body, headers={**headers, **NPZ})
    assert r.status_code == 422
    assert error_of(r)["field"] == "y"
    # Nothing was stored.
    assert idle_api.get("/v1/submissions", headers=headers).json()["total"] == 0


@pytest.fixture
def idle_store(idle_settings: Settings, idle_api: TestClient) -> Iterator[Store]:
    assert idle_settings.redis_url is not None
    s = Store.from_url(idle_settings.redis_url, idle_settings)
    try:
        yield s
    finally:
        s.close()


def test_quota_per_day_total_and_the_system_failure_exemption(
    idle_api: TestClient, idle_store: Store
):
    r = idle_api.post("/v1/admin/teams", json={"name": "red"}, headers=ADMIN)
    team = r.json()["team_id"]
    keys_ = []
    for name in ("r1", "r2"):
        r = idle_api.post("/v1/admin/keys", json={"name": name, "team_id": team}, headers=ADMIN)
        keys_.append({"Authorization": f"Bearer {r.json()['key']}"})
    other = new_key(idle_api, "loner")
    bench = create_bench(idle_api, quota={"per_day": 2, "total": 3})
    body = prediction_json(bench["id"])

    ids = []
    for headers in keys_:  # two members share the team's quota
        r = idle_api.post("/v1/submissions", json=body, headers=headers)
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    r = idle_api.post("/v1/submissions", json=body, headers=keys_[0])
    assert r.status_code == 429
    err = error_of(r)
    assert err["code"] == "quota_exceeded"
    assert "2 submissions per 24 h" in err["message"]
    assert 86000 < int(r.headers["Retry-After"]) <= 86400
    # Another team has its own quota.
    assert idle_api.post("/v1/submissions", json=body, headers=other).status_code == 202

    # A job failed by its input still counts; one failed by the system does not.
    assert idle_store.fail(ids[0], "invalid input: ...") == "failed"
    assert idle_api.post("/v1/submissions", json=body, headers=keys_[0]).status_code == 429
    assert idle_store.fail(ids[1], "internal error", system=True) == "failed"
    r = idle_api.post("/v1/submissions", json=body, headers=keys_[0])
    assert r.status_code == 202, r.text
    # Deleting a submission does not give its slot back.
    assert idle_api.delete(f"/v1/submissions/{r.json()['id']}", headers=keys_[0]).status_code == 204
    r = idle_api.post("/v1/submissions", json=body, headers=keys_[1])
    assert r.status_code == 429
    # The total: 3 counted (ids[0], the deleted one, and one more once the day frees up).
    quota_key = keys.quota(bench["id"], team)
    assert idle_store.client.zcard(quota_key) == 2
    idle_store.client.zadd(quota_key, {"sub_old": 1.0})  # an old one, outside the 24 h
    r = idle_api.post("/v1/submissions", json=body, headers=keys_[1])
    assert r.status_code == 429
    assert "total quota of 3" in error_of(r)["message"]
    assert "Retry-After" not in r.headers
    # Lifting the quota.
    r = idle_api.patch(f"/v1/benchmarks/{bench['id']}", json={"quota": None}, headers=ADMIN)
    assert r.json()["quota"] == {"per_day": None, "total": None}
    assert idle_api.post("/v1/submissions", json=body, headers=keys_[1]).status_code == 202


def test_targets_are_unreadable_through_every_route(
    api: TestClient, submitter: dict[str, str], worker
):
    bench = create_bench(api)
    y = np.asarray(bench_body()["y"])
    r = api.post(
        "/v1/submissions",
        json=prediction_json(bench["id"], visibility="public"),
        headers=submitter,
    )
    sub_id = r.json()["id"]
    assert wait_terminal(api, submitter, sub_id)["status"] == "succeeded"
    # A failing submission (wrong N) and a bad one.
    api.post("/v1/submissions", json=prediction_json(bench["id"], n=N + 1), headers=submitter)
    texts = []
    for path in [
        f"/v1/benchmarks/{bench['id']}",
        "/v1/benchmarks",
        f"/v1/submissions/{sub_id}",
        "/v1/submissions",
        f"/v1/benchmarks/{bench['id']}/leaderboard",
        f"/v1/benchmarks/{bench['id']}/leaderboard?format=csv",
        f"/v1/benchmarks/{bench['id']}/leaderboard?metric=nll",
        "/openapi.json",
    ]:
        r = api.get(path, headers=submitter)
        assert r.status_code == 200, path
        texts.append(r.text)
    r = api.post("/v1/submissions", json=prediction_json(bench["id"], n=N + 1), headers=submitter)
    texts.append(r.text)
    blob = "\n".join(texts)
    for value in y[:10]:
        for text in (repr(float(value)), json.dumps(float(value)), f"{value:.6f}"):
            assert text not in blob, text


def test_npz_benchmark_with_groups_and_cluster_bootstrap(
    api: TestClient, submitter: dict[str, str], worker
):
    n = 120
    y = gaussian_arrays(n, 11)["y"]
    groups = np.repeat(np.arange(12), 10)
    request = {
        "name": "per-pixel",
        "primary_metric": "mae",
        "bootstrap": {"n_resamples": 30, "unit": "cluster"},
    }
    body = npz_bytes(request, compressed=True, y=y, groups=groups)
    r = api.post("/v1/benchmarks", content=body, headers={**ADMIN, **NPZ})
    assert r.status_code == 201, r.text
    bench = r.json()
    assert bench["n"] == n and bench["has_groups"] is True
    assert bench["bootstrap"]["unit"] == "cluster"
    r = api.post("/v1/submissions", json=prediction_json(bench["id"], n=n), headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert doc["result"]["metrics"]["mae"]["interval"]["low"] is not None

    bad_y = y.copy()
    bad_y[7] = np.nan
    for content, headers, status, field in [
        (npz_bytes(request, y=bad_y), NPZ, 422, "y"),
        (npz_bytes(request, groups=groups), NPZ, 422, "y"),
        (npz_bytes(request, y=y, std=y), NPZ, 422, "std"),
        (
            npz_bytes({**request, "bootstrap": {"unit": "x"}}, y=y),
            NPZ,
            422,
            "request.bootstrap.unit",
        ),
        (b"{not json", {"Content-Type": "application/json"}, 400, "body"),
        (b"y=1", {"Content-Type": "text/plain"}, 415, "Content-Type"),
    ]:
        r = api.post("/v1/benchmarks", content=content, headers={**ADMIN, **headers})
        assert r.status_code == status, (field, r.text)
        assert error_of(r)["field"] == field
    r = api.post("/v1/benchmarks", content=npz_bytes(request, y=bad_y), headers={**ADMIN, **NPZ})
    assert error_of(r)["index"] == 7
