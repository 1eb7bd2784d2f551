"""The C allocator's freed memory: kept for reuse while metrics run, given back after.

numpy takes its arrays' memory from the C allocator. Large arrays are mapped and unmapped on
their own, but glibc serves arrays of up to a few MiB (the row blocks of the scoring rules)
from its heap and keeps freed heap pages resident, so the resident set of a long computation
can stay above what it holds. :func:`release_free_memory` asks glibc to give the free pages
back (``malloc_trim``); elsewhere it does nothing.

The opposite problem is :func:`keep_freed_heap`'s: by default glibc maps arrays from 128 KiB
on by themselves and gives the top of its heap back as soon as 2× that threshold is free;
the thresholds grow with the largest mapped array freed so far (up to 32 MiB and 64 MiB).
A process that has only met arrays of 10^5 rows (800 KB) therefore maps, or trims and
re-faults, every new temporary: about 2,500 page faults per ``evaluate`` of a Gaussian at
10^5 rows, a third of its time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

__all__ = ["keep_freed_heap", "release_free_memory"]

_LIBC: list[Any] = []
#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: The thresholds :func:`keep_freed_heap` sets: the largest that glibc's dynamic ones reach
#: (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit systems, and twice it for the trim).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
#: Whether :func:`keep_freed_heap` has run in this process (its answer).
_KEPT: list[bool] = []


def _libc() -> Any:
    """glibc's handle on Linux (``None`` elsewhere or where it cannot be loaded)."""
    if not _LIBC:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            except OSError:
                lib = None
        _LIBC.append(lib)
    return _LIBC[0]


def _trim() -> Any:
    lib = _libc()
    return None if lib is None else getattr(lib, "malloc_trim", None)  # glibc only (not musl)


def keep_freed_heap() -> bool:
    """Set glibc's thresholds, once per process, to the values its dynamic ones reach after
    the first freed array of 32 MiB (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`), so that
    temporaries of a few MB are served from freed heap memory instead of fresh pages; whether
    they are set.

    Measured with a Gaussian's regression metrics at 10^5 rows: ``evaluate`` 12.4 → 8.4 ms,
    2,541 → 0 page faults per call. A process keeps at most 64 MiB of free memory at the top of
    its heap (``evaluate`` of 2^20 rows or more still gives free pages back between its
    metrics, :func:`release_free_memory`); arrays from 32 MiB on are mapped by themselves as
    before. Nothing is changed where ``UQCORE_MALLOC_TUNING=0``, where the process set either
    threshold through glibc's environment (``MALLOC_MMAP_THRESHOLD_``,
    ``MALLOC_TRIM_THRESHOLD_``, or ``GLIBC_TUNABLES``), or off glibc."""
    if not _KEPT:
        _KEPT.append(_set_thresholds())
    return _KEPT[0]


def _set_thresholds() -> bool:
    if os.environ.get("UQCORE_MALLOC_TUNING", "1").strip() == "0":
        return False
    if any(
        k in os.environ
        for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
    ):
        return False  # the process's own choice
    lib = _libc()
    mallopt = None if lib is None else getattr(lib, "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def release_free_memory() -> bool:
    """Give the allocator's free heap pages back to the operating system (glibc's
    ``malloc_trim(0)``); whether it could be asked."""
    fn = _trim()
    if fn is None:
        return False
    fn(0)
    return True
