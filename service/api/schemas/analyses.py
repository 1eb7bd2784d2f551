"""What a submission asks to compute: metrics, their parameters, bootstrap and stability."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator

from service.api.schemas.common import MetricName, StrictModel, check_json_value

MAX_PARAMS_BYTES = 16 * 1024


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
        return check_json_value(v, "analyses.params", MAX_PARAMS_BYTES)  # type: ignore[no-any-return]

    @field_validator("metrics")
    @classmethod
    def _unique(cls, v: Any) -> Any:
        if isinstance(v, list) and len(set(v)) != len(v):
            dup = next(m for i, m in enumerate(v) if m in v[:i])
            raise ValueError(f"metric {dup!r} is listed twice")
        return v
