"""The sans-I/O vocabulary of the client: one request described as data (:class:`Call`) and
the other effects an operation asks its transport for (a wait, a stream's lines, an item to hand
to the caller), when a failed try may be repeated, how long to wait, and the chunked upload with
its progress callback.

An operation is a generator: it yields effects and receives their outcome (a
``httpx.Response`` for a :class:`Call`, a line for :class:`NextLine`, None otherwise; a failed
connection is thrown into it as ``httpx.TransportError``) and returns its value. The
synchronous and the asynchronous transports (``uqeval._transport``) only perform effects, so
every decision is made once, here and in the operations."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import httpx

from uqeval.errors import RateLimited, ServerUnavailable, UQEvalError, from_response

#: ``read``: safe to repeat (GET, and PATCH/DELETE that set a state). ``submit``: a POST made
#: safe to repeat by its Idempotency-Key. ``write``: a POST repeated only when the server said
#: it did nothing (429, 503) or the connection was never made.
Policy = Literal["read", "submit", "write"]

#: Answers that are worth another try (with the policy's consent).
RETRY_STATUS = frozenset({429, 502, 503, 504})
#: Of those, the answers given before anything was done (a write may be repeated).
BEFORE_PROCESSING = frozenset({429, 503})

UPLOAD_CHUNK = 64 * 1024

ProgressFn = Callable[[int, int], None]

T = TypeVar("T")


@dataclass
class Call:
    """One API request: what to send, which answers are success, whether it may be repeated."""

    method: str
    path: str
    policy: Policy = "read"
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    ok: tuple[int, ...] = (200,)
    #: A 404 on a repeated try means the first try did it (a DELETE whose answer was lost).
    gone_ok_after_retry: bool = False
    upload_progress: ProgressFn | None = None

    def query(self) -> dict[str, Any] | None:
        if self.params is None:
            return None
        return {k: v for k, v in self.params.items() if v is not None}


@dataclass(frozen=True)
class Sleep:
    """Wait this many seconds (between tries, between polls)."""

    seconds: float


@dataclass(frozen=True)
class Open:
    """Open a streamed GET of ``path``; its outcome is the ``httpx.Response``, whose body is
    already read when the status is not 200. A transport holds one open stream at a time."""

    path: str
    headers: dict[str, str]


@dataclass(frozen=True)
class NextLine:
    """The next line of the open stream; None at its end."""


@dataclass(frozen=True)
class Close:
    """Close the open stream (a transport also closes it when the operation ends)."""


@dataclass(frozen=True)
class Emit(Generic[T]):
    """Hand ``item`` to the caller of an iterating operation (an event of a stream)."""

    item: T


@dataclass(frozen=True)
class Done(Generic[T]):
    """The operation returned ``value``."""

    value: T


Effect: TypeAlias = Call | Sleep | Open | NextLine | Close
#: An operation that returns a T.
Op: TypeAlias = Generator[Effect, Any, T]
#: An operation that hands items of type T to its caller, one by one.
Stream: TypeAlias = Generator[Effect | Emit[T], Any, None]


def advance(
    op: Generator[Any, Any, Any], reply: Any = None, error: BaseException | None = None
) -> Any:
    """Resume ``op`` with the outcome of its last effect (``reply``, or ``error`` raised where
    it waits): its next effect, or :class:`Done` with its value."""
    try:
        return op.throw(error) if error is not None else op.send(reply)
    except StopIteration as stop:
        return Done(stop.value)


def retry_after(response: httpx.Response) -> float | None:
    """The wait in seconds a Retry-After header asks for (seconds or an HTTP date)."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(backoff: float, attempt: int, cap: float) -> float:
    """Exponential backoff with jitter: about ``backoff · 2^attempt``, at most ``cap``."""
    return float(min(cap, backoff * (2**attempt) * (0.5 + random.random())))


def may_retry_status(call: Call, status: int) -> bool:
    """Whether an answer ``status`` may be followed by another try of ``call``."""
    if status not in RETRY_STATUS:
        return False
    return call.policy != "write" or status in BEFORE_PROCESSING


def may_retry_transport(call: Call, exc: httpx.TransportError) -> bool:
    """Whether a transport failure may be followed by another try: always when no connection
    was made; else only when repeating is harmless (reads, and submissions by their key)."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return True
    return call.policy != "write"


def unavailable(url: str, exc: httpx.TransportError) -> ServerUnavailable:
    what = type(exc).__name__
    detail = str(exc) or what
    return ServerUnavailable(f"cannot reach the server at {url}: {detail} ({what})")


def failure(response: httpx.Response) -> UQEvalError:
    """The exception for an error answer, with its Retry-After when it is a 429."""
    return from_response(response, retry_after(response))


def too_long_wait(wait: float, cap: float, response: httpx.Response) -> RateLimited | None:
    """A 429 that asks for a longer wait than the client allows is final at once."""
    if response.status_code == 429 and wait > cap:
        err = failure(response)
        assert isinstance(err, RateLimited)
        return err
    return None


def chunks(content: bytes, progress: ProgressFn | None) -> Iterator[bytes]:
    """``content`` in chunks of :data:`UPLOAD_CHUNK` bytes, calling ``progress(sent, total)``
    once at 0 and after each chunk is taken by the transport."""
    total = len(content)
    if progress is not None:
        progress(0, total)
    view = memoryview(content)
    sent = 0
    while sent < total:
        chunk = bytes(view[sent : sent + UPLOAD_CHUNK])
        yield chunk
        sent += len(chunk)
        if progress is not None:
            progress(sent, total)


async def achunks(content: bytes, progress: ProgressFn | None) -> AsyncIterator[bytes]:
    """:func:`chunks` for the asynchronous client."""
    for chunk in chunks(content, progress):
        yield chunk
