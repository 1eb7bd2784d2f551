"""Typed answers of the service: frozen dataclasses read from its JSON documents.

Each class keeps the document it was read from in ``raw``, so a field that a newer server adds
is never lost (forward compatible), and reads only what it names: an unknown field is ignored,
a missing optional one is None. ``from_json(doc)`` builds each from the server's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ApiKey",
    "Benchmark",
    "Comparison",
    "FinalSubmission",
    "Interval",
    "Leaderboard",
    "LeaderboardEntry",
    "MetricValue",
    "Result",
    "Submission",
    "SubmissionPage",
    "Team",
    "TeamFinals",
]

#: The states in which a job has ended.
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _dict(v: Any) -> dict[str, Any]:
    return dict(v) if isinstance(v, dict) else {}


@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval of a metric."""

    low: float | None
    high: float | None
    std: float | None
    method: str | None
    level: float | None
    n_resamples: int | None
    n_valid: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Interval:
        return cls(
            low=_float(doc.get("low")),
            high=_float(doc.get("high")),
            std=_float(doc.get("std")),
            method=doc.get("method"),
            level=_float(doc.get("level")),
            n_resamples=_int(doc.get("n_resamples")),
            n_valid=_int(doc.get("n_valid")),
            raw=doc,
        )


@dataclass(frozen=True)
class MetricValue:
    """One metric of a result: its value (None when undefined on the input), parameters,
    direction, bounds and, with a bootstrap, its interval."""

    name: str
    value: float | None
    params: dict[str, Any]
    direction: str | None
    bounds: list[float | None] | None
    interval: Interval | None
    details: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, name: str, doc: dict[str, Any]) -> MetricValue:
        interval = doc.get("interval")
        details = doc.get("details")
        return cls(
            name=name,
            value=_float(doc.get("value")),
            params=_dict(doc.get("params")),
            direction=doc.get("direction"),
            bounds=doc.get("bounds"),
            interval=Interval.from_json(interval) if isinstance(interval, dict) else None,
            details=details if isinstance(details, dict) else None,
            raw=doc,
        )


@dataclass(frozen=True)
class Result:
    """The result document of a succeeded submission.

    ``metrics`` maps each computed metric to its :class:`MetricValue`; ``not_applicable`` the
    metrics asked for that do not apply, with the reason; ``curves`` holds the curves when
    ``curves=True`` was asked; ``provenance`` how the result was computed (uqcore version,
    backend, input hash, timings).
    """

    metrics: dict[str, MetricValue]
    not_applicable: dict[str, str]
    warnings: list[str]
    curves: dict[str, Any] = field(repr=False)
    stability: dict[str, Any] | None
    provenance: dict[str, Any]
    by_estimator: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Result:
        metrics = {
            name: MetricValue.from_json(name, m)
            for name, m in _dict(doc.get("metrics")).items()
            if isinstance(m, dict)
        }
        stability = doc.get("stability")
        by_estimator = doc.get("by_estimator")
        return cls(
            metrics=metrics,
            not_applicable={str(k): str(v) for k, v in _dict(doc.get("not_applicable")).items()},
            warnings=[str(w) for w in doc.get("warnings") or []],
            curves=_dict(doc.get("curves")),
            stability=stability if isinstance(stability, dict) else None,
            provenance=_dict(doc.get("provenance")),
            by_estimator=by_estimator if isinstance(by_estimator, dict) else None,
            raw=doc,
        )

    @property
    def plots(self) -> list[dict[str, str]]:
        """The submission's plots: ``{"name", "title", "url"}`` each (``Client.plot(id,
        name)`` fetches one as PNG or SVG bytes)."""
        return [
            {str(k): str(v) for k, v in p.items()}
            for p in self.raw.get("plots") or []
            if isinstance(p, dict)
        ]

    def value(self, name: str) -> float | None:
        """The value of metric ``name`` (None when undefined on this input).

        Raises
        ------
        KeyError
            If the metric was not computed (not asked for, or not applicable: see
            ``not_applicable``).
        """
        if name not in self.metrics:
            why = self.not_applicable.get(name)
            raise KeyError(f"metric {name!r} is not in the result" + (f": {why}" if why else ""))
        return self.metrics[name].value

    def table(self) -> list[tuple[str, float | None, float | None, float | None, str | None]]:
        """One row per metric, ``(name, value, low, high, direction)``, in the result's order
        (``low`` and ``high`` are None without a bootstrap)."""
        rows = []
        for name, m in self.metrics.items():
            low = m.interval.low if m.interval else None
            high = m.interval.high if m.interval else None
            rows.append((name, m.value, low, high, m.direction))
        return rows


@dataclass(frozen=True)
class Submission:
    """A submission: its state, progress (percent), timings and, once it succeeded, its
    result. ``idempotency_key`` and ``replayed`` are set on the answer of ``submit``."""

    id: str
    status: str
    progress: float
    model_name: str | None
    kind: str | None
    n: int | None
    queue: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    error: str | None
    team_id: str | None
    visibility: str | None
    benchmark_id: str | None
    metadata: dict[str, Any] | None
    analyses: dict[str, Any] | None
    attempts: int | None
    queue_position: int | None
    result: Result | None
    idempotency_key: str | None = None
    replayed: bool | None = None
    #: Marked final by its team (``Client.mark_final``); the private board ranks finals only.
    final: bool = False
    #: Once its benchmark is closed: the result on the private rows (its team and admins).
    private_result: Result | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(
        cls,
        doc: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        replayed: bool | None = None,
    ) -> Submission:
        result = doc.get("result")
        private_result = doc.get("private_result")
        metadata = doc.get("metadata")
        analyses = doc.get("analyses")
        if replayed is None and isinstance(doc.get("replayed"), bool):
            replayed = doc["replayed"]
        return cls(
            id=str(doc["id"]),
            status=str(doc.get("status")),
            progress=float(doc.get("progress") or 0.0),
            model_name=doc.get("model_name"),
            kind=doc.get("kind"),
            n=_int(doc.get("n")),
            queue=doc.get("queue"),
            created_at=doc.get("created_at"),
            started_at=doc.get("started_at"),
            finished_at=doc.get("finished_at"),
            error=doc.get("error"),
            team_id=doc.get("team_id"),
            visibility=doc.get("visibility"),
            benchmark_id=doc.get("benchmark_id"),
            metadata=metadata if isinstance(metadata, dict) else None,
            analyses=analyses if isinstance(analyses, dict) else None,
            attempts=_int(doc.get("attempts")),
            queue_position=_int(doc.get("queue_position")),
            result=Result.from_json(result) if isinstance(result, dict) else None,
            idempotency_key=idempotency_key,
            replayed=replayed,
            final=bool(doc.get("final", False)),
            private_result=(
                Result.from_json(private_result) if isinstance(private_result, dict) else None
            ),
            raw=doc,
        )

    @property
    def done(self) -> bool:
        """True once the job has ended (succeeded, failed or cancelled)."""
        return self.status in TERMINAL

    @property
    def succeeded(self) -> bool:
        """True when the job succeeded (its ``result`` is then set)."""
        return self.status == "succeeded"


@dataclass(frozen=True)
class SubmissionPage:
    """One page of submissions, newest first; ``total`` counts all that match."""

    items: list[Submission]
    total: int
    offset: int
    limit: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SubmissionPage:
        return cls(
            items=[Submission.from_json(d) for d in doc.get("items") or []],
            total=int(doc.get("total") or 0),
            offset=int(doc.get("offset") or 0),
            limit=int(doc.get("limit") or 0),
            raw=doc,
        )


@dataclass(frozen=True)
class LeaderboardEntry:
    """One team's ranked submission: the value with its interval, the rank interval, the
    bootstrap probability of rank 1, and whether it is separable from the leader and from the
    baseline. ``team_name`` is None when the server does not send it."""

    rank: int
    team_id: str | None
    team_name: str | None
    submission_id: str
    model_name: str | None
    value: float | None
    low: float | None
    high: float | None
    rank_low: int | None
    rank_high: int | None
    p_best: float | None
    separable_from_leader: bool | None
    separable_from_baseline: bool | None
    is_baseline: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LeaderboardEntry:
        return cls(
            rank=int(doc.get("rank") or 0),
            team_id=doc.get("team_id"),
            team_name=doc.get("team_name"),
            submission_id=str(doc.get("submission_id")),
            model_name=doc.get("model_name"),
            value=_float(doc.get("value")),
            low=_float(doc.get("low")),
            high=_float(doc.get("high")),
            rank_low=_int(doc.get("rank_low")),
            rank_high=_int(doc.get("rank_high")),
            p_best=_float(doc.get("p_best")),
            separable_from_leader=doc.get("separable_from_leader"),
            separable_from_baseline=doc.get("separable_from_baseline"),
            is_baseline=bool(doc.get("is_baseline", False)),
            raw=doc,
        )


@dataclass(frozen=True)
class Leaderboard:
    """A benchmark's leaderboard under one metric (and estimator), best first; ``ranks`` says
    whether the rank intervals are current. ``part`` is ``"public"`` (the public rows, every
    ranked submission) or ``"private"`` (after close: each team's best final on the private
    rows)."""

    benchmark_id: str
    metric: str
    estimator: str | None
    direction: str | None
    rule: str | None
    total: int
    entries: list[LeaderboardEntry]
    ranks: dict[str, Any]
    baseline: LeaderboardEntry | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    part: str = "public"

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Leaderboard:
        baseline = doc.get("baseline")
        return cls(
            benchmark_id=str(doc.get("benchmark_id")),
            metric=str(doc.get("metric")),
            estimator=doc.get("estimator"),
            direction=doc.get("direction"),
            rule=doc.get("rule"),
            total=int(doc.get("total") or 0),
            entries=[LeaderboardEntry.from_json(e) for e in doc.get("entries") or []],
            ranks=_dict(doc.get("ranks")),
            baseline=LeaderboardEntry.from_json(baseline) if isinstance(baseline, dict) else None,
            raw=doc,
            part=str(doc.get("part") or "public"),
        )


@dataclass(frozen=True)
class Comparison:
    """A paired-bootstrap comparison of submissions: its request, state and, once it
    succeeded, its result (``pairs``, ``ranks``, the multiple-comparison correction)."""

    id: str
    status: str
    created_at: str | None
    finished_at: str | None
    error: str | None
    request: dict[str, Any]
    result: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Comparison:
        result = doc.get("result")
        return cls(
            id=str(doc["id"]),
            status=str(doc.get("status")),
            created_at=doc.get("created_at"),
            finished_at=doc.get("finished_at"),
            error=doc.get("error"),
            request=_dict(doc.get("request")),
            result=result if isinstance(result, dict) else None,
            raw=doc,
        )

    @property
    def done(self) -> bool:
        """True once the comparison has ended (succeeded, failed or cancelled)."""
        return self.status in TERMINAL

    @property
    def succeeded(self) -> bool:
        """True when the comparison succeeded (its ``result`` is then set)."""
        return self.status == "succeeded"


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's settings (never its targets). ``status`` is ``"open"`` or ``"closed"``
    (closed: the private board is shown, no new submissions); ``private_fraction`` is the
    realised share of private rows (0: no public/private split) and ``n_public`` the number
    of public rows; ``max_final`` the most finals a team may mark."""

    id: str
    name: str
    task: str
    primary_metric: str
    metrics: list[str]
    n: int
    kinds: list[str]
    description: str
    rule: str | None
    n_classes: int | None
    estimators: list[str] | None
    bootstrap: dict[str, Any]
    quota: dict[str, Any]
    baseline_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    status: str = "open"
    closed_at: str | None = None
    max_final: int | None = None
    private_fraction: float = 0.0
    n_public: int | None = None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Benchmark:
        return cls(
            id=str(doc["id"]),
            name=str(doc.get("name")),
            task=str(doc.get("task")),
            primary_metric=str(doc.get("primary_metric")),
            metrics=list(doc.get("metrics") or []),
            n=int(doc.get("n") or 0),
            kinds=list(doc.get("kinds") or []),
            description=str(doc.get("description") or ""),
            rule=doc.get("rule"),
            n_classes=_int(doc.get("n_classes")),
            estimators=doc.get("estimators"),
            bootstrap=_dict(doc.get("bootstrap")),
            quota=_dict(doc.get("quota")),
            baseline_id=doc.get("baseline_id"),
            raw=doc,
            status=str(doc.get("status") or "open"),
            closed_at=doc.get("closed_at"),
            max_final=_int(doc.get("max_final")),
            private_fraction=float(doc.get("private_fraction") or 0.0),
            n_public=_int(doc.get("n_public")),
        )


@dataclass(frozen=True)
class Team:
    """A team: its keys share its submissions and quotas."""

    team_id: str
    name: str
    created_at: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Team:
        return cls(
            team_id=str(doc["team_id"]),
            name=str(doc.get("name")),
            created_at=doc.get("created_at"),
            raw=doc,
        )


@dataclass(frozen=True)
class ApiKey:
    """An API key's record. ``key`` (the secret) is set only on the answer of
    ``create_key``; it is never shown in the repr."""

    key_id: str
    name: str
    role: str
    team_id: str | None
    created_at: str | None
    revoked: bool
    key: str | None = field(default=None, repr=False, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ApiKey:
        return cls(
            key_id=str(doc["key_id"]),
            name=str(doc.get("name")),
            role=str(doc.get("role")),
            team_id=doc.get("team_id"),
            created_at=doc.get("created_at"),
            revoked=bool(doc.get("revoked", False)),
            key=doc.get("key"),
            raw={k: v for k, v in doc.items() if k != "key"},
        )


@dataclass(frozen=True)
class FinalSubmission:
    """A submission that ranks on a benchmark's private board: ``chosen`` is ``"explicit"``
    (marked final by its team) or ``"default"`` (one of the team's best public submissions by
    the primary metric's public value, the team having marked none)."""

    id: str
    model_name: str | None
    chosen: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> FinalSubmission:
        return cls(
            id=str(doc["id"]),
            model_name=doc.get("model_name"),
            chosen=str(doc.get("chosen")),
            raw=doc,
        )


@dataclass(frozen=True)
class TeamFinals:
    """One team's final submissions on a benchmark."""

    team_id: str
    submissions: list[FinalSubmission]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TeamFinals:
        return cls(
            team_id=str(doc["team_id"]),
            submissions=[FinalSubmission.from_json(d) for d in doc.get("submissions") or []],
            raw=doc,
        )
