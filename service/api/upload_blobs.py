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


def part_key(upload_id: str, n: int) -> str:
    return f"{upload_prefix(upload_id)}part-{n}"


def stored_arrays(arrays: dict[str, Any], spool: Spool) -> dict[str, Any]:
    """The arrays to hand to ``Store.create_submission`` / ``create_benchmark`` once they are
    valid: large ones are read-only memory maps of whole ``.npy`` files in ``spool``, which the
    store copies into the blob store as files (:func:`service.store.codec.npy_file_of`), never
    reading them through the map; small ones are in memory."""
    del spool  # the files stay until the request ends, after the store copied them
    return arrays
