"""The signature of a webhook delivery: ``UQEval-Signature: t=<unix s>,v1=<hex>``.

``v1`` is HMAC-SHA256 keyed with the API key's webhook secret over ``"<t>." + body`` (the
exact bytes sent): the timestamp is signed with the body, so a receiver that refuses old
timestamps refuses replays. The receiver's side is :func:`uqeval.webhooks.verify`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["SIGNATURE_HEADER", "new_secret", "sign"]

SIGNATURE_HEADER = "UQEval-Signature"
EVENT_HEADER = "UQEval-Event"
DELIVERY_HEADER = "UQEval-Delivery"


def new_secret() -> str:
    """A new webhook secret (256 random bits)."""
    return "whsec_" + secrets.token_urlsafe(32)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The value of the signature header of ``body`` sent at ``timestamp`` (unix s)."""
    mac = hmac.new(secret.encode(), f"{int(timestamp)}.".encode() + body, hashlib.sha256)
    return f"t={int(timestamp)},v1={mac.hexdigest()}"
