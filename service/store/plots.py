"""Rendered plots: their bytes cached in Redis, the claims that make concurrent misses queue
one render, and the source document of a leaderboard's plot.

A plot lives in a hash per document (``keys.submission_plots``, ``keys.comparison_plots``,
``keys.leaderboard_plots``) under the field ``{name}.{format}``: the PNG or SVG bytes, or
``error:{status}:{reason}`` when it cannot be drawn (not applicable: 404; failed: 500). The
hash expires ``ttl_s`` after its last write; a submission's is deleted with it. The curves a
submission's plots are drawn from once its arrays are gone are kept in the blob store.
"""

from __future__ import annotations

import time
from typing import Any

from service import keys
from service.blobs import BlobNotFound
from service.store.base import StoreBase

__all__ = ["ERROR_PREFIX", "PlotStore", "plot_error"]

#: The start of a stored error (PNG starts with ``\x89PNG``, SVG with ``<?xml``).
ERROR_PREFIX = b"error:"

#: The field of a leaderboard plot hash that holds the leaderboard's JSON bytes.
SOURCE_FIELD = "source"


def _curves_blob(sub_id: str) -> str:
    return f"{keys.curves_blobs(sub_id)}curves.bin"


def _earlier_curves_blob(sub_id: str) -> str:
    """Where earlier versions kept the curves (zlib-compressed JSON)."""
    return f"{keys.curves_blobs(sub_id)}curves.json.zz"


def plot_error(status: int, reason: str) -> bytes:
    """The stored form of a plot that cannot be drawn."""
    return ERROR_PREFIX + f"{status}:{reason}".encode()


class PlotStore(StoreBase):
    """Rendered plots (a part of :class:`service.store.Store`)."""

    def get_plot(self, plots_key: str, field: str) -> bytes | None:
        """The stored bytes (or error) of ``field`` (``{name}.{format}``); None: not yet."""
        data: Any = self._call(lambda: self.client.hget(plots_key, field))
        return None if data is None else bytes(data)

    def put_plot(self, plots_key: str, field: str, data: bytes, ttl_s: int) -> None:
        """Store a rendered plot (or an error), refreshing the hash's expiry."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(plots_key, field, data)
            pipe.expire(plots_key, max(int(ttl_s), 1))
            if not data.startswith(ERROR_PREFIX):
                pipe.incr(keys.plot_renders())
            pipe.execute()

        self._call(write)

    def drop_plot(self, plots_key: str, field: str) -> None:
        """Forget a stored plot and its claim (a failed render, to be tried again)."""
        self._call(
            lambda: (
                self.client.delete(keys.plot_claim(plots_key, field))
                + self.client.hdel(plots_key, field)
            )
        )

    def claim_plot(self, plots_key: str, field: str, ttl_s: float) -> bool:
        """Claim the render of ``field``: True for the first caller until the claim expires
        after ``ttl_s`` or is released (the caller then queues the render)."""
        ttl_ms = max(int(ttl_s * 1000), 1)
        claim = keys.plot_claim(plots_key, field)
        return bool(self._call(lambda: self.client.set(claim, b"1", nx=True, px=ttl_ms)))

    def release_plot_claim(self, plots_key: str, field: str) -> None:
        self._call(lambda: self.client.delete(keys.plot_claim(plots_key, field)))

    def put_plot_source(self, plots_key: str, source: bytes, ttl_s: int) -> None:
        """Store the document a leaderboard plot is drawn from (the answer's JSON bytes)."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(plots_key, SOURCE_FIELD, source)
            pipe.expire(plots_key, max(int(ttl_s), 1))
            pipe.execute()

        self._call(write)

    def get_plot_source(self, plots_key: str) -> bytes | None:
        data: Any = self._call(lambda: self.client.hget(plots_key, SOURCE_FIELD))
        return None if data is None else bytes(data)

    def put_curves(self, sub_id: str, data: bytes) -> None:
        """Keep the curves a submission's plots are drawn from (the bytes of
        ``worker.plots.encode_curves``), in the blob store (tens of kB: too much for Redis'
        budget per submission); they live as long as the submission (see
        :mod:`service.store.blobsweep`)."""
        self.track_blobs(keys.curves_blobs(sub_id), time.time() + self.blob_grace_s)
        self._call(lambda: self.blobs.put_bytes(_curves_blob(sub_id), data))

    def get_curves(self, sub_id: str) -> bytes | None:
        """The bytes :meth:`put_curves` kept (or earlier versions kept: in the blob store under
        another name, or in Redis); None when none are kept."""
        for name in (_curves_blob(sub_id), _earlier_curves_blob(sub_id)):
            try:
                return self._call(lambda n=name: self.blobs.get_bytes(n))  # type: ignore[misc]
            except BlobNotFound:
                pass
        # Kept in Redis by earlier versions.
        data: Any = self._call(lambda: self.client.get(keys.submission_curves(sub_id)))
        return None if data is None else bytes(data)

    def drop_curves(self, sub_id: str) -> None:
        self._call(lambda: self.client.delete(keys.submission_curves(sub_id)))
        self.discard_blobs(keys.curves_blobs(sub_id), [], forget=True)

    def plots_rendered(self) -> int:
        """How many plots were rendered (the counter of ``keys.plot_renders``)."""
        return int(self._call(lambda: self.client.get(keys.plot_renders())) or 0)
