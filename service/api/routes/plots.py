"""Plots as PNG or SVG: GET /v1/submissions/{sub_id}/plots/{name},
/v1/comparisons/{cmp_id}/plots/{name} and /v1/benchmarks/{bench_id}/plots/{name}.

The API never draws: on a miss, the first request claims the plot (one claim per plot, so
concurrent misses queue one render) and queues the ``uqeval.render_plot`` task; every request
then awaits the bytes in Redis without holding the event loop (asynchronous sleeps between
reads, at most ``settings.plot_timeout_s``; 503 with Retry-After past it). Rendered plots stay
cached ``settings.plot_cache_ttl_s`` (a submission's are deleted with it).

Who sees a plot is who sees its data: a submission's plots need :func:`access.can_read` (404
otherwise, like an unknown id); on a benchmark, a non-admin reader gets only the plots drawn
from the result document (``stability``, ``estimators``) and the curve plots whose coarse
curves the result holds (a benchmark with ``curves: "coarse"``); the other curve plots come
from the hidden targets at full resolution and are for admins only (404 saying so). A comparison's plots are its team's, a
leaderboard's plot is readable by every key that reads the leaderboard.

Statuses: 404 for an unknown plot name (with the closest names) and for a plot that does not
apply to this submission (with the reason: another task, an input or analysis that it lacks),
409 while the submission or comparison has not succeeded, 422 for a bad query (format,
metric, estimator). Answers carry an ETag (304 for a matching If-None-Match) and
``Cache-Control: private``.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from service import jobs
from service.api import access
from service.api.auth import run_read
from service.api.deps import KeyDep, SettingsDep, StoreDep, TokenDep
from service.api.errors import ApiError
from service.api.routes import leaderboards
from service.api.routes.common import errors
from service.api.routes.comparisons import readable_comparison
from service.kinds import task_of
from service.plots import (
    MEDIA_TYPES,
    benchmark_rule,
    cache_ttl_s,
    plots_key,
    result_field_why_not,
)
from service.rest_text import did_you_mean
from service.settings import Settings
from service.store import ApiKeyRecord, Store
from service.store.plots import ERROR_PREFIX
from uqcore.plots import PLOTS, PlotSpec

router = APIRouter(tags=["plots"])

Format = Literal["png", "svg"]
PlotName = Annotated[str, Path(min_length=1, max_length=100, description="The plot's name.")]
FormatQuery = Annotated[Format, Query(description="png (default) or svg.")]
IfNoneMatch = Annotated[str | None, Header(description="An ETag of an earlier answer.")]

#: Seconds a client is told to wait before asking again for a plot still being drawn.
RETRY_AFTER_S = 2

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The plot: PNG, or SVG with format=svg.",
        "content": {
            "image/png": {"schema": {"type": "string", "format": "binary"}},
            "image/svg+xml": {"schema": {"type": "string"}},
        },
    },
    304: {"description": "Not modified (If-None-Match matches the ETag)."},
}


def _spec(scope: str, name: str) -> PlotSpec:
    """The registered plot ``name`` of ``scope``; 404 with the closest names otherwise."""
    spec = PLOTS.get(name)
    if spec is None or spec.scope != scope:
        names = [n for n, s in PLOTS.items() if s.scope == scope]
        raise ApiError(
            404,
            f"no {scope} plot {name!r}; known: {', '.join(names) or 'none'}."
            + did_you_mean(name, names),
            field="name",
        )
    return spec


def _check_submission(store: Store, key: ApiKeyRecord, sub_id: str, name: str) -> None:
    record = store.get_submission(sub_id)
    if record is None or not access.can_read(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    spec = _spec("submission", name)
    if record.status != "succeeded":
        raise ApiError(
            409,
            f"submission {sub_id!r} has status {record.status}; its plots are drawn once it "
            "succeeded",
            field="sub_id",
        )
    task = task_of(record.kind)
    if spec.task is not None and spec.task != task:
        raise ApiError(
            404, f"plot {name!r} is a {spec.task} plot; this submission is {task}", field="name"
        )
    if record.benchmark is not None and key.role != "admin":
        why = benchmark_rule(spec, store.get_result(sub_id) or {})
        if why is not None:
            raise ApiError(404, why, field="name")
    if not spec.curves:
        why = result_field_why_not(spec, task, store.get_result(sub_id) or {})
        if why is not None:
            raise ApiError(404, why, field="name")


def _check_comparison(store: Store, key: ApiKeyRecord, cmp_id: str, name: str) -> None:
    doc = readable_comparison(store, key, cmp_id)
    _spec("comparison", name)
    if doc["status"] != "succeeded":
        raise ApiError(
            409,
            f"comparison {cmp_id!r} has status {doc['status']}; its plots are drawn once it "
            "succeeded",
            field="cmp_id",
        )


def _etag(data: bytes) -> str:
    return '"' + hashlib.blake2b(data, digest_size=16).hexdigest() + '"'


def _matches(header: str | None, etag: str) -> bool:
    if header is None:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


def _lookup(
    store: Store, settings: Settings, scope: str, ident: str, name: str, fmt: str, digest: str
) -> bytes | None:
    """The stored plot, or None after queueing its render (when no one else has)."""
    target, field = plots_key(scope, ident, digest), f"{name}.{fmt}"
    data = store.get_plot(target, field)
    if data is not None:
        return data
    if store.claim_plot(target, field, settings.plot_timeout_s + 30.0):
        try:
            jobs.enqueue_plot(settings, scope, ident, name, fmt, digest)
        except Exception:
            store.release_plot_claim(target, field)
            raise ApiError(
                503,
                "the plot could not be queued for drawing; retry later",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            ) from None
    return None


async def _image(
    store: Store,
    settings: Settings,
    scope: str,
    ident: str,
    name: str,
    fmt: Format,
    if_none_match: str | None,
    *,
    digest: str = "",
) -> Response:
    """The plot's answer: the cached bytes, or those of a render queued now and awaited."""
    target, field = plots_key(scope, ident, digest), f"{name}.{fmt}"
    data = await run_in_threadpool(_lookup, store, settings, scope, ident, name, fmt, digest)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.plot_timeout_s
    delay = 0.02
    while data is None:
        left = deadline - loop.time()
        if left <= 0:
            raise ApiError(
                503,
                f"plot {name!r} is still being drawn (the workers may be busy); retry in "
                f"{RETRY_AFTER_S} s",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 1.5, 0.25)
        data = await run_in_threadpool(store.get_plot, target, field)
    if data.startswith(ERROR_PREFIX):
        status_text, _, reason = data[len(ERROR_PREFIX) :].decode().partition(":")
        status = int(status_text)
        if status >= 500:  # not kept: the next request draws it again
            await run_in_threadpool(store.drop_plot, target, field)
        raise ApiError(status, reason, field="name" if status == 404 else None)
    etag = _etag(data)
    headers = {"ETag": etag, "Cache-Control": f"private, max-age={settings.plot_max_age_s}"}
    if _matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=MEDIA_TYPES[fmt], headers=headers)


@router.get(
    "/v1/submissions/{sub_id}/plots/{name}",
    operation_id="getSubmissionPlot",
    summary="A plot of a submission's result (PNG or SVG)",
    response_class=Response,
    responses={**_RESPONSES, **errors(401, 404, 409, 422, 503)},
)
async def get_submission_plot(
    sub_id: Annotated[str, Path(min_length=1, max_length=100, description="The submission id.")],
    name: PlotName,
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    format: FormatQuery = "png",
    if_none_match: IfNoneMatch = None,
) -> Response:
    """One of the submission's plots (its result's ``plots`` lists them with their URLs):
    drawn from its curves (its result's, or computed from its stored prediction) or from its
    result's ``stability`` / ``by_estimator``. 404 for an unknown name (with the closest
    names) or a plot that does not apply to this submission (with the reason); 409 until it
    succeeded. On a benchmark, the curve plots are drawn from the result's coarse curves
    (every reader) or, when it holds none, for admins only."""
    await run_in_threadpool(_check_submission, store, key, sub_id, name)
    return await _image(store, settings, "submission", sub_id, name, format, if_none_match)


@router.get(
    "/v1/comparisons/{cmp_id}/plots/{name}",
    operation_id="getComparisonPlot",
    summary="A plot of a comparison (PNG or SVG)",
    response_class=Response,
    responses={**_RESPONSES, **errors(401, 404, 409, 422, 503)},
)
async def get_comparison_plot(
    cmp_id: Annotated[str, Path(min_length=1, max_length=100, description="The comparison id.")],
    name: PlotName,
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    format: FormatQuery = "png",
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The comparison's forest plot (``forest``): every pair's difference A − B per metric
    with its interval, the zero line and the better side. 409 until it succeeded."""
    await run_in_threadpool(_check_comparison, store, key, cmp_id, name)
    return await _image(store, settings, "comparison", cmp_id, name, format, if_none_match)


#: Entries drawn on a leaderboard plot (the first page of the board).
LEADERBOARD_PLOT_LIMIT = 50


@router.get(
    "/v1/benchmarks/{bench_id}/plots/{name}",
    operation_id="getLeaderboardPlot",
    summary="A plot of a benchmark's leaderboard (PNG or SVG)",
    response_class=Response,
    responses={**_RESPONSES, **errors(401, 404, 422, 503)},
)
async def get_leaderboard_plot(
    request: Request,
    bench_id: Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")],
    name: PlotName,
    token: TokenDep,
    store: StoreDep,
    settings: SettingsDep,
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
    format: FormatQuery = "png",
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The leaderboard (``leaderboard``) of GET /v1/benchmarks/{bench_id}/leaderboard with the
    same metric and estimator, first 50 teams: values with their bootstrap intervals, rank
    intervals, entries not separable from the leader marked, the baseline highlighted. Drawn
    from the board as it is now (a new plot when the board changes)."""
    page = await run_read(
        request,
        leaderboards.serve,
        request,
        token,
        bench_id,
        metric,
        estimator,
        0,
        LEADERBOARD_PLOT_LIMIT,
        "json",
    )
    spec = _spec("leaderboard", name)
    digest = hashlib.blake2b(page.body, digest_size=16).hexdigest()
    target = plots_key("leaderboard", bench_id, digest)
    await run_in_threadpool(
        store.put_plot_source, target, page.body, cache_ttl_s(settings, "leaderboard")
    )
    return await _image(
        store, settings, "leaderboard", bench_id, spec.name, format, if_none_match, digest=digest
    )
