"""The array codec of the store: where the arrays of a submission or a benchmark are kept.

Each array is one uncompressed ``.npy`` object in the blob store (:mod:`service.blobs`), under
``submissions/<id>/<name>.npy`` or ``benchmarks/<id>/<name>.npy``, read back memory-mapped.
Redis keeps only a small manifest in the hash :func:`service.keys.arrays` /
:func:`service.keys.benchmark_arrays` (field ``manifest``: per array its dtype, shape, codec ``npy``
and, for a referenced :class:`~service.blobs.StoredArray`, its object key), so that the hash's TTL still says how long the arrays live.

The previous codec kept the arrays themselves in that hash: ``np.save`` bytes cut into chunks
of at most :data:`CHUNK_BYTES`, zlib-compressed where that pays, as fields ``{name}:{i}``
(codec ``npy+zlib``). Data written that way is still read (:func:`read_arrays` reads both), so
nothing stored before the blob store is lost; :func:`array_fields` still writes it, for tests
of that path only.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from service.blobs import BlobNotFound, BlobStore, StoredArray

__all__ = [
    "BLOB_CODEC",
    "CHUNK_BYTES",
    "CODEC",
    "array_fields",
    "blob_keys",
    "blob_name",
    "decode_array",
    "encode_array",
    "put_arrays",
    "read_arrays",
    "write_blobs",
]

#: An array stored as one ``.npy`` object in the blob store.
BLOB_CODEC = "npy"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._:-]+$")

#: Largest raw (uncompressed) piece of an array stored in one Redis value.
CHUNK_BYTES = 16 << 20
#: zlib level: 1 compresses float data nearly as well as 6 at several times the speed.
ZLIB_LEVEL = 1
#: ``np.save`` bytes in chunks; each chunk is tagged ``z`` (zlib) or ``r`` (raw).
CODEC = "npy+zlib"
#: A chunk is compressed when a zlib sample of its first SAMPLE_BYTES shrinks below this
#: ratio; random float64 data (most predictions) does not (~0.96), and compressing it
#: anyway would cost ~1 s per 24 MB for nothing.
COMPRESS_BELOW = 0.85
SAMPLE_BYTES = 256 << 10


def encode_array(array: np.ndarray[Any, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """``np.save`` bytes of ``array`` (no pickle) cut into CHUNK_BYTES pieces; each piece
    is zlib-compressed (tag ``z``) when a sample of it compresses below COMPRESS_BELOW,
    else kept as is (tag ``r``)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array, order="C"), allow_pickle=False)  # 0-d stays 0-d
    raw = buf.getbuffer()
    chunks = []
    for i in range(0, max(len(raw), 1), CHUNK_BYTES):
        piece = raw[i : i + CHUNK_BYTES]
        sample = piece[:SAMPLE_BYTES]
        if len(zlib.compress(sample, ZLIB_LEVEL)) < COMPRESS_BELOW * max(len(sample), 1):
            chunks.append(b"z" + zlib.compress(piece, ZLIB_LEVEL))
        else:
            chunks.append(b"r" + piece)
    meta = {
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "chunks": len(chunks),
        "codec": CODEC,
    }
    return meta, chunks


def decode_array(meta: Mapping[str, Any], chunks: Iterable[Any]) -> np.ndarray[Any, Any]:
    """Inverse of :func:`encode_array` (loaded with ``allow_pickle=False``)."""
    if meta.get("codec") != CODEC:
        raise ValueError(f"unknown array codec {meta.get('codec')!r}")
    parts: list[bytes | memoryview] = []
    for chunk in chunks:
        view = memoryview(chunk)
        tag, body = bytes(view[:1]), view[1:]
        if tag == b"z":
            parts.append(zlib.decompress(body))
        elif tag == b"r":
            parts.append(body)
        else:
            raise ValueError(f"unknown chunk tag {tag!r}")
    raw = b"".join(parts)
    out: np.ndarray[Any, Any] = np.load(io.BytesIO(raw), allow_pickle=False)
    return out


def array_fields(arrays: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the hash holding ``arrays``: ``manifest``, then the chunks ``{name}:{i}``."""
    manifest: dict[str, Any] = {}
    blobs: dict[str, bytes] = {}
    for name, array in arrays.items():
        meta, chunks = encode_array(np.asarray(array))
        manifest[name] = meta
        for i, chunk in enumerate(chunks):
            blobs[f"{name}:{i}"] = chunk
    return {"manifest": json.dumps(manifest), **blobs}


def put_arrays(pipe: Any, arr_key: str, fields: Mapping[str, Any]) -> None:
    """Queue the writes of :func:`array_fields` on ``pipe``."""
    # One HSET per field: a large batch in one command could pass Redis' protocol limits.
    for name, value in fields.items():
        pipe.hset(arr_key, name, value)


def blob_name(prefix: str, name: str) -> str:
    """The object key of array ``name`` under ``prefix`` (``submissions/<id>/``): the name
    itself when it is a valid key segment, else a safe spelling of it plus a hash (distinct
    names never share a key)."""
    if _SAFE_NAME.match(name) and name not in (".", ".."):
        return f"{prefix}{name}.npy"
    safe = re.sub(r"[^A-Za-z0-9._:-]", "_", name)[:64]
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{prefix}{safe}-{digest}.npy"


def npy_file_of(value: Any) -> Path | None:
    """The ``.npy`` file that the memory map ``value`` is the whole of (``np.load(path,
    mmap_mode="r")`` of an unchanged file), else None."""
    if not isinstance(value, np.memmap) or not value.filename:
        return None
    if not value.flags.c_contiguous or value.dtype.hasobject:
        return None
    path = Path(value.filename)
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(fh)
            header = fh.tell()
    except (OSError, ValueError):
        return None
    if (
        fortran
        or tuple(shape) != value.shape
        or dtype != value.dtype
        or value.offset != header
        or header + value.nbytes != size
    ):
        return None
    return path


def _spooled(path: Path, scratch: Path) -> bool:
    """Whether ``path`` is a file of a request's spool directory (``<scratch>/spool-*/``),
    which only that request uses and removes at its end: moved into the blob store rather than
    copied, so that its arrays are not held twice on disk (the memory map stays valid)."""
    parent = path.resolve().parent
    return parent.name.startswith("spool-") and parent.parent == Path(scratch).resolve()


def write_blobs(
    blobs: BlobStore, prefix: str, arrays: Mapping[str, Any], scratch: Path
) -> tuple[dict[str, Any], list[str]]:
    """Write each array of ``arrays`` as ``.npy`` under ``prefix`` (a :class:`StoredArray` is
    only referenced: it is already stored); the manifest (the value of the hash's ``manifest``
    field, as a dict) and the keys written here (to remove them should the record not be
    stored)."""
    manifest: dict[str, Any] = {}
    written: list[str] = []
    scratch = Path(scratch)
    try:
        for name, value in arrays.items():
            if isinstance(value, StoredArray):
                manifest[name] = {
                    "codec": BLOB_CODEC,
                    "key": value.key,
                    "dtype": str(np.dtype(value.dtype)),
                    "shape": [int(n) for n in value.shape],
                }
                continue
            key = blob_name(prefix, name)
            source = npy_file_of(value)
            if source is not None:
                # A memory-mapped .npy file (a spooled upload): copied as a file, never read
                # through the map (its pages would count in the process' memory).
                written.append(key)
                blobs.put_file(key, source, move=_spooled(source, scratch))
                manifest[name] = {
                    "codec": BLOB_CODEC,
                    "dtype": str(value.dtype),
                    "shape": [int(n) for n in value.shape],
                }
                continue
            array = np.asarray(value)
            written.append(key)
            blobs.put_npy(key, array, scratch)
            # No "key": it is the default one (bytes of Redis per submission).
            manifest[name] = {
                "codec": BLOB_CODEC,
                "dtype": str(array.dtype),
                "shape": [int(n) for n in array.shape],
            }
    except BaseException:
        for key in written:
            try:
                blobs.delete(key)
            except Exception:  # the sweep removes what is left: this is a best effort
                break
        raise
    return manifest, written


def blob_keys(manifest_raw: Any, prefix: str) -> list[str]:
    """The object keys a stored manifest under ``prefix`` refers to (none for the in-Redis
    codec)."""
    if manifest_raw is None:
        return []
    manifest = json.loads(manifest_raw)
    return [
        _key_of(prefix, name, meta)
        for name, meta in manifest.items()
        if meta.get("codec") == BLOB_CODEC
    ]


def _key_of(prefix: str, name: str, meta: Mapping[str, Any]) -> str:
    """The object of one manifest entry: its ``key`` (a :class:`StoredArray`), or by default
    the array's name under the manifest's prefix."""
    return str(meta["key"]) if "key" in meta else blob_name(prefix, name)


#: Arrays of fewer bytes are read into memory (read-only) rather than memory-mapped: a
#: mapping costs about twice a read at 80 kB (the map, then a page fault per page).
MAP_FROM_BYTES = 1 << 20


def _load_blob(
    blobs: BlobStore, key: str, meta: Mapping[str, Any], scratch: Path
) -> np.ndarray[Any, Any]:
    path = blobs.local_path(key, scratch)
    nbytes = int(np.prod(meta["shape"], dtype=np.int64)) * np.dtype(meta["dtype"]).itemsize
    try:
        out: np.ndarray[Any, Any] = np.load(
            path, mmap_mode="r" if nbytes >= MAP_FROM_BYTES else None, allow_pickle=False
        )
        out.setflags(write=False)
    finally:
        # A download (into the directory scratch, see BlobStore.local_path) is read or
        # mapped, then unlinked: a mapping keeps the data until it is freed.
        if path.parent == Path(scratch):
            path.unlink(missing_ok=True)
    if list(out.shape) != list(meta["shape"]) or str(out.dtype) != str(meta["dtype"]):
        raise ValueError(
            f"blob {key} holds {out.dtype}{list(out.shape)}, "
            f"the manifest says {meta['dtype']}{list(meta['shape'])}"
        )
    return out


def read_arrays(
    client: Any,
    arr_key: str,
    blobs: BlobStore | None = None,
    scratch: Path | None = None,
    prefix: str = "",
) -> dict[str, np.ndarray[Any, Any]] | None:
    """The arrays of the hash ``arr_key`` (objects under ``prefix``), read-only:
    memory-mapped from the blob store, or decoded from the hash's chunks for data of the
    previous codec. None when the hash, one of its chunks or one of its objects is gone."""
    manifest_raw = client.hget(arr_key, "manifest")
    if manifest_raw is None:
        return None
    manifest = json.loads(manifest_raw)
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, meta in manifest.items():
        if meta.get("codec") == BLOB_CODEC:
            if blobs is None or scratch is None:
                raise ValueError("arrays in the blob store need a blob store to be read")
            try:
                out[name] = _load_blob(blobs, _key_of(prefix, name, meta), meta, scratch)
            except BlobNotFound:
                return None
            continue
        fields = [f"{name}:{i}" for i in range(int(meta["chunks"]))]
        chunks = client.hmget(arr_key, fields)
        if any(c is None for c in chunks):
            return None
        array = decode_array(meta, chunks)
        array.flags.writeable = False  # as the memory-mapped arrays: callers only read
        out[name] = array
    return out
