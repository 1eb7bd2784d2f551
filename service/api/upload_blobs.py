"""Where the upload path puts what it received: the parts of resumable uploads, and the
validated arrays handed to the store.

Both go through the blob store (:mod:`service.blobs`), so that any API process can take any
part of an upload and a worker can read an array without Redis holding it.
"""

from __future__ import annotations

from typing import Any

from service.api.spool import Spool

__all__ = ["part_key", "stored_arrays", "upload_prefix"]


def upload_prefix(upload_id: str) -> str:
    return f"uploads/{upload_id}/"


def part_key(upload_id: str, n: int, sha256: str | None = None) -> str:
    """Where part ``n`` of an upload is kept: ``uploads/<id>/part-<n>-<sha256>``, keyed by the
    SHA-256 its ``PUT`` checked, so that bytes sent again for a part never replace the bytes a
    completion is reading (they go to another key, and the upload's record names the one that
    counts). ``sha256=None``: the key of uploads created before parts were keyed by their
    digest, ``uploads/<id>/part-<n>``."""
    if sha256 is None:
        return f"{upload_prefix(upload_id)}part-{n}"
    return f"{upload_prefix(upload_id)}part-{n}-{sha256}"


def stored_arrays(arrays: dict[str, Any], spool: Spool) -> dict[str, Any]:
    """The arrays to hand to ``Store.create_submission`` / ``create_benchmark`` once they are
    valid: large ones are read-only memory maps of whole ``.npy`` files in ``spool``, which the
    store copies into the blob store as files (:func:`service.store.codec.npy_file_of`), never
    reading them through the map; small ones are in memory."""
    del spool  # the files stay until the request ends, after the store copied them
    return arrays
