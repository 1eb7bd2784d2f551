"""Webhooks and Server-Sent Events end to end: a real API, Redis and Celery worker, and a real
HTTP receiver on loopback that records what it gets."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_json
from tests.service._api import (
    ADMIN,
    LiveServer,
    TestClient,
    error_of,
    new_key,
    wait_terminal,
)
from uqeval.webhooks import InvalidSignature, verify

pytest_plugins = ["tests.service._api"]

ROOT = Path(__file__).resolve().parents[2]


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers the next code of
    ``codes`` (then 200)."""

    def __init__(self, codes: list[int] | None = None) -> None:
        self.codes = list(codes or [])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    code = outer.codes.pop(0) if outer.codes else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait(self, count: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.requests)} requests received, expected {count}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def _secret(api: TestClient, headers: dict[str, str]) -> str:
    r = api.post("/v1/webhook-secret", headers=headers)
    assert r.status_code == 201, r.text
    secret: str = r.json()["secret"]
    return secret


def _settled(
    api: TestClient, headers: dict[str, str], path: str, count: int = 1, timeout_s: float = 60
) -> list[dict[str, Any]]:
    """The deliveries at ``path`` once ``count`` of them left ``pending``."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = api.get(path, headers=headers)
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        if len(items) >= count and all(d["status"] != "pending" for d in items):
            return items
        if time.monotonic() > deadline:
            raise AssertionError(f"deliveries still pending: {items}")
        time.sleep(0.05)


def _hmac(secret: str, t: str, body: bytes) -> str:
    """The signature computed here, independently of the service's code."""
    return hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()


def test_submission_event_signed_and_verified(api, worker, receiver):
    key = new_key(api, "hooks")
    secret = _secret(api, key)
    body = gaussian_json(32, seed=1, callback_url=receiver.url)
    r = api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 202, r.text
    sub_id = r.json()["id"]
    doc = wait_terminal(api, key, sub_id)
    assert doc["status"] == "succeeded"
    (got,) = receiver.wait(1)
    items = _settled(api, key, f"/v1/submissions/{sub_id}/deliveries")
    assert len(receiver.requests) == 1, "exactly one delivery"
    assert [d["status"] for d in items] == ["delivered"]
    assert [a["status_code"] for a in items[0]["attempts"]] == [200]

    raw, header = got["body"], got["headers"]["UQEval-Signature"]
    t, v1 = re.fullmatch(r"t=(\d+),v1=([0-9a-f]{64})", header).groups()  # type: ignore[union-attr]
    assert v1 == _hmac(secret, t, raw)
    event = verify(secret, raw, header)
    assert event["type"] == "submission.ended" == got["headers"]["UQEval-Event"]
    assert event["id"] == sub_id and event["status"] == "succeeded"
    assert event["delivery_id"] == items[0]["id"] == got["headers"]["UQEval-Delivery"]
    assert event["attempt"] == 1 and event["finished_at"] == doc["finished_at"]
    assert event["links"]["self"] == f"/v1/submissions/{sub_id}"

    with pytest.raises(InvalidSignature):
        verify(secret + "x", raw, header)  # wrong secret
    with pytest.raises(InvalidSignature):
        verify(secret, raw, header, now=int(t) + 301)  # replayed later
    with pytest.raises(InvalidSignature):
        verify(secret, raw.replace(b"succeeded", b"cancelled!"), header)  # tampered body
    with pytest.raises(InvalidSignature):
        verify(secret, raw, f"t={t}")  # malformed header
    assert verify(secret, raw, header, now=int(t) + 299)["id"] == sub_id

    # The standard-library snippet of docs/webhooks.md accepts it and refuses the others.
    text = (ROOT / "docs" / "webhooks.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def " in b)
    scope: dict[str, Any] = {}
    exec(snippet, scope)
    assert scope["verify_uqeval"](secret, raw, header)["id"] == sub_id
    for args in ((secret + "x", raw, header), (secret, raw + b" ", header)):
        with pytest.raises(ValueError, match="signature mismatch"):
            scope["verify_uqeval"](*args)
    old = f"t={int(t) - 600},v1={_hmac(secret, str(int(t) - 600), raw)}"
    with pytest.raises(ValueError, match="replayed"):
        scope["verify_uqeval"](secret, raw, old)
    with pytest.raises(InvalidSignature):
        verify(secret, raw, old)


def test_retries_with_backoff_then_resend(api, worker):
    key = new_key(api, "retry")
    _secret(api, key)
    with Receiver([500, 500, 200]) as rec:
        r = api.post("/v1/submissions", json=gaussian_json(16, callback_url=rec.url), headers=key)
        assert r.status_code == 202, r.text
        sub_id = r.json()["id"]
        wait_terminal(api, key, sub_id)
        path = f"/v1/submissions/{sub_id}/deliveries"
        (first,) = _settled(api, key, path)
        assert first["status"] == "delivered"
        assert [a["status_code"] for a in first["attempts"]] == [500, 500, 200]
        assert [a["attempt"] for a in first["attempts"]] == [1, 2, 3]
        bodies = [json.loads(q["body"]) for q in rec.wait(3)]
        assert [b["attempt"] for b in bodies] == [1, 2, 3]
        assert {b["delivery_id"] for b in bodies} == {first["id"]}

        r = api.post(path, headers=key)
        assert r.status_code == 202, r.text
        again = r.json()
        assert again["redelivery"] is True and again["id"] != first["id"]
        items = _settled(api, key, path, count=2)
        assert [d["id"] for d in items] == [again["id"], first["id"]]
        assert len(rec.wait(4)) == 4
        assert json.loads(rec.requests[3]["body"])["delivery_id"] == again["id"]

        # Another team neither lists nor resends them; an admin does.
        other = new_key(api, "other")
        assert api.get(path, headers=other).status_code == 404
        assert api.post(path, headers=other).status_code == 404
        assert api.get(path, headers=ADMIN).status_code == 200


def test_callback_checks(api, settings: Settings, store: Store):
    key = new_key(api, "ssrf")
    url = "http://127.0.0.1:9/hook"
    r = api.post("/v1/submissions", json=gaussian_json(8, callback_url=url), headers=key)
    assert r.status_code == 422
    assert error_of(r)["code"] == "webhook_secret_missing"
    assert "/v1/webhook-secret" in error_of(r)["message"]
    _secret(api, key)
    for bad, why in (
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/hook", "private"),
        ("ftp://127.0.0.1/hook", "http or https"),
        ("http://no-such-host.invalid/hook", "does not resolve"),
    ):
        r = api.post("/v1/submissions", json=gaussian_json(8, callback_url=bad), headers=key)
        assert r.status_code == 422, (bad, r.text)
        err = error_of(r)
        assert err["code"] == "callback_not_allowed" and err["field"] == "callback_url"
        assert why in err["message"], err
    # Allowed here (the test settings list 127.0.0.1); refused by default.
    r = api.post("/v1/submissions", json=gaussian_json(8, callback_url=url), headers=key)
    assert r.status_code == 202, r.text
    strict = settings.model_copy(update={"callback_allowed_hosts": []})
    with TestClient(create_app(strict, store=store)) as default_api:
        r = default_api.post(
            "/v1/submissions", json=gaussian_json(8, callback_url=url), headers=key
        )
        assert r.status_code == 422
        assert error_of(r)["code"] == "callback_not_allowed"
        assert "loopback" in error_of(r)["message"]
        listed = settings.model_copy(update={"callback_allowed_hosts": ["127.0.0.0/8"]})
    with TestClient(create_app(listed, store=store)) as cidr_api:
        r = cidr_api.post("/v1/submissions", json=gaussian_json(8, callback_url=url), headers=key)
        assert r.status_code == 202, r.text


def test_comparison_event(api, worker, receiver):
    r = api.post(
        "/v1/benchmarks",
        json={"name": "cmp-hooks", "primary_metric": "mae", "y": gaussian_json(24)["y"]},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bench = r.json()["id"]
    key = new_key(api, "cmp")
    secret = _secret(api, key)
    subs = []
    for seed in (1, 2):
        body = gaussian_json(24, seed=seed, benchmark_id=bench)
        for name in ("y", "analyses"):
            body.pop(name)
        r = api.post("/v1/submissions", json=body, headers=key)
        assert r.status_code == 202, r.text
        subs.append(r.json()["id"])
    for sub_id in subs:
        assert wait_terminal(api, key, sub_id)["status"] == "succeeded"
    assert receiver.requests == []  # these submissions had no callback
    r = api.post(
        "/v1/comparisons",
        json={"benchmark_id": bench, "submission_ids": subs, "callback_url": receiver.url},
        headers=key,
    )
    assert r.status_code == 202, r.text
    cmp_id = r.json()["id"]
    (got,) = receiver.wait(1)
    event = verify(secret, got["body"], got["headers"]["UQEval-Signature"])
    assert event["type"] == "comparison.ended" and event["id"] == cmp_id
    assert event["status"] == api.get(f"/v1/comparisons/{cmp_id}", headers=key).json()["status"]
    items = _settled(api, key, f"/v1/comparisons/{cmp_id}/deliveries")
    assert [d["status"] for d in items] == ["delivered"]


def test_cancel_by_api_notifies(idle_api, receiver):
    # No worker consumes this database: the job stays queued until the API cancels it.
    key = new_key(idle_api, "cancel")
    secret = _secret(idle_api, key)
    body = gaussian_json(8, callback_url=receiver.url)
    sub_id = idle_api.post("/v1/submissions", json=body, headers=key).json()["id"]
    r = idle_api.post(f"/v1/submissions/{sub_id}/cancel", headers=key)
    assert r.status_code == 202 and r.json()["status"] == "cancelled"
    # The delivery is recorded (its task waits on this idle database's queue).
    items = idle_api.get(f"/v1/submissions/{sub_id}/deliveries", headers=key).json()["items"]
    assert [(d["status"], d["event_type"]) for d in items] == [("pending", "submission.ended")]
    assert secret


def _events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    name = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name is not None:
            yield name, json.loads(line[len("data: ") :])
            name = None


def test_server_sent_events(live_server: LiveServer, worker):
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        key = new_key(client, "sse")
        body = gaussian_json(400, analyses={"metrics": ["crps"], "bootstrap": {"n_resamples": 200}})
        r = client.post("/v1/submissions", json=body, headers=key)
        assert r.status_code == 202, r.text
        sub_id = r.json()["id"]
        with client.stream("GET", f"/v1/submissions/{sub_id}/events", headers=key) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = list(_events(resp))
        names = [n for n, _ in events]
        assert names[0] == "progress" and names[-1] == "end" and names.count("end") == 1
        assert all(d["id"] == sub_id for _, d in events)
        progress = [d["progress"] for n, d in events if n == "progress"]
        assert progress == sorted(progress)
        end = events[-1][1]
        assert end["type"] == "submission.ended" and end["status"] == "succeeded"
        assert "delivery_id" not in end and "sent_at" not in end
        assert (
            end["finished_at"]
            == client.get(f"/v1/submissions/{sub_id}", headers=key).json()["finished_at"]
        )
        r = client.get("/v1/submissions/sub_unknown/events", headers=key)
        assert r.status_code == 404
