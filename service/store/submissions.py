"""Submissions: stored with their arrays and indexes, read, listed and deleted.

A submission is stored at once with its arrays' manifest, its indexes, its idempotency mapping
and its place in its team's benchmark :class:`Quota` (one transaction); its job's life after
that is :mod:`service.store.jobs`. The arrays themselves are written to the blob store first
(``submissions/<id>/``), their prefix recorded in ``blobs:due`` before that, so that the
blob sweep (:mod:`service.store.blobsweep`) removes them should the transaction never happen.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from service import keys
from service.blobs import StoredArray
from service.store import codec
from service.store.base import StoreBase
from service.store.documents import unpack
from service.store.records import (
    IdempotencyConflict,
    QuotaExceeded,
    SubmissionRead,
    SubmissionRecord,
    decode,
    sha256_hex,
)

__all__ = ["DAY_S", "Quota", "SubmissionStore"]

#: The window of a per-day quota (rolling, not calendar days).
DAY_S = 86400


@dataclass(frozen=True)
class Quota:
    """A team's submission quota on one benchmark: at most ``per_day`` counted submissions in
    any rolling 24 h and ``total`` in all (None: no limit). Counted submissions are the
    members of the zset ``key`` (see :func:`service.keys.quota`)."""

    key: str
    per_day: int | None
    total: int | None

    def check(self, client: Any, now: float) -> None:
        """Raise :class:`QuotaExceeded` when one more submission would exceed a limit."""
        if self.total is not None:
            used = int(client.zcard(self.key))
            if used >= self.total:
                raise QuotaExceeded(
                    f"the team has used its total quota of {self.total} submissions on this "
                    "benchmark (jobs failed by the system are not counted)"
                )
        if self.per_day is not None:
            day = client.zrangebyscore(self.key, now - DAY_S, "+inf", withscores=True)
            if len(day) >= self.per_day:
                # The slot frees when the oldest counted submission of the window leaves it.
                oldest = float(day[len(day) - self.per_day][1])
                wait = max(math.ceil(oldest + DAY_S - now), 1)
                raise QuotaExceeded(
                    f"the team has used its quota of {self.per_day} submissions per 24 h on "
                    f"this benchmark; the next is accepted in {wait} s (jobs failed by the "
                    "system are not counted)",
                    retry_after_s=wait,
                )


class SubmissionStore(StoreBase):
    """Submissions: create, read, list, delete (a part of :class:`service.store.Store`)."""

    def create_submission(
        self,
        record: SubmissionRecord,
        arrays: Mapping[str, np.ndarray[Any, Any] | StoredArray],
        *,
        idempotency_key: str | None = None,
        body_hash: str = "",
        deadline: float | None = None,
        quota: Quota | None = None,
    ) -> tuple[SubmissionRecord, bool]:
        """Store the record, its arrays, its indexes and the idempotency mapping atomically.

        With an ``idempotency_key`` already used by the same owner: returns the existing
        submission and False when ``body_hash`` matches, raises :class:`IdempotencyConflict`
        otherwise (a mapping to a deleted submission is replaced). ``deadline`` is a
        ``time.monotonic()`` value after which the write is abandoned (StoreUnavailable).
        With a ``quota``, the submission is counted in it, or :class:`QuotaExceeded` is raised
        when the team already has ``per_day`` counted submissions in the last 24 h or
        ``total`` in all (checked and counted in the same transaction).

        ``arrays`` are written to the blob store under ``submissions/<id>/`` before the
        transaction (a :class:`StoredArray` is only referenced; it should lie under that
        prefix too, so that the sweep and deletion find it); when the transaction does not
        happen (replay, conflict, quota, Redis down) the objects written here are removed,
        and the sweep removes anything left after ``blob_grace_s``.
        """
        prefix = keys.submission_blobs(record.id)
        self.track_blobs(prefix, time.time() + self.blob_grace_s)
        started = time.monotonic()
        manifest, written = self._call(
            lambda: codec.write_blobs(self.blobs, prefix, arrays, self.scratch)
        )
        if deadline is not None:
            # The budget is Redis': writing the arrays (their size's business) does not use it.
            deadline += time.monotonic() - started
        stored = False
        try:
            out = self._create_submission(
                record,
                manifest,
                idempotency_key=idempotency_key,
                body_hash=body_hash,
                deadline=deadline,
                quota=quota,
            )
            stored = out[1]
            return out
        finally:
            if not stored:
                self.discard_blobs(prefix, written)

    def _create_submission(
        self,
        record: SubmissionRecord,
        manifest: dict[str, Any],
        *,
        idempotency_key: str | None,
        body_hash: str,
        deadline: float | None,
        quota: Quota | None,
    ) -> tuple[SubmissionRecord, bool]:
        array_fields = {"manifest": json.dumps(manifest, separators=(",", ":"))}
        idem_key = (
            keys.idempotency(record.owner, sha256_hex(idempotency_key))
            if idempotency_key is not None
            else None
        )
        record.created_ts = record.created_ts or time.time()

        def write(pipe: Any) -> tuple[SubmissionRecord, bool] | None:
            if deadline is not None and time.monotonic() > deadline:
                raise redis.TimeoutError("enqueue timeout exceeded while storing")
            if idem_key is not None:
                prior = pipe.get(idem_key)
                if prior is not None:
                    mapping = json.loads(prior)
                    existing_raw = pipe.hgetall(keys.submission(mapping["id"]))
                    if existing_raw:
                        if mapping["body_hash"] != body_hash:
                            raise IdempotencyConflict(
                                "Idempotency-Key was used before with a different request body"
                            )
                        return SubmissionRecord.from_hash(existing_raw), False
            if quota is not None:
                quota.check(pipe, record.created_ts)
            pipe.multi()
            codec.put_arrays(pipe, keys.arrays(record.id), array_fields)
            fields = record.to_hash()
            if idem_key is not None:
                fields["idem_key"] = idem_key
            pipe.hset(keys.submission(record.id), mapping=fields)
            pipe.zadd(keys.submissions(), {record.id: record.created_ts})
            pipe.zadd(keys.owner_submissions(record.owner), {record.id: record.created_ts})
            if record.team is not None:
                pipe.zadd(keys.team_submissions(record.team), {record.id: record.created_ts})
            if record.benchmark is not None:
                pipe.zadd(keys.bench_submissions(record.benchmark), {record.id: record.created_ts})
            if quota is not None:
                pipe.hset(keys.submission(record.id), "quota_key", quota.key)
                pipe.zadd(quota.key, {record.id: record.created_ts})
            pipe.zadd(keys.queued(record.queue), {record.id: record.created_ts})
            pipe.zadd(keys.pending(), {record.id: time.time()})
            if idem_key is not None:
                pipe.set(idem_key, json.dumps({"id": record.id, "body_hash": body_hash}), ex=86400)
            return None

        watches = [idem_key] if idem_key is not None else []
        if quota is not None:
            watches.append(quota.key)

        def run() -> tuple[SubmissionRecord, bool]:
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        if watches:
                            pipe.watch(*watches)
                        replay = write(pipe)
                        if replay is not None:
                            pipe.reset()
                            return replay
                        pipe.execute()
                        return record, True
                    except redis.WatchError:
                        continue

        return self._call(run)

    def get_submission(self, sub_id: str) -> SubmissionRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.submission(sub_id)))
        return SubmissionRecord.from_hash(raw) if raw else None

    def get_submissions(self, sub_ids: list[str]) -> list[SubmissionRecord | None]:
        """The records of ``sub_ids`` in one round trip (None for unknown ids)."""

        def read() -> list[SubmissionRecord | None]:
            if not sub_ids:
                return []
            pipe = self.client.pipeline(transaction=False)
            for sub_id in sub_ids:
                pipe.hgetall(keys.submission(sub_id))
            return [SubmissionRecord.from_hash(raw) if raw else None for raw in pipe.execute()]

        return self._call(read)

    def list_submissions(
        self,
        owner: str | None,
        status: str | None,
        offset: int,
        limit: int,
        *,
        team: str | None = None,
    ) -> tuple[list[SubmissionRecord], int]:
        """One page of submissions, newest first, and the total matching count.

        ``team`` lists one team's; else ``owner`` one key's; ``owner=None`` every owner's.
        ``status`` filters on the current status (the same page either way: newest first,
        ties by id):

        - ``queued``, ``running``: read for the ids of the queues (or the running set) when
          they hold fewer ids than the scope, else for every submission of the scope;
        - a final status (``succeeded``, ``failed``, ``cancelled``, which never changes): from
          the indexes of ended submissions (``keys.ended``), completed first with the scope's
          submissions neither in them nor in flight (those that ended since the last listing;
          an index fills on the first listing that meets them; the difference is skipped
          when the counts of the indexes and of the jobs in flight add up to every
          submission): one set difference and one intersection in Redis, and the statuses of
          the newly ended only (read by the indexing script), instead of every status of the
          scope.
        """
        if team is not None:
            index = keys.team_submissions(team)
        else:
            index = keys.submissions() if owner is None else keys.owner_submissions(owner)
        offset = max(int(offset), 0)
        limit = max(int(limit), 0)

        def fetch(ids: list[Any]) -> list[SubmissionRecord]:
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.hgetall(keys.submission(decode(sub_id)))
            return [SubmissionRecord.from_hash(raw) for raw in pipe.execute() if raw]

        def page_of(matching: list[str]) -> tuple[list[SubmissionRecord], int]:
            page = matching[offset : offset + limit]
            return fetch([s.encode() for s in page]), len(matching)

        def in_flight() -> tuple[list[SubmissionRecord], int] | None:
            """A queued or running listing from the jobs' own indexes (the queues, the running
            set: every scope's in-flight submissions), when they hold fewer ids than the scope's
            index; None otherwise (then the scope's statuses are read)."""
            flight = (
                [keys.running()] if status == "running" else list(map(keys.queued, keys.QUEUES))
            )
            pipe = self.client.pipeline(transaction=False)
            for name in (index, *flight):
                pipe.zcard(name)
            scope_size, *sizes = pipe.execute()
            if sum(sizes) >= scope_size:
                return None
            pipe = self.client.pipeline(transaction=False)
            for name in flight:
                pipe.zrange(name, 0, -1)
            ids = sorted({m for part in pipe.execute() for m in part})
            pipe = self.client.pipeline(transaction=False)
            for sub_id in ids:
                pipe.zscore(index, sub_id)  # None: not in this scope
                pipe.hget(keys.submission(decode(sub_id)), "status")
            got = pipe.execute()
            # the scope index's order: by creation time, newest first, ties by id descending
            rows = sorted(
                (
                    (float(score), sub_id)
                    for sub_id, score, st in zip(ids, got[0::2], got[1::2], strict=True)
                    if score is not None and st is not None and decode(st) == status
                ),
                reverse=True,
            )
            return page_of([decode(sub_id) for _, sub_id in rows])

        def ended() -> tuple[list[SubmissionRecord], int]:
            """A listing of a final status from the ended indexes (see above)."""
            indexes = [keys.ended(s) for s in keys.ENDED]
            # the scope's submissions neither known to have ended nor in flight (a job leaves
            # the queues and the running set in the script that ends it): those that ended
            # since the last listing, which the script indexes by the statuses it reads
            flight = [keys.running(), *map(keys.queued, keys.QUEUES)]
            # every submission ended and indexed, or in flight (disjoint subsets of every
            # submission, a deletion leaving them all at once): nothing to look for
            pipe = self.client.pipeline(transaction=True)
            for name in (keys.submissions(), *indexes, *flight):
                pipe.zcard(name)
            everyone, *parts = pipe.execute()
            unknown = (
                [] if everyone == sum(parts) else self.client.zdiff([index, *indexes, *flight])
            )
            for start in range(0, len(unknown), 500):  # the script reads their statuses
                part = [decode(sub_id) for sub_id in unknown[start : start + 500]]
                self._scripts["index_ended"](
                    keys=[*indexes, *map(keys.submission, part)], args=part
                )
            target = keys.ended(str(status))
            if index == keys.submissions():  # every owner's: the index itself
                if limit == 0:
                    return [], int(self.client.zcard(target))
                pipe = self.client.pipeline(transaction=False)
                pipe.zcard(target)
                pipe.zrevrange(target, offset, offset + limit - 1)
                total, ids = pipe.execute()
                return fetch(ids), int(total)
            # the scope's page of the intersection, in Redis: stored under a key of this call
            # alone, read and deleted in one transaction (nothing is left whatever happens)
            scratch = keys.listing_scratch(uuid.uuid4().hex)
            pipe = self.client.pipeline(transaction=True)
            pipe.zinterstore(scratch, [index, target], aggregate="MIN")
            if limit:
                pipe.zrevrange(scratch, offset, offset + limit - 1)
            pipe.delete(scratch)
            got = pipe.execute()
            return (fetch(got[1]) if limit else []), int(got[0])

        def read() -> tuple[list[SubmissionRecord], int]:
            if status is None:
                total = int(self.client.zcard(index))
                if limit == 0:
                    return [], total
                ids = self.client.zrevrange(index, offset, offset + limit - 1)
                return fetch(ids), total
            if status in keys.ENDED:
                return ended()
            if status in ("queued", "running"):
                got = in_flight()
                if got is not None:
                    return got
            ids = self.client.zrevrange(index, 0, -1)
            matching: list[str] = []
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                pipe = self.client.pipeline(transaction=False)
                for sub_id in part:
                    pipe.hget(keys.submission(decode(sub_id)), "status")
                for sub_id, st in zip(part, pipe.execute(), strict=True):
                    if st is not None and decode(st) == status:
                        matching.append(decode(sub_id))
            return page_of(matching)

        return self._call(read)

    def get_submission_and_result(
        self, sub_id: str
    ) -> tuple[SubmissionRecord | None, bytes | None]:
        """The record and the stored result document (raw JSON bytes, NaN-free as written by
        the worker; None until the job succeeded), in one round trip."""

        def read() -> tuple[SubmissionRecord | None, bytes | None]:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.submission(sub_id))
            pipe.get(keys.result(sub_id))
            raw, result = pipe.execute()
            record = SubmissionRecord.from_hash(raw) if raw else None
            return record, (None if result is None else unpack(result))

        return self._call(read)

    def get_result(self, sub_id: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.result(sub_id)))
        return None if raw is None else json.loads(unpack(raw))

    def load_arrays(self, sub_id: str) -> dict[str, np.ndarray[Any, Any]] | None:
        """The stored arrays of a submission, read-only (memory-mapped from the blob store, or
        decoded from Redis for data of the previous codec); None once deleted or past their
        retention."""

        return self._call(
            lambda: codec.read_arrays(
                self.client,
                keys.arrays(sub_id),
                self.blobs,
                self.scratch,
                keys.submission_blobs(sub_id),
            )
        )

    def delete_submission(self, sub_id: str, *, refund: bool = False) -> bool:
        """Remove the record, arrays, result, heartbeat, every index entry and the
        idempotency mapping (its key may then be used again).

        It stays counted in its benchmark quota (deleting does not give a slot back) unless
        ``refund`` (the rollback of a submission that was never enqueued).
        """

        record = self.get_submission(sub_id)
        if record is not None and record.benchmark is not None and record.status == "succeeded":
            metrics = record.analyses.metrics
            if isinstance(metrics, list):
                self.leaderboard_forget(record.benchmark, sub_id, metrics)

        prefix = keys.submission_blobs(sub_id)
        blob_keys: list[str] = []

        def write() -> bool:
            owner, idem_key, team, quota_key, bench, final = self.client.hmget(
                keys.submission(sub_id),
                ["owner", "idem_key", "team", "quota_key", "benchmark", "final"],
            )
            if owner is None:
                return False
            manifest = self.client.hget(keys.arrays(sub_id), "manifest")
            blob_keys.extend(codec.blob_keys(manifest, prefix))
            pipe = self.client.pipeline(transaction=True)
            # Due now: should the blob store be down below, the sweep removes them later.
            pipe.zadd(keys.blobs_due(), {prefix: 0, keys.curves_blobs(sub_id): 0})
            if idem_key is not None:
                mapping = self.client.get(decode(idem_key))
                if mapping is not None and json.loads(mapping).get("id") == sub_id:
                    pipe.delete(decode(idem_key))
            pipe.delete(
                keys.submission(sub_id),
                keys.arrays(sub_id),
                keys.result(sub_id),
                keys.heartbeat(sub_id),
                keys.submission_plots(sub_id),
                keys.submission_curves(sub_id),
                keys.private_result(sub_id),
            )
            pipe.zrem(keys.submissions(), sub_id)
            for final in keys.ENDED:
                pipe.zrem(keys.ended(final), sub_id)
            pipe.zrem(keys.owner_submissions(decode(owner)), sub_id)
            if team is not None:
                pipe.zrem(keys.team_submissions(decode(team)), sub_id)
            if refund and quota_key is not None:
                pipe.zrem(decode(quota_key), sub_id)
            if bench is not None:
                pipe.zrem(keys.bench_submissions(decode(bench)), sub_id)
                pipe.zrem(keys.bench_succeeded_legacy(decode(bench)), sub_id)
                if final is not None:  # a deleted final no longer takes one of the team's slots
                    finals_team = decode(team) if team is not None else decode(owner)
                    pipe.srem(keys.finals(decode(bench), finals_team), sub_id)
                    pipe.hincrby(keys.leaderboard_info(decode(bench)), "__finals", 1)
            pipe.zrem(keys.running(), sub_id)
            pipe.zrem(keys.pending(), sub_id)
            pipe.zrem(keys.resend(), sub_id)
            for queue in keys.QUEUES:
                pipe.zrem(keys.queued(queue), sub_id)
            pipe.execute()
            return True

        deleted = self._call(write)
        if deleted:
            self.discard_blobs(prefix, blob_keys, forget=True)
            self.discard_blobs(keys.curves_blobs(sub_id), [], forget=True)
        return deleted

    def forget_idempotency(self, owner: str, idempotency_key: str) -> None:
        """Drop an idempotency mapping (rollback of a submission that was never enqueued)."""
        self._call(lambda: self.client.delete(keys.idempotency(owner, sha256_hex(idempotency_key))))

    def queue_position(self, sub_id: str, queue: str | None = None) -> int | None:
        """0-based position among the queued jobs of its queue (``queue``: that queue, known
        to the caller, else read from the record); None if not queued."""

        def read() -> int | None:
            name = queue
            if name is None:
                raw = self.client.hget(keys.submission(sub_id), "queue")
                if raw is None:
                    return None
                name = decode(raw)
            rank: Any = self.client.zrank(keys.queued(name), sub_id)
            return None if rank is None else int(rank)

        return self._call(read)

    def read_submission(
        self, token: str, sub_id: str, *, rate_limit: int, window_s: int
    ) -> SubmissionRead:
        """Authenticate ``token``, count the request against its key's rate limit and read
        submission ``sub_id`` — its record, its result document (raw JSON bytes, as the worker
        wrote them) once it succeeded and its queue position while it is queued — in one
        round trip (``lua/submission_read.lua``; authentication and counting as
        :meth:`_read_with_key`). Whether the key may read the submission is the caller's
        decision (:func:`service.api.access.can_read`)."""
        key, wait, reply = self._read_with_key(
            token,
            "submission_read",
            [keys.submission(sub_id), keys.result(sub_id), *map(keys.queued, keys.QUEUES)],
            [sub_id, *keys.QUEUES],
            rate_limit=rate_limit,
            window_s=window_s,
        )
        if key is None or wait is not None:
            return SubmissionRead(key, retry_after_s=wait)
        raw, result, position = reply[2:5]
        if not raw:
            return SubmissionRead(key)
        record = SubmissionRecord.from_hash(dict(zip(raw[::2], raw[1::2], strict=True)))
        return SubmissionRead(
            key,
            record=record,
            result=unpack(result) if result else None,
            queue_position=None if position is None else int(position),
        )
