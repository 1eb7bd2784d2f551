"""Large request bodies on local disk: streamed in with limits, NPZ members extracted as files.

A body of ``POST /v1/submissions``, ``POST /v1/benchmarks`` or a resumable upload's part is
written to a file in a per-request directory under the setting ``scratch_dir`` as it arrives
(gzip decoded on the way), counted against its limit, and hashed; it is never held whole in
memory (but for an NPZ submission of at most :data:`MEMORY_BODY_BYTES`, read in memory: a file
per request would cost more than its bytes). An NPZ archive is then read from that file member by member (stored and deflated
members alike stream out of :mod:`zipfile`) into one ``.npy`` file per member, which is
memory-mapped read-only for validation. Validation reads the arrays in blocks of
:data:`CHUNK_ROWS` rows and gives the pages of each block back after use (:func:`release`),
so the API's resident memory stays bounded whatever N.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npy_format

from service import blobs
from service.api.errors import ApiError, out_of_space
from service.settings import Settings

__all__ = [
    "CHUNK_ROWS",
    "MEMORY_BODY_BYTES",
    "GunzipTo",
    "Sink",
    "Spool",
    "release",
    "row_blocks",
    "scratch_dir",
    "spool_body",
]

#: Rows validated at a time: ~8 MB of float64 per array column.
CHUNK_ROWS = 1 << 20
#: Members smaller than this are read into memory (as before spooling existed).
INLINE_MEMBER_BYTES = 1 << 20
#: Bytes copied at a time from the request stream or an archive member.
COPY_BYTES = 1 << 20
#: An NPZ body of at most this many bytes (declared Content-Length, not gzip-encoded) is read
#: into memory rather than spooled to a file: a file and a directory per request cost more
#: than the bytes (a 10^4-row Gaussian is 240 kB). Its members are read as a spooled body's
#: are (a deflated member inflating past INLINE_MEMBER_BYTES goes to a file).
MEMORY_BODY_BYTES = 1 << 20


def scratch_dir(settings: Settings) -> Path:
    """The blob store's scratch directory (:func:`service.blobs.scratch_dir`), created when
    missing."""
    root = blobs.scratch_dir(settings)
    root.mkdir(parents=True, exist_ok=True)
    return root


class Spool:
    """A private directory for one request's files, removed (with them) by :meth:`close`;
    made when first used (a small body read in memory may need none)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._dir: Path | None = None
        self._n = 0

    @property
    def dir(self) -> Path:
        """The directory (made now if it is not yet)."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="spool-", dir=scratch_dir(self._settings)))
        return self._dir

    @property
    def used(self) -> bool:
        """Whether the directory was made (so :meth:`close` has something to remove)."""
        return self._dir is not None

    def path(self, suffix: str = "") -> Path:
        """A new file name in the directory."""
        self._n += 1
        return self.dir / f"{self._n}{suffix}"

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def too_large(what: str, limit: int) -> ApiError:
    return ApiError(413, f"{what} exceeds the limit of {limit} bytes", field="body")


def declared_length(content_length: str | None, limit: int) -> int | None:
    """The declared Content-Length (400 if not an integer, 413 over ``limit``)."""
    if content_length is None:
        return None
    try:
        declared = int(content_length)
    except ValueError:
        raise ApiError(400, "Content-Length must be an integer", field="Content-Length") from None
    if declared > limit:
        raise too_large("body", limit)
    return declared


class Sink:
    """Where decoded bytes go: a file, counted against ``limit`` and hashed."""

    def __init__(self, fh: Any, limit: int, what: str, digest: Any) -> None:
        self.fh, self.limit, self.what, self.digest = fh, limit, what, digest
        self.size = 0

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise too_large(self.what, self.limit)
        self.digest.update(data)
        self.fh.write(data)


class GunzipTo:
    """Incremental gzip decoding into a sink (concatenated members are one body)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        if self._d.eof:
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while data:
            try:
                out = self._d.decompress(data, COPY_BYTES)
            except zlib.error as exc:
                raise ApiError(400, f"body is not valid gzip: {exc}", field="body") from None
            self.sink.write(out)
            if self._d.eof:
                data = self._d.unused_data
                if data:
                    self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                data = self._d.unconsumed_tail

    def finish(self) -> None:
        if not self._d.eof:
            raise ApiError(400, "body is not valid gzip: truncated stream", field="body")


async def spool_body(
    chunks: AsyncIterator[bytes],
    path: Path,
    *,
    content_length: str | None,
    limit: int,
    gzip: bool,
    prefix: bytes = b"",
) -> tuple[int, str]:
    """Write a body from ``chunks`` to ``path`` (gzip decoded), refusing (413) more than
    ``limit`` bytes received or decoded; the decoded size and the SHA-256 (hex) of ``prefix``
    followed by the decoded bytes."""
    declared_length(content_length, limit)
    digest = hashlib.sha256(prefix)
    received = 0
    with open(path, "wb") as fh:
        sink = Sink(fh, limit, "decompressed body" if gzip else "body", digest)
        gunzip = GunzipTo(sink) if gzip else None
        async for chunk in chunks:
            if not chunk:
                continue
            received += len(chunk)
            if received > limit:
                raise too_large("body", limit)
            if gunzip is not None:
                gunzip.feed(chunk)
            else:
                sink.write(chunk)
        if gunzip is not None:
            gunzip.finish()
    return sink.size, digest.hexdigest()


def gunzip_file(src: Path, dst: Path, *, limit: int, prefix: bytes = b"") -> tuple[int, str]:
    """:func:`spool_body` for a body already on disk (a completed resumable upload)."""
    digest = hashlib.sha256(prefix)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        sink = Sink(fout, limit, "decompressed body", digest)
        gunzip = GunzipTo(sink)
        while block := fin.read(COPY_BYTES):
            gunzip.feed(block)
        gunzip.finish()
    return sink.size, digest.hexdigest()


# --------------------------------------------------------------------------------------------
# NPZ members as files
# --------------------------------------------------------------------------------------------


def unique_members(zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The archive's members; a name that appears twice (``x.npy`` and ``x`` count as one) is
    refused (422): which of the two was meant cannot be told, and reading one would silently
    drop the other."""
    infos = zf.infolist()
    seen: set[str] = set()
    for info in infos:
        name = info.filename.removesuffix(".npy")
        if name in seen:
            raise ApiError(
                422, f"NPZ member {name!r} appears more than once in the archive", field=name
            )
        seen.add(name)
    return infos


def member_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> tuple[Any, ...]:
    """The ``.npy`` header of a member (shape, fortran order, dtype), checked before anything
    is allocated: no object dtype, and exactly the bytes its shape and dtype declare after
    the header (fewer, and the array is cut short; more, and bytes would be dropped)."""
    try:
        with zf.open(info) as fp:
            version = npy_format.read_magic(fp)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(fp)
            else:
                shape, fortran, dtype = npy_format.read_array_header_2_0(fp)
            data_bytes = info.file_size - fp.tell()
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        if out_of_space(exc):
            raise
        raise ApiError(
            422, f"NPZ member {name!r} is not a valid .npy array: {exc}", field=name
        ) from None
    if dtype.hasobject:
        raise ApiError(
            422,
            f"NPZ member {name!r} holds Python objects (pickled data), which are refused; "
            "send numeric arrays",
            field=name,
        )
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    declared = count * dtype.itemsize
    if declared != data_bytes:
        holds = "only " if declared > data_bytes else ""
        raise ApiError(
            422,
            f"NPZ member {name!r} declares shape {tuple(shape)} of {dtype} ({declared} bytes) "
            f"but holds {holds}{data_bytes} bytes after its header",
            field=name,
        )
    return tuple(shape), fortran, dtype


def read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, spool: Spool | None
) -> np.ndarray:
    """One ``.npy`` member: in memory when small or without a spool, else copied block by
    block to a file of the spool and memory-mapped read-only."""
    shape, _fortran, dtype = member_header(zf, info, name)
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    errors = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)
    if spool is None or count * dtype.itemsize < INLINE_MEMBER_BYTES or not shape:
        try:
            with zf.open(info) as fp:
                array: np.ndarray = npy_format.read_array(fp, allow_pickle=False)
                return array
        except errors as exc:
            raise ApiError(422, f"NPZ member {name!r} cannot be read: {exc}", field=name) from None
    path = spool.path(".npy")
    try:
        with zf.open(info) as fp, open(path, "wb") as out:
            shutil.copyfileobj(fp, out, COPY_BYTES)  # the CRC is checked at the member's end
        mapped: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except errors as exc:
        if out_of_space(exc):  # the scratch disk is full: not the member's fault (507)
            raise
        raise ApiError(422, f"NPZ member {name!r} cannot be read: {exc}", field=name) from None
    return mapped


# --------------------------------------------------------------------------------------------
# blocks of rows
# --------------------------------------------------------------------------------------------


def row_blocks(n: int, rows: int | None = None) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive blocks of at most ``rows`` (default
    :data:`CHUNK_ROWS`) rows covering ``n``."""
    rows = rows or CHUNK_ROWS
    for start in range(0, n, rows):
        yield start, min(n, start + rows)


def release(*arrays: Any) -> None:
    """Give back the resident pages of memory-mapped ``arrays`` (the file keeps the data; a
    later read maps it again), so that reading a large array block by block does not leave
    all of it counted in the process's memory."""
    for a in arrays:
        mm = getattr(a, "_mmap", None)
        if isinstance(mm, mmap.mmap) and not mm.closed:
            with contextlib.suppress(OSError, ValueError, AttributeError):  # not Linux
                mm.madvise(mmap.MADV_DONTNEED)


def is_mapped(a: Any) -> bool:
    """Whether ``a`` is a memory-mapped array of a spooled file."""
    return isinstance(getattr(a, "_mmap", None), mmap.mmap)


def converted(a: np.ndarray, dtype: Any, spool: Spool) -> np.ndarray:
    """``a`` as ``dtype``: in memory when small, else written block by block to a spooled
    ``.npy`` file and memory-mapped (an astype of a large memory-mapped array would allocate
    all of it)."""
    if a.dtype == dtype:
        return a
    if not is_mapped(a) or a.ndim == 0:
        return a.astype(dtype)
    path = spool.path(".npy")
    out = npy_format.open_memmap(path, mode="w+", dtype=dtype, shape=a.shape)
    for start, stop in row_blocks(a.shape[0]):
        out[start:stop] = a[start:stop]
        release(a, out)
    out.flush()
    del out
    result: np.ndarray = np.load(path, mmap_mode="r")
    return result
