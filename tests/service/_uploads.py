"""Fixtures and helpers of the resumable-upload tests: the app under uvicorn with small parts
(64 KiB) on the test Redis, and parts sent with their checksums.

PYTEST_DONT_REWRITE: this module is imported before pytest registers it as a plugin (by the
test modules and by doctest collection), so its asserts carry their own messages.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.service._api import LiveServer

PART = 64 << 10


@pytest.fixture
def up_settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"upload_part_bytes": PART, "data_dir": tmp_path})


@pytest.fixture
def server(up_settings: Settings, store: Store) -> Iterator[LiveServer]:
    with LiveServer(create_app(up_settings, store=store)) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def digest(data: bytes) -> dict[str, str]:
    return {
        "Content-Digest": f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"
    }


def parts_of(body: bytes) -> list[bytes]:
    return [body[i : i + PART] for i in range(0, len(body), PART)]


def put(
    http: httpx.Client, key: dict[str, str], upload_id: str, n: int, data: bytes, **h: str
) -> httpx.Response:
    headers = {**key, "Content-Type": "application/octet-stream", **digest(data), **h}
    return http.put(f"/v1/uploads/{upload_id}/parts/{n}", content=data, headers=headers)
