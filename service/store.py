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

import contextlib
import dataclasses
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
    "BenchmarkRecord",
    "BoardDeps",
    "BoardSnapshot",
    "IdempotencyConflict",
    "PageRead",
    "QuotaExceeded",
    "RenderedPage",
    "Store",
    "StoreUnavailable",
    "SubmissionRead",
    "SubmissionRecord",
    "TeamRecord",
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


class QuotaExceeded(Exception):
    """The team used its submission quota on the benchmark (the API answers 429)."""

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        #: Seconds until the per-day quota frees a slot (None: the total quota is spent).
        self.retry_after_s = retry_after_s


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
    #: The team of a submitter key (None: an admin key, or a key made before teams existed,
    #: which then sees only its own submissions).
    team: str | None = None


@dataclass(frozen=True)
class TeamRecord:
    """A team: its submitter keys share its submissions and its benchmark quotas."""

    team_id: str
    name: str
    created_at: str


@dataclass
class BenchmarkRecord:
    """A benchmark: metadata of its hidden targets and how its submissions are ranked.

    The targets are stored beside it as arrays (:meth:`Store.load_benchmark_arrays`) and are
    never part of this record: ``y`` (regression) or ``labels`` (classification, with optional
    ``soft_labels`` and ``ood``), and optionally ``groups``.
    """

    id: str
    name: str
    task: str
    description: str
    primary_metric: str
    #: Metrics computed for every submission and shown on the leaderboards.
    metrics: list[str]
    #: Which of a team's submissions ranks: its best value, or its latest submission.
    rule: Literal["best", "latest"]
    #: Prediction kinds accepted.
    kinds: list[str]
    n: int
    has_groups: bool
    #: Per-metric parameters, bootstrap options and seed of every submission's evaluation.
    params: dict[str, Any]
    bootstrap: dict[str, Any]
    seed: int
    quota_per_day: int | None
    quota_total: int | None
    baseline: str | None
    created_at: str
    updated_at: str
    #: Classification: the number of classes C a prediction must have (declared, or the
    #: width of the soft labels); None: any C above every label.
    n_classes: int | None = None
    #: Classification: the largest label (a prediction needs C > label_max). Internal: not
    #: part of the API's benchmark metadata.
    label_max: int | None = None
    #: Classification: whether soft labels / OOD flags are stored with the labels.
    has_soft_labels: bool = False
    has_ood: bool = False
    #: Classification: the estimators with their own boards (``"metric[estimator]"``) besides
    #: each metric's own; None: only the metrics' own estimators.
    estimators: list[str] | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> BenchmarkRecord:
        return cls(**json.loads(raw))

    @property
    def targets(self) -> frozenset[str]:
        """The optional classification targets held (``"ood"``, ``"soft_labels"``), as
        :meth:`uqcore.registry.MetricSpec.why_not` names them."""
        return frozenset(
            name
            for name, held in (("ood", self.has_ood), ("soft_labels", self.has_soft_labels))
            if held
        )

    def analyses(self, metrics: list[str], estimators: list[str] | None = None) -> dict[str, Any]:
        """The analyses document of a submission on this benchmark evaluating ``metrics``
        (and, for classification, the metric × estimator table of ``estimators``)."""
        out: dict[str, Any] = {
            "metrics": list(metrics),
            "params": {k: v for k, v in self.params.items() if k in metrics},
            "bootstrap": dict(self.bootstrap),
            "stability": {"enabled": False, "repeats": 100},
            "seed": self.seed,
        }
        if estimators:
            out["estimators"] = list(estimators)
        return out


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
    #: The submitting key's team (None for a key without a team).
    team: str | None = None
    #: "private": its team (and admins) only; "public": readable by every key, and ranked on
    #: its benchmark's leaderboards.
    visibility: Literal["private", "public"] = "private"
    #: The benchmark whose hidden targets it is evaluated against (None: inline targets).
    benchmark: str | None = None

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
            "visibility": self.visibility,
        }
        for name in ("started_at", "finished_at", "error", "team", "benchmark"):
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
            team=h.get("team"),
            visibility="public" if h.get("visibility") == "public" else "private",
            benchmark=h.get("benchmark"),
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
-- A job failed by the system does not count against its team's benchmark quota. The quota
-- zset is KEYS[k] (the caller read the submission's ``quota_key``, which never changes after
-- creation): a script touches only declared keys. Called before any other write of its
-- script, so that a caller passing the wrong key aborts the script with nothing written.
local function refund(k)
  local qk = redis.call('HGET', KEYS[1], 'quota_key')
  if not qk then return end
  if KEYS[k] ~= qk then
    error('the quota key of ' .. ARGV[1] .. ' was not passed as KEYS[' .. k .. ']')
  end
  redis.call('ZREM', KEYS[k], ARGV[1])
  redis.call('HSET', KEYS[1], 'quota_refunded', '1')
end
local function end_as(status, finished_at, retention)
  redis.call('HSET', KEYS[1], 'status', status, 'finished_at', finished_at)
  leave_indexes()
  -- A succeeded benchmark submission keeps its arrays (rank intervals, comparisons).
  if not (status == 'succeeded' and redis.call('HEXISTS', KEYS[1], 'benchmark') == 1) then
    expire_arrays(retention)
  end
  redis.call('HINCRBY', KEYS[7], status, 1)
end
"""

# KEYS as common + 8 the quota zset (when the submission has one).
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
  refund(8)
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

# The leaderboard helpers. Per metric, 6 keys from index k: subs zset, best zset, best map,
# latest zset, latest map, entry hash; KEYS[10] is the info hash (sub -> "team|created_ts").
_LEADERBOARD_HELPERS = """
local function created_of(sub)
  local info = redis.call('HGET', KEYS[10], sub)
  if not info then return nil end
  return tonumber(string.match(info, '|(.*)$'))
end
local function team_of(sub)
  local info = redis.call('HGET', KEYS[10], sub)
  if not info then return nil end
  return string.match(info, '^(.*)|')
end
-- Offer submission ``sub`` (team, created, badness) to the boards of the metric at key k.
local function offer(k, sub, team, created, badness)
  redis.call('ZADD', KEYS[k], badness, sub)
  local cur = redis.call('ZSCORE', KEYS[k + 1], team)
  if (not cur) or badness < tonumber(cur) then
    redis.call('ZADD', KEYS[k + 1], badness, team)
    redis.call('HSET', KEYS[k + 2], team, sub)
  end
  local cur_sub = redis.call('HGET', KEYS[k + 4], team)
  local newer = true
  if cur_sub and cur_sub ~= sub then
    local cur_created = created_of(cur_sub)
    newer = (not cur_created) or created >= cur_created
  end
  if newer then
    redis.call('ZADD', KEYS[k + 3], badness, team)
    redis.call('HSET', KEYS[k + 4], team, sub)
  end
end
"""

# A submission's board entries, as the finish script stores them in its hash (field
# ``ranking``, JSON: {"team", "created_ts", "entries": {board: [badness, entry_json]}}), and
# how they go on the boards and come off them. The board keys from KEYS[11] (6 per board) are
# those of the boards named ARGV[names_at], ARGV[names_at + 1], ...
_PUBLISH_HELPERS = """
local function publish(sub, names_at)
  local r = cjson.decode(redis.call('HGET', KEYS[1], 'ranking'))
  redis.call('HSET', KEYS[10], sub, r.team .. '|' .. r.created_ts)
  redis.call('HINCRBY', KEYS[10], '__version', 1)
  local m = 0
  for k = 11, #KEYS, 6 do
    local e = r.entries[ARGV[names_at + m]]
    if e then
      redis.call('HSET', KEYS[k + 5], sub, e[2])
      offer(k, sub, r.team, tonumber(r.created_ts), tonumber(e[1]))
    end
    m = m + 1
  end
end
-- Remove ``sub`` from the boards at KEYS[11..]; a team whose ranked submission it was gets its
-- next best (or latest) one.
local function forget(sub)
  local team = team_of(sub)
  if not team then return 0 end
  for k = 11, #KEYS, 6 do
    redis.call('ZREM', KEYS[k], sub)
    redis.call('HDEL', KEYS[k + 5], sub)
    if redis.call('HGET', KEYS[k + 2], team) == sub
       or redis.call('HGET', KEYS[k + 4], team) == sub then
      redis.call('ZREM', KEYS[k + 1], team)
      redis.call('HDEL', KEYS[k + 2], team)
      redis.call('ZREM', KEYS[k + 3], team)
      redis.call('HDEL', KEYS[k + 4], team)
      local members = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
      for i = 1, #members, 2 do
        local other = members[i]
        if other ~= sub and team_of(other) == team then
          offer(k, other, team, created_of(other), tonumber(members[i + 1]))
        end
      end
    end
  end
  redis.call('HDEL', KEYS[10], sub)
  redis.call('HINCRBY', KEYS[10], '__version', 1)
  return 1
end
"""

# KEYS as common + 8 result, 9 durations:{queue}, then with a ranking: 10 leaderboard info and
# 6 per board. ARGV: id, now_iso, result_json, retention_s, duration_s, n_buckets, bucket
# bounds..., ranking_json ("": not a benchmark submission), then the board names. The ranking
# is stored whatever the visibility; it goes on the boards only while the submission is public
# (read here, atomically with the status: a visibility change during the job is honoured).
_FINISH = (
    _END_HELPERS
    + _LEADERBOARD_HELPERS
    + _PUBLISH_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
redis.call('SET', KEYS[8], ARGV[3])
redis.call('HSET', KEYS[1], 'progress', '100.0')
redis.call('HDEL', KEYS[1], 'error')
end_as('succeeded', ARGV[2], ARGV[4])
local d = tonumber(ARGV[5])
local nb = tonumber(ARGV[6])
for i = 7, 6 + nb do
  if d <= tonumber(ARGV[i]) then redis.call('HINCRBY', KEYS[9], 'le:' .. ARGV[i], 1) end
end
redis.call('HINCRBY', KEYS[9], 'le:+Inf', 1)
redis.call('HINCRBY', KEYS[9], 'count', 1)
redis.call('HINCRBYFLOAT', KEYS[9], 'sum', ARGV[5])
local a = 7 + nb
if ARGV[a] ~= '' then
  redis.call('HSET', KEYS[1], 'ranking', ARGV[a])
  if #KEYS > 10 and redis.call('HGET', KEYS[1], 'visibility') == 'public' then
    publish(ARGV[1], a + 1)
  end
end
return 'succeeded'
"""
)

# Remove a submission from a benchmark's boards; a team whose ranked submission it was gets its
# next best (or latest) one. KEYS: 1-9 unused, 10 info, then 6 per metric. ARGV: id.
_LEADERBOARD_FORGET = _LEADERBOARD_HELPERS + _PUBLISH_HELPERS + "return forget(ARGV[1])\n"

# Change a submission's visibility; a succeeded benchmark submission enters (public) or leaves
# (private) its boards in the same script — if its benchmark still exists (a deleted one's
# boards are not made again). KEYS: 1 sub, 2-8 unused, 9 the benchmark record, then with a
# benchmark 10 info and 6 per board of its stored ranking. ARGV: id, visibility, the ranking the caller read
# ("": none), then the board names. Returns "missing", "retry" (the job finished since the
# caller read its ranking: read again), "unranked" (a succeeded benchmark submission without a
# stored ranking), "unchanged" or "changed".
_SET_VISIBILITY = (
    _LEADERBOARD_HELPERS
    + _PUBLISH_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
local stored = redis.call('HGET', KEYS[1], 'ranking') or ''
if stored ~= ARGV[3] then return 'retry' end
local current = redis.call('HGET', KEYS[1], 'visibility')
if current ~= 'public' then current = 'private' end
if current == ARGV[2] then return 'unchanged' end
local ranked = status == 'succeeded' and redis.call('HEXISTS', KEYS[1], 'benchmark') == 1
  and redis.call('EXISTS', KEYS[9]) == 1
if ranked and stored == '' then return 'unranked' end
redis.call('HSET', KEYS[1], 'visibility', ARGV[2])
if ranked and #KEYS > 10 then
  if ARGV[2] == 'public' then publish(ARGV[1], 4) else forget(ARGV[1]) end
end
return 'changed'
"""
)

# KEYS as common + 8 the quota zset (when the submission has one).
# ARGV: id, now_iso, error, retention_s, system ("1": failed by the system, quota refunded)
_FAIL = (
    _END_HELPERS
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
if ARGV[5] == '1' then refund(8) end
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

# A running job without a heartbeat. KEYS as common + 8 resend, 9 the quota zset (when the
# submission has one).
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
  refund(9)
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
# KEYS: a key record's copy under its token hash. Marks it revoked where it exists.
_REVOKE_COPY = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'revoked', '1')
end
return 1
"""

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


# Comparisons: claimed by one task delivery at a time, with a heartbeat, so that a comparison
# whose worker vanished is found (its heartbeat expired) and queued again, like a submission.
# KEYS: 1 cmp, 2 cmp heartbeat, 3 running comparisons. ARGV: id, now_iso, now_ts, token,
# hb_ttl_ms, max_attempts. Returns {outcome, detail} as _START does.
_CMP_START = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status == 'succeeded' or status == 'failed' or status == 'cancelled' then
  return {'terminal', status}
end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[4] then return {'busy', holder} end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'finished_at', ARGV[2], 'error',
    'the comparison was started ' .. attempts .. ' times and its worker was lost each time ' ..
    '(max_attempts=' .. ARGV[6] .. '); compare fewer submissions or with fewer resamples')
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return {'terminal', 'failed'}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'status', 'running', 'started_at', ARGV[2], 'attempts', attempts)
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {'started', tostring(attempts)}
"""

# KEYS: 1 cmp, 2 cmp heartbeat. ARGV: token, hb_ttl_ms. 1 while the delivery holds it, else 0.
_CMP_HEARTBEAT = """
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
"""

# A running comparison without a heartbeat. KEYS: 1 cmp, 2 cmp heartbeat, 3 running
# comparisons, 4 comparisons to resend. ARGV: id, now_iso, max_attempts, ttl_s, now_ts.
_CMP_REQUEUE = """
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 'skip'
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 'alive' end
redis.call('ZREM', KEYS[3], ARGV[1])
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'finished_at', ARGV[2], 'error',
    'the worker running this comparison stopped sending heartbeats (none for ' .. ARGV[4] ..
    ' s) on each of its ' .. attempts .. ' attempts (max_attempts=' .. ARGV[3] ..
    '); compare fewer submissions or with fewer resamples')
  return 'failed'
end
redis.call('HSET', KEYS[1], 'status', 'queued')
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
return 'requeued'
"""

# The claim of a rank job. KEYS: 1 the ranks lock. ARGV: token, ttl_ms, "take" (the job
# starts: the lock is its own from now on) or "keep" (refresh it while the job still holds it).
_RANKS_HOLD = """
if ARGV[3] == 'take' or redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# One page of a board. KEYS: 1 the board zset, 2 its team -> submission map, 3 the entry hash.
# ARGV: offset, limit. Returns {total} or {total, teams strictly better than the page's first,
# then per row: team, score, submission (false: none), entry JSON (false: none)}. Scores are
# Redis's own strings (%.17g: exact).
_LEADERBOARD_ROWS = """
local total = redis.call('ZCARD', KEYS[1])
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if limit <= 0 or offset >= total then return {total} end
local page = redis.call('ZRANGE', KEYS[1], offset, offset + limit - 1, 'WITHSCORES')
if #page == 0 then return {total} end
local out = {total, redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. page[2])}
for i = 1, #page, 2 do
  local sub = redis.call('HGET', KEYS[2], page[i])
  local entry = false
  if sub then entry = redis.call('HGET', KEYS[3], sub) end
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = sub
  out[#out + 1] = entry
end
return out
"""

# The stamp of a leaderboard answer: everything it shows besides immutable submission fields,
# and whether its board's rank job is claimed (a read that finds the rank document out of date
# and no claim queues the job: such a read must not be answered from the cache). KEYS from k:
# bench, leaderboard info, the board's rank document, its claim, [the baseline submission].
# :func:`_page_stamp` computes the same bytes in Python.
_PAGE_STAMP = """
local function page_stamp(k, bench)
  local parts = {redis.sha1hex(bench), redis.call('HGET', KEYS[k + 1], '__version') or '',
                 KEYS[k + 2]}
  local ranks = redis.call('GET', KEYS[k + 2])
  parts[4] = ranks and redis.sha1hex(ranks) or ''
  parts[5] = tostring(redis.call('EXISTS', KEYS[k + 3]))
  if #KEYS >= k + 4 then
    local b = redis.call('HMGET', KEYS[k + 4], 'status', 'visibility')
    parts[6] = KEYS[k + 4]
    parts[7] = (b[1] or '') .. '/' .. (b[2] or '')
  else
    parts[6] = ''
    parts[7] = ''
  end
  return table.concat(parts, '|')
end
"""

# Authentication and rate counting inside a read's script, so that a read costs one round trip
# (``_PAGE_READ``, ``_SUBMISSION_READ``): the key as :meth:`Store.authenticate` finds it and
# its request counted as :meth:`Store.hit_rate` counts it (live submitter keys only). KEYS:
# 1 apikey-hash:{digest}, 2 apikey:{id}, 3 the rate counter of {id} in the current window.
# ARGV: 1 {id} (the caller's guess of the key's id: KEYS 2 and 3 are its keys), 2 the digest,
# 3 the rate limit (0: none), 4 the rate counter's TTL (s). ``admit()`` returns 'ok' and the
# key record (HGETALL's flat list), 'rekey' and the key's id (call again with it: no other key
# was touched), 'limited' and the record, or 'denied'. A script returns {outcome, record} for
# any outcome but 'ok' (:meth:`Store._read_with_key`).
_ADMIT = """
local function admit()
  local id = redis.call('GET', KEYS[1])
  if not id then return 'denied' end
  if id ~= ARGV[1] then return 'rekey', id end
  local record = redis.call('HGETALL', KEYS[2])
  local f = {}
  for i = 1, #record, 2 do f[record[i]] = record[i + 1] end
  if f['hash'] ~= ARGV[2] or f['revoked'] == '1' then return 'denied' end
  local limit = tonumber(ARGV[3])
  if f['role'] ~= 'admin' and limit > 0 then
    local count = redis.call('INCR', KEYS[3])
    redis.call('EXPIRE', KEYS[3], ARGV[4])
    if count > limit then return 'limited', record end
  end
  return 'ok', record
end
"""

# The leaderboard route's read in one round trip: ``admit()`` (KEYS 1-3, ARGV 1-4), then the
# cached page if the state it shows is still the current one. KEYS when ARGV[5] == '1': 4 the
# cached page, 5 bench, 6 leaderboard info, 7 the board's rank document, 8 its claim, [9 the
# baseline submission]. ARGV: 5 '1': look the page up. Returns {'denied'}, {'rekey', id},
# {'limited', record}, {'miss', record} or {'hit', record, body, disposition}.
_PAGE_READ = (
    _ADMIT
    + _PAGE_STAMP
    + """
local outcome, record = admit()
if outcome ~= 'ok' then return {outcome, record} end
if ARGV[5] ~= '1' then return {'miss', record} end
local stored = redis.call('HGET', KEYS[4], 'stamp')
local bench = redis.call('GET', KEYS[5])
if not stored or not bench or stored ~= page_stamp(5, bench) then return {'miss', record} end
local page = redis.call('HMGET', KEYS[4], 'body', 'disposition')
return {'hit', record, page[1], page[2] or ''}
"""
)

# A submission read in one round trip (GET /v1/submissions/{id}, the polling hot path):
# ``admit()`` (KEYS 1-3, ARGV 1-4), then the submission's record, its result document once it
# succeeded, and its position in its queue while it is queued. KEYS: 4 sub:{id}, 5 its result,
# then the queued zsets of the queues named ARGV[6], ARGV[7], ... ARGV: 5 the submission id.
# Returns {'denied'}, {'rekey', id}, {'limited', record} or {'found', key record, submission
# record (false: none), result (false: none), queue position (false: none)}.
_SUBMISSION_READ = (
    _ADMIT
    + """
local outcome, record = admit()
if outcome ~= 'ok' then return {outcome, record} end
local sub = redis.call('HGETALL', KEYS[4])
if #sub == 0 then return {'found', record, false, false, false} end
local status, queue
for i = 1, #sub, 2 do
  if sub[i] == 'status' then status = sub[i + 1]
  elseif sub[i] == 'queue' then queue = sub[i + 1] end
end
local result, position = false, false
if status == 'succeeded' then
  result = redis.call('GET', KEYS[5]) or false
elseif status == 'queued' then
  for i = 6, #ARGV do
    if ARGV[i] == queue then
      local rank = redis.call('ZRANK', KEYS[i], ARGV[5])
      if rank then position = rank end
    end
  end
end
return {'found', record, sub, result, position}
"""
)


@dataclass(frozen=True)
class Ranking:
    """The leaderboard entries of a finished submission on its benchmark: per metric, the
    badness (the sort key: lower is better) and the entry shown (value and interval)."""

    benchmark: str
    team: str
    created_ts: float
    entries: dict[str, tuple[float, dict[str, Any]]]

    def to_json(self) -> str:
        """The form stored with the submission (numbers as ``repr`` strings: exact in Lua)."""
        entries = {
            board: [repr(float(badness)), json.dumps(shown, allow_nan=False)]
            for board, (badness, shown) in self.entries.items()
        }
        doc = {"team": self.team, "created_ts": repr(float(self.created_ts)), "entries": entries}
        return json.dumps(doc, separators=(",", ":"))


@dataclass(frozen=True)
class BoardDeps:
    """Where a leaderboard answer reads besides the benchmark record and its boards' version:
    the rank document of (``board``, ``rule``) and its job's claim, and the ``baseline``
    submission (its status and visibility decide whether and how its row is shown). A function
    of the benchmark record and the query."""

    board: str
    rule: str
    baseline: str | None

    def keys(self, bench_id: str) -> list[str]:
        """bench, leaderboard info, rank document, its claim[, baseline submission]: the
        stamp's keys."""
        out = [
            keys.benchmark(bench_id),
            keys.leaderboard_info(bench_id),
            keys.ranks(bench_id, self.board, self.rule),
            keys.ranks_lock(bench_id, self.board, self.rule),
        ]
        if self.baseline is not None:
            out.append(keys.submission(self.baseline))
        return out


@dataclass(frozen=True)
class BoardSnapshot:
    """A benchmark record, the version of its boards and one board's rank document, as they
    were together (see :meth:`Store.leaderboard_render`)."""

    bench: BenchmarkRecord
    version: int
    ranks: dict[str, Any] | None


@dataclass(frozen=True)
class RenderedPage:
    """A leaderboard answer: its body (JSON or CSV) and the CSV's Content-Disposition."""

    body: bytes
    disposition: str = ""


@dataclass(frozen=True)
class PageRead:
    """What :meth:`Store.leaderboard_cached` found: the caller's key (None: unknown or
    revoked), the seconds until its rate-limit window ends when it is spent, and the cached
    answer when it is current (else None)."""

    key: ApiKeyRecord | None
    retry_after_s: int | None = None
    body: bytes | None = None
    disposition: str = ""


@dataclass(frozen=True)
class SubmissionRead:
    """What :meth:`Store.read_submission` found: the caller's key (None: unknown or revoked),
    the seconds until its rate-limit window ends when it is spent, and the submission (None:
    unknown), with its result document (raw JSON bytes; None until it succeeded) and its
    0-based position in its queue (None unless queued)."""

    key: ApiKeyRecord | None
    retry_after_s: int | None = None
    record: SubmissionRecord | None = None
    result: bytes | None = None
    queue_position: int | None = None


def _page_stamp(
    dep_keys: list[str],
    bench: bytes,
    version: bytes | None,
    ranks: bytes | None,
    claimed: int,
    baseline: list[Any] | None,
) -> bytes:
    """The stamp of ``_PAGE_STAMP`` (same bytes) from values read in Python."""
    parts = [
        hashlib.sha1(bench).hexdigest().encode(),
        version or b"",
        dep_keys[2].encode(),
        hashlib.sha1(ranks).hexdigest().encode() if ranks is not None else b"",
        str(int(claimed)).encode(),
    ]
    if baseline is not None:
        status, visibility = (b"" if v is None else v for v in baseline)
        parts += [dep_keys[4].encode(), status + b"/" + visibility]
    else:
        parts += [b"", b""]
    return b"|".join(parts)


#: Entries kept in a store's memo of key ids and of the dependencies of cached pages (a hint
#: only: a wrong or missing entry costs a round trip or a cache miss, never a wrong answer).
_MEMO_SIZE = 4096


def _remember(memo: dict[str, T], key: str, value: T) -> None:
    """Set ``memo[key]``, emptying the memo first when it is full (a memo of hints)."""
    if len(memo) >= _MEMO_SIZE and key not in memo:
        memo.clear()
    memo[key] = value


def _leaderboard_keys(bench_id: str, metrics: list[str]) -> list[str]:
    out = [keys.leaderboard_info(bench_id)]
    for m in metrics:
        out += [
            keys.leaderboard_subs(bench_id, m),
            keys.leaderboard(bench_id, m, "best"),
            keys.leaderboard_map(bench_id, m, "best"),
            keys.leaderboard(bench_id, m, "latest"),
            keys.leaderboard_map(bench_id, m, "latest"),
            keys.leaderboard_entries(bench_id, m),
        ]
    return out


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: The window of a per-day quota (rolling, not calendar days).
DAY_S = 86400


@dataclass(frozen=True)
class Quota:
    """A team's submission quota on one benchmark: at most ``per_day`` counted submissions in
    any rolling 24 h and ``total`` in all (None: no limit). Counted submissions are the
    members of the zset ``key`` (see :func:`service.keys.quota`)."""

    key: str
    per_day: int | None
    total: int | None

    def check(self, client: Any, now: float) -> None:
        """Raise :class:`QuotaExceeded` when one more submission would exceed a limit."""
        if self.total is not None:
            used = int(client.zcard(self.key))
            if used >= self.total:
                raise QuotaExceeded(
                    f"the team has used its total quota of {self.total} submissions on this "
                    "benchmark (jobs failed by the system are not counted)"
                )
        if self.per_day is not None:
            day = client.zrangebyscore(self.key, now - DAY_S, "+inf", withscores=True)
            if len(day) >= self.per_day:
                # The slot frees when the oldest counted submission of the window leaves it.
                oldest = float(day[len(day) - self.per_day][1])
                wait = max(math.ceil(oldest + DAY_S - now), 1)
                raise QuotaExceeded(
                    f"the team has used its quota of {self.per_day} submissions per 24 h on "
                    f"this benchmark; the next is accepted in {wait} s (jobs failed by the "
                    "system are not counted)",
                    retry_after_s=wait,
                )


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
                "leaderboard_forget": _LEADERBOARD_FORGET,
                "set_visibility": _SET_VISIBILITY,
                "cmp_start": _CMP_START,
                "cmp_heartbeat": _CMP_HEARTBEAT,
                "cmp_requeue": _CMP_REQUEUE,
                "ranks_hold": _RANKS_HOLD,
                "leaderboard_rows": _LEADERBOARD_ROWS,
                "page_read": _PAGE_READ,
                "submission_read": _SUBMISSION_READ,
            }.items()
        }
        # Hints of the one-round-trip reads (see _read_with_key and leaderboard_cached); each
        # process has its own, and each hint is checked in Redis by the script it feeds.
        self._key_ids: dict[str, str] = {}
        self._page_deps: dict[str, BoardDeps] = {}

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
        self,
        name: str,
        role: Literal["admin", "submitter"],
        token: str,
        team: str | None = None,
        *,
        only_new: bool = False,
    ) -> ApiKeyRecord | None:
        """Store a key record for ``token``. ``only_new``: unless ``token`` is registered
        already, checked and written in one transaction (None when it was, by this process or
        another one at the same moment)."""
        record = ApiKeyRecord(
            key_id="key_" + secrets.token_hex(8),
            name=name,
            role=role,
            created_at=now_iso(),
            revoked=False,
            team=team,
        )
        digest = sha256_hex(token)
        fields: dict[Any, Any] = {
            "key_id": record.key_id,
            "name": record.name,
            "role": record.role,
            "created_at": record.created_at,
            "revoked": "0",
            "hash": digest,
        }
        if team is not None:
            fields["team"] = team

        def write() -> bool:
            pipe: Any
            with self.client.pipeline(transaction=True) as pipe:
                if only_new:
                    pipe.watch(keys.api_key_hash(digest))
                    if pipe.exists(keys.api_key_hash(digest)):
                        return False
                    pipe.multi()
                pipe.hset(keys.api_key(record.key_id), mapping=fields)
                pipe.hset(keys.api_key_auth(digest), mapping=fields)
                pipe.set(keys.api_key_hash(digest), record.key_id)
                pipe.zadd(keys.api_keys(), {record.key_id: time.time()})
                try:
                    pipe.execute()
                except redis.WatchError:  # registered meanwhile by another process
                    return False
                return True

        return record if self._call(write) else None

    def create_api_key(
        self,
        name: str,
        role: Literal["admin", "submitter"] = "submitter",
        team: str | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key: its record and the plaintext token (shown once, stored only hashed).

        ``team`` (a submitter key's team id) must exist (ValueError otherwise).
        """
        if role not in ("admin", "submitter"):
            raise ValueError(f"role must be 'admin' or 'submitter'; found {role!r}")
        if team is not None and self.get_team(team) is None:
            raise ValueError(f"no team {team!r}")
        token = "uqe_" + secrets.token_urlsafe(32)
        record = self._put_api_key(name, role, token, team)
        assert record is not None  # written unconditionally
        return record, token

    # --- teams ---------------------------------------------------------------------------------

    def create_team(self, name: str) -> TeamRecord:
        """A new team (its id is generated)."""
        record = TeamRecord(team_id="team_" + secrets.token_hex(6), name=name, created_at=now_iso())

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(
                keys.team(record.team_id),
                mapping={"team_id": record.team_id, "name": name, "created_at": record.created_at},
            )
            pipe.zadd(keys.teams(), {record.team_id: time.time()})
            pipe.execute()

        self._call(write)
        return record

    @staticmethod
    def _team_record(raw: Mapping[Any, Any]) -> TeamRecord:
        h = {_decode(k): _decode(v) for k, v in raw.items()}
        return TeamRecord(team_id=h["team_id"], name=h["name"], created_at=h["created_at"])

    def get_team(self, team_id: str) -> TeamRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.team(team_id)))
        return self._team_record(raw) if raw else None

    def list_teams(self) -> list[TeamRecord]:
        """Every team, oldest first."""

        def read() -> list[TeamRecord]:
            ids = self.client.zrange(keys.teams(), 0, -1)
            pipe = self.client.pipeline(transaction=False)
            for team_id in ids:
                pipe.hgetall(keys.team(_decode(team_id)))
            return [self._team_record(raw) for raw in pipe.execute() if raw]

        return self._call(read)

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
            team=h.get("team"),
        )
        return rec, h.get("hash", "")

    def authenticate(self, token: str) -> ApiKeyRecord | None:
        """The live key whose SHA-256 matches ``token`` (compared in constant time), else None."""
        if not token:
            return None
        digest = sha256_hex(token)

        def read() -> dict[Any, Any] | None:
            # One round trip: the record is copied under the token's hash when the key is
            # created (and revoked in both places at once).
            raw_auth: dict[Any, Any] = self.client.hgetall(keys.api_key_auth(digest))
            if raw_auth:
                return raw_auth
            # Keys created before that copy existed: look the record up by the hash.
            key_id = self.client.get(keys.api_key_hash(digest))
            if key_id is None:
                return None
            raw: dict[Any, Any] = self.client.hgetall(keys.api_key(_decode(key_id)))
            return raw or None

        raw = self._call(read)
        if raw is None:
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
            digest = self.client.hget(keys.api_key(key_id), "hash")
            if digest is None:
                return False
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(keys.api_key(key_id), "revoked", "1")
            auth = keys.api_key_auth(_decode(digest))
            # Only where the copy exists (keys created before it have none): HSET would
            # otherwise create a partial record.
            pipe.eval(_REVOKE_COPY, 1, auth)
            pipe.execute()
            return True

        return self._call(write)

    def hit_rate(self, key_id: str, limit: int, window_s: int) -> int | None:
        """Count one request of ``key_id`` in the current fixed window of ``window_s``.

        Returns None while the key is within ``limit`` requests in the window, else the
        seconds until the window ends (for Retry-After). One round trip (INCR + EXPIRE).
        """
        now = time.time()
        window = int(now // window_s)
        key = keys.rate(key_id, window)

        def write() -> int:
            pipe = self.client.pipeline(transaction=True)
            pipe.incr(key)
            pipe.expire(key, window_s + 1)
            count, _ = pipe.execute()
            return int(count)

        if self._call(write) <= limit:
            return None
        return max(math.ceil((window + 1) * window_s - now), 1)

    def ensure_admin_key(self, token: str | None) -> str | None:
        """Register the admin ``token`` from the environment, or generate one at first start.

        Returns the generated plaintext (to print once), else None: when ``token`` is given
        (registered if new) or when a key was generated before (by any process). A new
        environment key replaces the previous one: earlier environment admin keys are revoked,
        so rotating ``UQEVAL_ADMIN_KEY`` retires the old value.

        Safe when several API processes start at once: the token is registered by one of them
        only (a second record of the same token would have each process revoke the other's,
        and the shared copy under the token's hash with them).
        """
        if token:
            current = self._put_api_key(ENV_ADMIN_NAME, "admin", token, only_new=True)
            if current is not None:
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
        quota: Quota | None = None,
    ) -> tuple[SubmissionRecord, bool]:
        """Store the record, its arrays, its indexes and the idempotency mapping atomically.

        With an ``idempotency_key`` already used by the same owner: returns the existing
        submission and False when ``body_hash`` matches, raises :class:`IdempotencyConflict`
        otherwise (a mapping to a deleted submission is replaced). ``deadline`` is a
        ``time.monotonic()`` value after which the write is abandoned (StoreUnavailable).
        With a ``quota``, the submission is counted in it, or :class:`QuotaExceeded` is raised
        when the team already has ``per_day`` counted submissions in the last 24 h or
        ``total`` in all (checked and counted in the same transaction).
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
            if quota is not None:
                quota.check(pipe, record.created_ts)
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
            if record.team is not None:
                pipe.zadd(keys.team_submissions(record.team), {record.id: record.created_ts})
            if quota is not None:
                pipe.hset(keys.submission(record.id), "quota_key", quota.key)
                pipe.zadd(quota.key, {record.id: record.created_ts})
            pipe.zadd(keys.queued(record.queue), {record.id: record.created_ts})
            pipe.zadd(keys.pending(), {record.id: time.time()})
            if idem_key is not None:
                pipe.set(idem_key, json.dumps({"id": record.id, "body_hash": body_hash}), ex=86400)
            return None

        watches = [idem_key] if idem_key is not None else []
        if quota is not None:
            watches.append(quota.key)

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

    # --- benchmarks ------------------------------------------------------------------------

    def _put_arrays(self, pipe: Any, arr_key: str, arrays: Mapping[str, Any]) -> None:
        manifest: dict[str, Any] = {}
        blobs: dict[str, bytes] = {}
        for name, array in arrays.items():
            meta, chunks = self.encode_array(np.asarray(array))
            manifest[name] = meta
            for i, chunk in enumerate(chunks):
                blobs[f"{name}:{i}"] = chunk
        pipe.hset(arr_key, "manifest", json.dumps(manifest))
        for name, chunk in blobs.items():
            pipe.hset(arr_key, name, chunk)

    def _read_arrays(self, arr_key: str) -> dict[str, np.ndarray[Any, Any]] | None:
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

    def create_benchmark(
        self, record: BenchmarkRecord, arrays: Mapping[str, np.ndarray[Any, Any]]
    ) -> BenchmarkRecord:
        """Store a benchmark and its hidden targets (``y`` or ``labels``, optionally
        ``soft_labels``, ``ood`` and ``groups``) at once."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            self._put_arrays(pipe, keys.benchmark_arrays(record.id), arrays)
            pipe.set(keys.benchmark(record.id), record.to_json())
            pipe.zadd(keys.benchmarks(), {record.id: time.time()})
            pipe.execute()

        self._call(write)
        return record

    def get_benchmark(self, bench_id: str) -> BenchmarkRecord | None:
        raw = self._call(lambda: self.client.get(keys.benchmark(bench_id)))
        return None if raw is None else BenchmarkRecord.from_json(raw)

    def list_benchmarks(self) -> list[BenchmarkRecord]:
        """Every benchmark, oldest first."""

        def read() -> list[BenchmarkRecord]:
            ids = [_decode(i) for i in self.client.zrange(keys.benchmarks(), 0, -1)]
            if not ids:
                return []
            raws = self.client.mget([keys.benchmark(i) for i in ids])
            return [BenchmarkRecord.from_json(r) for r in raws if r is not None]

        return self._call(read)

    def update_benchmark(self, bench_id: str, changes: Mapping[str, Any]) -> BenchmarkRecord | None:
        """Replace the given metadata fields (never the targets); None when unknown."""

        def write() -> BenchmarkRecord | None:
            key = keys.benchmark(bench_id)
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(key)
                        raw = pipe.get(key)
                        if raw is None:
                            return None
                        record = dataclasses.replace(
                            BenchmarkRecord.from_json(raw), **changes, updated_at=now_iso()
                        )
                        pipe.multi()
                        pipe.set(key, record.to_json())
                        pipe.execute()
                        return record
                    except redis.WatchError:
                        continue

        return self._call(write)

    def delete_benchmark(self, bench_id: str) -> bool:
        """Remove a benchmark, its targets and its quota counters (its submissions stay)."""

        def write() -> bool:
            if not self.client.exists(keys.benchmark(bench_id)):
                return False
            quota_keys = list(self.client.scan_iter(match=keys.quota(bench_id, "*"), count=1000))
            quota_keys += list(
                self.client.scan_iter(match=keys.leaderboard_pattern(bench_id), count=1000)
            )
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.benchmark(bench_id), keys.benchmark_arrays(bench_id), *quota_keys)
            pipe.zrem(keys.benchmarks(), bench_id)
            pipe.execute()
            return True

        return self._call(write)

    def leaderboard_page(
        self, bench_id: str, metric: str, rule: str, offset: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of a board, best first, and the number of teams on it.

        Each row: ``team``, ``submission``, ``badness``, ``rank`` (1 + the number of teams
        strictly better: tied teams share a rank) and ``entry`` (value and interval).
        """
        script = self._scripts["leaderboard_rows"]
        board_keys = [
            keys.leaderboard(bench_id, metric, rule),
            keys.leaderboard_map(bench_id, metric, rule),
            keys.leaderboard_entries(bench_id, metric),
        ]
        reply = self._call(lambda: script(keys=board_keys, args=[int(offset), int(limit)]))
        total = int(reply[0])
        rows: list[dict[str, Any]] = []
        if len(reply) < 2:
            return rows, total
        # Rank = 1 + the teams strictly better. The page is sorted by score: a row tied with
        # the row before it shares its rank; any other has exactly the rows before it ahead.
        rank = int(reply[1]) + 1
        previous: float | None = None
        for i in range((len(reply) - 2) // 4):
            team, score, sub, entry = reply[2 + 4 * i : 6 + 4 * i]
            badness = float(score)
            if previous is not None and badness != previous:
                rank = offset + i + 1
            previous = badness
            if sub is None:  # not reachable: the scripts write team and map together
                continue
            rows.append(
                {
                    "team": _decode(team),
                    "submission": _decode(sub),
                    "badness": badness,
                    "rank": rank,
                    "entry": json.loads(entry) if entry is not None else {},
                }
            )
        return rows, total

    def _read_with_key(
        self,
        token: str,
        script: str,
        read_keys: list[str],
        read_args: list[Any],
        *,
        rate_limit: int,
        window_s: int,
    ) -> tuple[ApiKeyRecord | None, int | None, list[Any]]:
        """Run a read script that starts with ``_ADMIT``: authenticate ``token``, count the
        request against its key's rate limit and read ``read_keys`` (its KEYS from 4 on, with
        ``read_args`` as its ARGV from 5 on) — one round trip.

        Authentication and counting are those of :meth:`authenticate` and :meth:`hit_rate`
        (``rate_limit`` requests per ``window_s``; 0: none; admin keys are not counted). The
        script needs the key's id before it runs (the record and the rate counter are keys of
        the id): it comes from this store's memo, filled by earlier reads; a wrong guess
        (another process's memo, a new key) costs one more round trip, never a wrong answer.

        Returns the key (None: unknown or revoked), the seconds until its rate-limit window
        ends when it is spent (Retry-After), and the script's reply when the key was admitted.
        """
        if not token:
            return None, None, []
        digest = sha256_hex(token)
        run = self._scripts[script]
        key_id = self._key_ids.get(digest, "")
        for _ in range(3):
            now = time.time()
            window = int(now // window_s)
            script_keys = [
                keys.api_key_hash(digest),
                keys.api_key(key_id),
                keys.rate(key_id, window),
            ]
            args = [key_id, digest, int(rate_limit), window_s + 1, *read_args]
            reply = self._call(lambda: run(keys=script_keys + read_keys, args=args))  # noqa: B023
            outcome = _decode(reply[0])
            if outcome != "rekey":
                break
            key_id = _decode(reply[1])
            _remember(self._key_ids, digest, key_id)
        else:  # the key's id changed under us twice: not a key to trust
            return None, None, []
        if outcome == "denied":
            return None, None, []
        raw = reply[1]
        record, stored = self._key_record(dict(zip(raw[::2], raw[1::2], strict=True)))
        if not hmac.compare_digest(stored.encode(), digest.encode()) or record.revoked:
            return None, None, []
        if outcome == "limited":
            return record, max(math.ceil((window + 1) * window_s - now), 1), []
        return record, None, list(reply)

    def leaderboard_cached(
        self, token: str, page: str, bench_id: str, *, rate_limit: int, window_s: int
    ) -> PageRead:
        """Authenticate ``token``, count the request against its key's rate limit and look up
        the cached leaderboard answer ``page`` of benchmark ``bench_id`` — one round trip
        (``_PAGE_READ``; authentication and counting as :meth:`_read_with_key`).

        The answer is served only when its stamp equals the stamp of the current state: the
        benchmark record, the version of its boards, the rank document of its board and the
        baseline's status and visibility (:class:`BoardDeps`). The page's dependencies are
        needed before the script runs: they come from this store's memo, filled by earlier
        renders; a wrong or missing guess costs a miss (a render), never a wrong answer.
        """
        deps = self._page_deps.get(page)
        key, wait, reply = self._read_with_key(
            token,
            "page_read",
            [] if deps is None else [page, *deps.keys(bench_id)],
            ["0" if deps is None else "1"],
            rate_limit=rate_limit,
            window_s=window_s,
        )
        if key is None or wait is not None:
            return PageRead(key, retry_after_s=wait)
        if _decode(reply[0]) == "hit":
            return PageRead(key, body=reply[2], disposition=_decode(reply[3]))
        return PageRead(key)

    def read_submission(
        self, token: str, sub_id: str, *, rate_limit: int, window_s: int
    ) -> SubmissionRead:
        """Authenticate ``token``, count the request against its key's rate limit and read
        submission ``sub_id`` — its record, its result document (raw JSON bytes, as the worker
        wrote them) once it succeeded and its queue position while it is queued — in one
        round trip (``_SUBMISSION_READ``; authentication and counting as
        :meth:`_read_with_key`). Whether the key may read the submission is the caller's
        decision (:func:`service.api.access.can_read`)."""
        key, wait, reply = self._read_with_key(
            token,
            "submission_read",
            [keys.submission(sub_id), keys.result(sub_id), *map(keys.queued, keys.QUEUES)],
            [sub_id, *keys.QUEUES],
            rate_limit=rate_limit,
            window_s=window_s,
        )
        if key is None or wait is not None:
            return SubmissionRead(key, retry_after_s=wait)
        raw, result, position = reply[2:5]
        if not raw:
            return SubmissionRead(key)
        record = SubmissionRecord.from_hash(dict(zip(raw[::2], raw[1::2], strict=True)))
        return SubmissionRead(
            key,
            record=record,
            result=result or None,
            queue_position=None if position is None else int(position),
        )

    def leaderboard_render(
        self,
        bench_id: str,
        page: str,
        deps_of: Callable[[BenchmarkRecord], BoardDeps],
        render: Callable[[BoardSnapshot], RenderedPage],
        ttl_s: int,
    ) -> RenderedPage | None:
        """Render a leaderboard answer and cache it under ``page`` for ``ttl_s``; None when
        the benchmark does not exist.

        The benchmark record, the version of its boards, the board's rank document and its
        job's claim, and the baseline's state (the keys of ``deps_of(record)``) are WATCHed
        from before they are read until the answer is stored, and the answer is stored with
        their stamp in the same transaction: if any of them changed meanwhile (even to and
        fro), nothing is stored. Every other write that changes what a board shows (its sorted
        sets and entries) bumps the version in the same script, so a stored answer is exactly
        the rendering of the state its stamp names — whatever its rank status: a ``stale`` or
        ``computing`` answer is served only until the rank document or the claim changes, and
        a render that claims the rank job (and queues it) is not stored, so that a read finding
        the claim gone (its job lost) renders again and queues the job again.
        """
        bench_key = keys.benchmark(bench_id)

        def run() -> RenderedPage | None:
            pipe: Any
            with self.client.pipeline(transaction=True) as pipe:
                pipe.watch(bench_key)
                raw = pipe.get(bench_key)
                if raw is None:
                    return None
                bench = BenchmarkRecord.from_json(raw)
                deps = deps_of(bench)
                dep_keys = deps.keys(bench_id)
                pipe.watch(*dep_keys[1:])
                read = self.client.pipeline(transaction=False)
                read.hget(dep_keys[1], "__version")
                read.get(dep_keys[2])
                read.exists(dep_keys[3])
                if deps.baseline is not None:
                    read.hmget(dep_keys[4], "status", "visibility")
                version, ranks, claimed, *baseline = read.execute()
                stamp = _page_stamp(
                    dep_keys, raw, version, ranks, claimed, baseline[0] if baseline else None
                )
                snapshot = BoardSnapshot(
                    bench=bench,
                    version=0 if version is None else int(version),
                    ranks=None if ranks is None else json.loads(ranks),
                )
                out = render(snapshot)
                _remember(self._page_deps, page, deps)
                pipe.multi()
                pipe.hset(
                    page,
                    mapping={"stamp": stamp, "body": out.body, "disposition": out.disposition},
                )
                pipe.expire(page, ttl_s)
                # A WatchError: the state changed meanwhile (the render's own claim of the
                # rank job included); the answer stands, uncached.
                with contextlib.suppress(redis.WatchError):
                    pipe.execute()
                return out

        return self._call(run)

    def leaderboard_board(self, bench_id: str, metric: str, rule: str) -> list[tuple[str, str]]:
        """Every (team, submission) of a board, best first."""

        def read() -> list[tuple[str, str]]:
            teams = [
                _decode(t)
                for t in self.client.zrange(keys.leaderboard(bench_id, metric, rule), 0, -1)
            ]
            if not teams:
                return []
            subs = self.client.hmget(keys.leaderboard_map(bench_id, metric, rule), teams)
            return [(t, _decode(s)) for t, s in zip(teams, subs, strict=True) if s is not None]

        return self._call(read)

    def leaderboard_entry(self, bench_id: str, metric: str, sub_id: str) -> dict[str, Any] | None:
        """The shown entry (value, interval) of a ranked submission, else None."""
        raw = self._call(
            lambda: self.client.hget(keys.leaderboard_entries(bench_id, metric), sub_id)
        )
        return None if raw is None else json.loads(raw)

    def leaderboard_rank_of(self, bench_id: str, metric: str, rule: str, badness: float) -> int:
        """1 + the number of teams strictly better than ``badness`` on a board."""
        board = keys.leaderboard(bench_id, metric, rule)
        ahead = self._call(lambda: self.client.zcount(board, "-inf", f"({badness!r}"))
        return int(ahead) + 1

    def leaderboard_version(self, bench_id: str) -> int:
        """A counter of the changes of a benchmark's boards (new entries, removals)."""
        raw = self._call(lambda: self.client.hget(keys.leaderboard_info(bench_id), "__version"))
        return 0 if raw is None else int(raw)

    def get_ranks(self, bench_id: str, metric: str, rule: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.ranks(bench_id, metric, rule)))
        return None if raw is None else json.loads(raw)

    def put_ranks(self, bench_id: str, metric: str, rule: str, doc: Mapping[str, Any]) -> None:
        """Store a rank computation and release its job's claim."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.ranks(bench_id, metric, rule), json.dumps(doc, allow_nan=False))
            pipe.delete(keys.ranks_lock(bench_id, metric, rule))
            pipe.execute()

        self._call(write)

    def claim_ranks(self, bench_id: str, metric: str, rule: str, ttl_s: float) -> bool:
        """True for the one caller that should queue a rank job now (the claim expires after
        ``ttl_s``, so a lost job is queued again)."""
        key = keys.ranks_lock(bench_id, metric, rule)
        return bool(
            self._call(lambda: self.client.set(key, now_iso(), nx=True, px=int(ttl_s * 1000)))
        )

    def release_ranks(self, bench_id: str, metric: str, rule: str) -> None:
        self._call(lambda: self.client.delete(keys.ranks_lock(bench_id, metric, rule)))

    def hold_ranks(
        self, bench_id: str, metric: str, rule: str, token: str, ttl_s: float, *, take: bool
    ) -> bool:
        """The running rank job ``token`` holds its board's claim for ``ttl_s`` more.

        ``take``: the job starts and makes the claim its own (the reader's claim covered its
        time in the queue); else the claim is refreshed only while ``token`` still holds it.
        A job kept alive by a heartbeat holds a short claim, so that a job lost with its
        worker is queued again by the next read within ``ttl_s``, not after the reader's
        long claim. False when the claim is no longer the job's.
        """
        ttl_ms = max(int(ttl_s * 1000), 1)
        script = self._scripts["ranks_hold"]
        lock = keys.ranks_lock(bench_id, metric, rule)
        mode = "take" if take else "keep"
        return bool(self._call(lambda: script(keys=[lock], args=[token, ttl_ms, mode])))

    # --- comparisons -----------------------------------------------------------------------

    def create_comparison(self, record: Mapping[str, Any]) -> None:
        """Store a queued comparison (``record``: id, owner, team, request, created_at)."""
        fields: dict[Any, Any] = {
            "id": record["id"],
            "owner": record["owner"],
            "status": "queued",
            "created_at": record["created_at"],
            "request": json.dumps(record["request"], separators=(",", ":")),
        }
        if record.get("team") is not None:
            fields["team"] = record["team"]
        self._call(lambda: self.client.hset(keys.comparison(record["id"]), mapping=fields))

    def get_comparison(self, cmp_id: str) -> dict[str, Any] | None:
        """The comparison's record (``request`` decoded) and its ``result`` once succeeded."""

        def read() -> dict[str, Any] | None:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.comparison(cmp_id))
            pipe.get(keys.comparison_result(cmp_id))
            raw, result = pipe.execute()
            if not raw:
                return None
            out: dict[str, Any] = {_decode(k): _decode(v) for k, v in raw.items()}
            out["request"] = json.loads(out["request"])
            out["result"] = None if result is None else json.loads(result)
            return out

        return self._call(read)

    def set_comparison_status(
        self,
        cmp_id: str,
        status: str,
        *,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
    ) -> None:
        """Move a comparison to ``status`` (with its result or error), atomically."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            fields: dict[Any, Any] = {"status": status}
            if status in TERMINAL:
                fields["finished_at"] = now_iso()
            else:
                fields["started_at"] = now_iso()
            if error is not None:
                fields["error"] = error
            if result is not None:
                pipe.set(
                    keys.comparison_result(cmp_id),
                    json.dumps(result, allow_nan=False, separators=(",", ":")),
                )
            pipe.hset(keys.comparison(cmp_id), mapping=fields)
            if status in TERMINAL:  # no longer watched by the reaper
                pipe.delete(keys.comparison_heartbeat(cmp_id))
                pipe.zrem(keys.running_comparisons(), cmp_id)
            pipe.execute()

        self._call(write)

    def delete_comparison(self, cmp_id: str) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(
                keys.comparison(cmp_id),
                keys.comparison_result(cmp_id),
                keys.comparison_heartbeat(cmp_id),
            )
            pipe.zrem(keys.running_comparisons(), cmp_id)
            pipe.zrem(keys.resend_comparisons(), cmp_id)
            pipe.execute()

        self._call(write)

    def _cmp_keys(self, cmp_id: str) -> list[str]:
        return [
            keys.comparison(cmp_id),
            keys.comparison_heartbeat(cmp_id),
            keys.running_comparisons(),
        ]

    def claim_comparison(
        self, cmp_id: str, token: str, hb_ttl_s: float, max_attempts: int
    ) -> tuple[str, str]:
        """Claim a comparison for the task delivery ``token``, like :meth:`mark_running`:
        ``("started", attempt)``, ``("busy", holder)``, ``("terminal", status)`` (also when
        it has used ``max_attempts``: then failed with the reason) or ``("missing", "")``."""
        script = self._scripts["cmp_start"]
        ttl_ms = max(int(hb_ttl_s * 1000), 1)
        args: list[Any] = [cmp_id, now_iso(), time.time(), token, ttl_ms, max_attempts]
        out = self._call(lambda: script(keys=self._cmp_keys(cmp_id), args=args))
        return _decode(out[0]), _decode(out[1])

    def comparison_heartbeat(self, cmp_id: str, token: str, hb_ttl_s: float) -> bool:
        """Refresh the heartbeat of a running comparison; False when ``token`` no longer
        holds it (re-queued after its heartbeat lapsed, ended, deleted)."""
        script = self._scripts["cmp_heartbeat"]
        args: list[Any] = [token, max(int(hb_ttl_s * 1000), 1)]
        return bool(self._call(lambda: script(keys=self._cmp_keys(cmp_id)[:2], args=args)))

    def orphaned_comparisons(self) -> list[str]:
        """Ids of running comparisons whose heartbeat has expired."""
        return self._expired(keys.running_comparisons(), keys.comparison_heartbeat)

    def requeue_comparison(self, cmp_id: str, max_attempts: int, hb_ttl_s: float) -> str:
        """Re-queue a running comparison without heartbeat (its task is to be published
        again, see :meth:`comparisons_to_resend`), or fail it once it used ``max_attempts``.
        Returns "requeued", "failed", "alive" or "skip" (no longer running)."""
        script = self._scripts["cmp_requeue"]
        args: list[Any] = [cmp_id, now_iso(), max_attempts, f"{hb_ttl_s:g}", time.time()]
        cmp_keys = [*self._cmp_keys(cmp_id), keys.resend_comparisons()]
        return _decode(self._call(lambda: script(keys=cmp_keys, args=args)))

    def comparisons_to_resend(self) -> list[str]:
        """Re-queued comparisons whose task message is still to be published."""
        ids = self._call(lambda: self.client.zrange(keys.resend_comparisons(), 0, -1))
        return [_decode(i) for i in ids]

    def mark_comparison_resent(self, cmp_id: str) -> None:
        self._call(lambda: self.client.zrem(keys.resend_comparisons(), cmp_id))

    def load_benchmark_arrays(self, bench_id: str) -> dict[str, np.ndarray[Any, Any]] | None:
        """The hidden targets of a benchmark (for the worker only; no route returns them)."""
        return self._call(lambda: self._read_arrays(keys.benchmark_arrays(bench_id)))

    def get_submission(self, sub_id: str) -> SubmissionRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.submission(sub_id)))
        return SubmissionRecord.from_hash(raw) if raw else None

    def get_submissions(self, sub_ids: list[str]) -> list[SubmissionRecord | None]:
        """The records of ``sub_ids`` in one round trip (None for unknown ids)."""

        def read() -> list[SubmissionRecord | None]:
            if not sub_ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            for sub_id in sub_ids:
                pipe.hgetall(keys.submission(sub_id))
            return [SubmissionRecord.from_hash(raw) if raw else None for raw in pipe.execute()]

        return self._call(read)

    def list_submissions(
        self,
        owner: str | None,
        status: str | None,
        offset: int,
        limit: int,
        *,
        team: str | None = None,
    ) -> tuple[list[SubmissionRecord], int]:
        """One page of submissions, newest first, and the total matching count.

        ``team`` lists one team's; else ``owner`` one key's; ``owner=None`` every owner's.
        ``status`` filters on the current status.
        """
        if team is not None:
            index = keys.team_submissions(team)
        else:
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

    def get_submission_and_result(
        self, sub_id: str
    ) -> tuple[SubmissionRecord | None, bytes | None]:
        """The record and the stored result document (raw JSON bytes, NaN-free as written by
        the worker; None until the job succeeded), in one round trip."""

        def read() -> tuple[SubmissionRecord | None, bytes | None]:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.submission(sub_id))
            pipe.get(keys.result(sub_id))
            raw, result = pipe.execute()
            return (SubmissionRecord.from_hash(raw) if raw else None), result

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

    def delete_submission(self, sub_id: str, *, refund: bool = False) -> bool:
        """Remove the record, arrays, result, heartbeat, every index entry and the
        idempotency mapping (its key may then be used again).

        It stays counted in its benchmark quota (deleting does not give a slot back) unless
        ``refund`` (the rollback of a submission that was never enqueued).
        """

        record = self.get_submission(sub_id)
        if record is not None and record.benchmark is not None and record.status == "succeeded":
            metrics = record.analyses.get("metrics")
            if isinstance(metrics, list):
                self.leaderboard_forget(record.benchmark, sub_id, metrics)

        def write() -> bool:
            owner, idem_key, team, quota_key = self.client.hmget(
                keys.submission(sub_id), ["owner", "idem_key", "team", "quota_key"]
            )
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
            if team is not None:
                pipe.zrem(keys.team_submissions(_decode(team)), sub_id)
            if refund and quota_key is not None:
                pipe.zrem(_decode(quota_key), sub_id)
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

    def _quota_keys(self, sub_id: str) -> list[str]:
        """``[quota zset]`` of a submission counted in a benchmark quota, else ``[]``: the
        key a refunding script touches, read first so that the script can declare it."""
        quota_key = self._call(lambda: self.client.hget(keys.submission(sub_id), "quota_key"))
        return [] if quota_key is None else [_decode(quota_key)]

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
            self._quota_keys(sub_id),
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
        self,
        sub_id: str,
        result: Mapping[str, Any],
        duration_s: float,
        queue: str = "cpu",
        ranking: Ranking | None = None,
    ) -> str:
        """Write the result document and the ``succeeded`` status in one script — and, with a
        ``ranking``, the submission's leaderboard entries in the same script.

        The ranking is stored with the submission whatever its visibility, and put on the
        boards when the submission is public at that moment (so that a later
        :meth:`set_visibility` can add or remove it). Only a queued or running job is finished;
        returns "succeeded", or the status that prevented it ("cancelled", "failed",
        "succeeded" for a duplicate, "missing").
        """
        doc = json.dumps(result, allow_nan=False, separators=(",", ":"))
        args: list[Any] = [
            sub_id,
            now_iso(),
            doc,
            self.retention_s,
            repr(float(duration_s)),
            len(keys.DURATION_BUCKETS),
            *[repr(b) for b in keys.DURATION_BUCKETS],
        ]
        extra = [keys.result(sub_id), keys.durations(queue)]
        if ranking is None:
            args.append("")
        else:
            boards = list(ranking.entries)
            args += [ranking.to_json(), *boards]
            if boards:
                extra += _leaderboard_keys(ranking.benchmark, boards)
        return _decode(self._run("finish", sub_id, args, extra))

    def set_visibility(self, sub_id: str, visibility: Literal["private", "public"]) -> str:
        """Make a submission private or public, in one script with its leaderboard entries: a
        succeeded benchmark submission going private leaves its boards (its team's next best
        or latest public submission takes its place), going public enters them; either bumps
        the board version, so that rank intervals are computed again.

        Returns "changed", "unchanged", "missing", or "unranked" (a succeeded benchmark
        submission finished without a stored ranking, by an older version: left as it is).
        """
        if visibility not in ("private", "public"):
            raise ValueError(f"visibility must be 'private' or 'public'; found {visibility!r}")
        for _ in range(3):
            bench, raw = self._call(
                lambda: self.client.hmget(keys.submission(sub_id), ["benchmark", "ranking"])
            )
            ranking = "" if raw is None else _decode(raw)
            boards = list(json.loads(ranking)["entries"]) if ranking else []
            extra = [keys.result(sub_id)]
            if bench is None:
                extra.append(keys.stats())  # unused: no benchmark, no boards
            else:
                extra += [keys.benchmark(_decode(bench))]
                extra += _leaderboard_keys(_decode(bench), boards)
            out = _decode(
                self._run("set_visibility", sub_id, [sub_id, visibility, ranking, *boards], extra)
            )
            if out != "retry":
                return out
        # The ranking is written once (when the job succeeds): a second read always agrees.
        raise RuntimeError(f"the ranking of {sub_id} kept changing")  # pragma: no cover

    def leaderboard_forget(self, bench_id: str, sub_id: str, metrics: Iterable[str]) -> None:
        """Remove a submission from the boards of ``metrics`` and, for a classification
        submission evaluated with estimators, from their ``"metric[estimator]"`` boards (its
        team falls back to its next best or latest submission)."""
        from service.kinds import task_of
        from service.leaderboard import boards_of

        names = list(metrics)
        record = self.get_submission(sub_id)
        if record is not None and names:
            estimators = record.analyses.get("estimators")
            names = boards_of(
                names, estimators if isinstance(estimators, list) else None, task_of(record.kind)
            )
        if names:
            # KEYS 8 and 9 are unused here; the info hash is KEYS[10] as in the finish script.
            pad = [keys.result(sub_id), keys.stats()]
            self._run(
                "leaderboard_forget", sub_id, [sub_id], pad + _leaderboard_keys(bench_id, names)
            )

    def fail(self, sub_id: str, error: str, *, system: bool = False) -> str:
        """Mark a queued or running job failed with ``error`` (a reason a user can act on).

        ``system``: the failure is the service's, not the input's (a crash, a lost worker, a
        limit): the job is removed from its team's benchmark quota.
        """
        args = [sub_id, now_iso(), error, self.retention_s, "1" if system else "0"]
        quota = self._quota_keys(sub_id) if system else []
        return _decode(self._run("fail", sub_id, args, quota))

    def mark_cancelled(self, sub_id: str) -> str:
        """The worker stopped a job at a checkpoint after a cancel request."""
        return _decode(self._run("mark_cancelled", sub_id, [sub_id, now_iso(), self.retention_s]))

    def orphaned(self) -> list[str]:
        """Ids of running jobs whose heartbeat has expired."""
        return self._expired(keys.running(), keys.heartbeat)

    def _expired(self, running: str, heartbeat: Callable[[str], str]) -> list[str]:
        """The members of the ``running`` set whose ``heartbeat(id)`` key has expired."""

        def read() -> list[str]:
            ids = [_decode(i) for i in self.client.zrange(running, 0, -1)]
            if not ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            for item in ids:
                pipe.exists(heartbeat(item))
            return [i for i, alive in zip(ids, pipe.execute(), strict=True) if not alive]

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
                [keys.resend(), *self._quota_keys(sub_id)],
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
