"""A live API for the client and command-line tests: uvicorn serving the app in a subprocess on
a free loopback port, on the session's real Redis, with the session's real Celery worker.

``live_server`` (session-scoped) yields a :class:`Live` with ``.url``, ``.admin_key`` and
``.new_key()``, which creates a team and a submitter key in it. Keys and teams live in Redis:
tests that use the ``store`` fixture (which empties Redis after each test) create theirs inside
the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.redis_server import free_port
from service.settings import Settings
from service.store import Store
from tests import zygote
from tests.stack import ROOT, TEST_SETTINGS, WorkerProcess, clear_store, settings_env


@dataclass
class Live:
    """A running API: its URL, the admin key, and the uvicorn process."""

    url: str
    admin_key: str
    proc: subprocess.Popen[bytes] | zygote.ForkedProcess
    log: Path

    def new_key(self, name: str = "team") -> str:
        """A submitter key of a new team named ``name`` (unique per call)."""
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            r = http.post("/v1/admin/teams", json={"name": name})
            assert r.status_code == 201, r.text
            r = http.post("/v1/admin/keys", json={"name": name, "team_id": r.json()["team_id"]})
            assert r.status_code == 201, r.text
            key: str = r.json()["key"]
            return key

    def new_team_key(self, name: str = "team") -> tuple[str, str]:
        """``(team_id, key)`` of a new team named ``name`` and a submitter key in it."""
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            r = http.post("/v1/admin/teams", json={"name": name})
            assert r.status_code == 201, r.text
            team = r.json()["team_id"]
            r = http.post("/v1/admin/keys", json={"name": name, "team_id": team})
            assert r.status_code == 201, r.text
            return team, r.json()["key"]


def start_api(settings: Settings, log: Path, **overrides: Any) -> Live:
    """uvicorn serving ``service.api.app:create_app`` with ``settings`` (changed by
    ``overrides``) on a free loopback port; returns once ``/healthz`` answers."""
    port = free_port()
    env = settings_env(settings.model_copy(update=overrides))
    env["PATH"] = os.environ.get("PATH", "")
    proc = zygote.popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "service.api.app:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        log=log,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the API exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop_api(proc)
            raise RuntimeError(f"the API did not start: {log.read_text()[-3000:]}")
        time.sleep(0.1)
    return Live(url, str(TEST_SETTINGS["admin_key"]), proc, log)


def stop_api(proc: subprocess.Popen[bytes] | zygote.ForkedProcess) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def live_server(
    session_settings: Settings,
    worker: WorkerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Live]:
    """The API under uvicorn (a subprocess) with the session's Redis and Celery worker."""
    live = start_api(session_settings, tmp_path_factory.mktemp("api") / "api.log")
    try:
        yield live
    finally:
        stop_api(live.proc)


@pytest.fixture(scope="module")
def live_module(live_server: Live, session_settings: Settings) -> Iterator[Live]:
    """The session's live server, for a module whose fixtures keep data on it for all of its
    tests (a benchmark, its submissions): that data is removed when the module ends, as the
    ``store`` fixture removes a test's, so that no later test of this process (in whatever
    order they run) finds it."""
    yield live_server
    assert session_settings.redis_url is not None
    store = Store.from_url(session_settings.redis_url, session_settings)
    try:
        clear_store(store)
    finally:
        store.close()
