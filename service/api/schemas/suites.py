"""Benchmark suites: their definition and their leaderboard (aggregates over tasks)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.models import MetricName, StrictModel

__all__ = [
    "SuiteAggregate",
    "SuiteCreate",
    "SuiteExcluded",
    "SuiteInfo",
    "SuiteIntervals",
    "SuiteLeaderboard",
    "SuiteList",
    "SuiteRow",
    "SuiteTask",
    "SuiteTaskInfo",
    "SuiteUpdate",
]

_TASKS: list[Any] = [
    {"benchmark_id": "bench_0f1e2d3c4b5a6978", "metric": "crps"},
    {"benchmark_id": "bench_1a2b3c4d5e6f7a8b", "metric": "mae"},
]

_SUITE: dict[str, Any] = {
    "id": "suite_5e6f7a8b9c0d1e2f",
    "name": "Energy forecasting",
    "description": "Three load datasets.",
    "tasks": _TASKS,
    "baseline_team": None,
    "missing": "exclude",
    "selection": "board",
    "n_resamples": 1000,
    "level": 0.95,
    "seed": 0,
    "public_board": False,
    "created_at": "2026-01-01T12:00:00Z",
    "updated_at": "2026-01-01T12:00:00Z",
}

_ROW: dict[str, Any] = {
    "rank": 1,
    "rank_low": 1,
    "rank_high": 2,
    "team_id": "team_3c4d5e6f7a8b9c0d",
    "team_name": "red",
    "n_tasks": 2,
    "mean_rank": {"value": 1.5, "low": 1.0, "high": 2.0},
    "win_rate": {"value": 0.75, "low": 0.5, "high": 1.0},
    "gm_skill": {"value": 0.12, "low": 0.05, "high": 0.2},
    "values": [0.41, 0.87],
    "task_ranks": [1.0, 2.0],
    "imputed": [],
}

Missing = Literal["exclude", "impute_baseline"]
Selection = Literal["board", "final"]


class SuiteTask(StrictModel):
    """One task of a suite: a benchmark and one of its metrics."""

    benchmark_id: str = Field(min_length=1, max_length=100)
    metric: MetricName | None = Field(
        default=None, description="One of the benchmark's metrics (default: its primary metric)."
    )


class _SuiteFields(StrictModel):
    description: str = Field(default="", max_length=10_000)
    baseline_team: str | None = Field(
        default=None,
        max_length=100,
        description="The team whose entries are the baseline of gm_skill (and fill gaps "
        "under missing=impute_baseline); null: each task's benchmark baseline submission.",
    )
    missing: Missing = Field(
        default="exclude",
        description="exclude: a team lacking a task is left out (listed with the tasks it "
        "lacks); impute_baseline: the baseline's value fills the gap.",
    )
    selection: Selection = Field(
        default="board",
        description="board: each team's entry on the task's board (the benchmark's rule); "
        "final: its best final submission (marked, else its default finals: "
        "GET /v1/benchmarks/{id}/finals), by its value on the private rows once the "
        "benchmark is closed (its private board's value), else on the public rows.",
    )
    n_resamples: int = Field(default=1000, ge=10, le=10_000, description="Resamples B.")
    level: float = Field(default=0.95, gt=0.0, lt=1.0, description="Interval level.")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the resampling.")
    public_board: bool = Field(
        default=False, description="Show the suite's web page without a key."
    )


class SuiteCreate(_SuiteFields):
    """A new suite (admin)."""

    name: str = Field(min_length=1, max_length=200)
    tasks: list[SuiteTask] = Field(
        min_length=1, max_length=100, description="1..100 tasks, distinct benchmarks."
    )


class SuiteUpdate(StrictModel):
    """Fields to change (admin); a field left out keeps its value."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)
    tasks: list[SuiteTask] | None = Field(default=None, min_length=1, max_length=100)
    baseline_team: str | None = Field(default=None, max_length=100)
    missing: Missing | None = None
    selection: Selection | None = None
    n_resamples: int | None = Field(default=None, ge=10, le=10_000)
    level: float | None = Field(default=None, gt=0.0, lt=1.0)
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    public_board: bool | None = None


class SuiteTaskInfo(BaseModel):
    benchmark_id: str
    metric: str


class SuiteInfo(BaseModel):
    """A suite's definition."""

    model_config = ConfigDict(json_schema_extra={"examples": [_SUITE]})

    id: str
    name: str
    description: str
    tasks: list[SuiteTaskInfo]
    baseline_team: str | None
    missing: Missing
    selection: Selection
    n_resamples: int
    level: float
    seed: int
    public_board: bool
    created_at: str
    updated_at: str


class SuiteList(BaseModel):
    """Every suite, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"suites": [_SUITE]}]})

    suites: list[SuiteInfo]


class SuiteAggregate(BaseModel):
    """An aggregate with its percentile interval (null until the intervals are computed)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class SuiteRow(BaseModel):
    """One ranked team."""

    rank: int = Field(description="1 + the number of teams with a strictly lower mean rank.")
    rank_low: int | None = Field(default=None, description="Rank interval over the resamples.")
    rank_high: int | None = None
    team_id: str
    team_name: str | None = None
    n_tasks: int = Field(description="Tasks with the team's own entry (not imputed).")
    mean_rank: SuiteAggregate
    win_rate: SuiteAggregate
    gm_skill: SuiteAggregate
    values: list[float | None] = Field(
        description="The team's value on each task, in the order of the answer's tasks "
        "(null: it lacks the task and nothing fills it)."
    )
    task_ranks: list[float | None] = Field(
        description="Its average rank on each task among the ranked teams (ties share)."
    )
    imputed: list[int] = Field(
        default_factory=list,
        description="Indices of the tasks whose value is the baseline's (missing=impute_baseline).",
    )


class SuiteExcluded(BaseModel):
    """A team left out by missing=exclude, with the tasks it lacks."""

    team_id: str
    team_name: str | None = None
    missing_tasks: list[SuiteTaskInfo]


class SuiteIntervals(BaseModel):
    """Whether the intervals describe the suite as it is now."""

    status: Literal["current", "computing", "stale"] = Field(
        description="current: computed for the member boards as they are; computing: not "
        "yet available; stale: computed for earlier boards, a recomputation is queued."
    )
    warnings: list[str] = Field(default_factory=list)


class SuiteLeaderboard(BaseModel):
    """A suite's leaderboard: teams by mean rank over the tasks, with win rate and
    geometric-mean skill, each with an interval whose unit is ``unit``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "suite_id": _SUITE["id"],
                    "name": _SUITE["name"],
                    "view": "rows",
                    "unit": "rows within tasks",
                    "n_resamples": 1000,
                    "level": 0.95,
                    "seed": 0,
                    "missing": "exclude",
                    "selection": "board",
                    "baseline": "benchmark baselines",
                    "tasks": _TASKS,
                    "gm_skill_reason": None,
                    "total": 1,
                    "offset": 0,
                    "limit": 50,
                    "entries": [_ROW],
                    "excluded": [
                        {
                            "team_id": "team_9c0d1e2f3a4b5c6d",
                            "team_name": "blue",
                            "missing_tasks": [_TASKS[1]],
                        }
                    ],
                    "intervals": {"status": "current", "warnings": []},
                }
            ]
        }
    )

    suite_id: str
    name: str
    view: Literal["rows", "tasks"]
    unit: str = Field(description='"rows within tasks" or "tasks within the suite".')
    n_resamples: int
    level: float
    seed: int
    missing: Missing
    selection: Selection
    baseline: str = Field(description="The baseline: a team id, or 'benchmark baselines'.")
    tasks: list[SuiteTaskInfo]
    gm_skill_reason: str | None = Field(
        default=None, description="Why gm_skill is null for every team, when it is."
    )
    total: int
    offset: int
    limit: int
    entries: list[SuiteRow]
    excluded: list[SuiteExcluded]
    intervals: SuiteIntervals
