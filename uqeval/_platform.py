"""The calls of the client for final submissions, benchmark suites and notifications (webhook
secret, deliveries, Server-Sent Events): their request builders and their operations, each
written once for :class:`uqeval.Client` and :class:`uqeval.AsyncClient`."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx

from uqeval._base import ClientBase, _id
from uqeval._http import (
    Call,
    Close,
    Emit,
    NextLine,
    Op,
    Open,
    Sleep,
    Stream,
    backoff_delay,
    failure,
    may_retry_status,
    unavailable,
)
from uqeval._transport import iteration, operation
from uqeval.errors import BadRequest
from uqeval.models import Submission, TeamFinals
from uqeval.notifications import Delivery, Event, EventParser, WebhookSecret
from uqeval.suites import Suite, SuiteLeaderboard, task_list

__all__ = ["PlatformCalls"]

SCOPES = ("submission", "comparison")
SSE_MEDIA = "text/event-stream"


class PlatformCalls(ClientBase):
    """Finals, suites and notifications: request builders, answer readers, and the operations
    of :class:`uqeval.Client` and :class:`uqeval.AsyncClient`."""

    # -- finals ----------------------------------------------------------------------------

    @staticmethod
    def _mark_final_call(sub_id: Any, final: bool) -> Call:
        # Setting a state: repeating it answers the same.
        return Call("PATCH", f"/v1/submissions/{_id(sub_id)}", json={"final": bool(final)})

    @staticmethod
    def _finals_call(bench_id: Any) -> Call:
        return Call("GET", f"/v1/benchmarks/{_id(bench_id)}/finals")

    @staticmethod
    def _finals(doc: dict[str, Any]) -> list[TeamFinals]:
        return [TeamFinals.from_json(t) for t in doc.get("teams") or []]

    # -- suites ----------------------------------------------------------------------------

    @staticmethod
    def _suite_path(suite_id: Any) -> str:
        return f"/v1/suites/{quote(_id(suite_id), safe='')}"

    @staticmethod
    def _create_suite_call(name: str, tasks: Any, options: dict[str, Any]) -> Call:
        body = {**options, "name": name, "tasks": task_list(tasks)}
        return Call("POST", "/v1/suites", policy="write", json=body, ok=(201,))

    def _update_suite_call(self, suite_id: Any, changes: dict[str, Any]) -> Call:
        body = dict(changes)
        if body.get("tasks") is not None:
            body["tasks"] = task_list(body["tasks"])
        return Call("PATCH", self._suite_path(suite_id), json=body)

    def _suite_board_call(
        self, suite_id: Any, view: str, limit: int | None, offset: int | None, csv: bool
    ) -> Call:
        if view not in ("rows", "tasks"):
            raise BadRequest(f"view must be 'rows' or 'tasks'; found {view!r}", field="view")
        return Call(
            "GET",
            self._suite_path(suite_id) + "/leaderboard",
            params={
                "view": view,
                "limit": limit,
                "offset": offset,
                "format": "csv" if csv else None,
            },
        )

    @staticmethod
    def _suites(doc: dict[str, Any]) -> list[Suite]:
        return [Suite.from_json(s) for s in doc.get("suites") or []]

    # -- notifications ---------------------------------------------------------------------

    @staticmethod
    def _secret_call() -> Call:
        # Each POST rotates the secret: repeated only when the server did nothing.
        return Call("POST", "/v1/webhook-secret", policy="write", ok=(201,))

    @staticmethod
    def _deliveries_path(job_id: Any, scope: str) -> str:
        if scope not in SCOPES:
            raise BadRequest(
                f"scope must be 'submission' or 'comparison'; found {scope!r}", field="scope"
            )
        return f"/v1/{scope}s/{quote(_id(job_id), safe='')}/deliveries"

    def _deliveries_call(self, job_id: Any, scope: str) -> Call:
        return Call("GET", self._deliveries_path(job_id, scope))

    def _resend_call(self, job_id: Any, scope: str) -> Call:
        # A POST that sends the event again: repeated only when the server did nothing.
        return Call("POST", self._deliveries_path(job_id, scope), policy="write", ok=(202,))

    @staticmethod
    def _deliveries(doc: dict[str, Any]) -> list[Delivery]:
        return [Delivery.from_json(d) for d in doc.get("items") or []]

    @staticmethod
    def _events_path(sub_id: Any) -> str:
        return f"/v1/submissions/{quote(_id(sub_id), safe='')}/events"

    # -- public/private split and finals ----------------------------------------------------

    @operation
    def mark_final(self, id: Any, final: bool = True) -> Op[Submission]:
        """Mark one of your team's submissions final (or unmark it with ``final=False``).

        Once its benchmark is closed, only finals rank on the private board: those a team
        marked (at most the benchmark's ``max_final``), else its best public ones.

        Parameters
        ----------
        id : str or Submission
            A succeeded submission on a benchmark that is still open.
        final : bool
            Mark (True) or unmark (False).

        Returns
        -------
        Submission
            With ``final`` set.

        Raises
        ------
        BadRequest
            409 with code ``benchmark_closed`` (its finals are fixed), ``not_final_eligible``
            (not a succeeded benchmark submission) or ``too_many_finals`` (the message lists
            the team's current finals: unmark one first).
        """
        return Submission.from_json((yield from self._json(self._mark_final_call(id, final))))

    @operation
    def finals(self, benchmark: Any) -> Op[list[TeamFinals]]:
        """The submissions that rank on a benchmark's private board, per team.

        Parameters
        ----------
        benchmark : str or Benchmark

        Returns
        -------
        list of TeamFinals
            Each team's finals (an admin key: every team; others: their own team), each
            ``FinalSubmission`` with ``chosen`` ``"explicit"`` (marked) or ``"default"`` (one
            of the team's best public submissions by the primary metric).
        """
        return self._finals((yield from self._json(self._finals_call(benchmark))))

    # -- suites -----------------------------------------------------------------------------

    @operation
    def create_suite(self, /, name: str, tasks: Any, **options: Any) -> Op[Suite]:
        """Create a benchmark suite (admin).

        Parameters
        ----------
        name : str
        tasks : list
            1 to 100 distinct benchmarks: ids or Benchmarks (ranked on their primary
            metric), ``(benchmark, metric)`` pairs, or ``{"benchmark_id", "metric"}``.
        **options
            ``description``, ``baseline_team`` (None: each benchmark's baseline submission),
            ``missing`` (``"exclude"`` or ``"impute_baseline"``), ``selection`` (``"board"``
            or ``"final"``), ``n_resamples``, ``level``, ``seed``, ``public_board``.

        Returns
        -------
        Suite
        """
        call = self._create_suite_call(name, tasks, options)
        return Suite.from_json((yield from self._json(call)))

    @operation
    def update_suite(self, /, id: Any, **changes: Any) -> Op[Suite]:
        """Change a suite's fields (admin): any of :meth:`create_suite`'s (``tasks`` as
        there); the others keep their values.

        Returns
        -------
        Suite
        """
        return Suite.from_json((yield from self._json(self._update_suite_call(id, changes))))

    @operation
    def delete_suite(self, id: Any) -> Op[None]:
        """Delete a suite and its leaderboard (admin); its benchmarks stay."""
        yield from self._send(self._delete_call(self._suite_path(id)))

    @operation
    def suites(self) -> Op[list[Suite]]:
        """Every suite, oldest first."""
        return self._suites((yield from self._json(Call("GET", "/v1/suites"))))

    @operation
    def suite(self, id: Any) -> Op[Suite]:
        """One suite's definition."""
        return Suite.from_json((yield from self._json(Call("GET", self._suite_path(id)))))

    @operation
    def suite_leaderboard(
        self,
        id: Any,
        *,
        view: str = "rows",
        limit: int | None = None,
        offset: int | None = None,
    ) -> Op[SuiteLeaderboard]:
        """A suite's leaderboard: teams by mean rank over its tasks, with win rate and
        geometric-mean skill against the baseline, each with an interval.

        Parameters
        ----------
        id : str or Suite
        view : {"rows", "tasks"}
            What the intervals resample: rows within each task, or tasks within the suite.
        limit, offset : int, optional
            The page (server default: the first 50 teams).

        Returns
        -------
        SuiteLeaderboard
            Its ``status`` says whether the intervals are ``current`` (else ``computing`` or
            ``stale``: a worker is computing them; read again later).
        """
        call = self._suite_board_call(id, view, limit, offset, csv=False)
        return SuiteLeaderboard.from_json((yield from self._json(call)))

    @operation
    def suite_leaderboard_csv(
        self,
        id: Any,
        *,
        view: str = "rows",
        limit: int | None = None,
        offset: int | None = None,
    ) -> Op[str]:
        """A suite's leaderboard page as CSV text (as the server writes it); the parameters
        of :meth:`suite_leaderboard`."""
        call = self._suite_board_call(id, view, limit, offset, csv=True)
        return (yield from self._send(call)).text

    # -- notifications ------------------------------------------------------------------------

    @operation
    def webhook_secret(self) -> Op[WebhookSecret]:
        """Create or rotate this key's webhook secret, which signs the events POSTed to the
        ``callback_url`` of its submissions and comparisons (check them with
        :func:`uqeval.webhooks.verify`). The previous secret stops signing at once.

        Returns
        -------
        WebhookSecret
            ``secret`` is shown this once; keep it.
        """
        return WebhookSecret.from_json((yield from self._json(self._secret_call())))

    @operation
    def deliveries(self, id: Any, *, scope: str = "submission") -> Op[list[Delivery]]:
        """The deliveries of a job's end event to its ``callback_url``, newest first, each
        with its attempts (your team's jobs; admins: any).

        Parameters
        ----------
        id : str, Submission or Comparison
        scope : {"submission", "comparison"}
            What ``id`` names.

        Returns
        -------
        list of Delivery
        """
        return self._deliveries((yield from self._json(self._deliveries_call(id, scope))))

    @operation
    def resend(self, id: Any, *, scope: str = "submission") -> Op[Delivery]:
        """Send a job's end event again, now (a new delivery, signed with the key's current
        secret); BadRequest (409) while the job runs or when it has no ``callback_url``.

        Returns
        -------
        Delivery
            The new delivery, ``pending``.
        """
        return Delivery.from_json((yield from self._json(self._resend_call(id, scope))))

    @iteration
    def events(self, id: Any, *, timeout: float | None = None) -> Stream[Event]:
        """Follow a submission as Server-Sent Events, without polling.

        Yields a ``progress`` event at once and whenever the status or progress changes,
        then one ``end`` event (``data``: the webhook event body: ``type``, ``id``,
        ``status``, ``finished_at``, ``error``, ``links``), and stops. A stream that the
        server closes before the end (its time limit) or that breaks is opened again (up to
        ``retries`` times in a row for a broken one); the first event of a new stream
        repeats the current progress. On :class:`uqeval.AsyncClient`, an async iterator
        (``async for event in client.events(sub)``).

        Parameters
        ----------
        id : str or Submission
        timeout : float, optional
            The longest wait in seconds for the end (TimeoutError after it; checked when an
            event or a keep-alive arrives, so give ``Client(timeout=...)`` below it).

        Yields
        ------
        Event
        """
        path = self._events_path(id)
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no end event of submission {_id(id)} after {timeout} s")
            got_any = False
            try:
                response: httpx.Response = yield Open(path, {"Accept": SSE_MEDIA})
                if response.status_code != 200:
                    if failures >= self.retries or not may_retry_status(
                        Call("GET", path), response.status_code
                    ):
                        raise failure(response)
                else:
                    parser = EventParser()
                    while (line := (yield NextLine())) is not None:
                        event = parser.feed(line)
                        if event is not None:
                            got_any, failures = True, 0
                            yield Emit(event)
                            if event.event == "end":
                                return
                        if deadline is not None and time.monotonic() > deadline:
                            break
            except httpx.TransportError as exc:
                if failures >= self.retries:
                    raise unavailable(self.url, exc) from None
            yield Close()
            if not got_any:  # refused or broken at once: wait before the next try
                yield Sleep(backoff_delay(self.backoff, failures, self.max_retry_wait))
                failures += 1
