"""The blob store: where raw arrays live, apart from Redis.

Redis keeps metadata, queues, results and leaderboards; the arrays of submissions and
benchmarks (one uncompressed ``.npy`` object per array, so that a local copy can be
memory-mapped) go to a :class:`BlobStore`: a local directory by default
(:class:`LocalBlobStore`, what the embedded ``uqeval serve`` uses) or an S3-compatible object
store in production. :func:`open_blob_store` picks one from the settings.
"""

from __future__ import annotations

from service.blobs.base import BlobInfo, BlobNotFound, BlobStore, BlobUnavailable
from service.blobs.local import LocalBlobStore

__all__ = [
    "BlobInfo",
    "BlobNotFound",
    "BlobStore",
    "BlobUnavailable",
    "LocalBlobStore",
]
