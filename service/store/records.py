"""The store's records, statuses and exceptions: what its methods take and give back.

Nothing here talks to Redis: the records convert to and from the strings Redis holds
(:meth:`SubmissionRecord.to_hash`, :meth:`BenchmarkRecord.to_json`, ...), and the exceptions
are those every caller of :class:`service.store.Store` may meet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from service import keys
from service.analyses import Analyses

#: The states of a submission (and of a comparison).
Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
#: The states a job never leaves.
TERMINAL: frozenset[Status] = frozenset({"succeeded", "failed", "cancelled"})


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
    """The SHA-256 of ``data`` (a string as UTF-8), in hex."""
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

    The targets are stored beside it as arrays (:meth:`~service.store.Store.load_benchmark_arrays`) and are
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
    #: The leaderboard pages (``/ui/benchmarks/{id}``) are shown without a key.
    public_board: bool = False
    #: "coarse": submissions' results carry their curves on the coarse grid of
    #: :mod:`uqcore.coarse`; "none": no curves.
    curves: Literal["none", "coarse"] = "none"
    #: The model name shown in the baseline row of the leaderboards (None: "baseline").
    baseline_name: str | None = None
    #: Rows of the public part (None: no split, every row is public). The mask of the
    #: private rows is stored with the hidden arrays (``private_mask``), never here.
    n_public: int | None = None
    #: The most submissions a team may mark final (those that rank on the private board).
    max_final: int = 2
    #: "closed": no new submission, finals fixed, the private board revealed (irreversible).
    status: Literal["open", "closed"] = "open"
    closed_at: str | None = None

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

    @property
    def is_split(self) -> bool:
        """Whether the benchmark has a private part."""
        return self.n_public is not None and self.n_public < self.n

    @property
    def private_fraction(self) -> float:
        """The realised share of private rows (0 without a split)."""
        return 0.0 if self.n_public is None else (self.n - self.n_public) / self.n

    def analyses(self, metrics: list[str], estimators: list[str] | None = None) -> Analyses:
        """The analyses of a submission on this benchmark evaluating ``metrics`` (and, for
        classification, the metric × estimator table of ``estimators``)."""
        return Analyses.of_benchmark(
            metrics,
            params=self.params,
            bootstrap=self.bootstrap,
            seed=self.seed,
            estimators=estimators,
            curves=self.curves == "coarse",
        )


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
    analyses: Analyses
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
    #: Where the end of its job is posted (a signed webhook event; None: nowhere).
    callback_url: str | None = None
    #: Marked final by its team (it ranks on its benchmark's private board).
    final: bool = False

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
            "analyses": json.dumps(self.analyses.document(), separators=(",", ":")),
            "cancel_requested": "1" if self.cancel_requested else "0",
            "created_ts": repr(float(self.created_ts)),
            "visibility": self.visibility,
        }
        if self.final:
            out["final"] = "1"
        for name in ("started_at", "finished_at", "error", "team", "benchmark", "callback_url"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_hash(cls, raw: Mapping[Any, Any]) -> SubmissionRecord:
        h = {decode(k): decode(v) for k, v in raw.items()}
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
            analyses=Analyses.from_json(h.get("analyses", "{}")),
            cancel_requested=h.get("cancel_requested") == "1",
            created_ts=float(h.get("created_ts", "0")),
            team=h.get("team"),
            visibility="public" if h.get("visibility") == "public" else "private",
            benchmark=h.get("benchmark"),
            callback_url=h.get("callback_url"),
            final=h.get("final") == "1",
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
    were together (see :meth:`~service.store.Store.leaderboard_render`)."""

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
    """What :meth:`~service.store.Store.leaderboard_cached` found: the caller's key (None: unknown or
    revoked), the seconds until its rate-limit window ends when it is spent, and the cached
    answer when it is current (else None)."""

    key: ApiKeyRecord | None
    retry_after_s: int | None = None
    body: bytes | None = None
    disposition: str = ""


@dataclass(frozen=True)
class SubmissionRead:
    """What :meth:`~service.store.Store.read_submission` found: the caller's key (None: unknown or revoked),
    the seconds until its rate-limit window ends when it is spent, and the submission (None:
    unknown), with its result document (raw JSON bytes; None until it succeeded) and its
    0-based position in its queue (None unless queued)."""

    key: ApiKeyRecord | None
    retry_after_s: int | None = None
    record: SubmissionRecord | None = None
    result: bytes | None = None
    queue_position: int | None = None


def decode(value: Any) -> str:
    """A Redis reply (bytes) or a value as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
