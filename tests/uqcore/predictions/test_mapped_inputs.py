"""Inputs memory-mapped from files (a worker's blobs): converted to float64 exactly, and the
source pages of a shared read-only map handed back once converted."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import uqcore
from uqcore import predictions as P
from uqcore._validation import _CONVERT_CHUNK, as_float_array


def _rss_file() -> int:
    """Resident file-backed bytes of this process (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile line")


@pytest.fixture
def mapped(tmp_path: Path) -> tuple[np.ndarray, np.memmap]:
    # several chunks and a ragged end, so that chunk edges and the last partial page occur
    n = 3 * _CONVERT_CHUNK + 12_345
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return x, np.load(tmp_path / "x.npy", mmap_mode="r")


def test_a_mapped_float32_array_converts_exactly(mapped: tuple[np.ndarray, np.memmap]) -> None:
    x, m = mapped
    got = as_float_array(m, "x", np)
    assert got.dtype == np.float64 and not isinstance(got, np.memmap)
    np.testing.assert_array_equal(got, x.astype(np.float64))
    # a slice starting mid-page, and one not contiguous (converted whole)
    np.testing.assert_array_equal(as_float_array(m[7:-3], "x", np), x[7:-3].astype(np.float64))
    np.testing.assert_array_equal(as_float_array(m[::3], "x", np), x[::3].astype(np.float64))
    # the map still reads the file after its pages were handed back
    assert float(m[5]) == float(x[5]) and float(m.sum()) == float(x.sum())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_converted_source_pages_leave_resident_memory(
    mapped: tuple[np.ndarray, np.memmap],
) -> None:
    _, m = mapped
    # the map itself, and the plain ndarray view of it that np.asarray makes
    for given in (m, np.asarray(m)):
        float(m.sum())  # every page of the map resident
        before = _rss_file()
        as_float_array(given, "x", np)
        released = before - _rss_file()
        assert released >= 0.9 * m.nbytes, (type(given).__name__, released, m.nbytes)


def test_copy_on_write_and_integer_maps_keep_their_values(tmp_path: Path) -> None:
    x = np.arange(2 * _CONVERT_CHUNK, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    c = np.load(tmp_path / "x.npy", mmap_mode="c")
    c[0] = 5.0  # exists only in this process's private page: it must not be dropped
    got = as_float_array(c, "x", np)
    assert got[0] == 5.0 and float(c[0]) == 5.0
    np.testing.assert_array_equal(got[1:], x[1:].astype(np.float64))
    k = np.arange(2 * _CONVERT_CHUNK + 1, dtype=np.int32)
    np.save(tmp_path / "k.npy", k)
    got = as_float_array(np.load(tmp_path / "k.npy", mmap_mode="r"), "k", np)
    np.testing.assert_array_equal(got, k.astype(np.float64))


def test_a_report_on_mapped_inputs_equals_the_report_on_arrays(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n = _CONVERT_CHUNK + 99
    arrays = {
        "mean": rng.normal(size=n).astype(np.float32),
        "std": rng.uniform(0.5, 2.0, n).astype(np.float32),
    }
    arrays["y"] = (arrays["mean"] + arrays["std"] * rng.normal(size=n)).astype(np.float32)
    maps = {}
    for name, value in arrays.items():
        np.save(tmp_path / f"{name}.npy", value)
        maps[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    names = ["rmse", "nll", "crps", "ece", "spearman"]
    on_maps = uqcore.evaluate(P.Gaussian(maps["mean"], maps["std"]), maps["y"], names)
    on_arrays = uqcore.evaluate(P.Gaussian(arrays["mean"], arrays["std"]), arrays["y"], names)
    assert dict(on_maps.items()) == dict(on_arrays.items())
