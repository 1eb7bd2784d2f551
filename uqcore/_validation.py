"""The one place where uqcore checks its inputs.

Every public entry point converts and checks its arrays here. A failed check raises
:class:`UQValidationError` (a ``ValueError``) whose message names the argument, the rule, and
the first offending index and value, e.g. ``"std must be > 0; std[17] = -0.3"``; the same
facts travel as its attributes ``argument``, ``index`` and ``value``.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import array_api_compat
import numpy as np

from uqcore._backend import Array, Namespace, float_dtype, namespace, to_numpy

__all__ = [
    "SIMPLEX_ATOL",
    "UQValidationError",
    "as_float_array",
    "check_finite",
    "check_in_open_unit",
    "check_nonnegative",
    "check_positive",
    "check_same_length",
    "check_strictly_increasing",
    "common_namespace",
    "first_bad",
    "validate_sample_weight",
    "validate_targets",
]

#: Absolute tolerance for rows that must sum to 1 (mixture weights).
SIMPLEX_ATOL = 1e-6


class UQValidationError(ValueError):
    """Invalid input to a uqcore function; the message names argument, rule and first bad entry.

    The attributes say the same for programs (``None`` where the error names no such thing):

    ``argument``  the argument at fault as the caller passed it (``"std"``,
                  ``"estimates['maha']"``)
    ``index``     the first offending entry of it: an ``int`` for a vector, a tuple for an
                  N-D array (for a rule on rows, such as a row sum, the row)
    ``value``     the offending entry (a Python scalar), e.g. ``std[17] = -0.3`` gives
                  ``argument="std"``, ``index=17``, ``value=-0.3``

    Pickling keeps them (exceptions pickle their ``__dict__`` beside the message).
    """

    def __init__(
        self,
        message: str,
        *,
        argument: str | None = None,
        index: int | tuple[int, ...] | None = None,
        value: Any = None,
    ) -> None:
        super().__init__(message)
        self.argument = argument
        if isinstance(index, tuple):
            # a vector's index is a number; a 0-d array has no index
            index = (index[0] if len(index) == 1 else index) if index else None
        self.index: int | tuple[int, ...] | None = index
        self.value: Any = value.item() if isinstance(value, np.generic) else value


def _fmt_index(idx: tuple[int, ...]) -> str:
    return ", ".join(str(i) for i in idx)


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.6g}"
    return str(v)


def first_bad(ok: Array) -> tuple[int, ...] | None:
    """Index of the first ``False`` in the boolean array ``ok`` (C order), or ``None``."""
    ok_np = to_numpy(ok)
    if bool(np.all(ok_np)):
        return None
    flat = int(np.argmin(ok_np.reshape(-1)))
    return tuple(int(i) for i in np.unravel_index(flat, ok_np.shape))


def _raise_at(x: Array, ok: Array, name: str, rule: str) -> None:
    idx = first_bad(ok)
    if idx is None:
        return
    value = to_numpy(x)[idx].item() if len(idx) else to_numpy(x).item()
    raise UQValidationError(
        f"{name} {rule}; {name}[{_fmt_index(idx)}] = {_fmt_value(value)}",
        argument=name,
        index=idx,
        value=value,
    )


def common_namespace(*arrays: Any) -> Namespace:
    """Namespace of the array arguments; Python sequences and scalars join numpy."""
    arrs = [a for a in arrays if a is not None and array_api_compat.is_array_api_obj(a)]
    if not arrs:
        return namespace()
    try:
        return namespace(*arrs)
    except TypeError as exc:
        raise UQValidationError(
            f"arrays from different array libraries were mixed: {exc}"
        ) from None


def as_float_array(
    x: Any,
    name: str,
    xp: Namespace,
    *,
    ndim: int | tuple[int, ...] | None = None,
    device: Any = None,
) -> Array:
    """Convert ``x`` to a float64 array of namespace ``xp`` and check its dimensionality."""
    if x is None:
        raise UQValidationError(f"{name} is required", argument=name)
    if array_api_compat.is_array_api_obj(x) and namespace(x) is not xp:
        # An array of another library (e.g. numpy levels for torch predictions): via the host.
        x = to_numpy(x)
    if array_api_compat.is_array_api_obj(x) and not isinstance(x, np.ndarray | np.generic):
        dt = x.dtype
        if dt == xp.bool:
            raise UQValidationError(f"{name} must hold real numbers, found booleans", argument=name)
        if xp.isdtype(dt, "complex floating"):
            raise UQValidationError(
                f"{name} must hold real numbers, found complex values", argument=name
            )
        arr = xp.astype(x, float_dtype(xp)) if dt != float_dtype(xp) else x
    else:
        np_x = np.asarray(x)
        if np_x.dtype.kind not in "iuf":
            raise UQValidationError(
                f"{name} must hold real numbers, found dtype {np_x.dtype} ({type(x).__name__})",
                argument=name,
            )
        if np_x.dtype == np.float64:
            host = np_x
        else:
            mapping = _file_mapping(x)
            host = np_x.astype(np.float64) if mapping is None else _converted(np_x, mapping)
        arr = xp.asarray(host, device=device)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise UQValidationError(
                f"{name} must be {want}, found shape {tuple(arr.shape)}", argument=name
            )
    return arr


#: Elements converted per step by :func:`_converted` (8 MiB of float64).
_CONVERT_CHUNK = 1 << 20


def _file_mapping(x: Any) -> mmap.mmap | None:
    """The shared file mapping that holds ``x``: a numpy memmap opened ``"r"``, ``"r+"`` or
    ``"w+"`` (as ``np.load(..., mmap_mode="r")`` opens a file), or a view of one (what
    ``np.asarray`` makes of it), else None. A copy-on-write map (``"c"``) is left out: its
    pages may hold changes that exist nowhere else."""
    for _ in range(8):  # views of views: a short chain of bases
        if isinstance(x, np.memmap) or not isinstance(x, np.ndarray):
            break
        x = x.base
    if not isinstance(x, np.memmap) or x.mode not in ("r", "r+", "w+"):
        return None
    mapping = getattr(x, "_mmap", None)
    if not isinstance(mapping, mmap.mmap) or not hasattr(mapping, "madvise"):
        return None
    return mapping


def _converted(x: np.ndarray[Any, Any], mapping: mmap.mmap) -> np.ndarray[Any, Any]:
    """``x.astype(np.float64)`` for an array memory-mapped from a file (a blob read by a
    worker), converted chunk by chunk; the pages of each converted chunk are handed back to the
    kernel (``MADV_DONTNEED``; a later read maps them again from the file). Without it, the
    source pages a conversion touched stay in the process's resident memory beside the float64
    copy: a float32 input adds half its copy's size to every later peak."""
    if not x.flags.c_contiguous or x.size == 0:
        return x.astype(np.float64)
    src = x.reshape(-1)
    out = np.empty(src.shape, np.float64)
    view = np.frombuffer(mapping, np.uint8)  # the mapping's first byte, to place x within it
    start = src.ctypes.data - view.ctypes.data
    del view
    size = len(mapping)
    if start < 0 or start + src.nbytes > size:  # not inside this mapping after all
        return x.astype(np.float64)
    page = mmap.PAGESIZE
    item = src.itemsize
    done = start - start % page  # pages before this are not released
    for i in range(0, src.shape[0], _CONVERT_CHUNK):
        j = min(i + _CONVERT_CHUNK, src.shape[0])
        out[i:j] = src[i:j]
        end = start + j * item
        # the page that the next chunk starts in is kept until that chunk is converted
        upto = min(end + (-end) % page, size) if j == src.shape[0] else end - end % page
        if upto > done:
            mapping.madvise(mmap.MADV_DONTNEED, done, upto - done)
            done = upto
    return out.reshape(x.shape)


def check_finite(x: Array, name: str, xp: Namespace) -> None:
    """Raise unless every entry of ``x`` is finite.

    A finite sum proves every entry finite (NaN and ±inf propagate through a sum), in one pass
    without a boolean temporary; only a non-finite sum (a bad entry, or finite entries whose
    sum overflows) takes the elementwise check, which also finds the first bad index.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow here is not the user's
        total = xp.sum(x)
    if bool(xp.isfinite(total)):
        return
    _raise_at(x, xp.isfinite(x), name, "must be finite")


def check_positive(x: Array, name: str, xp: Namespace) -> None:
    """Raise unless every entry of ``x`` is > 0 (after the finiteness check)."""
    _raise_at(x, x > 0, name, "must be > 0")


def check_nonnegative(x: Array, name: str, xp: Namespace) -> None:
    """Raise unless every entry of ``x`` is >= 0."""
    _raise_at(x, x >= 0, name, "must be >= 0")


def check_in_open_unit(x: Array, name: str, xp: Namespace) -> None:
    """Raise unless every entry lies in the open interval (0, 1)."""
    _raise_at(x, (x > 0) & (x < 1), name, "must lie in the open interval (0, 1)")


def check_strictly_increasing(x: Array, name: str, xp: Namespace) -> None:
    """Raise unless the 1-D array ``x`` is strictly increasing."""
    if x.shape[0] < 2:
        return
    ok = x[1:] > x[:-1]
    idx = first_bad(ok)
    if idx is not None:
        i = idx[0] + 1
        xn = to_numpy(x)
        raise UQValidationError(
            f"{name} must be strictly increasing; {name}[{i}] = {_fmt_value(float(xn[i]))} "
            f"<= {name}[{i - 1}] = {_fmt_value(float(xn[i - 1]))}",
            argument=name,
            index=i,
            value=float(xn[i]),
        )


def check_same_length(n: int, x: Array, name: str, ref_name: str) -> None:
    """Raise unless ``x`` has ``n`` rows."""
    if x.shape[0] != n:
        raise UQValidationError(
            f"{name} must have the same length as {ref_name} ({n}), found {x.shape[0]}",
            argument=name,
        )


def validate_targets(
    y: Any, n: int, xp: Namespace, device: Any = None, *, finite: bool = True
) -> Array:
    """Targets ``y``: a finite 1-D float array of length ``n`` (``finite=False``: the caller
    checks finiteness itself, later)."""
    arr = as_float_array(y, "y", xp, ndim=1, device=device)
    check_same_length(n, arr, "y", "the prediction")
    if finite:
        check_finite(arr, "y", xp)
    return arr


def validate_sample_weight(
    sample_weight: Any, n: int, xp: Namespace, device: Any = None
) -> Array | None:
    """``None`` or a finite, non-negative 1-D array of length ``n`` that is not all zero."""
    if sample_weight is None:
        return None
    w = as_float_array(sample_weight, "sample_weight", xp, ndim=1, device=device)
    check_same_length(n, w, "sample_weight", "the prediction")
    check_finite(w, "sample_weight", xp)
    check_nonnegative(w, "sample_weight", xp)
    if not bool(xp.any(w > 0)):
        raise UQValidationError("sample_weight must not be all zero", argument="sample_weight")
    return w
