"""Benchmark suites as the client reads them: a suite's definition and its leaderboard (mean
rank, win rate and geometric-mean skill per team, each with an interval whose unit the answer
states). See docs/suites.md for the definitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uqeval.errors import BadRequest

__all__ = [
    "Suite",
    "SuiteAggregate",
    "SuiteExcluded",
    "SuiteLeaderboard",
    "SuiteRow",
    "SuiteTask",
    "task_list",
]


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def task_list(tasks: Any) -> list[dict[str, Any]]:
    """The API's ``tasks`` from benchmark ids (or Benchmarks), ``(benchmark, metric)`` pairs,
    or ``{"benchmark_id", "metric"}`` mappings; a task without a metric takes the benchmark's
    primary metric (on the server)."""
    if isinstance(tasks, (str, Mapping)) or not hasattr(tasks, "__iter__"):
        tasks = [tasks]
    out: list[dict[str, Any]] = []
    for task in tasks:
        if isinstance(task, Mapping):
            doc = dict(task)
            if "benchmark_id" in doc:
                doc["benchmark_id"] = getattr(doc["benchmark_id"], "id", doc["benchmark_id"])
        elif isinstance(task, tuple) and len(task) == 2:
            doc = {"benchmark_id": getattr(task[0], "id", task[0]), "metric": task[1]}
        else:
            doc = {"benchmark_id": getattr(task, "id", task)}
        if not isinstance(doc.get("benchmark_id"), str) or not doc["benchmark_id"]:
            raise BadRequest(
                f"each task is a benchmark id, a (benchmark, metric) pair or a mapping with "
                f"benchmark_id; found {task!r}",
                field="tasks",
            )
        if doc.get("metric") is None:
            doc.pop("metric", None)
        out.append(doc)
    return out


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite: a benchmark and the metric it is ranked on."""

    benchmark_id: str
    metric: str | None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SuiteTask:
        return cls(benchmark_id=str(doc.get("benchmark_id")), metric=doc.get("metric"))


@dataclass(frozen=True)
class Suite:
    """A suite's definition: its tasks, baseline (a team, or None: each benchmark's baseline
    submission), the rule for missing results (``exclude`` or ``impute_baseline``), how a
    team's submission is chosen per task (``board`` or ``final``) and the resampling."""

    id: str
    name: str
    description: str
    tasks: list[SuiteTask]
    baseline_team: str | None
    missing: str
    selection: str
    n_resamples: int
    level: float
    seed: int
    public_board: bool
    created_at: str | None
    updated_at: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Suite:
        return cls(
            id=str(doc["id"]),
            name=str(doc.get("name")),
            description=str(doc.get("description") or ""),
            tasks=[SuiteTask.from_json(t) for t in doc.get("tasks") or []],
            baseline_team=doc.get("baseline_team"),
            missing=str(doc.get("missing")),
            selection=str(doc.get("selection")),
            n_resamples=int(doc.get("n_resamples") or 0),
            level=float(doc.get("level") or 0.0),
            seed=int(doc.get("seed") or 0),
            public_board=bool(doc.get("public_board", False)),
            created_at=doc.get("created_at"),
            updated_at=doc.get("updated_at"),
            raw=doc,
        )


@dataclass(frozen=True)
class SuiteAggregate:
    """An aggregate and its percentile interval (``low``/``high`` None until the service has
    computed the intervals; ``value`` None where the aggregate is undefined)."""

    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def from_json(cls, doc: Any) -> SuiteAggregate:
        doc = doc if isinstance(doc, dict) else {}
        return cls(
            value=_float(doc.get("value")), low=_float(doc.get("low")), high=_float(doc.get("high"))
        )


@dataclass(frozen=True)
class SuiteRow:
    """One ranked team: its mean rank, win rate and geometric-mean skill with intervals, its
    rank interval, and its value and rank on each task (in the order of the board's
    ``tasks``); ``imputed`` lists the tasks whose value is the baseline's."""

    rank: int
    rank_low: int | None
    rank_high: int | None
    team_id: str
    team_name: str | None
    n_tasks: int
    mean_rank: SuiteAggregate
    win_rate: SuiteAggregate
    gm_skill: SuiteAggregate
    values: list[float | None]
    task_ranks: list[float | None]
    imputed: list[int]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SuiteRow:
        return cls(
            rank=int(doc.get("rank") or 0),
            rank_low=_int(doc.get("rank_low")),
            rank_high=_int(doc.get("rank_high")),
            team_id=str(doc.get("team_id")),
            team_name=doc.get("team_name"),
            n_tasks=int(doc.get("n_tasks") or 0),
            mean_rank=SuiteAggregate.from_json(doc.get("mean_rank")),
            win_rate=SuiteAggregate.from_json(doc.get("win_rate")),
            gm_skill=SuiteAggregate.from_json(doc.get("gm_skill")),
            values=[_float(v) for v in doc.get("values") or []],
            task_ranks=[_float(v) for v in doc.get("task_ranks") or []],
            imputed=[int(i) for i in doc.get("imputed") or []],
            raw=doc,
        )


@dataclass(frozen=True)
class SuiteExcluded:
    """A team left out by ``missing="exclude"``, with the tasks it lacks."""

    team_id: str
    team_name: str | None
    missing_tasks: list[SuiteTask]

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SuiteExcluded:
        return cls(
            team_id=str(doc.get("team_id")),
            team_name=doc.get("team_name"),
            missing_tasks=[SuiteTask.from_json(t) for t in doc.get("missing_tasks") or []],
        )


@dataclass(frozen=True)
class SuiteLeaderboard:
    """A suite's leaderboard page, best mean rank first. ``unit`` is what the intervals
    resample (``"rows within tasks"`` or ``"tasks within the suite"``, by ``view``);
    ``status`` says whether they describe the member boards as they are now (``current``),
    are being computed (``computing``) or describe earlier boards (``stale``)."""

    suite_id: str
    name: str
    view: str
    unit: str
    n_resamples: int
    level: float
    seed: int
    missing: str
    selection: str
    baseline: str
    tasks: list[SuiteTask]
    gm_skill_reason: str | None
    total: int
    offset: int
    limit: int
    entries: list[SuiteRow]
    excluded: list[SuiteExcluded]
    status: str
    warnings: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SuiteLeaderboard:
        intervals = doc.get("intervals") if isinstance(doc.get("intervals"), dict) else {}
        assert isinstance(intervals, dict)
        return cls(
            suite_id=str(doc.get("suite_id")),
            name=str(doc.get("name")),
            view=str(doc.get("view")),
            unit=str(doc.get("unit")),
            n_resamples=int(doc.get("n_resamples") or 0),
            level=float(doc.get("level") or 0.0),
            seed=int(doc.get("seed") or 0),
            missing=str(doc.get("missing")),
            selection=str(doc.get("selection")),
            baseline=str(doc.get("baseline")),
            tasks=[SuiteTask.from_json(t) for t in doc.get("tasks") or []],
            gm_skill_reason=doc.get("gm_skill_reason"),
            total=int(doc.get("total") or 0),
            offset=int(doc.get("offset") or 0),
            limit=int(doc.get("limit") or 0),
            entries=[SuiteRow.from_json(e) for e in doc.get("entries") or []],
            excluded=[SuiteExcluded.from_json(e) for e in doc.get("excluded") or []],
            status=str(intervals.get("status")),
            warnings=[str(w) for w in intervals.get("warnings") or []],
            raw=doc,
        )
