"""GET /v1/submissions/{id}, the polling hot path, in one Redis round trip and one trip through
the thread pool: the same answers, byte for byte, as the read through the key dependency and
separate reads (``_detail_response`` on ``get_submission_and_result``, which the PATCH route
still uses), for every status; the same 401, 404 and 429; and the cost counted — round trips
as the requests sent on the store's connections, thread-pool trips as calls of
``anyio.to_thread.run_sync`` (through which FastAPI runs plain routes and dependencies).

The store's guess of a key's id (its memo) is per process: a wrong or stale guess costs one
more round trip, never a wrong answer, and a key revoked through another store (another API
process) is refused at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import httpx
import pytest
import redis

from service.api.app import create_app
from service.api.routes.submissions import _detail_response
from service.settings import Settings
from service.store import Store, sha256_hex
from tests.factories import gaussian_json
from tests.service._api import ADMIN, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]


class Counted:
    """A store and an app on a Redis database no worker consumes (jobs stay where the test
    puts them), with the requests sent on the store's connections counted."""

    def __init__(self, settings: Settings) -> None:
        assert settings.redis_url is not None
        self.trips = 0
        trips = self

        class CountingConnection(redis.Connection):
            def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
                trips.trips += 1  # one send per command or per pipeline: one round trip
                super().send_packed_command(*args, **kwargs)

        pool = redis.ConnectionPool.from_url(settings.redis_url)
        pool.connection_class = CountingConnection
        self.store = Store(redis.Redis(connection_pool=pool), retention_s=settings.raw_retention_s)
        self.settings = settings


@pytest.fixture
def counted(idle_settings: Settings) -> Iterator[Counted]:
    c = Counted(idle_settings)
    c.store.client.flushdb()
    try:
        yield c
    finally:
        c.store.client.flushdb()
        c.store.close()


@pytest.fixture
def client(counted: Counted) -> Iterator[TestClient]:
    with TestClient(create_app(counted.settings, store=counted.store)) as c:
        yield c


def submit(client: TestClient, key: dict[str, str], seed: int = 0, **fields: Any) -> str:
    r = client.post("/v1/submissions", json=gaussian_json(6, seed=seed, **fields), headers=key)
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    return sub_id


def old_answer(store: Store, sub_id: str) -> tuple[bytes, str]:
    """The answer of the read through separate round trips (body, content type)."""
    record, result = store.get_submission_and_result(sub_id)
    assert record is not None
    response = _detail_response(store, record, result)
    return bytes(response.body), str(response.media_type)


RESULT = {
    "metrics": {"mae": {"value": 0.123456789012345, "interval": None}},
    "warnings": ["ünïcode – kept as written", 'a "quoted" word'],
    "provenance": {"timings_s": {"total": 0.01}},
}


def all_states(client: TestClient, store: Store, key: dict[str, str]) -> dict[str, str]:
    """A submission in each status: two queued (positions 0 and 1), running with progress,
    succeeded with a result document, failed with its reason, cancelled."""
    ids = {
        name: submit(client, key, seed=i)
        for i, name in enumerate(
            ["running", "succeeded", "failed", "cancelled", "queued_0", "queued_1"]
        )
    }
    for name in ("running", "succeeded", "failed"):
        assert store.mark_running(ids[name], "w", 5.0, 3)[0] == "started"
    assert store.set_progress(ids["running"], 37.5)
    assert store.finish(ids["succeeded"], RESULT, 0.25) == "succeeded"
    assert store.fail(ids["failed"], "std must be > 0; std[3] = -1.0") == "failed"
    assert store.cancel_submission(ids["cancelled"]) is not None
    return ids


def test_every_status_reads_byte_for_byte_as_before(client: TestClient, counted: Counted):
    alice = new_key(client, "alice")
    ids = all_states(client, counted.store, alice)
    seen = set()
    for name, sub_id in ids.items():
        expected, media_type = old_answer(counted.store, sub_id)
        for key in (alice, ADMIN):
            r = client.get(f"/v1/submissions/{sub_id}", headers=key)
            assert r.status_code == 200, r.text
            assert r.content == expected, name
            assert r.headers["content-type"] == media_type
            assert r.headers["content-length"] == str(len(expected))
        doc = json.loads(expected)
        seen.add(doc["status"])
        assert doc["queue_position"] == {"queued_0": 0, "queued_1": 1}.get(name)
    assert seen == {"queued", "running", "succeeded", "failed", "cancelled"}
    assert (
        json.loads(client.get(f"/v1/submissions/{ids['succeeded']}", headers=alice).content)[
            "result"
        ]
        == RESULT
    )


def test_a_real_result_reads_byte_for_byte_as_before(
    api: TestClient, submitter: dict[str, str], worker
):
    from tests.service._api import wait_terminal

    body = gaussian_json(50, analyses={"metrics": "all", "bootstrap": {"n_resamples": 10}})
    sub_id = api.post("/v1/submissions", json=body, headers=submitter).json()["id"]
    assert wait_terminal(api, submitter, sub_id)["status"] == "succeeded"
    expected, _ = old_answer(api.app.state.store, sub_id)
    assert api.get(f"/v1/submissions/{sub_id}", headers=submitter).content == expected


def test_refusals_are_those_of_the_key_dependency(client: TestClient, counted: Counted):
    """401 (no key, unknown key, revoked key) as every route that takes the key dependency
    answers it; 404 for an unknown id and for another team's private submission, as the
    other submission routes answer it; a public one is readable by every key."""
    alice, bob = new_key(client, "alice"), new_key(client, "bob")
    sub_id = submit(client, alice)
    url = f"/v1/submissions/{sub_id}"
    # /v1/submissions (the list) authenticates through the key dependency.
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}):
        new, old = client.get(url, headers=headers), client.get("/v1/submissions", headers=headers)
        assert (new.status_code, new.content) == (401, old.content)
        assert new.headers["www-authenticate"] == old.headers["www-authenticate"]
    for sub, key in ((sub_id, bob), ("unknown-id", alice)):
        new = client.get(f"/v1/submissions/{sub}", headers=key)
        old = client.delete(f"/v1/submissions/{sub}", headers=key)
        assert (new.status_code, new.content) == (404, old.content)
        assert error_of(new)["field"] == "sub_id"
    r = client.patch(url, json={"visibility": "public"}, headers=alice)
    assert r.status_code == 200, r.text
    assert client.get(url, headers=bob).content == old_answer(counted.store, sub_id)[0]
    listed = client.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
    bob_id = next(k["key_id"] for k in listed if k["name"] == "bob")
    assert client.delete(f"/v1/admin/keys/{bob_id}", headers=ADMIN).status_code < 300
    new, old = client.get(url, headers=bob), client.get("/v1/submissions", headers=bob)
    assert (new.status_code, new.content) == (401, old.content)


def test_the_rate_limit_counts_the_read(counted: Counted):
    """The read counts against the key's limit like every other route: the limit's worth of
    requests (reads and lists together) pass, the next one of either kind is refused with the
    same 429; admin keys are not counted."""
    limit = 3
    settings = counted.settings.model_copy(update={"rate_limit": limit, "rate_limit_window_s": 60})
    with TestClient(create_app(settings, store=counted.store)) as client:
        key = new_key(client, "limited")
        sub_id = submit(client, ADMIN)
        client.patch(f"/v1/submissions/{sub_id}", json={"visibility": "public"}, headers=ADMIN)
        # A fixed window may end between the requests: retry the sequence in the next one.
        for _ in range(3):
            statuses = [client.get(f"/v1/submissions/{sub_id}", headers=key).status_code]
            statuses += [client.get("/v1/submissions", headers=key).status_code]
            statuses += [client.get(f"/v1/submissions/{sub_id}", headers=key).status_code]
            new = client.get(f"/v1/submissions/{sub_id}", headers=key)
            old = client.get("/v1/submissions", headers=key)
            if statuses == [200, 200, 200] and new.status_code == old.status_code == 429:
                break
            counted.store.client.delete(*counted.store.client.keys("uqeval:v1:rate:*"))
        else:
            raise AssertionError(f"no 429 after {limit} requests: {statuses}")
        pattern = r"rate limit of 3 requests per 60 s exceeded for this key; retry in \d+ s"
        for r in (new, old):
            assert error_of(r)["code"] == "rate_limited"
            assert re.fullmatch(pattern, error_of(r)["message"])
            assert 1 <= int(r.headers["retry-after"]) <= 60
        for _ in range(limit + 2):
            assert client.get(f"/v1/submissions/{sub_id}", headers=ADMIN).status_code == 200


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the functions run in the thread pool since the fixture started."""
    seen: list[str] = []
    original = anyio.to_thread.run_sync

    async def counting(func: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(getattr(func, "func", func), "__name__", repr(func)))
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return seen


def test_a_read_is_one_round_trip_and_one_thread_pool_trip(
    client: TestClient, counted: Counted, hops: list[str]
):
    alice = new_key(client, "alice")
    assert counted.settings.rate_limit > 0  # counted (the default): in the same round trip
    ids = all_states(client, counted.store, alice)
    for key in (alice, ADMIN):
        for sub_id in [*ids.values(), "unknown-id"]:
            url = f"/v1/submissions/{sub_id}"
            client.get(url, headers=key)  # this process learns the key's id
            counted.trips, hops[:] = 0, []
            r = client.get(url, headers=key)
            assert r.status_code == (404 if sub_id == "unknown-id" else 200)
            assert (counted.trips, hops) == (1, ["read"]), sub_id
    counted.trips, hops[:] = 0, []
    assert (
        client.get(f"/v1/submissions/{ids['running']}", headers={"X-API-Key": "no"}).status_code
        == 401
    )
    assert (counted.trips, len(hops)) == (1, 1)
    counted.trips, hops[:] = 0, []
    assert client.get(f"/v1/submissions/{ids['running']}").status_code == 401
    assert (counted.trips, len(hops)) == (0, 1)


def test_a_wrong_guess_of_the_key_id_costs_a_round_trip_not_a_wrong_answer(
    client: TestClient, counted: Counted, idle_settings: Settings
):
    alice = new_key(client, "alice")
    sub_id = submit(client, alice)
    url = f"/v1/submissions/{sub_id}"
    expected = client.get(url, headers=alice).content
    digest = sha256_hex(alice["Authorization"].removeprefix("Bearer "))
    memo = counted.store._key_ids
    assert memo[digest].startswith("key_")
    memo[digest] = "key_of_someone_else"
    counted.trips = 0
    assert client.get(url, headers=alice).content == expected
    assert counted.trips == 2  # refused unread (the id is not the token's), then read
    assert memo[digest] != "key_of_someone_else"

    # Another API process (its own store and memo) revokes the key: refused here at once,
    # though this process still remembers its id.
    assert idle_settings.redis_url is not None
    other = Store.from_url(idle_settings.redis_url, idle_settings)
    try:
        assert other.revoke_api_key(memo[digest])
    finally:
        other.close()
    r = client.get(url, headers=alice)
    assert r.status_code == 401
    assert error_of(r)["message"] == "the API key is unknown or revoked"


def test_a_read_over_http_on_uvicorn(counted: Counted):
    """The async route under a real server: concurrent reads all answer the same bytes."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.service._api import LiveServer

    with LiveServer(create_app(counted.settings, store=counted.store)) as server:
        with httpx.Client(base_url=server.url) as c:
            key = new_key(c, "live")
        sub_id = httpx.post(
            f"{server.url}/v1/submissions", json=gaussian_json(6), headers=key
        ).json()["id"]
        expected = old_answer(counted.store, sub_id)[0]

        def get(_: int) -> bytes:
            r = httpx.get(f"{server.url}/v1/submissions/{sub_id}", headers=key, timeout=30)
            assert r.status_code == 200
            return r.content

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert set(pool.map(get, range(32))) == {expected}
