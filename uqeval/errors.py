"""The client's exceptions, one per way a call can fail, each with the command line's exit code.

Every error of the server has one JSON shape, ``{"error": {"code", "message", "field",
"index"}}`` (see ``service/api/errors.py``); :func:`from_response` turns it into the exception
of its status. The API key never appears in a message, a repr or a log line.
"""

from __future__ import annotations

from typing import Any

import httpx

from uqeval.models import Submission

__all__ = [
    "EXIT_OK",
    "EXIT_UNEXPECTED",
    "AuthError",
    "BadRequest",
    "JobFailed",
    "NotFound",
    "RateLimited",
    "ServerUnavailable",
    "UQEvalError",
    "UploadInterrupted",
    "exit_code",
    "from_response",
]

#: The command line's exit status on success.
EXIT_OK = 0
#: Exit status of an error that is none of the classes below (a defect, an interrupted call).
EXIT_UNEXPECTED = 1


class UQEvalError(Exception):
    """Base of the client's errors.

    Attributes
    ----------
    status : int or None
        The HTTP status of the answer (None for an error found before or without one).
    code : str or None
        The server's machine-readable code (``validation_error``, ``rate_limited``, ...).
    message : str
        What was wrong and what was expected.
    field : str or None
        The offending request field (dotted path), if the error is about one.
    index : int or None
        The first offending row, if the error is about one entry.
    body : dict or None
        The server's error document as received.
    exit_code : int
        The command line's exit status for this class of error.
    """

    exit_code: int = EXIT_UNEXPECTED

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        field: str | None = None,
        index: int | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.index = index
        self.body = body

    def __str__(self) -> str:
        if self.field is None:
            return self.message
        where = self.field if self.index is None else f"{self.field}[{self.index}]"
        return f"{self.message} (field {where})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, "
            f"code={self.code!r}, field={self.field!r}, index={self.index!r})"
        )


class BadRequest(UQEvalError):
    """The request was refused as it is (400, 409, 413, 415, 422), or the input is unusable
    before anything is sent."""

    exit_code = 2


class AuthError(UQEvalError):
    """The key is missing, unknown or revoked (401), or not allowed to do this (403)."""

    exit_code = 3


class NotFound(UQEvalError):
    """No such submission, benchmark, comparison, key or team (404), or not one the key can
    read."""

    exit_code = 4


class JobFailed(UQEvalError):
    """A submission or comparison ended failed or cancelled.

    Attributes
    ----------
    submission : Submission or None
        The final state of the submission (``.error`` says why it failed).
    job : Submission or Comparison or None
        The final state of the job (the submission or the comparison).
    """

    exit_code = 5

    def __init__(self, message: str, *, job: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.job = job
        self.submission = job if isinstance(job, Submission) else None


class ServerUnavailable(UQEvalError):
    """The server could not be reached (refused, timed out), answered 502/503/504 on every
    try, or answered 507 (its disk is full: try again later)."""

    exit_code = 6


class UploadInterrupted(ServerUnavailable):
    """A resumable upload stopped before all its parts were sent (the server went away, or
    kept refusing a part); the parts already sent are kept by the server until it expires.

    Attributes
    ----------
    upload_id : str
        The upload to resume: ``client.resume_upload(err.upload_id, err.upload_body)``, or
        on the command line ``uqeval submit FILE --resume-upload ID`` with the same file and
        options.
    upload_body : bytes or path
        What was being uploaded.
    """

    def __init__(self, message: str, *, upload_id: str, upload_body: Any, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.upload_id = upload_id
        self.upload_body = upload_body


class RateLimited(UQEvalError):
    """429 on every try: the key's rate limit or the team's quota on a benchmark is spent.

    Attributes
    ----------
    retry_after : float or None
        The seconds the server asked to wait before the next try (None if it did not say).
    """

    exit_code = 7

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


#: HTTP status -> error class (the other 4xx are BadRequest, the other 5xx ServerUnavailable).
_BY_STATUS: dict[int, type[UQEvalError]] = {
    400: BadRequest,
    401: AuthError,
    403: AuthError,
    404: NotFound,
    409: BadRequest,
    413: BadRequest,
    415: BadRequest,
    422: BadRequest,
    429: RateLimited,
    502: ServerUnavailable,
    503: ServerUnavailable,
    504: ServerUnavailable,
    507: ServerUnavailable,
}


def exit_code(exc: BaseException) -> int:
    """The command line's exit status for ``exc`` (1 for anything not a :class:`UQEvalError`)."""
    return exc.exit_code if isinstance(exc, UQEvalError) else EXIT_UNEXPECTED


def from_response(response: httpx.Response, retry_after: float | None = None) -> UQEvalError:
    """The exception for an error answer (status >= 400), from its JSON error document.

    An answer that is not the service's error shape (a proxy's HTML page) keeps its status and
    a short excerpt of its text as the message.
    """
    status = response.status_code
    body: dict[str, Any] | None = None
    try:
        doc = response.json()
    except ValueError:
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        body = doc
        message = str(err.get("message") or f"HTTP {status}")
        code = err.get("code")
        field = err.get("field")
        index = err.get("index")
    else:
        text = response.text.strip().replace("\n", " ")
        message = f"HTTP {status} {response.reason_phrase}" + (f": {text[:200]}" if text else "")
        code, field, index = None, None, None
    cls = _BY_STATUS.get(status) or (ServerUnavailable if status >= 500 else BadRequest)
    if status >= 500 and status not in _BY_STATUS:
        cls = UQEvalError
    kw: dict[str, Any] = {
        "status": status,
        "code": code if isinstance(code, str) else None,
        "field": field if isinstance(field, str) else None,
        "index": index if isinstance(index, int) else None,
        "body": body,
    }
    if cls is RateLimited:
        return RateLimited(message, retry_after=retry_after, **kw)
    return cls(message, **kw)
