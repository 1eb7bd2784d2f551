"""Verify the webhook events that uq-eval POSTs to a ``callback_url``.

Each event carries ``UQEval-Signature: t=<unix seconds>,v1=<hex>``, where ``v1`` is
HMAC-SHA256 keyed with your key's webhook secret over ``"<t>." + body`` (the raw bytes
received). :func:`verify` checks it in constant time and refuses a timestamp more than
``tolerance_s`` away from now (a replayed event)::

    from uqeval.webhooks import InvalidSignature, verify

    try:
        event = verify(secret, body, headers["UQEval-Signature"])
    except InvalidSignature:
        ...  # answer 400 and ignore it

Deduplicate on ``event["delivery_id"]``: a delivery may arrive more than once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

__all__ = ["InvalidSignature", "verify"]


class InvalidSignature(ValueError):
    """The event is not signed with this secret, the header is malformed, or its timestamp
    is outside the tolerance (a replay)."""


def verify(
    secret: str,
    body: bytes | str,
    header: str | None,
    *,
    tolerance_s: float = 300,
    now: float | None = None,
) -> dict[str, Any]:
    """The event of a webhook delivery, once its ``UQEval-Signature`` ``header`` proves it
    was signed with ``secret`` over ``body`` within ``tolerance_s`` of ``now`` (default: the
    current time); raises :class:`InvalidSignature` otherwise."""
    if not header:
        raise InvalidSignature("no UQEval-Signature header")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise InvalidSignature(f"malformed UQEval-Signature header: {header!r}")
        if name == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise InvalidSignature(f"malformed timestamp {value!r}") from None
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise InvalidSignature(f"UQEval-Signature needs t= and v1=; found {header!r}")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        raise InvalidSignature(
            f"timestamp {timestamp} is {current - timestamp:+.0f} s from now, outside the "
            f"tolerance of {tolerance_s:g} s (a replayed or delayed event)"
        )
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        raise InvalidSignature("the signature does not match this secret and body")
    try:
        event: dict[str, Any] = json.loads(raw)
    except ValueError:
        raise InvalidSignature("the body is not JSON") from None
    return event
