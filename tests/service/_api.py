"""Fixtures and helpers of the API tests: clients on the app, keys, polling (the
request bodies are in :mod:`tests.factories`).

Test modules load the fixtures with ``pytest_plugins = ["tests.service._api"]`` and import the
helpers; ``conftest.py`` provides the Redis server, ``settings``, ``store`` and the Celery
``worker``. ``api`` is an httpx client on the ASGI app (lifespan run); ``idle_api`` is the same
on a Redis database that no worker consumes, so its jobs stay queued; ``live_server`` runs the
app under uvicorn on 127.0.0.1.

PYTEST_DONT_REWRITE: this module is imported before pytest registers it as a plugin (by the
test modules and by doctest collection), so its asserts carry their own messages.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from service.api.app import create_app
from service.settings import Settings
from service.store import TERMINAL, Store
from tests.stack import TEST_SETTINGS, Db, clear_store, db_url

with warnings.catch_warnings():
    # Starlette suggests another httpx distribution; the test client works as it is.
    warnings.simplefilter("ignore", UserWarning)
    from fastapi.testclient import TestClient

__all__ = ["TestClient"]

ADMIN_KEY: str = TEST_SETTINGS["admin_key"]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

NPZ = {"Content-Type": "application/x-npz"}


def post_json(client: httpx.Client, headers: dict[str, str], body: Any) -> httpx.Response:
    return client.post("/v1/submissions", json=body, headers=headers)


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` member of an error answer (asserting the shape)."""
    doc = response.json()
    assert set(doc) == {"error"}, doc
    err: dict[str, Any] = doc["error"]
    assert set(err) == {"code", "message", "field", "index"}, err
    assert "Traceback" not in err["message"]
    return err


def wait_terminal(
    client: httpx.Client, headers: dict[str, str], sub_id: str, timeout_s: float = 60.0
) -> dict[str, Any]:
    """Poll a submission until it ends; fail the test if it does not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get(f"/v1/submissions/{sub_id}", headers=headers)
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        if doc["status"] in TERMINAL:
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"submission {sub_id} still {doc['status']}: {doc}")
        time.sleep(0.05)


def submission_total(client: httpx.Client, key: dict[str, str]) -> int:
    """How many submissions ``key`` sees (its team's, its own)."""
    r = client.get("/v1/submissions", params={"limit": 1}, headers=key)
    assert r.status_code == 200, r.text
    total: int = r.json()["total"]
    return total


def new_key(client: httpx.Client, name: str = "team") -> dict[str, str]:
    """Headers of a new submitter key created through the admin API."""
    r = client.post("/v1/admin/keys", json={"name": name}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


class LiveServer:
    """The app under uvicorn on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        sock = self.server.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


# --------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------


#: The app of this test process that no test is using now, if any (see :func:`app_on`).
_SHARED: list[FastAPI] = []


@contextlib.contextmanager
def app_on(settings: Settings, store: Store) -> Iterator[FastAPI]:
    """The API app on ``settings`` and ``store``, as :func:`create_app` makes it, but the
    same object for the tests of this process, one after the other.

    FastAPI builds an app's routes (their dependants and pydantic adapters) at its first
    requests, about 0.2 s of CPU per app, which every API test would pay again. The shared
    app gets what a new one has: the lifespan of a new app (start-up registers the admin key
    on this ``store``; shutdown lets the store go), these settings, no store, the admin key
    not yet registered, and request metrics at zero. A test that uses two apps at once (``api``
    and ``idle_api``) gets a new one for the second.
    """
    fresh = create_app(settings, store=store)
    app = _SHARED.pop() if _SHARED else fresh
    if app is not fresh:
        # Starlette calls the router's lifespan with the app it serves: the shared one.
        app.router.lifespan_context = fresh.router.lifespan_context
        app.state.settings = settings
        app.state.store = None
        app.state.admin_key_ready = False
        app.state.read_limiter = None
        app.state.metrics.requests.clear()
        app.state.metrics.latency.clear()
    try:
        yield app
    finally:
        _SHARED[:] = [app]


@pytest.fixture
def api(settings: Settings, store: Store) -> Iterator[TestClient]:
    """An httpx client on the ASGI app (startup and shutdown run)."""
    with app_on(settings, store) as app, TestClient(app) as client:
        yield client


@pytest.fixture
def submitter(api: TestClient) -> dict[str, str]:
    return new_key(api, "submitter")


@pytest.fixture
def idle_settings(settings: Settings) -> Settings:
    """Settings on the test Redis's :attr:`Db.IDLE`, which no worker consumes."""
    assert settings.redis_url is not None
    return settings.model_copy(update={"redis_url": db_url(settings.redis_url, Db.IDLE)})


@pytest.fixture
def idle_api(idle_settings: Settings) -> Iterator[TestClient]:
    """A client on an app whose jobs stay queued (no worker on its database)."""
    assert idle_settings.redis_url is not None
    store = Store.from_url(idle_settings.redis_url, idle_settings)
    store.client.flushdb()
    try:
        with app_on(idle_settings, store) as app, TestClient(app) as client:
            yield client
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


@pytest.fixture
def live_server(settings: Settings, store: Store) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings, store=store)) as server:
        yield server
