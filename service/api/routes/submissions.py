"""Submissions: create (JSON or NPZ body; inline targets or a benchmark's), list, read,
change the visibility, delete, cancel.

Who sees what (:mod:`service.api.access`): a submitter key reads and changes its team's
submissions (a key without a team: its own), reads public ones, and gets 404 for any other id,
exactly like an unknown id; an admin key reads and changes every submission.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from service import jobs, notifications
from service import keys as schema_keys
from service.api import access
from service.api.auth import admitted, ensure_admin_key, key_required, run_read
from service.api.callbacks import check_callback
from service.api.deps import KeyDep, SettingsDep, StoreDep, TokenDep, get_settings, get_store
from service.api.errors import ApiError
from service.api.payload import (
    DecodedSubmission,
    body_hash,
    content_encoding,
    decode_json,
    decode_npz,
    media_type,
    read_limited,
)
from service.api.routes.common import errors, links
from service.api.schemas import (
    Status,
    SubmissionAccepted,
    SubmissionDetail,
    SubmissionPage,
    SubmissionSummary,
    SubmissionUpdate,
)
from service.api.spool import MEMORY_BODY_BYTES, Spool, spool_body
from service.api.upload_blobs import stored_arrays
from service.api.validation import ValidSubmission, validate
from service.memory import benchmark_shapes, estimate_job, job_memory_budget, over_budget
from service.settings import Settings
from service.store import (
    TERMINAL,
    ApiKeyRecord,
    IdempotencyConflict,
    Quota,
    QuotaExceeded,
    Store,
    SubmissionRecord,
)

router = APIRouter(tags=["submissions"])

#: The created submission's id, for the OpenAPI links of its answer.
_SUB_ID = {"sub_id": "$response.body#/id"}
SubId = Annotated[str, Path(min_length=1, max_length=100, description="The submission id.")]

_BODY_DOC = """\
Two body formats:

* `application/json`: a `SubmissionCreate` document (arrays inline; for small batches).
* `application/octet-stream` (or its alias `application/x-npz`): a NumPy `.npz` archive (`numpy.savez` or
  `numpy.savez_compressed`) whose members are the prediction arrays named by the kind's
  fields (gaussian: `mean`, `std`; laplace: `loc`, `scale`; student_t: `loc`, `scale`, `df`;
  mixture: `weights`, `means`, `stds` (N×K); samples: `draws` (N×S); quantiles: `levels` (Q),
  `values` (N×Q); point_uncertainty: `prediction`, `uncertainty`; interval: `lower`,
  `upper`, optionally `level` (a 0-d array in (0, 1)); classification: probs: `probs` (N×C);
  logits: `logits` (N×C); ensemble: `member_probs` or `member_logits` (M×N×C, kept in their
  dtype, float32 stays float32); dirichlet: `alpha` (N×C); prediction_set: `sets` (N×C, bool
  or 0/1 integers), optionally `probs` (N×C)), the targets `y`
  (regression) or `labels` (classification, N class indices), optionally `sample_weight` and
  `groups`, for classification optionally `soft_labels` (N×C), `ood` (N booleans) and named
  estimates `estimate:<name>` (N values), and `request`: a 0-d string array holding the JSON
  of a `SubmissionRequest` (`kind`, `model_name`, `metadata`, `analyses`). Object (pickled)
  arrays are refused, and so are a member whose bytes after its `.npy` header are not
  exactly those its shape and dtype declare, and a member name given twice.

Either may be sent with `Content-Encoding: gzip`; the body size limit applies to the bytes
received and to the decompressed content, while the body streams in (413, chunked bodies
included). An NPZ body over 1 MiB is spooled to disk and validated from there in blocks of
rows; a large one may instead be sent in parts with checksums, resumably (`POST /v1/uploads`).
"""

_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": _BODY_DOC,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/SubmissionCreate"},
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


def _readable(store: Store, key: ApiKeyRecord, sub_id: str) -> SubmissionRecord:
    record = store.get_submission(sub_id)
    if record is None or not access.can_read(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    return record


def _changeable(store: Store, key: ApiKeyRecord, sub_id: str) -> SubmissionRecord:
    record = _readable(store, key, sub_id)
    if not access.can_change(key, record):
        raise ApiError(
            403, f"submission {sub_id!r} belongs to another team; only that team can change it"
        )
    return record


def status_url(request: Request, sub_id: str) -> str:
    return str(request.app.url_path_for("get_submission", sub_id=sub_id))


def summary(record: SubmissionRecord) -> SubmissionSummary:
    return SubmissionSummary(
        id=record.id,
        status=record.status,
        progress=record.progress,
        model_name=record.model_name,
        kind=record.kind,
        n=record.n,
        queue=record.queue,
        created_at=record.created_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        error=record.error,
        team_id=record.team,
        visibility=record.visibility,
        benchmark_id=record.benchmark,
        final=record.final,
    )


def detail(store: Store, record: SubmissionRecord, *, with_result: bool = True) -> SubmissionDetail:
    queued = record.status == "queued"
    position = store.queue_position(record.id, record.queue) if queued else None
    result = store.get_result(record.id) if with_result and record.status == "succeeded" else None
    return _detail(record, position, result)


def _detail(
    record: SubmissionRecord, position: int | None, result: dict[str, Any] | None
) -> SubmissionDetail:
    return SubmissionDetail(
        **summary(record).model_dump(),
        metadata=record.metadata,
        analyses=record.analyses.document(),
        attempts=record.attempts,
        queue_position=position,
        cancel_requested=record.cancel_requested,
        result=result,  # type: ignore[arg-type]
    )


def _check_json(body: bytes, settings: Settings, store: Store) -> ValidSubmission:
    sub = decode_json(body)
    sub.body_hash = body_hash("json", body)
    return _check(sub, settings, store)


def check_npz(
    path: pathlib.Path | IO[bytes] | bytes,
    digest: str,
    settings: Settings,
    store: Store,
    spool: Spool,
    max_bytes: int,
) -> ValidSubmission:
    """The spooled NPZ body at ``path``, a seekable file object (an upload's parts) or the
    bytes of a small body, whose body hash is ``digest``, decoded and validated, its large
    arrays memory-mapped from files of ``spool``."""
    sub = decode_npz(path, max_bytes=max_bytes, spool=spool)
    sub.body_hash = digest
    valid = _check(sub, settings, store)
    return replace(valid, arrays=stored_arrays(valid.arrays, spool))


def _check(sub: DecodedSubmission, settings: Settings, store: Store) -> ValidSubmission:
    bench = None
    if sub.benchmark_id is not None:
        bench = store.get_benchmark(sub.benchmark_id)
        if bench is None:
            raise ApiError(404, f"no benchmark {sub.benchmark_id!r}", field="benchmark_id")
        _open(bench)
    valid = validate(sub, settings, bench)
    _check_memory(valid, bench, settings)
    return replace(valid, callback_url=sub.callback_url)


def _open(bench: Any) -> None:
    """409 for a closed benchmark: it takes no new submissions."""
    if bench.status == "closed":
        raise ApiError(
            409,
            f"benchmark {bench.id!r} is closed (at {bench.closed_at}); it takes no new submissions",
            field="benchmark_id",
            code="benchmark_closed",
        )


def _check_memory(valid: ValidSubmission, bench: Any, settings: Settings) -> None:
    """422 when the job's estimated memory exceeds the per-job budget (it could never run)."""
    shapes = {name: tuple(getattr(a, "shape", ())) for name, a in valid.arrays.items()}
    if bench is not None:
        shapes.update(benchmark_shapes(bench))
    estimate = estimate_job(valid.kind, valid.n, valid.analyses, shapes=shapes)
    reason = over_budget(estimate, job_memory_budget(settings))
    if reason is not None:
        raise ApiError(422, reason, field="analyses", code="over_memory_budget")


def _checked_submit(
    store: Store,
    settings: Settings,
    key: ApiKeyRecord,
    valid: ValidSubmission | Callable[[], ValidSubmission],
    idempotency_key: str | None,
) -> tuple[SubmissionRecord, bool, int | None]:
    """:func:`_submit` of ``valid`` (checked first when it is the callable that checks it),
    its callback URL checked before (it resolves the host: blocking)."""
    checked = valid() if callable(valid) else valid
    if checked.callback_url is not None:
        check_callback(store, settings, key, checked.callback_url)
    return _submit(store, settings, key, checked, idempotency_key)


def _submit(
    store: Store,
    settings: Settings,
    key: ApiKeyRecord,
    valid: ValidSubmission,
    idempotency_key: str | None,
) -> tuple[SubmissionRecord, bool, int | None]:
    quota = None
    if valid.benchmark_id is not None:
        bench = store.get_benchmark(valid.benchmark_id)
        if bench is None:
            raise ApiError(404, f"no benchmark {valid.benchmark_id!r}", field="benchmark_id")
        _open(bench)
        if bench.quota_per_day is not None or bench.quota_total is not None:
            quota = Quota(
                schema_keys.quota(bench.id, access.team_scope(key)),
                bench.quota_per_day,
                bench.quota_total,
            )
    try:
        record, created = jobs.submit(
            store,
            settings,
            owner=key.key_id,
            kind=valid.kind,
            n=valid.n,
            model_name=valid.model_name,
            metadata=valid.metadata,
            analyses=valid.analyses,
            arrays=valid.arrays,
            idempotency_key=idempotency_key,
            body_hash=valid.body_hash,
            team=key.team,
            visibility=valid.visibility,
            benchmark=valid.benchmark_id,
            quota=quota,
            callback_url=valid.callback_url,
        )
    except QuotaExceeded as exc:
        headers = None if exc.retry_after_s is None else {"Retry-After": str(exc.retry_after_s)}
        raise ApiError(
            429, str(exc), code="quota_exceeded", field="benchmark_id", headers=headers
        ) from None
    except IdempotencyConflict:
        raise ApiError(
            409,
            "this Idempotency-Key was used before with a different request body; "
            "use a new key for a new submission",
            field="Idempotency-Key",
            code="idempotency_conflict",
        ) from None
    queued = record.status == "queued"
    position = store.queue_position(record.id, record.queue) if queued else None
    return record, created, position


@router.post(
    "/v1/submissions",
    operation_id="createSubmission",
    summary="Submit a prediction batch for evaluation",
    status_code=202,
    response_model=SubmissionAccepted,
    responses={
        **errors(400, 401, 404, 409, 413, 415, 422, 429, 503, 507),
        **links(
            202,
            getSubmission=_SUB_ID,
            updateSubmission=_SUB_ID,
            cancelSubmission=_SUB_ID,
            deleteSubmission=_SUB_ID,
        ),
    },
    openapi_extra=_REQUEST_BODY,
)
async def create_submission(
    request: Request,
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="Repeating a request with the same key and the same body (the same "
            "bytes after gzip decoding) returns the same submission instead of a new one; the "
            "same key with another body answers 409. Keys are per API key and kept 24 h.",
        ),
    ] = None,
) -> JSONResponse:
    """Validate a prediction batch with its targets, store it and queue its evaluation.

    With a ``benchmark_id`` instead of targets, the prediction is evaluated against that
    benchmark's hidden targets with the benchmark's metrics, bootstrap and seed; its N and
    kind are checked before the 202, and the team's quota there (429 when spent, with
    Retry-After for the per-day quota).

    Validation that needs only the request (shapes, dtypes, finiteness, the kind's rules,
    metric names and applicability, parameter names) happens before the 202 and answers 422
    naming the field, the rule and the first offending index. The answer gives the submission
    id, the URL to poll and the position in the queue.
    """
    fmt = media_type(request.headers.get("content-type"))
    gzip = content_encoding(request.headers.get("content-encoding"))
    if fmt == "json":
        body = await read_limited(
            request.stream(),
            content_length=request.headers.get("content-length"),
            limit=settings.max_json_body_bytes,
            gzip=gzip,
        )
        valid = await run_in_threadpool(_check_json, body, settings, store)
        del body  # the arrays live on in ``valid``; the raw bytes can go
        return await accept(request, store, settings, key, valid, idempotency_key)
    spool = Spool(settings)
    length = request.headers.get("content-length")
    try:
        source: pathlib.Path | bytes
        if not gzip and _declared(length) <= min(MEMORY_BODY_BYTES, settings.max_body_bytes):
            # A small body: in memory (its hash as a spooled body's, the same bytes after
            # the same prefix); a member inflating past the inline size still goes to a file.
            source = await read_limited(
                request.stream(), content_length=length, limit=MEMORY_BODY_BYTES, gzip=False
            )
            digest = body_hash("npz", source)
        else:
            source = spool.path(".npz")
            _size, digest = await spool_body(
                request.stream(),
                source,
                content_length=length,
                limit=settings.max_body_bytes,
                gzip=gzip,
                prefix=b"npz\0",
            )
        check = functools.partial(
            check_npz, source, digest, settings, store, spool, settings.max_body_bytes
        )
        return await accept(request, store, settings, key, check, idempotency_key)
    finally:
        if spool.used:
            await run_in_threadpool(spool.close)


def _declared(length: str | None) -> int | float:
    """The declared Content-Length as a number (infinite when absent or not a number: such a
    body is spooled, and :func:`spool_body` answers a bad one)."""
    try:
        return int(length) if length is not None else math.inf
    except ValueError:
        return math.inf


async def accept(
    request: Request,
    store: Store,
    settings: Settings,
    key: ApiKeyRecord,
    valid: ValidSubmission | Callable[[], ValidSubmission],
    idempotency_key: str | None,
) -> JSONResponse:
    """Store and queue ``valid`` (or what the callable ``valid`` checks: checked, stored and
    queued in one call off the event loop): the 202 answer of ``POST /v1/submissions``."""
    record, created, position = await run_in_threadpool(
        _checked_submit, store, settings, key, valid, idempotency_key
    )
    url = status_url(request, record.id)
    accepted = SubmissionAccepted(
        id=record.id,
        status=record.status,
        status_url=url,
        queue_position=position,
        created_at=record.created_at,
        replayed=not created,
    )
    headers = {"Location": url}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(accepted.model_dump(mode="json"), status_code=202, headers=headers)


@router.get(
    "/v1/submissions",
    operation_id="listSubmissions",
    summary="List your team's submissions",
    response_model=SubmissionPage,
    responses=errors(401, 422, 503),
)
def list_submissions(
    key: KeyDep,
    store: StoreDep,
    status: Annotated[Status | None, Query(description="Only submissions in this state.")] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000, description="Items to skip.")] = 0,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 20,
) -> SubmissionPage:
    """The caller's team's submissions (a key without a team: its own; an admin key: all),
    newest first, one page at a time."""
    if key.role == "admin":
        records, total = store.list_submissions(None, status, offset, limit)
    elif key.team is not None:
        records, total = store.list_submissions(None, status, offset, limit, team=key.team)
    else:
        records, total = store.list_submissions(key.key_id, status, offset, limit)
    return SubmissionPage(
        items=[summary(r) for r in records], total=total, offset=offset, limit=limit
    )


def read(request: Request, token: str | None, sub_id: str) -> Response:
    """The GET route's work, in one trip through the thread pool: authentication, the rate
    count and the submission (record, result bytes, queue position) in one Redis round trip
    (:meth:`service.store.Store.read_submission`), then the answer (:func:`_render`) — the
    same status codes, bodies and bytes as with :data:`KeyDep` and separate reads."""
    store, settings = get_store(request), get_settings(request)
    if token is None:
        raise key_required()
    ensure_admin_key(request, store)
    found = store.read_submission(
        token, sub_id, rate_limit=settings.rate_limit, window_s=settings.rate_limit_window_s
    )
    key = admitted(settings, found.key, found.retry_after_s)
    record = found.record
    if record is None or not access.can_read(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    return _render(record, found.queue_position, found.result, _private(store, key, record))


def _private(store: Store, key: ApiKeyRecord, record: SubmissionRecord) -> bytes | None:
    """The sealed private result of ``record`` (raw JSON) when its benchmark is closed and
    ``key`` is its team's or an admin's; else None (always None while open)."""
    if record.benchmark is None or record.status != "succeeded":
        return None
    if not access.can_change(key, record):
        return None
    bench = store.get_benchmark(record.benchmark)
    if bench is None or bench.status != "closed" or not bench.is_split:
        return None
    doc = store.get_private_result(record.id)
    return None if doc is None else json.dumps(doc, allow_nan=False).encode()


@router.get(
    "/v1/submissions/{sub_id}",
    operation_id="getSubmission",
    summary="Status, progress, timings and results of a submission",
    response_model=SubmissionDetail,
    responses=errors(401, 404, 422, 503),
)
async def get_submission(request: Request, sub_id: SubId, token: TokenDep) -> Response:
    """The submission's state (queued, running with progress %, succeeded, failed with the
    reason, cancelled), its timings, and the result document once it succeeded."""
    # The polling hot path: an async route with one trip through the thread pool (the key is
    # read by an async dependency and checked with the read; plain dependencies would each
    # take a trip, and each Redis call a round trip).
    return await run_read(request, read, request, token, sub_id)


def _detail_response(store: Store, record: SubmissionRecord, result: bytes | None) -> Response:
    """The answer of a read of ``record`` and its ``result`` (``get_submission_and_result``),
    with the queue position (or a result written since) read separately."""
    if record.status != "succeeded" or result is None:
        return JSONResponse(detail(store, record).model_dump(mode="json"))
    return _render(record, None, result)


def _render(
    record: SubmissionRecord,
    position: int | None,
    result: bytes | None,
    private: bytes | None = None,
) -> Response:
    """The answer of a read: the detail of ``record`` at queue ``position`` with the stored
    ``result`` document (when it succeeded) and the ``private`` result (a closed benchmark's,
    for its team and admins)."""
    if record.status != "succeeded" or result is None:
        return JSONResponse(_detail(record, position, None).model_dump(mode="json"))
    # The hot path of polling clients: the stored result document (validated JSON, NaN-free,
    # written by the worker) is spliced into the response as it is, not parsed and re-encoded.
    head = _detail(record, position, None).model_dump_json(exclude={"result", "private_result"})
    body = b"".join(
        (
            head[:-1].encode(),
            b',"result":',
            result,
            b',"private_result":',
            b"null" if private is None else private,
            b"}",
        )
    )
    return Response(content=body, media_type="application/json")


@router.patch(
    "/v1/submissions/{sub_id}",
    operation_id="updateSubmission",
    summary="Make a submission public or private",
    response_model=SubmissionDetail,
    responses=errors(400, 401, 403, 404, 409, 413, 422, 503),
)
def update_submission(
    sub_id: SubId, body: SubmissionUpdate, key: KeyDep, store: StoreDep
) -> Response:
    """Change the visibility of one of your team's submissions (admins: of any).

    Public: readable by every key and, once it succeeded, ranked on its benchmark's
    leaderboards. Made private, a succeeded submission leaves the leaderboards in the same
    atomic step (its team's next best or latest public submission takes its place); made
    public, it enters them; either way the rank intervals are computed again. A queued or
    running submission is ranked according to its visibility when it succeeds. Answers the
    submission as ``GET`` does.
    """
    current = _changeable(store, key, sub_id)
    if body.visibility is None and body.final is None:
        raise ApiError(
            422,
            'nothing to change: give "visibility" ("private" or "public") and/or "final" '
            "(true or false)",
            field="body",
            code="nothing_to_change",
        )
    if body.final is not None:
        _mark_final(store, current, body.final)
    if body.visibility is None:
        record, result = store.get_submission_and_result(sub_id)
        if record is None:
            raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
        return _detail_response(store, record, result)
    outcome = store.set_visibility(sub_id, body.visibility)
    if outcome == "missing":
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    if outcome == "unranked":
        raise ApiError(
            409,
            f"submission {sub_id!r} was evaluated by an older version of the service that "
            "stored no leaderboard entries for it; its visibility cannot change (resubmit it)",
            field="visibility",
        )
    record, result = store.get_submission_and_result(sub_id)
    if record is None:
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    return _detail_response(store, record, result)


def _mark_final(store: Store, record: SubmissionRecord, final: bool) -> None:
    """Mark or unmark ``record`` final (409 with the contract's codes when it cannot be)."""
    if record.benchmark is None:
        raise ApiError(
            409,
            f"submission {record.id!r} has inline targets; only benchmark submissions can be final",
            field="final",
            code="not_final_eligible",
        )
    team = record.team if record.team is not None else record.owner
    outcome, current = store.mark_final(record, team, final)
    if outcome == "missing":
        raise ApiError(404, f"no submission {record.id!r}", field="sub_id")
    if outcome == "benchmark_closed":
        raise ApiError(
            409,
            f"benchmark {record.benchmark!r} is closed: its finals are fixed",
            field="final",
            code="benchmark_closed",
        )
    if outcome == "not_final_eligible":
        raise ApiError(
            409,
            f"submission {record.id!r} has status {record.status}; only a succeeded benchmark "
            "submission can be final",
            field="final",
            code="not_final_eligible",
        )
    if outcome == "too_many_finals":
        bench = store.get_benchmark(record.benchmark)
        limit = bench.max_final if bench is not None else len(current)
        raise ApiError(
            409,
            f"your team already has {len(current)} final submission(s) on benchmark "
            f"{record.benchmark!r} (max_final = {limit}): {', '.join(current)}; unmark one "
            '(PATCH {"final": false}) first',
            field="final",
            code="too_many_finals",
        )


@router.delete(
    "/v1/submissions/{sub_id}",
    operation_id="deleteSubmission",
    summary="Delete a submission and its data",
    status_code=204,
    response_class=Response,
    responses=errors(401, 403, 404, 422, 503),
)
def delete_submission(sub_id: SubId, key: KeyDep, store: StoreDep) -> Response:
    """Remove the submission, its arrays and its result. A queued or running job is
    cancelled first."""
    record = _changeable(store, key, sub_id)
    if record.status not in TERMINAL:
        store.cancel_submission(sub_id)
    store.delete_submission(sub_id)
    return Response(status_code=204)


@router.post(
    "/v1/submissions/{sub_id}/cancel",
    operation_id="cancelSubmission",
    summary="Cancel a queued or running submission",
    status_code=202,
    response_model=SubmissionDetail,
    responses=errors(401, 403, 404, 409, 422, 503),
)
def cancel_submission(
    sub_id: SubId, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> SubmissionDetail:
    """A queued job is cancelled at once; a running one stops at its next checkpoint
    (``cancel_requested`` is true until then). A finished job answers 409. A cancelled job
    with a ``callback_url`` gets its end event."""
    record = _changeable(store, key, sub_id)
    if record.status in TERMINAL:
        raise ApiError(
            409,
            f"submission {sub_id!r} has already ended ({record.status}); nothing to cancel",
            field="sub_id",
        )
    updated = store.cancel_submission(sub_id)
    if updated is None:
        raise ApiError(404, f"no submission {sub_id!r}", field="sub_id")
    if updated.status == "cancelled":
        notifications.ended(store, settings, "submission", sub_id)
    return detail(store, updated)
