"""One attempt of a webhook delivery: sign, POST, record, schedule the next.

The task ``uqeval.deliver_webhook(delivery_id)`` calls :func:`attempt`. Like every task it may
run twice for one message (late acknowledgement) or be published twice (the reaper's sweep, a
resend): a delivery that is no longer pending, whose next attempt is not due yet, or that
another task is sending is left alone, so a delivery that succeeded is never sent again. (A
worker that dies between the receiver's 2xx and the record makes the next task send it again:
receivers deduplicate on the ``UQEval-Delivery`` header, as with any webhook.)

The POST goes to the address that was checked (:func:`service.notifications.policy.resolve_checked`),
with the URL's host in the ``Host`` header and, for https, as the TLS server name; redirects are
not followed (a 3xx counts as a failed attempt). A failed attempt is retried after
``callback_backoff_s`` doubling at each attempt (at most :data:`MAX_BACKOFF_S`), while the next
attempt falls within ``callback_retry_s`` of the delivery's creation; then it is ``failed``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from service.notifications import publish
from service.notifications.policy import CallbackRefused, check_address, resolve_checked
from service.notifications.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    sign,
)
from service.settings import Settings
from service.store import Store

__all__ = ["MAX_BACKOFF_S", "attempt"]

log = logging.getLogger(__name__)

#: The longest wait between two attempts (s).
MAX_BACKOFF_S = 900.0
#: A task that runs this much before its attempt is due is a duplicate message (s).
EARLY_SLACK_S = 1.0

Schedule = Callable[[str, float], None]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _post(url: str, body: bytes, headers: dict[str, str], settings: Settings) -> int:
    """POST ``body`` to ``url`` pinned to a checked address; the status code, or raises
    :class:`CallbackRefused` / an ``httpx`` error."""
    target = resolve_checked(url, settings)
    ip = target.addresses[0]
    host_in_url = f"[{ip}]" if isinstance(ip, ipaddress.IPv6Address) else str(ip)
    netloc = target.url.netloc.rsplit("@", 1)[-1]
    pinned = target.url._replace(netloc=f"{host_in_url}:{target.port}").geturl()
    extensions: dict[str, Any] = {}
    if target.url.scheme == "https":
        extensions["sni_hostname"] = target.host
    with httpx.Client(
        timeout=settings.callback_timeout_s, follow_redirects=False, trust_env=False
    ) as client:
        request = client.build_request(
            "POST", pinned, content=body, headers={**headers, "Host": netloc}, extensions=extensions
        )
        # Streamed: the peer is read while the connection is open (the body is not needed).
        response = client.send(request, stream=True)
        try:
            stream = response.extensions.get("network_stream")
            peer = None if stream is None else stream.get_extra_info("server_addr")
            if peer:  # the address actually connected to, checked again
                reason = check_address(target.host, ipaddress.ip_address(peer[0]), settings)
                if reason is not None:
                    raise CallbackRefused(reason)
            return int(response.status_code)
        finally:
            response.close()


def attempt(
    store: Store, settings: Settings, delivery_id: str, schedule: Schedule | None = None
) -> str:
    """Make the next attempt of delivery ``delivery_id``; returns "delivered", "retrying",
    "failed" or "skipped:<why>". ``schedule(delivery_id, delay_s)`` publishes the retry
    (default: the delivery task after that countdown)."""
    doc = store.get_delivery(delivery_id)
    if doc is None:
        return "skipped:missing"
    if doc.get("status") != "pending":
        return f"skipped:{doc.get('status')}"
    if time.time() < float(doc.get("next_ts", "0")) - EARLY_SLACK_S:
        return "skipped:early"
    token = secrets.token_hex(8)
    if not store.lock_delivery(delivery_id, token, settings.callback_timeout_s * 3 + 10):
        return "skipped:busy"
    try:
        return _attempt(store, settings, doc, schedule)
    finally:
        store.unlock_delivery(delivery_id)


def _attempt(
    store: Store, settings: Settings, doc: dict[str, str], schedule: Schedule | None
) -> str:
    did = doc["id"]
    number = int(doc.get("attempts", "0")) + 1
    started = time.time()
    clock = time.perf_counter()
    status_code: int | None = None
    error: str | None = None
    secret = store.webhook_secret(doc["owner"])
    if secret is None:
        error = "the API key has no webhook secret (POST /v1/webhook-secret creates one)"
    else:
        event = json.loads(doc["event"])
        event.update(delivery_id=did, attempt=number, sent_at=_iso(started))
        body = json.dumps(event, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "uq-eval-webhooks",
            SIGNATURE_HEADER: sign(secret, body, int(started)),
            EVENT_HEADER: doc["event_type"],
            DELIVERY_HEADER: did,
        }
        try:
            status_code = _post(doc["url"], body, headers, settings)
        except CallbackRefused as exc:
            error = f"refused: {exc}"
        except (httpx.HTTPError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    record: dict[str, Any] = {
        "attempt": number,
        "at": _iso(started),
        "status_code": status_code,
        "error": error,
        "duration_ms": round((time.perf_counter() - clock) * 1000, 3),
    }
    if status_code is not None and 200 <= status_code < 300:
        store.record_attempt(did, record, status="delivered", next_ts=None)
        return "delivered"
    delay = min(settings.callback_backoff_s * 2 ** (number - 1), MAX_BACKOFF_S)
    next_ts = time.time() + delay
    if next_ts > float(doc["deadline_ts"]):
        store.record_attempt(did, record, status="failed", next_ts=None)
        log.info("delivery %s given up after %d attempts", did, number)
        return "failed"
    store.record_attempt(did, record, status="pending", next_ts=next_ts)
    try:
        (schedule or _publish_retry(settings))(did, delay)
    except Exception as exc:  # the reaper's sweep publishes it once overdue
        log.warning("could not schedule the retry of delivery %s: %s", did, exc)
    return "retrying"


def _publish_retry(settings: Settings) -> Schedule:
    return lambda did, delay: publish(settings, did, countdown_s=delay)
