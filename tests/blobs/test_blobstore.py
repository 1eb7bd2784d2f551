"""The BlobStore interface, the same on a local directory and on a real S3 server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from service.blobs import BlobNotFound, BlobStore, BlobUnavailable, LocalBlobStore, open_blob_store
from service.blobs.s3 import S3BlobStore, parse_s3_url
from service.settings import Settings
from tests.blobs.conftest import is_local


def test_bytes_round_trip_exists_and_delete(blobs: BlobStore) -> None:
    assert blobs.ping()
    assert not blobs.exists("a/b.bin")
    with pytest.raises(BlobNotFound):
        blobs.get_bytes("a/b.bin")
    payload = bytes(range(256)) * 17
    blobs.put_bytes("a/b.bin", payload)
    assert blobs.exists("a/b.bin")
    assert blobs.get_bytes("a/b.bin") == payload
    blobs.put_bytes("a/b.bin", b"replaced")
    assert blobs.get_bytes("a/b.bin") == b"replaced"
    blobs.delete("a/b.bin")
    blobs.delete("a/b.bin")  # absent: no error
    assert not blobs.exists("a/b.bin")


def test_put_file_copy_and_move_and_local_path(blobs: BlobStore, tmp_path: Path) -> None:
    src = tmp_path / "x.npy"
    array = np.random.default_rng(1).normal(size=1000)
    np.save(src, array)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    blobs.put_file("submissions/s1/mean.npy", src)
    assert src.exists()  # copied
    blobs.put_file("submissions/s1/estimate:q.npy", src, move=True)
    assert not src.exists()  # moved
    scratch = tmp_path / "scratch"
    for key in ("submissions/s1/mean.npy", "submissions/s1/estimate:q.npy"):
        path = blobs.local_path(key, scratch)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        np.testing.assert_array_equal(np.load(path, mmap_mode="r"), array)
        # a download lands in scratch; the local store hands out its own file
        assert path.is_relative_to(scratch) != is_local(blobs)
    with pytest.raises(BlobNotFound):
        blobs.local_path("submissions/s1/none.npy", scratch)


def test_put_npy_stores_the_array_and_leaves_no_temporary_file(
    blobs: BlobStore, tmp_path: Path
) -> None:
    """An array written as ``.npy`` reads back equal (dtype, shape, values) and nothing else
    is left: no temporary file beside the objects nor in scratch. A move of a file of another
    directory of the same filesystem replaces the object at once; an array that cannot be
    written leaves no object."""
    scratch = tmp_path / "scratch"
    arrays = {
        "mean": np.random.default_rng(2).normal(size=777),
        "labels": np.arange(12, dtype=np.int32).reshape(3, 4),
    }
    for name, array in arrays.items():
        blobs.put_npy(f"submissions/n1/{name}.npy", array, scratch)
    for name, array in arrays.items():
        got = np.load(blobs.local_path(f"submissions/n1/{name}.npy", scratch / "dl"))
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)
    assert sorted(b.key for b in blobs.list("submissions/n1/")) == [
        "submissions/n1/labels.npy",
        "submissions/n1/mean.npy",
    ]
    assert not list(scratch.glob("put-*"))
    if is_local(blobs):
        assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")]
    with pytest.raises(ValueError, match="pickle"):
        blobs.put_npy("submissions/n1/bad.npy", np.array([{"a": 1}], dtype=object), scratch)
    assert not blobs.exists("submissions/n1/bad.npy")
    if is_local(blobs):
        assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")]


def test_list_and_delete_prefix(blobs: BlobStore) -> None:
    for i in range(5):
        blobs.put_bytes(f"submissions/p1/{i}.npy", b"x" * (i + 1))
    blobs.put_bytes("submissions/p10/0.npy", b"other")
    listed = sorted(blobs.list("submissions/p1/"), key=lambda b: b.key)
    assert [b.key for b in listed] == [f"submissions/p1/{i}.npy" for i in range(5)]
    assert [b.size for b in listed] == [1, 2, 3, 4, 5]
    assert all(b.modified > 0 for b in listed)
    assert blobs.delete_prefix("submissions/p1/") == 5
    assert list(blobs.list("submissions/p1/")) == []
    assert [b.key for b in blobs.list("submissions/")] == ["submissions/p10/0.npy"]


@pytest.mark.parametrize("key", ["../x", "/abs", "a//b", "a/../b", "a b", ""])
def test_invalid_keys_are_refused(blobs: BlobStore, key: str) -> None:
    with pytest.raises(ValueError, match="invalid blob key"):
        blobs.put_bytes(key, b"x")


def test_open_blob_store_from_settings(tmp_path: Path) -> None:
    default = open_blob_store(Settings(data_dir=tmp_path))
    assert isinstance(default, LocalBlobStore) and default.root == tmp_path / "blobs"
    url = open_blob_store(Settings(blob_url=f"file://{tmp_path}/b"))
    assert isinstance(url, LocalBlobStore) and url.root == tmp_path / "b"
    plain = open_blob_store(Settings(blob_url=str(tmp_path / "c")))
    assert isinstance(plain, LocalBlobStore) and plain.root == tmp_path / "c"
    s3 = open_blob_store(
        Settings(blob_url="s3://bucket/some/prefix/", blob_endpoint_url="http://127.0.0.1:1")
    )
    assert isinstance(s3, S3BlobStore)
    assert (s3.bucket, s3.prefix, s3.endpoint_url) == (
        "bucket",
        "some/prefix/",
        "http://127.0.0.1:1",
    )
    assert parse_s3_url("s3://b") == ("b", "")
    with pytest.raises(ValueError, match="unsupported blob store URL"):
        open_blob_store(Settings(blob_url="ftp://x/y"))


def test_unreachable_s3_endpoint_is_unavailable_not_missing(tmp_path: Path) -> None:
    from service.redis_server import free_port

    store = S3BlobStore("bucket", endpoint_url=f"http://127.0.0.1:{free_port()}")
    for op in (
        store.ping,
        lambda: store.get_bytes("a"),
        lambda: store.put_bytes("a", b"x"),
        lambda: store.exists("a"),
        lambda: store.local_path("a", tmp_path),
        lambda: list(store.list("")),
    ):
        with pytest.raises(BlobUnavailable):
            op()
    assert list(tmp_path.iterdir()) == []  # no half download left behind


def test_missing_bucket_fails_the_ping(s3_server: object) -> None:
    from tests.stack import S3Server

    assert isinstance(s3_server, S3Server)
    store = S3BlobStore("no-such-bucket", endpoint_url=s3_server.url)
    with pytest.raises(BlobUnavailable, match="does not exist"):
        store.ping()
