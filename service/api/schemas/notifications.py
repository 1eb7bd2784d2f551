"""Notifications: the callback URL field, the webhook secret, deliveries and their attempts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CallbackUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2000,
        description="Optional http(s) URL that receives a signed JSON event (POST) when the "
        "job ends (succeeded, failed or cancelled); needs a webhook secret of the key "
        "(POST /v1/webhook-secret). Hosts resolving to private, loopback, link-local, "
        "multicast or reserved addresses are refused unless the service allows them. See "
        "docs/webhooks.md.",
    ),
]


class WebhookSecret(BaseModel):
    """The new webhook secret of the calling key: shown once."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "secret": "whsec_3q2-7wLz0bB1c9wq0nJY5k8G2rjX6e0rT1aQk0Jm9Yc",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        }
    )

    secret: str = Field(
        description="Signs every webhook event of this key from now on (HMAC-SHA256, header "
        "UQEval-Signature); a previous secret no longer does. Keep it: it is not shown again."
    )
    created_at: str


class DeliveryAttempt(BaseModel):
    """One attempt of a delivery."""

    attempt: int = Field(description="1 for the first attempt.")
    at: str = Field(description="When it was sent (UTC, ISO 8601).")
    status_code: int | None = Field(description="The receiver's HTTP status (null: no answer).")
    error: str | None = Field(description="Why no answer came (timeout, refused address, ...).")
    duration_ms: float


_DELIVERY_EXAMPLE: dict[str, Any] = {
    "id": "dlv_5f1c0e9a7d4e0f8b5a2c1d0e",
    "event_type": "submission.ended",
    "url": "https://hooks.example.org/uqeval",
    "status": "delivered",
    "redelivery": False,
    "created_at": "2026-01-01T12:00:00Z",
    "delivered_at": "2026-01-01T12:00:00.2Z",
    "next_attempt_at": None,
    "last_error": None,
    "attempts": [
        {
            "attempt": 1,
            "at": "2026-01-01T12:00:00.1Z",
            "status_code": 200,
            "error": None,
            "duration_ms": 12.5,
        }
    ],
}


class Delivery(BaseModel):
    """One delivery of an event to a callback URL, with its attempts."""

    model_config = ConfigDict(json_schema_extra={"examples": [_DELIVERY_EXAMPLE]})

    id: str = Field(description="The delivery id (header UQEval-Delivery of each attempt).")
    event_type: Literal["submission.ended", "comparison.ended"]
    url: str
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending: being sent or waiting for its next attempt; delivered: a 2xx "
        "answer came; failed: retries stopped (callback_retry_s passed)."
    )
    redelivery: bool = Field(description="True for a delivery asked for by the owner.")
    created_at: str
    delivered_at: str | None
    next_attempt_at: str | None = Field(description="When the next attempt is due (pending).")
    last_error: str | None
    attempts: list[DeliveryAttempt] = Field(description="The attempts, oldest first.")


class DeliveryList(BaseModel):
    """The deliveries of a submission or comparison, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [_DELIVERY_EXAMPLE]}]})

    items: list[Delivery]
