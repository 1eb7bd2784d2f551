"""Benchmark suites: /v1/suites (admin-defined groups of benchmark tasks) and their leaderboard.

A suite names tasks — a benchmark and one of its metrics each — and aggregates each team's
entry per task into a mean rank, a win rate against every other team and a geometric-mean
skill against a baseline (:mod:`service.suites` has the definitions). The point values are
computed at read time from the member boards; their intervals, in two views (rows resampled
within each task, or tasks resampled within the suite), come from a worker job
(:mod:`worker.suites`) queued when a read finds them missing or older than the member boards:
until it is done the answer says ``computing`` or ``stale``.

An answer is the same for every key, so the rendered bytes (JSON or CSV) are cached per query
with the stamp of the suite record, the member benchmarks' records and boards' versions and
the suite's interval document, and served only while that state is current.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from service import keys
from service.api.auth import admitted, ensure_admin_key, key_required, run_read
from service.api.deps import AdminDep, KeyDep, StoreDep, TokenDep, get_settings, get_store
from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.schemas import (
    SuiteAggregate,
    SuiteCreate,
    SuiteExcluded,
    SuiteInfo,
    SuiteIntervals,
    SuiteLeaderboard,
    SuiteList,
    SuiteRow,
    SuiteTask,
    SuiteTaskInfo,
    SuiteUpdate,
)
from service.celery_config import producer
from service.rest_text import did_you_mean
from service.settings import Settings
from service.store import RenderedPage, Store, SuiteRecord, SuiteSnapshot, now_iso
from service.suite_data import load_inputs
from service.suites import SUITE_TASK_NAME, UNITS, Aggregates, aggregate

log = logging.getLogger("uqeval.api")

router = APIRouter(tags=["suites"])

SuiteId = Annotated[str, Path(min_length=1, max_length=100, description="The suite id.")]

#: How long a queued interval job holds its claim (a lost job is queued again after it).
INTERVALS_CLAIM_S = 600.0

#: Seconds a rendered answer stays cached (served only while the state it shows is current).
PAGE_TTL_S = 120

View = Literal["rows", "tasks"]
Format = Literal["json", "csv"]


# --- definitions ---------------------------------------------------------------------------


def info(record: SuiteRecord) -> SuiteInfo:
    return SuiteInfo(
        id=record.id,
        name=record.name,
        description=record.description,
        tasks=[SuiteTaskInfo(**t) for t in record.tasks],
        baseline_team=record.baseline_team,
        missing=record.missing,  # type: ignore[arg-type]
        selection=record.selection,  # type: ignore[arg-type]
        n_resamples=record.n_resamples,
        level=record.level,
        seed=record.seed,
        public_board=record.public_board,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _tasks(store: Store, tasks: list[SuiteTask]) -> list[dict[str, str]]:
    """The tasks with their metric filled; 422 naming the task for an unknown benchmark, a
    metric the benchmark does not compute, or a benchmark named twice."""
    out: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.benchmark_id in seen:
            raise ApiError(
                422,
                f"tasks[{i}]: benchmark {task.benchmark_id!r} is already task "
                f"{seen[task.benchmark_id]}; each benchmark may be one task of a suite",
                code="duplicate_task",
                field="tasks.benchmark_id",
                index=i,
            )
        seen[task.benchmark_id] = i
        bench = store.get_benchmark(task.benchmark_id)
        if bench is None:
            raise ApiError(
                422,
                f"tasks[{i}]: no benchmark {task.benchmark_id!r}; list them with GET "
                "/v1/benchmarks",
                code="unknown_benchmark",
                field="tasks.benchmark_id",
                index=i,
            )
        metric = task.metric or bench.primary_metric
        if metric not in bench.metrics:
            raise ApiError(
                422,
                f"tasks[{i}]: benchmark {bench.id!r} computes {bench.metrics}; found metric "
                f"{metric!r}." + did_you_mean(metric, bench.metrics),
                code="unknown_metric",
                field="tasks.metric",
                index=i,
            )
        out.append({"benchmark_id": bench.id, "metric": metric})
    return out


def _check_team(store: Store, team: str | None) -> None:
    if team is not None and team not in store.team_names([team]):
        raise ApiError(
            422,
            f"baseline_team {team!r} is no team; list them with GET /v1/admin/teams, or "
            "leave it null for each benchmark's baseline submission",
            code="unknown_team",
            field="baseline_team",
        )


def _get(store: Store, suite_id: str) -> SuiteRecord:
    record = store.get_suite(suite_id)
    if record is None:
        raise ApiError(
            404, f"no suite {suite_id!r}; list them with GET /v1/suites", field="suite_id"
        )
    return record


@router.post(
    "/v1/suites",
    operation_id="createSuite",
    summary="Create a benchmark suite (admin)",
    status_code=201,
    response_model=SuiteInfo,
    responses=errors(400, 401, 403, 413, 422, 503),
)
def create_suite(body: SuiteCreate, admin: AdminDep, store: StoreDep) -> JSONResponse:
    """Group 1..100 benchmarks (distinct) into a suite, each with a metric (default: the
    benchmark's primary metric). The suite's leaderboard ranks teams by their mean rank over
    the tasks, with win rate and geometric-mean skill against the baseline, and intervals
    from resampling rows within tasks or tasks within the suite."""
    tasks = _tasks(store, body.tasks)
    _check_team(store, body.baseline_team)
    now = now_iso()
    record = SuiteRecord(
        id="suite_" + uuid.uuid4().hex[:16],
        name=body.name,
        description=body.description,
        tasks=tasks,
        baseline_team=body.baseline_team,
        missing=body.missing,
        selection=body.selection,
        n_resamples=body.n_resamples,
        level=body.level,
        seed=body.seed,
        public_board=body.public_board,
        created_at=now,
        updated_at=now,
    )
    store.create_suite(record)
    return JSONResponse(
        info(record).model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/suites/{record.id}"},
    )


@router.get(
    "/v1/suites",
    operation_id="listSuites",
    summary="List the benchmark suites",
    response_model=SuiteList,
    responses=errors(401, 503),
)
def list_suites(key: KeyDep, store: StoreDep) -> SuiteList:
    """Every suite, oldest first (any key)."""
    return SuiteList(suites=[info(r) for r in store.list_suites()])


@router.get(
    "/v1/suites/{suite_id}",
    operation_id="getSuite",
    summary="A benchmark suite's definition",
    response_model=SuiteInfo,
    responses=errors(401, 404, 422, 503),
)
def get_suite(suite_id: SuiteId, key: KeyDep, store: StoreDep) -> SuiteInfo:
    """The suite's tasks, baseline, missing-result rule and resampling options (any key)."""
    return info(_get(store, suite_id))


@router.patch(
    "/v1/suites/{suite_id}",
    operation_id="updateSuite",
    summary="Change a benchmark suite (admin)",
    response_model=SuiteInfo,
    responses=errors(400, 401, 403, 404, 413, 422, 503),
)
def update_suite(
    suite_id: SuiteId, body: SuiteUpdate, admin: AdminDep, store: StoreDep
) -> SuiteInfo:
    """Change the given fields (checked as at creation); the leaderboard and its intervals
    follow (its cached answers and interval document no longer match the suite)."""
    _get(store, suite_id)
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    for name in ("name", "tasks", "missing", "selection", "n_resamples", "level", "seed"):
        if name in changes and changes[name] is None:
            raise ApiError(422, f"{name} cannot be null; leave it out to keep it", field=name)
    if body.tasks is not None:
        changes["tasks"] = _tasks(store, body.tasks)
    if "baseline_team" in changes:
        _check_team(store, changes["baseline_team"])
    if "public_board" in changes and changes["public_board"] is None:
        raise ApiError(422, "public_board cannot be null", field="public_board")
    record = store.update_suite(suite_id, changes)
    if record is None:
        raise ApiError(404, f"no suite {suite_id!r}", field="suite_id")
    return info(record)


@router.delete(
    "/v1/suites/{suite_id}",
    operation_id="deleteSuite",
    summary="Delete a benchmark suite (admin)",
    status_code=204,
    response_class=Response,
    responses=errors(401, 403, 404, 422, 503),
)
def delete_suite(suite_id: SuiteId, admin: AdminDep, store: StoreDep) -> Response:
    """Remove the suite and its leaderboard (its benchmarks and submissions stay)."""
    if not store.delete_suite(suite_id):
        raise ApiError(404, f"no suite {suite_id!r}", field="suite_id")
    return Response(status_code=204)


# --- the leaderboard -----------------------------------------------------------------------


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _interval_status(
    store: Store, settings: Settings, snapshot: SuiteSnapshot, total: int
) -> tuple[str, bool]:
    """(status, whether this read queued the job: its answer is not cached)."""
    doc = snapshot.intervals
    current = doc is not None and doc.get("inputs") == snapshot.inputs
    queued = False
    if not current and total > 0 and not snapshot.claimed:
        suite_id = snapshot.suite.id
        if store.claim_suite_intervals(suite_id, INTERVALS_CLAIM_S):
            queued = True
            try:
                enqueue_intervals(settings, suite_id)
            except Exception as exc:  # the board is still readable; the next read retries
                store.release_suite_intervals(suite_id)
                log.warning("could not queue the interval job of suite %s: %s", suite_id, exc)
    if doc is None:
        return "computing", queued
    return ("current" if current else "stale"), queued


def enqueue_intervals(settings: Settings, suite_id: str) -> None:
    """Publish the interval job of a suite on the ``cpu`` queue."""
    producer(settings).send_task(
        SUITE_TASK_NAME,
        args=[suite_id],
        queue="cpu",
        routing_key="cpu",
        retry=False,
        ignore_result=True,
        timeout=settings.enqueue_timeout_s,
    )


def build(
    store: Store,
    settings: Settings,
    snapshot: SuiteSnapshot,
    view: View,
    offset: int,
    limit: int,
) -> tuple[SuiteLeaderboard, bool]:
    """The leaderboard of ``snapshot``'s suite in ``view`` (and whether this read queued the
    interval job)."""
    suite = snapshot.suite
    inputs = load_inputs(store, snapshot)
    agg: Aggregates = aggregate(inputs.tasks, suite.missing)  # type: ignore[arg-type]
    status, queued = _interval_status(store, settings, snapshot, len(agg.teams))
    doc = snapshot.intervals or {}
    shown = (doc.get("views") or {}).get(view) or {}
    by_team: dict[str, Any] = shown.get("teams") or {}
    page = list(range(offset, min(offset + limit, len(agg.teams))))
    names = store.team_names([agg.teams[j] for j in page] + list(agg.excluded))
    infos = [SuiteTaskInfo(benchmark_id=t.benchmark_id, metric=t.metric) for t in inputs.tasks]
    task_ranks = _task_ranks(agg)
    rows = []
    for j in page:
        team = agg.teams[j]
        iv = by_team.get(team) or {}
        own = set(agg.own[team])
        values: list[float | None] = []
        imputed: list[int] = []
        for k, t in enumerate(inputs.tasks):
            got = t.entries.get(team)
            if got is None and t.baseline is not None:
                imputed.append(k)
            values.append(got[0] if got is not None else (t.baseline[0] if t.baseline else None))
        rank_iv = iv.get("rank") or [None, None]
        rows.append(
            SuiteRow(
                rank=agg.rank[j],
                rank_low=rank_iv[0],
                rank_high=rank_iv[1],
                team_id=team,
                team_name=names.get(team),
                n_tasks=len(own),
                mean_rank=_agg(agg.mean_rank[j], iv.get("mean_rank")),
                win_rate=_agg(agg.win_rate[j], iv.get("win_rate")),
                gm_skill=_agg(agg.gm_skill[j], iv.get("gm_skill")),
                values=values,
                task_ranks=[float(task_ranks[k, j]) for k in range(len(inputs.tasks))],
                imputed=imputed,
            )
        )
    excluded = [
        SuiteExcluded(
            team_id=team,
            team_name=names.get(team),
            missing_tasks=[infos[k] for k in lacks],
        )
        for team, lacks in sorted(agg.excluded.items())
    ]
    warnings = list(inputs.warnings) + list(doc.get("warnings") or [])
    board = SuiteLeaderboard(
        suite_id=suite.id,
        name=suite.name,
        view=view,
        unit=UNITS[view],
        n_resamples=suite.n_resamples,
        level=suite.level,
        seed=suite.seed,
        missing=suite.missing,  # type: ignore[arg-type]
        selection=suite.selection,  # type: ignore[arg-type]
        baseline=suite.baseline_team or "benchmark baselines",
        tasks=infos,
        gm_skill_reason=agg.gm_skill_reason,
        total=len(agg.teams),
        offset=offset,
        limit=limit,
        entries=rows,
        excluded=excluded,
        intervals=SuiteIntervals(status=status, warnings=warnings),  # type: ignore[arg-type]
    )
    return board, queued


def _task_ranks(agg: Aggregates) -> Any:
    from scipy.stats import rankdata

    assert agg.badness is not None
    if agg.badness.size == 0:
        return agg.badness
    return rankdata(agg.badness, method="average", axis=-1)


def _agg(value: float, interval: Any) -> SuiteAggregate:
    lo, hi = interval if isinstance(interval, list) and len(interval) == 2 else (None, None)
    return SuiteAggregate(value=_finite(value), low=lo, high=hi)


CSV_COLUMNS = [
    "rank",
    "rank_low",
    "rank_high",
    "team_id",
    "team_name",
    "n_tasks",
    "mean_rank",
    "mean_rank_low",
    "mean_rank_high",
    "win_rate",
    "win_rate_low",
    "win_rate_high",
    "gm_skill",
    "gm_skill_low",
    "gm_skill_high",
]


def to_csv(board: SuiteLeaderboard) -> str:
    """One row per ranked team: the columns of :data:`CSV_COLUMNS`, then one column per task
    (``value:<benchmark>:<metric>``, empty where the team lacks it)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    task_cols = [f"value:{t.benchmark_id}:{t.metric}" for t in board.tasks]
    writer.writerow(CSV_COLUMNS + task_cols)
    for e in board.entries:
        row: list[Any] = [e.rank, e.rank_low, e.rank_high, e.team_id, e.team_name, e.n_tasks]
        for a in (e.mean_rank, e.win_rate, e.gm_skill):
            row += [a.value, a.low, a.high]
        row += [None if k in e.imputed else v for k, v in enumerate(e.values)]
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue()


def render(
    store: Store,
    settings: Settings,
    snapshot: SuiteSnapshot,
    view: View,
    offset: int,
    limit: int,
    fmt: Format,
) -> tuple[RenderedPage, bool]:
    """The answer's bytes (JSON, or CSV with its Content-Disposition) and whether it may be
    cached."""
    board, queued = build(store, settings, snapshot, view, offset, limit)
    if fmt == "csv":
        name = f'attachment; filename="{board.suite_id}-{view}.csv"'
        return RenderedPage(to_csv(board).encode(), name), not queued
    body = json.dumps(
        board.model_dump(mode="json"), ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode()
    return RenderedPage(body), not queued


def page_key(suite_id: str, view: View, offset: int, limit: int, fmt: Format) -> str:
    query = json.dumps([view, offset, limit, fmt]).encode()
    return keys.suite_page_cache(suite_id, hashlib.blake2b(query, digest_size=16).hexdigest())


def answer(
    store: Store,
    settings: Settings,
    suite_id: str,
    view: View,
    offset: int,
    limit: int,
    fmt: Format,
) -> RenderedPage | None:
    """The answer rendered from the current state (and cached); None: no such suite."""
    return store.suite_render(
        suite_id,
        page_key(suite_id, view, offset, limit, fmt),
        lambda snap: render(store, settings, snap, view, offset, limit, fmt),
        PAGE_TTL_S,
    )


def serve(
    request: Request,
    token: str | None,
    suite_id: str,
    view: View,
    offset: int,
    limit: int,
    fmt: Format,
) -> RenderedPage:
    """The route's work in one trip through the read pool: authentication, rate count and a
    current cached answer in one Redis round trip; else the answer rendered (and cached)."""
    store, settings = get_store(request), get_settings(request)
    if token is None:
        raise key_required()
    ensure_admin_key(request, store)
    found = store.suite_cached(
        token,
        page_key(suite_id, view, offset, limit, fmt),
        suite_id,
        rate_limit=settings.rate_limit,
        window_s=settings.rate_limit_window_s,
    )
    admitted(settings, found.key, found.retry_after_s)
    if found.body is not None:
        return RenderedPage(found.body, found.disposition)
    rendered = answer(store, settings, suite_id, view, offset, limit, fmt)
    if rendered is None:
        raise ApiError(
            404, f"no suite {suite_id!r}; list them with GET /v1/suites", field="suite_id"
        )
    return rendered


@router.get(
    "/v1/suites/{suite_id}/leaderboard",
    operation_id="getSuiteLeaderboard",
    summary="A benchmark suite's leaderboard",
    response_model=SuiteLeaderboard,
    responses={
        **errors(401, 404, 422, 503),
        200: {
            "description": "The suite leaderboard (JSON), or its page as CSV with format=csv.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
    },
)
async def get_suite_leaderboard(
    request: Request,
    suite_id: SuiteId,
    token: TokenDep,
    view: Annotated[
        View,
        Query(
            description="Unit of the intervals: rows (rows resampled within each task, "
            "paired across teams) or tasks (tasks resampled within the suite)."
        ),
    ] = "rows",
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    format: Annotated[
        Format, Query(description="json, or csv for an export of the page.")
    ] = "json",
) -> Response:
    """Teams by mean rank over the suite's tasks (average ranks on each task's board entry),
    with win rate against every other team (ties count one half) and geometric-mean skill
    against the baseline (1 − the geometric mean of the loss ratios, loss = |value − the
    metric's best value|), each with a percentile interval whose unit the answer states, and
    rank intervals. Teams lacking a task follow the suite's ``missing`` rule (excluded teams
    are listed with the tasks they lack). ``intervals.status`` says whether the intervals
    describe the member boards as they are now (a worker computes them)."""
    page = await run_read(request, serve, request, token, suite_id, view, offset, limit, format)
    if format == "csv":
        return Response(
            page.body, media_type="text/csv", headers={"Content-Disposition": page.disposition}
        )
    return Response(page.body, media_type="application/json")
