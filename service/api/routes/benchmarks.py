"""Benchmarks: hidden targets registered by an admin; every key reads their metadata.

The targets (``y``, ``groups``) go in once, at creation, and never come back out: no route,
result, error or export carries them. Submissions name a benchmark with ``benchmark_id``
(``POST /v1/submissions``).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from service.api.auth import AdminDep, KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.payload import (
    BodyFormat,
    content_encoding,
    decode_benchmark,
    media_type,
    read_limited,
)
from service.api.routes.common import errors
from service.api.schemas import (
    BenchmarkInfo,
    BenchmarkList,
    BenchmarkUpdate,
    QuotaOptions,
)
from service.kinds import REGRESSION_KINDS
from service.settings import Settings
from service.store import BenchmarkRecord, Store, now_iso
from uqcore import UQValidationError, registry

router = APIRouter(tags=["benchmarks"])

_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A `BenchmarkCreate` JSON document, or (large targets) an NPZ archive "
        "(`application/x-npz` or `application/octet-stream`) with members `y`, optionally "
        "`groups` (integers), and `request`: a 0-d string array holding the JSON of a "
        "`BenchmarkRequest`. Either may be gzip-encoded; the body size limits apply.",
        # Only the JSON form is declared: openapi-python-client (0.21+) generates a client
        # that does not import for a second content type on a route without optional
        # parameters; the NPZ form is documented in the description above.
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/BenchmarkCreate"}},
        },
    }
}

BenchId = Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")]


def info(record: BenchmarkRecord) -> BenchmarkInfo:
    return BenchmarkInfo(
        id=record.id,
        name=record.name,
        task=record.task,
        description=record.description,
        primary_metric=record.primary_metric,
        metrics=record.metrics,
        rule=record.rule,
        kinds=record.kinds,
        n=record.n,
        has_groups=record.has_groups,
        params=record.params,
        bootstrap=record.bootstrap,
        seed=record.seed,
        quota=QuotaOptions(per_day=record.quota_per_day, total=record.quota_total),
        baseline_id=record.baseline,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _metrics(primary: str, shown: list[str] | None) -> list[str]:
    """The metrics computed for every submission: ``shown`` with the primary one first."""
    names = [primary, *(m for m in (shown or []) if m != primary)]
    for i, name in enumerate(names):
        try:
            spec = registry.get(name)
        except UQValidationError as exc:
            field = "primary_metric" if i == 0 else "metrics"
            index = None if i == 0 else (shown or []).index(name)
            raise ApiError(422, str(exc), field=field, index=index, code="unknown_metric") from None
        if spec.task != "regression":
            raise ApiError(
                422,
                f"metric {name!r} is a {spec.task} metric; this benchmark's task is regression",
                field="primary_metric" if i == 0 else "metrics",
            )
    return names


def _params(params: dict[str, dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    for name, p in params.items():
        where = f"params.{name}"
        if name not in names:
            raise ApiError(
                422, f"parameters are given for metric {name!r}, which is not shown", field=where
            )
        try:
            registry.get(name).resolve_params(p)
        except UQValidationError as exc:
            raise ApiError(422, str(exc), field=where, code="unknown_parameter") from None
    return params


def _baseline(store: Store, bench_id: str, sub_id: str) -> str:
    record = store.get_submission(sub_id)
    if record is None or record.benchmark != bench_id:
        raise ApiError(
            422,
            f"baseline {sub_id!r} is not a submission on benchmark {bench_id!r}",
            field="baseline_id",
        )
    if record.status != "succeeded":
        raise ApiError(
            422,
            f"baseline {sub_id!r} has status {record.status}; a baseline must have succeeded",
            field="baseline_id",
        )
    return sub_id


def _create(store: Store, settings: Settings, fmt: BodyFormat, raw: bytes) -> BenchmarkRecord:
    body, y, groups = decode_benchmark(fmt, raw, max_bytes=settings.max_body_bytes)
    if y.shape[0] > settings.max_points:
        raise ApiError(
            422,
            f"y has N = {y.shape[0]} targets; at most {settings.max_points} are accepted",
            field="y",
            code="too_many_points",
        )
    names = _metrics(body.primary_metric, body.metrics)
    params = _params(body.params, names)
    arrays: dict[str, np.ndarray[Any, Any]] = {"y": y}
    if groups is not None:
        if groups.shape[0] != y.shape[0]:
            raise ApiError(
                422,
                f"groups must have the same length as y ({y.shape[0]}), found {groups.shape[0]}",
                field="groups",
            )
        arrays["groups"] = groups
    elif body.bootstrap.unit == "cluster":
        raise ApiError(
            422, "bootstrap.unit 'cluster' needs groups", field="bootstrap.unit", code="invalid"
        )
    now = now_iso()
    record = BenchmarkRecord(
        id="bench_" + secrets.token_hex(8),
        name=body.name,
        task=body.task,
        description=body.description,
        primary_metric=names[0],
        metrics=names,
        rule=body.rule,
        kinds=list(body.kinds) if body.kinds is not None else list(REGRESSION_KINDS),
        n=int(y.shape[0]),
        has_groups=groups is not None,
        params=params,
        bootstrap=body.bootstrap.model_dump(),
        seed=body.seed,
        quota_per_day=body.quota.per_day,
        quota_total=body.quota.total,
        baseline=None,
        created_at=now,
        updated_at=now,
    )
    return store.create_benchmark(record, arrays)


@router.post(
    "/v1/benchmarks",
    operation_id="createBenchmark",
    summary="Create a benchmark with hidden targets",
    status_code=201,
    response_model=BenchmarkInfo,
    responses=errors(400, 401, 403, 413, 415, 422, 503),
    openapi_extra=_REQUEST_BODY,
)
async def create_benchmark(
    request: Request, admin: AdminDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """Register hidden targets (and optional groups) with the metrics, ranking rule and
    quota of its leaderboards. The targets are never readable again through the API."""
    fmt = media_type(request.headers.get("content-type"))
    limit = settings.max_json_body_bytes if fmt == "json" else settings.max_body_bytes
    raw = await read_limited(
        request.stream(),
        content_length=request.headers.get("content-length"),
        limit=limit,
        gzip=content_encoding(request.headers.get("content-encoding")),
    )
    record = await run_in_threadpool(_create, store, settings, fmt, raw)
    return JSONResponse(info(record).model_dump(mode="json"), status_code=201)


@router.get(
    "/v1/benchmarks",
    operation_id="listBenchmarks",
    summary="List benchmarks",
    response_model=BenchmarkList,
    responses=errors(401, 503),
)
def list_benchmarks(key: KeyDep, store: StoreDep) -> BenchmarkList:
    """Every benchmark's metadata, oldest first (never the targets)."""
    return BenchmarkList(benchmarks=[info(b) for b in store.list_benchmarks()])


def _get(store: Store, bench_id: str) -> BenchmarkRecord:
    record = store.get_benchmark(bench_id)
    if record is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    return record


@router.get(
    "/v1/benchmarks/{bench_id}",
    operation_id="getBenchmark",
    summary="A benchmark's metadata",
    response_model=BenchmarkInfo,
    responses=errors(401, 404, 422, 503),
)
def get_benchmark(bench_id: BenchId, key: KeyDep, store: StoreDep) -> BenchmarkInfo:
    """The benchmark's metadata: N, kinds, metrics, rule, quota, baseline (never the targets)."""
    return info(_get(store, bench_id))


@router.patch(
    "/v1/benchmarks/{bench_id}",
    operation_id="updateBenchmark",
    summary="Change a benchmark's metadata",
    response_model=BenchmarkInfo,
    responses=errors(401, 403, 404, 422, 503),
)
def update_benchmark(
    bench_id: BenchId, body: BenchmarkUpdate, admin: AdminDep, store: StoreDep
) -> BenchmarkInfo:
    """Change the name, description, metrics shown, primary metric, rule, quota or baseline.
    Newly shown metrics are computed for submissions made from then on."""
    current = _get(store, bench_id)
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    for name in ("name", "description", "rule"):
        if name in given and getattr(body, name) is not None:
            changes[name] = getattr(body, name)
    if "primary_metric" in given or "metrics" in given:
        primary = body.primary_metric or current.primary_metric
        shown = body.metrics if body.metrics is not None else current.metrics
        changes["metrics"] = _metrics(primary, shown)
        changes["primary_metric"] = primary
        _params(current.params, changes["metrics"])
    if "quota" in given:
        quota = body.quota or QuotaOptions()
        changes["quota_per_day"] = quota.per_day
        changes["quota_total"] = quota.total
    if "baseline_id" in given:
        changes["baseline"] = (
            None if body.baseline_id is None else _baseline(store, bench_id, body.baseline_id)
        )
    updated = store.update_benchmark(bench_id, changes)
    if updated is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    return info(updated)


@router.delete(
    "/v1/benchmarks/{bench_id}",
    operation_id="deleteBenchmark",
    summary="Delete a benchmark and its targets",
    status_code=204,
    response_class=Response,
    responses=errors(401, 403, 404, 422, 503),
)
def delete_benchmark(bench_id: BenchId, admin: AdminDep, store: StoreDep) -> Response:
    """Remove the benchmark, its targets and its quota counters; its submissions stay (a
    queued one then fails with the reason)."""
    if not store.delete_benchmark(bench_id):
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    return Response(status_code=204)
