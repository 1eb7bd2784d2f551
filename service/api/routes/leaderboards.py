"""Leaderboards: GET /v1/benchmarks/{bench_id}/leaderboard, as JSON or CSV.

A board ranks one submission per team (its best or its latest, by the benchmark's rule) among
the benchmark's succeeded public submissions, best first in the metric's direction; the
worker keeps it in Redis sorted sets, written with each result. Rank intervals and the
separability flags come from a worker job (:mod:`worker.ranks`) queued when a read finds them
missing or older than the board; until it is done the answer says ``computing`` or ``stale``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from service import jobs
from service.api.auth import KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.schemas import Leaderboard, LeaderboardEntry, RankStatus
from service.leaderboard import badness
from service.settings import Settings
from service.store import BenchmarkRecord, Store, SubmissionRecord
from uqcore import registry

log = logging.getLogger("uqeval.api")

router = APIRouter(tags=["benchmarks"])

#: How long a queued rank job holds its claim (a job lost with its worker is queued again
#: after it; a finished job releases it at once).
RANKS_CLAIM_S = 600.0

CSV_COLUMNS = [
    "rank",
    "team_id",
    "submission_id",
    "model_name",
    "created_at",
    "value",
    "low",
    "high",
    "std",
    "rank_low",
    "rank_high",
    "p_best",
    "separable_from_leader",
    "separable_from_baseline",
    "p_value_vs_baseline",
    "is_baseline",
    "metadata",
]


def _entry(
    store: Store,
    bench: BenchmarkRecord,
    row: dict[str, Any],
    ranks: dict[str, Any],
    record: SubmissionRecord | None = None,
) -> LeaderboardEntry | None:
    record = record if record is not None else store.get_submission(row["submission"])
    if record is None:
        return None
    shown = row["entry"]
    flags = ranks.get(row["submission"], {})
    return LeaderboardEntry(
        rank=row["rank"],
        team_id=row["team"],
        submission_id=record.id,
        model_name=record.model_name,
        created_at=record.created_at,
        metadata=record.metadata,
        value=shown["value"],
        low=shown.get("low"),
        high=shown.get("high"),
        std=shown.get("std"),
        rank_low=flags.get("rank_low"),
        rank_high=flags.get("rank_high"),
        p_best=flags.get("p_best"),
        separable_from_leader=flags.get("separable_from_leader"),
        separable_from_baseline=flags.get("separable_from_baseline"),
        p_value_vs_baseline=flags.get("p_value_vs_baseline"),
        is_baseline=record.id == bench.baseline,
    )


def _baseline(
    store: Store, bench: BenchmarkRecord, metric: str, rule: str, ranks: dict[str, Any]
) -> LeaderboardEntry | None:
    if bench.baseline is None:
        return None
    record = store.get_submission(bench.baseline)
    if record is None or record.status != "succeeded":
        return None
    shown = store.leaderboard_entry(bench.id, metric, record.id)
    if shown is None:  # a private baseline: shown, not ranked
        result = store.get_result(record.id) or {}
        m = result.get("metrics", {}).get(metric)
        if not m or m.get("value") is None:
            return None
        interval = m.get("interval") or {}
        shown = {"value": m["value"], **{k: interval.get(k) for k in ("low", "high", "std")}}
        params = m.get("params")
    else:
        params = bench.params.get(metric)
    rank = store.leaderboard_rank_of(
        bench.id, metric, rule, badness(metric, shown["value"], params)
    )
    team = record.team if record.team is not None else record.owner
    row = {"submission": record.id, "team": team, "rank": rank, "entry": shown}
    return _entry(store, bench, row, ranks)


def _rank_status(
    store: Store, settings: Settings, bench: BenchmarkRecord, metric: str, rule: str, total: int
) -> tuple[RankStatus, dict[str, Any]]:
    doc = store.get_ranks(bench.id, metric, rule)
    version = store.leaderboard_version(bench.id)
    current = doc is not None and doc.get("version") == version
    if not current and total > 0 and store.claim_ranks(bench.id, metric, rule, RANKS_CLAIM_S):
        try:
            jobs.enqueue_ranks(settings, bench.id, metric, rule)
        except Exception as exc:  # the board is still readable; the next read retries
            store.release_ranks(bench.id, metric, rule)
            log.warning("could not queue the rank job of %s/%s: %s", bench.id, metric, exc)
    if doc is None:
        return RankStatus(status="computing"), {}
    status = RankStatus(
        status="current" if current else "stale",
        n_resamples=doc.get("n_resamples"),
        seed=doc.get("seed"),
        level=doc.get("level"),
        method=doc.get("method"),
        multiple_comparison_note=doc.get("multiple_comparison_note"),
    )
    return status, dict(doc.get("entries", {}))


def _read(
    store: Store, settings: Settings, bench_id: str, metric: str | None, offset: int, limit: int
) -> Leaderboard:
    bench = store.get_benchmark(bench_id)
    if bench is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    name = metric or bench.primary_metric
    if name not in bench.metrics:
        raise ApiError(
            422,
            f"benchmark {bench_id!r} shows metrics {bench.metrics}; found {name!r}",
            field="metric",
        )
    spec = registry.get(name)
    rows, total = store.leaderboard_page(bench.id, name, bench.rule, offset, limit)
    status, ranks = _rank_status(store, settings, bench, name, bench.rule, total)
    records = store.get_submissions([r["submission"] for r in rows])
    entries = [
        e
        for e in (_entry(store, bench, r, ranks, rec) for r, rec in zip(rows, records, strict=True))
        if e is not None
    ]
    return Leaderboard(
        benchmark_id=bench.id,
        metric=name,
        direction=spec.direction,
        bounds=list(spec.bounds),
        rule=bench.rule,
        total=total,
        offset=offset,
        limit=limit,
        entries=entries,
        baseline=_baseline(store, bench, name, bench.rule, ranks),
        ranks=status,
    )


def _csv(board: Leaderboard) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in board.entries:
        d = e.model_dump()
        d["metadata"] = json.dumps(e.metadata, separators=(",", ":"), sort_keys=True)
        writer.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    return out.getvalue()


@router.get(
    "/v1/benchmarks/{bench_id}/leaderboard",
    operation_id="getLeaderboard",
    summary="A benchmark's leaderboard under one metric",
    response_model=Leaderboard,
    responses={
        **errors(401, 404, 422, 503),
        200: {
            "description": "The leaderboard (JSON), or its page as CSV with format=csv.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
    },
)
async def get_leaderboard(
    bench_id: Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")],
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    metric: Annotated[
        str | None,
        Query(max_length=100, description="One of the benchmark's metrics (default: primary)."),
    ] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    format: Annotated[
        Literal["json", "csv"], Query(description="json, or csv for an export of the page.")
    ] = "json",
) -> Response:
    """One submission per team (best or latest by the benchmark's rule) among the succeeded
    public submissions, best first in the metric's direction, with the value and its
    bootstrap interval, the rank interval from the bootstrap rank distribution, and whether
    each entry is separable from the leader and from the baseline (the baseline row is
    marked). Tied teams share a rank. ``ranks.status`` says whether the rank intervals are
    current for the board."""
    board = await run_in_threadpool(_read, store, settings, bench_id, metric, offset, limit)
    if format == "csv":
        filename = f"{board.benchmark_id}-{board.metric}.csv"
        return Response(
            _csv(board),
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
    return JSONResponse(board.model_dump(mode="json"))
