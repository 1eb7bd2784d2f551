"""The stored parts of a resumable upload read as one body, without joining them on disk.

Completing an upload reads its NPZ archive (a zip) straight across the parts in the blob
store: :class:`PartsFile` is a read-only, seekable file object over the ordered parts, which
:mod:`zipfile` reads members from (it seeks to the central directory at the end, then to each
member). Disk use at completion is then the parts plus the extracted members, about twice the
body, where a joined copy made it three times. :func:`verify_parts` reads the parts once in
order first: each part's size and SHA-256 against what its ``PUT`` recorded, and the whole
body's SHA-256 against the declared one.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from service.blobs import BlobNotFound, BlobStore

__all__ = ["MissingPart", "PartDamaged", "PartsFile", "open_parts", "verify_parts"]

#: Bytes read at a time by :func:`verify_parts`.
READ_BYTES = 1 << 20
#: Parts kept open at once: the one a member is read from, and the one holding the central
#: directory (read first, at the end of the body), so that neither is fetched again and again.
OPEN_PARTS = 2


class MissingPart(LookupError):
    """A part the upload's record lists is not in the blob store (removed or lost)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.n = n


class PartDamaged(ValueError):
    """A stored part whose size or SHA-256 differs from what its ``PUT`` recorded."""

    def __init__(self, n: int, found: str) -> None:
        super().__init__(n, found)
        self.n, self.found = n, found


class PartsFile(io.RawIOBase):
    """The parts ``keys`` (of ``sizes`` bytes) of the blob store as one read-only, seekable
    file. Each part is opened where it lies (a local store's file) or downloaded into
    ``scratch`` (an S3 store), at most :data:`OPEN_PARTS` at a time; a download is removed as
    soon as it is closed, so the extra disk held is at most two parts."""

    def __init__(
        self, blobs: BlobStore, keys: Sequence[str], sizes: Sequence[int], scratch: Path
    ) -> None:
        super().__init__()
        self._blobs, self._keys, self._scratch = blobs, list(keys), Path(scratch)
        self._starts = [0]
        for size in sizes:
            self._starts.append(self._starts[-1] + int(size))
        self._size = self._starts[-1]
        self._pos = 0
        self._open: OrderedDict[int, tuple[io.BufferedReader, Path]] = OrderedDict()

    # -- io.RawIOBase ----------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(f"seek to {base + offset}, before the start of the body")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer`` whole (across parts) unless the body ends first: zipfile takes a
        short read of the central directory for a damaged archive."""
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            i = self._part_at(self._pos)
            fh = self._handle(i)
            fh.seek(self._pos - self._starts[i])
            want = min(len(view) - done, self._starts[i + 1] - self._pos)
            got = fh.readinto(view[done : done + want])
            if not got:
                raise OSError(f"part {i + 1} ends before its recorded size")
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        while self._open:
            self._evict()
        super().close()

    # -- parts -----------------------------------------------------------------------------

    def _part_at(self, pos: int) -> int:
        lo, hi = 0, len(self._keys) - 1
        while lo < hi:  # the last part whose start is <= pos
            mid = (lo + hi + 1) // 2
            if self._starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _handle(self, i: int) -> io.BufferedReader:
        if i in self._open:
            self._open.move_to_end(i)
            return self._open[i][0]
        while len(self._open) >= OPEN_PARTS:
            self._evict()
        path = _local(self._blobs, self._keys[i], i + 1, self._scratch)
        self._open[i] = (open(path, "rb"), path)  # noqa: SIM115 (closed by _evict)
        return self._open[i][0]

    def _evict(self) -> None:
        _i, (fh, path) = self._open.popitem(last=False)
        fh.close()
        _forget(path, self._scratch)


def open_parts(
    blobs: BlobStore, keys: Sequence[str], sizes: Sequence[int], scratch: Path
) -> io.BufferedReader:
    """:class:`PartsFile` buffered: a binary file object as :func:`open` gives (closing it
    closes the parts)."""
    return io.BufferedReader(PartsFile(blobs, keys, sizes, scratch), READ_BYTES)


def _local(blobs: BlobStore, key: str, n: int, scratch: Path) -> Path:
    try:
        return blobs.local_path(key, scratch)
    except BlobNotFound:
        raise MissingPart(n) from None


def _forget(path: Path, scratch: Path) -> None:
    """Remove ``path`` when it is a download into ``scratch`` (never a local store's file)."""
    if path.parent == scratch:
        path.unlink(missing_ok=True)


def verify_parts(
    blobs: BlobStore,
    keys: Sequence[str],
    recorded: Sequence[tuple[int, str]],
    scratch: Path,
    *,
    on_block: Callable[[bytes], None],
) -> str:
    """Read the parts in order (one download at a time), checking each against its recorded
    ``(size, sha256)``: :class:`PartDamaged` or :class:`MissingPart` otherwise. Every block is
    passed to ``on_block``; the SHA-256 (hex) of the whole body is returned."""
    whole = hashlib.sha256()
    for n, (key, (size, digest)) in enumerate(zip(keys, recorded, strict=True), start=1):
        path = _local(blobs, key, n, scratch)
        try:
            part = hashlib.sha256()
            got = 0
            with open(path, "rb") as fh:
                while block := fh.read(READ_BYTES):
                    got += len(block)
                    part.update(block)
                    whole.update(block)
                    on_block(block)
        finally:
            _forget(path, scratch)
        if got != size or part.hexdigest() != digest:
            raise PartDamaged(n, f"{got} bytes, SHA-256 {part.hexdigest()}")
    return whole.hexdigest()
