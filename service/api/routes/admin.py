"""Admin routes: teams, and submitter API keys per team (admin key required)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from service.api.deps import AdminDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors, links
from service.api.schemas import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyInfo,
    ApiKeyList,
    TeamCreate,
    TeamInfo,
    TeamList,
)
from service.store import ApiKeyRecord, TeamRecord

router = APIRouter(tags=["admin"])


def info(record: ApiKeyRecord) -> ApiKeyInfo:
    return ApiKeyInfo(
        key_id=record.key_id,
        name=record.name,
        role=record.role,
        created_at=record.created_at,
        revoked=record.revoked,
        team_id=record.team,
    )


def team_info(record: TeamRecord) -> TeamInfo:
    return TeamInfo(team_id=record.team_id, name=record.name, created_at=record.created_at)


@router.post(
    "/v1/admin/teams",
    operation_id="createTeam",
    summary="Create a team",
    status_code=201,
    response_model=TeamInfo,
    responses=errors(400, 401, 403, 413, 422, 503),
)
def create_team(body: TeamCreate, admin: AdminDep, store: StoreDep) -> TeamInfo:
    """A new team; give it submitter keys with POST /v1/admin/keys and its ``team_id``."""
    return team_info(store.create_team(body.name))


@router.get(
    "/v1/admin/teams",
    operation_id="listTeams",
    summary="List teams",
    response_model=TeamList,
    responses=errors(401, 403, 503),
)
def list_teams(admin: AdminDep, store: StoreDep) -> TeamList:
    """Every team, oldest first."""
    return TeamList(teams=[team_info(t) for t in store.list_teams()])


@router.post(
    "/v1/admin/keys",
    operation_id="createApiKey",
    summary="Create a submitter key",
    status_code=201,
    response_model=ApiKeyCreated,
    responses={
        **errors(400, 401, 403, 413, 422, 503),
        **links(201, revokeApiKey={"key_id": "$response.body#/key_id"}),
    },
)
def create_api_key(
    body: ApiKeyCreate, admin: AdminDep, store: StoreDep, response: Response
) -> ApiKeyCreated:
    """A new submitter key, of a team when ``team_id`` is given (its keys share the team's
    submissions and quotas). The secret is in this answer only; the store keeps its SHA-256."""
    if body.team_id is not None and store.get_team(body.team_id) is None:
        raise ApiError(422, f"no team {body.team_id!r}", field="team_id", code="unknown_team")
    record, plaintext = store.create_api_key(body.name, role="submitter", team=body.team_id)
    response.headers["Cache-Control"] = "no-store"
    return ApiKeyCreated(**info(record).model_dump(), key=plaintext)


@router.get(
    "/v1/admin/keys",
    operation_id="listApiKeys",
    summary="List API keys",
    response_model=ApiKeyList,
    responses=errors(401, 403, 503),
)
def list_api_keys(admin: AdminDep, store: StoreDep) -> ApiKeyList:
    """Every key's record (never the secrets)."""
    return ApiKeyList(keys=[info(r) for r in store.list_api_keys()])


@router.delete(
    "/v1/admin/keys/{key_id}",
    operation_id="revokeApiKey",
    summary="Revoke a submitter key",
    status_code=204,
    response_class=Response,
    responses=errors(401, 403, 404, 409, 422, 503),
)
def revoke_api_key(
    key_id: Annotated[str, Path(min_length=1, max_length=100)],
    admin: AdminDep,
    store: StoreDep,
) -> Response:
    """The key stops working at once; its submissions stay. Revoking twice is harmless.
    Admin keys are not revoked here (they come from the environment)."""
    record = store.get_api_key(key_id)
    if record is None:
        raise ApiError(404, f"no API key {key_id!r}", field="key_id")
    if record.role == "admin":
        raise ApiError(
            409,
            f"key {key_id!r} is an admin key; only submitter keys can be revoked",
            field="key_id",
        )
    store.revoke_api_key(key_id)
    return Response(status_code=204)
