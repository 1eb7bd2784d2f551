"""Where the upload path puts what it received: the parts of resumable uploads, and the
validated arrays handed to the store.

Both go through the blob store (:mod:`service.blobs`), so that any API process can take any
part of an upload and a worker can read an array without Redis holding it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.api.spool import Spool
from service.blobs import BlobStore, LocalBlobStore
from service.settings import Settings

__all__ = ["part_key", "stored_arrays", "upload_blobs", "upload_prefix"]


def upload_blobs(settings: Settings) -> BlobStore:
    """The blob store holding the parts of resumable uploads: the local directory
    ``<data_dir>/blobs`` (the default of the blob store settings)."""
    return LocalBlobStore(Path(settings.data_dir) / "blobs")


def upload_prefix(upload_id: str) -> str:
    return f"uploads/{upload_id}/"


def part_key(upload_id: str, n: int) -> str:
    return f"{upload_prefix(upload_id)}part-{n}"


def stored_arrays(arrays: dict[str, Any], spool: Spool) -> dict[str, Any]:
    """The arrays to hand to ``Store.create_submission`` / ``create_benchmark`` once they are
    valid: large ones are read-only memory maps of ``.npy`` files in ``spool`` (the store
    writes them where it keeps arrays before the spool is removed); small ones are in
    memory."""
    del spool  # the store reads the mapped files itself
    return arrays
