"""Resamples expressed as frequency weights: bootstrap counts, subsample masks, index sets.

A bootstrap resample of N rows is the vector of counts c_i (how often row i was drawn); a
subsample without replacement is a 0/1 vector. Because every registered metric treats an
integer weight k as k copies of the row (the registry's sample-weight contract), the metric on
``batch.with_weights(base_weight * c)`` equals the metric on the resampled arrays, while the
batch's sorts and PIT values are computed once and reused by every resample.

Reproducibility: resample ``i`` of a run with seed ``s`` is drawn from its own generator
``numpy.random.default_rng([s, i])`` (``[s, stream, i]`` for the other streams), so a
resample does not depend on the block size, the backend or how many other resamples are drawn,
and :func:`~uqcore.stability.bootstrap`, :func:`~uqcore.stability.compare` and
:func:`~uqcore.stability.rank_distribution` with one seed use the same resamples.

Schemes (``scheme``) and resampling units (``unit``):

- ``"multinomial"``: N draws with replacement (the ordinary bootstrap); counts sum to N.
- ``"poisson"``: independent Poisson(1) counts (the Poisson bootstrap; the size varies).
- ``unit="row"``: rows are exchangeable.
- ``unit="stratified"``: within each group, as many draws as the group has rows (group sizes
  are kept).
- ``unit="cluster"``: whole groups are drawn (G draws with replacement among the G groups, or
  Poisson(1) per group) and each row gets its group's count — for dependent rows, e.g. the
  pixels of one image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from uqcore._compiled import kernels
from uqcore._validation import UQValidationError

__all__ = [
    "Resampler",
    "Scheme",
    "Unit",
    "cluster_counts",
    "counts_to_indices",
    "group_codes",
    "multinomial_counts",
    "poisson_counts",
    "resample_rng",
    "stratified_counts",
    "subsample_indices",
    "subsample_mask",
]

Scheme = Literal["multinomial", "poisson"]
Unit = Literal["row", "stratified", "cluster"]
IntArray = np.ndarray[Any, np.dtype[np.int64]]
FloatArray = np.ndarray[Any, np.dtype[np.float64]]

#: Stream identifiers that keep the independent random streams of one seed apart.
STREAM_BOOTSTRAP = 0
STREAM_JACKKNIFE = 1
STREAM_PATH = 2
STREAM_SUBSETS = 3


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UQValidationError(f"seed must be a non-negative integer, found {seed!r}")
    return int(seed)


def resample_rng(seed: int, *key: int) -> np.random.Generator:
    """The generator of one resample: ``default_rng([seed, *key])``."""
    return np.random.default_rng([_check_seed(seed), *key])


def group_codes(groups: Any, n: int) -> tuple[IntArray, int]:
    """Integer codes 0..G-1 of the group labels (any 1-D array of hashable labels) and G."""
    if groups is None:
        raise UQValidationError("groups must be given for a stratified or cluster bootstrap")
    try:
        from uqcore._backend import to_numpy

        arr = to_numpy(groups) if hasattr(groups, "__dlpack__") else np.asarray(groups)
    except (TypeError, ValueError) as exc:  # pragma: no cover - exotic inputs
        raise UQValidationError(f"groups must be a 1-D array of labels: {exc}") from None
    if arr.ndim != 1 or arr.shape[0] != n:
        raise UQValidationError(
            f"groups must be a 1-D array of length {n} (one label per row), found shape {arr.shape}"
        )
    _, codes = np.unique(arr, return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    return codes, int(codes.max()) + 1 if n else 0


#: Rows per chunk of :func:`multinomial_counts` (its bincount then stays in the L2 cache). A
#: power of two: the uniform draws among a chunk's rows are then the top bits of the
#: generator's 32-bit outputs (see :func:`_chunk_halves`).
CHUNK = 2**15


def multinomial_counts(n: int, rng: np.random.Generator, out: Any = None) -> Any:
    """Counts of N draws with replacement from N rows (sum N): a Multinomial(N, 1/N) vector.

    Up to :data:`CHUNK` rows: ``bincount`` of N uniform row indices. Above, the same
    distribution drawn in cache-sized pieces: the totals of the chunks of rows are
    Multinomial(N, chunk sizes / N), then each chunk bins its total of uniform draws among its
    rows (the multinomial's conditional decomposition; measured 1.5× faster at N = 10⁶).
    ``out`` (length N, any numeric dtype, e.g. a row of a float64 block) receives the counts
    instead of a new int64 array; the counts are the same. With an integer ``out`` too narrow
    for a count, ``OverflowError`` is raised (nothing else is drawn from ``rng`` after it).
    """
    dtype = np.int32 if n < 2**31 else np.int64
    if n <= CHUNK:
        counts = np.bincount(rng.integers(0, n, size=n, dtype=dtype), minlength=n)
        if out is None:
            return counts.astype(np.int64)
        _put(out, slice(0, n), counts)
        return out
    starts = np.arange(0, n, CHUNK)
    sizes = np.minimum(CHUNK, n - starts)
    totals = rng.multinomial(n, sizes / n)
    if out is None:
        out = np.empty(n, dtype=np.int64)
    full = n // CHUNK  # the chunks of exactly CHUNK rows
    count = int(np.sum(totals[:full]))
    halves = _chunk_halves(rng, count)
    jit = kernels() if halves is not None and _counted_into(out) else None
    if jit is not None:  # one increment per draw, straight into out
        assert halves is not None
        top = float(np.iinfo(out.dtype).max) if out.dtype.kind in "iu" else 2.0**53
        if not jit.chunk_counts(halves[0], halves[1], totals[:full], CHUNK, out, top):
            raise OverflowError(f"a count exceeds {top:.0f}, the largest {out.dtype} value")
    else:
        if halves is None:
            draws = rng.integers(0, CHUNK, size=count, dtype=np.int32)
        else:
            draws = halves[0] >> np.uint32(halves[1])
        stop = 0
        for j, total in enumerate(totals[:full].tolist()):
            start, stop = stop, stop + total
            _put(
                out,
                slice(j * CHUNK, (j + 1) * CHUNK),
                np.bincount(draws[start:stop], minlength=CHUNK),
            )
    if full < starts.shape[0]:  # the last, shorter chunk: the generator's own bounded draws
        first, size = full * CHUNK, n - full * CHUNK
        tail = rng.integers(0, size, size=int(totals[-1]), dtype=dtype)
        _put(out, slice(first, n), np.bincount(tail, minlength=size))
    return out


#: The types :func:`multinomial_counts` counts into with the compiled kernel: a block's bytes,
#: its float64 rows, a new int64 array (each type is compiled at a worker's start).
_COUNTED = frozenset(np.dtype(t) for t in (np.uint8, np.int64, np.float64))


def _counted_into(out: Any) -> bool:
    """Whether the compiled count (:func:`uqcore._jit.chunk_counts`) can fill ``out``."""
    return (
        isinstance(out, np.ndarray)
        and out.ndim == 1
        and out.dtype in _COUNTED
        and out.flags.c_contiguous
        and out.flags.writeable
    )


def _chunk_halves(rng: np.random.Generator, count: int) -> tuple[Any, int] | None:
    """(h, s) such that h >> s are ``count`` draws of ``rng.integers(0, CHUNK,
    dtype=np.int32)``, the same values, with the generator left in the same state, ~2× faster;
    None (nothing drawn) where that does not hold.

    numpy draws a bounded 32-bit integer by Lemire's method: x·CHUNK / 2³² for the next 32-bit
    output x, which never rejects when CHUNK is a power of two, i.e. the top bits of x. The
    32-bit outputs are the low then the high half of each 64-bit output (one half may be
    buffered in the bit generator's state), so the draws are the top bits of the halves of
    ``random_raw``, whose loop is cheaper per draw than the bounded one.
    """
    bits = rng.bit_generator
    exact = np.little_endian and isinstance(bits, np.random.PCG64) and not CHUNK & (CHUNK - 1)
    if not exact or count == 0:
        return None
    state = dict(bits.state)
    held = bool(state["has_uint32"])  # a high half left over from an earlier 32-bit draw
    raw = bits.random_raw((count - held + 1) // 2)
    halves = raw.view(np.uint32)  # little-endian: low half first, as numpy draws them
    if held:
        halves = np.concatenate([np.array([state["uinteger"]], dtype=np.uint32), halves])
    if halves.shape[0] > count:  # the unused high half stays buffered, as numpy leaves it
        after = dict(bits.state)
        after["has_uint32"], after["uinteger"] = 1, int(halves[count])
        bits.state = after
    elif held:
        after = dict(bits.state)
        after["has_uint32"] = 0
        bits.state = after
    return halves[:count], 32 - (CHUNK.bit_length() - 1)


def _put(out: Any, where: slice, counts: Any) -> None:
    """``out[where] = counts``, refusing counts that an integer ``out`` cannot hold."""
    if out.dtype.kind in "iu" and counts.shape[0]:
        top = np.iinfo(out.dtype).max
        if top < 2**31 and int(counts.max()) > top:
            raise OverflowError(f"a count exceeds {top}, the largest {out.dtype} value")
    out[where] = counts


def poisson_counts(n: int, rng: np.random.Generator) -> IntArray:
    """Independent Poisson(1) counts per row (the Poisson bootstrap)."""
    return rng.poisson(1.0, size=n).astype(np.int64)


def stratified_counts(
    codes: IntArray, rng: np.random.Generator, scheme: Scheme = "multinomial"
) -> IntArray:
    """Counts of a bootstrap within each group: each group gets as many draws as it has rows.

    With ``scheme="poisson"`` the counts are Poisson(1) per row (Poisson resampling is
    already independent per row, so stratification changes nothing but is accepted).
    """
    n = codes.shape[0]
    if scheme == "poisson":
        return poisson_counts(n, rng)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    slot_group = codes[order]
    # slot j (a row of group g) draws a uniform member of g: order[start_g + floor(u * n_g)]
    offset = np.floor(rng.random(n) * sizes[slot_group]).astype(np.int64)
    offset = np.minimum(offset, sizes[slot_group] - 1)
    drawn = order[starts[slot_group] + offset]
    return np.bincount(drawn, minlength=n).astype(np.int64)


def cluster_counts(
    codes: IntArray, n_groups: int, rng: np.random.Generator, scheme: Scheme = "multinomial"
) -> IntArray:
    """Counts of a cluster bootstrap: G whole groups drawn; every row gets its group's count."""
    if scheme == "poisson":
        per_group = rng.poisson(1.0, size=n_groups).astype(np.int64)
    else:
        per_group = multinomial_counts(n_groups, rng)
    return per_group[codes]


def subsample_indices(n: int, m: int, rng: np.random.Generator) -> IntArray:
    """A sorted index set of ``m`` of the ``n`` rows, drawn without replacement."""
    if not 1 <= m <= n:
        raise UQValidationError(f"subsample size must be in [1, {n}], found {m}")
    return np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)


def subsample_mask(n: int, m: int, rng: np.random.Generator) -> FloatArray:
    """The 0/1 weight vector of a subsample of ``m`` rows without replacement."""
    mask = np.zeros(n)
    mask[subsample_indices(n, m, rng)] = 1.0
    return mask


def counts_to_indices(counts: Any) -> IntArray:
    """The explicit index resample with these counts: row i repeated c_i times, in row order."""
    c = np.asarray(counts)
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise UQValidationError("counts must be non-negative integers")
    return np.repeat(np.arange(c.shape[0], dtype=np.int64), c.astype(np.int64))


class Resampler:
    """Bootstrap resamples of N rows as count vectors, drawn reproducibly per resample.

    Parameters
    ----------
    n : int
        Number of rows.
    scheme : {"multinomial", "poisson"}
        Draws with replacement (counts sum to N; default) or independent Poisson(1) counts.
    unit : {"row", "stratified", "cluster"}
        What is resampled: rows (default), rows within each group, or whole groups.
    groups : array_like, shape (N,), optional
        Group labels; required for ``unit="stratified"`` and ``unit="cluster"``.
    """

    def __init__(
        self,
        n: int,
        *,
        scheme: Scheme = "multinomial",
        unit: Unit = "row",
        groups: Any = None,
    ) -> None:
        if scheme not in ("multinomial", "poisson"):
            raise UQValidationError(f"scheme must be 'multinomial' or 'poisson', found {scheme!r}")
        if unit not in ("row", "stratified", "cluster"):
            raise UQValidationError(
                f"unit must be 'row', 'stratified' or 'cluster', found {unit!r}"
            )
        self.n = int(n)
        self.scheme: Scheme = scheme
        self.unit: Unit = unit
        self.codes: IntArray | None = None
        self.n_groups = 0
        if unit != "row":
            self.codes, self.n_groups = group_codes(groups, self.n)

    def describe(self) -> dict[str, Any]:
        """The resampling unit and scheme, for the result's provenance."""
        out: dict[str, Any] = {"scheme": self.scheme, "unit": self.unit}
        if self.unit != "row":
            out["n_groups"] = self.n_groups
        return out

    def counts(self, seed: int, index: int, stream: int = STREAM_BOOTSTRAP, out: Any = None) -> Any:
        """The count vector of resample ``index`` (length N; written into ``out`` if given).

        An integer ``out`` too narrow for one of the counts raises ``OverflowError``.
        """
        rng = resample_rng(seed, stream, index)
        if self.unit == "row" and self.scheme == "multinomial":
            return multinomial_counts(self.n, rng, out)
        if self.unit == "row":
            c = poisson_counts(self.n, rng)
        else:
            assert self.codes is not None
            if self.unit == "stratified":
                c = stratified_counts(self.codes, rng, self.scheme)
            else:
                c = cluster_counts(self.codes, self.n_groups, rng, self.scheme)
        if out is None:
            return c
        _put(out, slice(0, self.n), c)
        return out

    def block(self, seed: int, indices: Sequence[int], out: Any = None) -> Any:
        """Counts of several resamples as a (len(indices), N) array (rows = :meth:`counts`).

        Each row is drawn and binned on its own: one ``bincount`` over the whole block with row
        offsets was measured 4–10× slower at N = 10⁵ (its scattered writes miss the cache).
        ``out`` (at least len(indices) rows of N) is filled and its leading rows returned: a
        caller that draws block after block reuses one buffer, where a fresh one was measured
        to add 1–6 ms per resample at N = 10⁶ (first-touch page faults). Without ``out`` the
        block is float64. An integer ``out`` (``uint8``: one byte per count, what the block
        paths gather) that cannot hold a count is left, and a new float64 block returned: the
        counts are the same either way.
        """
        out = np.empty((len(indices), self.n)) if out is None else out[: len(indices)]
        try:
            for r, i in enumerate(indices):
                self.counts(seed, i, out=out[r])
        except OverflowError:
            return self.block(seed, indices)
        return out
