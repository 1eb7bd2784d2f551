"""The metric catalogue (``GET /v1/metrics``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.kinds import REGRESSION_KINDS


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
    options: dict[str, dict[str, Any]] = Field(
        description="Each parameter's domain as JSON Schema: type, minimum/maximum, enum "
        "(choices), list bounds and default. A value outside it is refused with 422."
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
                            "options": {},
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
