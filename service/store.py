"""The Redis store: every read and write of the service and its workers goes through here.

Keys are those of :mod:`service.keys`. State changes of a submission (start, progress, finish,
fail, cancel, requeue) are Lua scripts, so each is atomic and conditional on the current status:
a worker never overwrites a job that was cancelled, deleted or finished elsewhere, and the
result document is written together with the ``succeeded`` status (one script, one
transaction). Arrays are stored as ``np.save`` bytes cut into chunks of at most
:data:`CHUNK_BYTES`, zlib-compressed where that pays (see :meth:`Store.encode_array`) — never
as JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import math
import secrets
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from service import keys

if TYPE_CHECKING:
    from service.settings import Settings

__all__ = [
    "CHUNK_BYTES",
    "TERMINAL",
    "ApiKeyRecord",
    "IdempotencyConflict",
    "Store",
    "StoreUnavailable",
    "SubmissionRecord",
    "now_iso",
]

#: Largest raw (uncompressed) piece of an array stored in one Redis value.
CHUNK_BYTES = 16 << 20
#: zlib level: 1 compresses float data nearly as well as 6 at several times the speed.
ZLIB_LEVEL = 1
#: ``np.save`` bytes in chunks; each chunk is tagged ``z`` (zlib) or ``r`` (raw).
CODEC = "npy+zlib"
#: A chunk is compressed when a zlib sample of its first SAMPLE_BYTES shrinks below this
#: ratio; random float64 data (most predictions) does not (~0.96), and compressing it
#: anyway would cost ~1 s per 24 MB for nothing.
COMPRESS_BELOW = 0.85
SAMPLE_BYTES = 256 << 10

#: Name of the admin key registered from ``UQEVAL_ADMIN_KEY``.
ENV_ADMIN_NAME = "admin (environment)"

Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})

T = TypeVar("T")


class StoreUnavailable(Exception):
    """Redis is unreachable or did not answer in time (the API answers 503)."""


class IdempotencyConflict(Exception):
    """The Idempotency-Key was used before with a different request body (the API answers 409)."""


def now_iso() -> str:
    """The current UTC time as ISO-8601 with milliseconds and a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@dataclass(frozen=True)
class ApiKeyRecord:
    """One API key as stored (the token itself is never stored, only its SHA-256)."""

    key_id: str
    name: str
    role: Literal["admin", "submitter"]
    created_at: str
    revoked: bool


@dataclass
class SubmissionRecord:
    """The state of one submission (its arrays and result are stored beside it)."""

    id: str
    owner: str
    status: Status
    progress: float
    created_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    error: str | None
    model_name: str
    metadata: dict[str, Any]
    kind: str
    n: int
    queue: str
    input_hash: str
    analyses: dict[str, Any]
    cancel_requested: bool = False
    #: Creation time in unix seconds (the sort key of the indexes).
    created_ts: float = field(default=0.0, repr=False)

    def to_hash(self) -> dict[str, str]:
        """The Redis hash fields (None fields are left out)."""
        out = {
            "id": self.id,
            "owner": self.owner,
            "status": self.status,
            "progress": repr(float(self.progress)),
            "created_at": self.created_at,
            "attempts": str(int(self.attempts)),
            "model_name": self.model_name,
            "metadata": json.dumps(self.metadata, separators=(",", ":")),
            "kind": self.kind,
            "n": str(int(self.n)),
            "queue": self.queue,
            "input_hash": self.input_hash,
            "analyses": json.dumps(self.analyses, separators=(",", ":")),
            "cancel_requested": "1" if self.cancel_requested else "0",
            "created_ts": repr(float(self.created_ts)),
        }
        for name in ("started_at", "finished_at", "error"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_hash(cls, raw: Mapping[Any, Any]) -> SubmissionRecord:
        h = {_decode(k): _decode(v) for k, v in raw.items()}
        return cls(
            id=h["id"],
            owner=h["owner"],
            status=h["status"],  # type: ignore[arg-type]
            progress=float(h.get("progress", "0")),
            created_at=h["created_at"],
            started_at=h.get("started_at"),
            finished_at=h.get("finished_at"),
            attempts=int(h.get("attempts", "0")),
            error=h.get("error"),
            model_name=h.get("model_name", ""),
            metadata=json.loads(h.get("metadata", "{}")),
            kind=h["kind"],
            n=int(h["n"]),
            queue=h.get("queue", "cpu"),
            input_hash=h.get("input_hash", ""),
            analyses=json.loads(h.get("analyses", "{}")),
            cancel_requested=h.get("cancel_requested") == "1",
            created_ts=float(h.get("created_ts", "0")),
        )


# --- Lua scripts: atomic, status-conditional transitions ---------------------------------------
# Common KEYS layout: 1 sub, 2 running, 3 queued:cpu, 4 queued:gpu, 5 hb, 6 arrays, 7 stats.

_END_HELPERS = """
local function leave_indexes()
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('DEL', KEYS[5])
end
local function expire_arrays(retention)
  retention = tonumber(retention)
  if retention <= 0 then redis.call('DEL', KEYS[6])
  else redis.call('EXPIRE', KEYS[6], retention) end
end
local function end_as(status, finished_at, retention)
  redis.call('HSET', KEYS[1], 'status', status, 'finished_at', finished_at)
  leave_indexes()
  expire_arrays(retention)
  redis.call('HINCRBY', KEYS[7], status, 1)
end
"""

# ARGV: id, now_iso, now_ts, token, hb_ttl_ms, max_attempts, retention_s, worker_name
_START = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status == 'succeeded' or status == 'failed' or status == 'cancelled' then
  return {'terminal', status}
end
if status == 'running' then
  local holder = redis.call('GET', KEYS[5])
  if holder and holder ~= ARGV[4] then return {'busy', holder} end
end
if redis.call('HGET', KEYS[1], 'cancel_requested') == '1' then
  end_as('cancelled', ARGV[2], ARGV[7])
  return {'terminal', 'cancelled'}
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'error',
    'the job was started ' .. attempts .. ' times and its worker was lost each time ' ..
    '(max_attempts=' .. ARGV[6] .. '); resubmit it, with fewer points or bootstrap ' ..
    'resamples if the workers run out of memory')
  end_as('failed', ARGV[2], ARGV[7])
  return {'terminal', 'failed'}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'status', 'running', 'started_at', ARGV[2],
           'attempts', attempts, 'progress', '0.0', 'worker', ARGV[8])
redis.call('HDEL', KEYS[1], 'finished_at', 'error')
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
return {'started', tostring(attempts)}
"""
)

# KEYS as common + 8 result, 9 durations:{queue}
# ARGV: id, now_iso, result_json, retention_s, duration_s, bucket bounds...
_FINISH = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
redis.call('SET', KEYS[8], ARGV[3])
redis.call('HSET', KEYS[1], 'progress', '100.0')
redis.call('HDEL', KEYS[1], 'error')
end_as('succeeded', ARGV[2], ARGV[4])
local d = tonumber(ARGV[5])
for i = 6, #ARGV do
  if d <= tonumber(ARGV[i]) then redis.call('HINCRBY', KEYS[9], 'le:' .. ARGV[i], 1) end
end
redis.call('HINCRBY', KEYS[9], 'le:+Inf', 1)
redis.call('HINCRBY', KEYS[9], 'count', 1)
redis.call('HINCRBYFLOAT', KEYS[9], 'sum', ARGV[5])
return 'succeeded'
"""
)

# ARGV: id, now_iso, error, retention_s
_FAIL = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
redis.call('HSET', KEYS[1], 'error', ARGV[3])
end_as('failed', ARGV[2], ARGV[4])
return 'failed'
"""
)

# ARGV: id, now_iso, retention_s. Queued -> cancelled; running -> cancel_requested.
_CANCEL = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status == 'queued' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  end_as('cancelled', ARGV[2], ARGV[3])
  return 'cancelled'
end
if status == 'running' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  return 'cancel_requested'
end
return status
"""
)

# The worker stops at a checkpoint. ARGV: id, now_iso, retention_s
_MARK_CANCELLED = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' and status ~= 'queued' then return status or 'missing' end
end_as('cancelled', ARGV[2], ARGV[3])
return 'cancelled'
"""
)

# A running job without a heartbeat. KEYS as common + 8 resend.
# ARGV: id, now_iso, retention_s, max_attempts, ttl_s, now_ts
_REQUEUE = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'skip'
end
if redis.call('EXISTS', KEYS[5]) == 1 then return 'alive' end
if redis.call('HGET', KEYS[1], 'cancel_requested') == '1' then
  end_as('cancelled', ARGV[2], ARGV[3])
  return 'cancelled'
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'error',
    'the worker running this job stopped sending heartbeats (none for ' .. ARGV[5] ..
    ' s) on each of its ' .. attempts .. ' attempts (max_attempts=' .. ARGV[4] ..
    '); the batch may exhaust a worker\\'s memory or time limit: resubmit it smaller ' ..
    'or with fewer bootstrap resamples')
  end_as('failed', ARGV[2], ARGV[3])
  return 'failed'
end
local queue = redis.call('HGET', KEYS[1], 'queue')
local qkey = KEYS[3]
if queue == 'gpu' then qkey = KEYS[4] end
redis.call('HSET', KEYS[1], 'status', 'queued', 'progress', '0.0')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', qkey, redis.call('HGET', KEYS[1], 'created_ts'), ARGV[1])
redis.call('HINCRBY', KEYS[7], 'requeued', 1)
redis.call('ZADD', KEYS[8], ARGV[6], ARGV[1])
return 'requeued'
"""
)

# ARGV: id, token, hb_ttl_ms. Refreshes the heartbeat only for its holder (or when it lapsed
# while the job is still running). Returns {status, cancel_requested, holder}.
_HEARTBEAT = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', '0', ''} end
local holder = redis.call('GET', KEYS[5]) or ''
if status == 'running' and (holder == '' or holder == ARGV[2]) then
  redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[3])
  holder = ARGV[2]
end
return {status, redis.call('HGET', KEYS[1], 'cancel_requested') or '0', holder}
"""

# ARGV: id, progress
_PROGRESS = """
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
return 1
"""


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Store:
    """Typed access to the Redis data of uq-eval (see :mod:`service.keys`).

    Every method raises :class:`StoreUnavailable` when Redis cannot be reached or does not
    answer within the client's socket timeout.
    """

    def __init__(self, client: redis.Redis, *, retention_s: int = 7 * 24 * 3600) -> None:
        self.client = client
        #: Seconds raw arrays are kept after a job ends (results stay); 0 deletes them at once.
        self.retention_s = int(retention_s)
        self._scripts = {
            name: client.register_script(src)
            for name, src in {
                "start": _START,
                "finish": _FINISH,
                "fail": _FAIL,
                "cancel": _CANCEL,
                "mark_cancelled": _MARK_CANCELLED,
                "requeue": _REQUEUE,
                "heartbeat": _HEARTBEAT,
                "progress": _PROGRESS,
            }.items()
        }

    @classmethod
    def from_url(cls, url: str, settings: Settings | None = None) -> Store:
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
        return cls(client, retention_s=settings.raw_retention_s if settings else 7 * 24 * 3600)

    def close(self) -> None:
        self.client.close()

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"Redis unavailable: {exc}") from exc
        except redis.BusyLoadingError as exc:  # pragma: no cover - depends on server timing
            raise StoreUnavailable(f"Redis is loading its data: {exc}") from exc

    def ping(self) -> bool:
        """True when Redis answers; raises :class:`StoreUnavailable` otherwise."""
        return bool(self._call(self.client.ping))

    # --- API keys ------------------------------------------------------------------------------

    def _put_api_key(
        self, name: str, role: Literal["admin", "submitter"], token: str
    ) -> ApiKeyRecord:
        record = ApiKeyRecord(
            key_id="key_" + secrets.token_hex(8),
            name=name,
            role=role,
            created_at=now_iso(),
            revoked=False,
        )
        digest = sha256_hex(token)

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(
                keys.api_key(record.key_id),
                mapping={
                    "key_id": record.key_id,
                    "name": record.name,
                    "role": record.role,
                    "created_at": record.created_at,
                    "revoked": "0",
                    "hash": digest,
                },
            )
            pipe.set(keys.api_key_hash(digest), record.key_id)
            pipe.zadd(keys.api_keys(), {record.key_id: time.time()})
            pipe.execute()

        self._call(write)
        return record

    def create_api_key(
        self, name: str, role: Literal["admin", "submitter"] = "submitter"
    ) -> tuple[ApiKeyRecord, str]:
        """A new key: its record and the plaintext token (shown once, stored only hashed)."""
        if role not in ("admin", "submitter"):
            raise ValueError(f"role must be 'admin' or 'submitter'; found {role!r}")
        token = "uqe_" + secrets.token_urlsafe(32)
        return self._put_api_key(name, role, token), token

    @staticmethod
    def _key_record(raw: Mapping[Any, Any]) -> tuple[ApiKeyRecord, str]:
        h = {_decode(k): _decode(v) for k, v in raw.items()}
        role: Literal["admin", "submitter"] = "admin" if h["role"] == "admin" else "submitter"
        rec = ApiKeyRecord(
            key_id=h["key_id"],
            name=h["name"],
            role=role,
            created_at=h["created_at"],
            revoked=h.get("revoked") == "1",
        )
        return rec, h.get("hash", "")

    def authenticate(self, token: str) -> ApiKeyRecord | None:
        """The live key whose SHA-256 matches ``token`` (compared in constant time), else None."""
        if not token:
            return None
        digest = sha256_hex(token)
        key_id = self._call(lambda: self.client.get(keys.api_key_hash(digest)))
        if key_id is None:
            return None
        raw = self._call(lambda: self.client.hgetall(keys.api_key(_decode(key_id))))
        if not raw:
            return None
        record, stored = self._key_record(raw)
        if not hmac.compare_digest(stored.encode(), digest.encode()) or record.revoked:
            return None
        return record

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.api_key(key_id)))
        return self._key_record(raw)[0] if raw else None

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first (revoked ones included, marked)."""

        def read() -> list[ApiKeyRecord]:
            ids = self.client.zrange(keys.api_keys(), 0, -1)
            pipe = self.client.pipeline(transaction=False)
            for key_id in ids:
                pipe.hgetall(keys.api_key(_decode(key_id)))
            return [self._key_record(raw)[0] for raw in pipe.execute() if raw]

        return self._call(read)

    def revoke_api_key(self, key_id: str) -> bool:
        """Mark the key revoked; False when no such key exists."""

        def write() -> bool:
            if not self.client.exists(keys.api_key(key_id)):
                return False
            self.client.hset(keys.api_key(key_id), "revoked", "1")
            return True

        return self._call(write)

    def ensure_admin_key(self, token: str | None) -> str | None:
        """Register the admin ``token`` from the environment, or generate one at first start.

        Returns the generated plaintext (to print once), else None: when ``token`` is given
        (registered if new) or when a key was generated before (by any process). A new
        environment key replaces the previous one: earlier environment admin keys are revoked,
        so rotating ``UQEVAL_ADMIN_KEY`` retires the old value.
        """
        if token:
            digest = sha256_hex(token)
            exists = self._call(lambda: self.client.exists(keys.api_key_hash(digest)))
            if not exists:
                current = self._put_api_key(ENV_ADMIN_NAME, "admin", token)
                for record in self.list_api_keys():
                    if (
                        record.name == ENV_ADMIN_NAME
                        and record.key_id != current.key_id
                        and not record.revoked
                    ):
                        self.revoke_api_key(record.key_id)
            return None
        claimed = self._call(lambda: self.client.set(keys.admin_generated(), now_iso(), nx=True))
        if not claimed:
            return None
        _, plaintext = self.create_api_key("admin (generated)", role="admin")
        return plaintext

    # --- submissions: create, read, list -------------------------------------------------------

    @staticmethod
    def encode_array(array: np.ndarray[Any, Any]) -> tuple[dict[str, Any], list[bytes]]:
        """``np.save`` bytes of ``array`` (no pickle) cut into CHUNK_BYTES pieces; each piece
        is zlib-compressed (tag ``z``) when a sample of it compresses below COMPRESS_BELOW,
        else kept as is (tag ``r``)."""
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
        raw = buf.getbuffer()
        chunks = []
        for i in range(0, max(len(raw), 1), CHUNK_BYTES):
            piece = raw[i : i + CHUNK_BYTES]
            sample = piece[:SAMPLE_BYTES]
            if len(zlib.compress(sample, ZLIB_LEVEL)) < COMPRESS_BELOW * max(len(sample), 1):
                chunks.append(b"z" + zlib.compress(piece, ZLIB_LEVEL))
            else:
                chunks.append(b"r" + piece)
        meta = {
            "dtype": str(array.dtype),
            "shape": list(array.shape),
            "chunks": len(chunks),
            "codec": CODEC,
        }
        return meta, chunks

    @staticmethod
    def decode_array(meta: Mapping[str, Any], chunks: Iterable[Any]) -> np.ndarray[Any, Any]:
        """Inverse of :meth:`encode_array` (loaded with ``allow_pickle=False``)."""
        if meta.get("codec") != CODEC:
            raise ValueError(f"unknown array codec {meta.get('codec')!r}")
        parts: list[bytes | memoryview] = []
        for chunk in chunks:
            view = memoryview(chunk)
            tag, body = bytes(view[:1]), view[1:]
            if tag == b"z":
                parts.append(zlib.decompress(body))
            elif tag == b"r":
                parts.append(body)
            else:
                raise ValueError(f"unknown chunk tag {tag!r}")
        raw = b"".join(parts)
        out: np.ndarray[Any, Any] = np.load(io.BytesIO(raw), allow_pickle=False)
        return out

    def create_submission(
        self,
        record: SubmissionRecord,
        arrays: Mapping[str, np.ndarray[Any, Any]],
        *,
        idempotency_key: str | None = None,
        body_hash: str = "",
        deadline: float | None = None,
    ) -> tuple[SubmissionRecord, bool]:
        """Store the record, its arrays, its indexes and the idempotency mapping atomically.

        With an ``idempotency_key`` already used by the same owner: returns the existing
        submission and False when ``body_hash`` matches, raises :class:`IdempotencyConflict`
        otherwise (a mapping to a deleted submission is replaced). ``deadline`` is a
        ``time.monotonic()`` value after which the write is abandoned (StoreUnavailable).
        """
        manifest: dict[str, Any] = {}
        blobs: dict[str, bytes] = {}
        for name, array in arrays.items():
            meta, chunks = self.encode_array(np.asarray(array))
            manifest[name] = meta
            for i, chunk in enumerate(chunks):
                blobs[f"{name}:{i}"] = chunk
        idem_key = (
            keys.idempotency(record.owner, sha256_hex(idempotency_key))
            if idempotency_key is not None
            else None
        )
        record.created_ts = record.created_ts or time.time()

        def write(pipe: Any) -> tuple[SubmissionRecord, bool] | None:
            if deadline is not None and time.monotonic() > deadline:
                raise redis.TimeoutError("enqueue timeout exceeded while storing")
            if idem_key is not None:
                prior = pipe.get(idem_key)
                if prior is not None:
                    mapping = json.loads(prior)
                    existing_raw = pipe.hgetall(keys.submission(mapping["id"]))
                    if existing_raw:
                        if mapping["body_hash"] != body_hash:
                            raise IdempotencyConflict(
                                "Idempotency-Key was used before with a different request body"
                            )
                        return SubmissionRecord.from_hash(existing_raw), False
            pipe.multi()
            arr_key = keys.arrays(record.id)
            pipe.hset(arr_key, "manifest", json.dumps(manifest))
            # Large batches: several HSET calls keep each command below Redis' proto limits.
            for name, chunk in blobs.items():
                pipe.hset(arr_key, name, chunk)
            fields = record.to_hash()
            if idem_key is not None:
                fields["idem_key"] = idem_key
            pipe.hset(keys.submission(record.id), mapping=fields)
            pipe.zadd(keys.submissions(), {record.id: record.created_ts})
            pipe.zadd(keys.owner_submissions(record.owner), {record.id: record.created_ts})
            pipe.zadd(keys.queued(record.queue), {record.id: record.created_ts})
            pipe.zadd(keys.pending(), {record.id: time.time()})
            if idem_key is not None:
                pipe.set(idem_key, json.dumps({"id": record.id, "body_hash": body_hash}), ex=86400)
            return None

        watches = [idem_key] if idem_key is not None else []

        def run() -> tuple[SubmissionRecord, bool]:
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        if watches:
                            pipe.watch(*watches)
                        replay = write(pipe)
                        if replay is not None:
                            pipe.reset()
                            return replay
                        pipe.execute()
                        return record, True
                    except redis.WatchError:
                        continue

        return self._call(run)

    def get_submission(self, sub_id: str) -> SubmissionRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.submission(sub_id)))
        return SubmissionRecord.from_hash(raw) if raw else None

    def list_submissions(
        self, owner: str | None, status: str | None, offset: int, limit: int
    ) -> tuple[list[SubmissionRecord], int]:
        """One page of submissions, newest first, and the total matching count.

        ``owner=None`` lists every owner's; ``status`` filters on the current status.
        """
        index = keys.submissions() if owner is None else keys.owner_submissions(owner)
        offset = max(int(offset), 0)
        limit = max(int(limit), 0)

        def fetch(ids: list[Any]) -> list[SubmissionRecord]:
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.hgetall(keys.submission(_decode(sub_id)))
            return [SubmissionRecord.from_hash(raw) for raw in pipe.execute() if raw]

        def read() -> tuple[list[SubmissionRecord], int]:
            if status is None:
                total = int(self.client.zcard(index))
                if limit == 0:
                    return [], total
                ids = self.client.zrevrange(index, offset, offset + limit - 1)
                return fetch(ids), total
            ids = self.client.zrevrange(index, 0, -1)
            matching: list[str] = []
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                pipe = self.client.pipeline(transaction=False)
                for sub_id in part:
                    pipe.hget(keys.submission(_decode(sub_id)), "status")
                for sub_id, st in zip(part, pipe.execute(), strict=True):
                    if st is not None and _decode(st) == status:
                        matching.append(_decode(sub_id))
            page = matching[offset : offset + limit]
            return fetch([s.encode() for s in page]), len(matching)

        return self._call(read)

    def get_result(self, sub_id: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.result(sub_id)))
        return None if raw is None else json.loads(raw)

    def load_arrays(self, sub_id: str) -> dict[str, np.ndarray[Any, Any]] | None:
        """The stored arrays of a submission; None once deleted or past their retention."""

        def read() -> dict[str, np.ndarray[Any, Any]] | None:
            arr_key = keys.arrays(sub_id)
            manifest_raw = self.client.hget(arr_key, "manifest")
            if manifest_raw is None:
                return None
            manifest = json.loads(manifest_raw)
            out: dict[str, np.ndarray[Any, Any]] = {}
            for name, meta in manifest.items():
                fields = [f"{name}:{i}" for i in range(int(meta["chunks"]))]
                chunks = self.client.hmget(arr_key, fields)
                if any(c is None for c in chunks):
                    return None
                out[name] = self.decode_array(meta, chunks)
            return out

        return self._call(read)

    def delete_submission(self, sub_id: str) -> bool:
        """Remove the record, arrays, result, heartbeat, every index entry and the
        idempotency mapping (its key may then be used again)."""

        def write() -> bool:
            owner, idem_key = self.client.hmget(keys.submission(sub_id), ["owner", "idem_key"])
            if owner is None:
                return False
            pipe = self.client.pipeline(transaction=True)
            if idem_key is not None:
                mapping = self.client.get(_decode(idem_key))
                if mapping is not None and json.loads(mapping).get("id") == sub_id:
                    pipe.delete(_decode(idem_key))
            pipe.delete(
                keys.submission(sub_id),
                keys.arrays(sub_id),
                keys.result(sub_id),
                keys.heartbeat(sub_id),
            )
            pipe.zrem(keys.submissions(), sub_id)
            pipe.zrem(keys.owner_submissions(_decode(owner)), sub_id)
            pipe.zrem(keys.running(), sub_id)
            pipe.zrem(keys.pending(), sub_id)
            pipe.zrem(keys.resend(), sub_id)
            for queue in keys.QUEUES:
                pipe.zrem(keys.queued(queue), sub_id)
            pipe.execute()
            return True

        return self._call(write)

    def forget_idempotency(self, owner: str, idempotency_key: str) -> None:
        """Drop an idempotency mapping (rollback of a submission that was never enqueued)."""
        self._call(lambda: self.client.delete(keys.idempotency(owner, sha256_hex(idempotency_key))))

    def queue_position(self, sub_id: str) -> int | None:
        """0-based position among the queued jobs of its queue; None if not queued."""

        def read() -> int | None:
            queue = self.client.hget(keys.submission(sub_id), "queue")
            if queue is None:
                return None
            rank: Any = self.client.zrank(keys.queued(_decode(queue)), sub_id)
            return None if rank is None else int(rank)

        return self._call(read)

    def queue_depths(self) -> dict[str, int]:
        """Number of queued (not yet running) jobs per queue."""

        def read() -> dict[str, int]:
            pipe = self.client.pipeline(transaction=False)
            for queue in keys.QUEUES:
                pipe.zcard(keys.queued(queue))
            return {q: int(c) for q, c in zip(keys.QUEUES, pipe.execute(), strict=True)}

        return self._call(read)

    def running_count(self) -> int:
        count: Any = self._call(lambda: self.client.zcard(keys.running()))
        return int(count)

    # --- state transitions -----------------------------------------------------------------

    def _keys(self, sub_id: str) -> list[str]:
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

    def cancel_submission(self, sub_id: str) -> SubmissionRecord | None:
        """Queued -> cancelled at once; running -> cancel_requested (the worker stops at its
        next checkpoint and marks it cancelled); terminal -> unchanged. None if unknown."""
        self._run("cancel", sub_id, [sub_id, now_iso(), self.retention_s])
        return self.get_submission(sub_id)

    def mark_running(
        self,
        sub_id: str,
        token: str,
        hb_ttl_s: float,
        max_attempts: int,
        worker_name: str = "",
    ) -> tuple[str, str]:
        """Claim a job for the task delivery ``token`` (the Celery task id) on ``worker_name``.

        Returns ``("started", attempt)`` — also when the same token held it (a retried or
        re-delivered task whose earlier run is gone); ``("busy", holder)`` when another token
        holds a live heartbeat on it; ``("terminal", status)`` when it already ended (a
        re-delivered task), was cancelled, or has used ``max_attempts`` (then failed with the
        reason); or ``("missing", "")`` when it was deleted.
        """
        out = self._run(
            "start",
            sub_id,
            [
                sub_id,
                now_iso(),
                time.time(),
                token,
                max(int(hb_ttl_s * 1000), 1),
                max_attempts,
                self.retention_s,
                worker_name,
            ],
        )
        return _decode(out[0]), _decode(out[1])

    def heartbeat(self, sub_id: str, token: str, hb_ttl_s: float) -> tuple[str, bool, bool]:
        """Refresh the heartbeat of the delivery ``token``.

        Returns (status, cancel_requested, held): ``held`` is False when the job is no longer
        running under ``token`` (re-queued after its heartbeat lapsed, claimed by another
        delivery, ended or deleted) — the computation should then stop without writing.
        """
        out = self._run("heartbeat", sub_id, [sub_id, token, max(int(hb_ttl_s * 1000), 1)])
        status = _decode(out[0])
        return status, _decode(out[1]) == "1", status == "running" and _decode(out[2]) == token

    def set_progress(self, sub_id: str, progress: float) -> bool:
        """Write the progress (0..100) of a running job; False if it is no longer running."""
        value = repr(float(min(max(progress, 0.0), 100.0)))
        return bool(self._run("progress", sub_id, [sub_id, value]))

    def finish(
        self, sub_id: str, result: Mapping[str, Any], duration_s: float, queue: str = "cpu"
    ) -> str:
        """Write the result document and the ``succeeded`` status in one script.

        Only a queued or running job is finished; returns "succeeded", or the status that
        prevented it ("cancelled", "failed", "succeeded" for a duplicate, "missing").
        """
        doc = json.dumps(result, allow_nan=False, separators=(",", ":"))
        out = self._run(
            "finish",
            sub_id,
            [
                sub_id,
                now_iso(),
                doc,
                self.retention_s,
                repr(float(duration_s)),
                *[repr(b) for b in keys.DURATION_BUCKETS],
            ],
            [keys.result(sub_id), keys.durations(queue)],
        )
        return _decode(out)

    def fail(self, sub_id: str, error: str) -> str:
        """Mark a queued or running job failed with ``error`` (a reason a user can act on)."""
        return _decode(self._run("fail", sub_id, [sub_id, now_iso(), error, self.retention_s]))

    def mark_cancelled(self, sub_id: str) -> str:
        """The worker stopped a job at a checkpoint after a cancel request."""
        return _decode(self._run("mark_cancelled", sub_id, [sub_id, now_iso(), self.retention_s]))

    def orphaned(self) -> list[str]:
        """Ids of running jobs whose heartbeat has expired."""

        def read() -> list[str]:
            ids = [_decode(i) for i in self.client.zrange(keys.running(), 0, -1)]
            if not ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.exists(keys.heartbeat(sub_id))
            return [s for s, alive in zip(ids, pipe.execute(), strict=True) if not alive]

        return self._call(read)

    def requeue_orphan(self, sub_id: str, max_attempts: int, hb_ttl_s: float) -> str:
        """Re-queue a running job without heartbeat, or fail it once it used ``max_attempts``.

        Returns "requeued", "failed", "cancelled" (a cancel was requested), "alive" (the
        heartbeat came back) or "skip" (no longer running).
        """
        return _decode(
            self._run(
                "requeue",
                sub_id,
                [sub_id, now_iso(), self.retention_s, max_attempts, f"{hb_ttl_s:g}", time.time()],
                [keys.resend()],
            )
        )

    def mark_enqueued(self, sub_id: str) -> None:
        """The task message of a new submission was published (see :meth:`stale_pending`)."""
        self._call(lambda: self.client.zrem(keys.pending(), sub_id))

    def stale_pending(self, older_than_s: float) -> list[str]:
        """Submissions stored more than ``older_than_s`` ago whose task was never published.

        Only a crash between storing and enqueueing leaves one; the reaper deletes them,
        finishing the rollback the submitting process could not do.
        """
        cutoff = time.time() - older_than_s
        ids = self._call(lambda: self.client.zrangebyscore(keys.pending(), "-inf", cutoff))
        return [_decode(i) for i in ids]

    def to_resend(self) -> list[str]:
        """Re-queued submissions whose task message is still to be published."""
        return [_decode(i) for i in self._call(lambda: self.client.zrange(keys.resend(), 0, -1))]

    def mark_resent(self, sub_id: str) -> None:
        self._call(lambda: self.client.zrem(keys.resend(), sub_id))

    # --- workers and statistics --------------------------------------------------------------

    def register_worker(self, name: str, info: Mapping[str, Any], ttl_s: float) -> None:
        """Announce a live worker (called periodically); it counts as live for ``ttl_s``."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.worker(name), json.dumps(dict(info)), px=max(int(ttl_s * 1000), 1))
            pipe.zadd(keys.workers(), {name: time.time() + ttl_s})
            pipe.execute()

        self._call(write)

    def unregister_worker(self, name: str) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.worker(name))
            pipe.zrem(keys.workers(), name)
            pipe.execute()

        self._call(write)

    def live_workers(self) -> list[str]:
        """Names of workers seen within their announced time-to-live."""

        def read() -> list[str]:
            now = time.time()
            self.client.zremrangebyscore(keys.workers(), "-inf", now)
            return [_decode(w) for w in self.client.zrange(keys.workers(), 0, -1)]

        return self._call(read)

    def worker_info(self, name: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.worker(name)))
        return None if raw is None else json.loads(raw)

    def gpu_worker_alive(self) -> bool:
        """True when a live worker consumes the ``gpu`` queue."""
        for name in self.live_workers():
            info = self.worker_info(name)
            if info is not None and "gpu" in info.get("queues", []):
                return True
        return False

    def job_stats(self) -> dict[str, Any]:
        """Counters for /metrics.

        ``{"succeeded", "failed", "cancelled", "requeued": int, "durations": {queue:
        {"buckets": [[le, cumulative count], ...] (le = +inf last), "sum": s, "count": n}}}``.
        """

        def read() -> dict[str, Any]:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.stats())
            for queue in keys.QUEUES:
                pipe.hgetall(keys.durations(queue))
            counters, *hists = pipe.execute()
            c = {_decode(k): int(v) for k, v in counters.items()}
            out: dict[str, Any] = {
                name: c.get(name, 0) for name in ("succeeded", "failed", "cancelled", "requeued")
            }
            durations: dict[str, Any] = {}
            for queue, raw in zip(keys.QUEUES, hists, strict=True):
                h = {_decode(k): _decode(v) for k, v in raw.items()}
                buckets: list[list[float]] = [
                    [b, int(h.get(f"le:{b!r}", 0))] for b in keys.DURATION_BUCKETS
                ]
                buckets.append([math.inf, int(h.get("le:+Inf", 0))])
                durations[queue] = {
                    "buckets": buckets,
                    "sum": float(h.get("sum", 0.0)),
                    "count": int(h.get("count", 0)),
                }
            out["durations"] = durations
            return out

        return self._call(read)
