"""Resumable uploads: a large NPZ body sent in parts, then completed into a submission or a
benchmark.

``POST /v1/uploads`` declares the body (its size, optionally its SHA-256, gzip or not, and
whether it makes a submission or a benchmark) and answers the part size and the number of
parts. Each part is ``PUT`` with its SHA-256 in a ``Content-Digest`` header (RFC 9530) and
stored in the blob store under ``uploads/<id>/part-<n>-<sha256>``, so any API process can
take any part; a part whose bytes do not match their digest is refused and can be sent again.
Keyed by its digest, a part sent again with other bytes goes to another key, and the bytes it
replaces are removed once the record names the new ones: a completion reads exactly the bytes
that were checked, whatever is sent meanwhile.
``GET`` tells which parts the service holds: an interrupted client resumes from there.
``POST .../complete`` reads the body across the stored parts (never joined into one file:
see :mod:`service.api.parts`) and answers exactly what
``POST /v1/submissions`` (202) or ``POST /v1/benchmarks`` (201) answers for it; a repeated
completion answers the same again. The metadata is a Redis hash that expires
``upload_ttl_s`` after the creation; the parts of expired, completed and aborted uploads are
removed. Only the key that created an upload may use it: to any other key it does not exist.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import io
import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path as FilePath
from typing import Annotated, Any, cast

from fastapi import APIRouter, Header, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError

from service import keys as schema_keys
from service.api.deps import KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.parts import MissingPart, PartDamaged, open_parts, verify_parts
from service.api.routes import benchmarks as benchmark_routes
from service.api.routes import submissions as submission_routes
from service.api.routes.common import errors, links
from service.api.schemas import (
    BenchmarkInfo,
    SubmissionAccepted,
    UploadCreate,
    UploadInfo,
    UploadPart,
)
from service.api.spool import GunzipTo, Sink, Spool, spool_body, too_large
from service.api.upload_blobs import part_key, upload_prefix
from service.blobs import BlobStore, BlobUnavailable
from service.settings import Settings
from service.store import ApiKeyRecord, Store

router = APIRouter(tags=["uploads"])
log = logging.getLogger("uqeval.api")

UploadId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=100,
        pattern=r"^upl_[0-9a-f]+$",
        description="The upload id (from POST /v1/uploads).",
    ),
]
PartNumber = Annotated[
    int, Path(ge=1, le=1_000_000, description="The part number, 1-based (1 to parts).")
]

_UPLOAD_ID = {"upload_id": "$response.body#/id"}

#: A part is recorded only while the upload exists (``{'gone'}``: a part stored after its
#: upload expired must not bring the upload back without its expiry), is not complete
#: (``{'complete'}``) and is not being completed (``{'completing', recorded}``: its parts are
#: being read). Recorded: ``{'recorded', replaced}``, with the value it replaced ('' if none).
_RECORD_PART = """
if redis.call('exists', KEYS[1]) == 0 then return {'gone'} end
if redis.call('hexists', KEYS[1], 'answer') == 1 then return {'complete'} end
if redis.call('exists', KEYS[2]) == 1 then
  return {'completing', redis.call('hget', KEYS[1], ARGV[1]) or ''}
end
local replaced = redis.call('hget', KEYS[1], ARGV[1]) or ''
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
return {'recorded', replaced}
"""

#: The upload record's field naming how its parts are keyed: ``sha256`` for
#: ``part-<n>-<sha256>``; absent in uploads created before (``part-<n>``, replaced in place).
_PART_KEYS = "part_keys"

#: One completion at a time per upload: it holds ``upload:{id}:completing`` (a random token,
#: expiring after :data:`COMPLETE_LEASE_MS`, renewed while it runs). Answers ``{'claimed'}``,
#: ``{'answer', saved}`` for a completed upload, ``{'busy'}`` while another completion holds
#: it, ``{'gone'}`` when the upload does not exist.
_CLAIM = """
if redis.call('exists', KEYS[1]) == 0 then return {'gone'} end
local answer = redis.call('hget', KEYS[1], 'answer')
if answer then return {'answer', answer} end
if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'claimed'} end
return {'busy'}
"""

#: The holder's lease, renewed (1) while the token is still its own (else 0).
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

#: The holder lets go: the answer (ARGV[2], empty after a failure) is kept on the upload —
#: the first one only, should a lease have run out under a stalled holder — and the lock is
#: released if still its own.
_RELEASE = """
if ARGV[2] ~= '' and redis.call('exists', KEYS[1]) == 1 then
  redis.call('hsetnx', KEYS[1], 'answer', ARGV[2])
end
if redis.call('get', KEYS[2]) == ARGV[1] then redis.call('del', KEYS[2]) end
return 1
"""

#: Abort: refused (0) while a completion reads the parts, else the record removed (1).
_ABORT = """
if redis.call('exists', KEYS[2]) == 1 then return 0 end
redis.call('del', KEYS[1])
return 1
"""

#: A completion's lease on its upload (ms), renewed every third of it while it runs: an API
#: process killed mid-completion holds the upload at most this long.
COMPLETE_LEASE_MS = 30_000
#: How long a completion waits for another one of the same upload to answer (then 409
#: ``upload_completing`` with a Retry-After), and how often it looks.
COMPLETE_WAIT_S = 30.0
COMPLETE_POLL_S = 0.2

#: Seconds between two sweeps of the parts of expired uploads by one API process.
SWEEP_INTERVAL_S = 60.0
_sweep_lock = threading.Lock()
_last_sweep = 0.0


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record(store: Store, key: ApiKeyRecord, upload_id: str) -> dict[str, str]:
    raw = store.client.hgetall(schema_keys.upload(upload_id))
    rec = {_text(k): _text(v) for k, v in raw.items()}
    if not rec or rec.get("owner") != key.key_id:
        raise ApiError(404, f"no upload {upload_id!r}", field="upload_id")
    return rec


def _received(rec: dict[str, str]) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for name, value in rec.items():
        if name.startswith("part:"):
            size, _, digest = value.partition(":")
            out[int(name[5:])] = (int(size), digest)
    return out


def _info(request: Request, upload_id: str, rec: dict[str, str]) -> UploadInfo:
    return UploadInfo(
        id=upload_id,
        size=int(rec["size"]),
        part_size=int(rec["part_size"]),
        parts=int(rec["parts"]),
        received=sorted(_received(rec)),
        expires_at=rec["expires_at"],
        url=str(request.app.url_path_for("get_upload", upload_id=upload_id)),
    )


def _part_blob(upload_id: str, rec: dict[str, str], n: int, sha256: str) -> str:
    """The blob key of part ``n`` whose bytes have this SHA-256."""
    return part_key(upload_id, n, sha256 if rec.get(_PART_KEYS) == "sha256" else None)


def _part_size(rec: dict[str, str], n: int) -> int:
    size, part, parts = int(rec["size"]), int(rec["part_size"]), int(rec["parts"])
    return part if n < parts else size - part * (parts - 1)


def sweep(store: Store, blobs: BlobStore, *, force: bool = False) -> int:
    """Remove the parts of every upload whose record is gone (expired, completed or aborted);
    at most once per :data:`SWEEP_INTERVAL_S` per process unless ``force``. The number of
    uploads whose parts were removed."""
    global _last_sweep
    with _sweep_lock:
        if not force and time.monotonic() - _last_sweep < SWEEP_INTERVAL_S:
            return 0
        _last_sweep = time.monotonic()
    # Only the parts of uploads (uploads/upl_<hex>/part-<n>): anything else kept under the
    # prefix is not this sweep's to remove.
    ids = {
        parts[1]
        for info in blobs.list("uploads/")
        if len(parts := info.key.split("/")) == 3
        and parts[1].startswith("upl_")
        and parts[2].startswith("part-")
    }
    removed = 0
    for upload_id in sorted(ids):
        if not store.client.exists(schema_keys.upload(upload_id)):
            blobs.delete_prefix(upload_prefix(upload_id))
            removed += 1
    return removed


@router.post(
    "/v1/uploads",
    operation_id="createUpload",
    summary="Start a resumable upload of a large NPZ body",
    status_code=201,
    response_model=UploadInfo,
    responses={
        **errors(400, 401, 403, 413, 422, 503),
        **links(
            201,
            getUpload=_UPLOAD_ID,
            putUploadPart=_UPLOAD_ID,
            completeUpload=_UPLOAD_ID,
            abortUpload=_UPLOAD_ID,
        ),
    },
)
def create_upload(
    request: Request, body: UploadCreate, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """Declare a body of ``size`` bytes to be sent in parts of ``part_size`` bytes (the last
    holds the rest). Send each part with ``PUT /v1/uploads/{upload_id}/parts/{n}``, then
    ``POST /v1/uploads/{upload_id}/complete``. A benchmark upload needs an admin key. The
    upload expires (its parts removed) ``expires_at`` if not completed."""
    if body.size > settings.max_upload_bytes:
        raise ApiError(
            413,
            f"size {body.size} exceeds the limit of {settings.max_upload_bytes} bytes of an upload",
            field="size",
        )
    if body.purpose == "benchmark" and key.role != "admin":
        raise ApiError(403, "creating a benchmark needs an admin key", field="purpose")
    sweep(store, store.blobs)
    upload_id = "upl_" + secrets.token_hex(12)
    part_size = settings.upload_part_bytes
    now = _now()
    rec: dict[str, str] = {
        "owner": key.key_id,
        "size": str(body.size),
        "sha256": body.sha256 or "",
        "content_type": body.content_type,
        "content_encoding": body.content_encoding or "",
        "purpose": body.purpose,
        "part_size": str(part_size),
        "parts": str(math.ceil(body.size / part_size)),
        "created_at": _iso(now),
        "expires_at": _iso(now + timedelta(seconds=settings.upload_ttl_s)),
        _PART_KEYS: "sha256",
    }
    k = schema_keys.upload(upload_id)
    pipe = store.client.pipeline()
    pipe.hset(k, mapping=cast("Mapping[Any, Any]", rec))
    pipe.expire(k, settings.upload_ttl_s)
    pipe.execute()
    info = _info(request, upload_id, rec)
    return JSONResponse(
        info.model_dump(mode="json"), status_code=201, headers={"Location": info.url}
    )


@router.get(
    "/v1/uploads/{upload_id}",
    operation_id="getUpload",
    summary="An upload's parts: which ones the service holds",
    response_model=UploadInfo,
    responses=errors(401, 404, 422, 503),
)
def get_upload(request: Request, upload_id: UploadId, key: KeyDep, store: StoreDep) -> UploadInfo:
    """The upload's size, part size, number of parts and the parts received: a client that
    was interrupted sends the others, then completes."""
    return _info(request, upload_id, _record(store, key, upload_id))


def _digest(header: str | None) -> str:
    """The SHA-256 (hex) named by a ``Content-Digest`` header (``sha-256=:<base64>:``)."""
    if header is None:
        raise ApiError(
            422,
            "a part needs its checksum: header Content-Digest: sha-256=:<base64 of SHA-256>:",
            field="Content-Digest",
        )
    for item in header.split(","):
        algo, _, value = item.strip().partition("=")
        if algo.strip().lower() != "sha-256":
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == ":":
            try:
                raw = base64.b64decode(value[1:-1], validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) == 32:
                return raw.hex()
        break
    raise ApiError(
        422,
        "Content-Digest must hold sha-256=:<base64 of the part's 32-byte SHA-256>:",
        field="Content-Digest",
    )


@router.put(
    "/v1/uploads/{upload_id}/parts/{n}",
    operation_id="putUploadPart",
    summary="Send one part of an upload",
    response_model=UploadPart,
    responses=errors(401, 404, 409, 413, 422, 503, 507),
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The bytes of part n: part_size bytes (the last part: the rest).",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def put_upload_part(
    request: Request,
    upload_id: UploadId,
    n: PartNumber,
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    content_digest: Annotated[
        str | None,
        Header(
            alias="Content-Digest",
            max_length=200,
            description="The part's SHA-256 as RFC 9530 writes it: sha-256=:<base64>:. "
            "Required; a part whose bytes do not match it is refused (422) and not stored.",
        ),
    ] = None,
) -> UploadPart:
    """Store part ``n`` (sending it again replaces it: a retry is harmless). Bytes sent
    while a completion reads the parts are refused (409 ``upload_completing``) and not kept;
    the bytes the completion reads stay as they were checked."""
    wanted = _digest(content_digest)
    rec = await run_in_threadpool(_record, store, key, upload_id)
    if "answer" in rec:
        raise _complete_already(upload_id)
    if await run_in_threadpool(store.client.exists, schema_keys.upload_completing(upload_id)):
        raise _completing(upload_id, "its parts are being read; a part cannot change now")
    parts = int(rec["parts"])
    if n > parts:
        raise ApiError(422, f"part {n} is out of range: this upload has {parts} part(s)", field="n")
    expected = _part_size(rec, n)
    spool = Spool(settings)
    try:
        path = spool.path(".part")
        size, digest = await spool_body(
            request.stream(),
            path,
            content_length=request.headers.get("content-length"),
            limit=expected,
            gzip=False,
        )
        if size != expected:
            raise ApiError(
                422,
                f"part {n} of {parts} must hold {expected} bytes; found {size}",
                field="body",
            )
        if digest != wanted:
            raise ApiError(
                422,
                f"part {n} does not match its Content-Digest (sha-256 of the bytes received: "
                f"{digest}); send it again",
                field="Content-Digest",
                code="digest_mismatch",
            )
        blob = _part_blob(upload_id, rec, n, digest)
        await run_in_threadpool(store.blobs.put_file, blob, path, move=True)
    finally:
        await run_in_threadpool(spool.close)
    got = await run_in_threadpool(
        store.client.eval,
        _RECORD_PART,
        2,
        schema_keys.upload(upload_id),
        schema_keys.upload_completing(upload_id),
        f"part:{n}",
        f"{size}:{digest}",
    )
    state = _text(got[0])
    # The key of the bytes the record named for this part (before this PUT), if any.
    named = _text(got[1]).partition(":")[2] if len(got) > 1 else ""
    other = _part_blob(upload_id, rec, n, named) if named else None
    if state == "recorded":
        # The bytes this part replaces, kept under another key, are no longer named.
        if other is not None and other != blob:
            await run_in_threadpool(_drop, store.blobs, other)
        return UploadPart(part=n, size=size, sha256=digest)
    if state == "completing":
        # Kept only where they are the very bytes the completion reads.
        if other != blob:
            await run_in_threadpool(_drop, store.blobs, blob)
        raise _completing(upload_id, "its parts are being read; a part cannot change now")
    # The upload is gone or complete: no one reads its parts again.
    await run_in_threadpool(_drop, store.blobs, blob)
    if state == "gone":
        raise ApiError(404, f"no upload {upload_id!r}", field="upload_id")
    raise _complete_already(upload_id)


def _drop(blobs: BlobStore, key: str) -> None:
    """Remove a part no record names; left to the upload's own removal (completion, abort or
    expiry) when the blob store is briefly away."""
    try:
        blobs.delete(key)
    except BlobUnavailable as exc:
        log.warning("upload part %s not removed now (%s): removed with its upload", key, exc)


def _complete_already(upload_id: str) -> ApiError:
    return ApiError(409, f"upload {upload_id!r} is already complete", field="upload_id")


def _completing(upload_id: str, why: str) -> ApiError:
    """409 ``upload_completing``: another request is completing the upload."""
    return ApiError(
        409,
        f"upload {upload_id!r} is being completed by another request: {why}",
        field="upload_id",
        code="upload_completing",
        headers={"Retry-After": "1"},
    )


def _body(
    rec: dict[str, str], upload_id: str, store: Store, spool: Spool, limit: int
) -> tuple[FilePath | io.BufferedReader, str]:
    """The body of a complete upload and its body hash: the stored parts read as one file
    (:class:`~service.api.parts.PartsFile`, never joined on disk), or for a gzip upload the parts decoded into a
    file of ``spool``. Each part is checked against the size and SHA-256 its ``PUT`` recorded,
    and the whole against the declared SHA-256 (422 ``digest_mismatch``); 409
    ``upload_incomplete`` when parts are missing."""
    received = _received(rec)
    parts = int(rec["parts"])
    missing = [n for n in range(1, parts + 1) if n not in received]
    if missing:
        raise _incomplete(upload_id, parts, missing)
    recorded = [received[n] for n in range(1, parts + 1)]
    keys = [_part_blob(upload_id, rec, n, sha) for n, (_, sha) in enumerate(recorded, start=1)]
    body = hashlib.sha256(b"npz\0")
    gzip = rec["content_encoding"] == "gzip"
    out: FilePath | io.BufferedReader
    try:
        if gzip:
            out = spool.path(".npz")
            with open(out, "wb") as fh:
                gunzip = GunzipTo(Sink(fh, limit, "decompressed body", body))
                whole = verify_parts(store.blobs, keys, recorded, spool.dir, on_block=gunzip.feed)
                gunzip.finish()
        else:
            if int(rec["size"]) > limit:
                raise too_large("body", limit)
            whole = verify_parts(store.blobs, keys, recorded, spool.dir, on_block=body.update)
    except MissingPart as exc:
        # Lost from the blob store (it was recorded): the client sends it again.
        store.client.hdel(schema_keys.upload(upload_id), f"part:{exc.n}")
        raise _incomplete(upload_id, parts, [exc.n]) from None
    except PartDamaged as exc:
        raise ApiError(
            422,
            f"part {exc.n} of upload {upload_id!r} as stored ({exc.found}) differs from what "
            "was received; send it again",
            field="n",
            code="digest_mismatch",
        ) from None
    if rec["sha256"] and whole != rec["sha256"]:
        raise ApiError(
            422,
            f"the parts of upload {upload_id!r} joined have SHA-256 {whole}, not the "
            f"declared {rec['sha256']}; send the wrong parts again",
            field="sha256",
            code="digest_mismatch",
        )
    if not gzip:
        out = open_parts(store.blobs, keys, [size for size, _ in recorded], spool.dir)
    return out, body.hexdigest()


def _incomplete(upload_id: str, parts: int, missing: list[int]) -> ApiError:
    shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
    return ApiError(
        409,
        f"upload {upload_id!r} lacks {len(missing)} of its {parts} parts ({shown}); "
        "send them, then complete",
        field="upload_id",
        code="upload_incomplete",
    )


def _replay(answer: str) -> JSONResponse:
    saved = json.loads(answer)
    return JSONResponse(saved["body"], status_code=saved["status"], headers=saved["headers"])


@router.post(
    "/v1/uploads/{upload_id}/complete",
    operation_id="completeUpload",
    summary="Complete an upload: submit its body",
    status_code=202,
    response_model=SubmissionAccepted,
    responses={
        201: {
            "model": BenchmarkInfo,
            "description": "A benchmark upload: the created benchmark, as POST /v1/benchmarks "
            "answers.",
        },
        **errors(400, 401, 403, 404, 409, 413, 415, 422, 503, 507),
    },
)
async def complete_upload(
    request: Request,
    upload_id: UploadId,
    key: KeyDep,
    store: StoreDep,
    settings: SettingsDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="As for POST /v1/submissions.",
        ),
    ] = None,
) -> JSONResponse:
    """Join the parts into the body and submit it: a submission upload answers exactly what
    ``POST /v1/submissions`` answers for the body (202, the same checks and 422s), a
    benchmark upload what ``POST /v1/benchmarks`` answers (201). Completing again answers the
    same, also while the first completion runs: one completion of an upload runs at a time,
    and another one waits up to 30 s for its answer (then 409 ``upload_completing`` with a
    Retry-After: ask again). A refused body (4xx) leaves the upload as it is, to be aborted;
    while a completion runs, its parts cannot be sent again nor the upload aborted (409
    ``upload_completing``)."""
    rec = await run_in_threadpool(_record, store, key, upload_id)
    if "answer" in rec:
        return _replay(rec["answer"])
    if rec["purpose"] == "benchmark" and key.role != "admin":
        raise ApiError(403, "creating a benchmark needs an admin key", field="purpose")
    token = secrets.token_hex(16)
    earlier = await _claim(store, upload_id, token)
    if earlier is not None:
        return _replay(earlier)
    renewing = asyncio.create_task(_renew(store, upload_id, token))
    saved: dict[str, Any] | None = None
    try:
        # Read again under the lock: a part sent again before it was taken counts.
        rec = await run_in_threadpool(_record, store, key, upload_id)
        answer = await _complete(request, rec, upload_id, key, store, settings, idempotency_key)
        saved = {
            "status": answer.status_code,
            "body": json.loads(bytes(answer.body)),
            "headers": {
                k: v
                for k, v in answer.headers.items()
                if k.lower() not in ("content-length", "content-type")
            },
        }
    finally:
        renewing.cancel()
        await run_in_threadpool(
            store.client.eval,
            _RELEASE,
            2,
            schema_keys.upload(upload_id),
            schema_keys.upload_completing(upload_id),
            token,
            "" if saved is None else json.dumps(saved),
        )
    await run_in_threadpool(store.blobs.delete_prefix, upload_prefix(upload_id))
    return answer


async def _claim(store: Store, upload_id: str, token: str) -> str | None:
    """Take the upload's completion lock for ``token``: None once held; the saved answer of a
    completion that ended meanwhile (while this one waited). 404 when the upload is gone, 409
    ``upload_completing`` after :data:`COMPLETE_WAIT_S` of another completion running."""
    waited_until = time.monotonic() + COMPLETE_WAIT_S
    while True:
        got = await run_in_threadpool(
            store.client.eval,
            _CLAIM,
            2,
            schema_keys.upload(upload_id),
            schema_keys.upload_completing(upload_id),
            token,
            COMPLETE_LEASE_MS,
        )
        state = _text(got[0])
        if state == "claimed":
            return None
        if state == "answer":
            return _text(got[1])
        if state == "gone":
            raise ApiError(404, f"no upload {upload_id!r}", field="upload_id")
        if time.monotonic() >= waited_until:
            raise _completing(upload_id, "ask again for its answer")
        await asyncio.sleep(COMPLETE_POLL_S)


async def _renew(store: Store, upload_id: str, token: str) -> None:
    """Renew the completion's lease every third of it while the completion runs."""
    while True:
        await asyncio.sleep(COMPLETE_LEASE_MS / 3000)
        try:
            await run_in_threadpool(
                store.client.eval,
                _RENEW,
                1,
                schema_keys.upload_completing(upload_id),
                token,
                COMPLETE_LEASE_MS,
            )
        except RedisError:  # Redis briefly away: the next renewal, or the lease runs out
            continue


async def _complete(
    request: Request,
    rec: dict[str, str],
    upload_id: str,
    key: ApiKeyRecord,
    store: Store,
    settings: Settings,
    idempotency_key: str | None,
) -> JSONResponse:
    """The completion's work, under the upload's lock: the answer for the joined body."""
    spool = Spool(settings)
    try:
        limit = settings.max_upload_bytes
        body, digest = await run_in_threadpool(_body, rec, upload_id, store, spool, limit)
        try:
            answer: JSONResponse
            if rec["purpose"] == "benchmark":
                record = await run_in_threadpool(
                    benchmark_routes.create_from, store, settings, "npz", body, spool, limit
                )
                answer = benchmark_routes.created(record)
            else:
                check = functools.partial(
                    submission_routes.check_npz, body, digest, settings, store, spool, limit
                )
                answer = await submission_routes.accept(
                    request, store, settings, key, check, idempotency_key
                )
        finally:
            if not isinstance(body, FilePath):
                await run_in_threadpool(body.close)
    finally:
        await run_in_threadpool(spool.close)
    return answer


@router.delete(
    "/v1/uploads/{upload_id}",
    operation_id="abortUpload",
    summary="Abort an upload and remove its parts",
    status_code=204,
    response_class=Response,
    responses=errors(401, 404, 409, 422, 503),
)
def abort_upload(
    upload_id: UploadId, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> Response:
    """Remove the upload and the parts received (a completed upload: only its record; what it
    created stays). 409 ``upload_completing`` while a completion reads its parts."""
    _record(store, key, upload_id)
    removed = store.client.eval(
        _ABORT, 2, schema_keys.upload(upload_id), schema_keys.upload_completing(upload_id)
    )
    if not int(removed):
        raise _completing(upload_id, "it cannot be aborted now")
    store.blobs.delete_prefix(upload_prefix(upload_id))
    return Response(status_code=204)
