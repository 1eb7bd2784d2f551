"""Public/private parts of benchmarks: the one loader of a job's arrays, sealed private
results, and the final submissions of each team (a part of :class:`service.store.Store`).

Every job that computes on a benchmark's targets (evaluation, bootstrap parts, rank
intervals, comparisons, plots) reads them through :meth:`FinalsStore.load_part` or
:meth:`~service.store.benchmarks.BenchmarkStore.load_benchmark_arrays`, which give the public
rows unless asked otherwise: the private rows never reach an answer while a benchmark is open.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
import redis

from service import keys
from service.kinds import task_of
from service.leaderboard import result_entries
from service.splits import Part, cut_rows, public_board
from service.store.base import StoreBase
from service.store.documents import pack, unpack
from service.store.records import SubmissionRecord, decode

__all__ = ["FinalsStore", "MarkFinal"]

#: What :meth:`FinalsStore.mark_final` found: the change was made (or was already so), the
#: benchmark is closed, the submission cannot be final, or the team has too many finals.
MarkFinal = Literal["ok", "benchmark_closed", "not_final_eligible", "too_many_finals", "missing"]


class FinalsStore(StoreBase):
    """Split loading, private results and finals."""

    # --- the one loader of a job's arrays ---------------------------------------------------

    def load_part(
        self, record: SubmissionRecord, part: Part = "public"
    ) -> dict[str, np.ndarray[Any, Any]] | None:
        """The submission's arrays for a computation: for a benchmark submission, its
        prediction cut to the rows of ``part`` merged with that part's targets (public by
        default); otherwise its own arrays. None when its arrays or its benchmark are gone."""
        arrays = self.load_arrays(record.id)  # type: ignore[attr-defined]
        if arrays is None:
            return None
        if record.benchmark is None:
            return dict(arrays)
        found = self.benchmark_part(record.benchmark, part)  # type: ignore[attr-defined]
        if found is None:
            return None
        targets, rows, n = found
        return {**cut_rows(arrays, rows, n), **targets}

    # --- sealed private results ---------------------------------------------------------------

    def put_private_result(self, sub_id: str, doc: dict[str, Any]) -> None:
        """Store the result on the private rows (written before the public result, deleted
        with the submission; no route reads it while the benchmark is open)."""
        raw = pack(json.dumps(doc, allow_nan=False, separators=(",", ":")).encode())
        self._call(lambda: self.client.set(keys.private_result(sub_id), raw))

    def get_private_result(self, sub_id: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.private_result(sub_id)))
        return None if raw is None else json.loads(unpack(raw))

    def get_private_results(self, sub_ids: list[str]) -> list[dict[str, Any] | None]:
        if not sub_ids:
            return []
        raws = self._call(lambda: self.client.mget([keys.private_result(s) for s in sub_ids]))
        return [None if r is None else json.loads(unpack(r)) for r in raws]

    def drop_private_result(self, sub_id: str) -> None:
        self._call(lambda: self.client.delete(keys.private_result(sub_id)))

    # --- finals -------------------------------------------------------------------------------

    def mark_final(
        self, record: SubmissionRecord, team: str, final: bool
    ) -> tuple[MarkFinal, list[str]]:
        """Mark (or unmark) ``record`` final for ``team``; with the team's finals after it.

        Checked in one transaction with the benchmark's state: open, the submission
        succeeded on it, at most its ``max_final`` marked."""
        assert record.benchmark is not None
        bench_key = keys.benchmark(record.benchmark)
        sub_key = keys.submission(record.id)
        set_key = keys.finals(record.benchmark, team)
        info_key = keys.leaderboard_info(record.benchmark)

        def write() -> tuple[MarkFinal, list[str]]:
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(bench_key, sub_key, set_key)
                        raw = pipe.get(bench_key)
                        status = pipe.hget(sub_key, "status")
                        current = sorted(decode(s) for s in pipe.smembers(set_key))
                        if raw is None or status is None:
                            return "missing", current
                        bench = json.loads(raw)
                        if bench.get("status") == "closed":
                            return "benchmark_closed", current
                        if decode(status) != "succeeded":
                            return "not_final_eligible", current
                        limit = int(bench.get("max_final", 2))
                        if final and record.id not in current and len(current) >= limit:
                            return "too_many_finals", current
                        pipe.multi()
                        # Suites that rank finals read this counter into their cache stamp.
                        pipe.hincrby(info_key, "__finals", 1)
                        if final:
                            pipe.sadd(set_key, record.id)
                            pipe.hset(sub_key, "final", "1")
                        else:
                            pipe.srem(set_key, record.id)
                            pipe.hdel(sub_key, "final")
                        pipe.execute()
                        after = set(current) | {record.id} if final else set(current) - {record.id}
                        return "ok", sorted(after)
                    except redis.WatchError:
                        continue

        return self._call(write)

    def finals(self, bench_id: str) -> dict[str, list[tuple[str, str]]]:
        """team -> [(submission, "explicit" | "default")]: the submissions that rank on the
        private board. A team's explicitly marked ones (still succeeded and on the benchmark),
        else its best ``max_final`` succeeded public submissions by the primary metric's
        public value (ties: the earlier first)."""
        bench = self.get_benchmark(bench_id)  # type: ignore[attr-defined]
        if bench is None:
            return {}

        def index() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            pipe.zrange(keys.bench_submissions(bench_id), 0, -1)
            pipe.zrange(keys.bench_succeeded_legacy(bench_id), 0, -1)
            now, before = pipe.execute()
            return [*now, *before]

        ids = list(dict.fromkeys(decode(s) for s in self._call(index)))
        records = [r for r in self.get_submissions(ids) if r is not None]  # type: ignore[attr-defined]
        records = [r for r in records if r.status == "succeeded" and r.benchmark == bench_id]
        out: dict[str, list[tuple[str, str]]] = {}
        by_team: dict[str, list[SubmissionRecord]] = {}
        for r in records:
            by_team.setdefault(r.team if r.team is not None else r.owner, []).append(r)
        for team, subs in by_team.items():
            marked = [r for r in subs if r.final]
            if marked:
                out[team] = [(r.id, "explicit") for r in sorted(marked, key=lambda r: r.created_ts)]
                continue
            scored: list[tuple[float, float, str]] = []
            for r in subs:
                if r.visibility != "public":
                    continue
                entry = result_entries(
                    self.get_result(r.id) or {},  # type: ignore[attr-defined]
                    task_of(r.kind),
                ).get(bench.primary_metric)
                if entry is not None:
                    scored.append((entry[0], r.created_ts, r.id))
            scored.sort()
            if scored:
                out[team] = [(s, "default") for _, _, s in scored[: bench.max_final]]
        return out

    def private_board(self, bench: Any, board: str) -> list[dict[str, Any]]:
        """The private board of ``board`` (a board name, with or without the private prefix):
        one row per team with finals, its best final by the private value, best first (ties:
        the earlier submission), each ``{"rank", "team", "submission", "badness", "entry"}``.
        Tied values share a rank."""
        return self.finals_board(bench, board, "private")

    def finals_board(self, bench: Any, board: str, part: Part) -> list[dict[str, Any]]:
        """As :meth:`private_board`, ranked by the values of ``part``: ``"private"`` (the
        sealed results) or ``"public"`` (the results every reader sees)."""
        name = public_board(board)
        finals = self.finals(bench.id)
        ids = [s for subs in finals.values() for s, _ in subs]
        records = dict(zip(ids, self.get_submissions(ids), strict=True))  # type: ignore[attr-defined]
        if part == "private":
            found = self.get_private_results(ids)
        else:
            found = [self.get_result(i) for i in ids]  # type: ignore[attr-defined]
        docs = dict(zip(ids, found, strict=True))
        best: dict[str, tuple[float, float, str, dict[str, Any]]] = {}
        for team, subs in finals.items():
            for sub_id, _ in subs:
                record, doc = records.get(sub_id), docs.get(sub_id)
                if record is None or doc is None:
                    continue
                entry = result_entries(doc, task_of(record.kind)).get(name)
                if entry is None:
                    continue
                cand = (entry[0], record.created_ts, sub_id, entry[1])
                if team not in best or cand[:3] < best[team][:3]:
                    best[team] = cand
        rows = sorted(((b, ts, sub, shown, team) for team, (b, ts, sub, shown) in best.items()))
        out: list[dict[str, Any]] = []
        for i, (bad, _, sub_id, shown, team) in enumerate(rows):
            rank = out[-1]["rank"] if out and out[-1]["badness"] == bad else i + 1
            out.append(
                {"rank": rank, "team": team, "submission": sub_id, "badness": bad, "entry": shown}
            )
        return out
