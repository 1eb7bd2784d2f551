"""The life of a submission's job: start, heartbeat, progress, finish, fail, cancel, requeue.

Each transition is one Lua script (``lua/*.lua``), atomic and conditional on the current
status: a worker never overwrites a job that was cancelled, deleted or finished elsewhere, and
the result document is written together with the ``succeeded`` status. The reaper's reads
(orphaned jobs, stale pending submissions, re-queued ones to resend) and the queue counts are
here too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Literal

from service import keys
from service.store.base import StoreBase
from service.store.documents import pack
from service.store.leaderboards import leaderboard_keys
from service.store.records import Ranking, SubmissionRecord, decode, now_iso

__all__ = ["JobStore"]


class JobStore(StoreBase):
    """The job lifecycle and queues (a part of :class:`service.store.Store`)."""

    def _quota_keys(self, sub_id: str) -> list[str]:
        """``[quota zset]`` of a submission counted in a benchmark quota, else ``[]``: the
        key a refunding script touches, read first so that the script can declare it."""
        quota_key = self._call(lambda: self.client.hget(keys.submission(sub_id), "quota_key"))
        return [] if quota_key is None else [decode(quota_key)]

    def cancel_submission(self, sub_id: str) -> SubmissionRecord | None:
        """Queued -> cancelled at once; running -> cancel_requested (the worker stops at its
        next checkpoint and marks it cancelled); terminal -> unchanged. None if unknown."""
        self._run("cancel", sub_id, [sub_id, now_iso(), self.retention_s])
        return self.get_submission(sub_id)

    def mark_running(
        self,
        sub_id: str,
        token: str,
        hb_ttl_s: float,
        max_attempts: int,
        worker_name: str = "",
    ) -> tuple[str, str]:
        """Claim a job for the task delivery ``token`` (the Celery task id) on ``worker_name``.

        Returns ``("started", attempt)`` — also when the same token held it (a retried or
        re-delivered task whose earlier run is gone); ``("busy", holder)`` when another token
        holds a live heartbeat on it; ``("terminal", status)`` when it already ended (a
        re-delivered task), was cancelled, or has used ``max_attempts`` (then failed with the
        reason); or ``("missing", "")`` when it was deleted.
        """
        out = self._run(
            "start",
            sub_id,
            [
                sub_id,
                now_iso(),
                time.time(),
                token,
                max(int(hb_ttl_s * 1000), 1),
                max_attempts,
                self.retention_s,
                worker_name,
            ],
            self._quota_keys(sub_id),
        )
        return decode(out[0]), decode(out[1])

    def heartbeat(self, sub_id: str, token: str, hb_ttl_s: float) -> tuple[str, bool, bool]:
        """Refresh the heartbeat of the delivery ``token``.

        Returns (status, cancel_requested, held): ``held`` is False when the job is no longer
        running under ``token`` (re-queued after its heartbeat lapsed, claimed by another
        delivery, ended or deleted) — the computation should then stop without writing.
        """
        out = self._run("heartbeat", sub_id, [sub_id, token, max(int(hb_ttl_s * 1000), 1)])
        status = decode(out[0])
        return status, decode(out[1]) == "1", status == "running" and decode(out[2]) == token

    def set_progress(self, sub_id: str, progress: float) -> bool:
        """Write the progress (0..100) of a running job; False if it is no longer running."""
        value = repr(float(min(max(progress, 0.0), 100.0)))
        return bool(self._run("progress", sub_id, [sub_id, value]))

    def finish(
        self,
        sub_id: str,
        result: Mapping[str, Any],
        duration_s: float,
        queue: str = "cpu",
        ranking: Ranking | None = None,
    ) -> str:
        """Write the result document and the ``succeeded`` status in one script — and, with a
        ``ranking``, the submission's leaderboard entries in the same script.

        The ranking is stored with the submission whatever its visibility, and put on the
        boards when the submission is public at that moment (so that a later
        :meth:`set_visibility` can add or remove it). Only a queued or running job is finished;
        returns "succeeded", or the status that prevented it ("cancelled", "failed",
        "succeeded" for a duplicate, "missing").
        """
        doc = pack(json.dumps(result, allow_nan=False, separators=(",", ":")).encode())
        args: list[Any] = [
            sub_id,
            now_iso(),
            doc,
            self.retention_s,
            repr(float(duration_s)),
            len(keys.DURATION_BUCKETS),
            *[repr(b) for b in keys.DURATION_BUCKETS],
        ]
        extra = [keys.result(sub_id), keys.durations(queue)]
        if ranking is None:
            args.append("")
        else:
            boards = list(ranking.entries)
            args += [ranking.to_json(), *boards]
            if boards:
                extra += leaderboard_keys(ranking.benchmark, boards)
        return decode(self._run("finish", sub_id, args, extra))

    def fail(self, sub_id: str, error: str, *, system: bool = False) -> str:
        """Mark a queued or running job failed with ``error`` (a reason a user can act on).

        ``system``: the failure is the service's, not the input's (a crash, a lost worker, a
        limit): the job is removed from its team's benchmark quota.
        """
        args = [sub_id, now_iso(), error, self.retention_s, "1" if system else "0"]
        quota = self._quota_keys(sub_id) if system else []
        return decode(self._run("fail", sub_id, args, quota))

    def mark_cancelled(self, sub_id: str) -> str:
        """The worker stopped a job at a checkpoint after a cancel request."""
        return decode(self._run("mark_cancelled", sub_id, [sub_id, now_iso(), self.retention_s]))

    def orphaned(self) -> list[str]:
        """Ids of running jobs whose heartbeat has expired."""
        return self._expired(keys.running(), keys.heartbeat)

    def requeue_orphan(self, sub_id: str, max_attempts: int, hb_ttl_s: float) -> str:
        """Re-queue a running job without heartbeat, or fail it once it used ``max_attempts``.

        Returns "requeued", "failed", "cancelled" (a cancel was requested), "alive" (the
        heartbeat came back) or "skip" (no longer running).
        """
        return decode(
            self._run(
                "requeue",
                sub_id,
                [sub_id, now_iso(), self.retention_s, max_attempts, f"{hb_ttl_s:g}", time.time()],
                [keys.resend(), *self._quota_keys(sub_id)],
            )
        )

    def _pending_script(self, name: str, sub_id: str, *args: Any) -> Any:
        script = self._scripts[name]
        pending_keys = [keys.submission(sub_id), keys.pending()]
        return self._call(lambda: script(keys=pending_keys, args=[sub_id, *args]))

    def mark_enqueued(self, sub_id: str) -> bool:
        """The task message of a new submission was published (see :meth:`stale_pending`):
        it leaves the pending index. False when the submission is gone or the reaper has
        taken it for rollback (:meth:`take_stale_pending`): then it must not be answered as
        accepted."""
        return bool(self._pending_script("pending_done", sub_id))

    def claim_pending(self, sub_id: str) -> Literal["gone", "rolling_back", "claimed", "enqueued"]:
        """For an idempotent replay of the request that stored ``sub_id``: ``"enqueued"`` when
        its task was published; ``"claimed"`` when it is still pending (its first request
        failed before publishing) — the caller publishes it and calls :meth:`mark_enqueued`,
        and the reaper leaves it alone for the next ``older_than_s`` of
        :meth:`stale_pending`; ``"rolling_back"`` or ``"gone"`` when the reaper is deleting
        it or has (the replay then answers 503: retried, it stores a new submission)."""
        return decode(self._pending_script("pending_claim", sub_id, time.time()))  # type: ignore[return-value]

    def take_stale_pending(self, sub_id: str, older_than_s: float) -> bool:
        """Flag ``sub_id`` for rollback if it is still pending since ``older_than_s`` ago
        (atomically: a replay that claimed it meanwhile keeps it); True when flagged. The
        caller then deletes it."""
        cutoff = time.time() - older_than_s
        return bool(self._pending_script("pending_take", sub_id, cutoff))

    def stale_pending(self, older_than_s: float) -> list[str]:
        """Submissions stored more than ``older_than_s`` ago whose task was never published.

        Only a crash between storing and enqueueing leaves one; the reaper deletes them,
        finishing the rollback the submitting process could not do.
        """
        cutoff = time.time() - older_than_s
        ids = self._call(lambda: self.client.zrangebyscore(keys.pending(), "-inf", cutoff))
        return [decode(i) for i in ids]

    def unclaimed(self, older_than_s: float, limit: int = 100) -> list[tuple[str, str]]:
        """(id, queue) of jobs queued since before ``older_than_s`` ago on a queue whose broker
        list is empty, and not pending (their first publication is their request's business):
        their task message is gone — taken by a consumer that died or lost Redis before it
        claimed the job, or popped but never recorded as unacknowledged when Redis died —
        and Celery would deliver it again only after the visibility timeout, if at all."""
        cutoff = time.time() - older_than_s

        def read() -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            for queue in keys.QUEUES:
                if self.client.llen(queue):  # messages wait: the job may be among them
                    continue
                found = self.client.zrangebyscore(keys.queued(queue), "-inf", cutoff, 0, limit)
                for sub_id in (decode(i) for i in found):
                    if self.client.zscore(keys.pending(), sub_id) is None:
                        out.append((sub_id, queue))
            return out

        return self._call(read)

    def mark_republished(self, sub_id: str, queue: str) -> None:
        """The task of an unclaimed job was published again: it counts as queued from now (so
        the next pass does not publish it again unless this message is lost too)."""
        self._call(lambda: self.client.zadd(keys.queued(queue), {sub_id: time.time()}, xx=True))

    def to_resend(self) -> list[str]:
        """Re-queued submissions whose task message is still to be published."""
        return [decode(i) for i in self._call(lambda: self.client.zrange(keys.resend(), 0, -1))]

    def mark_resent(self, sub_id: str) -> None:
        self._call(lambda: self.client.zrem(keys.resend(), sub_id))

    # --- queues ------------------------------------------------------------------------------

    def queue_depths(self) -> dict[str, int]:
        """Number of queued (not yet running) jobs per queue."""

        def read() -> dict[str, int]:
            pipe = self.client.pipeline(transaction=False)
            for queue in keys.QUEUES:
                pipe.zcard(keys.queued(queue))
            return {q: int(c) for q, c in zip(keys.QUEUES, pipe.execute(), strict=True)}

        return self._call(read)

    def running_count(self) -> int:
        count: Any = self._call(lambda: self.client.zcard(keys.running()))
        return int(count)
