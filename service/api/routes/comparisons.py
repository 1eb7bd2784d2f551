"""Comparisons: POST /v1/comparisons queues a paired-bootstrap comparison of submissions on one
benchmark; GET /v1/comparisons/{cmp_id} reads it. A comparison is its team's (admins read
every one); the submissions compared must be readable by the caller (its team's or public).

The benchmark's targets are hidden, and a comparison is computed on them: with a seed, B and
level of the requester's choosing, repeated comparisons of the same submissions would each
reveal new bootstrap order statistics — known weighted sums of per-row errors — without
bound. So only admins choose them; every other key's comparison uses the benchmark's
(:func:`fixed_parameters`), and one set of submissions always gives the same numbers
(docs/hidden-targets.md)."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from service import jobs
from service.api import access
from service.api.callbacks import check_callback
from service.api.deps import KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors, links
from service.api.schemas import ComparisonAccepted, ComparisonCreate, ComparisonDetail, PlotLink
from service.leaderboard import own_estimator
from service.plots import comparison_plots
from service.rest_text import did_you_mean
from service.settings import Settings
from service.store import ApiKeyRecord, BenchmarkRecord, Store, now_iso
from uqcore import registry

router = APIRouter(tags=["comparisons"])


#: B of a comparison for non-admin keys on a benchmark whose own bootstrap is off (B = 0).
DEFAULT_COMPARISON_RESAMPLES = 1000


def fixed_parameters(bench: BenchmarkRecord) -> dict[str, Any]:
    """The bootstrap of a non-admin comparison on ``bench``: its seed, and its bootstrap's
    B (:data:`DEFAULT_COMPARISON_RESAMPLES` when the benchmark's is below 10), level and
    method."""
    boot = bench.bootstrap
    n_resamples = int(boot.get("n_resamples", 0) or 0)
    return {
        "n_resamples": n_resamples if n_resamples >= 10 else DEFAULT_COMPARISON_RESAMPLES,
        "seed": bench.seed,
        "level": float(boot.get("level", 0.95)),
        "method": str(boot.get("method", "percentile")),
    }


def _parameters(
    bench: BenchmarkRecord, key: ApiKeyRecord, body: ComparisonCreate
) -> dict[str, Any]:
    """B, seed, level and method of the comparison: each one not given is the benchmark's
    (:func:`fixed_parameters`); an admin may give others, any other key only the
    benchmark's own — another value is a 422 naming the field (never silently replaced)."""
    fixed = fixed_parameters(bench)
    out = dict(fixed)
    for name in ("n_resamples", "seed", "level", "method"):
        given = getattr(body, name)
        if given is None:
            continue
        if key.role != "admin" and given != fixed[name]:
            raise ApiError(
                422,
                f"{name} is fixed to {fixed[name]!r} on benchmark {bench.id!r} (its targets "
                f"are hidden: only admins choose a comparison's bootstrap); found {given!r}. "
                "Leave it out.",
                field=name,
            )
        out[name] = given
    return out


def _request(store: Store, key: ApiKeyRecord, body: ComparisonCreate) -> dict[str, Any]:
    bench = store.get_benchmark(body.benchmark_id)
    if bench is None:
        raise ApiError(404, f"no benchmark {body.benchmark_id!r}", field="benchmark_id")
    parameters = _parameters(bench, key, body)
    for i, sub_id in enumerate(body.submission_ids):
        record = store.get_submission(sub_id)
        if record is None or not access.can_read(key, record):
            raise ApiError(404, f"no submission {sub_id!r}", field="submission_ids", index=i)
        if record.benchmark != bench.id:
            raise ApiError(
                422,
                f"submission {sub_id!r} is not on benchmark {bench.id!r}",
                field="submission_ids",
                index=i,
            )
        if record.status != "succeeded":
            raise ApiError(
                422,
                f"submission {sub_id!r} has status {record.status}; only succeeded "
                "submissions are compared",
                field="submission_ids",
                index=i,
            )
    metrics = body.metrics or [bench.primary_metric]
    for i, m in enumerate(metrics):
        if m not in bench.metrics:
            raise ApiError(
                422,
                f"benchmark {bench.id!r} shows metrics {bench.metrics}; found {m!r}."
                + did_you_mean(m, bench.metrics),
                field="metrics",
                index=i,
            )
    request: dict[str, Any] = {
        "benchmark_id": bench.id,
        "submission_ids": list(body.submission_ids),
        "metrics": metrics,
        **parameters,
    }
    if body.estimators is not None:
        request["estimators"] = _estimators(bench, metrics, body.estimators)
    return request


def _estimators(bench: BenchmarkRecord, metrics: list[str], names: list[str]) -> list[str]:
    """The estimators of a comparison: on a classification benchmark, each one the
    benchmark has leaderboards for (its estimators, or the own estimator of a compared metric
    that takes one); 422 naming the index otherwise."""
    if bench.task != "classification":
        raise ApiError(
            422,
            f"estimators apply to classification benchmarks only; benchmark {bench.id!r} is a "
            f"{bench.task} benchmark",
            field="estimators",
        )
    owns = [own_estimator(registry.get(m, bench.task), bench.params.get(m)) for m in metrics]
    if all(o is None for o in owns):
        raise ApiError(
            422,
            f"none of the metrics {metrics} takes an estimator; leave estimators out",
            field="estimators",
        )
    available = list(dict.fromkeys([*(o for o in owns if o), *(bench.estimators or [])]))
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ApiError(422, f"estimator {name!r} is listed twice", field="estimators", index=i)
        if name not in available:
            raise ApiError(
                422,
                f"unknown estimator {name!r} on benchmark {bench.id!r}; available: "
                f"{', '.join(available)}",
                field="estimators",
                index=i,
            )
    return list(names)


def _create(
    store: Store, settings: Settings, key: ApiKeyRecord, body: ComparisonCreate
) -> dict[str, Any]:
    request = _request(store, key, body)
    if body.callback_url is not None:
        check_callback(store, settings, key, body.callback_url)
    return queue_job(store, settings, key, "cmp_", request, callback_url=body.callback_url)


def queue_job(
    store: Store,
    settings: Settings,
    key: ApiKeyRecord,
    prefix: str,
    request: dict[str, Any],
    *,
    callback_url: str | None = None,
) -> dict[str, Any]:
    """Store and queue a job of the comparison worker (a comparison, or a gate) for ``key``:
    its record, with a new id of ``prefix``; raises StoreUnavailable when it cannot be."""
    record = {
        "id": prefix + secrets.token_hex(12),
        "owner": key.key_id,
        "team": key.team,
        "created_at": now_iso(),
        "request": request,
    }
    if callback_url is not None:
        record["callback_url"] = callback_url
    jobs.submit_comparison(store, settings, record)
    return record


@router.post(
    "/v1/comparisons",
    operation_id="createComparison",
    summary="Compare submissions on a benchmark",
    status_code=202,
    response_model=ComparisonAccepted,
    responses={
        **errors(400, 401, 404, 413, 422, 503),
        **links(202, getComparison={"cmp_id": "$response.body#/id"}),
    },
)
async def create_comparison(
    body: ComparisonCreate, request: Request, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """Queue a paired bootstrap comparison of two or more succeeded submissions on one
    benchmark: every pair's difference with its interval, P(better), the p-value and its
    Holm-adjusted value within each metric, and each metric's rank distribution — equal to
    ``uqcore.stability.compare`` / ``rank_distribution`` run with the same seed."""
    record = await run_in_threadpool(_create, store, settings, key, body)
    url = str(request.app.url_path_for("get_comparison", cmp_id=record["id"]))
    accepted = ComparisonAccepted(id=record["id"], status="queued", status_url=url)
    return JSONResponse(accepted.model_dump(), status_code=202, headers={"Location": url})


def may_read(key: ApiKeyRecord, doc: dict[str, Any]) -> bool:
    """Whether ``key`` may read a job of the comparison worker (a comparison or a gate): an
    admin, or its team's keys (a key without a team: the key that created it)."""
    if key.role == "admin":
        return True
    if key.team is not None:
        return bool(doc.get("team") == key.team)
    return bool(doc["owner"] == key.key_id)


def readable_comparison(store: Store, key: ApiKeyRecord, cmp_id: str) -> dict[str, Any]:
    """The comparison ``cmp_id`` if ``key`` may read it (its team's; admins: all); 404 like
    an unknown id otherwise."""
    doc = store.get_comparison(cmp_id)
    if doc is None or doc["request"].get("kind") == "gate" or not may_read(key, doc):
        # a gate reads at /v1/gates
        raise ApiError(404, f"no comparison {cmp_id!r}", field="cmp_id")
    return doc


@router.get(
    "/v1/comparisons/{cmp_id}",
    operation_id="getComparison",
    summary="Status and result of a comparison",
    response_model=ComparisonDetail,
    responses=errors(401, 404, 422, 503),
)
def get_comparison(
    cmp_id: Annotated[str, Path(min_length=1, max_length=100)], key: KeyDep, store: StoreDep
) -> ComparisonDetail:
    """The comparison's status (queued, running, succeeded, failed with the reason) and its
    result once it succeeded. Another team's comparison answers 404."""
    doc = readable_comparison(store, key, cmp_id)
    return ComparisonDetail(
        id=doc["id"],
        status=doc["status"],
        progress=float(doc["progress"]) if "progress" in doc else None,
        created_at=doc["created_at"],
        finished_at=doc.get("finished_at"),
        error=doc.get("error"),
        request=doc["request"],
        result=doc["result"],
        plots=[PlotLink(**p) for p in comparison_plots(doc["id"])]
        if doc["status"] == "succeeded"
        else [],
    )
