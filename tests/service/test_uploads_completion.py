"""One completion of a resumable upload at a time, over real HTTP (uvicorn on 127.0.0.1) and
the real Redis: completions sent together (no Idempotency-Key) make one submission and all
answer it; a completion waits for the one in flight (taking over when it lets go, or when its
holder died and its lease ran out) and answers 409 ``upload_completing`` after waiting; parts
and abort are refused while a completion reads the parts; the lease is renewed while a
completion runs; the Python client asks again until it has the answer."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from service import keys
from service.api.routes import uploads
from service.store import Store
from tests.factories import gaussian_npz
from tests.service._api import LiveServer, error_of, new_key, submission_total
from tests.service._uploads import PART, parts_of, put
from uqeval import Client
from uqeval import _upload as upload_op
from uqeval.errors import BadRequest

pytest_plugins = ["tests.service._api", "tests.service._uploads"]


def uploaded(http: httpx.Client, key: dict[str, str], body: bytes) -> str:
    """A new upload of ``body`` with every part sent: its id."""
    r = http.post("/v1/uploads", json={"size": len(body)}, headers=key)
    assert r.status_code == 201, r.text
    upload_id: str = r.json()["id"]
    for n, part in enumerate(parts_of(body), start=1):
        sent = put(http, key, upload_id, n, part)
        assert sent.status_code == 200, sent.text
    return upload_id


def complete(base: str, key: dict[str, str], upload_id: str) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=120) as c:
        return c.post(f"/v1/uploads/{upload_id}/complete", headers=key)


def hold(store: Store, upload_id: str, ms: int) -> None:
    """Another completion holding the upload (its lock, as a completion takes it)."""
    assert store.client.set(keys.upload_completing(upload_id), "another", nx=True, px=ms)


def held(
    http: httpx.Client, store: Store, name: str, seed: int
) -> tuple[dict[str, str], bytes, str]:
    """A new key's upload, every part sent, held by another completion for a minute: the
    key, the body and the upload id."""
    key = new_key(http, name)
    body = gaussian_npz(5000, seed=seed)
    upload_id = uploaded(http, key, body)
    hold(store, upload_id, 60_000)
    return key, body, upload_id


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


def test_completions_sent_together_make_one_submission(
    http: httpx.Client, server: LiveServer, store: Store
) -> None:
    key = new_key(http, "together")
    upload_id = uploaded(http, key, gaussian_npz(200_000, seed=5))
    start = threading.Barrier(4)
    answers: list[httpx.Response] = []

    def go() -> None:
        start.wait()
        answers.append(complete(server.url, key, upload_id))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [r.status_code for r in answers] == [202] * 4, [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert submission_total(http, key) == 1
    # the lock is let go; completing again answers the same
    assert not store.client.exists(keys.upload_completing(upload_id))
    assert complete(server.url, key, upload_id).json() == answers[0].json()


def test_a_completion_waits_for_the_one_in_flight_and_takes_over_when_it_lets_go(
    http: httpx.Client, server: LiveServer, store: Store
) -> None:
    key, _body, upload_id = held(http, store, "waits", 6)
    t, out = in_thread(complete, server.url, key, upload_id)
    time.sleep(1.0)
    assert t.is_alive() and out == []  # waiting, not answering
    assert submission_total(http, key) == 0
    store.client.delete(keys.upload_completing(upload_id))  # the other one failed
    t.join(60)
    assert out[0].status_code == 202, out[0].text
    assert submission_total(http, key) == 1


def test_a_dead_holder_lets_go_after_its_lease(
    http: httpx.Client, server: LiveServer, store: Store
) -> None:
    key = new_key(http, "dead")
    upload_id = uploaded(http, key, gaussian_npz(5000, seed=7))
    hold(store, upload_id, 800)  # its API process was killed: nobody renews the lease
    t0 = time.monotonic()
    r = complete(server.url, key, upload_id)
    assert r.status_code == 202, r.text
    assert time.monotonic() - t0 >= 0.5
    assert submission_total(http, key) == 1


def test_while_a_completion_runs_parts_and_abort_are_refused(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(uploads, "COMPLETE_WAIT_S", 0.5)
    key, body, upload_id = held(http, store, "refused", 8)

    r = complete(server.url, key, upload_id)
    assert r.status_code == 409
    assert error_of(r)["code"] == "upload_completing"
    assert int(r.headers["Retry-After"]) >= 1
    r = put(http, key, upload_id, 1, body[:PART])
    assert (r.status_code, error_of(r)["code"]) == (409, "upload_completing")
    r = http.delete(f"/v1/uploads/{upload_id}", headers=key)
    assert (r.status_code, error_of(r)["code"]) == (409, "upload_completing")
    assert http.get(f"/v1/uploads/{upload_id}", headers=key).status_code == 200
    assert submission_total(http, key) == 0

    store.client.delete(keys.upload_completing(upload_id))
    assert http.delete(f"/v1/uploads/{upload_id}", headers=key).status_code == 204
    assert http.get(f"/v1/uploads/{upload_id}", headers=key).status_code == 404


def test_the_lease_is_renewed_while_a_completion_runs(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(uploads, "COMPLETE_LEASE_MS", 300)
    original = uploads._complete

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.5)  # a completion taking five leases
        return await original(*args, **kwargs)

    monkeypatch.setattr(uploads, "_complete", slow)
    key = new_key(http, "renewed")
    upload_id = uploaded(http, key, gaussian_npz(5000, seed=9))
    lock = keys.upload_completing(upload_id)
    t, out = in_thread(complete, server.url, key, upload_id)
    # Taken once the request reaches the route (later on a busy machine), then held for the
    # 1.5 s of the completion: looked at for 1 s from then on, over three leases.
    deadline = time.monotonic() + 30
    while not store.client.exists(lock) and time.monotonic() < deadline:
        time.sleep(0.01)
    seen = []
    for _ in range(5):
        time.sleep(0.2)
        seen.append(bool(store.client.exists(lock)))
    assert all(seen), seen  # held past its first 300 ms
    t.join(60)
    assert out[0].status_code == 202, out[0].text
    assert not store.client.exists(lock)
    assert submission_total(http, key) == 1


def test_the_client_asks_again_until_the_completion_in_flight_answers(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(uploads, "COMPLETE_WAIT_S", 0.3)
    key, body, upload_id = held(http, store, "client", 10)
    completes: list[int] = []

    class Recording(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            if request.url.path.endswith("/complete"):
                completes.append(response.status_code)
            return response

    release = threading.Timer(1.5, store.client.delete, [keys.upload_completing(upload_id)])
    release.start()
    token = key["Authorization"].removeprefix("Bearer ")
    try:
        with Client(server.url, token, transport=Recording()) as client:
            sub = client.resume_upload(upload_id, body)
    finally:
        release.join()
    assert completes[0] == 409 and completes[-1] == 202, completes
    assert submission_total(http, key) == 1
    assert sub.id == http.get("/v1/submissions", headers=key).json()["items"][0]["id"]


def test_the_client_stops_asking_after_its_wait(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each ask waits 0.5 s on the server: the client's 1 s is time, not 20 pauses of 0.05 s
    monkeypatch.setattr(uploads, "COMPLETE_WAIT_S", 0.5)
    monkeypatch.setattr(upload_op, "COMPLETING_WAIT_S", 1.0)
    monkeypatch.setattr(upload_op, "COMPLETING_POLL_S", 0.05)
    key, body, upload_id = held(http, store, "patient", 11)  # held for a minute
    token = key["Authorization"].removeprefix("Bearer ")
    t0 = time.monotonic()
    with Client(server.url, token) as client, pytest.raises(BadRequest) as caught:
        client.resume_upload(upload_id, body)
    assert caught.value.code == "upload_completing"
    assert 1.0 <= time.monotonic() - t0 < 6.0
    assert submission_total(http, key) == 0
