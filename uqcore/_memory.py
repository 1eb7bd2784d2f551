"""Returning freed heap memory to the operating system.

numpy takes its arrays' memory from the C allocator. Large arrays are mapped and unmapped on
their own, but glibc serves arrays of up to a few MiB (the row blocks of the scoring rules)
from its heap and keeps freed heap pages resident, so the resident set of a long computation
can stay above what it holds. :func:`release_free_memory` asks glibc to give the free pages
back (``malloc_trim``); elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any

__all__ = ["release_free_memory"]

_TRIM: list[Any] = []


def _trim() -> Any:
    if not _TRIM:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                fn = getattr(libc, "malloc_trim", None)  # glibc only (not musl)
            except OSError:
                fn = None
        _TRIM.append(fn)
    return _TRIM[0]


def release_free_memory() -> bool:
    """Give the allocator's free heap pages back to the operating system (glibc's
    ``malloc_trim(0)``); whether it could be asked."""
    fn = _trim()
    if fn is None:
        return False
    fn(0)
    return True
