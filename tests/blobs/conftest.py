"""Fixtures of the blob store's tests: each runs against a local directory and against a real
S3-compatible server process (moto's, started by :func:`tests.stack.s3_server`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.blobs import BlobStore, LocalBlobStore
from service.settings import Settings
from service.store import Store
from tests.stack import S3_BUCKET, Db, S3Server, clear_store, db_url


@pytest.fixture(params=["local", "s3"])
def blob_settings(
    request: pytest.FixtureRequest, session_settings: Settings, tmp_path: Path
) -> Settings:
    """The session's settings with a fresh blob store of either kind (an S3 prefix of its own
    in the test bucket, or a directory of its own), on :attr:`Db.BLOBS` (the session worker,
    on database 0, sweeps the blob manifests of its own database with its own blob store)."""
    if request.param == "local":
        update = {"blob_url": f"file://{tmp_path / 'blobs'}", "blob_endpoint_url": None}
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        update = {
            "blob_url": f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex[:12]}",
            "blob_endpoint_url": server.url,
        }
    assert session_settings.redis_url is not None
    update["redis_url"] = db_url(session_settings.redis_url, Db.BLOBS)
    return session_settings.model_copy(update={**update, "scratch_dir": tmp_path / "scratch"})


@pytest.fixture
def bstore(blob_settings: Settings) -> Iterator[Store]:
    """A Store on the test Redis whose arrays go to ``blob_settings``' blob store."""
    assert blob_settings.redis_url is not None
    s = Store.from_url(blob_settings.redis_url, blob_settings)
    s.client.flushdb()
    try:
        yield s
    finally:
        clear_store(s)
        s.close()


@pytest.fixture
def blobs(bstore: Store) -> BlobStore:
    return bstore.blobs


def is_local(store: BlobStore) -> bool:
    return isinstance(store, LocalBlobStore)
