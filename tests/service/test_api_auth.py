"""API keys: bearer and X-API-Key, missing/wrong/revoked keys, admin routes, foreign ids."""

from __future__ import annotations

import pytest

from tests.factories import gaussian_json
from tests.service._api import ADMIN, ADMIN_KEY, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]

ROUTES = [
    ("GET", "/v1/submissions"),
    ("POST", "/v1/submissions"),
    ("GET", "/v1/submissions/sub_x"),
    ("PATCH", "/v1/submissions/sub_x"),
    ("DELETE", "/v1/submissions/sub_x"),
    ("POST", "/v1/submissions/sub_x/cancel"),
    ("GET", "/v1/admin/keys"),
    ("POST", "/v1/admin/keys"),
    ("DELETE", "/v1/admin/keys/k"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_v1_route_but_the_catalogue_needs_a_key(api: TestClient, method: str, path: str):
    r = api.request(method, path)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    err = error_of(r)
    assert err["code"] == "unauthorized"
    assert "API key is required" in err["message"]


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer not-a-key"},
        {"X-API-Key": "not-a-key"},
        {"Authorization": "Bearer "},
    ],
)
def test_a_wrong_key_is_refused(api: TestClient, headers: dict[str, str]):
    r = api.get("/v1/submissions", headers=headers)
    assert r.status_code == 401
    assert error_of(r)["code"] == "unauthorized"


def test_the_catalogue_and_health_need_no_key(api: TestClient):
    assert api.get("/v1/metrics").status_code == 200
    assert api.get("/healthz").status_code == 200


def test_x_api_key_header_works_like_bearer(api: TestClient):
    r = api.post("/v1/admin/keys", json={"name": "team-a"}, headers={"X-API-Key": ADMIN_KEY})
    assert r.status_code == 201
    token = r.json()["key"]
    assert api.get("/v1/submissions", headers={"X-API-Key": token}).status_code == 200
    assert (
        api.get("/v1/submissions", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    )


def test_admin_creates_lists_and_revokes_submitter_keys(api: TestClient):
    r = api.post("/v1/admin/keys", json={"name": "team-b"}, headers=ADMIN)
    assert r.status_code == 201
    created = r.json()
    assert r.headers["Cache-Control"] == "no-store"
    assert created["role"] == "submitter"
    assert created["name"] == "team-b"
    assert not created["revoked"]
    headers = {"Authorization": f"Bearer {created['key']}"}
    assert api.get("/v1/submissions", headers=headers).status_code == 200

    listed = api.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
    by_id = {k["key_id"]: k for k in listed}
    assert by_id[created["key_id"]]["name"] == "team-b"
    assert all("key" not in k and "hash" not in k for k in listed)
    assert {k["role"] for k in listed} == {"admin", "submitter"}

    assert api.delete(f"/v1/admin/keys/{created['key_id']}", headers=ADMIN).status_code == 204
    r = api.get("/v1/submissions", headers=headers)
    assert r.status_code == 401
    assert "revoked" in error_of(r)["message"]
    listed = api.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
    assert {k["key_id"]: k for k in listed}[created["key_id"]]["revoked"] is True
    # Revoking again is harmless.
    assert api.delete(f"/v1/admin/keys/{created['key_id']}", headers=ADMIN).status_code == 204


def test_admin_key_errors(api: TestClient):
    r = api.delete("/v1/admin/keys/no-such-key", headers=ADMIN)
    assert r.status_code == 404
    assert error_of(r)["field"] == "key_id"
    admin_id = next(
        k["key_id"]
        for k in api.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
        if k["role"] == "admin"
    )
    r = api.delete(f"/v1/admin/keys/{admin_id}", headers=ADMIN)
    assert r.status_code == 409
    assert "admin key" in error_of(r)["message"]
    r = api.post("/v1/admin/keys", json={"name": ""}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "name"
    r = api.post("/v1/admin/keys", json={"name": "x", "role": "admin"}, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == "role"


def test_submitter_keys_cannot_use_admin_routes(api: TestClient, submitter: dict[str, str]):
    for method, path in [(m, p) for m, p in ROUTES if p.startswith("/v1/admin/")]:
        r = api.request(method, path, headers=submitter, json={"name": "x"})
        assert r.status_code == 403, (method, path)
        assert error_of(r)["code"] == "forbidden"


def test_foreign_submissions_answer_404(idle_api: TestClient):
    alice = new_key(idle_api, "alice")
    bob = new_key(idle_api, "bob")
    r = idle_api.post("/v1/submissions", json=gaussian_json(8), headers=alice)
    assert r.status_code == 202, r.text
    sub_id = r.json()["id"]
    for method, path, body in [
        ("GET", f"/v1/submissions/{sub_id}", None),
        ("PATCH", f"/v1/submissions/{sub_id}", {"visibility": "public"}),
        ("DELETE", f"/v1/submissions/{sub_id}", None),
        ("POST", f"/v1/submissions/{sub_id}/cancel", None),
    ]:
        r = idle_api.request(method, path, json=body, headers=bob)
        assert r.status_code == 404, (method, path)
        err = error_of(r)
        assert err["code"] == "not_found"
        assert sub_id in err["message"]
        # Exactly what an unknown id gets.
        unknown = idle_api.request(
            method, path.replace(sub_id, "sub_unknown"), json=body, headers=bob
        )
        assert unknown.status_code == 404
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=alice).json()["visibility"] == (
        "private"
    )
    assert idle_api.get("/v1/submissions", headers=bob).json()["total"] == 0
    assert idle_api.get("/v1/submissions", headers=alice).json()["total"] == 1
    # The admin key reads every submission.
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=ADMIN).status_code == 200
    assert idle_api.get(f"/v1/submissions/{sub_id}", headers=alice).status_code == 200
