"""Teams and roles over HTTP: team keys share submissions, visibility (and its later changes,
with their effect on the leaderboards), admin reads everything, and the auth matrix of the
submission routes."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from tests.factories import gaussian_json
from tests.service._api import ADMIN, TestClient, error_of, new_key, wait_terminal

pytest_plugins = ["tests.service._api"]


def new_team(client: TestClient, name: str) -> str:
    r = client.post("/v1/admin/teams", json={"name": name}, headers=ADMIN)
    assert r.status_code == 201, r.text
    team_id: str = r.json()["team_id"]
    return team_id


def team_key(client: TestClient, team_id: str, name: str = "member") -> dict[str, str]:
    r = client.post("/v1/admin/keys", json={"name": name, "team_id": team_id}, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert r.json()["team_id"] == team_id
    return {"Authorization": f"Bearer {r.json()['key']}"}


def submit(client: TestClient, headers: dict[str, str], **fields: Any) -> str:
    r = client.post("/v1/submissions", json=gaussian_json(8, **fields), headers=headers)
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    return sub_id


def test_admin_creates_teams_and_team_keys(api: TestClient):
    team = new_team(api, "vision-lab")
    listed = api.get("/v1/admin/teams", headers=ADMIN).json()["teams"]
    assert [t["team_id"] for t in listed] == [team]
    assert listed[0]["name"] == "vision-lab"
    headers = team_key(api, team)
    keys = api.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
    assert {k["team_id"] for k in keys} == {None, team}  # the admin key has no team
    # Unknown team: 422 naming the field; submitters may not create teams.
    r = api.post("/v1/admin/keys", json={"name": "x", "team_id": "team_nope"}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "team_id"
    assert api.post("/v1/admin/teams", json={"name": "x"}, headers=headers).status_code == 403
    assert api.get("/v1/admin/teams", headers=headers).status_code == 403
    r = api.post("/v1/admin/teams", json={"name": "x", "extra": 1}, headers=ADMIN)
    assert r.status_code == 422


def test_team_members_share_submissions_and_others_get_404(idle_api: TestClient):
    red, blue = new_team(idle_api, "red"), new_team(idle_api, "blue")
    red1, red2 = team_key(idle_api, red, "r1"), team_key(idle_api, red, "r2")
    blue1 = team_key(idle_api, blue, "b1")
    private = submit(idle_api, red1)
    public = submit(idle_api, red1, visibility="public")

    # The other member of the team reads, lists and changes them.
    page = idle_api.get("/v1/submissions", headers=red2).json()
    assert page["total"] == 2
    assert {i["id"] for i in page["items"]} == {private, public}
    assert {i["team_id"] for i in page["items"]} == {red}
    doc = idle_api.get(f"/v1/submissions/{private}", headers=red2).json()
    assert doc["visibility"] == "private"
    assert doc["team_id"] == red

    # Another team: private -> 404 exactly like an unknown id; public -> readable only.
    for method, path, body in [
        ("GET", f"/v1/submissions/{private}", None),
        ("PATCH", f"/v1/submissions/{private}", {"visibility": "public"}),
        ("DELETE", f"/v1/submissions/{private}", None),
        ("POST", f"/v1/submissions/{private}/cancel", None),
    ]:
        r = idle_api.request(method, path, json=body, headers=blue1)
        assert r.status_code == 404, (method, path)
        unknown = idle_api.request(
            method, path.replace(private, "sub_unknown"), json=body, headers=blue1
        )
        assert unknown.status_code == 404
        assert error_of(r)["code"] == error_of(unknown)["code"] == "not_found"
    r = idle_api.get(f"/v1/submissions/{public}", headers=blue1)
    assert r.status_code == 200
    assert r.json()["visibility"] == "public"
    assert idle_api.delete(f"/v1/submissions/{public}", headers=blue1).status_code == 403
    assert idle_api.post(f"/v1/submissions/{public}/cancel", headers=blue1).status_code == 403
    r = idle_api.patch(f"/v1/submissions/{public}", json={"visibility": "private"}, headers=blue1)
    assert r.status_code == 403
    assert idle_api.get("/v1/submissions", headers=blue1).json()["total"] == 0

    # Admin reads and lists everything.
    assert idle_api.get("/v1/submissions", headers=ADMIN).json()["total"] == 2
    assert idle_api.get(f"/v1/submissions/{private}", headers=ADMIN).status_code == 200

    # A team member cancels and deletes a teammate's submission.
    r = idle_api.post(f"/v1/submissions/{private}/cancel", headers=red2)
    assert r.status_code == 202
    assert r.json()["status"] == "cancelled"
    assert idle_api.delete(f"/v1/submissions/{private}", headers=red2).status_code == 204
    assert idle_api.get("/v1/submissions", headers=red1).json()["total"] == 1
    # Admin deletes any submission.
    assert idle_api.delete(f"/v1/submissions/{public}", headers=ADMIN).status_code == 204
    assert idle_api.get("/v1/submissions", headers=red1).json()["total"] == 0


def test_visibility_is_validated(idle_api: TestClient):
    headers = new_key(idle_api)
    r = idle_api.post(
        "/v1/submissions", json=gaussian_json(8, visibility="everyone"), headers=headers
    )
    assert r.status_code == 422
    assert error_of(r)["field"] == "visibility"
    sub_id = submit(idle_api, headers)
    for body, field in [
        ({"visibility": "everyone"}, "visibility"),
        ({"visibility": True}, "visibility"),
        ({}, "body"),
        ({"visibility": "public", "model_name": "x"}, "model_name"),
    ]:
        r = idle_api.patch(f"/v1/submissions/{sub_id}", json=body, headers=headers)
        assert r.status_code == 422, body
        assert error_of(r)["field"] == field, body
    r = idle_api.patch(f"/v1/submissions/{sub_id}", content=b"{", headers=headers)
    assert r.status_code in (400, 422)
    error_of(r)


def test_a_team_changes_the_visibility_of_its_submission(idle_api: TestClient):
    red, blue = new_team(idle_api, "red"), new_team(idle_api, "blue")
    red1, red2, blue1 = team_key(idle_api, red), team_key(idle_api, red), team_key(idle_api, blue)
    sub_id = submit(idle_api, red1)
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=blue1).status_code == 404
    # Another member of the team makes it public: every key reads it (a queued one too).
    r = idle_api.patch(f"/v1/submissions/{sub_id}", json={"visibility": "public"}, headers=red2)
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["visibility"], r.json()["status"]) == (
        sub_id,
        "public",
        "queued",
    )
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=blue1).json()["visibility"] == (
        "public"
    )
    # Unchanged is fine; the admin makes it private again: the other team gets 404.
    r = idle_api.patch(f"/v1/submissions/{sub_id}", json={"visibility": "public"}, headers=red1)
    assert r.status_code == 200 and r.json()["visibility"] == "public"
    r = idle_api.patch(f"/v1/submissions/{sub_id}", json={"visibility": "private"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["visibility"] == "private"
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=blue1).status_code == 404
    listed = idle_api.get("/v1/submissions", headers=red1).json()["items"]
    assert [(i["id"], i["visibility"]) for i in listed] == [(sub_id, "private")]


def bench_targets(n: int) -> np.ndarray:
    return np.random.default_rng(42).normal(size=n)


def bench_submit(
    client: TestClient, headers: dict[str, str], bench_id: str, scale: float, seed: int
) -> tuple[str, float]:
    """A public Gaussian submission off the targets by noise of size ``scale``; returns its
    id and its MAE written from the formula (mean |mean - y|)."""
    y = bench_targets(40)
    mean = y + scale * np.random.default_rng(seed).normal(size=y.size)
    body = {
        "model_name": f"m{seed}",
        "benchmark_id": bench_id,
        "visibility": "public",
        "prediction": {"kind": "gaussian", "mean": mean.tolist(), "std": [1.0] * y.size},
    }
    r = client.post("/v1/submissions", json=body, headers=headers)
    assert r.status_code == 202, r.text
    return r.json()["id"], float(np.mean(np.abs(mean - y)))


def board_rows(client: TestClient, bench_id: str, headers: dict[str, str]) -> list[Any]:
    r = client.get(f"/v1/benchmarks/{bench_id}/leaderboard", headers=headers)
    assert r.status_code == 200, r.text
    return [(e["team_id"], e["submission_id"], e["value"]) for e in r.json()["entries"]]


def test_visibility_changes_move_submissions_on_and_off_the_leaderboard(
    api: TestClient, worker: object
):
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": "vis",
            "primary_metric": "mae",
            "metrics": ["mae"],
            "bootstrap": {"n_resamples": 20},
            "y": bench_targets(40).tolist(),
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bench = r.json()["id"]
    red, blue = new_team(api, "red"), new_team(api, "blue")
    red1, blue1 = team_key(api, red), team_key(api, blue)
    good, good_mae = bench_submit(api, red1, bench, 0.1, 1)
    worse, worse_mae = bench_submit(api, red1, bench, 1.0, 2)
    other, other_mae = bench_submit(api, blue1, bench, 0.5, 3)
    for sub_id in (good, worse, other):
        assert wait_terminal(api, ADMIN, sub_id)["status"] == "succeeded"
    assert good_mae < other_mae < worse_mae
    full = [(red, good, good_mae), (blue, other, other_mae)]
    rows = board_rows(api, bench, blue1)
    assert [r[:2] for r in rows] == [f[:2] for f in full]
    assert [r[2] for r in rows] == pytest.approx([f[2] for f in full], rel=1e-12)

    # Red's best goes private: red's next best takes its place, for every reader.
    r = api.patch(f"/v1/submissions/{good}", json={"visibility": "private"}, headers=red1)
    assert r.status_code == 200, r.text
    assert r.json()["visibility"] == "private" and r.json()["result"] is not None
    rows = board_rows(api, bench, blue1)
    assert [r[:2] for r in rows] == [(blue, other), (red, worse)]
    assert [r[2] for r in rows] == pytest.approx([other_mae, worse_mae], rel=1e-12)
    assert api.get(f"/v1/submissions/{good}", headers=blue1).status_code == 404
    # Both of red's go private: red is off the board.
    r = api.patch(f"/v1/submissions/{worse}", json={"visibility": "private"}, headers=ADMIN)
    assert r.status_code == 200
    assert [r[:2] for r in board_rows(api, bench, red1)] == [(blue, other)]
    # Public again: the board is as it was.
    for sub_id in (worse, good):
        r = api.patch(f"/v1/submissions/{sub_id}", json={"visibility": "public"}, headers=red1)
        assert r.status_code == 200
    rows = board_rows(api, bench, blue1)
    assert [r[:2] for r in rows] == [f[:2] for f in full]
    r = api.patch(f"/v1/submissions/{good}", json={"visibility": "private"}, headers=blue1)
    assert r.status_code == 403  # another team may not change it
    # A change makes the rank intervals stale; they are computed anew for the new board.
    current = wait_ranks_current(api, bench)
    assert {e["submission_id"] for e in current["entries"]} == {good, other}
    r = api.patch(f"/v1/submissions/{good}", json={"visibility": "private"}, headers=red1)
    assert r.status_code == 200
    doc = api.get(f"/v1/benchmarks/{bench}/leaderboard", headers=ADMIN).json()
    assert doc["ranks"]["status"] == "stale"
    current = wait_ranks_current(api, bench)
    assert [e["submission_id"] for e in current["entries"]] == [other, worse]
    assert all(e["rank_low"] is not None for e in current["entries"])


def wait_ranks_current(client: TestClient, bench_id: str, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        doc = client.get(f"/v1/benchmarks/{bench_id}/leaderboard", headers=ADMIN).json()
        if doc["ranks"]["status"] == "current":
            return doc
        assert time.monotonic() < deadline, doc["ranks"]
        time.sleep(0.1)


# --- the auth matrix of the submission routes ------------------------------------------------

CALLERS = ["none", "wrong", "revoked", "other_team", "own_team", "admin"]

#: (method, path template) -> expected status per caller, for a private submission.
PRIVATE_MATRIX: list[tuple[str, str, dict[str, int]]] = [
    ("GET", "/v1/submissions/{id}", {"other_team": 404, "own_team": 200, "admin": 200}),
    ("PATCH", "/v1/submissions/{id}", {"other_team": 404, "own_team": 200, "admin": 200}),
    ("POST", "/v1/submissions/{id}/cancel", {"other_team": 404, "own_team": 202, "admin": 202}),
    ("DELETE", "/v1/submissions/{id}", {"other_team": 404, "own_team": 204, "admin": 204}),
    ("GET", "/v1/submissions", {"other_team": 200, "own_team": 200, "admin": 200}),
]


@pytest.fixture
def callers(idle_api: TestClient) -> dict[str, dict[str, str]]:
    red, blue = new_team(idle_api, "red"), new_team(idle_api, "blue")
    r = idle_api.post("/v1/admin/keys", json={"name": "gone", "team_id": red}, headers=ADMIN)
    revoked = {"Authorization": f"Bearer {r.json()['key']}"}
    assert idle_api.delete(f"/v1/admin/keys/{r.json()['key_id']}", headers=ADMIN).status_code == 204
    return {
        "none": {},
        "wrong": {"Authorization": "Bearer uqe_wrong"},
        "revoked": revoked,
        "other_team": team_key(idle_api, blue),
        "own_team": team_key(idle_api, red),
        "owner": team_key(idle_api, red, "owner"),
        "admin": ADMIN,
    }


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize(("method", "path", "expected"), PRIVATE_MATRIX)
def test_auth_matrix_of_submissions(
    idle_api: TestClient,
    callers: dict[str, dict[str, str]],
    caller: str,
    method: str,
    path: str,
    expected: dict[str, int],
):
    sub_id = submit(idle_api, callers["owner"])
    body = {"visibility": "public"} if method == "PATCH" else None
    r = idle_api.request(method, path.format(id=sub_id), json=body, headers=callers[caller])
    want = expected.get(caller, 401)
    assert r.status_code == want, (caller, method, path, r.text)
    if want >= 400:
        error_of(r)
    if method == "GET" and path == "/v1/submissions" and want == 200:
        assert r.json()["total"] == (0 if caller == "other_team" else 1)


#: The other routes: (method, path, body, status for a submitter of either team — 0: 404 for
#: the other team and the admin's status for the owner's team —, status for admin).
OTHER_ROUTES: list[tuple[str, str, Any, int, int]] = [
    ("GET", "/v1/benchmarks", None, 200, 200),
    ("POST", "/v1/benchmarks", {"name": "b", "primary_metric": "mae", "y": [0.0, 1.0]}, 403, 201),
    ("GET", "/v1/benchmarks/{bench}", None, 200, 200),
    ("PATCH", "/v1/benchmarks/{bench}", {"description": "x"}, 403, 200),
    ("DELETE", "/v1/benchmarks/{bench}", None, 403, 204),
    ("GET", "/v1/benchmarks/{bench}/leaderboard", None, 200, 200),
    ("GET", "/v1/benchmarks/bench_unknown", None, 404, 404),
    # Own team and admin see the submission (not on this benchmark: 422); others get 404.
    (
        "POST",
        "/v1/comparisons",
        {"benchmark_id": "{bench}", "submission_ids": ["{sub}", "s"]},
        0,
        422,
    ),
    ("GET", "/v1/comparisons/cmp_unknown", None, 404, 404),
    ("GET", "/v1/admin/teams", None, 403, 200),
    ("POST", "/v1/admin/teams", {"name": "t"}, 403, 201),
    ("GET", "/v1/admin/keys", None, 403, 200),
    ("POST", "/v1/admin/keys", {"name": "k"}, 403, 201),
]


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize(("method", "path", "body", "submitter", "admin"), OTHER_ROUTES)
def test_auth_matrix_of_the_other_routes(
    idle_api: TestClient,
    callers: dict[str, dict[str, str]],
    caller: str,
    method: str,
    path: str,
    body: Any,
    submitter: int,
    admin: int,
):
    r = idle_api.post(
        "/v1/benchmarks",
        json={"name": "b", "primary_metric": "mae", "y": [0.0] * 8},
        headers=ADMIN,
    )
    bench = r.json()["id"]
    # A private submission of the "owner" key (team red): another team's comparison of it
    # is answered like an unknown id; so is a comparison naming an unknown submission.
    sub = submit(idle_api, callers["owner"])
    fill = {"bench": bench, "sub": sub}
    if isinstance(body, dict):
        body = {
            k: (
                v.format(**fill)
                if isinstance(v, str)
                else [x.format(**fill) for x in v]
                if isinstance(v, list) and all(isinstance(x, str) for x in v)
                else v
            )
            for k, v in body.items()
        }
    r = idle_api.request(method, path.format(**fill), json=body, headers=callers[caller])
    other, own = (404, admin) if submitter == 0 else (submitter, submitter)
    want = {"other_team": other, "own_team": own, "admin": admin}.get(caller, 401)
    assert r.status_code == want, (caller, method, path, r.text)
    if want >= 400:
        error_of(r)
