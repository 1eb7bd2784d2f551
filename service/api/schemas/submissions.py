"""Submissions: the request bodies (JSON and NPZ), the answers, the result document, listings."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from service.analyses import Analyses
from service.api.schemas.common import (
    BenchmarkId,
    Groups,
    Kind,
    Labels,
    Matrix,
    PlotLink,
    StrictModel,
    Vector,
    Visibility,
    check_json_value,
)
from service.api.schemas.notifications import CallbackUrl
from service.api.schemas.predictions import Prediction
from service.kinds import CLASSIFICATION_KINDS
from service.store import Status

ModelName = Annotated[str, Field(min_length=1, max_length=200)]

MAX_METADATA_BYTES = 16 * 1024


class SubmissionFields(StrictModel):
    """The non-array members of a submission (shared by the JSON and the NPZ body)."""

    model_name: ModelName = Field(description="Name of the evaluated model.")
    metadata: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Free-form JSON object kept with the submission (≤ 16 KiB).",
    )
    analyses: Analyses = Field(
        default_factory=Analyses,
        description="What to compute (inline targets only: a benchmark sets its own analyses).",
    )
    visibility: Visibility = Field(
        default="private",
        description="private: your team (and admins) only; public: readable by every key and "
        "ranked on the benchmark's leaderboards.",
    )
    benchmark_id: BenchmarkId | None = Field(
        default=None,
        description="Evaluate against this benchmark's hidden targets (then send no y, "
        "sample_weight, groups or analyses).",
    )

    callback_url: CallbackUrl | None = Field(
        default=None,
        description="Where a signed JSON event is POSTed when the job ends (see "
        "docs/webhooks.md); needs the key's webhook secret (POST /v1/webhook-secret).",
    )

    @model_validator(mode="after")
    def _benchmark_sets_analyses(self) -> SubmissionFields:
        if self.benchmark_id is not None and "analyses" in self.model_fields_set:
            raise ValueError(
                "analyses cannot be given with a benchmark_id: the benchmark sets the metrics, "
                "bootstrap and seed of its submissions"
            )
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata_json(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_json_value(v, "metadata", MAX_METADATA_BYTES)  # type: ignore[no-any-return]


class SubmissionCreate(SubmissionFields):
    """A submission as a JSON body: prediction arrays and targets inline."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_name": "deep-ensemble-5",
                    "metadata": {"dataset": "uci-boston", "split": 3},
                    "prediction": {
                        "kind": "gaussian",
                        "mean": [0.1, 1.9, 3.2],
                        "std": [0.5, 0.4, 0.6],
                    },
                    "y": [0.0, 2.0, 3.0],
                    "analyses": {
                        "metrics": ["mae", "nll", "crps"],
                        "bootstrap": {"n_resamples": 200},
                    },
                }
            ]
        }
    )

    prediction: Prediction = Field(description='The prediction; its "kind" selects the arrays.')
    y: Vector | None = Field(
        default=None,
        description="Regression targets, N finite values (required for a regression kind "
        "without a benchmark_id).",
    )
    labels: Labels | None = Field(
        default=None,
        description="Classification targets: N class indices in [0, C) (required for a "
        "classification kind).",
    )
    soft_labels: Matrix | None = Field(
        default=None,
        description="Classification only, optional: label distributions, N×C rows on the simplex.",
    )
    ood: Annotated[list[bool], Field(min_length=1)] | None = Field(
        default=None,
        description="Classification only, optional: N flags, true = out-of-distribution sample.",
    )
    sample_weight: Vector | None = Field(
        default=None, description="Optional frequency weights, N values >= 0, not all zero."
    )
    groups: Groups | None = Field(
        default=None, description="Optional group label per row (N integers)."
    )

    @model_validator(mode="after")
    def _targets_xor_benchmark(self) -> SubmissionCreate:
        classification = self.prediction.kind in CLASSIFICATION_KINDS
        if classification:
            if self.labels is None and self.benchmark_id is None:
                raise ValueError(
                    "labels (the class indices) are required for a classification kind "
                    "unless a benchmark_id is given"
                )
            if self.y is not None:
                raise ValueError("a classification kind takes labels, not y")
        else:
            for name in ("labels", "soft_labels", "ood"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} apply to classification kinds only")
        if self.benchmark_id is None and self.y is None and not classification:
            raise ValueError("y (the targets) is required unless a benchmark_id is given")
        if self.benchmark_id is not None:
            for name in ("y", "labels", "soft_labels", "ood", "sample_weight", "groups"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} cannot be sent with a benchmark_id: the benchmark holds the "
                        "targets (and groups)"
                    )
        return self


class SubmissionRequest(SubmissionFields):
    """The JSON document in the ``request`` member of an NPZ upload (everything but arrays)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kind": "gaussian",
                    "model_name": "deep-ensemble-5",
                    "metadata": {"dataset": "uci-boston"},
                    "analyses": {"metrics": "all"},
                }
            ]
        }
    )

    kind: Kind = Field(description="The prediction kind; the NPZ holds its arrays.")


class SubmissionUpdate(StrictModel):
    """A change of a submission: its visibility, and/or whether it is final."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"visibility": "public"}]})

    final: bool | None = Field(
        default=None,
        description="Mark (true) or unmark (false) a succeeded benchmark submission as one of "
        "its team's finals (those rank on the private board once the benchmark is closed); "
        "at most the benchmark's max_final, and only while it is open (409).",
    )
    visibility: Visibility | None = Field(
        default=None,
        description="private: your team (and admins) only; public: readable by every key and, "
        "once it succeeded, ranked on its benchmark's leaderboards. A succeeded submission "
        "made private leaves the leaderboards at once (its team's next best or latest public "
        "submission takes its place); made public it enters them.",
    )


class SubmissionAccepted(BaseModel):
    """The answer to an accepted submission (202)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                    "status": "queued",
                    "status_url": "/v1/submissions/sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                    "queue_position": 0,
                    "created_at": "2026-01-01T12:00:00Z",
                    "replayed": False,
                }
            ]
        }
    )

    id: str
    status: Status
    status_url: str = Field(description="Where to poll: GET this URL.")
    queue_position: int | None = Field(
        description="0-based position among queued jobs; null once the job left the queue."
    )
    created_at: str
    replayed: bool = Field(
        description="True when this answers a repeated request with the same Idempotency-Key."
    )


class Interval(BaseModel):
    """A bootstrap confidence interval."""

    model_config = ConfigDict(extra="allow")

    low: float | None = None
    high: float | None = None
    std: float | None = None
    method: str | None = None
    level: float | None = None
    n_resamples: int | None = None


class MetricResult(BaseModel):
    """One metric's value with its parameters and conventions."""

    model_config = ConfigDict(extra="allow")

    value: float | None = Field(description="null when undefined on this input (see warnings).")
    params: dict[str, Any] = Field(default_factory=dict)
    direction: str | None = None
    bounds: list[float | None] | None = None
    interval: Interval | None = None


class Provenance(BaseModel):
    """How the result was computed."""

    model_config = ConfigDict(extra="allow")

    uqcore_version: str | None = None
    backend: str | None = None
    device: str | None = None
    input_hash: str | None = None
    n: int | None = None
    kind: str | None = None
    seed: int | None = None
    timings_s: dict[str, float | None] = Field(default_factory=dict)


class Result(BaseModel):
    """The result document of a succeeded submission.

    A classification submission with ``analyses.estimators`` adds ``estimators`` (the names,
    built-in aggregators then submitted estimates), ``by_estimator`` (metric -> estimator ->
    value, for every metric that takes an estimator) and, when bootstrapped,
    ``by_estimator_intervals`` (metric -> estimator -> interval)."""

    model_config = ConfigDict(extra="allow")

    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    not_applicable: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    curves: dict[str, Any] = Field(
        default_factory=dict,
        description="The curves behind the metrics, with analyses.curves only: every curve of "
        "uqcore.curves that applies (name -> its fields, as uqcore.curves.curve_to_json "
        "gives them; uqcore.curves.curve_from_json reads them back); {} otherwise.",
    )
    plots: list[PlotLink] = Field(
        default_factory=list,
        description="The plots of this submission (GET its url for PNG, add format=svg for "
        "SVG): those drawn from curves that apply to the prediction and the inputs sent, and "
        "those drawn from result fields it holds (stability, by_estimator). A benchmark "
        "submission lists only the latter (its curves would reveal the hidden targets).",
    )
    stability: dict[str, Any] | None = None
    provenance: Provenance = Field(default_factory=Provenance)


class SubmissionSummary(BaseModel):
    """A submission in a listing."""

    id: str
    status: Status
    progress: float = Field(description="Percent done, 0..100.")
    model_name: str
    kind: str
    n: int
    queue: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    error: str | None = Field(description="Why it failed (failed jobs only).")
    team_id: str | None = Field(default=None, description="The submitting team.")
    visibility: Visibility = "private"
    benchmark_id: str | None = Field(
        default=None, description="The benchmark it is evaluated on (null: inline targets)."
    )
    final: bool = Field(
        default=False, description="Marked final by its team (ranks on the private board)."
    )


class SubmissionDetail(SubmissionSummary):
    """A submission: status, progress, timings, and the results once it succeeded."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                    "status": "succeeded",
                    "progress": 100.0,
                    "model_name": "deep-ensemble-5",
                    "kind": "gaussian",
                    "n": 3,
                    "queue": "cpu",
                    "created_at": "2026-01-01T12:00:00Z",
                    "started_at": "2026-01-01T12:00:00.1Z",
                    "finished_at": "2026-01-01T12:00:00.3Z",
                    "error": None,
                    "metadata": {"dataset": "uci-boston"},
                    "analyses": {"metrics": ["mae"]},
                    "attempts": 1,
                    "queue_position": None,
                    "cancel_requested": False,
                    "result": {
                        "metrics": {
                            "mae": {
                                "value": 0.1333,
                                "params": {},
                                "direction": "lower",
                                "bounds": [0, None],
                            }
                        },
                        "not_applicable": {},
                        "warnings": [],
                        "provenance": {"uqcore_version": "0.1.0", "backend": "numpy"},
                    },
                }
            ]
        }
    )

    metadata: dict[str, Any]
    analyses: dict[str, Any] = Field(description="The normalised analyses request.")
    attempts: int
    queue_position: int | None
    cancel_requested: bool
    result: Result | None = Field(description="The results (succeeded jobs only).")
    private_result: Result | None = Field(
        default=None,
        description="A split benchmark's submission, once the benchmark is closed: the same "
        "results on its private rows (its team and admins only; null while open).",
    )


class SubmissionPage(BaseModel):
    """One page of the caller's submissions, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": "sub_3f2b6c1e9a7d4e0f8b5a2c1d0e9f8a7b",
                            "status": "running",
                            "progress": 40.0,
                            "model_name": "deep-ensemble-5",
                            "kind": "gaussian",
                            "n": 1000000,
                            "queue": "cpu",
                            "created_at": "2026-01-01T12:00:00Z",
                            "started_at": "2026-01-01T12:00:01Z",
                            "finished_at": None,
                            "error": None,
                        }
                    ],
                    "total": 1,
                    "offset": 0,
                    "limit": 20,
                }
            ]
        }
    )

    items: list[SubmissionSummary]
    total: int = Field(description="Number of submissions matching the filter.")
    offset: int
    limit: int
