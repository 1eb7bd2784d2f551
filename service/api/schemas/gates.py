"""Quality gates: a candidate submission against a reference, per metric, with an allowance."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.api.schemas.common import BenchmarkId, EstimatorName, MetricName, StrictModel
from service.store import Status

SubmissionId = Annotated[str, Field(min_length=1, max_length=100)]


class GateCheck(StrictModel):
    """One check: the candidate may be worse than the reference by at most the allowance."""

    metric: MetricName = Field(description="One of the benchmark's metrics.")
    estimator: EstimatorName | None = Field(
        default=None,
        description="Classification benchmarks: the metric under this estimator (its board "
        "'metric[estimator]'); default: the metric's own.",
    )
    allowed: float = Field(
        ge=0,
        le=1e12,
        description="The allowed degradation: in the metric's units (absolute), or a fraction "
        "of the reference's |value| (relative: 0.05 = 5 %).",
    )
    mode: Literal["absolute", "relative"] = "absolute"


class GateCreate(StrictModel):
    """Gate a candidate submission against a reference on one benchmark (paired bootstrap)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "benchmark_id": "bench_0f1e2d3c4b5a6978",
                    "candidate": "sub_new",
                    "reference": "sub_old",
                    "checks": [
                        {"metric": "crps", "allowed": 0.01, "mode": "absolute"},
                        {"metric": "ece", "allowed": 0.05, "mode": "relative"},
                    ],
                }
            ]
        }
    )

    benchmark_id: BenchmarkId
    candidate: SubmissionId = Field(description="The succeeded submission under test.")
    reference: SubmissionId = Field(
        description="The succeeded submission it must not be worse than."
    )
    checks: Annotated[list[GateCheck], Field(min_length=1, max_length=50)]
    confidence: float | None = Field(
        default=None,
        ge=0.5,
        lt=1,
        description="Of the one-sided bound: a check fails only when the degradation exceeds "
        "the allowance with this confidence. Default: the benchmark's level. Keys other than "
        "admins may give 0.9, 0.95, 0.99 or the benchmark's level.",
    )
    correction: Literal["holm", "none"] = Field(
        default="holm",
        description="Holm's step-down adjustment of the checks' p-values (family-wise error "
        "rate 1 − confidence over the checks), or none.",
    )
    n_resamples: int | None = Field(
        default=None, ge=10, le=100_000, description="B, as for comparisons. Admins only."
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="Default: the benchmark's seed. Admins only."
    )
    method: Literal["percentile"] | None = Field(
        default=None,
        description="The percentile bootstrap (the one whose bound and p-value agree).",
    )

    @model_validator(mode="after")
    def _two(self) -> GateCreate:
        if self.candidate == self.reference:
            raise ValueError(
                f"candidate and reference are the same submission {self.candidate!r}; gate "
                "a candidate against another submission"
            )
        return self


class GateAccepted(BaseModel):
    """A queued gate (202)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "gate_5d4c3b2a1f0e",
                    "status": "queued",
                    "status_url": "/v1/gates/gate_5d4c3b2a1f0e",
                }
            ]
        }
    )

    id: str
    status: Status
    status_url: str


class GateCheckResult(BaseModel):
    """One check's answer (values in the metric's units; degradation > 0 = candidate worse)."""

    metric: str
    estimator: str | None = None
    mode: Literal["absolute", "relative"]
    allowed: float
    allowance: float | None = Field(description="The allowance in the metric's units.")
    candidate: float | None
    reference: float | None
    degradation: float | None = Field(
        description="badness(candidate) − badness(reference); badness is the value for "
        "lower-is-better metrics, −value for higher-is-better, |value − best| for target ones."
    )
    low: float | None = Field(description="Lower one-sided bound of the degradation at the level.")
    high: float | None = Field(description="Upper one-sided bound of the degradation at the level.")
    p_value: float | None = Field(description="Of H0: degradation <= allowance.")
    p_value_adjusted: float | None
    passed: bool | None = Field(description="null: the check could not be decided (outcome error).")
    outcome: Literal["pass", "fail", "error"]
    reason: str | None
    direction: str | None = None
    n_valid: int | None = None
    n_undefined: int | None = None


class GateDetail(BaseModel):
    """A gate: its request, status and, once it succeeded, the decision and the evidence."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "gate_5d4c3b2a1f0e",
                    "status": "succeeded",
                    "progress": 100.0,
                    "created_at": "2026-01-01T12:00:00Z",
                    "finished_at": "2026-01-01T12:00:02Z",
                    "error": None,
                    "request": {"benchmark_id": "bench_0f1e2d3c4b5a6978"},
                    "passed": False,
                    "reason": "failed: crps",
                    "checks": [
                        {
                            "metric": "crps",
                            "estimator": None,
                            "mode": "absolute",
                            "allowed": 0.01,
                            "allowance": 0.01,
                            "candidate": 0.61,
                            "reference": 0.55,
                            "degradation": 0.06,
                            "low": 0.04,
                            "high": 0.08,
                            "p_value": 0.01,
                            "p_value_adjusted": 0.01,
                            "passed": False,
                            "outcome": "fail",
                            "reason": "the degradation exceeds the allowance 0.01 ...",
                        }
                    ],
                    "evidence": {
                        "n_resamples": 1000,
                        "seed": 0,
                        "level": 0.95,
                        "method": "percentile",
                        "unit": "row",
                        "correction": "holm",
                    },
                    "warnings": [],
                }
            ]
        }
    )

    id: str
    status: Status
    progress: float | None = None
    created_at: str
    finished_at: str | None = None
    error: str | None = None
    request: dict[str, Any]
    passed: bool | None = Field(
        default=None,
        description="true: every check passed; false: a check failed; null: not finished, or "
        "no check failed and one could not be decided (see reason).",
    )
    reason: str | None = None
    checks: list[GateCheckResult] | None = None
    evidence: dict[str, Any] | None = Field(
        default=None,
        description="n_resamples, seed, level (the confidence), method, unit (the resampling "
        "unit), correction, the test and how p-values are shown.",
    )
    warnings: list[str] = Field(default_factory=list)
