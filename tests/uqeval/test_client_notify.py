"""The client's notification calls on a live server: the webhook secret, ``callback_url`` on
submissions and comparisons with a real receiver on loopback, the deliveries and a re-send, and
a submission followed as Server-Sent Events (sync and async)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest

from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqeval import AsyncClient, Client
from uqeval.errors import BadRequest
from uqeval.notifications import Event
from uqeval.webhooks import InvalidSignature, verify

N = 40


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers 200."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.requests.append({"headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait(self, count: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.requests)} requests received, expected {count}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


@pytest.fixture(scope="module")
def setup(live_module: Live) -> dict[str, Any]:
    rng = np.random.default_rng(31)
    mean, std = rng.normal(size=N), rng.uniform(0.5, 1.5, size=N)
    y = mean + std * rng.normal(size=N)
    with Client(live_module.url, live_module.admin_key) as admin:
        bench = admin.create_benchmark(
            "notify-bench", y=y, primary_metric="mae", bootstrap={"n_resamples": 50}
        )
    return {"url": live_module.url, "key": live_module.new_key("notify"), "bench": bench.id,
            "mean": mean, "std": std, "y": y}  # fmt: skip


def _raw(s: dict[str, Any], path: str) -> Any:
    headers = {"Authorization": f"Bearer {s['key']}"}
    r = httpx.get(s["url"] + path, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _settled(client: Client, job_id: str, scope: str, count: int) -> list[Any]:
    """The deliveries once ``count`` of them left ``pending`` (bounded wait)."""
    deadline = time.monotonic() + 60
    while True:
        items = client.deliveries(job_id, scope=scope)
        if len(items) >= count and all(d.status != "pending" for d in items):
            return items
        assert time.monotonic() < deadline, items
        time.sleep(0.05)


def test_secret_callbacks_deliveries_and_resend(setup: dict[str, Any], receiver: Receiver) -> None:
    s = setup
    with Client(s["url"], s["key"]) as client:
        first, secret = client.webhook_secret(), client.webhook_secret()
        assert first.secret != secret.secret and secret.created_at
        assert secret.secret not in repr(secret)
        sub = client.submit(P.Gaussian(s["mean"], s["std"]), s["y"], metrics="mae",
                            callback_url=receiver.url, wait=True)  # fmt: skip
        (got,) = receiver.wait(1)
        # signed with the newest secret, not the rotated one
        event = verify(secret.secret, got["body"], got["headers"]["UQEval-Signature"])
        assert event["id"] == sub.id and event["status"] == "succeeded"
        with pytest.raises(InvalidSignature):
            verify(first.secret, got["body"], got["headers"]["UQEval-Signature"])
        (d,) = _settled(client, sub.id, "submission", 1)
        assert d.status == "delivered" and d.url == receiver.url and not d.redelivery
        assert d.event_type == "submission.ended" and d.id == event["delivery_id"]
        assert [a.status_code for a in d.attempts] == [200]
        raw = _raw(s, f"/v1/submissions/{sub.id}/deliveries")["items"]
        assert [x.raw for x in client.deliveries(sub)] == raw
        again = client.resend(sub)
        assert again.redelivery and again.id != d.id and again.url == receiver.url
        second = receiver.wait(2)[1]
        assert (
            verify(secret.secret, second["body"], second["headers"]["UQEval-Signature"])[
                "delivery_id"
            ]
            == again.id
        )
        items = _settled(client, sub.id, "submission", 2)
        assert [x.id for x in items] == [again.id, d.id]  # newest first
        with pytest.raises(BadRequest) as err:
            client.deliveries(sub, scope="gate")
        assert err.value.field == "scope"
        # a comparison's callback, read with scope="comparison"
        other = client.submit(P.Gaussian(s["mean"] + 1, s["std"]), benchmark=s["bench"],
                              metrics="all", wait=True)  # fmt: skip
        base = client.submit(P.Gaussian(s["mean"], s["std"]), benchmark=s["bench"], wait=True)
        before = len(receiver.requests)
        cmp = client.compare([base, other], callback_url=receiver.url, wait=True)
        got_cmp = receiver.wait(before + 1)[before]
        assert (
            verify(secret.secret, got_cmp["body"], got_cmp["headers"]["UQEval-Signature"])["id"]
            == cmp.id
        )
        (dc,) = _settled(client, cmp.id, "comparison", 1)
        assert dc.event_type == "comparison.ended" and dc.status == "delivered"
        raw = _raw(s, f"/v1/comparisons/{cmp.id}/deliveries")["items"]
        assert [x.raw for x in client.deliveries(cmp.id, scope="comparison")] == raw


def _check_stream(events: list[Event], sub_id: str, status: str) -> None:
    kinds = [e.event for e in events]
    assert kinds[-1] == "end" and kinds.count("end") == 1, kinds
    assert set(kinds[:-1]) == {"progress"} and kinds[0] == "progress"
    assert all(e.data["id"] == sub_id for e in events)
    assert events[-2].data["status"] == status  # the last progress is the final state
    end = events[-1].data
    assert end["type"] == "submission.ended" and end["status"] == status
    assert end["links"]["self"].endswith(f"/v1/submissions/{sub_id}")


def test_events_follow_a_real_job(setup: dict[str, Any]) -> None:
    s = setup
    with Client(s["url"], s["key"]) as client:
        sub = client.submit(P.Gaussian(s["mean"], s["std"]), s["y"], metrics="mae,crps",
                            bootstrap=50)  # fmt: skip
        events = list(client.events(sub, timeout=120))
        final = client.get(sub)
        assert final.status == "succeeded"
        _check_stream(events, sub.id, final.status)
        assert events[-1].data["finished_at"] == final.finished_at
        # a stream of an ended job: its state, then the end, at once
        again = list(client.events(sub.id, timeout=30))
        assert [e.event for e in again] == ["progress", "end"]
        assert again[-1].data == events[-1].data


def test_async_secret_events_and_deliveries(setup: dict[str, Any], receiver: Receiver) -> None:
    s = setup

    async def main() -> None:
        async with AsyncClient(s["url"], s["key"]) as client:
            secret = await client.webhook_secret()
            assert secret.secret != (await client.webhook_secret()).secret
            before = len(receiver.requests)
            sub = await client.submit({"mean": s["mean"], "std": s["std"]}, s["y"],
                                      metrics="mae", callback_url=receiver.url)  # fmt: skip
            events = [e async for e in client.events(sub, timeout=120)]
            _check_stream(events, sub.id, "succeeded")
            receiver.wait(before + 1)
            deadline = time.monotonic() + 60
            while True:
                items = await client.deliveries(sub)
                if items and items[0].status != "pending":
                    break
                assert time.monotonic() < deadline, items
                await asyncio.sleep(0.05)
            assert [d.status for d in items] == ["delivered"]
            resent = await client.resend(sub.id)
            assert resent.redelivery and resent.event_type == "submission.ended"

    asyncio.run(main())
