"""Authentication of API keys: the verdicts on a key (401, 429), the admin key's registration,
and the thread pool of the hot reads that authenticate in the same Redis round trip as their read.

The routes get the caller's key through the dependencies of :mod:`service.api.deps`
(:data:`~service.api.deps.KeyDep`, :data:`~service.api.deps.AdminDep`), whose
:func:`~service.api.deps.current_key` gives its verdict with :func:`key_required` and
:func:`admitted`. The hot reads (a submission's status and result, a leaderboard page)
authenticate in the same Redis round trip as their read instead
(:meth:`service.store.Store.read_submission`, :meth:`service.store.Store.leaderboard_cached`):
their routes take the token from the async :data:`~service.api.deps.TokenDep`, do all their
work in one trip through their own small thread pool (:func:`run_read`) and give the same
verdicts with :func:`key_required` and :func:`admitted`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Request

from service.api.errors import ApiError
from service.settings import Settings
from service.store import ApiKeyRecord, Store

log = logging.getLogger("uqeval.api")

T = TypeVar("T")

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="uq-eval"'}


async def run_read(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of the hot reads' own small pool (``settings.read_threads``
    threads; the app's ``read_limiter``). The reads' work is one Redis round trip and a little
    CPU under the GIL: a few threads keep the event loop fed, while dozens of them (the shared
    pool has 40) only contend for the GIL and stretch the tail latency. Their own pool also
    keeps reads from queueing behind uploads being parsed in the shared one."""
    limiter: anyio.CapacityLimiter = request.app.state.read_limiter
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter)


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


def key_required() -> ApiError:
    """The 401 of :func:`service.api.deps.current_key` for a request without a key."""
    return ApiError(
        401,
        "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>",
        headers=UNAUTHORIZED_HEADERS,
    )


def admitted(
    settings: Settings, record: ApiKeyRecord | None, retry_after_s: int | None
) -> ApiKeyRecord:
    """The verdict on an authentication and a rate count (by
    :func:`service.api.deps.current_key`, or done with a read:
    :meth:`service.store.Store.read_submission`, :meth:`service.store.Store.leaderboard_cached`):
    the key, or a 401 when it is unknown or revoked, or a 429 with Retry-After when its rate
    limit is spent."""
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
