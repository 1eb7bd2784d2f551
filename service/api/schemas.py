"""Request and response models of the HTTP API (the OpenAPI document is generated from them).

Request models are strict: unknown fields are refused (``extra="forbid"``), numbers must be JSON
numbers (a string such as ``"1.5"`` is refused), and NaN or ±inf are refused everywhere. The
prediction models are built from :data:`service.kinds.KIND_FIELDS`, so the API accepts exactly
the kinds and fields that the worker evaluates. Response models are descriptive: they document
the shape of each answer and let fields added by newer workers through.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    create_model,
    field_validator,
    model_validator,
)

from service.kinds import (
    CLASSIFICATION_KINDS,
    KIND_FIELDS,
    MATRIX_FIELDS,
    ONE_OF,
    REGRESSION_KINDS,
    TENSOR_FIELDS,
)

# --------------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------------

#: The prediction kinds, in the order of KIND_FIELDS.
KINDS: tuple[str, ...] = tuple(KIND_FIELDS)
Kind = Literal[
    "gaussian",
    "laplace",
    "student_t",
    "mixture",
    "samples",
    "quantiles",
    "point_uncertainty",
    "probs",
    "logits",
    "ensemble",
    "dirichlet",
]
assert set(Kind.__args__) == set(KINDS), "schemas.Kind is out of step with service.kinds"  # type: ignore[attr-defined]

Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]

Visibility = Literal["private", "public"]
BenchmarkId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]

MAX_METADATA_BYTES = 16 * 1024
MAX_PARAMS_BYTES = 16 * 1024


class StrictModel(BaseModel):
    """Base of request models: no unknown fields, no strings as numbers, no NaN/inf."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _first_non_finite(value: Any, path: str) -> str | None:
    """Path of the first NaN/inf float inside a JSON value, or ``None``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _first_non_finite(v, f"{path}.{k}")
            if bad:
                return bad
    if isinstance(value, list):
        for i, v in enumerate(value):
            bad = _first_non_finite(v, f"{path}[{i}]")
            if bad:
                return bad
    return None


def _check_json_value(value: Any, what: str, limit: int) -> Any:
    bad = _first_non_finite(value, what)
    if bad:
        raise ValueError(f"{bad} must be a finite number (NaN and infinity are not JSON)")
    size = len(json.dumps(value, separators=(",", ":")))
    if size > limit:
        raise ValueError(f"{what} must be at most {limit} bytes as JSON; found {size}")
    return value


# --------------------------------------------------------------------------------------------
# analyses
# --------------------------------------------------------------------------------------------


class BootstrapOptions(StrictModel):
    """Bootstrap confidence intervals for every metric (``n_resamples = 0``: none)."""

    n_resamples: int = Field(default=0, ge=0, le=100_000, description="B; 0 turns it off.")
    method: Literal["percentile", "bca"] = Field(
        default="percentile", description="Interval method: percentile or BCa."
    )
    level: float = Field(default=0.95, gt=0, lt=1, description="Confidence level.")


class StabilityOptions(StrictModel):
    """The test-set-size stability study (uqcore.stability.convergence)."""

    enabled: bool = False
    repeats: int = Field(default=100, ge=1, le=10_000, description="Subsamples per size.")


MetricName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9_]+$")]


class Analyses(StrictModel):
    """What to compute: metrics (names or ``"all"``), their parameters, bootstrap, stability."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "metrics": ["mae", "nll", "ause"],
                    "params": {"nmerci": {"alpha": 0.9}},
                    "bootstrap": {"n_resamples": 1000, "method": "percentile", "level": 0.95},
                    "stability": {"enabled": False, "repeats": 100},
                    "seed": 0,
                }
            ]
        }
    )

    # The list comes first in the union: client generators try the members in order.
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=200)] | Literal["all"] = (
        Field(
            default="all",
            description='Metric names from GET /v1/metrics, or "all" (every applicable metric).',
        )
    )
    params: dict[MetricName, dict[str, JsonValue]] = Field(
        default_factory=dict,
        description="Per-metric parameters overriding the defaults listed by GET /v1/metrics.",
    )
    bootstrap: BootstrapOptions = Field(default_factory=BootstrapOptions)
    stability: StabilityOptions = Field(default_factory=StabilityOptions)
    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="Seed of every random draw.")
    estimators: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(min_length=1)]
        | Literal["all"]
        | None
    ) = Field(
        default=None,
        description="Classification only: also evaluate every metric that takes an estimator "
        'for each of these uncertainty estimators ("all": every one the prediction provides, '
        "built-in aggregators then the submitted estimates); the result's by_estimator table.",
    )

    @field_validator("params")
    @classmethod
    def _params_json(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return _check_json_value(v, "analyses.params", MAX_PARAMS_BYTES)  # type: ignore[no-any-return]

    @field_validator("metrics")
    @classmethod
    def _unique(cls, v: Any) -> Any:
        if isinstance(v, list) and len(set(v)) != len(v):
            dup = next(m for i, m in enumerate(v) if m in v[:i])
            raise ValueError(f"metric {dup!r} is listed twice")
        return v


# --------------------------------------------------------------------------------------------
# predictions (one model per kind, from KIND_FIELDS)
# --------------------------------------------------------------------------------------------

Vector = Annotated[list[float], Field(min_length=1)]
Matrix = Annotated[list[Annotated[list[float], Field(min_length=1)]], Field(min_length=1)]
Tensor = Annotated[list[Matrix], Field(min_length=1)]

#: What each array field holds (documentation of the prediction models).
FIELD_DOCS: dict[str, str] = {
    "mean": "Predictive mean, N values.",
    "std": "Predictive standard deviation, N values, each > 0.",
    "loc": "Location, N values.",
    "scale": "Scale, N values, each > 0.",
    "df": "Degrees of freedom, N values, each > 0.",
    "weights": "Mixture weights, N×K, each >= 0, rows summing to 1.",
    "means": "Component means, N×K.",
    "stds": "Component standard deviations, N×K, each > 0.",
    "draws": "Predictive samples, N×S.",
    "levels": "Quantile levels, Q values in (0, 1), strictly increasing.",
    "values": "Predicted quantiles, N×Q, non-decreasing along each row.",
    "prediction": "Point prediction, N values.",
    "uncertainty": "Scalar uncertainty score, N values, each >= 0 (larger = less certain).",
    "probs": "Class probabilities, N×C, rows non-negative and summing to 1 (± 1e-4).",
    "logits": "Logits, N×C, finite (probabilities by softmax).",
    "member_probs": "Ensemble member probabilities, M×N×C (give this or member_logits).",
    "member_logits": "Ensemble member logits, M×N×C (give this or member_probs).",
    "alpha": "Dirichlet concentrations, N×C, each > 0.",
}

EXAMPLE_ARRAYS: dict[str, Any] = {
    "mean": [0.1, 1.9, 3.2],
    "std": [0.5, 0.4, 0.6],
    "loc": [0.1, 1.9, 3.2],
    "scale": [0.4, 0.3, 0.5],
    "df": [5.0, 5.0, 5.0],
    "weights": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
    "means": [[0.0, 0.2], [1.8, 2.0], [3.0, 3.4]],
    "stds": [[0.5, 0.5], [0.4, 0.4], [0.6, 0.6]],
    "draws": [[0.0, 0.2, 0.1], [1.8, 2.0, 2.1], [3.0, 3.4, 3.3]],
    "levels": [0.1, 0.5, 0.9],
    "values": [[-0.5, 0.1, 0.7], [1.4, 1.9, 2.4], [2.4, 3.2, 4.0]],
    "prediction": [0.1, 1.9, 3.2],
    "uncertainty": [0.5, 0.4, 0.6],
    "probs": [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
    "logits": [[2.0, 0.5, -1.0], [-1.0, 2.5, 0.0], [0.1, 0.2, 0.4]],
    "member_probs": [
        [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
        [[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.2, 0.3, 0.5]],
    ],
    "member_logits": [
        [[2.0, 0.5, -1.0], [-1.0, 2.5, 0.0], [0.1, 0.2, 0.4]],
        [[1.5, 0.5, -1.0], [-0.5, 2.0, 0.0], [0.0, 0.2, 0.6]],
    ],
    "alpha": [[7.0, 2.0, 1.0], [1.0, 8.0, 1.0], [3.0, 3.0, 4.0]],
}

#: The fields of an example prediction of each kind (the first of alternative fields).
EXAMPLE_FIELDS: dict[str, tuple[str, ...]] = {
    k: ONE_OF[k][:1] if k in ONE_OF else KIND_FIELDS[k] for k in KIND_FIELDS
}


def _camel(kind: str) -> str:
    return "".join(p.capitalize() for p in kind.split("_"))


def _prediction_model(kind: str) -> type[StrictModel]:
    fields: dict[str, Any] = {"kind": (Literal[kind], Field(description="The prediction kind."))}
    for f in KIND_FIELDS[kind]:
        typ: Any = Tensor if f in TENSOR_FIELDS else Matrix if f in MATRIX_FIELDS else Vector
        if kind in ONE_OF:
            fields[f] = (typ | None, Field(default=None, description=FIELD_DOCS.get(f, f)))
        else:
            fields[f] = (typ, Field(description=FIELD_DOCS.get(f, f)))
    if kind in CLASSIFICATION_KINDS:
        fields["estimates"] = (
            dict[Annotated[str, Field(min_length=1, max_length=200)], Vector] | None,
            Field(
                default=None,
                description="Optional named uncertainty estimates, name -> N values "
                "(higher = more uncertain).",
            ),
        )
    example = {"kind": kind, **{f: EXAMPLE_ARRAYS[f] for f in EXAMPLE_FIELDS[kind]}}
    model: type[StrictModel] = create_model(
        f"{_camel(kind)}Prediction",
        __base__=StrictModel,
        __doc__=f"A {kind} prediction: arrays {', '.join(KIND_FIELDS[kind])}.",
        **fields,
    )
    model.model_config["json_schema_extra"] = {"examples": [example]}
    model.model_rebuild(force=True)
    return model


PREDICTION_MODELS: dict[str, type[StrictModel]] = {k: _prediction_model(k) for k in KINDS}

# A tagged union of the kind models (the "kind" member selects the model).
_PredictionUnion: Any = PREDICTION_MODELS[KINDS[0]]
for _k in KINDS[1:]:
    _PredictionUnion = _PredictionUnion | PREDICTION_MODELS[_k]
Prediction = Annotated[_PredictionUnion, Field(discriminator="kind")]


# --------------------------------------------------------------------------------------------
# submissions
# --------------------------------------------------------------------------------------------

ModelName = Annotated[str, Field(min_length=1, max_length=200)]


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
        return _check_json_value(v, "metadata", MAX_METADATA_BYTES)  # type: ignore[no-any-return]


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
    labels: Annotated[list[int], Field(min_length=1)] | None = Field(
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
    groups: Annotated[list[int], Field(min_length=1)] | None = Field(
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
    """A change of a submission: its visibility."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"visibility": "public"}]})

    visibility: Visibility = Field(
        description="private: your team (and admins) only; public: readable by every key and, "
        "once it succeeded, ranked on its benchmark's leaderboards. A succeeded submission "
        "made private leaves the leaderboards at once (its team's next best or latest public "
        "submission takes its place); made public it enters them."
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
    curves: dict[str, Any] = Field(default_factory=dict)
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


# --------------------------------------------------------------------------------------------
# metrics catalogue, keys, health
# --------------------------------------------------------------------------------------------


class MetricInfo(BaseModel):
    """One metric of the registry."""

    name: str
    task: str
    family: str
    needs: list[str] = Field(description="Capabilities the prediction must provide.")
    direction: str = Field(description='"lower", "higher" or "target" is better.')
    bounds: list[float | None]
    best: float | None
    defaults: dict[str, Any] = Field(
        description="Default parameters (override in analyses.params)."
    )
    summary: str
    reference: str
    structured: bool
    kinds: list[str] = Field(description="Prediction kinds the metric applies to.")


class MetricCatalogue(BaseModel):
    """The metric registry (filtered as asked)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "metrics": [
                        {
                            "name": "mae",
                            "task": "regression",
                            "family": "accuracy",
                            "needs": ["point"],
                            "direction": "lower",
                            "bounds": [0, None],
                            "best": 0.0,
                            "defaults": {},
                            "summary": "Mean absolute error.",
                            "reference": "",
                            "structured": False,
                            "kinds": list(REGRESSION_KINDS),
                        }
                    ]
                }
            ]
        }
    )

    metrics: list[MetricInfo]


class ApiKeyCreate(StrictModel):
    """A new submitter key."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "team-vision"}]})

    name: str = Field(min_length=1, max_length=100, description="Who holds the key.")
    team_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="The key's team (POST /v1/admin/teams); its keys share the team's "
        "submissions and quotas. Without one the key sees only its own submissions.",
    )


class ApiKeyInfo(BaseModel):
    """An API key's record (never the key itself)."""

    key_id: str
    name: str
    role: Literal["admin", "submitter"]
    created_at: str
    revoked: bool
    team_id: str | None = None


class ApiKeyCreated(ApiKeyInfo):
    """A newly created key: ``key`` is shown once and never again."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "key_id": "k_8d3f2a",
                    "name": "team-vision",
                    "role": "submitter",
                    "created_at": "2026-01-01T12:00:00Z",
                    "revoked": False,
                    "key": "uqe_...",
                }
            ]
        }
    )

    key: str = Field(description="The secret; send it as Authorization: Bearer <key>.")


class ApiKeyList(BaseModel):
    """Every API key (admin and submitter), oldest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "keys": [
                        {
                            "key_id": "k_8d3f2a",
                            "name": "team-vision",
                            "role": "submitter",
                            "created_at": "2026-01-01T12:00:00Z",
                            "revoked": False,
                        }
                    ]
                }
            ]
        }
    )

    keys: list[ApiKeyInfo]


class TeamCreate(StrictModel):
    """A new team."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "vision-lab"}]})

    name: str = Field(min_length=1, max_length=100)


TEAM_EXAMPLE: dict[str, Any] = {
    "team_id": "team_1a2b3c4d5e6f",
    "name": "vision-lab",
    "created_at": "2026-01-01T12:00:00Z",
}


class TeamInfo(BaseModel):
    """A team."""

    model_config = ConfigDict(json_schema_extra={"examples": [TEAM_EXAMPLE]})

    team_id: str
    name: str
    created_at: str


class TeamList(BaseModel):
    """Every team, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"teams": [TEAM_EXAMPLE]}]})

    teams: list[TeamInfo]


# --------------------------------------------------------------------------------------------
# benchmarks
# --------------------------------------------------------------------------------------------


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


#: An estimator a benchmark ranks by: a built-in aggregator of uqcore or the name of an
#: estimate that submissions carry (``prediction.estimates`` / ``estimate:<name>``).
EstimatorName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
Estimators = Annotated[list[EstimatorName], Field(min_length=1, max_length=50)]

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
    labels: Annotated[list[int], Field(min_length=1)] | None = Field(
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
    groups: Annotated[list[int], Field(min_length=1)] | None = Field(
        default=None,
        description="Optional group label per row (stratified metrics, cluster "
        "bootstrap), e.g. image ids for per-pixel data.",
    )


class BenchmarkUpdate(StrictModel):
    """Fields to change (the targets cannot be changed: create a new benchmark)."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)
    primary_metric: MetricName | None = None
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=200)] | None = None
    rule: Literal["best", "latest"] | None = None
    quota: QuotaOptions | None = None
    baseline_id: str | None = Field(
        default=None,
        max_length=100,
        description="A succeeded submission on this benchmark shown as the baseline row "
        "(null: none).",
    )
    estimators: Estimators | None = Field(
        default=None,
        description="Classification only: replaces the estimators with their own "
        "leaderboards (null: none); computed for submissions made from then on.",
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
    "created_at": "2026-01-01T12:00:00Z",
    "updated_at": "2026-01-01T12:00:00Z",
    "n_classes": None,
    "has_soft_labels": False,
    "has_ood": False,
    "estimators": None,
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
    baseline_id: str | None
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


class BenchmarkList(BaseModel):
    """Every benchmark, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"benchmarks": [BENCHMARK_EXAMPLE]}]})

    benchmarks: list[BenchmarkInfo]


class LeaderboardEntry(BaseModel):
    """One team's ranked submission."""

    rank: int = Field(description="1 + the number of teams strictly better (ties share).")
    team_id: str
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
    is_baseline: bool = False


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
    total: int = Field(description="Number of ranked teams.")
    offset: int
    limit: int
    entries: list[LeaderboardEntry]
    baseline: LeaderboardEntry | None = Field(
        description="The benchmark's baseline row (also marked in entries when it ranks)."
    )
    ranks: RankStatus


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
    n_resamples: int = Field(default=1000, ge=10, le=100_000, description="B.")
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="Default: the benchmark's seed."
    )
    level: float = Field(default=0.95, gt=0, lt=1)
    method: Literal["percentile", "bca"] = "percentile"

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
    created_at: str
    finished_at: str | None = None
    error: str | None = None
    request: dict[str, Any]
    result: dict[str, Any] | None = Field(
        default=None,
        description="pairs (A − B per metric: diff, interval, p_better, p_value, "
        "p_value_adjusted), ranks (per metric: each submission's rank distribution), the "
        "correction used, B, seed, level.",
    )


class Health(BaseModel):
    """The process is up."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Whether the service can take and run jobs: Redis reachable and a live worker."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"status": "ready", "redis": True, "workers": ["celery@host"], "reason": None}
            ]
        }
    )

    status: Literal["ready", "not_ready"]
    redis: bool
    workers: list[str]
    reason: str | None = None


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str = Field(description="Stable machine-readable code, e.g. validation_error.")
    message: str = Field(description="What was wrong and what was expected.")
    field: str | None = Field(description="The offending field (dotted path), if one.")
    index: int | None = Field(description="The first offending row, if one.")


class ErrorResponse(BaseModel):
    """Every error answer has this shape."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "validation_error",
                        "message": "std must be > 0; std[17] = -0.3",
                        "field": "prediction.std",
                        "index": 17,
                    }
                }
            ]
        }
    )

    error: ErrorDetail
