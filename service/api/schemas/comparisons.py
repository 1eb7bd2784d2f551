"""Paired bootstrap comparisons of submissions on a benchmark."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.schemas.common import (
    BenchmarkId,
    Estimators,
    MetricName,
    PlotLink,
    StrictModel,
)
from service.api.schemas.notifications import CallbackUrl
from service.store import Status


class ComparisonCreate(StrictModel):
    """Compare two or more submissions on one benchmark (paired bootstrap)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "benchmark_id": "bench_0f1e2d3c4b5a6978",
                    "submission_ids": ["sub_a", "sub_b"],
                    "metrics": ["crps"],
                    "n_resamples": 1000,
                    "seed": 0,
                }
            ]
        }
    )

    benchmark_id: BenchmarkId
    submission_ids: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Field(min_length=2, max_length=20),
    ] = Field(description="Succeeded submissions on the benchmark that the key can read.")
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=50)] | None = Field(
        default=None, description="Default: the benchmark's primary metric."
    )
    estimators: Estimators | None = Field(
        default=None,
        description="Classification benchmarks only: also compare every metric that takes an "
        "estimator under each of these (the benchmark's estimators or a metric's own); the "
        "entries are named metric[estimator].",
    )
    n_resamples: int | None = Field(
        default=None,
        ge=10,
        le=100_000,
        description="B. Default: the benchmark's (1000 when its bootstrap is off). Only admins "
        "may choose another (as for seed, level and method: the targets are hidden, and "
        "bootstrap draws of one's own choosing would reveal them bit by bit); another value "
        "from any other key is a 422.",
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        le=2**63 - 1,
        description="Default: the benchmark's seed. Admins only.",
    )
    level: float | None = Field(
        default=None, gt=0, lt=1, description="Default: the benchmark's level. Admins only."
    )
    method: Literal["percentile", "bca"] | None = Field(
        default=None, description="Default: the benchmark's method. Admins only."
    )
    callback_url: CallbackUrl | None = Field(
        default=None,
        description="Where a signed JSON event is POSTed when the comparison ends (see "
        "docs/webhooks.md); needs the key's webhook secret (POST /v1/webhook-secret).",
    )

    @field_validator("submission_ids")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            dup = next(s for i, s in enumerate(v) if s in v[:i])
            raise ValueError(f"submission {dup!r} is listed twice")
        return v


class ComparisonAccepted(BaseModel):
    """A queued comparison (202)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "cmp_5d4c3b2a1f0e",
                    "status": "queued",
                    "status_url": "/v1/comparisons/cmp_5d4c3b2a1f0e",
                }
            ]
        }
    )

    id: str
    status: Status
    status_url: str


class ComparisonDetail(BaseModel):
    """A comparison: its request, status, and result once it succeeded."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "cmp_5d4c3b2a1f0e",
                    "status": "succeeded",
                    "progress": 100.0,
                    "created_at": "2026-01-01T12:00:00Z",
                    "finished_at": "2026-01-01T12:00:02Z",
                    "error": None,
                    "request": {"benchmark_id": "bench_0f1e2d3c4b5a6978"},
                    "result": {
                        "pairs": [
                            {
                                "a": "sub_a",
                                "b": "sub_b",
                                "metrics": {
                                    "crps": {
                                        "diff": -0.02,
                                        "low": -0.03,
                                        "high": -0.01,
                                        "p_better": 0.99,
                                        "p_value": 0.004,
                                        "p_value_adjusted": 0.004,
                                    }
                                },
                            }
                        ],
                        "correction": "Holm step-down adjustment ...",
                    },
                }
            ]
        }
    )

    id: str
    status: Status
    progress: float | None = Field(
        default=None,
        description="Percent done, 0..100, once a worker has started it (it advances as the "
        "resamples are drawn); null while it waits for its first start.",
    )
    created_at: str
    finished_at: str | None = None
    error: str | None = None
    request: dict[str, Any]
    result: dict[str, Any] | None = Field(
        default=None,
        description="submissions (each one's model_name, team_id and team_name), pairs "
        "(A − B per metric: diff, interval, p_better, p_value, p_value_adjusted), ranks (per "
        "metric: each submission's rank distribution), the correction used, B, seed, level.",
    )
    plots: list[PlotLink] = Field(
        default_factory=list,
        description="Once it succeeded, its plots (the forest plot of the paired differences): "
        "GET a url for the PNG, add format=svg for SVG.",
    )
