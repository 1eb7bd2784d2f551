"""A blob store in a local directory (the default of the embedded ``uqeval serve``).

Each key is a file under the root. Writes go to a temporary file in the same directory and
are renamed into place (atomic on POSIX), so a reader never sees half an object; a killed
writer leaves only a ``.tmp-`` file, removed by the next :meth:`LocalBlobStore.sweep_temp`.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from service.blobs.base import BlobInfo, BlobNotFound, BlobStore, BlobUnavailable, check_key

__all__ = ["LocalBlobStore"]

_TMP = ".tmp-"

#: Tries to make a directory and a file in it, while concurrent deletes may remove it.
_MAKE_TRIES = 20


def _disk_full(exc: OSError, directory: Path, nbytes: int) -> OSError | None:
    """The ENOSPC error a short write without an errno stands for — numpy's ``tofile``
    reports one as "N requested and M written" — when the filesystem of ``directory`` has
    less room left than the ``nbytes`` to write; else None (``exc`` is what it says)."""
    if exc.errno is not None:
        return None
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    if stat.f_bavail * stat.f_frsize >= nbytes:
        return None
    return OSError(errno.ENOSPC, f"No space left on device ({exc})", str(directory))


class LocalBlobStore(BlobStore):
    """Objects as files under ``root`` (created when missing)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.description = f"local directory {self.root}"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _temp_file(self, directory: Path) -> tuple[int, Path]:
        """A new temporary file (descriptor, path) in ``directory``, made when missing — and
        made again should a :meth:`delete` of its last object remove it meanwhile."""
        for attempt in range(_MAKE_TRIES):
            try:
                directory.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(prefix=_TMP, dir=directory)
            except (FileNotFoundError, FileExistsError):  # removed again while being made
                if attempt + 1 == _MAKE_TRIES:
                    raise
                continue
            return fd, Path(name)
        raise AssertionError("unreachable")

    def _tmp(self, target: Path) -> Path:
        fd, tmp = self._temp_file(target.parent)
        os.close(fd)
        return tmp

    def _prune(self, directory: Path) -> None:
        """Remove ``directory`` and then its parents, below the root, while they are empty:
        the directories of deleted objects do not pile up (one per submission and upload)."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:  # not empty, or already removed
                return
            directory = directory.parent

    def put_file(self, key: str, path: Path, *, move: bool = False) -> None:
        target = self._path(key)
        if move:
            for _ in range(_MAKE_TRIES):
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, target)  # same filesystem: atomic, no copy
                    return
                except (FileNotFoundError, FileExistsError):
                    if not Path(path).exists():
                        raise
                    # the directory was removed meanwhile (its last object deleted): again
                except OSError:
                    break  # another filesystem: copied below, then removed
        tmp = self._tmp(target)
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if move:
            Path(path).unlink(missing_ok=True)

    def put_npy(self, key: str, array: np.ndarray[Any, Any], scratch: Path) -> None:
        """Written to a temporary file beside the object, renamed into place."""
        target = self._path(key)
        fd, tmp = self._temp_file(target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, array, allow_pickle=False)
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            full = _disk_full(exc, target.parent, array.nbytes)
            if full is None:
                raise
            raise full from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def put_bytes(self, key: str, data: bytes) -> None:
        target = self._path(key)
        tmp = self._tmp(target)
        try:
            tmp.write_bytes(data)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise BlobNotFound(key) from exc

    def local_path(self, key: str, scratch: Path) -> Path:
        path = self._path(key)
        if not path.is_file():
            raise BlobNotFound(key)
        return path

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        self._prune(path.parent)

    def delete_prefix(self, prefix: str) -> int:
        removed = 0
        for info in list(self.list(prefix)):
            self.delete(info.key)
            removed += 1
        return removed

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        # Only the directory the prefix names is walked ("uploads/upl_1/part-" walks
        # uploads/upl_1), not the whole store.
        head = prefix.rpartition("/")[0]
        start = self.root / check_key(head) if head else self.root
        if not start.is_dir():
            return
        for dirpath, _dirs, files in os.walk(start):
            for name in files:
                if name.startswith(_TMP):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if not key.startswith(prefix):
                    continue
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue
                yield BlobInfo(key, st.st_size, st.st_mtime)

    def sweep_temp(self, older_than_s: float = 3600.0) -> int:
        """Remove temporary files of writers that died more than ``older_than_s`` ago."""
        removed = 0
        cutoff = time.time() - older_than_s
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                full = Path(dirpath) / name
                if name.startswith(_TMP):
                    try:
                        if full.stat().st_mtime < cutoff:
                            full.unlink()
                            removed += 1
                    except FileNotFoundError:
                        continue
                    self._prune(full.parent)
        return removed

    def ping(self) -> bool:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobUnavailable(f"blob directory {self.root} is not usable: {exc}") from exc
        return True
