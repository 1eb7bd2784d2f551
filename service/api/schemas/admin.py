"""API keys and teams (the admin routes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.api.schemas.common import StrictModel


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
