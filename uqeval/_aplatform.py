"""The calls of :class:`uqeval.AsyncClient` for final submissions, benchmark suites and
notifications: those of :class:`uqeval.Client` (``uqeval._platform``) as coroutines, on the
same request builders."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from uqeval._base import _id
from uqeval._http import Call, backoff_delay, failure, may_retry_status, unavailable
from uqeval._platform import SSE_MEDIA, PlatformBase
from uqeval.models import Submission, TeamFinals
from uqeval.notifications import Delivery, Event, EventParser, WebhookSecret
from uqeval.suites import Suite, SuiteLeaderboard

__all__ = ["AsyncPlatformCalls"]


class AsyncPlatformCalls(PlatformBase):
    """Finals, suites and notifications: the asynchronous calls."""

    _http: httpx.AsyncClient

    async def _send(self, call: Call) -> httpx.Response:
        raise NotImplementedError

    async def _json(self, call: Call) -> Any:
        return (await self._send(call)).json()

    # -- public/private split and finals ----------------------------------------------------

    async def mark_final(self, id: Any, final: bool = True) -> Submission:
        """As :meth:`uqeval.Client.mark_final`, awaited."""
        return Submission.from_json(await self._json(self._mark_final_call(id, final)))

    async def finals(self, benchmark: Any) -> list[TeamFinals]:
        """As :meth:`uqeval.Client.finals`, awaited."""
        return self._finals(await self._json(self._finals_call(benchmark)))

    # -- suites -----------------------------------------------------------------------------

    async def create_suite(self, name: str, tasks: Any, **options: Any) -> Suite:
        """As :meth:`uqeval.Client.create_suite`, awaited."""
        return Suite.from_json(await self._json(self._create_suite_call(name, tasks, options)))

    async def update_suite(self, id: Any, **changes: Any) -> Suite:
        """As :meth:`uqeval.Client.update_suite`, awaited."""
        return Suite.from_json(await self._json(self._update_suite_call(id, changes)))

    async def delete_suite(self, id: Any) -> None:
        """As :meth:`uqeval.Client.delete_suite`, awaited."""
        await self._send(self._delete_call(self._suite_path(id)))

    async def suites(self) -> list[Suite]:
        """As :meth:`uqeval.Client.suites`, awaited."""
        return self._suites(await self._json(Call("GET", "/v1/suites")))

    async def suite(self, id: Any) -> Suite:
        """As :meth:`uqeval.Client.suite`, awaited."""
        return Suite.from_json(await self._json(Call("GET", self._suite_path(id))))

    async def suite_leaderboard(
        self,
        id: Any,
        *,
        view: str = "rows",
        limit: int | None = None,
        offset: int | None = None,
    ) -> SuiteLeaderboard:
        """As :meth:`uqeval.Client.suite_leaderboard`, awaited."""
        call = self._suite_board_call(id, view, limit, offset, csv=False)
        return SuiteLeaderboard.from_json(await self._json(call))

    async def suite_leaderboard_csv(
        self,
        id: Any,
        *,
        view: str = "rows",
        limit: int | None = None,
        offset: int | None = None,
    ) -> str:
        """As :meth:`uqeval.Client.suite_leaderboard_csv`, awaited."""
        return (await self._send(self._suite_board_call(id, view, limit, offset, csv=True))).text

    # -- notifications ------------------------------------------------------------------------

    async def webhook_secret(self) -> WebhookSecret:
        """As :meth:`uqeval.Client.webhook_secret`, awaited."""
        return WebhookSecret.from_json(await self._json(self._secret_call()))

    async def deliveries(self, id: Any, *, scope: str = "submission") -> list[Delivery]:
        """As :meth:`uqeval.Client.deliveries`, awaited."""
        return self._deliveries(await self._json(self._deliveries_call(id, scope)))

    async def resend(self, id: Any, *, scope: str = "submission") -> Delivery:
        """As :meth:`uqeval.Client.resend`, awaited."""
        return Delivery.from_json(await self._json(self._resend_call(id, scope)))

    async def events(self, id: Any, *, timeout: float | None = None) -> AsyncIterator[Event]:
        """As :meth:`uqeval.Client.events`: an async iterator (``async for event in
        client.events(sub)``)."""
        path = self._events_path(id)
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no end event of submission {_id(id)} after {timeout} s")
            got_any = False
            try:
                async with self._http.stream(
                    "GET", path, headers={"Accept": SSE_MEDIA}
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        if failures >= self.retries or not may_retry_status(
                            Call("GET", path), response.status_code
                        ):
                            raise failure(response)
                    else:
                        parser = EventParser()
                        async for line in response.aiter_lines():
                            event = parser.feed(line)
                            if event is not None:
                                got_any, failures = True, 0
                                yield event
                                if event.event == "end":
                                    return
                            if deadline is not None and time.monotonic() > deadline:
                                break
            except httpx.TransportError as exc:
                if failures >= self.retries:
                    raise unavailable(self.url, exc) from None
            if not got_any:  # refused or broken at once: wait before the next try
                await asyncio.sleep(backoff_delay(self.backoff, failures, self.max_retry_wait))
                failures += 1
