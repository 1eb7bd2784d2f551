"""The leaderboard, comparison and quality-gate calls of the client, each written once as an
operation of the sans-I/O core."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uqeval._base import POLL_START_S, ComparisonProgress, _id
from uqeval._http import Op
from uqeval._submissions import SubmissionCalls
from uqeval._transport import operation
from uqeval.errors import NotFound
from uqeval.gates import Gate
from uqeval.models import Comparison, Leaderboard

__all__ = ["BoardCalls"]


class BoardCalls(SubmissionCalls):
    """Leaderboards, comparisons and gates: the operations of :class:`uqeval.Client` and
    :class:`uqeval.AsyncClient`."""

    @operation
    def leaderboard(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        part: str = "public",
    ) -> Op[Leaderboard]:
        """A benchmark's leaderboard, best first.

        Parameters
        ----------
        benchmark : str or Benchmark
            The benchmark.
        metric : str, optional
            One of its metrics (default: its primary metric).
        estimator : str, optional
            Classification: rank the metric under this estimator.
        limit, offset : int, optional
            The page (server default: the first 50 entries).
        part : {"public", "private"}
            ``public``: the public rows (the only board while the benchmark is open);
            ``private``: once an admin closed it (:meth:`close_benchmark`), each team's best
            final submission ranked on the private rows. Asked while it is open, BadRequest
            (409, code ``benchmark_open``).

        Returns
        -------
        Leaderboard
            Entries with the value, its interval, the rank interval, ``p_best`` and whether
            each is separable from the leader and from the baseline.
        """
        call = self._leaderboard_call(benchmark, metric, estimator, limit, offset, part=part)
        return self._leaderboard((yield from self._json(call)))

    @operation
    def leaderboard_csv(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        part: str = "public",
    ) -> Op[str]:
        """A benchmark's leaderboard as CSV text (as the server writes it); ``part`` as for
        :meth:`leaderboard`."""
        call = self._leaderboard_call(benchmark, metric, estimator, None, None, csv=True, part=part)
        return (yield from self._send(call)).text

    @operation
    def compare(
        self,
        ids: Any,
        *,
        benchmark: Any = None,
        metrics: Any = None,
        estimators: Any = None,
        n_resamples: int | None = None,
        seed: int | None = None,
        level: float | None = None,
        method: str | None = None,
        wait: bool = False,
        progress: ComparisonProgress | None = None,
        timeout: float | None = None,
        callback_url: str | None = None,
    ) -> Op[Comparison]:
        """Compare two or more succeeded submissions on one benchmark (paired bootstrap).

        Parameters
        ----------
        ids : list of str or Submission
            The submissions (2 to 20).
        benchmark : str or Benchmark, optional
            Default: the benchmark of the first submission.
        metrics : list of str or str, optional
            Default: the benchmark's primary metric.
        estimators : list of str, optional
            Classification: also compare under these estimators.
        n_resamples, seed, level, method
            The bootstrap: B, its seed, the interval level and method (``percentile`` or
            ``bca``); each not given is the benchmark's. Only admins choose others: any
            other key's different value is refused (the targets are hidden).
        wait : bool
            Wait for the comparison to end.
        progress : callable, optional
            With ``wait``: ``progress(comparison)`` when its status changes.
        timeout : float, optional
            With ``wait``: the longest wait in seconds.
        callback_url : str, optional
            An http(s) URL that receives a signed JSON event when the comparison ends (as
            for :meth:`submit`).

        Returns
        -------
        Comparison
            Queued, or with ``wait`` the final state with its ``result``.
        """
        id_list = [_id(i) for i in ids]
        if benchmark is None:
            first = (yield from SubmissionCalls.get(self, id_list[0])) if id_list else None
            bench_id = None if first is None else first.benchmark_id
            if bench_id is None:
                raise NotFound(
                    f"submission {id_list[0] if id_list else None!r} is on no benchmark; "
                    "give benchmark=",
                    field="benchmark_id",
                )
        else:
            bench_id = _id(benchmark)
        call = self._compare_call(
            id_list, bench_id, metrics, estimators, n_resamples, seed, level, method, callback_url
        )
        cmp_id = (yield from self._json(call))["id"]
        if wait:
            return (
                yield from BoardCalls.wait_comparison(
                    self, cmp_id, progress=progress, timeout=timeout
                )
            )
        return (yield from BoardCalls.comparison(self, cmp_id))

    @operation
    def comparison(self, id: Any) -> Op[Comparison]:
        """A comparison's state and, once it succeeded, its result."""
        return Comparison.from_json((yield from self._json(self._comparison_call(id))))

    @operation
    def wait_comparison(
        self,
        id: Any,
        *,
        progress: ComparisonProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Op[Comparison]:
        """Wait until a comparison ends (as :meth:`wait` for a submission).

        Raises
        ------
        JobFailed
            It failed or was cancelled.
        TimeoutError
            It had not ended after ``timeout`` seconds.
        """
        return (
            yield from self._poll(
                lambda: BoardCalls.comparison(self, id),
                lambda cmp: cmp.status,
                progress=progress,
                timeout=timeout,
                poll_interval=poll_interval,
                noun="comparison",
                still=lambda cmp: f"comparison {cmp.id} is still {cmp.status}",
            )
        )

    # -- quality gates -------------------------------------------------------------------

    @operation
    def gate(
        self,
        benchmark: Any,
        candidate: Any,
        reference: Any,
        checks: Any,
        *,
        confidence: float | None = None,
        correction: str = "holm",
        n_resamples: int | None = None,
        seed: int | None = None,
        wait: bool = True,
        progress: Callable[[Gate], None] | None = None,
        timeout: float | None = None,
    ) -> Op[Gate]:
        """Gate a candidate submission against a reference on one benchmark.

        Each check fails only when the candidate is worse than the reference by more than its
        allowance with the stated confidence (a one-sided paired bootstrap bound; Holm's
        adjustment over the checks by default). See docs/gates.md.

        Parameters
        ----------
        benchmark : str or Benchmark
        candidate, reference : str or Submission
            Succeeded submissions on the benchmark that the key can read.
        checks : str, mapping, or a list of them
            ``"crps:0.01"`` (absolute), ``"ece:5%"`` (relative to the reference's |value|),
            ``"auroc_ood[entropy_bma]:0.02"``, or ``{"metric", "allowed", "mode",
            "estimator"}`` (1 to 50 checks).
        confidence : float, optional
            Default: the benchmark's level (other keys than admins: 0.9, 0.95 or 0.99).
        correction : "holm" or "none"
        n_resamples, seed
            The bootstrap's B and seed: the benchmark's unless an admin chooses them.
        wait : bool
            Wait for the decision (default).
        progress : callable, optional
            With ``wait``: ``progress(gate)`` when its status changes.
        timeout : float, optional
            With ``wait``: the longest wait in seconds.

        Returns
        -------
        Gate
            With ``wait``, the decision: ``passed`` True, False, or None (undecided).
        """
        call = self._gate_call(
            benchmark, candidate, reference, checks, confidence, correction, n_resamples, seed
        )
        gate_id = (yield from self._json(call))["id"]
        if wait:
            return (
                yield from BoardCalls.wait_gate(self, gate_id, progress=progress, timeout=timeout)
            )
        return (yield from BoardCalls.get_gate(self, gate_id))

    @operation
    def get_gate(self, id: Any) -> Op[Gate]:
        """A gate's state and, once it succeeded, its decision."""
        return Gate.from_json((yield from self._json(self._get_gate_call(id))))

    @operation
    def wait_gate(
        self,
        id: Any,
        *,
        progress: Callable[[Gate], None] | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Op[Gate]:
        """Wait until a gate ends (as :meth:`wait_comparison`); JobFailed if it failed,
        TimeoutError after ``timeout`` seconds."""
        return (
            yield from self._poll(
                lambda: BoardCalls.get_gate(self, id),
                lambda gate: gate.status,
                progress=progress,
                timeout=timeout,
                poll_interval=poll_interval,
                noun="gate",
                still=lambda gate: f"gate {gate.id} is still {gate.status}",
            )
        )
