"""The API's one error shape and the exception handlers that produce it.

Every error answer is ``{"error": {"code", "message", "field", "index"}}``: ``code`` is a stable
machine-readable string, ``message`` says what was wrong and what was expected, ``field`` names
the offending request field (dotted path, e.g. ``prediction.std``; ``null`` when not about one
field) and ``index`` is the first offending row (``null`` when not about one entry). No answer
ever carries a stack trace: unexpected exceptions are logged with a reference that the 500
answer quotes.
"""

from __future__ import annotations

import errno
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

import redis.exceptions
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from uqcore import UQValidationError

log = logging.getLogger("uqeval.api")

#: HTTP status -> default error code.
CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    499: "client_closed_request",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
    500: "internal_error",
    503: "service_unavailable",
    507: "insufficient_storage",
}

#: The errno values of a disk that cannot take more bytes: full, or over a quota.
OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` is the service's own disk refusing to store more (no fault of the
    request): such an error is answered 507 and never blamed on the body."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_SPACE


class ApiError(Exception):
    """An error answer: HTTP ``status``, ``code``, ``message``, optional ``field`` and ``index``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        index: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or CODES.get(status, "error")
        self.message = message
        self.field = field
        self.index = index
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.field, self.index)


def error_body(
    code: str, message: str, field: str | None = None, index: int | None = None
) -> dict[str, Any]:
    """The JSON error document."""
    return {"error": {"code": code, "message": message, "field": field, "index": index}}


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def _loc_to_field(loc: tuple[Any, ...]) -> tuple[str | None, int | None]:
    """A pydantic error location as (dotted field path, first integer index)."""
    parts: list[str] = []
    index: int | None = None
    for item in loc:
        if isinstance(item, int):
            if index is None:
                index = item
            continue
        if index is not None:
            # Keys below a list element (rare): keep them visible in the path.
            parts.append(f"[{index}]")
        parts.append(str(item))
    return (".".join(parts) or None), index


_UNION_TAG = re.compile(r"[\[\]']")


def _pick(errors: list[dict[str, Any]]) -> tuple[tuple[Any, ...], str]:
    """The location and message to report from pydantic's error list.

    The first error decides the field. When it comes from a union (``metrics`` is ``"all"`` or
    a list), pydantic reports one error per member, with the member's tag in the location: the
    tags are dropped, the deepest location wins, and messages at the same location are joined
    with "or" ("Input should be 'all' or List should have at least 1 item").
    """

    def tag_at(loc: tuple[Any, ...]) -> int | None:
        for i, item in enumerate(loc):
            if isinstance(item, str) and _UNION_TAG.search(item):
                return i
        return None

    first_loc = tuple(errors[0].get("loc", ()))
    cut = tag_at(first_loc)
    if cut is None:
        return first_loc, str(errors[0].get("msg", "invalid value"))
    root = first_loc[:cut]
    candidates = []
    for e in errors:
        loc = tuple(e.get("loc", ()))
        if loc[:cut] == root and tag_at(loc) == cut:
            stripped = tuple(x for x in loc if not (isinstance(x, str) and _UNION_TAG.search(x)))
            candidates.append((stripped, str(e.get("msg", "invalid value"))))
    depth = max(len(loc) for loc, _ in candidates)
    deepest = [(loc, msg) for loc, msg in candidates if len(loc) == depth]
    loc = deepest[0][0]
    msgs = list(dict.fromkeys(msg for l2, msg in deepest if l2 == loc))
    return loc, " or ".join(msgs)


def pydantic_error(errors: list[dict[str, Any]], *, prefix: str | None = None) -> ApiError:
    """A 422 for the first pydantic error (the one a client fixes first)."""
    loc, msg = _pick(errors)
    # Discriminated unions put the tag in the location ("prediction", "gaussian", "mean"):
    # drop it, the client never wrote it.
    if len(loc) >= 2 and loc[0] == "prediction" and isinstance(loc[1], str):
        from service.kinds import KIND_FIELDS

        if loc[1] in KIND_FIELDS:
            loc = (loc[0], *loc[2:])
    if prefix is not None:
        loc = (prefix, *loc)
    field, index = _loc_to_field(loc)
    where = field or "body"
    if index is not None:
        where = f"{where}[{index}]"
    return ApiError(422, f"{where}: {msg}", field=field, index=index)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail if isinstance(exc.detail, str) else CODES.get(exc.status_code, "error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(ApiError(exc.status_code, message, headers=headers))


async def _request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [dict(e) for e in exc.errors()]
    for e in errors:
        # FastAPI prefixes where the value came from; the client knows the name only.
        loc = tuple(e.get("loc", ()))
        if len(loc) > 1 and loc[0] in ("body", "query", "path", "header", "cookie"):
            e["loc"] = loc[1:]
    return error_response(pydantic_error(errors))


async def _store_down(request: Request, exc: Exception) -> JSONResponse:
    log.warning("store unavailable on %s %s: %s", request.method, request.url.path, exc)
    from service.blobs import BlobUnavailable

    what = "the job store (Redis)"
    if isinstance(exc, BlobUnavailable) or isinstance(exc.__cause__, BlobUnavailable):
        what = "the blob store"
    return error_response(ApiError(503, f"{what} is unavailable; retry later", headers=RETRY_AFTER))


#: The status recorded (request metrics) for a request whose client went away before its
#: body had arrived: nobody reads the answer (nginx's convention).
CLIENT_CLOSED = 499


async def _client_gone(request: Request, exc: Exception) -> JSONResponse:
    # A client that disconnects mid-upload is no error of the service: no traceback in the
    # error log, and nothing was stored (the body is read whole before anything is written).
    log.info("client disconnected during %s %s", request.method, request.url.path)
    return error_response(ApiError(CLIENT_CLOSED, "the client closed the connection"))


#: When to ask again after a full disk: space comes back by the expiry of uploads and
#: retention, or by an operator.
RETRY_AFTER_FULL = {"Retry-After": "60"}


async def _os_error(request: Request, exc: Exception) -> JSONResponse:
    """A full disk (scratch directory or local blob store): 507 with a Retry-After, logged as
    a warning for the operator; any other OSError is unexpected."""
    if not out_of_space(exc):
        return await _unexpected(request, exc)
    log.warning("disk full during %s %s: %s", request.method, request.url.path, exc)
    return error_response(
        ApiError(
            507,
            "the service's disk is full: the body was not stored (nothing of this request was "
            "kept); retry later",
            headers=RETRY_AFTER_FULL,
        )
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    ref = uuid.uuid4().hex[:12]
    log.error("unhandled error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
    return error_response(ApiError(500, f"internal error (reference {ref})"))


RETRY_AFTER = {"Retry-After": "2"}


def uq_location(exc: UQValidationError, fields: Mapping[str, str]) -> tuple[str | None, int | None]:
    """The field and index of the body that uqcore error ``exc`` is about.

    ``fields`` maps the uqcore arguments that are arrays of the body to their field names; an
    error about any other argument (or none) has no field. The index is the first component
    of the error's index: the row of an N×C array, the member of an M×N×C one.
    """
    field = fields.get(exc.argument) if exc.argument is not None else None
    if field is None:
        return None, None
    index = exc.index
    return field, index[0] if isinstance(index, tuple) else index


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the one JSON shape."""
    from service.blobs import BlobUnavailable
    from service.store import StoreUnavailable

    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StoreUnavailable, _store_down)
    app.add_exception_handler(BlobUnavailable, _store_down)  # as transient as Redis down
    app.add_exception_handler(redis.exceptions.ConnectionError, _store_down)
    app.add_exception_handler(redis.exceptions.TimeoutError, _store_down)
    app.add_exception_handler(OSError, _os_error)
    app.add_exception_handler(Exception, _unexpected)
