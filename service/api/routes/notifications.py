"""Notifications: the webhook secret of a key, the deliveries of a submission or comparison
(listed, sent again), and a submission's progress as Server-Sent Events."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from service import notifications
from service.api import access
from service.api.deps import KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.routes.comparisons import readable_comparison
from service.api.schemas import Delivery, DeliveryAttempt, DeliveryList, WebhookSecret
from service.notifications.signing import new_secret
from service.settings import Settings
from service.store import TERMINAL, ApiKeyRecord, Store, SubmissionRecord, now_iso
from service.store.notifications import CallbackTarget, Scope

router = APIRouter(tags=["notifications"])

SubId = Annotated[str, Path(min_length=1, max_length=100, description="The submission id.")]
CmpId = Annotated[str, Path(min_length=1, max_length=100, description="The comparison id.")]

#: How often an event stream looks at the submission (s).
EVENTS_POLL_S = 0.25


@router.post(
    "/v1/webhook-secret",
    operation_id="createWebhookSecret",
    summary="Create or rotate the webhook secret of your key",
    status_code=201,
    response_model=WebhookSecret,
    responses=errors(401, 503),
)
def create_webhook_secret(key: KeyDep, store: StoreDep) -> WebhookSecret:
    """A new secret that signs the webhook events of this key's submissions and comparisons
    (``UQEval-Signature``, see docs/webhooks.md); it replaces the previous one at once, for
    every delivery made from now on (retries of earlier events included). Shown once.

    The service keeps the secret itself (not only a hash, unlike API keys), since its
    workers sign with it."""
    secret, created_at = new_secret(), now_iso()
    store.set_webhook_secret(key.key_id, secret, created_at)
    return WebhookSecret(secret=secret, created_at=created_at)


def _iso(ts: str | None) -> str | None:
    if not ts:
        return None
    return (
        datetime.fromtimestamp(float(ts), UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _delivery(doc: dict[str, Any]) -> Delivery:
    return Delivery(
        id=doc["id"],
        event_type=doc["event_type"],
        url=doc["url"],
        status=doc["status"],
        redelivery=doc.get("redelivery") == "1",
        created_at=doc["created_at"],
        delivered_at=doc.get("delivered_at"),
        next_attempt_at=_iso(doc.get("next_ts")) if doc["status"] == "pending" else None,
        last_error=doc.get("last_error"),
        attempts=[DeliveryAttempt(**a) for a in doc.get("attempts_log", [])],
    )


def _owned_submission(store: Store, key: ApiKeyRecord, sub_id: str) -> SubmissionRecord:
    """The submission if ``key`` is its team's or an admin's (404 like an unknown id
    otherwise: deliveries name the team's callback URL)."""
    record = store.get_submission(sub_id)
    if record is None or not access.can_change(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    return record


def _list(store: Store, scope: Scope, ident: str) -> DeliveryList:
    return DeliveryList(items=[_delivery(d) for d in store.list_deliveries(scope, ident)])


def _resend(store: Store, settings: Settings, scope: Scope, ident: str) -> JSONResponse:
    target = store.callback_target(scope, ident)
    field = "sub_id" if scope == "submission" else "cmp_id"
    if target is None or not target.callback_url:
        raise ApiError(409, f"{scope} {ident!r} has no callback_url; nothing to send", field=field)
    if target.status not in TERMINAL:
        raise ApiError(
            409,
            f"{scope} {ident!r} has not ended ({target.status}); its event is sent when it ends",
            field=field,
        )
    did = notifications.resend(store, settings, scope, ident)
    fields = None if did is None else store.get_delivery(did)
    if fields is None:  # ended and deleted in between
        raise ApiError(404, f"no {scope} {ident!r}", field=field)
    doc: dict[str, Any] = {**fields, "attempts_log": []}
    return JSONResponse(_delivery(doc).model_dump(mode="json"), status_code=202)


@router.get(
    "/v1/submissions/{sub_id}/deliveries",
    operation_id="listSubmissionDeliveries",
    summary="Webhook deliveries of a submission",
    response_model=DeliveryList,
    responses=errors(401, 404, 422, 503),
)
def list_submission_deliveries(sub_id: SubId, key: KeyDep, store: StoreDep) -> DeliveryList:
    """The deliveries of the submission's end event to its ``callback_url``, newest first,
    each with its attempts (time, the receiver's status code or the error, duration). Its
    team's keys and admins only."""
    _owned_submission(store, key, sub_id)
    return _list(store, "submission", sub_id)


@router.post(
    "/v1/submissions/{sub_id}/deliveries",
    operation_id="resendSubmissionEvent",
    summary="Send a submission's end event again",
    status_code=202,
    response_model=Delivery,
    responses=errors(401, 404, 409, 422, 503),
)
def resend_submission_event(
    sub_id: SubId, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """A new delivery of the end event (new ``delivery_id``, sent now and retried like the
    first, signed with the key's current secret). 409 while the job runs or without a
    ``callback_url``."""
    _owned_submission(store, key, sub_id)
    return _resend(store, settings, "submission", sub_id)


@router.get(
    "/v1/comparisons/{cmp_id}/deliveries",
    operation_id="listComparisonDeliveries",
    summary="Webhook deliveries of a comparison",
    response_model=DeliveryList,
    responses=errors(401, 404, 422, 503),
)
def list_comparison_deliveries(cmp_id: CmpId, key: KeyDep, store: StoreDep) -> DeliveryList:
    """As for a submission: the deliveries of the comparison's end event, newest first."""
    readable_comparison(store, key, cmp_id)
    return _list(store, "comparison", cmp_id)


@router.post(
    "/v1/comparisons/{cmp_id}/deliveries",
    operation_id="resendComparisonEvent",
    summary="Send a comparison's end event again",
    status_code=202,
    response_model=Delivery,
    responses=errors(401, 404, 409, 422, 503),
)
def resend_comparison_event(
    cmp_id: CmpId, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """As for a submission: a new delivery of the comparison's end event, sent now."""
    readable_comparison(store, key, cmp_id)
    return _resend(store, settings, "comparison", cmp_id)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _events(
    request: Request, store: Store, settings: Settings, record: SubmissionRecord
) -> AsyncIterator[bytes]:
    """The event stream of a submission: ``progress`` whenever its status or progress
    changes, ``end`` once it ended, keep-alive comments meanwhile; at most
    ``events_max_duration_s``. The store is read in the thread pool, never on the loop."""
    sub_id = record.id
    started = last_sent = time.monotonic()
    yield b"retry: 2000\n\n"
    seen: tuple[str, float] | None = None
    while True:
        if seen is not None:
            record_or_none = await run_in_threadpool(store.get_submission, sub_id)
            if record_or_none is None:
                yield _sse("end", {"id": sub_id, "status": "deleted"})
                return
            record = record_or_none
        state = (record.status, record.progress)
        now = time.monotonic()
        if state != seen:
            seen = state
            last_sent = now
            yield _sse("progress", {"id": sub_id, "status": state[0], "progress": state[1]})
        if record.status in TERMINAL:
            target = CallbackTarget(
                record.status, None, record.owner, record.finished_at, record.error
            )
            yield _sse("end", notifications.event_of("submission", sub_id, target))
            return
        if now - started >= settings.events_max_duration_s:
            yield b": stream time limit reached; reconnect to follow on\n\n"
            return
        if now - last_sent >= settings.events_keepalive_s:
            last_sent = now
            yield b": keep-alive\n\n"
        if await request.is_disconnected():
            return
        await anyio.sleep(EVENTS_POLL_S)


@router.get(
    "/v1/submissions/{sub_id}/events",
    operation_id="streamSubmissionEvents",
    summary="Follow a submission as Server-Sent Events",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "The event stream.",
        },
        **errors(401, 404, 422, 503),
    },
)
async def stream_submission_events(
    request: Request, sub_id: SubId, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> StreamingResponse:
    """A ``text/event-stream`` of the submission: a ``progress`` event (data: ``{id, status,
    progress}``) at once and whenever its status or progress changes, then one ``end`` event
    whose data is the webhook event body without its delivery fields (``type``, ``id``,
    ``status``, ``finished_at``, ``error``, ``links``), and the stream closes. Comment lines
    keep an idle connection open; a stream lasts at most ``events_max_duration_s`` (then
    reconnect). For clients that can hold a connection instead of polling or receiving a
    webhook."""
    record = await run_in_threadpool(store.get_submission, sub_id)
    if record is None or not access.can_read(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    return StreamingResponse(
        _events(request, store, settings, record),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
