"""Notifications: a signed webhook event when a submission or comparison ends.

:func:`ended` is the one hook that every path ending a job calls (the worker's tasks, the
cancel route, the reaper): when the job has a ``callback_url`` it records a pending delivery
of the event and publishes the delivery task (``uqeval.deliver_webhook``, on the ``cpu``
queue), once per job however many paths call it. :func:`service.notifications.delivery.attempt`
is that task's work: sign, POST, record the attempt, retry with backoff. :func:`resend` opens a
new delivery of the same event (the owner's "send again"); :func:`sweep` publishes the task
again for deliveries long overdue (a task lost with its worker).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any

from service.celery_config import DELIVER_TASK_NAME, producer
from service.settings import Settings
from service.store import TERMINAL, Store, now_iso
from service.store.notifications import CallbackTarget, Scope

__all__ = ["ended", "event_of", "publish", "resend", "sweep"]

log = logging.getLogger(__name__)

#: A pending delivery whose attempt is this late has lost its task: it is published again.
OVERDUE_S = 60.0


def event_of(scope: Scope, ident: str, target: CallbackTarget) -> dict[str, Any]:
    """The event of a ended submission or comparison, without the delivery's own fields
    (``delivery_id``, ``attempt``, ``sent_at``): also the ``end`` event of the SSE stream."""
    base = f"/v1/{scope}s/{ident}"
    links = {"self": base, "deliveries": f"{base}/deliveries"}
    if scope == "submission":
        links["events"] = f"{base}/events"
    return {
        "type": f"{scope}.ended",
        "id": ident,
        "status": target.status,
        "finished_at": target.finished_at,
        "error": target.error,
        "links": links,
    }


def publish(settings: Settings, delivery_id: str, countdown_s: float | None = None) -> None:
    """Publish the delivery task of ``delivery_id`` on the ``cpu`` queue (after
    ``countdown_s``); raises when the broker cannot be reached."""
    options: dict[str, Any] = {} if countdown_s is None else {"countdown": countdown_s}
    producer(settings).send_task(
        DELIVER_TASK_NAME,
        args=[delivery_id],
        queue="cpu",
        routing_key="cpu",
        retry=False,
        ignore_result=True,
        timeout=settings.enqueue_timeout_s,
        **options,
    )


def _open(
    store: Store, settings: Settings, scope: Scope, ident: str, *, redelivery: bool
) -> str | None:
    target = store.callback_target(scope, ident)
    if target is None or target.status not in TERMINAL or not target.callback_url:
        return None
    now = time.time()
    did = "dlv_" + secrets.token_hex(12)
    event = event_of(scope, ident, target)
    fields = {
        "id": did,
        "scope": scope,
        "ident": ident,
        "url": target.callback_url,
        "owner": target.owner,
        "event_type": event["type"],
        "event": json.dumps(event, separators=(",", ":")),
        "status": "pending",
        "created_at": now_iso(),
        "created_ts": repr(now),
        "deadline_ts": repr(now + settings.callback_retry_s),
        "next_ts": repr(now),
        "attempts": "0",
        "redelivery": "1" if redelivery else "0",
    }
    if not store.open_delivery(scope, ident, fields, once=not redelivery):
        return None
    try:
        publish(settings, did)
    except Exception as exc:  # the reaper's sweep publishes it once the broker is back
        log.warning("could not publish delivery %s of %s %s: %s", did, scope, ident, exc)
    return did


def ended(store: Store, settings: Settings, scope: Scope, ident: str) -> str | None:
    """The end hook: when submission or comparison ``ident`` has ended and has a callback,
    record its delivery and publish the task; returns the delivery id (None: no callback,
    not ended, or a delivery was already opened for this end). Never raises: a job's end
    must not fail because its notification could not be queued."""
    try:
        return _open(store, settings, scope, ident, redelivery=False)
    except Exception:
        log.exception("end hook of %s %s failed", scope, ident)
        return None


def resend(store: Store, settings: Settings, scope: Scope, ident: str) -> str | None:
    """A new delivery of the end event of ``ident`` (sent now, retried like the first);
    None when it has no callback or has not ended."""
    return _open(store, settings, scope, ident, redelivery=True)


def sweep(store: Store, settings: Settings) -> list[str]:
    """Publish the task again for pending deliveries overdue by :data:`OVERDUE_S` (their
    task was lost); returns their ids."""
    now = time.time()
    out = []
    for did in store.overdue_deliveries(now - OVERDUE_S):
        try:
            publish(settings, did)
        except Exception as exc:
            log.warning("could not publish delivery %s again: %s", did, exc)
            continue
        store.postpone_delivery(did, now + OVERDUE_S)
        out.append(did)
    return out
