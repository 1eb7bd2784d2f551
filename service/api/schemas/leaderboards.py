"""A benchmark's leaderboard: its entries and the state of their rank intervals."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.api.schemas.common import PlotLink


class LeaderboardEntry(BaseModel):
    """One team's ranked submission."""

    rank: int = Field(description="1 + the number of teams strictly better (ties share).")
    team_id: str = Field(description="The team's id (a key's id for a key without a team).")
    team_name: str | None = Field(
        default=None, description="The team's name (null for a key without a team)."
    )
    submission_id: str
    model_name: str
    created_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    value: float
    low: float | None = Field(description="Bootstrap interval of the value (null: B = 0).")
    high: float | None
    std: float | None
    rank_low: int | None = Field(
        default=None, description="Rank interval from the bootstrap rank distribution."
    )
    rank_high: int | None = None
    p_best: float | None = Field(default=None, description="Bootstrap probability of rank 1.")
    separable_from_leader: bool | None = Field(
        default=None,
        description="False when the rank interval reaches rank 1: not separable from the "
        "leader (null until the rank distribution is computed).",
    )
    separable_from_baseline: bool | None = Field(
        default=None,
        description="False when the paired bootstrap interval of the difference to the "
        "baseline contains 0 (null without a baseline or until computed).",
    )
    p_value_vs_baseline: float | None = None
    skill_vs_baseline: float | None = Field(
        default=None,
        description="1 − value / the baseline's value: the skill score against the baseline "
        "(uqcore.skill_from_values), for metrics that are scores (lower is better, best 0, "
        "e.g. crps, brier, wis). Null for other metrics, without a baseline, or where the "
        "baseline scores 0.",
    )
    is_baseline: bool = False


class BaselineEntry(BaseModel):
    """The baseline row: the display name the admin set for it and its values on the board,
    nothing of the baseline submission (no id, team, metadata or time)."""

    rank: int = Field(description="Its rank among the teams (1 + the teams strictly better).")
    model_name: str = Field(description='The display name set by an admin (default "baseline").')
    value: float
    low: float | None = Field(description="Bootstrap interval of the value (null: B = 0).")
    high: float | None
    std: float | None
    rank_low: int | None = None
    rank_high: int | None = None
    p_best: float | None = None
    separable_from_leader: bool | None = None
    is_baseline: bool = True


class RankStatus(BaseModel):
    """Whether the rank intervals and flags describe the board as it is now."""

    status: Literal["current", "computing", "stale"] = Field(
        description="current: computed for this board; computing: not yet available; "
        "stale: computed for an earlier board, a recomputation is queued."
    )
    n_resamples: int | None = None
    seed: int | None = None
    level: float | None = None
    method: str | None = Field(
        default=None, description="How the rank intervals and flags were computed."
    )
    multiple_comparison_note: str | None = None


class Leaderboard(BaseModel):
    """A benchmark's leaderboard under one metric, best first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "benchmark_id": "bench_0f1e2d3c4b5a6978",
                    "metric": "crps",
                    "estimator": None,
                    "direction": "lower",
                    "bounds": [0, None],
                    "rule": "best",
                    "total": 1,
                    "offset": 0,
                    "limit": 50,
                    "entries": [
                        {
                            "rank": 1,
                            "team_id": "team_1a2b3c4d5e6f",
                            "team_name": "uq-lab",
                            "submission_id": "sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                            "model_name": "deep-ensemble-5",
                            "created_at": "2026-01-01T12:00:00Z",
                            "metadata": {},
                            "value": 0.41,
                            "low": 0.38,
                            "high": 0.44,
                            "std": 0.015,
                            "rank_low": 1,
                            "rank_high": 1,
                            "p_best": 1.0,
                            "separable_from_leader": None,
                            "separable_from_baseline": True,
                            "p_value_vs_baseline": 0.001,
                            "skill_vs_baseline": 0.18,
                            "is_baseline": False,
                        }
                    ],
                    "baseline": None,
                    "ranks": {"status": "current", "n_resamples": 1000, "seed": 0},
                }
            ]
        }
    )

    benchmark_id: str
    metric: str
    estimator: str | None = Field(
        default=None,
        description="Classification: the estimator the metric is computed for (the metric's "
        "own when none was asked; null for a metric without an estimator).",
    )
    direction: str
    bounds: list[float | None]
    rule: Literal["best", "latest"]
    part: Literal["public", "private"] = Field(
        default="public",
        description="public: ranked on the public rows (the benchmark's rule); private: a "
        "closed benchmark's finals ranked on the private rows (one per team: its best final).",
    )
    total: int = Field(description="Number of ranked teams.")
    offset: int
    limit: int
    entries: list[LeaderboardEntry]
    baseline: BaselineEntry | None = Field(
        description="The benchmark's baseline row, under its display name (a public baseline "
        "that ranks is also its team's entry, marked is_baseline)."
    )
    ranks: RankStatus
    plots: list[PlotLink] = Field(
        default_factory=list,
        description="The board's plots for the same query (metric, estimator): GET a url for "
        "the PNG, add format=svg for SVG.",
    )
