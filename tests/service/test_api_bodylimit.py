"""Bodies that FastAPI reads whole (PATCH, comparisons, teams, keys) are capped: 413 with the
error document, whether the size is declared (Content-Length) or only streamed (chunked);
the two upload routes keep their own, larger limits."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from service.api.bodylimit import SMALL_BODY_BYTES
from tests.service._api import ADMIN, TestClient, error_of

pytest_plugins = ["tests.service._api"]


def _big_team() -> bytes:
    # A valid JSON document, just too large: the limit is on bytes, not on content.
    return json.dumps({"name": "t", "pad": "x" * (SMALL_BODY_BYTES + 10)}).encode()


def _chunks(data: bytes, size: int = 64 << 10) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_limit_is_refused_with_413(idle_api: TestClient, chunked: bool) -> None:
    data = _big_team()
    headers = {**ADMIN, "Content-Type": "application/json"}
    content = _chunks(data) if chunked else data
    r = idle_api.post("/v1/admin/teams", content=content, headers=headers)
    assert r.status_code == 413, r.text
    err = error_of(r)
    assert err["code"] == "payload_too_large" and err["field"] == "body"
    assert str(SMALL_BODY_BYTES) in err["message"]
    # nothing was created
    names = [t["name"] for t in idle_api.get("/v1/admin/teams", headers=ADMIN).json()["teams"]]
    assert "t" not in names


def test_patch_and_comparison_bodies_are_capped_too(idle_api: TestClient) -> None:
    pad = "x" * (SMALL_BODY_BYTES + 1)
    for method, path in [
        ("PATCH", "/v1/submissions/sub_nope"),
        ("PATCH", "/v1/benchmarks/bench_nope"),
        ("POST", "/v1/comparisons"),
        ("POST", "/v1/admin/keys"),
    ]:
        r = idle_api.request(method, path, json={"pad": pad}, headers=ADMIN)
        assert r.status_code == 413, (method, path, r.text)


def test_a_body_under_the_limit_reaches_the_route(idle_api: TestClient) -> None:
    # Just under the limit: parsed and validated as before (422 for the unknown field).
    body = json.dumps({"name": "t", "pad": "x" * (SMALL_BODY_BYTES - 100)}).encode()
    r = idle_api.post(
        "/v1/admin/teams", content=body, headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    r = idle_api.post("/v1/admin/teams", json={"name": "small-team"}, headers=ADMIN)
    assert r.status_code == 201, r.text


def test_the_upload_routes_keep_their_own_limit(idle_api: TestClient) -> None:
    # A JSON submission larger than the small-body cap is read by the upload path (and here
    # refused for its content, not its size).
    n = SMALL_BODY_BYTES // 3
    body = {"model_name": "m", "prediction": {"kind": "gaussian", "mean": [0.0] * n}, "y": [0.0]}
    r = idle_api.post("/v1/submissions", json=body, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert len(r.request.content) > SMALL_BODY_BYTES
