"""Leaderboards: GET /v1/benchmarks/{bench_id}/leaderboard, as JSON or CSV.

A board ranks one submission per team (its best or its latest, by the benchmark's rule) among
the benchmark's succeeded public submissions, best first in the metric's direction; the
worker keeps it in Redis sorted sets, written with each result. Rank intervals and the
separability flags come from a worker job (:mod:`worker.ranks`) queued when a read finds them
missing or older than the board; until it is done the answer says ``computing`` or ``stale``.

On a classification benchmark a metric that takes an estimator has one board per estimator
(:mod:`service.leaderboard`): ``estimator=`` picks one of the benchmark's ``estimators`` or the
metric's own (its ``estimator`` parameter, default ``one_minus_max_prob_bma``, also used when
none is asked).

An answer is the same for every key allowed to read it (a board holds public submissions only;
the baseline row is shown to all, under its display name and with nothing of its
submission), so a rendered answer (JSON or CSV bytes) is cached in Redis
per query, stamped with the state it shows — the benchmark record, the version of its boards,
the board's rank document and whether its rank job is claimed, the baseline's status and
visibility — and served only while that state is current: a ``stale`` answer, for one, until
the rank job stores its document (or its claim lapses, and a read queues it again). A read
authenticates, counts the request against the key's rate limit and finds a current cached
answer in one Redis round trip (:meth:`service.store.Store.leaderboard_cached`); otherwise it
renders the answer from a consistent state (:meth:`service.store.Store.leaderboard_render`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import warnings
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from service import jobs, keys
from service.api.auth import admitted, ensure_admin_key, key_required, run_read
from service.api.deps import TokenDep, get_settings, get_store
from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.schemas import (
    BaselineEntry,
    Leaderboard,
    LeaderboardEntry,
    PlotLink,
    RankStatus,
)
from service.leaderboard import (
    CANONICAL_ESTIMATORS,
    badness,
    board_name,
    own_estimator,
    parse_board,
    result_entries,
)
from service.plots import leaderboard_plots
from service.rest_text import did_you_mean, rest_text
from service.settings import Settings
from service.splits import PRIVATE_BOARD, Part
from service.store import (
    BenchmarkRecord,
    BoardDeps,
    BoardSnapshot,
    RenderedPage,
    Store,
    SubmissionRecord,
)
from uqcore import UQValidationError, registry, skill_from_values

log = logging.getLogger("uqeval.api")

router = APIRouter(tags=["benchmarks"])

#: How long a queued rank job holds its claim (a job lost with its worker is queued again
#: after it; a finished job releases it at once).
RANKS_CLAIM_S = 600.0

#: The baseline row's model name when the admin set none.
DEFAULT_BASELINE_NAME = "baseline"

#: Seconds a rendered answer stays cached (it is served only while the state it shows is
#: current; the expiry bounds the memory of answers nobody reads any more).
PAGE_TTL_S = 120

CSV_COLUMNS = [
    "rank",
    "team_id",
    "team_name",
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
    "skill_vs_baseline",
    "is_baseline",
    "metadata",
]


def _entry(
    bench: BenchmarkRecord,
    row: dict[str, Any],
    ranks: dict[str, Any],
    record: SubmissionRecord | None,
    team_names: dict[str, str],
) -> LeaderboardEntry | None:
    if record is None:
        return None
    shown = row["entry"]
    flags = ranks.get(row["submission"], {})
    return LeaderboardEntry(
        rank=row["rank"],
        team_id=row["team"],
        team_name=team_names.get(row["team"]),
        submission_id=record.id,
        model_name=record.model_name,
        created_at=record.created_at,
        metadata=record.metadata,
        **_values(shown, flags),
        separable_from_baseline=flags.get("separable_from_baseline"),
        p_value_vs_baseline=flags.get("p_value_vs_baseline"),
        is_baseline=record.id == bench.baseline,
    )


def _values(shown: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """The fields a team's row and the baseline row share: the value with its interval, and
    the rank interval and flags of the rank job."""
    return {
        "value": shown["value"],
        "low": shown.get("low"),
        "high": shown.get("high"),
        "std": shown.get("std"),
        "rank_low": flags.get("rank_low"),
        "rank_high": flags.get("rank_high"),
        "p_best": flags.get("p_best"),
        "separable_from_leader": flags.get("separable_from_leader"),
    }


def _baseline(
    store: Store,
    bench: BenchmarkRecord,
    board: str,
    rule: str,
    ranks: dict[str, Any],
    record: SubmissionRecord | None,
) -> BaselineEntry | None:
    """The baseline row (``record``: the baseline submission's), ranked among the teams of
    the board, under the benchmark's display name and with nothing of the submission (the
    baseline may be a team's private submission, and an answer is the same for every
    reader); None when there is no succeeded baseline or it has no value on this board."""
    if record is None or record.status != "succeeded":
        return None
    shown = store.leaderboard_entry(bench.id, board, record.id)
    metric, estimator = parse_board(board)
    if shown is None:  # a private baseline: shown, not ranked
        entry = result_entries(store.get_result(record.id) or {}, bench.task).get(board)
        if entry is None:
            return None
        bad, shown = entry
    else:
        params = dict(bench.params.get(metric) or {})
        if estimator is not None:
            params["estimator"] = estimator
        bad = badness(metric, shown["value"], params, task=bench.task)
    rank = store.leaderboard_rank_of(bench.id, board, rule, bad)
    flags = ranks.get(record.id, {})
    return BaselineEntry(
        rank=rank,
        model_name=bench.baseline_name or DEFAULT_BASELINE_NAME,
        **_values(shown, flags),
    )


def _skill(metric: str, task: str, value: float, baseline_value: float) -> float | None:
    """The skill of ``value`` against the baseline's value (uqcore's rule); None for a metric
    that is not a score, or a baseline that scores 0."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
            return skill_from_values(metric, value, baseline_value, task=task)
    except UQValidationError:
        return None


def _note(note: Any, task: str) -> str | None:
    """The stored note in the API's words (a document stored by an earlier worker may hold
    uqcore's Python wording)."""
    if not isinstance(note, str):
        return None
    return rest_text(note, task=task, origin="leaderboard")


def _rank_status(
    store: Store,
    settings: Settings,
    snapshot: BoardSnapshot,
    metric: str,
    rule: str,
    total: int,
) -> tuple[RankStatus, dict[str, Any]]:
    bench, doc = snapshot.bench, snapshot.ranks
    current = doc is not None and doc.get("version") == snapshot.version
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
        multiple_comparison_note=_note(doc.get("multiple_comparison_note"), bench.task),
    )
    return status, dict(doc.get("entries", {}))


def _board(
    bench: BenchmarkRecord, metric: str | None, estimator: str | None
) -> tuple[str, str, str | None]:
    """(board, metric, estimator shown) of a read; 422 naming the query parameter for a
    metric the benchmark does not show or an estimator it has no board for."""
    name = metric or bench.primary_metric
    if name not in bench.metrics:
        raise ApiError(
            422,
            f"benchmark {bench.id!r} shows metrics {bench.metrics}; found {name!r}."
            + did_you_mean(name, bench.metrics),
            field="metric",
        )
    spec = registry.get(name, bench.task)
    own = own_estimator(spec, bench.params.get(name))
    if estimator is None:
        return name, name, own
    if bench.task != "classification":
        raise ApiError(
            422,
            f"estimator applies to classification benchmarks only; benchmark {bench.id!r} is "
            f"a {bench.task} benchmark",
            field="estimator",
        )
    if own is None:
        raise ApiError(
            422,
            f"metric {name!r} does not take an estimator; leave estimator out",
            field="estimator",
        )
    available = [own, *(e for e in bench.estimators or [] if e != own)]
    if estimator not in available:
        kind = "built-in estimator" if estimator in CANONICAL_ESTIMATORS else "estimator"
        raise ApiError(
            422,
            f"unknown estimator {estimator!r} for metric {name!r} on benchmark {bench.id!r}: "
            f"it has no leaderboard for this {kind}; available: {', '.join(available)}",
            field="estimator",
        )
    return board_name(name, estimator, own), name, estimator


def _deps(
    bench: BenchmarkRecord, metric: str | None, estimator: str | None, part: Part = "public"
) -> BoardDeps:
    """Where an answer to (``metric``, ``estimator``, ``part``) reads besides the record and
    the boards' version (422 as :func:`_board`; 409 for the private board of an open
    benchmark). The record is in the stamp, so closing a benchmark changes every answer."""
    board, _, _ = _board(bench, metric, estimator)
    if part == "private":
        _private_allowed(bench)
        board = PRIVATE_BOARD + board
    return BoardDeps(board=board, rule=bench.rule, baseline=bench.baseline)


def _private_allowed(bench: BenchmarkRecord) -> None:
    if bench.status != "closed":
        raise ApiError(
            409,
            f"benchmark {bench.id!r} is open: its private board is shown once an admin closes "
            'it (PATCH {"status": "closed"})',
            field="part",
            code="benchmark_open",
        )
    if not bench.is_split:
        raise ApiError(
            422,
            f"benchmark {bench.id!r} has no private part (created without private_fraction "
            "or private_mask); ask for part=public",
            field="part",
        )


def _read_private(
    store: Store,
    settings: Settings,
    snapshot: BoardSnapshot,
    metric: str | None,
    estimator: str | None,
    offset: int,
    limit: int,
) -> Leaderboard:
    """The private board: each team's best final on the private rows, with the intervals of
    the sealed private results and the rank job's intervals on the private rows."""
    bench = snapshot.bench
    _private_allowed(bench)
    board, name, shown_estimator = _board(bench, metric, estimator)
    spec = registry.get(name, bench.task)
    every = store.private_board(bench, board)
    rows = every[offset : offset + limit]
    status, ranks = _rank_status(
        store, settings, snapshot, PRIVATE_BOARD + board, bench.rule, len(every)
    )
    ids = [r["submission"] for r in rows]
    records = store.get_submissions(ids)
    names = store.team_names(r["team"] for r in rows)
    entries = [
        e
        for e in (_entry(bench, r, ranks, rec, names) for r, rec in zip(rows, records, strict=True))
        if e is not None
    ]
    baseline = None
    if bench.baseline is not None:
        doc = store.get_private_result(bench.baseline)
        found = result_entries(doc or {}, bench.task).get(board)
        if found is not None:
            bad, shown = found
            baseline = BaselineEntry(
                rank=1 + sum(1 for r in every if r["badness"] < bad),
                model_name=bench.baseline_name or DEFAULT_BASELINE_NAME,
                **_values(shown, ranks.get(bench.baseline, {})),
            )
            for e in entries:
                e.skill_vs_baseline = _skill(name, bench.task, e.value, baseline.value)
    return Leaderboard(
        benchmark_id=bench.id,
        metric=name,
        estimator=shown_estimator,
        direction=spec.direction,
        bounds=list(spec.bounds),
        rule=bench.rule,
        part="private",
        total=len(every),
        offset=offset,
        limit=limit,
        entries=entries,
        baseline=baseline,
        ranks=status,
        plots=[],
    )


def _read(
    store: Store,
    settings: Settings,
    snapshot: BoardSnapshot,
    metric: str | None,
    estimator: str | None,
    offset: int,
    limit: int,
) -> Leaderboard:
    """The leaderboard of ``snapshot``'s benchmark (its record, boards' version and rank
    document read together) under ``metric`` and ``estimator``."""
    bench = snapshot.bench
    board, name, shown_estimator = _board(bench, metric, estimator)
    spec = registry.get(name, bench.task)
    rows, total = store.leaderboard_page(bench.id, board, bench.rule, offset, limit)
    status, ranks = _rank_status(store, settings, snapshot, board, bench.rule, total)
    # The page's submissions and the baseline's in one round trip; their teams' names in
    # another (teams are never renamed, so a cached answer's names stay right).
    ids = [r["submission"] for r in rows]
    records = store.get_submissions(ids if bench.baseline is None else [*ids, bench.baseline])
    base_record = records.pop() if bench.baseline is not None else None
    names = store.team_names(r["team"] for r in rows)
    entries = [
        e
        for e in (_entry(bench, r, ranks, rec, names) for r, rec in zip(rows, records, strict=True))
        if e is not None
    ]
    baseline = _baseline(store, bench, board, bench.rule, ranks, base_record)
    if baseline is not None:
        for e in entries:
            e.skill_vs_baseline = _skill(name, bench.task, e.value, baseline.value)
    return Leaderboard(
        benchmark_id=bench.id,
        metric=name,
        estimator=shown_estimator,
        direction=spec.direction,
        bounds=list(spec.bounds),
        rule=bench.rule,
        total=total,
        offset=offset,
        limit=limit,
        entries=entries,
        baseline=baseline,
        ranks=status,
        plots=[PlotLink(**p) for p in leaderboard_plots(bench.id, metric, estimator)],
    )


def _csv(board: Leaderboard) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in board.entries:
        d = e.model_dump()
        d["metadata"] = json.dumps(e.metadata, separators=(",", ":"), sort_keys=True)
        writer.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    base = board.baseline
    if base is not None and not any(e.is_baseline for e in board.entries):
        # the baseline row when it is not a ranked entry: its display name and values only
        d = {**base.model_dump(), "metadata": ""}
        writer.writerow(["" if d.get(c) is None else d[c] for c in CSV_COLUMNS])
    return out.getvalue()


Format = Literal["json", "csv"]


def _render(
    store: Store,
    settings: Settings,
    snapshot: BoardSnapshot,
    metric: str | None,
    estimator: str | None,
    offset: int,
    limit: int,
    fmt: Format,
    part: Part = "public",
) -> RenderedPage:
    """The answer's bytes: JSON encoded as ``JSONResponse`` does, or the CSV export with its
    Content-Disposition."""
    read = _read_private if part == "private" else _read
    board = read(store, settings, snapshot, metric, estimator, offset, limit)
    if fmt == "csv":
        suffix = f"-{board.estimator}" if estimator is not None else ""
        suffix += "-private" if part == "private" else ""
        filename = f"{board.benchmark_id}-{board.metric}{suffix}.csv"
        disposition = f'attachment; filename="{filename}"'
        return RenderedPage(_csv(board).encode(), disposition)
    body = json.dumps(
        board.model_dump(mode="json"),
        ensure_ascii=False,
        allow_nan=False,
        indent=None,
        separators=(",", ":"),
    ).encode()
    return RenderedPage(body)


def page_key(
    bench_id: str,
    metric: str | None,
    estimator: str | None,
    offset: int,
    limit: int,
    fmt: Format,
    part: Part = "public",
) -> str:
    """The Redis key of the cached answer to one query (the query as asked: ``metric`` None
    and the primary metric named are two answers, whose CSV file names differ)."""
    query = json.dumps([metric, estimator, offset, limit, fmt, *([part] * (part != "public"))])
    return keys.leaderboard_page_cache(
        bench_id, hashlib.blake2b(query.encode(), digest_size=16).hexdigest()
    )


def serve(
    request: Request,
    token: str | None,
    bench_id: str,
    metric: str | None,
    estimator: str | None,
    offset: int,
    limit: int,
    fmt: Format,
    part: Part = "public",
) -> RenderedPage:
    """The route's work, in one trip through the thread pool: authentication, rate count and
    a current cached answer in one Redis round trip; else the answer rendered (and cached)."""
    store, settings = get_store(request), get_settings(request)
    if token is None:
        raise key_required()
    ensure_admin_key(request, store)
    page = page_key(bench_id, metric, estimator, offset, limit, fmt, part)
    found = store.leaderboard_cached(
        token,
        page,
        bench_id,
        rate_limit=settings.rate_limit,
        window_s=settings.rate_limit_window_s,
    )
    admitted(settings, found.key, found.retry_after_s)
    if found.body is not None:
        return RenderedPage(found.body, found.disposition)
    rendered = store.leaderboard_render(
        bench_id,
        page,
        lambda bench: _deps(bench, metric, estimator, part),
        lambda snapshot: _render(
            store, settings, snapshot, metric, estimator, offset, limit, fmt, part
        ),
        PAGE_TTL_S,
    )
    if rendered is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    return rendered


@router.get(
    "/v1/benchmarks/{bench_id}/leaderboard",
    operation_id="getLeaderboard",
    summary="A benchmark's leaderboard under one metric",
    response_model=Leaderboard,
    responses={
        **errors(401, 404, 409, 422, 503),
        200: {
            "description": "The leaderboard (JSON), or its page as CSV with format=csv.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
    },
)
async def get_leaderboard(
    request: Request,
    bench_id: Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")],
    token: TokenDep,
    metric: Annotated[
        str | None,
        Query(max_length=100, description="One of the benchmark's metrics (default: primary)."),
    ] = None,
    estimator: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=100,
            description="Classification benchmarks, metrics that take an estimator: one of "
            "the benchmark's estimators, or the metric's own (default).",
        ),
    ] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    format: Annotated[
        Literal["json", "csv"], Query(description="json, or csv for an export of the page.")
    ] = "json",
    part: Annotated[
        Literal["public", "private"],
        Query(
            description="public (default): the public rows; private: a closed benchmark's "
            "finals ranked on its private rows (409 benchmark_open while it is open)."
        ),
    ] = "public",
) -> Response:
    """One submission per team (best or latest by the benchmark's rule) among the succeeded
    public submissions, best first in the metric's direction, with the value and its
    bootstrap interval, the rank interval from the bootstrap rank distribution, and whether
    each entry is separable from the leader and from the baseline (the baseline row is
    marked). Tied teams share a rank. ``ranks.status`` says whether the rank intervals are
    current for the board. On a classification benchmark, ``estimator`` picks the board of a
    metric under one of the benchmark's estimators (default: the metric's own)."""
    # An async route with one trip through the thread pool: the key is read by an async
    # dependency and checked with the read (plain dependencies would each take a trip).
    page = await run_read(
        request, serve, request, token, bench_id, metric, estimator, offset, limit, format, part
    )
    if format == "csv":
        return Response(
            page.body, media_type="text/csv", headers={"Content-Disposition": page.disposition}
        )
    return Response(page.body, media_type="application/json")
