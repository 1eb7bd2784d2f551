"""Request-body decoding for submissions: JSON or NPZ, optionally gzip-encoded, size-limited.

Two body formats are accepted by ``POST /v1/submissions``:

``application/json``
    A :class:`~service.api.schemas.SubmissionCreate` document (arrays as JSON lists).
``application/x-npz`` or ``application/octet-stream``
    A NumPy ``.npz`` archive (``numpy.savez`` or ``numpy.savez_compressed``) whose members are

    * the prediction arrays, named by the kind's fields (``mean``, ``std``; ``loc``, ``scale``,
      ``df``; ``weights``, ``means``, ``stds``; ``draws``; ``levels``, ``values``;
      ``prediction``, ``uncertainty``; ``lower``, ``upper`` and optionally ``level``, a 0-d
      array), for classification ``probs``; ``logits``; ``member_probs`` or ``member_logits``
      (M×N×C, kept in their dtype: a float32 ensemble stays float32); ``alpha``; ``sets``
      (N×C booleans, or 0/1 integers) and optionally ``probs``,
    * ``y`` (regression targets) or ``labels`` (classification: N integers in [0, C)),
      optionally ``sample_weight`` and ``groups`` (integers); for classification optionally
      ``soft_labels`` (N×C), ``ood`` (N booleans or 0/1) and named estimates
      ``estimate:<name>`` (N values each),
    * ``request``: a 0-d string array holding the JSON of
      :class:`~service.api.schemas.SubmissionRequest` (``kind``, ``model_name``, ``metadata``,
      ``analyses``), e.g. ``numpy.savez(f, request=json.dumps({...}), mean=..., std=..., y=...)``.

    The archive is read with ``allow_pickle=False``: object arrays are refused, and a member's
    bytes after its header must be exactly those its declared shape and dtype need (checked
    before anything is allocated: nothing cut short, nothing left over). A member name given
    twice is refused.

Either may be sent with ``Content-Encoding: gzip``. The body is counted while it streams in,
so a body over the limit is refused with 413 as soon as the limit is crossed, whether or not a
``Content-Length`` was sent (chunked transfer), and the decompressed size of a gzip body is
limited the same way (a "gzip bomb" stops at the limit).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from service.api.errors import ApiError, pydantic_error
from service.api.schemas import (
    Analyses,
    BenchmarkCreate,
    BenchmarkRequest,
    SubmissionCreate,
    SubmissionRequest,
)
from service.api.schemas.common import MAX_GROUP, MAX_LABEL, MIN_GROUP
from service.api.spool import (
    Spool,
    converted,
    read_member,
    release,
    row_blocks,
    unique_members,
)
from service.kinds import (
    BOOL_FIELDS,
    CLASSIFICATION_KINDS,
    CLASSIFICATION_TARGETS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    field_rank,
    required_fields,
    target_field,
)

JSON_TYPES = frozenset({"application/json"})
NPZ_TYPES = frozenset({"application/x-npz", "application/octet-stream"})
OPTIONAL_ARRAYS = ("sample_weight", "groups")
MAX_REQUEST_MEMBER_BYTES = 1 << 20

BodyFormat = Literal["json", "npz"]


@dataclass
class DecodedSubmission:
    """A submission body decoded into its parts (not yet validated against uqcore's rules)."""

    format: BodyFormat
    kind: str
    model_name: str
    metadata: dict[str, Any]
    analyses: Analyses
    prediction: dict[str, np.ndarray] = field(repr=False)
    #: The targets; None for a submission against a benchmark (its targets are hidden).
    y: np.ndarray | None = field(repr=False)
    sample_weight: np.ndarray | None = field(repr=False, default=None)
    groups: np.ndarray | None = field(repr=False, default=None)
    body_hash: str = ""
    visibility: Literal["private", "public"] = "private"
    benchmark_id: str | None = None
    #: Classification: the class labels (the targets; ``y`` is then None), soft labels, OOD
    #: flags, and named estimates (name -> N values).
    labels: np.ndarray | None = field(repr=False, default=None)
    soft_labels: np.ndarray | None = field(repr=False, default=None)
    ood: np.ndarray | None = field(repr=False, default=None)
    estimates: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    #: Where the end of the job is posted (checked when it is accepted).
    callback_url: str | None = None

    @property
    def targets(self) -> np.ndarray | None:
        """The targets: ``labels`` for a classification kind, else ``y``."""
        return self.labels if self.kind in CLASSIFICATION_KINDS else self.y

    def field_path(self, name: str) -> str:
        """Where array ``name`` lives in the body as sent (``prediction.std`` in JSON;
        an estimate is ``prediction.estimates.<name>`` in JSON, ``estimate:<name>`` in NPZ)."""
        if name.startswith(ESTIMATE_PREFIX):
            if self.format == "json":
                return f"prediction.estimates.{name[len(ESTIMATE_PREFIX) :]}"
            return name
        if self.format == "json" and name in KIND_FIELDS.get(self.kind, ()):
            return f"prediction.{name}"
        return name


# --------------------------------------------------------------------------------------------
# content negotiation
# --------------------------------------------------------------------------------------------


def media_type(content_type: str | None) -> BodyFormat:
    """The body format named by a Content-Type header; 415 for anything else."""
    mt = (content_type or "").split(";", 1)[0].strip().lower()
    if mt in JSON_TYPES:
        return "json"
    if mt in NPZ_TYPES:
        return "npz"
    accepted = ", ".join(sorted(JSON_TYPES | NPZ_TYPES))
    raise ApiError(
        415,
        f"Content-Type must be one of {accepted}; found {mt or 'none'!r}",
        field="Content-Type",
    )


def content_encoding(header: str | None) -> bool:
    """True for gzip, False for identity/none; 415 for any other encoding."""
    enc = (header or "identity").strip().lower()
    if enc in ("gzip", "x-gzip"):
        return True
    if enc in ("identity", ""):
        return False
    raise ApiError(
        415, f"Content-Encoding must be gzip or identity; found {enc!r}", field="Content-Encoding"
    )


# --------------------------------------------------------------------------------------------
# streaming with limits
# --------------------------------------------------------------------------------------------


def _too_large(what: str, limit: int) -> ApiError:
    return ApiError(413, f"{what} exceeds the limit of {limit} bytes", field="body")


class _Gunzip:
    """Incremental gzip decoder whose output may not exceed ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.out = bytearray()
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def _new(self) -> None:
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        if self._d.eof:
            self._new()  # a further gzip member: concatenated members are one body
        while data:
            try:
                chunk = self._d.decompress(data, self.limit + 1 - len(self.out))
            except zlib.error as exc:
                raise ApiError(400, f"body is not valid gzip: {exc}", field="body") from None
            self.out += chunk
            if len(self.out) > self.limit:
                raise _too_large("decompressed body", self.limit)
            if self._d.eof:
                data = self._d.unused_data
                if data:
                    self._new()
            else:
                data = self._d.unconsumed_tail

    def finish(self) -> bytes:
        if not self._d.eof:
            raise ApiError(400, "body is not valid gzip: truncated stream", field="body")
        return bytes(self.out)


async def read_limited(
    chunks: AsyncIterator[bytes],
    *,
    content_length: str | None,
    limit: int,
    gzip: bool,
) -> bytes:
    """Read a body from ``chunks``, refusing (413) more than ``limit`` bytes, raw or decoded.

    A declared ``Content-Length`` over the limit is refused before anything is read; without
    one (chunked transfer) the running count decides.
    """
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise ApiError(
                400, "Content-Length must be an integer", field="Content-Length"
            ) from None
        if declared > limit:
            raise _too_large("body", limit)
    received = 0
    raw = bytearray()
    gunzip = _Gunzip(limit) if gzip else None
    async for chunk in chunks:
        if not chunk:
            continue
        received += len(chunk)
        if received > limit:
            raise _too_large("body", limit)
        if gunzip is not None:
            gunzip.feed(chunk)
        else:
            raw += chunk
    if gunzip is not None:
        return gunzip.finish()
    return bytes(raw)


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------


def body_hash(fmt: BodyFormat, body: bytes) -> str:
    """SHA-256 (hex) identifying a decoded body, for Idempotency-Key comparison."""
    h = hashlib.sha256(fmt.encode())
    h.update(b"\0")
    h.update(body)
    return h.hexdigest()


def decode(fmt: BodyFormat, body: bytes, *, max_bytes: int) -> DecodedSubmission:
    """Decode a (decompressed) body of format ``fmt``; 400 if unreadable, 422 if invalid.

    ``max_bytes`` bounds the uncompressed content of an NPZ archive (413 above it).
    """
    out = decode_json(body) if fmt == "json" else decode_npz(body, max_bytes=max_bytes)
    out.body_hash = body_hash(fmt, body)
    return out


def _rectangular(name: str, rows: list[list[Any]], dtype: Any = np.float64) -> np.ndarray:
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ApiError(
                422,
                f"{name} must be a rectangular matrix; row {i} has {len(row)} entries, "
                f"row 0 has {width}",
                field=name,
                index=i,
            )
    return np.asarray(rows, dtype=dtype)


def _tensor(name: str, members: list[list[list[float]]]) -> np.ndarray:
    """An M×N×C array from nested lists (every member N×C, every row of length C)."""
    rows, width = len(members[0]), len(members[0][0])
    for m, member in enumerate(members):
        if len(member) != rows or any(len(r) != width for r in member):
            raise ApiError(
                422,
                f"{name} must be an M×N×C array; member {m} is not {rows}×{width} as member 0 is",
                field=name,
                index=m,
            )
    return np.asarray(members, dtype=np.float64)


_M = TypeVar("_M", bound=BaseModel)


def parse_json(model: type[_M], raw: bytes, *, member: str | None = None) -> _M:
    """``model`` parsed from the JSON bytes ``raw`` — the request body (invalid JSON: 400) or
    the NPZ member ``member`` (422) — with validation errors as 422 naming the field."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            what = "body" if member is None else f"NPZ member {member!r}"
            raise ApiError(
                400 if member is None else 422,
                f"{what} is not valid JSON: {errors[0].get('msg')}",
                field=member or "body",
            ) from None
        raise pydantic_error([dict(e) for e in errors], prefix=member) from None


def decode_json(body: bytes) -> DecodedSubmission:
    """A :class:`SubmissionCreate` JSON document as arrays."""
    if not body.strip():
        raise ApiError(400, "body is empty; expected a JSON submission", field="body")
    doc = parse_json(SubmissionCreate, body)
    pred = doc.prediction
    kind = pred.kind
    arrays: dict[str, np.ndarray] = {}
    for f in KIND_FIELDS[kind]:
        value = getattr(pred, f)
        if value is None:  # an optional field, or the unused alternative of an ensemble
            continue
        rank = field_rank(f)
        if rank == 3:
            arrays[f] = _tensor(f"prediction.{f}", value)
        elif rank == 2:
            dtype = bool if f in BOOL_FIELDS else np.float64
            arrays[f] = _rectangular(f"prediction.{f}", value, dtype)
        else:  # a vector, or a number (a 0-d array)
            arrays[f] = np.asarray(value, dtype=np.float64)
    estimates = {
        name: np.asarray(v, dtype=np.float64)
        for name, v in (getattr(pred, "estimates", None) or {}).items()
    }
    return DecodedSubmission(
        format="json",
        kind=kind,
        model_name=doc.model_name,
        metadata=doc.metadata,
        analyses=doc.analyses,
        prediction=arrays,
        y=None if doc.y is None else np.asarray(doc.y, dtype=np.float64),
        sample_weight=(
            None if doc.sample_weight is None else np.asarray(doc.sample_weight, dtype=np.float64)
        ),
        groups=None if doc.groups is None else np.asarray(doc.groups, dtype=np.int64),
        visibility=doc.visibility,
        benchmark_id=doc.benchmark_id,
        callback_url=doc.callback_url,
        labels=None if doc.labels is None else np.asarray(doc.labels, dtype=np.int64),
        soft_labels=None
        if doc.soft_labels is None
        else _rectangular("soft_labels", doc.soft_labels),
        ood=None if doc.ood is None else np.asarray(doc.ood, dtype=bool),
        estimates=estimates,
    )


#: The integer arrays of a body and the range of their values (as in the JSON models).
INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "labels": (0, MAX_LABEL),
    "groups": (MIN_GROUP, MAX_GROUP),
}


def check_integers(name: str, a: np.ndarray) -> None:
    """A 422 naming the first entry of the NPZ member ``name`` (a vector of any real dtype)
    that is not a whole number in its :data:`INTEGER_RANGES`; checked on the values as stored,
    before any cast to int64 could wrap them (uint64 2**64 - 1 would become -1, float 1e30 the
    most negative int64)."""
    lo, hi = INTEGER_RANGES[name]
    if a.ndim != 1 or a.dtype.kind not in "iuf":
        return  # the shape and dtype rules of the field report it
    for start, stop in row_blocks(a.shape[0]):
        block = a[start:stop]
        if a.dtype.kind == "u":
            bad = block > np.uint64(hi)
        elif a.dtype.kind == "i":
            info = np.iinfo(a.dtype)
            bad = (block < max(lo, info.min)) | (block > min(hi, info.max))
        else:
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(block) | (block != np.floor(block)) | (block < lo) | (block > hi)
        hits = np.flatnonzero(bad)
        release(a)
        if hits.size:
            i = start + int(hits[0])
            raise ApiError(
                422,
                f"{name}[{i}] = {a[i].item()!r} is not an integer in [{lo}, {hi}]",
                field=name,
                index=i,
            )


def _read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, spool: Spool | None = None
) -> np.ndarray:
    """One ``.npy`` member, its header checked before any allocation (memory-mapped from a
    file of ``spool`` when large)."""
    return read_member(zf, info, name, spool)


def _open_zip(body: bytes | Path | IO[bytes]) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(body) if isinstance(body, bytes) else body)
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ApiError(400, f"body is not an NPZ (zip) archive: {exc}", field="body") from None


def decode_npz(
    body: bytes | Path | IO[bytes],
    *,
    max_bytes: int,
    max_request_bytes: int = MAX_REQUEST_MEMBER_BYTES,
    spool: Spool | None = None,
) -> DecodedSubmission:
    """An NPZ archive (see the module docstring for its members) as arrays: the bytes, or a
    spooled file (or a seekable file object, e.g. an upload's stored parts) whose large
    members are extracted to files of ``spool`` and memory-mapped."""
    zf = _open_zip(body)
    with zf:
        infos: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in unique_members(zf):
            if not info.filename.endswith(".npy") or "/" in info.filename:
                raise ApiError(
                    422,
                    f"NPZ member {info.filename!r} is not a top-level .npy array",
                    field=info.filename,
                )
            name = info.filename[: -len(".npy")]
            infos[name] = info
            total += info.file_size
        if total > max_bytes:
            # Members may be deflated (savez_compressed): bound what they inflate to.
            raise _too_large("NPZ content (uncompressed)", max_bytes)
        if "request" not in infos:
            raise ApiError(
                422,
                "NPZ upload needs a 'request' member: a 0-d string array with the JSON of "
                "kind, model_name, metadata and analyses",
                field="request",
            )
        req_info = infos.pop("request")
        if req_info.file_size > 4 * max_request_bytes + 4096:  # UTF-32 text plus the header
            raise _too_large("NPZ member 'request'", max_request_bytes)
        req_arr = _read_member(zf, req_info, "request")
        if req_arr.ndim != 0 or req_arr.dtype.kind not in "US":
            raise ApiError(
                422,
                f"NPZ member 'request' must be a 0-d string array; found dtype {req_arr.dtype}, "
                f"shape {req_arr.shape}",
                field="request",
            )
        text = req_arr.item()
        raw = text.encode() if isinstance(text, str) else bytes(text)
        if len(raw) > max_request_bytes:
            raise _too_large("NPZ member 'request'", max_request_bytes)
        req = parse_json(SubmissionRequest, raw, member="request")
        kind = req.kind
        classification = kind in CLASSIFICATION_KINDS
        with_targets = req.benchmark_id is None
        extra_targets = CLASSIFICATION_TARGETS if classification else ()
        targets = (target_field(kind), *OPTIONAL_ARRAYS, *extra_targets) if with_targets else ()
        wanted = (*KIND_FIELDS[kind], *targets)
        unexpected = sorted(
            n
            for n in set(infos) - set(wanted)
            if not (
                classification and n.startswith(ESTIMATE_PREFIX) and len(n) > len(ESTIMATE_PREFIX)
            )
        )
        if unexpected:
            raise ApiError(
                422,
                f"NPZ member(s) {unexpected} are not fields of a {kind} submission"
                f"{'' if with_targets else ' against a benchmark (its targets are hidden)'}; "
                f"expected {list(wanted)}"
                f"{', estimate:<name>' if classification else ''} and 'request'",
                field=unexpected[0],
            )
        # An ensemble's one-of fields are checked with the kind's rules (validation).
        for f in (*required_fields(kind), *targets[:1]):
            if f not in infos:
                raise ApiError(422, f"NPZ upload of kind {kind!r} needs a member {f!r}", field=f)
        arrays = {name: _read_member(zf, info, name, spool) for name, info in infos.items()}
    for name, a in arrays.items():
        if (name == "ood" or name in BOOL_FIELDS) and a.dtype.kind == "b":
            continue
        if a.dtype.kind not in "iuf":
            what = (
                "booleans (bool dtype, or the numbers 0 and 1)"
                if name in BOOL_FIELDS
                else "real numbers (integer or float dtype)"
            )
            raise ApiError(422, f"{name} must hold {what}; found dtype {a.dtype}", field=name)
    groups = arrays.get("groups")
    if groups is not None and groups.dtype.kind not in "iu":
        raise ApiError(
            422, f"groups must hold integers; found dtype {groups.dtype}", field="groups"
        )
    for name in INTEGER_RANGES:
        if name in arrays:
            check_integers(name, arrays[name])
    return DecodedSubmission(
        format="npz",
        kind=kind,
        model_name=req.model_name,
        metadata=req.metadata,
        analyses=req.analyses,
        prediction={f: arrays[f] for f in KIND_FIELDS[kind] if f in arrays},
        y=arrays.get("y"),
        sample_weight=arrays.get("sample_weight"),
        groups=groups,
        visibility=req.visibility,
        benchmark_id=req.benchmark_id,
        callback_url=req.callback_url,
        labels=arrays.get("labels"),
        soft_labels=arrays.get("soft_labels"),
        ood=arrays.get("ood"),
        estimates={
            n[len(ESTIMATE_PREFIX) :]: a for n, a in arrays.items() if n.startswith(ESTIMATE_PREFIX)
        },
    )


# --------------------------------------------------------------------------------------------
# benchmark bodies
# --------------------------------------------------------------------------------------------


#: The array members of a benchmark body: the targets of either task, and the optional arrays.
BENCHMARK_ARRAYS = ("y", "labels", "soft_labels", "ood", "groups", "private_mask")


def decode_benchmark(
    fmt: BodyFormat, body: bytes | Path | IO[bytes], *, max_bytes: int, spool: Spool | None = None
) -> tuple[BenchmarkRequest, dict[str, np.ndarray]]:
    """A benchmark body as (settings, arrays): a :class:`BenchmarkCreate` JSON document, or an
    NPZ archive with members among ``y`` (regression targets), ``labels``, ``soft_labels``,
    ``ood`` (classification), ``groups`` (integers), and ``request`` (a 0-d string array with
    the JSON of :class:`BenchmarkRequest`). 400 if unreadable, 422 if invalid. ``arrays``
    holds the members given; which ones the task needs, and their values, are checked by the
    caller (y, when given, is already a non-empty finite vector)."""
    if fmt == "json":
        assert isinstance(body, bytes), "JSON bodies are read into memory"
        if not body.strip():
            raise ApiError(400, "body is empty; expected a JSON benchmark", field="body")
        doc = parse_json(BenchmarkCreate, body)
        try:
            req = BenchmarkRequest.model_validate(doc.model_dump(exclude=set(BENCHMARK_ARRAYS)))
        except ValidationError as exc:  # what the JSON parse accepted must parse again
            raise pydantic_error([dict(e) for e in exc.errors()]) from None
        arrays: dict[str, np.ndarray] = {}
        if doc.y is not None:
            arrays["y"] = np.asarray(doc.y, dtype=np.float64)
        if doc.labels is not None:
            arrays["labels"] = np.asarray(doc.labels, dtype=np.int64)
        if doc.soft_labels is not None:
            arrays["soft_labels"] = _rectangular("soft_labels", doc.soft_labels)
        if doc.ood is not None:
            arrays["ood"] = np.asarray(doc.ood, dtype=bool)
        if doc.groups is not None:
            arrays["groups"] = np.asarray(doc.groups, dtype=np.int64)
        if doc.private_mask is not None:
            arrays["private_mask"] = np.asarray(doc.private_mask, dtype=bool)
        return req, arrays
    zf = _open_zip(body)
    with zf:
        infos = {i.filename.removesuffix(".npy"): i for i in unique_members(zf)}
        unexpected = sorted(set(infos) - {*BENCHMARK_ARRAYS, "request"})
        if unexpected:
            raise ApiError(
                422,
                f"NPZ member(s) {unexpected} are not fields of a benchmark; expected 'y' "
                "(regression) or 'labels' with optionally 'soft_labels' and 'ood' "
                "(classification), optionally 'groups' and 'private_mask', and 'request'",
                field=unexpected[0],
            )
        if sum(i.file_size for i in infos.values()) > max_bytes:
            raise _too_large("NPZ content (uncompressed)", max_bytes)
        if "request" not in infos:
            raise ApiError(422, "NPZ benchmark upload needs a member 'request'", field="request")
        arrays = {name: _read_member(zf, info, name, spool) for name, info in infos.items()}
    req_arr = arrays.pop("request")
    if req_arr.ndim != 0 or req_arr.dtype.kind not in "US":
        raise ApiError(422, "NPZ member 'request' must be a 0-d string array", field="request")
    text = req_arr.item()
    raw = text.encode() if isinstance(text, str) else bytes(text)
    req = parse_json(BenchmarkRequest, raw, member="request")
    target = "labels" if req.task == "classification" else "y"
    if target not in arrays:
        raise ApiError(
            422, f"NPZ {req.task} benchmark upload needs a member {target!r}", field=target
        )
    y = arrays.get("y")
    if y is not None:
        if y.dtype.kind not in "iuf" or y.ndim != 1 or y.shape[0] == 0:
            raise ApiError(
                422,
                f"y must be a non-empty vector of real numbers; found dtype {y.dtype}, shape "
                f"{tuple(y.shape)}",
                field="y",
            )
        for start, stop in row_blocks(y.shape[0]):
            bad = np.flatnonzero(~np.isfinite(y[start:stop]))
            release(y)
            if bad.size:
                i = start + int(bad[0])
                raise ApiError(422, f"y must be finite; y[{i}] is not", field="y", index=i)
        arrays["y"] = converted(y, np.float64, spool) if spool is not None else y.astype(np.float64)
    for name in ("labels", "soft_labels", "ood"):
        a = arrays.get(name)
        if a is not None and a.dtype.kind not in ("iufb" if name == "ood" else "iuf"):
            raise ApiError(422, f"{name} must hold numbers; found dtype {a.dtype}", field=name)
    groups = arrays.get("groups")
    if groups is not None and (groups.dtype.kind not in "iu" or groups.ndim != 1):
        raise ApiError(
            422,
            f"groups must be a vector of integers; found dtype {groups.dtype}, shape "
            f"{tuple(groups.shape)}",
            field="groups",
        )
    for name in INTEGER_RANGES:
        if name in arrays:
            check_integers(name, arrays[name])
    return req, arrays
