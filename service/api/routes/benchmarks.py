"""Benchmarks: hidden targets registered by an admin; every key reads their metadata.

The targets go in once, at creation, and never come back out: no route, result, error or export
carries them. A regression benchmark holds ``y``; a classification benchmark holds ``labels``
(N class indices) and optionally ``soft_labels`` (N×C label distributions) and ``ood`` (N
flags), all equally hidden; either may hold ``groups``. Submissions name a benchmark with
``benchmark_id`` (``POST /v1/submissions``); their N, kind, and for classification their
number of classes (every label must be a class of the prediction) are checked before the 202.

A classification benchmark may name ``estimators``: besides each metric's own leaderboard
(the metric under its ``estimator`` parameter, default ``one_minus_max_prob_bma``), every
metric that takes an estimator gets a leaderboard ``metric[estimator]`` per named estimator. A
name is a built-in aggregator of uqcore or the name of an estimate that submissions carry
(``prediction.estimates`` in JSON, ``estimate:<name>`` in NPZ); a submission whose prediction
does not provide it is not ranked on that estimator's boards.
"""

from __future__ import annotations

import pathlib
import secrets
from typing import IO, Annotated, Any

import numpy as np
from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from service.api.deps import AdminDep, KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError, uq_location
from service.api.payload import (
    BodyFormat,
    content_encoding,
    decode_benchmark,
    media_type,
    read_limited,
)
from service.api.routes.common import errors, links
from service.api.schemas import (
    BenchmarkInfo,
    BenchmarkList,
    BenchmarkRequest,
    BenchmarkUpdate,
    QuotaOptions,
)
from service.api.spool import Spool, release, row_blocks, spool_body
from service.api.upload_blobs import stored_arrays
from service.api.validation import check_params, convert_blockwise
from service.kinds import CLASSIFICATION_KINDS, KIND_FIELDS, REGRESSION_KINDS, task_of
from service.leaderboard import CANONICAL_ESTIMATORS, ESTIMATOR_PARAMS
from service.memory import estimate_benchmark, job_memory_budget, over_budget
from service.settings import Settings
from service.splits import MASK, draw_mask
from service.store import BenchmarkRecord, Store, now_iso
from uqcore import UQValidationError, registry
from uqcore.predictions.classification import validate_labels, validate_ood, validate_soft_labels

router = APIRouter(tags=["benchmarks"])

_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A `BenchmarkCreate` JSON document, or (large targets) an NPZ archive "
        "(`application/x-npz` or `application/octet-stream`) with members `y` (regression) or "
        "`labels` (classification: N integers) with optionally `soft_labels` (N×C) and `ood` "
        "(N booleans or 0/1), optionally `groups` (integers), and `request`: a 0-d string "
        "array holding the JSON of a `BenchmarkRequest`. Either may be gzip-encoded; the body "
        "size limits apply.",
        # Only the JSON form is declared: openapi-python-client (0.21+) generates a client
        # that does not import for a second content type on a route without optional
        # parameters; the NPZ form is documented in the description above.
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/BenchmarkCreate"}},
        },
    }
}

#: The created benchmark's id, for the OpenAPI links of its answer.
_BENCH_ID = {"bench_id": "$response.body#/id"}
BenchId = Annotated[str, Path(min_length=1, max_length=100, description="The benchmark id.")]

#: What each task's benchmark holds: its targets and the arrays it may add.
TASK_ARRAYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "regression": ("y", ("groups",)),
    "classification": ("labels", ("soft_labels", "ood", "groups")),
}
#: The optional classification targets, as MetricSpec.needs names them, with their field.
_TARGET_NEEDS = {"ood": "ood", "soft_labels": "soft_labels"}


def info(record: BenchmarkRecord, *, admin: bool) -> BenchmarkInfo:
    """The metadata of ``record`` as ``admin`` or another reader sees it: the baseline's
    submission id is an admin's only (the baseline may be a private submission of a team)."""
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
        baseline_id=record.baseline if admin else None,
        baseline_name=record.baseline_name,
        curves=record.curves,
        created_at=record.created_at,
        updated_at=record.updated_at,
        n_classes=record.n_classes,
        has_soft_labels=record.has_soft_labels,
        has_ood=record.has_ood,
        estimators=record.estimators,
        public_board=record.public_board,
        status=record.status,
        closed_at=record.closed_at,
        max_final=record.max_final,
        private_fraction=record.private_fraction,
        n_public=record.n if record.n_public is None else record.n_public,
    )


def _metrics(
    primary: str,
    shown: list[str] | None,
    task: str,
    targets: frozenset[str] = frozenset(),
    where: str = "",
) -> list[str]:
    """The metrics computed for every submission: ``shown`` with the primary one first, each
    a metric of ``task`` whose optional targets (OOD flags, soft labels) the benchmark holds.
    ``where`` prefixes the field names of errors (``request.`` in an NPZ upload)."""
    names = [primary, *(m for m in (shown or []) if m != primary)]
    for i, name in enumerate(names):
        field = where + ("primary_metric" if i == 0 else "metrics")
        index = None if i == 0 else (shown or []).index(name)
        try:
            spec = registry.get(name, task)
        except UQValidationError as exc:
            raise ApiError(422, str(exc), field=field, index=index, code="unknown_metric") from None
        if spec.task != task:
            raise ApiError(
                422,
                f"metric {name!r} is a {spec.task} metric; this benchmark's task is {task}",
                field=field,
                index=index,
            )
        absent = sorted(spec.needs & set(_TARGET_NEEDS) - targets)
        if absent:
            raise ApiError(
                422,
                f"metric {name!r} needs {absent[0]}, which this benchmark does not hold "
                f"(give {_TARGET_NEEDS[absent[0]]} with the labels)",
                field=field,
                index=index,
            )
    return names


def _estimators(task: str, names: list[str] | None, field: str = "estimators") -> list[str] | None:
    """The benchmark's extra estimators (classification only; distinct names)."""
    if names is None:
        return None
    if task != "classification":
        raise ApiError(422, "estimators apply to classification benchmarks only", field=field)
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ApiError(422, f"estimator {name!r} is listed twice", field=field, index=i)
    return list(names)


def _params(
    params: dict[str, dict[str, Any]],
    names: list[str],
    task: str,
    estimators: list[str] | None = None,
    prefix: str = "",
    n: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The per-metric parameters (checked as uqcore checks them, per-row ones against the
    benchmark's ``n`` rows); for classification an estimator-valued parameter names a
    built-in aggregator or one of the benchmark's estimators."""
    known = [*CANONICAL_ESTIMATORS, *(e for e in estimators or [] if e not in CANONICAL_ESTIMATORS)]
    for name, p in params.items():
        where = f"{prefix}params.{name}"
        if name not in names:
            raise ApiError(
                422, f"parameters are given for metric {name!r}, which is not shown", field=where
            )
        spec = registry.get(name, task)
        check_params(spec, p, where, n)
        for key in ESTIMATOR_PARAMS if task == "classification" else ():
            if key in p and key in spec.defaults and p[key] not in known:
                raise ApiError(
                    422,
                    f"parameter {key!r} of metric {name!r} must name a built-in estimator or "
                    f"one of the benchmark's estimators ({', '.join(known)}); found {p[key]!r}",
                    field=f"{where}.{key}",
                )
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


def _kinds(body: BenchmarkRequest, where: str) -> list[str]:
    """The kinds accepted: those given (all of the task) or every kind of the task."""
    task_kinds = CLASSIFICATION_KINDS if body.task == "classification" else REGRESSION_KINDS
    if body.kinds is None:
        return [k for k in KIND_FIELDS if k in task_kinds]
    for i, kind in enumerate(body.kinds):
        if task_of(kind) != body.task:
            raise ApiError(
                422,
                f"kind {kind!r} is a {task_of(kind)} kind; this benchmark's task is {body.task}",
                field=f"{where}kinds",
                index=i,
            )
    return list(body.kinds)


def _classification_targets(
    body: BenchmarkRequest, arrays: dict[str, np.ndarray[Any, Any]], spool: Spool | None = None
) -> dict[str, Any]:
    """Check the labels, soft labels and OOD flags (uqcore's rules) and return the class
    metadata of the record: n_classes, label_max, has_soft_labels, has_ood."""
    labels = arrays["labels"]
    n = int(labels.shape[0]) if labels.ndim == 1 else 0
    soft = arrays.get("soft_labels")
    c = body.n_classes
    if c is None and soft is not None and soft.ndim == 2:
        c = int(soft.shape[1])
    try:
        if labels.ndim != 1 or n == 0:
            raise UQValidationError(
                f"labels must be a non-empty vector of class indices; found shape "
                f"{tuple(labels.shape)}",
                argument="labels",
            )
        # Without a declared C any non-negative integer is a class; C is checked per submission.
        top = c if c is not None else np.iinfo(np.int64).max
        checked = convert_blockwise(labels, n, lambda a, m: validate_labels(a, m, top), spool)
        if soft is not None:
            width = int(c or 0)
            rows = n if soft.shape == (n, width) else 0  # else uqcore names the shapes
            arrays["soft_labels"] = convert_blockwise(
                soft,
                rows or n,
                lambda a, m: validate_soft_labels(a, m, width),
                spool if rows else None,
            )
        if "ood" in arrays:
            ood = arrays["ood"]
            rows = n if ood.shape == (n,) else 0
            arrays["ood"] = convert_blockwise(
                ood, n, lambda a, m: validate_ood(a, m), spool if rows else None
            )
    except UQValidationError as exc:
        message = str(exc)
        field, index = uq_location(exc, {t: t for t in ("labels", "soft_labels", "ood")})
        if field == "labels" and body.n_classes is None and soft is not None:
            message += " (C is the width of soft_labels)"
        raise ApiError(422, message, field=field, index=index) from None
    arrays["labels"] = checked
    return {
        "n_classes": c,
        "label_max": _max(checked),
        "has_soft_labels": soft is not None,
        "has_ood": "ood" in arrays,
    }


def _max(a: np.ndarray[Any, Any]) -> int:
    """The largest entry, read block by block (a memory-mapped array's pages given back)."""
    top = None
    for start, stop in row_blocks(a.shape[0]):
        m = int(a[start:stop].max())
        top = m if top is None else max(top, m)
        release(a)
    assert top is not None
    return top


def _private_mask(
    body: BenchmarkRequest, given: np.ndarray[Any, Any] | None, n: int, where: str
) -> np.ndarray[Any, Any] | None:
    """The mask of the private rows (None: no split): the given ``private_mask`` (N
    booleans) or one drawn for ``private_fraction``; each part needs at least one row."""
    if given is not None and body.private_fraction > 0:
        raise ApiError(
            422,
            f"give private_fraction ({body.private_fraction}) or private_mask, not both",
            field=MASK,
        )
    if given is not None:
        if given.dtype != np.bool_ or given.ndim != 1:
            raise ApiError(
                422,
                f"private_mask must be a vector of booleans (true = private row); found dtype "
                f"{given.dtype}, shape {tuple(given.shape)}",
                field=MASK,
            )
        if given.shape[0] != n:
            raise ApiError(
                422,
                f"private_mask must have one flag per row ({n}), found {given.shape[0]}",
                field=MASK,
            )
        mask = np.array(given, dtype=bool)
        field = MASK
    elif body.private_fraction > 0:
        mask = draw_mask(n, body.private_fraction)
        field = f"{where}private_fraction"
    else:
        return None
    n_private = int(mask.sum())
    if n_private == 0 or n_private == n:
        part = "private" if n_private == 0 else "public"
        raise ApiError(
            422,
            f"the {part} part would be empty ({n_private} private rows of {n}); each part "
            "needs at least one row",
            field=field,
        )
    return mask


def create_from(
    store: Store,
    settings: Settings,
    fmt: BodyFormat,
    raw: bytes | pathlib.Path | IO[bytes],
    spool: Spool | None = None,
    max_bytes: int | None = None,
) -> BenchmarkRecord:
    """Validate and store a benchmark body: JSON bytes, or an NPZ archive (bytes, a spooled
    file or a seekable file object, whose large members are memory-mapped from files of
    ``spool``)."""
    limit = settings.max_body_bytes if max_bytes is None else max_bytes
    body, arrays = decode_benchmark(fmt, raw, max_bytes=limit, spool=spool)
    where = "request." if fmt == "npz" else ""
    given_mask = arrays.pop(MASK, None)
    task = body.task
    target, optional = TASK_ARRAYS[task]
    if target not in arrays:
        raise ApiError(422, f"a {task} benchmark needs its targets {target!r}", field=target)
    for name in arrays:
        if name != target and name not in optional:
            raise ApiError(
                422,
                f"{name} cannot be given to a {task} benchmark; it holds {target!r}"
                + (f" and optionally {', '.join(map(repr, optional))}" if optional else ""),
                field=name,
            )
    n = int(arrays[target].shape[0]) if arrays[target].ndim >= 1 else 0
    if n > settings.max_points:
        raise ApiError(
            422,
            f"{target} has N = {n} targets; at most {settings.max_points} are accepted",
            field=target,
            code="too_many_points",
        )
    soft = arrays.get("soft_labels")
    if soft is not None and soft.size > settings.max_elements:
        raise ApiError(
            422,
            f"soft_labels holds {soft.size} values; at most {settings.max_elements} are accepted",
            field="soft_labels",
            code="too_many_points",
        )
    if task == "regression" and body.n_classes is not None:
        raise ApiError(
            422, "n_classes applies to classification benchmarks only", field=f"{where}n_classes"
        )
    kinds = _kinds(body, where)
    classes = _classification_targets(body, arrays, spool) if task == "classification" else {}
    estimators = _estimators(task, body.estimators, f"{where}estimators")
    held = frozenset(t for t in ("ood", "soft_labels") if t in arrays)
    names = _metrics(body.primary_metric, body.metrics, task, held, where)
    params = _params(body.params, names, task, estimators, where, n)
    groups = arrays.get("groups")
    if groups is not None:
        if groups.shape[0] != n:
            raise ApiError(
                422,
                f"groups must have the same length as {target} ({n}), found {groups.shape[0]}",
                field="groups",
            )
    elif body.bootstrap.unit == "cluster":
        raise ApiError(
            422,
            "bootstrap.unit 'cluster' needs groups",
            field=f"{where}bootstrap.unit",
            code="invalid",
        )
    mask = _private_mask(body, given_mask, n, where)
    if mask is not None:
        arrays[MASK] = mask
    now = now_iso()
    record = BenchmarkRecord(
        id="bench_" + secrets.token_hex(8),
        name=body.name,
        task=task,
        description=body.description,
        primary_metric=names[0],
        metrics=names,
        rule=body.rule,
        kinds=kinds,
        n=n,
        has_groups=groups is not None,
        params=params,
        bootstrap=body.bootstrap.model_dump(),
        seed=body.seed,
        quota_per_day=body.quota.per_day,
        quota_total=body.quota.total,
        baseline=None,
        created_at=now,
        updated_at=now,
        estimators=estimators,
        public_board=body.public_board,
        curves=body.curves,
        baseline_name=body.baseline_name,
        n_public=None if mask is None else n - int(mask.sum()),
        max_final=body.max_final,
        **classes,
    )
    refused = over_budget(estimate_benchmark(record), job_memory_budget(settings))
    if refused is not None:
        raise ApiError(
            422,
            f"even with the narrowest prediction, {refused}",
            field=f"{where}bootstrap",
            code="over_memory_budget",
        )
    if spool is not None:
        arrays = stored_arrays(arrays, spool)
    return store.create_benchmark(record, arrays)


@router.post(
    "/v1/benchmarks",
    operation_id="createBenchmark",
    summary="Create a benchmark with hidden targets",
    status_code=201,
    response_model=BenchmarkInfo,
    responses={
        **errors(400, 401, 403, 413, 415, 422, 503, 507),
        **links(
            201,
            getBenchmark=_BENCH_ID,
            getLeaderboard=_BENCH_ID,
            updateBenchmark=_BENCH_ID,
            createShareLink=_BENCH_ID,
            listShareLinks=_BENCH_ID,
            deleteBenchmark=_BENCH_ID,
        ),
    },
    openapi_extra=_REQUEST_BODY,
)
async def create_benchmark(
    request: Request, admin: AdminDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """Register hidden targets — regression: ``y``; classification: ``labels`` with optional
    ``soft_labels`` and ``ood`` — and optional groups, with the metrics (of the task), the
    estimators with their own leaderboards (classification), the ranking rule and the quota.
    The targets are never readable again through the API."""
    fmt = media_type(request.headers.get("content-type"))
    gzip = content_encoding(request.headers.get("content-encoding"))
    if fmt == "json":
        raw = await read_limited(
            request.stream(),
            content_length=request.headers.get("content-length"),
            limit=settings.max_json_body_bytes,
            gzip=gzip,
        )
        record = await run_in_threadpool(create_from, store, settings, fmt, raw)
        return created(record)
    spool = Spool(settings)
    try:
        path = spool.path(".npz")
        await spool_body(
            request.stream(),
            path,
            content_length=request.headers.get("content-length"),
            limit=settings.max_body_bytes,
            gzip=gzip,
        )
        record = await run_in_threadpool(create_from, store, settings, fmt, path, spool)
        return created(record)
    finally:
        await run_in_threadpool(spool.close)


def created(record: BenchmarkRecord) -> JSONResponse:
    """The 201 answer of ``POST /v1/benchmarks``."""
    return JSONResponse(info(record, admin=True).model_dump(mode="json"), status_code=201)


@router.get(
    "/v1/benchmarks",
    operation_id="listBenchmarks",
    summary="List benchmarks",
    response_model=BenchmarkList,
    responses=errors(401, 503),
)
def list_benchmarks(key: KeyDep, store: StoreDep) -> BenchmarkList:
    """Every benchmark's metadata, oldest first (never the targets; the baseline's id for
    admins only)."""
    admin = key.role == "admin"
    return BenchmarkList(benchmarks=[info(b, admin=admin) for b in store.list_benchmarks()])


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
    """The benchmark's metadata: N, kinds, metrics, rule, quota, baseline (its id for admins
    only), curves setting (never the targets)."""
    return info(_get(store, bench_id), admin=key.role == "admin")


@router.patch(
    "/v1/benchmarks/{bench_id}",
    operation_id="updateBenchmark",
    summary="Change a benchmark's metadata",
    response_model=BenchmarkInfo,
    responses=errors(400, 401, 403, 404, 409, 413, 422, 503),
)
def update_benchmark(
    bench_id: BenchId, body: BenchmarkUpdate, admin: AdminDep, store: StoreDep
) -> BenchmarkInfo:
    """Change the name, description, metrics shown, primary metric, rule, quota, baseline
    (its submission and its display name), curves setting or (classification) estimators. Newly shown metrics and estimators are computed for
    submissions made from then on."""
    current = _get(store, bench_id)
    given = body.model_fields_set
    for fixed in ("private_fraction", "private_mask"):
        if fixed in given:
            raise ApiError(
                422,
                f"{fixed} cannot be changed: the public/private split is fixed at creation "
                "(create a new benchmark for another split)",
                field=fixed,
            )
    changes: dict[str, Any] = {}
    if body.status is not None:
        if current.status == "closed" and body.status == "open":
            raise ApiError(
                409,
                f"benchmark {bench_id!r} is closed and never reopens (closed at "
                f"{current.closed_at})",
                field="status",
                code="benchmark_closed",
            )
        if body.status == "closed" and current.status != "closed":
            changes["status"] = "closed"
            changes["closed_at"] = now_iso()
    if body.max_final is not None:
        changes["max_final"] = body.max_final
    for name in ("name", "description", "rule", "public_board", "curves"):
        if name in given and getattr(body, name) is not None:
            changes[name] = getattr(body, name)
    if "estimators" in given:
        changes["estimators"] = _estimators(current.task, body.estimators)
    if "primary_metric" in given or "metrics" in given:
        primary = body.primary_metric or current.primary_metric
        shown = body.metrics if body.metrics is not None else current.metrics
        changes["metrics"] = _metrics(primary, shown, current.task, current.targets)
        changes["primary_metric"] = primary
    if "estimators" in given or "metrics" in changes:
        _params(
            current.params,
            changes.get("metrics", current.metrics),
            current.task,
            changes.get("estimators", current.estimators),
            n=current.n,
        )
    if "quota" in given:
        quota = body.quota or QuotaOptions()
        changes["quota_per_day"] = quota.per_day
        changes["quota_total"] = quota.total
    if "baseline_name" in given:
        changes["baseline_name"] = body.baseline_name
    if "baseline_id" in given:
        changes["baseline"] = (
            None if body.baseline_id is None else _baseline(store, bench_id, body.baseline_id)
        )
    updated = store.update_benchmark(bench_id, changes)
    if updated is None:
        raise ApiError(404, f"no benchmark {bench_id!r}", field="bench_id")
    return info(updated, admin=True)


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
    store.delete_share_links(bench_id)
    return Response(status_code=204)
