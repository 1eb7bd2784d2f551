"""The API served by uvicorn on 127.0.0.1, exercised over real HTTP (chunked uploads, gzip,
413 on the wire, the factory entry point)."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from service.settings import Settings
from tests.factories import gaussian_json, gaussian_npz
from tests.service._api import ADMIN, NPZ, LiveServer, error_of, wait_terminal
from tests.stack import settings_env

pytest_plugins = ["tests.service._api"]

ROOT = Path(__file__).resolve().parents[2]


def _chunks(data: bytes, size: int = 1 << 16) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_over_http(live_server: LiveServer, worker):
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        r = http.post("/v1/admin/keys", json={"name": "http"}, headers=ADMIN)
        assert r.status_code == 201
        key = {"Authorization": f"Bearer {r.json()['key']}"}

        # A chunked, gzip-encoded NPZ upload (no Content-Length).
        r = http.post(
            "/v1/submissions",
            content=_chunks(gzip.compress(gaussian_npz(20_000))),
            headers={**key, **NPZ, "Content-Encoding": "gzip"},
        )
        assert "content-length" not in {k.lower() for k in r.request.headers}
        assert r.status_code == 202, r.text
        doc = wait_terminal(http, key, r.json()["id"])
        assert doc["status"] == "succeeded", doc
        assert doc["n"] == 20_000

        r = http.post("/v1/submissions", json=gaussian_json(30), headers=key)
        assert r.status_code == 202
        assert wait_terminal(http, key, r.json()["id"])["status"] == "succeeded"

        r = http.post("/v1/submissions", content=b"x", headers={**key, "Content-Type": "text/csv"})
        assert r.status_code == 415
        assert http.get("/readyz").status_code == 200
        assert "uqeval_http_requests_total" in http.get("/metrics").text


def test_oversize_bodies_on_the_wire(settings: Settings, store):
    from service.api.app import create_app

    small = settings.model_copy(update={"max_body_bytes": 100_000})
    with (
        LiveServer(create_app(small, store=store)) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        key = {
            "Authorization": "Bearer "
            + http.post("/v1/admin/keys", json={"name": "big"}, headers=ADMIN).json()["key"]
        }
        body = gaussian_npz(20_000)  # ~480 kB
        r = http.post("/v1/submissions", content=body, headers={**key, **NPZ})
        assert r.status_code == 413
        assert error_of(r)["code"] == "payload_too_large"
        r = http.post("/v1/submissions", content=_chunks(body, 8192), headers={**key, **NPZ})
        assert r.status_code == 413
        # The server is still healthy afterwards.
        assert http.get("/healthz").status_code == 200
        assert http.get("/v1/submissions", headers=key).json()["total"] == 0


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_uvicorn_factory_entry_point(settings: Settings, store):
    port = _free_port()
    env = settings_env(settings)
    proc = subprocess.Popen(
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
        env={**env, "PATH": os.environ.get("PATH", "")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                if r.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "uvicorn --factory did not start"
            time.sleep(0.1)
        r = httpx.get(f"http://127.0.0.1:{port}/v1/admin/keys", headers=ADMIN, timeout=5)
        assert r.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
