"""What every part of the store shares: the Redis client, the retry wrapper, the scripts.

:class:`StoreBase` is the base of each resource's part of :class:`service.store.Store`
(:mod:`~service.store.apikeys`, :mod:`~service.store.submissions`, ...); it holds the client,
turns Redis' connection errors into :class:`StoreUnavailable`, and runs the Lua scripts of
:mod:`service.store.scripts` by name.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from service import keys
from service.blobs import BlobStore, BlobUnavailable, open_blob_store, scratch_dir
from service.store import codec, scripts
from service.store.records import BoardDeps, PageRead, StoreUnavailable, decode

if TYPE_CHECKING:
    from service.settings import Settings
    from service.store.records import ApiKeyRecord, SubmissionRecord

__all__ = ["StoreBase", "remember"]

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Entries kept in a store's memo of key ids and of the dependencies of cached pages (a hint
#: only: a wrong or missing entry costs a round trip or a cache miss, never a wrong answer).
_MEMO_SIZE = 4096


def remember(memo: dict[str, T], key: str, value: T) -> None:
    """Set ``memo[key]``, emptying the memo first when it is full (a memo of hints)."""
    if len(memo) >= _MEMO_SIZE and key not in memo:
        memo.clear()
    memo[key] = value


class StoreBase:
    """The Redis client and scripts that every part of :class:`service.store.Store` uses.

    Every method raises :class:`StoreUnavailable` when Redis cannot be reached or does not
    answer within the client's socket timeout.
    """

    encode_array = staticmethod(codec.encode_array)
    decode_array = staticmethod(codec.decode_array)

    def __init__(
        self,
        client: redis.Redis,
        *,
        retention_s: int = 7 * 24 * 3600,
        blobs: BlobStore | None = None,
        scratch: Path | None = None,
        blob_grace_s: int = 3600,
    ) -> None:
        self.client = client
        #: Seconds raw arrays are kept after a job ends (results stay); 0 deletes them at once.
        self.retention_s = int(retention_s)
        if blobs is None or scratch is None:
            from service.settings import Settings

            defaults = Settings()
            blobs = blobs if blobs is not None else open_blob_store(defaults)
            scratch = scratch if scratch is not None else scratch_dir(defaults)
        #: Where the arrays are (Redis keeps their manifests): see :mod:`service.blobs`.
        self.blobs: BlobStore = blobs
        #: Local directory of downloaded arrays (removed once mapped).
        self.scratch: Path = Path(scratch)
        #: Blobs that Redis never recorded are removed this long after their write began.
        self.blob_grace_s = int(blob_grace_s)
        self._scripts = {
            name: client.register_script(scripts.source(name)) for name in scripts.names()
        }
        # Hints of the one-round-trip reads (see _read_with_key and leaderboard_cached); each
        # process has its own, and each hint is checked in Redis by the script it feeds.
        self._key_ids: dict[str, str] = {}
        self._page_deps: dict[str, BoardDeps] = {}

    @classmethod
    def from_url(cls, url: str, settings: Settings | None = None) -> Self:
        """A store on ``url`` with the socket timeouts of ``settings`` and one quick retry."""
        timeout = settings.redis_socket_timeout_s if settings is not None else 3.0
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=min(timeout, 1.0),
            # One quick retry of a refused/reset connection; a timeout is not retried, so a
            # hung server costs one socket timeout, not several.
            retry=Retry(
                ExponentialBackoff(cap=0.2, base=0.05), 1, supported_errors=(redis.ConnectionError,)
            ),
            health_check_interval=30,
        )
        if settings is None:
            return cls(client)
        return cls(
            client,
            retention_s=settings.raw_retention_s,
            blobs=open_blob_store(settings),
            scratch=scratch_dir(settings),
            blob_grace_s=settings.blob_grace_s,
        )

    def close(self) -> None:
        self.client.close()

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"Redis unavailable: {exc}") from exc
        except redis.BusyLoadingError as exc:  # pragma: no cover - depends on server timing
            raise StoreUnavailable(f"Redis is loading its data: {exc}") from exc
        except BlobUnavailable as exc:
            # As transient as a Redis outage: the API answers 503, a worker retries the job.
            raise StoreUnavailable(f"blob store unavailable: {exc}") from exc

    def ping(self) -> bool:
        """True when Redis answers; raises :class:`StoreUnavailable` otherwise."""
        return bool(self._call(self.client.ping))

    # --- blobs ---------------------------------------------------------------------------------

    def ping_blobs(self) -> bool:
        """True when the blob store answers; raises :class:`StoreUnavailable` otherwise (a
        worker asks before it claims a job, so that an outage does not use up attempts)."""
        return self._call(self.blobs.ping)

    def track_blobs(self, prefix: str, due: float) -> None:
        """Record the blob prefix ``prefix`` (``submissions/<id>/``) in ``blobs:due`` with the
        time ``due`` at which the sweep looks at it: called before its objects are written, so
        that none can be orphaned for good (see :mod:`service.store.blobsweep`)."""
        self._call(lambda: self.client.zadd(keys.blobs_due(), {prefix: due}))

    def discard_blobs(self, prefix: str, blob_keys: Iterable[str], *, forget: bool = False) -> bool:
        """Remove the objects ``blob_keys`` (a best effort: False when the blob store is down,
        the sweep then removes them later). With ``forget`` (Redis no longer records them),
        everything under ``prefix`` goes too and the prefix leaves ``blobs:due``."""
        try:
            for key in blob_keys:
                self.blobs.delete(key)
            if forget:
                self.blobs.delete_prefix(prefix)
        except BlobUnavailable as exc:
            log.warning("blobs under %s left to the sweep: %s", prefix, exc)
            return False
        if forget:
            # Should Redis be down now, the sweep finds the prefix empty and removes the entry.
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                self.client.zrem(keys.blobs_due(), prefix)
        return True

    # --- the scripts of a submission ------------------------------------------------------------

    def _keys(self, sub_id: str) -> list[str]:
        """The KEYS every submission script starts with (see ``lua/_end_helpers.lua``)."""
        return [
            keys.submission(sub_id),
            keys.running(),
            keys.queued("cpu"),
            keys.queued("gpu"),
            keys.heartbeat(sub_id),
            keys.arrays(sub_id),
            keys.stats(),
        ]

    def _run(self, name: str, sub_id: str, args: list[Any], extra_keys: Iterable[str] = ()) -> Any:
        script = self._scripts[name]
        return self._call(lambda: script(keys=self._keys(sub_id) + list(extra_keys), args=args))

    def _cached_page(
        self,
        token: str,
        script: str,
        read_keys: list[str],
        *,
        rate_limit: int,
        window_s: int,
    ) -> PageRead:
        """Authenticate ``token``, count the request and look up a cached answer in one round
        trip: ``script`` is a page-read script (``admit()``, then with ``read_keys`` — empty
        when the page's dependencies are not known — the page if its stamp is current)."""
        key, wait, reply = self._read_with_key(
            token,
            script,
            read_keys,
            ["1" if read_keys else "0"],
            rate_limit=rate_limit,
            window_s=window_s,
        )
        if key is None or wait is not None:
            return PageRead(key, retry_after_s=wait)
        if decode(reply[0]) == "hit":
            return PageRead(key, body=reply[2], disposition=decode(reply[3]))
        return PageRead(key)

    def _indexed_records(
        self, index: str, key_of: Callable[[str], str], parse: Callable[[bytes], T]
    ) -> list[T]:
        """Every JSON record listed in the sorted set ``index`` (oldest first), read with one
        MGET of ``key_of(id)``; ids whose record is gone are skipped."""

        def read() -> list[T]:
            ids = [decode(i) for i in self.client.zrange(index, 0, -1)]
            if not ids:
                return []
            raws = self.client.mget([key_of(i) for i in ids])
            return [parse(r) for r in raws if isinstance(r, bytes)]

        return self._call(read)

    def _update_record(self, key: str, change: Callable[[bytes], Any]) -> Any | None:
        """Replace the JSON record at ``key`` by ``change(raw)`` (a record with ``to_json``),
        optimistically (WATCH, retried when it changed meanwhile); None when it is absent."""

        def write() -> Any | None:
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(key)
                        raw = pipe.get(key)
                        if raw is None:
                            return None
                        record = change(raw)
                        pipe.multi()
                        pipe.set(key, record.to_json())
                        pipe.execute()
                        return record
                    except redis.WatchError:
                        continue

        return self._call(write)

    def _expired(self, running: str, heartbeat: Callable[[str], str]) -> list[str]:
        """The members of the ``running`` set whose ``heartbeat(id)`` key has expired."""

        def read() -> list[str]:
            ids = [decode(i) for i in self.client.zrange(running, 0, -1)]
            if not ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            for item in ids:
                pipe.exists(heartbeat(item))
            return [i for i, alive in zip(ids, pipe.execute(), strict=True) if not alive]

        return self._call(read)

    if TYPE_CHECKING:
        # Methods one part of the store calls on another (each defined in its own part).
        get_submission: Callable[[str], SubmissionRecord | None]
        leaderboard_forget: Callable[[str, str, Iterable[str]], None]
        _read_with_key: Callable[..., tuple[ApiKeyRecord | None, int | None, list[Any]]]
