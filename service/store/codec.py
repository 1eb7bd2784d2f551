"""The array codec of the store: how arrays are kept in Redis, written and read back.

An array is its ``np.save`` bytes (no pickle) cut into chunks of at most :data:`CHUNK_BYTES`,
each zlib-compressed where that pays — never JSON. The arrays of a submission or a benchmark
share one Redis hash (:func:`service.keys.arrays`, :func:`service.keys.benchmark_arrays`):
``manifest`` (JSON: per array its dtype, shape, chunk count and codec) and the chunks
``{name}:{i}``.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "CHUNK_BYTES",
    "CODEC",
    "array_fields",
    "decode_array",
    "encode_array",
    "put_arrays",
    "read_arrays",
]

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
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
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


def read_arrays(client: Any, arr_key: str) -> dict[str, np.ndarray[Any, Any]] | None:
    """The arrays of the hash ``arr_key``; None when it or one of its chunks is gone."""
    manifest_raw = client.hget(arr_key, "manifest")
    if manifest_raw is None:
        return None
    manifest = json.loads(manifest_raw)
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, meta in manifest.items():
        fields = [f"{name}:{i}" for i in range(int(meta["chunks"]))]
        chunks = client.hmget(arr_key, fields)
        if any(c is None for c in chunks):
            return None
        out[name] = decode_array(meta, chunks)
    return out
