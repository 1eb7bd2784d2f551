"""Liveness and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Health(BaseModel):
    """The process is up."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Whether the service can take and run jobs: Redis reachable and a live worker.

    Under ``uqeval serve``, ``restarting`` names the children that its supervisor is
    restarting (``redis``, ``worker-1``, ``api``, ...); ``reason`` then says so too, also while
    the service stays ready (another worker takes the jobs meanwhile)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": "ready",
                    "redis": True,
                    "workers": ["celery@host"],
                    "reason": None,
                    "restarting": [],
                },
                {
                    "status": "not_ready",
                    "redis": False,
                    "workers": [],
                    "reason": "Redis is unreachable; restarting: redis",
                    "restarting": ["redis"],
                },
            ]
        }
    )

    status: Literal["ready", "not_ready"]
    redis: bool
    workers: list[str]
    reason: str | None = Field(
        default=None,
        description="Why the service is not ready, and which children are being restarted.",
    )
    restarting: list[str] = Field(
        default_factory=list,
        description="Children of `uqeval serve` being restarted after they died (`redis`, "
        "`worker-1`, `api`, ...); empty when none, or without a supervisor.",
    )
