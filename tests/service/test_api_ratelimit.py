"""Rate limiting per key over HTTP (uvicorn on 127.0.0.1): bursts give only 2xx or 429, the
limit is on by default, and counting never holds up the event loop."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.service._api import ADMIN, LiveServer, error_of

pytest_plugins = ["tests.service._api"]

LIMIT = 8
WINDOW_S = 60


@pytest.fixture
def limited(settings: Settings, store: Store) -> Iterator[LiveServer]:
    app = create_app(
        settings.model_copy(update={"rate_limit": LIMIT, "rate_limit_window_s": WINDOW_S}),
        store=store,
    )
    with LiveServer(app) as server:
        yield server


def _key(base: str, name: str) -> dict[str, str]:
    r = httpx.post(f"{base}/v1/admin/keys", json={"name": name}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def test_a_concurrent_burst_gives_only_2xx_or_429(limited: LiveServer):
    alice, bob = _key(limited.url, "alice"), _key(limited.url, "bob")

    def get(_: int) -> httpx.Response:
        with httpx.Client(base_url=limited.url, timeout=30) as client:
            return client.get("/v1/submissions", headers=alice)

    with ThreadPoolExecutor(max_workers=12) as pool:
        responses = list(pool.map(get, range(40)))
    statuses = Counter(r.status_code for r in responses)
    assert set(statuses) <= {200, 429}, statuses
    # A fixed window: LIMIT per window; the burst may straddle one window boundary.
    assert LIMIT <= statuses[200] <= 2 * LIMIT, statuses
    assert statuses[429] == 40 - statuses[200]
    for r in responses:
        if r.status_code == 429:
            assert 1 <= int(r.headers["Retry-After"]) <= WINDOW_S
            err = error_of(r)
            assert err["code"] == "rate_limited"
            assert f"{LIMIT} requests per {WINDOW_S} s" in err["message"]
    # Another key has its own budget; admin keys and the open catalogue are not limited.
    assert httpx.get(f"{limited.url}/v1/submissions", headers=bob).status_code == 200
    for _ in range(LIMIT + 2):
        assert httpx.get(f"{limited.url}/v1/admin/keys", headers=ADMIN).status_code == 200
        assert httpx.get(f"{limited.url}/v1/metrics").status_code == 200


def test_the_window_counter_expires(store: Store):
    assert store.hit_rate("key_x", 2, 60) is None
    assert store.hit_rate("key_x", 2, 60) is None
    wait = store.hit_rate("key_x", 2, 60)
    assert wait is not None and 1 <= wait <= 60
    ttls = [store.client.ttl(k) for k in store.client.scan_iter(match="uqeval:v1:rate:key_x:*")]
    assert ttls and all(0 < t <= 61 for t in ttls)


def test_the_limit_is_on_by_default_and_zero_turns_it_off(monkeypatch: pytest.MonkeyPatch):
    for name in ("UQEVAL_RATE_LIMIT", "UQEVAL_RATE_LIMIT_WINDOW_S"):
        monkeypatch.delenv(name, raising=False)
    default = Settings()
    assert (default.rate_limit, default.rate_limit_window_s) == (1200, 60)
    monkeypatch.setenv("UQEVAL_RATE_LIMIT", "0")
    assert Settings().rate_limit == 0


class SlowCountingStore(Store):
    """A store whose rate counting waits for ``release`` first (as if Redis were slow)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.counting = threading.Event()
        self.release = threading.Event()

    def hit_rate(self, key_id: str, limit: int, window_s: int) -> int | None:
        self.counting.set()
        assert self.release.wait(30)
        return super().hit_rate(key_id, limit, window_s)


def test_counting_runs_off_the_event_loop(settings: Settings, store: Store):
    """While one request's count waits on Redis, the server answers other requests: the
    counting runs in the thread pool, not on the event loop."""
    slow = SlowCountingStore(store.client, retention_s=store.retention_s)
    limited = settings.model_copy(update={"rate_limit": LIMIT})
    with LiveServer(create_app(limited, store=slow)) as server:
        key = _key(server.url, "patient")
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(
                httpx.get, f"{server.url}/v1/submissions", headers=key, timeout=60
            )
            assert slow.counting.wait(30)  # the request is inside hit_rate, held there
            assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
            assert httpx.get(f"{server.url}/v1/metrics", timeout=10).status_code == 200
            # Admin keys are not counted: served while the submitter's count still waits.
            assert httpx.get(f"{server.url}/v1/admin/keys", headers=ADMIN).status_code == 200
            assert not pending.done()
            slow.release.set()
            assert pending.result(timeout=60).status_code == 200
