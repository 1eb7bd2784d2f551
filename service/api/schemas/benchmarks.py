"""Benchmarks: their settings, creation (JSON and NPZ), changes and metadata."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from service.analyses import MAX_PARAMS_BYTES
from service.api.schemas.common import (
    Estimators,
    Groups,
    Kind,
    Labels,
    Matrix,
    MetricName,
    StrictModel,
    Vector,
    check_json_value,
)

_CURVES_DOC = (
    '"none": a submission\'s result carries no curves; "coarse": it carries the curves that '
    "apply on a coarse fixed grid (at most 20 points, each averaging at least 50 rows; "
    "docs/hidden-targets.md), and their plots are shown to every reader."
)
_BASELINE_NAME_DOC = (
    'The model name shown in the baseline row of the leaderboards (null: "baseline"); '
    "nothing else of the baseline submission is shown."
)


class QuotaOptions(StrictModel):
    """Submissions per team: at most ``per_day`` in any 24 h and ``total`` in all (null: no
    limit). A job failed by the system (not by its input) is not counted."""

    per_day: int | None = Field(default=None, ge=1, le=1_000_000)
    total: int | None = Field(default=None, ge=1, le=100_000_000)


class BenchmarkBootstrap(StrictModel):
    """The bootstrap of every submission's metrics (intervals on the leaderboard)."""

    n_resamples: int = Field(default=1000, ge=0, le=100_000)
    method: Literal["percentile", "bca"] = "percentile"
    level: float = Field(default=0.95, gt=0, lt=1)
    unit: Literal["row", "cluster"] = Field(
        default="row", description="cluster: resample whole groups (needs groups)."
    )


class BenchmarkSettings(StrictModel):
    """The metadata of a benchmark that an admin may change after creation."""

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=10_000)
    primary_metric: MetricName = Field(description="The default metric of the leaderboard.")
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=200)] | None = Field(
        default=None,
        description="Metrics computed and shown (default: the primary metric only).",
    )
    rule: Literal["best", "latest"] = Field(
        default="best", description="Which submission of a team ranks: its best or its latest."
    )
    quota: QuotaOptions = Field(default_factory=QuotaOptions)
    public_board: bool = Field(
        default=False,
        description="The leaderboard's web page (/ui/benchmarks/{id}) is shown to visitors "
        "without a key (read-only); otherwise it needs a key or a share link.",
    )
    curves: Literal["none", "coarse"] = Field(
        default="none",
        description=_CURVES_DOC,
    )
    baseline_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=_BASELINE_NAME_DOC,
    )
    max_final: int = Field(
        default=2,
        ge=1,
        le=100,
        description="The most submissions a team may mark final (PATCH /v1/submissions/{id} "
        '{"final": true}); only finals rank on the private board. A team that marks none '
        "has its best max_final public submissions by the primary metric's public value.",
    )


_SPLIT_DOC = (
    "Public/private split of the rows (fixed at creation): while the benchmark is open every "
    "result, board, comparison and plot is computed on the public rows only; the private "
    "rows rank the finals on the private board once it is closed."
)

_ESTIMATORS_DOC = (
    "Classification only: estimators with their own leaderboards (metric[estimator]) for "
    "every metric that takes an estimator, besides the metric's own (its params.estimator, "
    "default one_minus_max_prob_bma). A built-in aggregator (GET /v1/metrics lists them "
    "with the metrics) or the name of an estimate that submissions carry "
    "(prediction.estimates / estimate:<name>); a submission without it is not ranked on "
    "that estimator's boards."
)


class BenchmarkRequest(BenchmarkSettings):
    """Everything of a new benchmark but its arrays (the ``request`` member of an NPZ upload)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "cityscapes-depth-val",
                    "primary_metric": "crps",
                    "metrics": ["crps", "ause"],
                    "bootstrap": {"n_resamples": 1000, "unit": "cluster"},
                }
            ]
        }
    )

    task: Literal["regression", "classification"] = Field(
        default="regression",
        description="regression: targets y; classification: labels (optionally soft_labels "
        "and ood). Metrics are those of the task.",
    )
    kinds: Annotated[list[Kind], Field(min_length=1)] | None = Field(
        default=None,
        description="Prediction kinds accepted, all of the task (default: every kind of it).",
    )
    n_classes: int | None = Field(
        default=None,
        ge=2,
        le=1_000_000,
        description="Classification only: the number of classes C every prediction must "
        "have (default: the width of soft_labels if given, else any C above every label).",
    )
    estimators: Estimators | None = Field(default=None, description=_ESTIMATORS_DOC)
    params: dict[MetricName, dict[str, JsonValue]] = Field(default_factory=dict)
    bootstrap: BenchmarkBootstrap = Field(default_factory=BenchmarkBootstrap)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    private_fraction: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description=_SPLIT_DOC + " The share of private rows, drawn with a secret seed of the "
        "server (never `seed`); 0: no split. Or give private_mask.",
    )

    @field_validator("params")
    @classmethod
    def _params_json(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        # A JSON value escapes the strict number rules: NaN, inf and 10**400 are refused here.
        return check_json_value(v, "params", MAX_PARAMS_BYTES)  # type: ignore[no-any-return]


class BenchmarkCreate(BenchmarkRequest):
    """A new benchmark with its hidden targets (JSON; never readable back by submitters)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "uci-boston-split-3",
                    "task": "regression",
                    "description": "Boston housing, split 3 of 20.",
                    "primary_metric": "crps",
                    "metrics": ["crps", "nll", "mae"],
                    "rule": "best",
                    "quota": {"per_day": 5, "total": 100},
                    "y": [0.0, 2.0, 3.0],
                }
            ]
        }
    )

    y: Vector | None = Field(
        default=None,
        description="Regression (required): the hidden targets, N finite values.",
    )
    labels: Labels | None = Field(
        default=None,
        description="Classification (required): the hidden labels, N class indices in [0, C).",
    )
    soft_labels: Matrix | None = Field(
        default=None,
        description="Classification, optional: hidden label distributions, N×C rows on the "
        "simplex (e.g. annotator votes); the aleatoric metrics need them.",
    )
    ood: Annotated[list[bool], Field(min_length=1)] | None = Field(
        default=None,
        description="Classification, optional: hidden flags, N values, true = "
        "out-of-distribution sample; the OOD-detection metrics need them.",
    )
    groups: Groups | None = Field(
        default=None,
        description="Optional group label per row (stratified metrics, cluster "
        "bootstrap), e.g. image ids for per-pixel data.",
    )
    private_mask: Annotated[list[bool], Field(min_length=1)] | None = Field(
        default=None,
        description=_SPLIT_DOC + " N booleans, true = private row (NPZ: member "
        "private_mask); not with private_fraction.",
    )


class BenchmarkUpdate(StrictModel):
    """Fields to change (the targets cannot be changed: create a new benchmark)."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)
    primary_metric: MetricName | None = None
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=200)] | None = None
    rule: Literal["best", "latest"] | None = None
    quota: QuotaOptions | None = None
    public_board: bool | None = Field(
        default=None, description="Show the leaderboard's web page without a key."
    )
    baseline_id: str | None = Field(
        default=None,
        max_length=100,
        description="A succeeded submission on this benchmark shown as the baseline row "
        "(null: none).",
    )
    baseline_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=_BASELINE_NAME_DOC,
    )
    curves: Literal["none", "coarse"] | None = Field(
        default=None,
        description="Curves of submissions made from then on: " + _CURVES_DOC,
    )
    estimators: Estimators | None = Field(
        default=None,
        description="Classification only: replaces the estimators with their own "
        "leaderboards (null: none); computed for submissions made from then on.",
    )
    max_final: int | None = Field(
        default=None, ge=1, le=100, description="The most finals a team may mark."
    )
    status: Literal["open", "closed"] | None = Field(
        default=None,
        description='"closed" closes the benchmark for good: no new submissions, finals '
        "fixed, the private board revealed. A closed benchmark never reopens (409).",
    )
    private_fraction: float | None = Field(
        default=None, description="Cannot be changed: the split is fixed at creation (422)."
    )
    private_mask: list[bool] | None = Field(
        default=None, description="Cannot be changed: the split is fixed at creation (422)."
    )


BENCHMARK_EXAMPLE: dict[str, Any] = {
    "id": "bench_0f1e2d3c4b5a6978",
    "name": "uci-boston-split-3",
    "task": "regression",
    "description": "Boston housing, split 3 of 20.",
    "primary_metric": "crps",
    "metrics": ["crps", "nll", "mae"],
    "rule": "best",
    "kinds": ["gaussian", "samples"],
    "n": 102,
    "has_groups": False,
    "params": {},
    "bootstrap": {"n_resamples": 1000, "method": "percentile", "level": 0.95, "unit": "row"},
    "seed": 0,
    "quota": {"per_day": 5, "total": 100},
    "baseline_id": None,
    "baseline_name": None,
    "curves": "none",
    "created_at": "2026-01-01T12:00:00Z",
    "updated_at": "2026-01-01T12:00:00Z",
    "n_classes": None,
    "has_soft_labels": False,
    "has_ood": False,
    "estimators": None,
    "public_board": False,
    "status": "open",
    "closed_at": None,
    "max_final": 2,
    "private_fraction": 0.0,
    "n_public": 102,
}


class BenchmarkInfo(BaseModel):
    """A benchmark's metadata (never its targets)."""

    model_config = ConfigDict(json_schema_extra={"examples": [BENCHMARK_EXAMPLE]})

    id: str
    name: str
    task: str
    description: str
    primary_metric: str
    metrics: list[str]
    rule: Literal["best", "latest"]
    kinds: list[str]
    n: int = Field(description="Number of targets a prediction must have.")
    has_groups: bool
    params: dict[str, Any]
    bootstrap: dict[str, Any]
    seed: int
    quota: QuotaOptions
    baseline_id: str | None = Field(
        description="The baseline submission's id: shown to admins only (null for every "
        "other reader, and without a baseline)."
    )
    baseline_name: str | None = Field(
        default=None,
        description='The model name of the baseline row (null: shown as "baseline").',
    )
    curves: Literal["none", "coarse"] = Field(
        default="none", description="Whether submissions' results carry coarse curves."
    )
    created_at: str
    updated_at: str
    n_classes: int | None = Field(
        default=None,
        description="Classification: the number of classes a prediction must have (null: "
        "any number above every label).",
    )
    has_soft_labels: bool = Field(
        default=False, description="Classification: hidden soft labels are held."
    )
    has_ood: bool = Field(default=False, description="Classification: hidden OOD flags are held.")
    estimators: list[str] | None = Field(
        default=None,
        description="Classification: the estimators with their own leaderboards "
        "(metric[estimator]) besides each metric's own.",
    )
    public_board: bool = Field(
        default=False, description="The leaderboard's web page is shown without a key."
    )
    status: Literal["open", "closed"] = Field(
        default="open", description="closed: no new submissions; the private board is shown."
    )
    closed_at: str | None = Field(default=None, description="When it was closed.")
    max_final: int = Field(default=2, description="The most finals a team may mark.")
    private_fraction: float = Field(
        default=0.0, description="The realised share of private rows (0: no split)."
    )
    n_public: int = Field(
        description="Rows of the public part (every answer is computed on these while open)."
    )


class FinalSubmission(BaseModel):
    """A submission that ranks on the private board."""

    id: str
    model_name: str
    chosen: Literal["explicit", "default"] = Field(
        description="explicit: marked final by its team; default: one of its best public "
        "submissions (the team marked none)."
    )


class TeamFinals(BaseModel):
    """A team's final submissions on a benchmark."""

    team_id: str
    submissions: list[FinalSubmission]


class FinalsList(BaseModel):
    """The finals of a benchmark: every team's for admins, the caller's team's otherwise."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "benchmark_id": "bench_0f1e2d3c4b5a6978",
                    "max_final": 2,
                    "teams": [
                        {
                            "team_id": "team_1a2b3c4d5e6f",
                            "submissions": [
                                {
                                    "id": "sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                                    "model_name": "deep-ensemble-5",
                                    "chosen": "explicit",
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    )

    benchmark_id: str
    max_final: int
    teams: list[TeamFinals]


class BenchmarkList(BaseModel):
    """Every benchmark, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"benchmarks": [BENCHMARK_EXAMPLE]}]})

    benchmarks: list[BenchmarkInfo]
