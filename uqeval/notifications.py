"""Notifications as the client reads them: the webhook secret of a key, the deliveries of a
job's end event to its ``callback_url``, and the Server-Sent Events of a submission (parsed
here from the stream's lines). See docs/webhooks.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Delivery", "DeliveryAttempt", "Event", "EventParser", "WebhookSecret"]


@dataclass(frozen=True)
class WebhookSecret:
    """The key's new webhook secret, shown once: it signs every event from now on (check them
    with :func:`uqeval.webhooks.verify`). Never shown in the repr."""

    secret: str = field(repr=False)
    created_at: str | None = None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> WebhookSecret:
        return cls(secret=str(doc["secret"]), created_at=doc.get("created_at"))


@dataclass(frozen=True)
class DeliveryAttempt:
    """One attempt of a delivery: the receiver's status code, or why no answer came."""

    attempt: int
    at: str | None
    status_code: int | None
    error: str | None
    duration_ms: float | None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DeliveryAttempt:
        code, ms = doc.get("status_code"), doc.get("duration_ms")
        return cls(
            attempt=int(doc.get("attempt") or 0),
            at=doc.get("at"),
            status_code=None if code is None else int(code),
            error=doc.get("error"),
            duration_ms=None if ms is None else float(ms),
        )


@dataclass(frozen=True)
class Delivery:
    """One delivery of a job's end event to its callback URL: ``status`` is ``pending``
    (being sent or waiting for a retry), ``delivered`` (a 2xx answer came) or ``failed``
    (retries stopped); ``redelivery`` is True for one asked for by the owner."""

    id: str
    event_type: str
    url: str
    status: str
    redelivery: bool
    created_at: str | None
    delivered_at: str | None
    next_attempt_at: str | None
    last_error: str | None
    attempts: list[DeliveryAttempt]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Delivery:
        return cls(
            id=str(doc["id"]),
            event_type=str(doc.get("event_type")),
            url=str(doc.get("url")),
            status=str(doc.get("status")),
            redelivery=bool(doc.get("redelivery", False)),
            created_at=doc.get("created_at"),
            delivered_at=doc.get("delivered_at"),
            next_attempt_at=doc.get("next_attempt_at"),
            last_error=doc.get("last_error"),
            attempts=[DeliveryAttempt.from_json(a) for a in doc.get("attempts") or []],
            raw=doc,
        )


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event: ``event`` is its type (``progress``, then one ``end``),
    ``data`` its JSON data (``progress``: ``{id, status, progress}``; ``end``: the webhook
    event body without its delivery fields), ``text`` the data as received."""

    event: str
    data: Any
    text: str
    id: str | None = None


class EventParser:
    """Turns the lines of a ``text/event-stream`` into :class:`Event` objects, as the
    HTML standard's event stream interpretation does: ``event:`` and ``data:`` fields (data
    lines joined by newlines), a blank line dispatches, comments (``:``) and ``retry:`` are
    ignored, and a block without data dispatches nothing."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> Event | None:
        """Take one line (without its line ending); the event it completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._event = ""
            return None
        text = "\n".join(self._data)
        try:
            data: Any = json.loads(text)
        except ValueError:
            data = text
        event = Event(event=self._event or "message", data=data, text=text, id=self._id)
        self._event, self._data = "", []
        return event
