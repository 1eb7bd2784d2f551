"""The two transports of the client, and how one definition of a call becomes a method of both.

Every call of the API is written once, as an operation of the sans-I/O core (see
``uqeval._http``): a generator that yields effects and returns a value. :class:`SyncTransport`
(on ``httpx.Client``) and :class:`AsyncTransport` (on ``httpx.AsyncClient``) perform those
effects and nothing else. The decorators :class:`operation` and :class:`iteration` turn an
operation into a public method: a plain method of :class:`uqeval.Client` and a coroutine (or an
async iterator) of :class:`uqeval.AsyncClient`, with the operation's name, signature and
docstring. Inside the core, ``Base.name(self, ...)`` is the operation itself, a generator to
``yield from``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import httpx

from uqeval._http import (
    Call,
    Close,
    Done,
    Emit,
    NextLine,
    Op,
    Open,
    Sleep,
    Stream,
    achunks,
    advance,
    chunks,
)

__all__ = ["AsyncTransport", "SyncTransport", "iteration", "operation"]

P = ParamSpec("P")
T = TypeVar("T")


class SyncTransport:
    """Performs the effects of operations on an ``httpx.Client``."""

    _http: httpx.Client

    def _run(self, op: Op[T]) -> T:
        """Run ``op`` to its end: its value, or the exception it raised."""
        stream = _SyncStream()
        try:
            step = advance(op)
            while not isinstance(step, Done):
                step = self._step(op, step, stream)
            return step.value  # type: ignore[no-any-return]
        finally:
            stream.close()
            op.close()

    def _iterate(self, op: Stream[T]) -> Iterator[T]:
        """Run ``op``, handing over each item it emits."""
        stream = _SyncStream()
        try:
            step = advance(op)
            while not isinstance(step, Done):
                if isinstance(step, Emit):
                    yield step.item
                    step = advance(op)
                else:
                    step = self._step(op, step, stream)
        finally:
            stream.close()
            op.close()

    def _step(self, op: Generator[Any, Any, Any], effect: Any, stream: _SyncStream) -> Any:
        error: httpx.TransportError | None = None
        try:
            reply = self._perform(effect, stream)
        except httpx.TransportError as exc:
            reply, error = None, exc
        return advance(op, reply, error)

    def _perform(self, effect: Any, stream: _SyncStream) -> Any:
        if isinstance(effect, Call):
            content = (
                None if effect.content is None else chunks(effect.content, effect.upload_progress)
            )
            return self._http.request(content=content, **request_args(effect))
        if isinstance(effect, Sleep):
            time.sleep(effect.seconds)
            return None
        if isinstance(effect, Open):
            stream.close()
            request = self._http.build_request("GET", effect.path, headers=effect.headers)
            stream.response = response = self._http.send(request, stream=True)
            if response.status_code != 200:
                response.read()
            else:
                stream.lines = response.iter_lines()
            return response
        if isinstance(effect, NextLine):
            assert stream.lines is not None
            return next(stream.lines, None)
        if isinstance(effect, Close):
            stream.close()
            return None
        raise TypeError(f"not an effect of a synchronous call: {effect!r}")


class AsyncTransport:
    """Performs the effects of operations on an ``httpx.AsyncClient``."""

    _http: httpx.AsyncClient

    async def _run(self, op: Op[T]) -> T:
        """As :meth:`SyncTransport._run`, awaited."""
        stream = _AsyncStream()
        try:
            step = advance(op)
            while not isinstance(step, Done):
                step = await self._step(op, step, stream)
            return step.value  # type: ignore[no-any-return]
        finally:
            await stream.aclose()
            op.close()

    async def _iterate(self, op: Stream[T]) -> AsyncIterator[T]:
        """As :meth:`SyncTransport._iterate`, an async iterator."""
        stream = _AsyncStream()
        try:
            step = advance(op)
            while not isinstance(step, Done):
                if isinstance(step, Emit):
                    yield step.item
                    step = advance(op)
                else:
                    step = await self._step(op, step, stream)
        finally:
            await stream.aclose()
            op.close()

    async def _step(self, op: Generator[Any, Any, Any], effect: Any, stream: _AsyncStream) -> Any:
        error: httpx.TransportError | None = None
        try:
            reply = await self._perform(effect, stream)
        except httpx.TransportError as exc:
            reply, error = None, exc
        return advance(op, reply, error)

    async def _perform(self, effect: Any, stream: _AsyncStream) -> Any:
        if isinstance(effect, Call):
            content = (
                None if effect.content is None else achunks(effect.content, effect.upload_progress)
            )
            return await self._http.request(content=content, **request_args(effect))
        if isinstance(effect, Sleep):
            await asyncio.sleep(effect.seconds)
            return None
        if isinstance(effect, Open):
            await stream.aclose()
            request = self._http.build_request("GET", effect.path, headers=effect.headers)
            stream.response = response = await self._http.send(request, stream=True)
            if response.status_code != 200:
                await response.aread()
            else:
                stream.lines = response.aiter_lines()
            return response
        if isinstance(effect, NextLine):
            assert stream.lines is not None
            return await anext(stream.lines, None)
        if isinstance(effect, Close):
            await stream.aclose()
            return None
        raise TypeError(f"not an effect of an asynchronous call: {effect!r}")


def request_args(call: Call) -> dict[str, Any]:
    """The arguments of ``httpx`` ``request`` for ``call``, but its body."""
    return {
        "method": call.method,
        "url": call.path,
        "params": call.query(),
        "json": call.json,
        "headers": call.headers,
    }


class _SyncStream:
    """The open stream of one synchronous operation."""

    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self.lines: Iterator[str] | None = None

    def close(self) -> None:
        if self.response is not None:
            self.response.close()
        self.response, self.lines = None, None


class _AsyncStream:
    """The open stream of one asynchronous operation."""

    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self.lines: AsyncIterator[str] | None = None

    async def aclose(self) -> None:
        if self.response is not None:
            await self.response.aclose()
        self.response, self.lines = None, None


# -- one definition, two methods ---------------------------------------------------------------


def _made(op: Callable[..., Any], method: Callable[..., Any], returns: str) -> Any:
    """``method`` named, documented and signed as ``op``, returning ``returns``."""
    functools.update_wrapper(method, op)
    signature = inspect.signature(op)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=returns
    )
    method.__annotations__ = {**op.__annotations__, "return": returns}
    return method


def _value(op: Callable[..., Any]) -> str:
    """The value type of ``op``'s annotation ``Op[X]`` or ``Stream[X]``: ``X``."""
    returns = str(op.__annotations__.get("return", "Any"))
    head, _, rest = returns.partition("[")
    return rest[:-1] if head in ("Op", "Stream") and rest.endswith("]") else returns


class _Twofold:
    """What :class:`operation` and :class:`iteration` share: the operation, its method on
    each transport, and which one an attribute read gets."""

    def __init__(self, op: Callable[..., Any], sync: Any, asynchronous: Any) -> None:
        self.op, self.sync, self.asynchronous = op, sync, asynchronous
        functools.update_wrapper(self, op)  # type: ignore[arg-type]

    def _bound(self, obj: Any, owner: type[Any] | None = None) -> Callable[..., Any]:
        kind = owner if obj is None else type(obj)
        if kind is not None and issubclass(kind, SyncTransport):
            return self.sync.__get__(obj, owner)  # type: ignore[no-any-return]
        if kind is not None and issubclass(kind, AsyncTransport):
            return self.asynchronous.__get__(obj, owner)  # type: ignore[no-any-return]
        return self.op if obj is None else functools.partial(self.op, obj)


class operation(_Twofold, Generic[P, T]):
    """A call of the API defined once: a method that returns the value on
    :class:`SyncTransport`, a coroutine on :class:`AsyncTransport`, and the operation itself
    (a generator) when read from a class of the core."""

    def __init__(self, op: Callable[Concatenate[Any, P], Op[T]]) -> None:
        def sync(self: Any, *args: Any, **kwargs: Any) -> Any:
            return self._run(op(self, *args, **kwargs))

        async def asynchronous(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await self._run(op(self, *args, **kwargs))

        value = _value(op)
        super().__init__(op, _made(op, sync, value), _made(op, asynchronous, value))

    @overload
    def __get__(self, obj: SyncTransport, owner: Any = None) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, obj: AsyncTransport, owner: Any = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, obj: None, owner: Any = None) -> Callable[Concatenate[Any, P], Op[T]]: ...
    @overload
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Any]: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Any]:
        return self._bound(obj, owner)


class iteration(_Twofold, Generic[P, T]):
    """As :class:`operation`, for a call that hands items over one by one: a generator on
    :class:`SyncTransport`, an async generator on :class:`AsyncTransport`."""

    def __init__(self, op: Callable[Concatenate[Any, P], Stream[T]]) -> None:
        def sync(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            yield from self._iterate(op(self, *args, **kwargs))

        async def asynchronous(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in self._iterate(op(self, *args, **kwargs)):
                yield item

        value = _value(op)
        super().__init__(
            op,
            _made(op, sync, f"Iterator[{value}]"),
            _made(op, asynchronous, f"AsyncIterator[{value}]"),
        )

    @overload
    def __get__(self, obj: SyncTransport, owner: Any = None) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, obj: AsyncTransport, owner: Any = None) -> Callable[P, AsyncIterator[T]]: ...
    @overload
    def __get__(self, obj: None, owner: Any = None) -> Callable[Concatenate[Any, P], Stream[T]]: ...
    @overload
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Any]: ...
    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Any]:
        return self._bound(obj, owner)
