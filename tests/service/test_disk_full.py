"""A full disk under the API over real HTTP (uvicorn on 127.0.0.1): a body that cannot be
spooled, an NPZ member that cannot be extracted, a resumable upload's part that cannot be
stored (the scratch directory full) and arrays that cannot be written (a local blob store
full) are answered 507 ``insufficient_storage`` with a Retry-After — never blamed on the body
— and leave nothing behind; with space again, the same requests succeed. The Python client
reads 507 as the server being unavailable.

The disk is really full where the tests may mount a small tmpfs (root with the right to
mount: a 1 MiB filesystem as the scratch directory); elsewhere the write that would fill it is
made to fail with ENOSPC."""

from __future__ import annotations

import base64
import errno
import gzip
import hashlib
import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.api import spool as spool_module
from service.api.app import create_app
from service.blobs import local as local_blobs
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_npz
from tests.service._api import NPZ, LiveServer, error_of, new_key, submission_total
from tests.stack import clear_store
from uqeval.errors import ServerUnavailable, from_response

pytest_plugins = ["tests.service._api"]

DISK_BYTES = 1 << 20


def _mounted(path: Path) -> bool:
    """Whether a tmpfs of :data:`DISK_BYTES` could be mounted on ``path``."""
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(path)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


class Disk:
    """The scratch directory, and whether it is really small (else :meth:`fill` makes the
    writes that would fill it fail)."""

    def __init__(self, path: Path, real: bool, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path, self.real, self._mp = path, real, monkeypatch

    def fill(self) -> None:
        """From now on, writing past :data:`DISK_BYTES` in the scratch directory fails."""
        if self.real:
            return
        full = OSError(errno.ENOSPC, "No space left on device")
        written = {"n": 0}
        sink_write = spool_module.Sink.write

        def write(sink: Any, data: bytes) -> None:
            written["n"] += len(data)
            if written["n"] > DISK_BYTES:
                raise full
            sink_write(sink, data)

        def copy(src: Any, dst: Any, length: int = 0) -> None:
            raise full

        self._mp.setattr(spool_module.Sink, "write", write)
        self._mp.setattr(spool_module.shutil, "copyfileobj", copy)

    def make_room(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Space again: the small filesystem unmounted (the plain disk beneath), or the
        failing writes undone."""
        monkeypatch.undo()
        if self.real:
            done = subprocess.run(["umount", str(self.path)], capture_output=True, timeout=30)
            assert done.returncode == 0, done.stderr
            self.real = False

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.path.rglob("*") if p.is_file())


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    path = tmp_path / "scratch"
    path.mkdir()
    real = _mounted(path)
    try:
        yield Disk(path, real, monkeypatch)
    finally:
        if real:
            subprocess.run(["umount", str(path)], capture_output=True, timeout=30)


@pytest.fixture
def http(settings: Settings, store: Store, disk: Disk, tmp_path: Path) -> Iterator[httpx.Client]:
    small = settings.model_copy(
        update={
            "scratch_dir": disk.path,
            "data_dir": tmp_path / "data",
            "upload_part_bytes": 2 << 20,
        }
    )
    with (
        LiveServer(create_app(small, store=store)) as live,
        httpx.Client(base_url=live.url, timeout=60) as client,
    ):
        yield client


def assert_disk_full(r: httpx.Response) -> None:
    assert r.status_code == 507, r.text
    assert error_of(r)["code"] == "insufficient_storage"
    assert int(r.headers["Retry-After"]) > 0


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_body_that_cannot_be_spooled_is_answered_507(
    http: httpx.Client, disk: Disk, encoding: str
) -> None:
    key = new_key(http, "spool")
    body = gaussian_npz(100_000, seed=1)  # 2.4 MB: spooled, and more than the disk holds
    headers = {**key, **NPZ}
    sent = body
    if encoding == "gzip":
        sent, headers = (
            gzip.compress(body, compresslevel=1),
            {**headers, "Content-Encoding": "gzip"},
        )
    disk.fill()
    assert_disk_full(http.post("/v1/submissions", content=sent, headers=headers))
    assert disk.leftovers() == []
    assert submission_total(http, key) == 0


def test_a_member_that_cannot_be_extracted_is_answered_507_not_422(
    http: httpx.Client, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key(http, "member")
    n = 150_000  # each member 1.2 MB: extracted to a file; the deflated body is small
    buf = io.BytesIO()
    request = {"kind": "gaussian", "model_name": "m", "analyses": {"metrics": ["mae"]}}
    np.savez_compressed(
        buf, request=np.array(json.dumps(request)), mean=np.zeros(n), std=np.ones(n), y=np.zeros(n)
    )
    body = buf.getvalue()
    assert len(body) < spool_module.MEMORY_BODY_BYTES  # read in memory: only the members spool
    disk.fill()
    assert_disk_full(http.post("/v1/submissions", content=body, headers={**key, **NPZ}))
    assert disk.leftovers() == []
    assert submission_total(http, key) == 0
    # with space again, the same body is taken
    disk.make_room(monkeypatch)
    r = http.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == 202, r.text


def test_a_part_that_cannot_be_stored_is_answered_507_and_can_be_sent_again(
    http: httpx.Client, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key(http, "part")
    body = gaussian_npz(100_000, seed=2)
    upload = http.post("/v1/uploads", json={"size": len(body)}, headers=key).json()
    part = body[: upload["part_size"]]
    sha = base64.b64encode(hashlib.sha256(part).digest()).decode()
    headers = {
        **key,
        "Content-Type": "application/octet-stream",
        "Content-Digest": f"sha-256=:{sha}:",
    }
    url = f"/v1/uploads/{upload['id']}/parts/1"
    disk.fill()
    assert_disk_full(http.put(url, content=part, headers=headers))
    assert disk.leftovers() == []
    assert http.get(f"/v1/uploads/{upload['id']}", headers=key).json()["received"] == []
    disk.make_room(monkeypatch)
    assert http.put(url, content=part, headers=headers).status_code == 200


def test_the_client_reads_507_as_the_server_unavailable() -> None:
    doc = {
        "error": {"code": "insufficient_storage", "message": "full", "field": None, "index": None}
    }
    response = httpx.Response(507, json=doc, headers={"Retry-After": "60"})
    exc = from_response(response)
    assert isinstance(exc, ServerUnavailable)
    assert (exc.status, exc.code, exc.exit_code) == (507, "insufficient_storage", 6)


@pytest.fixture
def blob_http(settings: Settings, disk: Disk, tmp_path: Path) -> Iterator[httpx.Client]:
    """The API with its local blob store on the small disk (its scratch directory elsewhere)."""
    assert settings.redis_url is not None
    full = settings.model_copy(
        update={
            "blob_url": f"file://{disk.path}",
            "blob_endpoint_url": None,
            "scratch_dir": tmp_path / "spool",
            "data_dir": tmp_path / "data",
        }
    )
    s = Store.from_url(settings.redis_url, full)
    try:
        with (
            LiveServer(create_app(full, store=s)) as live,
            httpx.Client(base_url=live.url, timeout=60) as client,
        ):
            yield client
    finally:
        clear_store(s)
        s.close()


def test_arrays_that_cannot_be_written_to_a_full_blob_store_are_answered_507(
    blob_http: httpx.Client, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key(blob_http, "blobs")
    body = gaussian_npz(50_000, seed=3)  # 1.2 MB of arrays, each 400 kB: past the small disk
    if not disk.real:

        def full(*args: Any, **kwargs: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(local_blobs.np, "save", full)
    assert_disk_full(blob_http.post("/v1/submissions", content=body, headers={**key, **NPZ}))
    assert disk.leftovers() == []
    assert submission_total(blob_http, key) == 0
    disk.make_room(monkeypatch)
    assert (
        blob_http.post("/v1/submissions", content=body, headers={**key, **NPZ}).status_code == 202
    )


def test_a_short_write_is_a_full_disk_only_when_the_disk_lacks_the_room(tmp_path: Path) -> None:
    # numpy's tofile reports a short write without an errno; the filesystem's free space
    # (statvfs of a real directory) tells a full disk from another failure.
    short = OSError("10000 requested and 9200 written")
    free = shutil.disk_usage(tmp_path).free
    full = local_blobs._disk_full(short, tmp_path, free + (1 << 30))
    assert full is not None and full.errno == errno.ENOSPC
    assert local_blobs._disk_full(short, tmp_path, 1) is None
    assert local_blobs._disk_full(OSError(errno.EIO, "I/O error"), tmp_path, free * 2) is None
