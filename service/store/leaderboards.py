"""Leaderboards: the boards of a benchmark, their cached pages and their rank documents.

A board is a sorted set per metric (or ``metric[estimator]``) and rule, changed only by the
scripts that finish a job, change a submission's visibility or forget a submission (each bumps
the boards' version in the same script). A rendered answer is cached with the stamp of the
state it shows and served only while that state is current.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import redis

from service import keys
from service.store.base import StoreBase, remember
from service.store.records import (
    BenchmarkRecord,
    BoardDeps,
    BoardSnapshot,
    PageRead,
    RenderedPage,
    decode,
    now_iso,
)

__all__ = ["LeaderboardStore", "leaderboard_keys", "page_stamp"]


def page_stamp(
    dep_keys: list[str],
    bench: bytes,
    version: bytes | None,
    ranks: bytes | None,
    claimed: int,
    baseline: list[Any] | None,
) -> bytes:
    """The stamp of ``lua/_page_stamp.lua`` (same bytes) from values read in Python."""
    parts = [
        hashlib.sha1(bench).hexdigest().encode(),
        version or b"",
        dep_keys[2].encode(),
        hashlib.sha1(ranks).hexdigest().encode() if ranks is not None else b"",
        str(int(claimed)).encode(),
    ]
    if baseline is not None:
        status, visibility = (b"" if v is None else v for v in baseline)
        parts += [dep_keys[4].encode(), status + b"/" + visibility]
    else:
        parts += [b"", b""]
    return b"|".join(parts)


def leaderboard_keys(bench_id: str, metrics: list[str]) -> list[str]:
    """The KEYS of the boards ``metrics`` of a benchmark in the scripts that change them: its
    leaderboard info, then 6 per board (see ``lua/_leaderboard_helpers.lua``)."""
    out = [keys.leaderboard_info(bench_id)]
    for m in metrics:
        out += [
            keys.leaderboard_subs(bench_id, m),
            keys.leaderboard(bench_id, m, "best"),
            keys.leaderboard_map(bench_id, m, "best"),
            keys.leaderboard(bench_id, m, "latest"),
            keys.leaderboard_map(bench_id, m, "latest"),
            keys.leaderboard_entries(bench_id, m),
        ]
    return out


class LeaderboardStore(StoreBase):
    """Boards, cached pages and rank documents (a part of :class:`service.store.Store`)."""

    def leaderboard_page(
        self, bench_id: str, metric: str, rule: str, offset: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of a board, best first, and the number of teams on it.

        Each row: ``team``, ``submission``, ``badness``, ``rank`` (1 + the number of teams
        strictly better: tied teams share a rank) and ``entry`` (value and interval).
        """
        script = self._scripts["leaderboard_rows"]
        board_keys = [
            keys.leaderboard(bench_id, metric, rule),
            keys.leaderboard_map(bench_id, metric, rule),
            keys.leaderboard_entries(bench_id, metric),
        ]
        reply = self._call(lambda: script(keys=board_keys, args=[int(offset), int(limit)]))
        total = int(reply[0])
        rows: list[dict[str, Any]] = []
        if len(reply) < 2:
            return rows, total
        # Rank = 1 + the teams strictly better. The page is sorted by score: a row tied with
        # the row before it shares its rank; any other has exactly the rows before it ahead.
        rank = int(reply[1]) + 1
        previous: float | None = None
        for i in range((len(reply) - 2) // 4):
            team, score, sub, entry = reply[2 + 4 * i : 6 + 4 * i]
            badness = float(score)
            if previous is not None and badness != previous:
                rank = offset + i + 1
            previous = badness
            if sub is None:  # not reachable: the scripts write team and map together
                continue
            rows.append(
                {
                    "team": decode(team),
                    "submission": decode(sub),
                    "badness": badness,
                    "rank": rank,
                    "entry": json.loads(entry) if entry is not None else {},
                }
            )
        return rows, total

    def leaderboard_cached(
        self, token: str, page: str, bench_id: str, *, rate_limit: int, window_s: int
    ) -> PageRead:
        """Authenticate ``token``, count the request against its key's rate limit and look up
        the cached leaderboard answer ``page`` of benchmark ``bench_id`` — one round trip
        (``lua/page_read.lua``; authentication and counting as :meth:`_read_with_key`).

        The answer is served only when its stamp equals the stamp of the current state: the
        benchmark record, the version of its boards, the rank document of its board and the
        baseline's status and visibility (:class:`BoardDeps`). The page's dependencies are
        needed before the script runs: they come from this store's memo, filled by earlier
        renders; a wrong or missing guess costs a miss (a render), never a wrong answer.
        """
        deps = self._page_deps.get(page)
        return self._cached_page(
            token,
            "page_read",
            [] if deps is None else [page, *deps.keys(bench_id)],
            rate_limit=rate_limit,
            window_s=window_s,
        )

    def leaderboard_render(
        self,
        bench_id: str,
        page: str,
        deps_of: Callable[[BenchmarkRecord], BoardDeps],
        render: Callable[[BoardSnapshot], RenderedPage],
        ttl_s: int,
    ) -> RenderedPage | None:
        """Render a leaderboard answer and cache it under ``page`` for ``ttl_s``; None when
        the benchmark does not exist.

        The benchmark record, the version of its boards, the board's rank document and its
        job's claim, and the baseline's state (the keys of ``deps_of(record)``) are WATCHed
        from before they are read until the answer is stored, and the answer is stored with
        their stamp in the same transaction: if any of them changed meanwhile (even to and
        fro), nothing is stored. Every other write that changes what a board shows (its sorted
        sets and entries) bumps the version in the same script, so a stored answer is exactly
        the rendering of the state its stamp names — whatever its rank status: a ``stale`` or
        ``computing`` answer is served only until the rank document or the claim changes, and
        a render that claims the rank job (and queues it) is not stored, so that a read finding
        the claim gone (its job lost) renders again and queues the job again.
        """
        bench_key = keys.benchmark(bench_id)

        def run() -> RenderedPage | None:
            pipe: Any
            with self.client.pipeline(transaction=True) as pipe:
                pipe.watch(bench_key)
                raw = pipe.get(bench_key)
                if raw is None:
                    return None
                bench = BenchmarkRecord.from_json(raw)
                deps = deps_of(bench)
                dep_keys = deps.keys(bench_id)
                pipe.watch(*dep_keys[1:])
                read = self.client.pipeline(transaction=False)
                read.hget(dep_keys[1], "__version")
                read.get(dep_keys[2])
                read.exists(dep_keys[3])
                if deps.baseline is not None:
                    read.hmget(dep_keys[4], "status", "visibility")
                version, ranks, claimed, *baseline = read.execute()
                stamp = page_stamp(
                    dep_keys, raw, version, ranks, claimed, baseline[0] if baseline else None
                )
                snapshot = BoardSnapshot(
                    bench=bench,
                    version=0 if version is None else int(version),
                    ranks=None if ranks is None else json.loads(ranks),
                )
                out = render(snapshot)
                remember(self._page_deps, page, deps)
                pipe.multi()
                pipe.hset(
                    page,
                    mapping={"stamp": stamp, "body": out.body, "disposition": out.disposition},
                )
                pipe.expire(page, ttl_s)
                # A WatchError: the state changed meanwhile (the render's own claim of the
                # rank job included); the answer stands, uncached.
                with contextlib.suppress(redis.WatchError):
                    pipe.execute()
                return out

        return self._call(run)

    def leaderboard_board(self, bench_id: str, metric: str, rule: str) -> list[tuple[str, str]]:
        """Every (team, submission) of a board, best first."""

        def read() -> list[tuple[str, str]]:
            teams = [
                decode(t)
                for t in self.client.zrange(keys.leaderboard(bench_id, metric, rule), 0, -1)
            ]
            if not teams:
                return []
            subs = self.client.hmget(keys.leaderboard_map(bench_id, metric, rule), teams)
            return [(t, decode(s)) for t, s in zip(teams, subs, strict=True) if s is not None]

        return self._call(read)

    def leaderboard_entry(self, bench_id: str, metric: str, sub_id: str) -> dict[str, Any] | None:
        """The shown entry (value, interval) of a ranked submission, else None."""
        raw = self._call(
            lambda: self.client.hget(keys.leaderboard_entries(bench_id, metric), sub_id)
        )
        return None if raw is None else json.loads(raw)

    def leaderboard_entries_of(
        self, bench_id: str, metrics: list[str], sub_ids: list[str]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The shown entries of ranked submissions on several boards, in one round trip:
        (board, submission) -> entry, for those that have one."""

        def read() -> dict[tuple[str, str], dict[str, Any]]:
            pipe = self.client.pipeline(transaction=False)
            for metric in metrics:
                if sub_ids:
                    pipe.hmget(keys.leaderboard_entries(bench_id, metric), sub_ids)
            found: dict[tuple[str, str], dict[str, Any]] = {}
            if not sub_ids:
                return found
            for metric, raws in zip(metrics, pipe.execute(), strict=True):
                for sub_id, raw in zip(sub_ids, raws, strict=True):
                    if raw is not None:
                        found[(metric, sub_id)] = json.loads(raw)
            return found

        return self._call(read)

    def leaderboard_rank_of(self, bench_id: str, metric: str, rule: str, badness: float) -> int:
        """1 + the number of teams strictly better than ``badness`` on a board."""
        board = keys.leaderboard(bench_id, metric, rule)
        ahead = self._call(lambda: self.client.zcount(board, "-inf", f"({badness!r}"))
        return int(ahead) + 1

    def leaderboard_version(self, bench_id: str) -> int:
        """A counter of the changes of a benchmark's boards (new entries, removals)."""
        raw = self._call(lambda: self.client.hget(keys.leaderboard_info(bench_id), "__version"))
        return 0 if raw is None else int(raw)

    # --- the rank jobs' documents and claims ------------------------------------------------

    def get_ranks(self, bench_id: str, metric: str, rule: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.ranks(bench_id, metric, rule)))
        return None if raw is None else json.loads(raw)

    def put_ranks(self, bench_id: str, metric: str, rule: str, doc: Mapping[str, Any]) -> None:
        """Store a rank computation and release its job's claim."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.ranks(bench_id, metric, rule), json.dumps(doc, allow_nan=False))
            pipe.delete(keys.ranks_lock(bench_id, metric, rule))
            pipe.execute()

        self._call(write)

    def claim_ranks(self, bench_id: str, metric: str, rule: str, ttl_s: float) -> bool:
        """True for the one caller that should queue a rank job now (the claim expires after
        ``ttl_s``, so a lost job is queued again)."""
        key = keys.ranks_lock(bench_id, metric, rule)
        return bool(
            self._call(lambda: self.client.set(key, now_iso(), nx=True, px=int(ttl_s * 1000)))
        )

    def release_ranks(self, bench_id: str, metric: str, rule: str) -> None:
        self._call(lambda: self.client.delete(keys.ranks_lock(bench_id, metric, rule)))

    def hold_ranks(
        self, bench_id: str, metric: str, rule: str, token: str, ttl_s: float, *, take: bool
    ) -> bool:
        """The running rank job ``token`` holds its board's claim for ``ttl_s`` more.

        ``take``: the job starts and makes the claim its own (the reader's claim covered its
        time in the queue); else the claim is refreshed only while ``token`` still holds it.
        A job kept alive by a heartbeat holds a short claim, so that a job lost with its
        worker is queued again by the next read within ``ttl_s``, not after the reader's
        long claim. False when the claim is no longer the job's.
        """
        ttl_ms = max(int(ttl_s * 1000), 1)
        script = self._scripts["ranks_hold"]
        lock = keys.ranks_lock(bench_id, metric, rule)
        mode = "take" if take else "keep"
        return bool(self._call(lambda: script(keys=[lock], args=[token, ttl_ms, mode])))

    # --- a submission on its boards --------------------------------------------------------

    def set_visibility(self, sub_id: str, visibility: Literal["private", "public"]) -> str:
        """Make a submission private or public, in one script with its leaderboard entries: a
        succeeded benchmark submission going private leaves its boards (its team's next best
        or latest public submission takes its place), going public enters them; either bumps
        the board version, so that rank intervals are computed again.

        Returns "changed", "unchanged", "missing", or "unranked" (a succeeded benchmark
        submission finished without a stored ranking, by an older version: left as it is).
        """
        if visibility not in ("private", "public"):
            raise ValueError(f"visibility must be 'private' or 'public'; found {visibility!r}")
        for _ in range(3):
            bench, raw = self._call(
                lambda: self.client.hmget(keys.submission(sub_id), ["benchmark", "ranking"])
            )
            ranking = "" if raw is None else decode(raw)
            boards = list(json.loads(ranking)["entries"]) if ranking else []
            extra = [keys.result(sub_id)]
            if bench is None:
                extra.append(keys.stats())  # unused: no benchmark, no boards
            else:
                extra += [keys.benchmark(decode(bench))]
                extra += leaderboard_keys(decode(bench), boards)
            out = decode(
                self._run("set_visibility", sub_id, [sub_id, visibility, ranking, *boards], extra)
            )
            if out != "retry":
                return out
        # The ranking is written once (when the job succeeds): a second read always agrees.
        raise RuntimeError(f"the ranking of {sub_id} kept changing")  # pragma: no cover

    def leaderboard_forget(self, bench_id: str, sub_id: str, metrics: Iterable[str]) -> None:
        """Remove a submission from the boards of ``metrics`` and, for a classification
        submission evaluated with estimators, from their ``"metric[estimator]"`` boards (its
        team falls back to its next best or latest submission)."""
        from service.kinds import task_of
        from service.leaderboard import boards_of

        names = list(metrics)
        record = self.get_submission(sub_id)
        if record is not None and names:
            estimators = record.analyses.estimators
            names = boards_of(
                names, estimators if isinstance(estimators, list) else None, task_of(record.kind)
            )
        if names:
            # KEYS 8 and 9 are unused here; the info hash is KEYS[10] as in the finish script.
            pad = [keys.result(sub_id), keys.stats()]
            self._run(
                "leaderboard_forget", sub_id, [sub_id], pad + leaderboard_keys(bench_id, names)
            )
