"""Disk used while a resumable upload is completed, over real HTTP, with a local blob directory
and with the tests' S3-compatible server: the NPZ is read across the stored parts, never joined
into one file, and the extracted members move into the blob store instead of being copied.

A thread samples the total size of the files under the blob directory and the scratch
directory (the API's own disk) while ``complete`` runs; the peak is compared with the body's
size. Joining the parts first held the parts, the joined copy, the members and the stored
copies of the members at once (about 4× the body on one disk)."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.service._api import LiveServer, new_key
from tests.stack import S3_BUCKET, S3Server, clear_store

pytest_plugins = ["tests.service._api"]

N = 600_000
PART = 1 << 20


def tree_bytes(*roots: Path) -> int:
    """The total size of the files under ``roots`` (files vanishing meanwhile count 0)."""
    total = 0
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                try:
                    total += os.stat(os.path.join(dirpath, name)).st_size
                except FileNotFoundError:
                    continue
    return total


class PeakSampler(threading.Thread):
    """The largest :func:`tree_bytes` of ``roots`` seen until :meth:`stop` (bounded loop)."""

    def __init__(self, *roots: Path) -> None:
        super().__init__(daemon=True)
        self.roots, self.peak, self.samples = roots, 0, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set() and self.samples < 10_000_000:
            self.peak = max(self.peak, tree_bytes(*self.roots))
            self.samples += 1

    def stop(self) -> int:
        self._halt.set()
        self.join(timeout=30)
        self.peak = max(self.peak, tree_bytes(*self.roots))
        return self.peak


@pytest.fixture(params=["local", "s3"])
def disk_settings(
    request: pytest.FixtureRequest, session_settings: Settings, tmp_path: Path
) -> Settings:
    if request.param == "local":
        update: dict[str, Any] = {"blob_url": str(tmp_path / "blobs"), "blob_endpoint_url": None}
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        update = {
            "blob_url": f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex[:12]}",
            "blob_endpoint_url": server.url,
        }
    return session_settings.model_copy(
        update={
            **update,
            "scratch_dir": tmp_path / "scratch",
            "data_dir": tmp_path,
            "upload_part_bytes": PART,
        }
    )


@pytest.fixture
def disk_store(disk_settings: Settings) -> Iterator[Store]:
    assert disk_settings.redis_url is not None
    s = Store.from_url(disk_settings.redis_url, disk_settings)
    try:
        yield s
    finally:
        clear_store(s)
        s.close()


def body_and_arrays() -> tuple[bytes, dict[str, np.ndarray]]:
    """A stored (not deflated) NPZ of a float64 Gaussian, as ``numpy.savez`` writes it."""
    rng = np.random.default_rng(16)
    arrays = {
        "mean": rng.normal(size=N),
        "std": rng.uniform(0.5, 1.5, size=N),
        "y": rng.normal(size=N),
    }
    request = '{"kind": "gaussian", "model_name": "disk", "analyses": {"metrics": ["mae"]}}'
    buf = io.BytesIO()
    np.savez(buf, request=np.array(request), **arrays)
    return buf.getvalue(), arrays


def content_digest(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


def test_completion_holds_at_most_twice_the_body_on_disk(
    disk_settings: Settings, disk_store: Store, record_property: Any
) -> None:
    body, arrays = body_and_arrays()
    local = disk_settings.blob_endpoint_url is None
    blob_dir = Path(str(disk_settings.blob_url))
    scratch = Path(str(disk_settings.scratch_dir))
    with (
        LiveServer(create_app(disk_settings, store=disk_store)) as live,
        httpx.Client(base_url=live.url, timeout=120) as http,
    ):
        key = new_key(http, "disk")
        r = http.post(
            "/v1/uploads",
            json={"size": len(body), "sha256": hashlib.sha256(body).hexdigest()},
            headers=key,
        )
        assert r.status_code == 201, r.text
        upload_id, parts = r.json()["id"], r.json()["parts"]
        assert parts >= 8
        for n in range(1, parts + 1):
            chunk = body[(n - 1) * PART : n * PART]
            headers = {**key, "Content-Digest": content_digest(chunk)}
            r = http.put(f"/v1/uploads/{upload_id}/parts/{n}", content=chunk, headers=headers)
            assert r.status_code == 200, r.text

        roots = (blob_dir, scratch) if local else (scratch,)
        before = tree_bytes(*roots)
        if local:
            assert before >= len(body)  # the parts are on this disk
        sampler = PeakSampler(*roots)
        sampler.start()
        done = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
        peak = sampler.stop()
        assert done.status_code == 202, done.text
        assert sampler.samples >= 3

    record_property("body_bytes", len(body))
    record_property("peak_disk_bytes", peak)
    record_property("peak_over_body", round(peak / len(body), 3))
    if local:
        # The parts (the body) and the extracted members (the body less the zip's headers
        # and the small request member); the joined copy made it 3-4× the body.
        assert peak <= 2.1 * len(body), f"peak {peak / len(body):.2f}× the body"
    else:
        # The parts stay in the object store; this disk holds the extracted members and at
        # most two downloaded parts, where the joined copy added the whole body again.
        assert peak <= 1.1 * len(body) + 2 * PART, f"peak {peak / len(body):.2f}× the body"

    # The submission's arrays are the ones sent; no part and no spool file is left.
    sub_id = done.json()["id"]
    stored = disk_store.load_arrays(sub_id)
    assert stored is not None
    for name, expected in arrays.items():
        np.testing.assert_array_equal(np.asarray(stored[name]), expected)
    assert list(disk_store.blobs.list(f"uploads/{upload_id}/")) == []
    assert [p for p in scratch.iterdir() if p.name.startswith("spool-")] == []


def test_a_stored_part_lost_or_damaged_is_named_and_sent_again(
    session_settings: Settings, tmp_path: Path
) -> None:
    """Each part is checked against what its PUT recorded when the upload completes: a part
    gone from the blob store answers 409 and is listed as missing again, a part whose stored
    bytes changed answers 422 naming it; sent again, the upload completes."""
    settings = session_settings.model_copy(
        update={
            "blob_url": str(tmp_path / "blobs"),
            "scratch_dir": tmp_path / "scratch",
            "data_dir": tmp_path,
            "upload_part_bytes": 64 << 10,
        }
    )
    assert settings.redis_url is not None
    store = Store.from_url(settings.redis_url, settings)
    rng = np.random.default_rng(7)
    buf = io.BytesIO()
    request = '{"kind": "gaussian", "model_name": "parts", "analyses": {"metrics": ["mae"]}}'
    np.savez(
        buf,
        request=np.array(request),
        mean=rng.normal(size=20_000),
        std=rng.uniform(0.5, 1.5, size=20_000),
        y=rng.normal(size=20_000),
    )
    body, part = buf.getvalue(), 64 << 10
    chunks = [body[i : i + part] for i in range(0, len(body), part)]
    try:
        with (
            LiveServer(create_app(settings, store=store)) as live,
            httpx.Client(base_url=live.url, timeout=60) as http,
        ):
            key = new_key(http, "parts")
            upload_id = http.post("/v1/uploads", json={"size": len(body)}, headers=key).json()["id"]

            def put(n: int) -> None:
                headers = {**key, "Content-Digest": content_digest(chunks[n - 1])}
                r = http.put(
                    f"/v1/uploads/{upload_id}/parts/{n}", content=chunks[n - 1], headers=headers
                )
                assert r.status_code == 200, r.text

            for n in range(1, len(chunks) + 1):
                put(n)
            stored = tmp_path / "blobs" / "uploads" / upload_id
            (part3,) = stored.glob("part-3-*")
            part3.unlink()
            r = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
            assert r.status_code == 409, r.text
            assert r.json()["error"]["code"] == "upload_incomplete"
            received = http.get(f"/v1/uploads/{upload_id}", headers=key).json()["received"]
            assert received == [n for n in range(1, len(chunks) + 1) if n != 3]
            put(3)

            (part2,) = stored.glob("part-2-*")
            damaged = bytearray(part2.read_bytes())
            damaged[10] ^= 0xFF
            part2.write_bytes(bytes(damaged))
            r = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
            assert r.status_code == 422, r.text
            assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (
                "digest_mismatch",
                "n",
            )
            assert "part 2 " in r.json()["error"]["message"]
            put(2)

            r = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
            assert r.status_code == 202, r.text
    finally:
        clear_store(store)
        store.close()
