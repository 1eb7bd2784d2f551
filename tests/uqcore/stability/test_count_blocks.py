"""Bootstrap counts drawn fast and into one-byte blocks: the same resamples as the generator's
own bounded draws, and the same metric values through the engine."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.stability import weights as W
from uqcore.stability._engine import Engine, Resample, select_metrics


def reference_counts(n: int, rng: np.random.Generator) -> np.ndarray:
    """The chunked multinomial drawn the plain way: chunk totals, then each chunk's uniform
    rows from ``rng.integers`` (the definition the resamples must keep)."""
    if n <= W.CHUNK:
        return np.bincount(rng.integers(0, n, size=n, dtype=np.int32), minlength=n)
    starts = np.arange(0, n, W.CHUNK)
    sizes = np.minimum(W.CHUNK, n - starts)
    totals = rng.multinomial(n, sizes / n)
    out = np.empty(n, dtype=np.int64)
    for start, size, total in zip(starts, sizes, totals, strict=True):
        draws = rng.integers(0, size, size=total, dtype=np.int32)
        out[start : start + size] = np.bincount(draws, minlength=size)
    return out


@pytest.mark.parametrize(
    "n", [1, 7, W.CHUNK, W.CHUNK + 1, 2 * W.CHUNK, 3 * W.CHUNK + 5, 5 * W.CHUNK - 1]
)
def test_multinomial_counts_are_the_generators_bounded_draws(n: int) -> None:
    for seed in range(6):
        a, b = np.random.default_rng([seed, 0, n]), np.random.default_rng([seed, 0, n])
        np.testing.assert_array_equal(W.multinomial_counts(n, a), reference_counts(n, b))
        # and the generator is left where the plain draws leave it (a buffered half included)
        np.testing.assert_array_equal(
            a.integers(0, 1000, size=9, dtype=np.int32), b.integers(0, 1000, size=9, dtype=np.int32)
        )


def test_a_half_buffered_before_the_counts_is_used_first() -> None:
    n = 3 * W.CHUNK + 11
    for seed in range(4):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        a.integers(0, 5, dtype=np.int32)  # leaves the high half of a 64-bit output buffered
        b.integers(0, 5, dtype=np.int32)
        np.testing.assert_array_equal(W.multinomial_counts(n, a), reference_counts(n, b))
        assert a.integers(0, 2**31 - 1, dtype=np.int32) == b.integers(0, 2**31 - 1, dtype=np.int32)


def test_byte_blocks_hold_the_same_counts_and_widen_when_one_does_not_fit() -> None:
    n = 2 * W.CHUNK + 3
    for kw in ({}, {"scheme": "poisson"}, {"unit": "cluster", "groups": np.arange(n) // 9}):
        r = W.Resampler(n, **kw)
        ref = r.block(4, [0, 1, 2])
        got = r.block(4, [0, 1, 2], out=np.empty((5, n), dtype=np.uint8))
        assert got.dtype == np.uint8 and got.shape == (3, n)
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(OverflowError):  # a count a byte cannot hold is refused
        W._put(np.empty(4, dtype=np.uint8), slice(0, 4), np.array([0, 1, 256, 2]))


def test_a_block_falls_back_to_float_counts_on_overflow(monkeypatch: pytest.MonkeyPatch) -> None:
    r = W.Resampler(300)
    ref = r.block(5, [0, 1, 2])
    real = W._put

    def narrow(out: np.ndarray, where: slice, counts: np.ndarray) -> None:
        if out.dtype == np.uint8 and int(counts.max()) > 2:  # as if a byte held 0..2
            raise OverflowError("too wide")
        real(out, where, counts)

    monkeypatch.setattr(W, "_put", narrow)
    got = r.block(5, [0, 1, 2], out=np.empty((3, 300), np.uint8))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, ref)


def test_the_engine_gives_the_same_values_on_byte_and_float_counts() -> None:
    n = 3000
    rng = np.random.default_rng(11)
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    pred = P.Gaussian(mu, sd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen, _ = select_metrics([pred], "all", None)
        r = W.Resampler(n)
        floats = r.block(2, range(6))
        byte = r.block(2, range(6), out=np.empty((6, n), np.uint8))
        a = Engine(Batch(pred, y), chosen).values([Resample(w) for w in floats])
        b = Engine(Batch(pred, y), chosen).values([Resample(w) for w in byte])
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.int64, np.float64])
@pytest.mark.parametrize("compiled", [True, False])
def test_counts_into_a_buffer_of_each_type_are_the_generators_bounded_draws(
    dtype: type, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled count (uqcore._jit.chunk_counts: one increment per draw, straight into the
    buffer) and the bincounts per chunk fill every buffer type with the same counts, and leave
    the generator in the same state; so does a strided buffer (never compiled)."""
    if compiled and W.kernels() is None:
        pytest.skip("numba is not installed")
    if not compiled:
        monkeypatch.setattr(W, "kernels", lambda: None)
    n = 3 * W.CHUNK + 7
    for seed in range(3):
        a, b = np.random.default_rng([seed, 0, n]), np.random.default_rng([seed, 0, n])
        out = np.full(n, 99, dtype=dtype)  # stale values from an earlier block
        W.multinomial_counts(n, a, out=out)
        np.testing.assert_array_equal(out, reference_counts(n, b))
        assert a.integers(0, 2**31 - 1, dtype=np.int32) == b.integers(0, 2**31 - 1, dtype=np.int32)
    strided = np.full((n, 2), 7, dtype=dtype)[:, 0]
    W.multinomial_counts(n, np.random.default_rng(5), out=strided)
    np.testing.assert_array_equal(strided, reference_counts(n, np.random.default_rng(5)))


def test_the_compiled_count_stops_at_a_count_its_type_cannot_hold() -> None:
    jit = W.kernels()
    if jit is None:
        pytest.skip("numba is not installed")
    chunk, shift = 8, 29  # the top 3 bits of each 32-bit half: a row among 8
    halves = np.zeros(300, dtype=np.uint32)  # every draw the chunk's first row
    totals = np.array([300], dtype=np.int64)
    assert not jit.chunk_counts(halves, shift, totals, chunk, np.empty(8, np.uint8), 255.0)
    wide = np.empty(8, np.int64)
    top = float(np.iinfo(np.int64).max)
    assert jit.chunk_counts(halves, shift, totals, chunk, wide, top)
    np.testing.assert_array_equal(wide, [300, 0, 0, 0, 0, 0, 0, 0])
    # the draws' top bits pick the row: 0b101 << 29 is row 5
    halves[:10] = np.uint32(5 << 29)
    assert jit.chunk_counts(halves, shift, totals, chunk, wide, top)
    np.testing.assert_array_equal(wide, [290, 0, 0, 0, 0, 10, 0, 0])


def test_a_block_falls_back_to_float_counts_when_the_compiled_count_overflows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A byte that cannot hold a count (simulated: multinomial counts above 255 do not occur at
    these sizes): the compiled count says so, OverflowError is raised, and the block is drawn
    again as float64, the same counts."""
    jit = W.kernels()
    if jit is None:
        pytest.skip("numba is not installed")
    n = 2 * W.CHUNK + 5
    r = W.Resampler(n)
    ref = r.block(6, [0, 1])

    class Narrow:
        def chunk_counts(
            self,
            halves: object,
            shift: int,
            totals: object,
            chunk: int,
            out: np.ndarray,
            top: float,
        ) -> bool:
            if out.dtype == np.uint8:
                return False
            return bool(jit.chunk_counts(halves, shift, totals, chunk, out, top))

    monkeypatch.setattr(W, "kernels", lambda: Narrow())
    with pytest.raises(OverflowError):
        W.multinomial_counts(n, np.random.default_rng(1), out=np.empty(n, np.uint8))
    got = r.block(6, [0, 1], out=np.empty((2, n), np.uint8))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, ref)
