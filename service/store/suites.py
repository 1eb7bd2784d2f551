"""Benchmark suites: their records, the entries of their member boards, their interval
documents and cached leaderboard answers.

A suite's leaderboard depends on the suite record, the record and the boards' version of each
member benchmark, and the suite's interval document (with its job's claim). A rendered answer
is cached with the stamp of those and served only while the stamp is current (as a
benchmark's board answer, :mod:`service.store.leaderboards`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from service import keys
from service.store.base import StoreBase, remember
from service.store.records import BenchmarkRecord, PageRead, RenderedPage, decode, now_iso

__all__ = ["SuiteRecord", "SuiteSnapshot", "SuiteStore"]


@dataclass
class SuiteRecord:
    """A suite: tasks (a benchmark and a metric each) and how they are aggregated."""

    id: str
    name: str
    description: str
    #: [{"benchmark_id", "metric"}]: the metric is always filled (the primary one by default)
    tasks: list[dict[str, str]]
    baseline_team: str | None
    missing: str
    selection: str
    n_resamples: int
    level: float
    seed: int
    public_board: bool
    created_at: str
    updated_at: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: bytes | str) -> SuiteRecord:
        return cls(**json.loads(raw))

    @property
    def benchmark_ids(self) -> list[str]:
        return [t["benchmark_id"] for t in self.tasks]


@dataclass(frozen=True)
class SuiteSnapshot:
    """A suite, its members' records and boards' versions and its interval document, as they
    were together; ``inputs``: the digest of what the aggregates depend on (the interval
    document is current when it names the same)."""

    suite: SuiteRecord
    benches: dict[str, BenchmarkRecord | None]
    versions: dict[str, int]
    intervals: dict[str, Any] | None
    claimed: bool
    inputs: str


def _digest(suite_raw: bytes, bench_raws: Sequence[bytes | None], versions: Sequence[Any]) -> str:
    """The inputs' digest of ``lua/suite_page_read.lua`` (same bytes): SHA-1 of the suite
    record and, for each task, SHA-1 of its benchmark record and its boards' version and
    finals' counter (``"<version>/<finals>"``, empty when neither is set)."""
    parts = [suite_raw]
    for raw, version in zip(bench_raws, versions, strict=True):
        parts.append(hashlib.sha1(raw or b"").hexdigest().encode() + b"|" + (version or b""))
    return hashlib.sha1(b"\n".join(parts)).hexdigest()


class SuiteStore(StoreBase):
    """Suites (a part of :class:`service.store.Store`)."""

    # --- records ---------------------------------------------------------------------------

    def create_suite(self, record: SuiteRecord) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.suite(record.id), record.to_json())
            pipe.zadd(keys.suites(), {record.id: time.time()})
            pipe.execute()

        self._call(write)

    def get_suite(self, suite_id: str) -> SuiteRecord | None:
        raw = self._call(lambda: self.client.get(keys.suite(suite_id)))
        return None if raw is None else SuiteRecord.from_json(raw)

    def list_suites(self) -> list[SuiteRecord]:
        """Every suite, oldest first."""
        return self._indexed_records(keys.suites(), keys.suite, SuiteRecord.from_json)

    def update_suite(self, suite_id: str, changes: Mapping[str, Any]) -> SuiteRecord | None:
        """Replace the given fields; None when the suite is unknown."""
        return self._update_record(
            keys.suite(suite_id),
            lambda raw: SuiteRecord(**{**json.loads(raw), **changes, "updated_at": now_iso()}),
        )

    def delete_suite(self, suite_id: str) -> bool:
        """Remove a suite, its interval document and its cached answers."""

        def write() -> bool:
            if not self.client.exists(keys.suite(suite_id)):
                return False
            pages = list(self.client.scan_iter(match=keys.suite_page_cache(suite_id, "*")))
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.suite(suite_id), keys.suite_intervals(suite_id))
            pipe.delete(keys.suite_intervals_lock(suite_id), *pages)
            pipe.zrem(keys.suites(), suite_id)
            pipe.execute()
            return True

        return self._call(write)

    # --- the member boards -----------------------------------------------------------------

    def suite_boards(
        self, boards: Sequence[tuple[str, str, str]]
    ) -> list[list[tuple[str, str, float, dict[str, Any]]]]:
        """Every entry of each (benchmark, board, rule): (team, submission, badness, shown
        entry), best first — in two round trips whatever the number of boards."""

        def read() -> list[list[tuple[str, str, float, dict[str, Any]]]]:
            pipe = self.client.pipeline(transaction=False)
            for bench_id, board, rule in boards:
                pipe.zrange(keys.leaderboard(bench_id, board, rule), 0, -1, withscores=True)
                pipe.hgetall(keys.leaderboard_map(bench_id, board, rule))
            got = pipe.execute()
            pipe = self.client.pipeline(transaction=False)
            lists: list[list[tuple[str, str, float]]] = []
            for k, (bench_id, board, _) in enumerate(boards):
                scored, mapping = got[2 * k], got[2 * k + 1]
                rows = [
                    (decode(t), decode(mapping[t]), float(s))
                    for t, s in scored
                    if mapping.get(t) is not None
                ]
                lists.append(rows)
                pipe.hmget(keys.leaderboard_entries(bench_id, board), [r[1] for r in rows] or [""])
            out = []
            for rows, raws in zip(lists, pipe.execute(), strict=True):
                out.append(
                    [
                        (team, sub, bad, json.loads(raw))
                        for (team, sub, bad), raw in zip(rows, raws, strict=False)
                        if raw is not None
                    ]
                )
            return out

        return self._call(read)

    # --- the interval document and its job's claim -------------------------------------------

    def get_suite_intervals(self, suite_id: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.suite_intervals(suite_id)))
        return None if raw is None else json.loads(raw)

    def put_suite_intervals(self, suite_id: str, doc: Mapping[str, Any]) -> None:
        """Store an interval document and release its job's claim (only while the suite
        exists: a job finishing after a deletion leaves nothing behind)."""

        def write() -> None:
            if self.client.exists(keys.suite(suite_id)):
                self.client.set(keys.suite_intervals(suite_id), json.dumps(doc, allow_nan=False))
            self.client.delete(keys.suite_intervals_lock(suite_id))

        self._call(write)

    def claim_suite_intervals(self, suite_id: str, ttl_s: float) -> bool:
        """True for the one caller that should queue the interval job now (the claim expires
        after ``ttl_s``, so a lost job is queued again)."""
        key = keys.suite_intervals_lock(suite_id)
        return bool(
            self._call(lambda: self.client.set(key, now_iso(), nx=True, px=int(ttl_s * 1000)))
        )

    def release_suite_intervals(self, suite_id: str) -> None:
        self._call(lambda: self.client.delete(keys.suite_intervals_lock(suite_id)))

    # --- snapshots and cached answers --------------------------------------------------------

    def _suite_state(self, client: Any, suite_raw: bytes) -> tuple[list[Any], list[Any], Any, Any]:
        suite = SuiteRecord.from_json(suite_raw)
        read = self.client.pipeline(transaction=False)
        for bench_id in suite.benchmark_ids:
            read.get(keys.benchmark(bench_id))
            read.hmget(keys.leaderboard_info(bench_id), ["__version", "__finals"])
        read.get(keys.suite_intervals(suite.id))
        read.exists(keys.suite_intervals_lock(suite.id))
        got = read.execute()
        n = len(suite.benchmark_ids)
        # a task's state: its boards' version and its finals' counter (selection "final")
        versions = [
            None if v is None and f is None else (v or b"") + b"/" + (f or b"")
            for v, f in got[1 : 2 * n : 2]
        ]
        return got[0 : 2 * n : 2], versions, got[-2], got[-1]

    def _dep_keys(self, suite: SuiteRecord) -> list[str]:
        out = [keys.suite(suite.id), keys.suite_intervals(suite.id)]
        out.append(keys.suite_intervals_lock(suite.id))
        for bench_id in suite.benchmark_ids:
            out += [keys.benchmark(bench_id), keys.leaderboard_info(bench_id)]
        return out

    @staticmethod
    def _stamp(inputs: str, intervals: bytes | None, claimed: int) -> bytes:
        doc = hashlib.sha1(intervals).hexdigest() if intervals is not None else ""
        return f"{inputs}|{doc}|{int(claimed)}".encode()

    def suite_snapshot(self, suite_id: str) -> SuiteSnapshot | None:
        """The suite's state now (for the interval job)."""

        def read() -> SuiteSnapshot | None:
            raw: bytes | None = self.client.get(keys.suite(suite_id))  # type: ignore[assignment]
            if raw is None:
                return None
            return self._snapshot(raw, *self._suite_state(self.client, raw))

        return self._call(read)

    def _snapshot(
        self, raw: bytes, benches: list[Any], versions: list[Any], doc: Any, claimed: Any
    ) -> SuiteSnapshot:
        suite = SuiteRecord.from_json(raw)
        return SuiteSnapshot(
            suite=suite,
            benches={
                b: None if r is None else BenchmarkRecord.from_json(r)
                for b, r in zip(suite.benchmark_ids, benches, strict=True)
            },
            versions={  # the boards' version ("<version>/<finals>", see _suite_state)
                b: 0 if v is None else int(v.split(b"/")[0] or 0)
                for b, v in zip(suite.benchmark_ids, versions, strict=True)
            },
            intervals=None if doc is None else json.loads(doc),
            claimed=bool(claimed),
            inputs=_digest(raw, benches, versions),
        )

    def suite_cached(
        self, token: str, page: str, suite_id: str, *, rate_limit: int, window_s: int
    ) -> PageRead:
        """Authenticate ``token``, count the request against its key's rate limit and look up
        the cached answer ``page`` of suite ``suite_id`` — one round trip
        (``lua/suite_page_read.lua``). The answer is served only when its stamp is that of the
        suite's state now. The member benchmarks (the script's keys) come from this store's
        memo of earlier renders: a wrong or missing guess costs a miss, never a wrong answer
        (the suite record, whose tasks they are, is part of the stamp)."""
        memo: dict[str, list[str]] = self.__dict__.setdefault("_suite_deps", {})
        benches = memo.get(page)
        read_keys: list[str] = []
        if benches is not None:
            read_keys = [
                page,
                keys.suite(suite_id),
                keys.suite_intervals(suite_id),
                keys.suite_intervals_lock(suite_id),
            ]
            for bench_id in benches:
                read_keys += [keys.benchmark(bench_id), keys.leaderboard_info(bench_id)]
        return self._cached_page(
            token, "suite_page_read", read_keys, rate_limit=rate_limit, window_s=window_s
        )

    def suite_render(
        self,
        suite_id: str,
        page: str,
        render: Callable[[SuiteSnapshot], tuple[RenderedPage, bool]],
        ttl_s: int,
    ) -> RenderedPage | None:
        """Render an answer from a consistent state and cache it under ``page`` (None: no
        such suite). The state's keys are WATCHed from before they are read until the answer
        is stored with their stamp: if any changed meanwhile, the answer stands uncached.
        ``render`` returns (answer, cacheable): an answer whose render queued the interval
        job is not cached (a read finding the claim gone renders, and queues, again)."""
        suite_key = keys.suite(suite_id)

        def run() -> RenderedPage | None:
            pipe: Any
            with self.client.pipeline(transaction=True) as pipe:
                pipe.watch(suite_key)
                raw = pipe.get(suite_key)
                if raw is None:
                    return None
                pipe.watch(*self._dep_keys(SuiteRecord.from_json(raw)))
                benches, versions, doc, claimed = self._suite_state(self.client, raw)
                snapshot = self._snapshot(raw, benches, versions, doc, claimed)
                stamp = self._stamp(snapshot.inputs, doc, claimed)
                out, cacheable = render(snapshot)
                memo: dict[str, list[str]] = self.__dict__.setdefault("_suite_deps", {})
                remember(memo, page, snapshot.suite.benchmark_ids)
                if not cacheable:
                    return out
                pipe.multi()
                pipe.hset(
                    page,
                    mapping={"stamp": stamp, "body": out.body, "disposition": out.disposition},
                )
                pipe.expire(page, ttl_s)
                with contextlib.suppress(redis.WatchError):
                    pipe.execute()
                return out

        return self._call(run)
