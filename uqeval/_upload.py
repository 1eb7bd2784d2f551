"""The resumable upload of a large body, as one operation of the sans-I/O core: create (or
read the state of the upload to resume) -> PUT each missing part with its checksum, sending a
damaged part again -> complete."""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from uqeval._base import NPZ_MEDIA, ClientBase
from uqeval._http import Call, Op, ProgressFn, Sleep
from uqeval.errors import BadRequest, RateLimited, ServerUnavailable, UploadInterrupted


class UploadBody:
    """The bytes of a resumable upload: in memory, or a file read one part at a time."""

    def __init__(self, body: bytes | str | os.PathLike[str]) -> None:
        if isinstance(body, (bytes, bytearray, memoryview)):
            self.data: bytes | None = bytes(body)
            self.path: Path | None = None
            self.size = len(self.data)
        else:
            self.data, self.path = None, Path(body)
            self.size = self.path.stat().st_size
        self._sha256: str | None = None

    @property
    def source(self) -> bytes | Path:
        return self.data if self.data is not None else Path(str(self.path))

    def read(self, offset: int, length: int) -> bytes:
        if self.data is not None:
            return self.data[offset : offset + length]
        assert self.path is not None
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            return fh.read(length)

    def sha256(self) -> str:
        if self._sha256 is None:
            h = hashlib.sha256()
            for offset in range(0, self.size, 1 << 24):
                h.update(self.read(offset, 1 << 24))
            self._sha256 = h.hexdigest()
        return self._sha256


def content_digest(data: bytes) -> str:
    """The ``Content-Digest`` header of ``data`` (RFC 9530, sha-256)."""
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


class UploadCalls(ClientBase):
    """The resumable upload: its requests, and the operation that sends a body by it."""

    def _resumable(self, call: Call) -> bool:
        """Whether ``call`` (a submission or benchmark POST) goes by the resumable upload: an
        NPZ body of at least ``upload_threshold_bytes``."""
        return (
            call.content is not None
            and len(call.content) >= self.upload_threshold_bytes
            and call.headers.get("Content-Type") == NPZ_MEDIA
        )

    @staticmethod
    def _upload_create_call(body: UploadBody, *, purpose: str, encoding: str | None) -> Call:
        # Repeating a create after a lost answer only leaves an unused upload, which expires.
        doc = {
            "size": body.size,
            "sha256": body.sha256(),
            "content_type": NPZ_MEDIA,
            "content_encoding": encoding,
            "purpose": purpose,
        }
        return Call("POST", "/v1/uploads", policy="submit", json=doc, ok=(201,))

    @staticmethod
    def _upload_status_call(upload_id: str) -> Call:
        return Call("GET", f"/v1/uploads/{quote(upload_id, safe='')}")

    @staticmethod
    def _upload_part_call(upload_id: str, n: int, data: bytes, progress: ProgressFn | None) -> Call:
        return Call(
            "PUT",
            f"/v1/uploads/{quote(upload_id, safe='')}/parts/{n}",
            policy="read",  # a part sent again replaces itself
            content=data,
            headers={
                "Content-Type": "application/octet-stream",
                "Content-Digest": content_digest(data),
            },
            upload_progress=progress,
        )

    @staticmethod
    def _upload_complete_call(upload_id: str, idempotency_key: str) -> Call:
        return Call(
            "POST",
            f"/v1/uploads/{quote(upload_id, safe='')}/complete",
            policy="submit",  # completing again answers the same
            headers={"Idempotency-Key": idempotency_key},
            ok=(201, 202),
        )

    @staticmethod
    def _parts_to_send(info: dict[str, Any], body: UploadBody) -> list[tuple[int, int, int]]:
        """(part number, offset, length) of every part the server does not hold yet."""
        if int(info["size"]) != body.size:
            raise BadRequest(
                f"upload {info['id']} is of {info['size']} bytes; the body given has "
                f"{body.size}: resume it with the same body",
                field="upload_id",
            )
        part, received = int(info["part_size"]), set(info["received"])
        return [
            (n, (n - 1) * part, min(part, body.size - (n - 1) * part))
            for n in range(1, int(info["parts"]) + 1)
            if n not in received
        ]

    @staticmethod
    def _interrupted(upload_id: str, body: UploadBody, exc: Exception) -> Exception:
        return UploadInterrupted(
            f"the upload {upload_id} stopped before all its parts were sent ({exc}); resume it "
            f"with client.resume_upload({upload_id!r}, body) or `uqeval submit FILE "
            f"--resume-upload {upload_id}` with the same file and options",
            upload_id=upload_id,
            upload_body=body.source,
        )

    def _post_body(self, call: Call, purpose: str, upload_id: str | None = None) -> Op[Any]:
        """The answer to ``call`` (a submission or benchmark POST): sent as it is, or by the
        resumable upload when its body is large (or ``upload_id`` names one to resume)."""
        if upload_id is None and not self._resumable(call):
            return (yield from self._json(call))
        assert call.content is not None
        answer = yield from self._upload(
            UploadBody(call.content),
            purpose=purpose,
            encoding=call.headers.get("Content-Encoding"),
            idempotency_key=call.headers.get("Idempotency-Key") or uuid.uuid4().hex,
            progress=call.upload_progress,
            upload_id=upload_id,
        )
        return answer.json()

    def _upload(
        self,
        body: UploadBody,
        *,
        purpose: str,
        encoding: str | None,
        idempotency_key: str,
        progress: ProgressFn | None,
        upload_id: str | None = None,
    ) -> Op[httpx.Response]:
        """Send ``body`` by the resumable upload (a new one, or the parts ``upload_id`` lacks)
        and complete it: the answer of the completion."""
        if upload_id is None:
            call = self._upload_create_call(body, purpose=purpose, encoding=encoding)
        else:
            call = self._upload_status_call(upload_id)
        info = yield from self._json(call)
        upload_id = str(info["id"])
        todo = self._parts_to_send(info, body)
        done = body.size - sum(length for _, _, length in todo)
        if progress is not None:
            progress(done, body.size)
        try:
            for n, offset, length in todo:
                data = body.read(offset, length)
                shown = None if progress is None else _offset(progress, done, body.size)
                for attempt in range(self.retries + 1):
                    try:
                        yield from self._send(self._upload_part_call(upload_id, n, data, shown))
                        break
                    except BadRequest as exc:  # damaged on the way: send it again
                        if exc.code != "digest_mismatch" or attempt >= self.retries:
                            raise
                done += length
        except (ServerUnavailable, RateLimited) as exc:
            raise self._interrupted(upload_id, body, exc) from exc
        return (yield from self._complete(upload_id, idempotency_key))

    def _complete(self, upload_id: str, idempotency_key: str) -> Op[httpx.Response]:
        """The answer of the completion. While another completion of the upload runs (a
        first try whose answer was lost, another client of the same upload), the server
        answers 409 ``upload_completing`` after waiting for it a while: asked again, for at
        most :data:`COMPLETING_WAIT_S`, it answers what that completion answered."""
        deadline = time.monotonic() + COMPLETING_WAIT_S
        while True:
            try:
                return (
                    yield from self._send(self._upload_complete_call(upload_id, idempotency_key))
                )
            except BadRequest as exc:
                if exc.code != "upload_completing" or time.monotonic() >= deadline:
                    raise
            yield Sleep(COMPLETING_POLL_S)


#: For how long the client asks again for the answer of an upload that another request is
#: completing (each ask waits up to 30 s on the server), and the pause between asks.
COMPLETING_WAIT_S = 600.0
COMPLETING_POLL_S = 1.0


def _offset(progress: ProgressFn, done: int, total: int) -> ProgressFn:
    """``progress`` of one part as progress of the whole body (``done`` bytes before it)."""
    return lambda sent, _part: progress(done + sent, total)
