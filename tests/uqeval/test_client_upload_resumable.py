"""The clients and the command line above ``upload_threshold_bytes``: the body goes by the
resumable upload (parts with checksums), a part damaged on the way is sent again, an
interrupted upload resumes with only the missing parts, and the result is that of a one-shot
POST. The server is real (uvicorn in a subprocess, 16 KiB parts) with the session's worker."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import redis

from service import keys
from service.settings import Settings
from tests.stack import WorkerProcess
from tests.uqeval.cli_invoke import cli
from tests.uqeval.conftest import Live, start_api, stop_api
from uqeval import AsyncClient, Client
from uqeval.errors import UploadInterrupted

PART = 16 << 10
N = 6000  # mean, std, y in float64: ~144 KB, 9 parts


@pytest.fixture(scope="module")
def small_parts(
    session_settings: Settings, worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("uploads")
    live = start_api(
        session_settings, root / "api.log", upload_part_bytes=PART, data_dir=root / "data"
    )
    try:
        yield live
    finally:
        stop_api(live.proc)


def gaussian(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=N)
    std = rng.uniform(0.5, 1.5, size=N)
    return {"mean": mean, "std": std, "y": mean + std * rng.normal(size=N)}


class Faults(httpx.BaseTransport):
    """Forwards to the real server, recording each request; ``damage`` flips a byte of the
    first PUT of those parts, ``cut_after`` refuses to connect for every part PUT after that
    many went through (a network that went away)."""

    def __init__(self, damage: set[int] | None = None, cut_after: int | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.damage = set(damage or ())
        self.cut_after = cut_after
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        path = request.url.path
        self.requests.append((request.method, path))
        if request.method == "PUT":
            n = int(path.rsplit("/", 1)[1])
            sent = sum(m == "PUT" for m, _ in self.requests[:-1])
            if self.cut_after is not None and sent >= self.cut_after:
                raise httpx.ConnectError("the network went away", request=request)
            if n in self.damage:
                self.damage.discard(n)
                bad = bytearray(body)
                bad[len(bad) // 2] ^= 0xFF
                headers = {
                    k: v
                    for k, v in request.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding")
                }
                request = httpx.Request(
                    request.method, request.url, headers=headers, content=bytes(bad)
                )
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    def parts(self) -> list[int]:
        return [int(p.rsplit("/", 1)[1]) for m, p in self.requests if m == "PUT"]


def metrics_of(sub: Any) -> dict[str, Any]:
    return {k: v["value"] for k, v in sub.raw["result"]["metrics"].items()}


def test_submit_above_the_threshold_uses_parts_and_retries_a_damaged_one(
    small_parts: Live,
) -> None:
    key = small_parts.new_key("resumable")
    data = gaussian(1)
    faults = Faults(damage={3})
    with Client(small_parts.url, key, upload_threshold_bytes=1, transport=faults) as client:
        seen: list[tuple[int, int]] = []
        sub = client.submit(
            data,
            metrics="mae,crps",
            wait=True,
            timeout=120,
            upload_progress=lambda s, t: seen.append((s, t)),
        )
    with Client(small_parts.url, key) as client:
        direct = client.submit(data, metrics="mae,crps", wait=True, timeout=120)
    assert sub.status == direct.status == "succeeded"
    assert metrics_of(sub) == metrics_of(direct)
    assert faults.requests[0] == ("POST", "/v1/uploads")
    completes = [i for i, (_, p) in enumerate(faults.requests) if p.endswith("/complete")]
    assert len(completes) == 1 and completes[0] > max(
        i for i, (m, _) in enumerate(faults.requests) if m == "PUT"
    )
    parts = math.ceil(seen[-1][1] / PART)
    assert parts >= 5
    # every part once, part 3 twice (refused by its checksum, then sent again)
    assert sorted(faults.parts()) == sorted([*range(1, parts + 1), 3])
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1]
    assert {t for _, t in seen} == {seen[-1][1]}  # progress of the whole body


def test_interrupted_upload_resumes_with_the_missing_parts(small_parts: Live) -> None:
    key = small_parts.new_key("interrupted")
    data = gaussian(2)
    cut = Faults(cut_after=4)
    with (
        Client(
            small_parts.url, key, upload_threshold_bytes=1, retries=1, backoff=0.01, transport=cut
        ) as client,
        pytest.raises(UploadInterrupted) as caught,
    ):
        client.submit(data, metrics="mae", model_name="resumed")
    err = caught.value
    assert err.upload_id.startswith("upl_")
    with httpx.Client(base_url=small_parts.url, headers={"Authorization": f"Bearer {key}"}) as http:
        status = http.get(f"/v1/uploads/{err.upload_id}").json()
    assert status["received"] == [1, 2, 3, 4]
    again = Faults()
    with Client(small_parts.url, key, transport=again) as client:
        sub = client.resume_upload(err.upload_id, err.upload_body, wait=True, timeout=120)
        direct = client.submit(data, metrics="mae", model_name="resumed", wait=True, timeout=120)
    assert again.parts() == list(range(5, status["parts"] + 1))
    assert sub.status == direct.status == "succeeded"
    assert metrics_of(sub) == metrics_of(direct)


def test_submit_resumes_an_upload_from_the_same_arrays(small_parts: Live) -> None:
    """The body is the same bytes for the same arrays and options, so ``submit(upload_id=)``
    (what ``uqeval submit --resume-upload`` does) resumes an upload made earlier."""
    key = small_parts.new_key("same-bytes")
    data = gaussian(3)
    with (
        Client(
            small_parts.url, key, upload_threshold_bytes=1, retries=0, transport=Faults(cut_after=2)
        ) as client,
        pytest.raises(UploadInterrupted) as caught,
    ):
        client.submit(data, metrics="crps")
    again = Faults()
    with Client(small_parts.url, key, transport=again) as client:
        sub = client.submit(
            data, metrics="crps", upload_id=caught.value.upload_id, wait=True, timeout=120
        )
    assert sub.status == "succeeded"
    assert again.parts()[0] == 3 and 1 not in again.parts()


def test_async_client_uses_the_resumable_upload(small_parts: Live) -> None:
    key = small_parts.new_key("async")
    data = gaussian(4)

    class Recorder(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()
            self.paths: list[str] = []

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            self.paths.append(request.url.path)
            return await self.inner.handle_async_request(request)

    async def run() -> tuple[Any, list[str]]:
        rec = Recorder()
        async with AsyncClient(
            small_parts.url, key, upload_threshold_bytes=1, transport=rec
        ) as client:
            sub = await client.submit(data, metrics="nll", wait=True, timeout=120)
        return sub, rec.paths

    sub, paths = asyncio.run(run())
    with Client(small_parts.url, key) as client:
        direct = client.submit(data, metrics="nll", wait=True, timeout=120)
    assert paths[0] == "/v1/uploads" and any("/parts/" in p for p in paths)
    assert metrics_of(sub) == metrics_of(direct)


def test_benchmark_creation_above_the_threshold(small_parts: Live) -> None:
    y = np.random.default_rng(5).normal(size=20_000)
    rec = Faults()
    with Client(
        small_parts.url, small_parts.admin_key, upload_threshold_bytes=1, transport=rec
    ) as admin:
        bench = admin.create_benchmark("resumable", y=y, primary_metric="crps")
    assert bench.n == 20_000
    assert rec.requests[0] == ("POST", "/v1/uploads") and len(rec.parts()) >= 5


def completed_uploads(settings: Settings) -> int:
    client = redis.Redis.from_url(settings.redis_url or "")
    try:
        return sum(
            client.hexists(k, "answer") for k in client.scan_iter(keys.upload("*"), count=1000)
        )
    finally:
        client.close()


def test_cli_submit_above_the_threshold(
    small_parts: Live, tmp_path: Path, session_settings: Settings
) -> None:
    key = small_parts.new_key("cli")
    before = completed_uploads(session_settings)
    data = gaussian(6)
    path = tmp_path / "model.npz"
    np.savez(path, **data)
    got = cli(
        "submit",
        str(path),
        "--metrics",
        "mae",
        "--upload-threshold",
        "1000",
        "--wait",
        "--json",
        url=small_parts.url,
        key=key,
    )
    assert got.exit_code == 0, got.output
    assert completed_uploads(session_settings) == before + 1
    doc = json.loads(got.stdout[got.stdout.index("{") :])
    with Client(small_parts.url, key) as client:
        direct = client.submit(data, metrics="mae", wait=True, timeout=120)
    assert doc["metrics"]["mae"]["value"] == direct.raw["result"]["metrics"]["mae"]["value"]
