"""The interface every blob store implements, and its errors.

Keys are relative, ``/``-separated names (``submissions/<id>/mean.npy``); a store maps them
to files under a directory or to objects under a bucket prefix. Every write is atomic: a
reader sees the whole object or none of it.
"""

from __future__ import annotations

import abc
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BlobInfo",
    "BlobNotFound",
    "BlobStore",
    "BlobUnavailable",
    "StoredArray",
    "check_key",
]

#: What a key may hold: path segments of letters, digits and ``._:-``, joined by ``/``.
_KEY = re.compile(r"^[A-Za-z0-9._:-]+(/[A-Za-z0-9._:-]+)*$")


class BlobUnavailable(RuntimeError):
    """The blob store cannot be reached now (a transient failure: retry later)."""


class BlobNotFound(KeyError):
    """No object under this key (deleted, expired, or never written)."""


@dataclass(frozen=True)
class BlobInfo:
    """One stored object: its key, its size in bytes and when it was last written (epoch s)."""

    key: str
    size: int
    modified: float


@dataclass(frozen=True)
class StoredArray:
    """An array already written as an ``.npy`` object under ``key`` (e.g. by the upload path):
    passed to the store instead of the array, which then only records the reference."""

    key: str
    dtype: str
    shape: tuple[int, ...]


def check_key(key: str) -> str:
    """``key`` when it is a valid relative key (no ``..``, no leading ``/``), else ValueError."""
    if not _KEY.match(key) or any(part in (".", "..") for part in key.split("/")):
        raise ValueError(f"invalid blob key {key!r}")
    return key


class BlobStore(abc.ABC):
    """Objects under keys: written whole from a local file or bytes, read back into a local
    file (to be memory-mapped) or as bytes, listed by prefix, deleted."""

    #: A short description for logs and /readyz ("local directory .uqeval/blobs", "s3://...").
    description: str

    @abc.abstractmethod
    def put_file(self, key: str, path: Path, *, move: bool = False) -> None:
        """Store the file ``path`` under ``key`` (replacing any object there). With ``move``,
        the file may be moved instead of copied (it is gone afterwards)."""

    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``."""

    def put_npy(self, key: str, array: np.ndarray[Any, Any], scratch: Path) -> None:
        """Store ``array`` as an ``.npy`` object under ``key`` (``numpy.save``, no pickles):
        by default written to a file in the directory ``scratch``, then stored from it."""
        scratch.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="put-", suffix=".npy", dir=scratch)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, array, allow_pickle=False)
            self.put_file(key, Path(tmp), move=True)
        finally:
            Path(tmp).unlink(missing_ok=True)

    @abc.abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """The whole object (for small objects); BlobNotFound when absent."""

    @abc.abstractmethod
    def local_path(self, key: str, scratch: Path) -> Path:
        """A local file holding the object, for memory-mapping: the stored file itself for a
        local store, else a download into the directory ``scratch`` (the caller removes it).
        BlobNotFound when absent."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object (no error when absent)."""

    @abc.abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose key starts with ``prefix``; the number removed."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        """The objects whose keys start with ``prefix``."""

    @abc.abstractmethod
    def ping(self) -> bool:
        """True when the store answers; raises BlobUnavailable otherwise."""
