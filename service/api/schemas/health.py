"""Liveness and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


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
