"""The typed dependencies of the routes: the store, the settings and the caller's API key.

A route declares what it needs with these ``Annotated`` aliases (``store: StoreDep``,
``key: KeyDep``, ``admin: AdminDep``); FastAPI resolves each once per request.

API keys travel in ``Authorization: Bearer <key>`` or ``X-API-Key: <key>`` (the two security
schemes of the OpenAPI document); the store keeps only their SHA-256 and compares in constant
time (:meth:`service.store.Store.authenticate`). The web UI's login keeps the key in the cookie
:data:`KEY_COOKIE`, which is accepted for GET and HEAD requests only: a write needs a header, so
a page of another site cannot make a browser write with the cookie (CSRF). Submitter keys are rate limited per key
(``settings.rate_limit`` requests per fixed window, counted in Redis,
:meth:`service.store.Store.hit_rate`): :func:`current_key` is a plain function, so FastAPI runs
it — and its Redis round trips — in the thread pool, never on the event loop. The hot reads take
only the token (:data:`TokenDep`) and authenticate with their read (:mod:`service.api.auth`).
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.api.auth import admitted, ensure_admin_key, key_required
from service.api.errors import ApiError
from service.settings import Settings
from service.store import ApiKeyRecord, Store

#: The cookie of the web UI's login (HttpOnly, SameSite=Strict): the API key itself.
KEY_COOKIE = "uqeval_key"

#: Methods for which the cookie counts (reads only).
COOKIE_METHODS = frozenset({"GET", "HEAD"})

_bearer = HTTPBearer(auto_error=False, description="API key as a bearer token.")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key header.")


#: Where a route keeps the names of its query parameters, found at its first request.
_QUERY_ATTR = "_uqeval_query_names"


def _takes_many(annotation: Any) -> bool:
    """Whether a parameter of this type takes several values (``list[str] | None`` ...)."""
    if typing.get_origin(annotation) in (list, tuple, set, frozenset, Sequence):
        return True
    return any(_takes_many(a) for a in typing.get_args(annotation) if a is not type(None))


def _declared_query(route: Any) -> frozenset[str]:
    """The names (as sent) of the single-valued query parameters of ``route`` and of its
    dependencies."""
    names: frozenset[str] | None = getattr(route, _QUERY_ATTR, None)
    if names is None:
        found: set[str] = set()
        pending = [getattr(route, "dependant", None)]
        while pending:
            dependant = pending.pop()
            if dependant is not None:
                found.update(
                    f.alias
                    for f in dependant.query_params
                    if not _takes_many(f.field_info.annotation)
                )
                pending.extend(dependant.dependencies)
        names = frozenset(found)
        if route is not None:
            setattr(route, _QUERY_ATTR, names)
    return names


async def single_query_values(request: Request) -> None:
    """Each query parameter a route declares takes one value: one sent twice
    (``?status=queued&status=running``) is refused with 422 rather than all but one of its
    values dropped. A parameter declared as a list takes repeats, and parameters the route
    does not declare are ignored, as before. Every route of the API depends on it (an
    ``async`` function: no thread hop per request); the UI's pages do not."""
    names = _declared_query(request.scope.get("route"))
    if not names:
        return
    seen: set[str] = set()
    for name, _value in request.query_params.multi_items():
        if name not in names:
            continue
        if name in seen:
            raise ApiError(
                422,
                f"query parameter {name!r} is given more than once; it takes one value",
                field=name,
            )
        seen.add(name)


def get_store(request: Request) -> Store:
    store: Store | None = getattr(request.app.state, "store", None)
    if store is None:
        raise ApiError(503, "the service is starting; retry later", headers={"Retry-After": "1"})
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def _token(
    request: Request, bearer: HTTPAuthorizationCredentials | None, header: str | None
) -> str | None:
    if bearer is not None and bearer.credentials:
        return bearer.credentials
    if header:
        return header
    if request.method in COOKIE_METHODS:
        return request.cookies.get(KEY_COOKIE) or None
    return None


def current_key(
    request: Request,
    store: StoreDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> ApiKeyRecord:
    """The caller's key record; 401 when the key is missing, unknown or revoked, 429 when its
    rate limit is spent."""
    token = _token(request, bearer, header)
    if token is None:
        raise key_required()
    ensure_admin_key(request, store)
    record = store.authenticate(token)
    settings: Settings = request.app.state.settings
    wait = None
    if record is not None and settings.rate_limit > 0 and record.role != "admin":
        wait = store.hit_rate(record.key_id, settings.rate_limit, settings.rate_limit_window_s)
    return admitted(settings, record, wait)


def admin_key(key: Annotated[ApiKeyRecord, Depends(current_key)]) -> ApiKeyRecord:
    """The caller's key, which must be an admin key (403 otherwise)."""
    if key.role != "admin":
        raise ApiError(403, "this route needs an admin key")
    return key


KeyDep = Annotated[ApiKeyRecord, Depends(current_key)]
AdminDep = Annotated[ApiKeyRecord, Depends(admin_key)]


async def api_token(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str | None:
    """The API key a request carries, or None: what :func:`current_key` reads, for a route
    that authenticates in the same Redis round trip as its read (then
    :func:`service.api.auth.admitted`).

    ``async`` without I/O, so it runs on the event loop: a plain dependency would cost a trip
    through the thread pool.
    """
    return _token(request, bearer, header)


TokenDep = Annotated[str | None, Depends(api_token)]
