"""Share links: read-only links to a benchmark's leaderboard pages."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ShareLinkCreated(BaseModel):
    """A new share link: its token is shown here once and never again."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "link_id": "shr_1a2b3c4d5e6f7a8b",
                    "benchmark_id": "bench_0f1e2d3c4b5a6978",
                    "token": "uqs_Vd0…",
                    "url": "/ui/benchmarks/bench_0f1e2d3c4b5a6978?share=uqs_Vd0…",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        }
    )

    link_id: str
    benchmark_id: str
    token: str = Field(description="The link's secret (only its SHA-256 is stored).")
    url: str = Field(description="The board's page opened by the link (relative).")
    created_at: str


_LINK: dict[str, Any] = {
    "link_id": "shr_1a2b3c4d5e6f7a8b",
    "benchmark_id": "bench_0f1e2d3c4b5a6978",
    "created_at": "2026-01-01T12:00:00Z",
}


class ShareLinkInfo(BaseModel):
    """A share link as listed (never its token)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_LINK]})

    link_id: str
    benchmark_id: str
    created_at: str


class ShareLinkList(BaseModel):
    """A benchmark's live share links, oldest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"links": [_LINK]}]})

    links: list[ShareLinkInfo]
