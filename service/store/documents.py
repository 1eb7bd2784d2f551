"""Result documents as Redis stores them: JSON, zlib-compressed from a size on.

A result document of every metric is 5–10 KB of JSON (names and 17-digit floats), most of a
stored submission's Redis memory; zlib level 6 keeps about a third of it and costs some tens
of microseconds each way. Documents below :data:`PACK_MIN` bytes stay plain. A stored value
is told apart by its first byte: a JSON document starts with ``{`` and a zlib stream with
0x78, so documents written plain by an earlier version read as they are.
"""

from __future__ import annotations

import zlib

__all__ = ["PACK_MIN", "pack", "unpack"]

#: Documents of at least this many bytes are stored compressed.
PACK_MIN = 512


def pack(doc: bytes) -> bytes:
    """The stored form of the JSON document ``doc``."""
    return zlib.compress(doc, 6) if len(doc) >= PACK_MIN else doc


def unpack(raw: bytes | str) -> bytes:
    """The JSON document of a stored value (plain or compressed)."""
    if isinstance(raw, str):  # a client decoding responses: only a plain document reads so
        return raw.encode()
    return raw if raw[:1] != b"\x78" else zlib.decompress(raw)
