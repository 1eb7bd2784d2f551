"""Authentication and the other dependencies of the routes: store, settings, the caller's key.

API keys travel in ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; the store keeps
only their SHA-256 and compares in constant time (:meth:`service.store.Store.authenticate`).
Submitter keys are rate limited per key (``settings.rate_limit`` requests per fixed window,
counted in Redis, :meth:`service.store.Store.hit_rate`): :func:`current_key` is a plain
function, so FastAPI runs it — and its Redis round trips — in the thread pool, never on the
event loop.

The hot reads (a submission's status and result, a leaderboard page) authenticate in the same
Redis round trip as their read instead (:meth:`service.store.Store.read_submission`,
:meth:`service.store.Store.leaderboard_cached`): their routes take the token from the async
:data:`TokenDep`, do all their work in one trip through their own small thread pool
(:func:`run_read`) and give their verdict with :func:`key_required` and :func:`admitted` — the
answers of :func:`current_key`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.api.errors import ApiError
from service.settings import Settings
from service.store import ApiKeyRecord, Store

log = logging.getLogger("uqeval.api")

T = TypeVar("T")

_bearer = HTTPBearer(auto_error=False, description="API key as a bearer token.")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key header.")

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="uq-eval"'}


def get_store(request: Request) -> Store:
    store: Store | None = getattr(request.app.state, "store", None)
    if store is None:
        raise ApiError(503, "the service is starting; retry later", headers={"Retry-After": "1"})
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def run_read(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of the hot reads' own small pool (``settings.read_threads``
    threads; the app's ``read_limiter``). The reads' work is one Redis round trip and a little
    CPU under the GIL: a few threads keep the event loop fed, while dozens of them (the shared
    pool has 40) only contend for the GIL and stretch the tail latency. Their own pool also
    keeps reads from queueing behind uploads being parsed in the shared one."""
    limiter: anyio.CapacityLimiter = request.app.state.read_limiter
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter)


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def _token(bearer: HTTPAuthorizationCredentials | None, header: str | None) -> str | None:
    if bearer is not None and bearer.credentials:
        return bearer.credentials
    return header or None


def current_key(
    request: Request,
    store: StoreDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> ApiKeyRecord:
    """The caller's key record; 401 when the key is missing, unknown or revoked, 429 when its
    rate limit is spent."""
    token = _token(bearer, header)
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


def ensure_admin_key(request: Request, store: Store) -> None:
    """Register the configured admin key once (retried here if Redis was down at startup)."""
    state = request.app.state
    if getattr(state, "admin_key_ready", False):
        return
    register_admin_key(state.settings, store)
    state.admin_key_ready = True


def register_admin_key(settings: Settings, store: Store) -> None:
    """Register ``settings.admin_key``, or generate an admin key at first start and log it."""
    plaintext = store.ensure_admin_key(settings.admin_key)
    if plaintext is not None:
        log.warning("generated an admin API key (shown once, keep it): %s", plaintext)


KeyDep = Annotated[ApiKeyRecord, Depends(current_key)]
AdminDep = Annotated[ApiKeyRecord, Depends(admin_key)]


# --- authentication in the same Redis round trip as a read ---------------------------------


async def api_token(
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str | None:
    """The API key a request carries, or None: what :func:`current_key` reads, for a route
    that authenticates in the same Redis round trip as its read (then :func:`admitted`).

    ``async`` without I/O, so it runs on the event loop: a plain dependency would cost a trip
    through the thread pool.
    """
    return _token(bearer, header)


def key_required() -> ApiError:
    """The 401 of :func:`current_key` for a request without a key."""
    return ApiError(
        401,
        "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>",
        headers=UNAUTHORIZED_HEADERS,
    )


def admitted(
    settings: Settings, record: ApiKeyRecord | None, retry_after_s: int | None
) -> ApiKeyRecord:
    """The verdict on an authentication and a rate count (by :func:`current_key`, or done with
    a read: :meth:`service.store.Store.read_submission`,
    :meth:`service.store.Store.leaderboard_cached`): the key, or a 401 when it is unknown or
    revoked, or a 429 with Retry-After when its rate limit is spent."""
    if record is None:
        raise ApiError(401, "the API key is unknown or revoked", headers=UNAUTHORIZED_HEADERS)
    if retry_after_s is not None:
        raise ApiError(
            429,
            f"rate limit of {settings.rate_limit} requests per "
            f"{settings.rate_limit_window_s} s exceeded for this key; retry in {retry_after_s} s",
            code="rate_limited",
            headers={"Retry-After": str(retry_after_s)},
        )
    return record


TokenDep = Annotated[str | None, Depends(api_token)]
