"""Blob retention: the objects in the blob store follow their manifests in Redis.

Redis stays the one place that says how long arrays live: the Lua scripts that end a job
``EXPIRE`` (or delete) the manifest hash ``sub:{id}:arrays`` as before, a succeeded benchmark
submission keeps it, deletion removes it. The objects follow through the zset ``blobs:due``
(prefix -> when to look at it next), which every prefix enters *before* its first object is
written (:meth:`StoreBase.track_blobs`, due after ``blob_grace_s``). :meth:`sweep_blobs`, run
by one worker at a time every ``blob_sweep_interval_s``, takes the due prefixes and reads the
TTL of each manifest:

- gone (expired, deleted, or never written because the transaction after the blob write did
  not happen): every object under the prefix is deleted and the prefix leaves the zset;
- expiring: the prefix is due again when the manifest expires;
- kept without expiry (a job not ended yet, a succeeded benchmark submission, a benchmark):
  due again after ``blob_grace_s`` (a job that ends later is seen then).

The curves a submission keeps for its plots (``curves/<id>/``) follow the submission record
itself: once it is seen, the prefix leaves the zset, and the submission's deletion puts it
back, due at once.

So an object is never deleted while its manifest exists (nothing lost early), and every
object written after its prefix was recorded is deleted at most ``blob_grace_s`` plus one
sweep interval after its manifest went (nothing orphaned forever). Deletion of a submission or
a benchmark deletes its objects at once, and leaves the prefix due now should the blob store
be down. :meth:`reconcile_blobs` (run once per ``blob_grace_s``) lists the store itself, for
objects whose zset entry was lost with Redis' data.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from service import keys
from service.blobs import LocalBlobStore
from service.store.base import StoreBase
from service.store.records import decode

__all__ = ["BlobSweepStore", "manifest_key"]

log = logging.getLogger(__name__)

#: Prefixes looked at in one sweep (a sweep runs in the worker's housekeeping thread).
SWEEP_BATCH = 200


#: The top-level folders of the blob store that the sweep follows.
FOLDERS = ("submissions/", "benchmarks/", "curves/")


def manifest_key(prefix: str) -> str | None:
    """The Redis key whose life the objects under a blob prefix follow: the manifest hash of
    ``submissions/<id>/`` or ``benchmarks/<id>/``, the submission record of ``curves/<id>/``
    (kept curves live as long as the submission); None for any other prefix."""
    parts = prefix.rstrip("/").split("/")
    if len(parts) != 2 or not parts[1]:
        return None
    if parts[0] == "submissions":
        return keys.arrays(parts[1])
    if parts[0] == "benchmarks":
        return keys.benchmark_arrays(parts[1])
    if parts[0] == "curves":
        return keys.submission(parts[1])
    return None


class BlobSweepStore(StoreBase):
    """The blob sweep (a part of :class:`service.store.Store`)."""

    def sweep_blobs(self, now: float | None = None, limit: int = SWEEP_BATCH) -> tuple[int, int]:
        """Look at up to ``limit`` due prefixes (see the module); returns (prefixes looked
        at, objects deleted). Raises StoreUnavailable when Redis or the blob store is down
        (the prefixes stay due)."""
        now = time.time() if now is None else float(now)
        due_key = keys.blobs_due()

        def read() -> list[tuple[str, int | None]]:
            prefixes = [
                decode(p) for p in self.client.zrangebyscore(due_key, "-inf", now, 0, limit)
            ]
            pipe = self.client.pipeline(transaction=False)
            known: list[str] = []
            for prefix in prefixes:
                mkey = manifest_key(prefix)
                if mkey is not None:
                    pipe.pttl(mkey)
                    known.append(prefix)
            ttls = dict(zip(known, pipe.execute(), strict=True))
            return [(p, ttls.get(p)) for p in prefixes]

        deleted = 0
        entries = self._call(read)
        for prefix, pttl in entries:
            if pttl is None:  # not a prefix of ours: nothing to follow
                self._call(lambda p=prefix: self.client.zrem(due_key, p))  # type: ignore[misc]
            elif int(pttl) == -2:  # the manifest is gone: so go the objects
                deleted += self._call(lambda p=prefix: self.blobs.delete_prefix(p))  # type: ignore[misc]
                self._call(lambda p=prefix: self.client.zrem(due_key, p))  # type: ignore[misc]
            elif int(pttl) == -1 and prefix.startswith("curves/"):
                # A submission record never expires; its deletion makes the prefix due again.
                self._call(lambda p=prefix: self.client.zrem(due_key, p))  # type: ignore[misc]
            elif int(pttl) == -1:
                self._reschedule(prefix, now + self.blob_grace_s)
            else:
                self._reschedule(prefix, now + int(pttl) / 1000.0 + 1.0)
        return len(entries), deleted

    def _reschedule(self, prefix: str, due: float) -> None:
        # XX: a prefix removed meanwhile (deleted and swept) is not brought back.
        self._call(lambda: self.client.zadd(keys.blobs_due(), {prefix: due}, xx=True))

    def reconcile_blobs(self, older_than_s: float | None = None, now: float | None = None) -> int:
        """Delete the objects under :data:`FOLDERS` that no manifest (or record) and
        no ``blobs:due`` entry account for and that were written more than ``older_than_s``
        (default ``blob_grace_s``) ago — what is left when Redis lost its data. Returns the
        number deleted. Lists the whole store: run it rarely."""
        now = time.time() if now is None else float(now)
        cutoff = now - (self.blob_grace_s if older_than_s is None else float(older_than_s))
        deleted = 0
        for top in FOLDERS:
            groups: dict[str, list[Any]] = {}
            for info in self._call(lambda t=top: list(self.blobs.list(t))):  # type: ignore[misc]
                parts = info.key.split("/")
                if len(parts) < 3:
                    continue
                groups.setdefault(f"{parts[0]}/{parts[1]}/", []).append(info)
            for prefix, infos in groups.items():
                mkey = manifest_key(prefix)
                if mkey is None:
                    continue

                def accounted(p: str = prefix, m: str = mkey) -> bool:
                    pipe = self.client.pipeline(transaction=False)
                    pipe.exists(m)
                    pipe.zscore(keys.blobs_due(), p)
                    exists, score = pipe.execute()
                    return bool(exists) or score is not None

                if self._call(accounted):
                    continue
                for info in infos:
                    if info.modified < cutoff:
                        self._call(lambda k=info.key: self.blobs.delete(k))  # type: ignore[misc]
                        deleted += 1
        return deleted

    def sweep_blobs_if_due(self, interval_s: float) -> tuple[int, int] | None:
        """Run :meth:`sweep_blobs` when no process did in the last ``interval_s`` (a lock in
        Redis: one sweeper at a time among all workers), and :meth:`reconcile_blobs` once per
        ``blob_grace_s``; None when it was not due."""
        lock = keys.blobs_sweep_lock()
        got = self._call(
            lambda: self.client.set(lock, "1", nx=True, px=max(int(interval_s * 1000), 1))
        )
        if not got:
            return None
        looked, deleted = self.sweep_blobs()
        if looked >= SWEEP_BATCH:
            # More is due: let the next tick (of any worker) go on at once.
            self._call(lambda: self.client.delete(lock))
        reconcile = keys.blobs_reconcile_lock()
        if self._call(lambda: self.client.set(reconcile, "1", nx=True, ex=self.blob_grace_s)):
            deleted += self.reconcile_blobs()
            if isinstance(self.blobs, LocalBlobStore):  # temporary files of killed writers
                self.blobs.sweep_temp(older_than_s=self.blob_grace_s)
        if deleted:
            log.info("blob sweep: %d prefixes looked at, %d objects deleted", looked, deleted)
        return looked, deleted
