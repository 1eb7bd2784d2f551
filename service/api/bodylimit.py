"""A cap on the request bodies that FastAPI reads whole into memory.

The upload routes (``POST /v1/submissions``, ``POST /v1/benchmarks`` and the parts of a
resumable upload, ``PUT /v1/uploads/{id}/parts/{n}``) stream their bodies through
:mod:`service.api.spool` and :mod:`service.api.payload`, which refuse more than their limit
(``max_body_bytes``, ``max_json_body_bytes``, the part size) as the bytes arrive. Every other route that takes a body (a PATCH,
a comparison, a team, a key, the web UI's login form) is parsed by FastAPI or Starlette,
which read the body whole first — with no limit, one request could fill the API's memory.
This ASGI middleware reads such a body itself, at most :data:`SMALL_BODY_BYTES` of it, and
answers 413 (the service's error document, ``field: "body"``) when the declared
``Content-Length`` or the bytes received exceed it; otherwise it hands the buffered body to
the app unchanged.
"""

from __future__ import annotations

import json
import logging
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_body

__all__ = ["SMALL_BODY_BYTES", "BodyLimit"]

log = logging.getLogger("uqeval.api")

#: The largest body of a route other than the two uploads (1 MiB). Their bodies are small
#: JSON documents (ids, names, metadata of at most 64 KiB, a metric list).
SMALL_BODY_BYTES = 1 << 20

#: (method, path) of the routes that stream and bound their own bodies.
STREAMED = frozenset({("POST", "/v1/submissions"), ("POST", "/v1/benchmarks")})
#: The parts of resumable uploads, bounded by their part size.
STREAMED_PATHS = re.compile(r"^/v1/uploads/[^/]+/parts/[^/]+$")


class BodyLimit:
    """ASGI middleware refusing (413) a body over ``limit`` bytes on the non-upload routes."""

    def __init__(self, app: ASGIApp, limit: int = SMALL_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", "")).rstrip("/") or "/"
        if (scope["method"], path) in STREAMED or (
            scope["method"] == "PUT" and STREAMED_PATHS.match(path)
        ):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":  # the client went away: nobody to answer
                log.info("client disconnected during %s %s", scope["method"], path)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as Starlette does

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps(
            error_body(
                "payload_too_large",
                f"the request body exceeds the limit of {self.limit} bytes of this route",
                field="body",
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    # the rest of the body is not read: the connection cannot be reused
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
