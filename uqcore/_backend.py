"""Array namespace and special functions per backend (numpy, CuPy, torch, any array-API library).

Metric code is written against the array API standard through ``array_api_compat``; the few
special functions it needs (normal CDF and quantile, log-CDF, error function, log-gamma,
digamma, the Student-t CDF and quantile) come from :func:`special`, which picks the backend's
own implementation (``scipy.special``, ``cupyx.scipy.special``, ``torch.special``) and falls back
to a round trip through numpy + scipy for namespaces that have none (``array_api_strict``, and
torch for the Student-t functions, which torch lacks).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np
import scipy.special as sps

Array = Any
Namespace = Any

__all__ = [
    "Array",
    "Namespace",
    "Special",
    "argsort_host",
    "bincount",
    "clip",
    "flip_is_view",
    "float_dtype",
    "from_numpy",
    "host_floats",
    "namespace",
    "radix_argsort",
    "radix_sort",
    "scatter",
    "select",
    "sort_host",
    "sorted_unique",
    "special",
    "take_descending",
    "to_numpy",
]


def namespace(*arrays: Array) -> Namespace:
    """Return the array-API namespace shared by ``arrays`` (numpy for plain Python input)."""
    arrs = [a for a in arrays if a is not None and not isinstance(a, (int, float, bool))]
    if not arrs:
        return array_api_compat.array_namespace(np.empty(0))
    return array_api_compat.array_namespace(*arrs)


def float_dtype(xp: Namespace) -> Any:
    """The floating dtype metrics compute in: float64 (every supported backend has it)."""
    return xp.float64


def to_numpy(x: Array) -> np.ndarray[Any, Any]:
    """Copy any array-API array to a numpy array on the host."""
    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_torch_array(x):
        return np.asarray(x.detach().cpu().numpy())
    if array_api_compat.is_cupy_array(x):
        return np.asarray(x.get())
    return np.asarray(np.from_dlpack(x))


def host_floats(values: Any) -> tuple[float, ...]:
    """``float(v)`` of every item of a 1-D host array or a sequence, as a tuple (a curve's
    points): numpy arrays through ``tolist`` (C speed, the same values), others item by
    item."""
    if isinstance(values, np.ndarray):
        out: list[float] = values.astype(np.float64, copy=False).tolist()
        return tuple(out)
    return tuple(map(float, values))


def from_numpy(xp: Namespace, like: Array, value: np.ndarray[Any, Any]) -> Array:
    """Copy a numpy array into namespace ``xp``, on the device of ``like`` (the inverse of
    :func:`to_numpy`; numpy arrays are returned as they are)."""
    dev = array_api_compat.device(like)
    if array_api_compat.is_numpy_namespace(xp):
        return value
    if array_api_compat.is_torch_namespace(xp):
        import torch

        return torch.from_numpy(np.ascontiguousarray(value)).to(dev)
    return xp.asarray(value, device=dev)


def scatter(xp: Namespace, index: Array, values: Array) -> Array:
    """``out[index] = values`` for a permutation ``index`` (the inverse of ``take``)."""
    if array_api_compat.is_numpy_namespace(xp) or array_api_compat.is_torch_namespace(xp):
        out = xp.empty_like(values)
        out[index] = values
        return out
    if array_api_compat.is_cupy_namespace(xp):
        out = xp.empty_like(values)
        out[index] = values
        return out
    return xp.take(values, xp.argsort(index))


def flip_is_view(xp: Namespace) -> bool:
    """Whether ``xp.flip`` of a 1-D array is a view (numpy, CuPy); torch copies."""
    return not array_api_compat.is_torch_namespace(xp)


#: The sizes sorted by the compiled radix sort (:func:`radix_argsort`, :func:`radix_sort`):
#: from 256 values (below, numpy's call is as cheap) to 2²⁵, where its temporaries (16 bytes
#: per row beyond the results, which numpy's sorts do not need) reach 512 MiB; larger arrays
#: take numpy's sorts, whose memory the 10⁸-row budget was measured with.
RADIX_SORT_MIN = 1 << 8
RADIX_SORT_MAX = 1 << 25


def _radix_kernels(xp: Namespace, x: Array) -> Any:
    """The compiled kernels where ``x`` is a 1-D float64 numpy array of a size the radix sort
    takes (:data:`RADIX_SORT_MIN` to :data:`RADIX_SORT_MAX`), else ``None``."""
    if not (
        array_api_compat.is_numpy_namespace(xp)
        and isinstance(x, np.ndarray)
        and x.ndim == 1
        and x.dtype == np.float64
        and RADIX_SORT_MIN <= x.shape[0] <= RADIX_SORT_MAX
    ):
        return None
    from uqcore._compiled import kernels

    return kernels()


def radix_argsort(
    xp: Namespace, x: Array, *, index: type[np.signedinteger[Any]] = np.int64
) -> tuple[Array, Array] | None:
    """The ascending argsort of ``x`` and ``x`` sorted, both from one radix sort
    (:func:`uqcore._jit.radix_sort`: O(N), 2–5× numpy's ``argsort`` followed by ``take``),
    where it applies (a 1-D float64 numpy array of :data:`RADIX_SORT_MIN` to
    :data:`RADIX_SORT_MAX` values, numba available); ``None`` otherwise, for the caller's own
    sort. The order is exactly ``numpy.argsort(x, kind="stable")`` (ties in index order, NaN
    last), as ``index`` (``numpy.int64``, or ``numpy.int32`` for a caller that keeps it so:
    written as such, no cast after); the sorted values equal ``numpy.sort(x)`` (−0.0 written as
    +0.0)."""
    if index not in (np.int64, np.int32):
        raise ValueError(f"index must be numpy.int64 or numpy.int32, found {index!r}")
    jit = _radix_kernels(xp, x)
    if jit is None:
        return None
    n = int(x.shape[0])
    out, order = np.empty(n), np.empty(n, dtype=index)
    keys, idx_a, idx_b = _radix_temporaries(n, with_order=True)
    jit.radix_sort(x.view(np.uint64), out.view(np.uint64), order, keys, idx_a, idx_b)
    return order, out


def _radix_temporaries(n: int, *, with_order: bool) -> tuple[Array, Array, Array]:
    """The radix sort's temporaries, allocated by numpy (which asks for huge pages for large
    arrays; see :func:`uqcore._jit.radix_sort`): N keys and, with the order, 2 × N int32
    indices. Untouched pages (a sort of fewer passes) cost address space only."""
    m = n if with_order else 0
    return np.empty(n, dtype=np.uint64), np.empty(m, dtype=np.int32), np.empty(m, dtype=np.int32)


def radix_sort(xp: Namespace, x: Array) -> Array | None:
    """``x`` sorted ascending by the radix sort (:func:`radix_argsort` without the order: 3–4×
    numpy's ``sort``), where it applies; ``None`` otherwise."""
    jit = _radix_kernels(xp, x)
    if jit is None:
        return None
    n = int(x.shape[0])
    out = np.empty(n)
    keys, idx_a, idx_b = _radix_temporaries(n, with_order=False)
    jit.radix_sort(
        x.view(np.uint64), out.view(np.uint64), np.empty(0, dtype=np.int64), keys, idx_a, idx_b
    )
    return out


#: The value sort's choice on this CPU (:func:`numpy_sorts_values_faster`), once per process.
_NUMPY_VALUE_SORT: list[bool] = []


def numpy_sorts_values_faster() -> bool:
    """Whether numpy's ``sort`` of float64 values beats the radix sort on this CPU.

    numpy sorts with x86-simd-sort where the CPU has AVX-512: measured on an AMD EPYC, its
    ``sort`` took half the radix sort's time at 10^7 values and a fifth at 10^4, while on a
    Xeon without that path the radix sort was 3–4× faster. Timed once per process on 2^16
    random values (the best of 5 each; workers at start, ``worker.runtime.warm_kernels``);
    ``UQCORE_VALUE_SORT=numpy`` or ``radix`` fixes the choice. Either sort gives the same
    values (the radix sort writes −0.0 as +0.0)."""
    if not _NUMPY_VALUE_SORT:
        fixed = os.environ.get("UQCORE_VALUE_SORT", "auto").strip().lower()
        if fixed in ("numpy", "radix"):
            _NUMPY_VALUE_SORT.append(fixed == "numpy")
        else:
            _NUMPY_VALUE_SORT.append(_time_value_sorts())
    return _NUMPY_VALUE_SORT[0]


def _time_value_sorts() -> bool:
    """numpy's ``sort`` against the radix sort on 2^16 random values: True if numpy's is
    faster (False without the compiled kernels: nothing to choose)."""
    x = np.random.default_rng(0).random(1 << 16)
    if radix_sort(np, x) is None:
        return False

    def best(sort: Callable[[], Any]) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            sort()
            times.append(time.perf_counter() - start)
        return min(times)

    return best(lambda: np.sort(x)) < best(lambda: radix_sort(np, x))


def value_sort(xp: Namespace, x: Array) -> Array | None:
    """``x`` sorted ascending by the radix sort where it applies and is the faster value sort
    on this CPU (:func:`numpy_sorts_values_faster`); ``None`` for the caller's numpy sort."""
    if array_api_compat.is_numpy_namespace(xp) and numpy_sorts_values_faster():
        return None
    return radix_sort(xp, x)


def sort_host(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``numpy.sort(x)`` of a numpy array, by the faster of the radix sort (where it applies)
    and numpy's on this CPU (:func:`value_sort`)."""
    got = value_sort(np, x)
    return np.sort(x) if got is None else got


def argsort_host(x: np.ndarray[Any, Any], *, stable: bool = False) -> np.ndarray[Any, Any]:
    """``numpy.argsort(x)`` of a numpy array (``kind="stable"`` with ``stable=True``), by the
    radix sort where it applies (whose order is numpy's stable one)."""
    got = radix_argsort(np, x)
    if got is None:
        return np.argsort(x, kind="stable" if stable else None)
    order: np.ndarray[Any, Any] = got[0]
    return order


def _fits(x: np.ndarray[Any, Any], bound: Any) -> bool:
    """Whether ``bound`` (None or a Python number) bounds ``x`` in its own dtype, as
    ``numpy.clip`` takes it: any number for floats, an int within the dtype's range for ints."""
    if bound is None:
        return True
    if x.dtype.kind == "f":
        return type(bound) in (int, float)
    if x.dtype.kind in "iu" and type(bound) is int:
        info = np.iinfo(x.dtype)
        return info.min <= bound <= info.max
    return False


def clip(xp: Namespace, x: Array, min: Any = None, max: Any = None) -> Array:
    """``xp.clip(x, min=min, max=max)``. For a numpy array and bounds that are Python numbers
    of its kind, numpy's ``clip`` itself: array-api-compat's casts such bounds to the array's
    dtype and calls it too, after checks that cost 5-10 times the clip of a few thousand
    values."""
    if (
        isinstance(x, np.ndarray)
        and (min is not None or max is not None)
        and _fits(x, min)
        and _fits(x, max)
        and array_api_compat.is_numpy_namespace(xp)
    ):
        out: Array = np.clip(x, min, max)
        return out
    return xp.clip(x, min=min, max=max)


def sorted_unique(xp: Namespace, x: Array) -> Array:
    """The distinct values of the 1-D ``x``, ascending: numpy's ``unique`` for numpy arrays
    (array-api-compat's ``unique_values`` reads numpy's signature on every call, about 0.1 ms),
    ``sort(unique_values(x))`` otherwise."""
    if array_api_compat.is_numpy_namespace(xp):
        return np.unique(x)
    return xp.sort(xp.unique_values(x))


def take_descending(xp: Namespace, values: Array, descending: Array) -> Array:
    """``take(values, descending)`` for a reversed argsort ``descending``: where reversing is free
    the gather runs along the contiguous ascending order (faster than along a reversed index)
    and the result is a reversed view."""
    if flip_is_view(xp):
        return xp.flip(xp.take(values, xp.flip(descending)))
    return xp.take(values, descending)


def select(xp: Namespace, x: Array, ks: list[int], *, overwrite: bool = False) -> list[float]:
    """The order statistics ``sort(x)[k]`` for 0-based positions ``ks`` (Python floats), in O(N).

    A partial sort: ``numpy.partition`` (numpy; two adjacent positions cost one partition and a
    minimum over the upper part), ``cupy.partition`` (CuPy), ``torch.kthvalue`` (torch), and a
    full ``xp.sort`` for other namespaces. The values equal those of a full sort exactly; ``x``
    must hold no NaN (+inf sorts last). ``x`` is not modified unless ``overwrite=True`` (the
    caller's own temporary): numpy then partitions it in place (its values are permuted), which
    saves a copy of N values.
    """
    n = int(x.shape[0])
    pos = sorted({int(k) for k in ks})
    if not pos or pos[0] < 0 or pos[-1] >= n:
        raise ValueError(f"order statistic positions {ks!r} out of range for {n} values")
    found: dict[int, float] = {}
    if array_api_compat.is_numpy_namespace(xp):
        part = np.asarray(x)
        kth = pos[0] if len(pos) == 2 and pos[1] == pos[0] + 1 else pos
        if overwrite:
            part.partition(kth)
        else:
            part = np.partition(part, kth)
        if len(pos) == 2 and pos[1] == pos[0] + 1:
            found = {pos[0]: float(part[pos[0]]), pos[1]: float(np.min(part[pos[1] :]))}
        else:
            found = {k: float(part[k]) for k in pos}
    elif array_api_compat.is_torch_namespace(xp):
        import torch

        found = {k: float(torch.kthvalue(x, k + 1).values) for k in pos}
    elif array_api_compat.is_cupy_namespace(xp):
        import cupy

        part = cupy.partition(x, pos)
        found = {k: float(part[k]) for k in pos}
    else:
        s = xp.sort(x, stable=False)
        found = {k: float(s[k]) for k in pos}
    return [found[int(k)] for k in ks]


def bincount(
    xp: Namespace, indices: Array, weights: Array | None = None, minlength: int = 0
) -> Array:
    """Weighted counts ``out[k] = Σ_{i: indices[i] = k} weights[i]`` (counts without weights).

    ``indices`` are non-negative integers; the result has length ``max(minlength,
    max(indices) + 1)``, float64 with weights and integer without. The array API has no
    bincount: numpy, torch and CuPy use their own, other namespaces a round trip through numpy.
    """
    if array_api_compat.is_numpy_namespace(xp):
        return np.bincount(indices, weights=weights, minlength=minlength)
    if array_api_compat.is_torch_namespace(xp):
        import torch

        return torch.bincount(indices, weights=weights, minlength=minlength)
    if array_api_compat.is_cupy_namespace(xp):
        import cupy

        return cupy.bincount(indices, weights=weights, minlength=minlength)
    host_w = None if weights is None else to_numpy(weights)
    out = np.bincount(to_numpy(indices), weights=host_w, minlength=minlength)
    return from_numpy(xp, indices, out)


class Special:
    """Special functions for one namespace; every method maps arrays to arrays of that namespace."""

    def __init__(self, xp: Namespace) -> None:
        self.xp = xp
        self._lib: Any = None
        if array_api_compat.is_numpy_namespace(xp):
            self._kind = "numpy"
            self._lib = sps
        elif array_api_compat.is_cupy_namespace(xp):
            import cupyx.scipy.special as cps

            self._kind = "cupy"
            self._lib = cps
        elif array_api_compat.is_torch_namespace(xp):
            import torch

            self._kind = "torch"
            self._lib = torch.special
        else:
            self._kind = "fallback"

    def _host(self, fn: Callable[..., Any], *args: Array) -> Array:
        """Evaluate a scipy.special function through numpy and return it in ``xp``."""
        like = next(a for a in args if not isinstance(a, (int, float)))
        host = [a if isinstance(a, (int, float)) else to_numpy(a) for a in args]
        return from_numpy(self.xp, like, np.asarray(fn(*host), dtype=np.float64))

    def _call(self, name: str, scipy_fn: Callable[..., Any], *args: Array) -> Array:
        if self._kind in ("numpy", "cupy"):
            return getattr(self._lib, name)(*args)
        if self._kind == "torch" and hasattr(self._lib, name):
            return getattr(self._lib, name)(*args)
        return self._host(scipy_fn, *args)

    def ndtr(self, x: Array, *, overwrite: bool = False) -> Array:
        """Standard normal CDF Φ(x). ``overwrite=True``: ``x`` is the caller's own temporary
        and may hold the result (numpy and CuPy write it in place: no second array)."""
        if overwrite and self._kind in ("numpy", "cupy"):
            return self._lib.ndtr(x, out=x)
        return self._call("ndtr", sps.ndtr, x)

    def ndtri(self, p: Array) -> Array:
        """Standard normal quantile Φ⁻¹(p)."""
        return self._call("ndtri", sps.ndtri, p)

    def log_ndtr(self, x: Array) -> Array:
        """log Φ(x), accurate in the far left tail."""
        return self._call("log_ndtr", sps.log_ndtr, x)

    def erf(self, x: Array) -> Array:
        """Error function."""
        return self._call("erf", sps.erf, x)

    def gammaln(self, x: Array) -> Array:
        """log Γ(x)."""
        return self._call("gammaln", sps.gammaln, x)

    def digamma(self, x: Array) -> Array:
        """ψ(x) = d/dx log Γ(x)."""
        if self._kind == "torch":
            return self._lib.digamma(x)
        return self._call("digamma", sps.digamma, x)

    def stdtr(self, df: Array, t: Array) -> Array:
        """Student-t CDF with ``df`` degrees of freedom at ``t``."""
        if self._kind in ("numpy", "cupy") and hasattr(self._lib, "stdtr"):
            return self._lib.stdtr(df, t)
        return self._host(sps.stdtr, df, t)

    def stdtrit(self, df: Array, p: Array) -> Array:
        """Student-t quantile with ``df`` degrees of freedom at probability ``p``."""
        if self._kind == "numpy":
            return self._lib.stdtrit(df, p)
        return self._host(sps.stdtrit, df, p)

    def poch(self, a: Array, m: float) -> Array:
        """Pochhammer's symbol (a)_m = Γ(a + m)/Γ(a), without the cancellation of
        exp(log Γ(a + m) − log Γ(a)) at large ``a`` (scipy's ``poch``; through numpy where the
        namespace has none)."""
        if self._kind in ("numpy", "cupy") and hasattr(self._lib, "poch"):
            return self._lib.poch(a, m)
        return self._host(sps.poch, a, m)

    def betaln(self, a: Array, b: Array) -> Array:
        """log B(a, b)."""
        return self.gammaln(a) + self.gammaln(b) - self.gammaln(a + b)


_SPECIAL_CACHE: dict[int, Special] = {}


def special(xp: Namespace) -> Special:
    """The :class:`Special` functions for namespace ``xp`` (cached per namespace)."""
    key = id(xp)
    sp = _SPECIAL_CACHE.get(key)
    if sp is None:
        sp = Special(xp)
        _SPECIAL_CACHE[key] = sp
    return sp


SQRT2 = math.sqrt(2.0)
SQRT_PI = math.sqrt(math.pi)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
