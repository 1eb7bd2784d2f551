"""The blob store: where raw arrays live, apart from Redis.

Redis keeps metadata, queues, results and leaderboards; the arrays of submissions and
benchmarks (one uncompressed ``.npy`` object per array, so that a local copy can be
memory-mapped) go to a :class:`BlobStore`: a local directory by default
(:class:`LocalBlobStore`, what the embedded ``uqeval serve`` uses) or an S3-compatible object
store in production. :func:`open_blob_store` picks one from the settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from service.blobs.base import BlobInfo, BlobNotFound, BlobStore, BlobUnavailable, StoredArray
from service.blobs.local import LocalBlobStore

if TYPE_CHECKING:
    from service.settings import Settings

__all__ = [
    "BlobInfo",
    "BlobNotFound",
    "BlobStore",
    "BlobUnavailable",
    "LocalBlobStore",
    "StoredArray",
    "open_blob_store",
    "scratch_dir",
]


def open_blob_store(settings: Settings) -> BlobStore:
    """The blob store named by ``settings.blob_url``: unset -> the directory
    ``<data_dir>/blobs``; ``file:///dir`` or a plain path -> that directory;
    ``s3://bucket/prefix`` -> that bucket (``settings.blob_endpoint_url`` for an
    S3-compatible server)."""
    url = settings.blob_url
    if not url:
        return LocalBlobStore(Path(settings.data_dir) / "blobs")
    if url.startswith("s3://"):
        from service.blobs.s3 import S3BlobStore  # boto3 only where S3 is used

        return S3BlobStore.from_url(url, endpoint_url=settings.blob_endpoint_url)
    if url.startswith("file://"):
        return LocalBlobStore(Path(unquote(urlparse(url).path)))
    if "://" in url:
        raise ValueError(f"unsupported blob store URL {url!r} (file:// or s3://)")
    return LocalBlobStore(Path(url))


def scratch_dir(settings: Settings) -> Path:
    """Where downloads and spooled uploads are kept while used: ``settings.scratch_dir`` or
    ``<data_dir>/scratch``."""
    return Path(settings.scratch_dir or Path(settings.data_dir) / "scratch")
