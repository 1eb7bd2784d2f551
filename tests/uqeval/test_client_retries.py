"""Retries against a real server: a real 429 of the rate limit is waited out as Retry-After
says, and a submission whose answer is lost on the way back is not made twice (the
Idempotency-Key). The one fault the server cannot be made to produce on demand here, a 503
before processing, is injected at the transport; the server behind it stays real."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from tests.uqeval.conftest import Live, start_api, stop_api
from uqeval import Client
from uqeval.errors import RateLimited


class Spy(httpx.BaseTransport):
    """Forwards every request to the real server and records (method, path, status, time)."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.seen: list[tuple[str, str, int, float]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.seen.append((request.method, request.url.path, response.status_code, time.monotonic()))
        return response

    def close(self) -> None:
        self.inner.close()


class LoseFirstAnswer(Spy):
    """The first ``POST /v1/submissions`` reaches the server, which answers; the answer is then
    lost (the connection drops before the client reads it)."""

    dropped = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path == "/v1/submissions" and not self.dropped:
            self.dropped += 1
            response.read()
            response.close()
            raise httpx.ReadError("connection reset before the answer was read", request=request)
        return response


class Unavailable503Once(Spy):
    """Answers the first POST with a 503 and Retry-After (as a proxy or a server whose store
    is down does) without forwarding it; every other request goes to the real server."""

    def __init__(self, wait_s: str) -> None:
        super().__init__()
        self.wait_s = wait_s
        self.injected = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and not self.injected:
            self.injected += 1
            request.read()
            return httpx.Response(
                503,
                json={
                    "error": {
                        "code": "service_unavailable",
                        "message": "down",
                        "field": None,
                        "index": None,
                    }
                },
                headers={"Retry-After": self.wait_s},
                request=request,
            )
        return super().handle_request(request)


def gaussian(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    return {"mean": mean, "std": std}, mean + std * rng.normal(size=n)


def total_submissions(live: Live, key: str) -> tuple[int, list[str]]:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        r = http.get("/v1/submissions", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        doc = r.json()
        return doc["total"], [item["id"] for item in doc["items"]]


def test_lost_answer_is_retried_without_a_second_submission(live_server: Live) -> None:
    key = live_server.new_key("lost")
    arrays, y = gaussian(30, 1)
    transport = LoseFirstAnswer()
    with Client(live_server.url, key, transport=transport, backoff=0.05) as client:
        sub = client.submit(arrays, y, metrics="mae", idempotency_key=None)
    assert transport.dropped == 1
    posts = [s for s in transport.seen if s[0] == "POST"]
    assert [s[2] for s in posts] == [202, 202]  # the server answered both tries
    assert sub.replayed is True  # ... the second as a replay of the first
    total, ids = total_submissions(live_server, key)
    assert total == 1 and ids == [sub.id]
    assert sub.idempotency_key and len(sub.idempotency_key) == 32


def test_same_idempotency_key_returns_the_first_submission(live_server: Live) -> None:
    key = live_server.new_key("idem")
    arrays, y = gaussian(20, 2)
    with Client(live_server.url, key) as client:
        first = client.submit(arrays, y, metrics="mae", idempotency_key="run-42")
        again = client.submit(arrays, y, metrics="mae", idempotency_key="run-42")
    assert (first.replayed, again.replayed) == (False, True)
    assert again.id == first.id and again.idempotency_key == "run-42"
    assert total_submissions(live_server, key)[0] == 1


def test_503_before_processing_waits_retry_after(live_server: Live) -> None:
    key = live_server.new_key("503")
    arrays, y = gaussian(20, 3)
    transport = Unavailable503Once("0.4")
    with Client(live_server.url, key, transport=transport) as client:
        t0 = time.monotonic()
        sub = client.submit(arrays, y, metrics="mae")
    assert transport.injected == 1
    posts = [s for s in transport.seen if s[0] == "POST"]
    assert len(posts) == 1 and posts[0][2] == 202
    assert posts[0][3] - t0 >= 0.4  # the retry came after Retry-After
    assert total_submissions(live_server, key) == (1, [sub.id])


@pytest.fixture(scope="module")
def limited_server(
    session_settings: Settings, worker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """A second API on the same Redis and worker with a tiny rate limit: 2 requests per key in
    a 2 s window (admin keys are not limited)."""
    live = start_api(
        session_settings,
        tmp_path_factory.mktemp("limited") / "api.log",
        rate_limit=2,
        rate_limit_window_s=2,
    )
    try:
        yield live
    finally:
        stop_api(live.proc)


def spend_window(client: Client) -> float:
    """Spend the key's requests until a 429 with at least a second of the window left;
    returns its Retry-After."""
    for _ in range(20):
        try:
            client.submissions(limit=1)
        except RateLimited as exc:
            limited = exc
        else:
            continue
        assert limited.status == 429 and limited.code == "rate_limited"
        assert limited.retry_after is not None
        if limited.retry_after >= 2:
            return limited.retry_after
        time.sleep(limited.retry_after)
    raise AssertionError("no 429 from the rate limit")


def test_real_429_is_waited_out_and_submits_once(limited_server: Live) -> None:
    key = limited_server.new_key("limited")
    arrays, y = gaussian(20, 4)
    with Client(limited_server.url, key, retries=0) as strict:
        wait_s = spend_window(strict)
        transport = Spy()
        with Client(limited_server.url, key, transport=transport, retries=3) as client:
            t0 = time.monotonic()
            sub = client.submit(arrays, y, metrics="mae")
    posts = [s for s in transport.seen if s[0] == "POST"]
    assert posts[0][2] == 429 and posts[-1][2] == 202
    # The retry waited what Retry-After said (whole seconds, at least 1 s left of it).
    assert posts[-1][3] - t0 >= wait_s - 1
    with Client(limited_server.url, limited_server.admin_key) as admin:
        mine = [s for s in admin.submissions(limit=100).items if s.id == sub.id]
        team_subs = [s for s in admin.submissions(limit=100).items if s.team_id == mine[0].team_id]
    assert len(team_subs) == 1


def spend(client: Client) -> None:
    for _ in range(5):
        client.submissions()


def test_429_without_retries_raises_rate_limited(limited_server: Live) -> None:
    key = limited_server.new_key("limited2")
    with Client(limited_server.url, key, retries=0) as client, pytest.raises(RateLimited) as info:
        spend(client)
    assert info.value.exit_code == 7 and info.value.retry_after is not None
    assert "rate limit" in str(info.value)
    # A Retry-After longer than the client allows is final at once, not waited for.
    with Client(limited_server.url, key, retries=5, max_retry_wait=0.01) as client:
        t0 = time.monotonic()
        with pytest.raises(RateLimited):
            spend(client)
        assert time.monotonic() - t0 < 1.0
