"""Bodies that FastAPI reads whole (PATCH, comparisons, teams, keys) are capped: 413 with the
error document, whether the size is declared (Content-Length) or only streamed (chunked);
the two upload routes keep their own, larger limits."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
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


def test_a_client_gone_mid_upload_is_no_internal_error(
    live_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Half of a declared body, then the connection closes: nothing is stored, and the
    # service logs no internal error (it is the client's doing).
    host, port = live_server.url.removeprefix("http://").split(":")
    body = json.dumps({"model_name": "m", "pad": "x" * 200_000}).encode()
    caplog.set_level(logging.INFO, logger="uqeval.api")
    for path in ("/v1/submissions", "/v1/comparisons"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {ADMIN['Authorization']}"
                f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body[: len(body) // 2])
        deadline = time.monotonic() + 20
        while not any(path in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    with httpx.Client(base_url=live_server.url, headers=ADMIN) as client:
        assert client.get("/v1/submissions").json()["total"] == 0
