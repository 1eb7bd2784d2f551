"""The Redis store: every read and write of the service and its workers goes through here.

Keys are those of :mod:`service.keys`. State changes of a submission (start, progress, finish,
fail, cancel, requeue) are Lua scripts (``lua/*.lua``, see :mod:`service.store.scripts`), so
each is atomic and conditional on the current status: a worker never overwrites a job that was
cancelled, deleted or finished elsewhere, and the result document is written together with the
``succeeded`` status (one script, one transaction). Arrays are ``.npy`` objects in the blob
store (:mod:`service.blobs`), Redis keeping their manifests (see :mod:`service.store.codec`;
data of the previous in-Redis codec is still read) — never JSON.

:class:`Store` is made of one part per resource, each in its module:

- :mod:`~service.store.apikeys`: API keys, teams, rate limits, the admin key;
- :mod:`~service.store.submissions`: submissions, their arrays and quotas;
- :mod:`~service.store.jobs`: the job lifecycle, the reaper's reads, the queues;
- :mod:`~service.store.benchmarks`: benchmark records and their hidden targets;
- :mod:`~service.store.leaderboards`: boards, cached pages, rank documents;
- :mod:`~service.store.comparisons`: comparisons and their claims;
- :mod:`~service.store.sharelinks`: read-only share links of benchmark boards;
- :mod:`~service.store.workers`: the worker registry and job counters;
- :mod:`~service.store.plots`: rendered plots and their claims;
- :mod:`~service.store.blobsweep`: the blob objects follow the retention of their manifests;
- :mod:`~service.store.notifications`: webhook secrets and deliveries;
- :mod:`~service.store.finals`: the parts of split benchmarks, private results, finals;

over :class:`~service.store.base.StoreBase` (the client, the retry wrapper, the scripts). The
records, statuses and exceptions are in :mod:`~service.store.records`.
"""

from __future__ import annotations

from service.store.apikeys import ENV_ADMIN_NAME, ApiKeyStore
from service.store.benchmarks import BenchmarkStore
from service.store.blobsweep import BlobSweepStore
from service.store.codec import CHUNK_BYTES
from service.store.comparisons import ComparisonStore
from service.store.finals import FinalsStore
from service.store.jobs import JobStore
from service.store.leaderboards import LeaderboardStore
from service.store.notifications import NotificationStore
from service.store.plots import PlotStore
from service.store.records import (
    TERMINAL,
    ApiKeyRecord,
    BenchmarkRecord,
    BoardDeps,
    BoardSnapshot,
    IdempotencyConflict,
    PageRead,
    QuotaExceeded,
    Ranking,
    RenderedPage,
    Status,
    StoreUnavailable,
    SubmissionRead,
    SubmissionRecord,
    TeamRecord,
    now_iso,
    sha256_hex,
)
from service.store.sharelinks import ShareLink, ShareLinkStore
from service.store.submissions import DAY_S, Quota, SubmissionStore
from service.store.suites import SuiteRecord, SuiteSnapshot, SuiteStore
from service.store.workers import WorkerStore

__all__ = [
    "CHUNK_BYTES",
    "DAY_S",
    "ENV_ADMIN_NAME",
    "TERMINAL",
    "ApiKeyRecord",
    "BenchmarkRecord",
    "BoardDeps",
    "BoardSnapshot",
    "IdempotencyConflict",
    "PageRead",
    "Quota",
    "QuotaExceeded",
    "Ranking",
    "RenderedPage",
    "ShareLink",
    "Status",
    "Store",
    "StoreUnavailable",
    "SubmissionRead",
    "SubmissionRecord",
    "SuiteRecord",
    "SuiteSnapshot",
    "TeamRecord",
    "now_iso",
    "sha256_hex",
]


class Store(
    ApiKeyStore,
    SubmissionStore,
    JobStore,
    BenchmarkStore,
    LeaderboardStore,
    ComparisonStore,
    PlotStore,
    ShareLinkStore,
    WorkerStore,
    BlobSweepStore,
    NotificationStore,
    FinalsStore,
    SuiteStore,
):
    """Typed access to the Redis data of uq-eval (see :mod:`service.keys`).

    Every method raises :class:`StoreUnavailable` when Redis cannot be reached or does not
    answer within the client's socket timeout.
    """
