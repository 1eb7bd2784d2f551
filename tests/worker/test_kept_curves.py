"""The kept form of a submission's curves (:func:`worker.plots.encode_curves`): the JSON with
its long numeric lists as raw little-endian arrays, read back to the same JSON (values and
types), earlier versions' zlib-compressed JSON still read, damaged bytes refused."""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import numpy as np
import orjson
import pytest

from benchmarks.service import gaussian
from worker.plots import KEPT_ARRAY_MIN, KEPT_MAGIC, _curves_json, decode_curves, encode_curves


def _same(got: Any, want: Any) -> None:
    """Equal JSON, with the same types (an int stays an int) and the sign of zeros."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    elif isinstance(want, float):
        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
    else:
        assert got == want


def _listed(kept: bytes) -> list[list[Any]]:
    """The header's list of the fields stored as arrays."""
    at = len(KEPT_MAGIC)
    (size,) = struct.unpack_from("<I", kept, at)
    head = orjson.loads(zlib.decompress(kept[at + 4 : at + 4 + size]))
    listed: list[list[Any]] = head["arrays"]
    return listed


def test_a_gaussians_curves_read_back_the_same_and_take_about_the_bytes_of_compressed_json() -> (
    None
):
    drawn = _curves_json("gaussian", gaussian(10_000, 3), 0)
    kept = encode_curves(drawn)
    assert kept.startswith(KEPT_MAGIC)
    _same(decode_curves(kept), drawn)
    listed = {(name, field): dtype for name, field, dtype, _ in _listed(kept)}
    # the interval-width scatter (2,000 points) is stored as arrays
    assert listed[("interval_width", "uncertainty")] == "<f8"
    assert listed[("interval_width", "abs_error")] == "<f8"
    assert listed[("interval_width", "rows")] == "<i4"
    assert len(kept) <= 1.1 * len(zlib.compress(orjson.dumps(drawn), 1))


def test_curves_kept_by_earlier_versions_are_read() -> None:
    drawn = _curves_json("gaussian", gaussian(500, 1), 0)
    legacy = zlib.compress(orjson.dumps(drawn), 6)
    _same(decode_curves(legacy), drawn)


def test_only_long_lists_of_one_number_type_become_arrays() -> None:
    n = KEPT_ARRAY_MIN
    rng = np.random.default_rng(0)
    floats = [*rng.normal(size=n - 6).tolist(), -0.0, 5e-324, 1e308, -1e-300, 0.1, 2.0]
    drawn = {
        "a": {
            "floats": floats,
            "small_ints": list(range(-n, 0)),
            "large_ints": [2**40 + i for i in range(n)],
            "mixed": [1, *[0.5] * (n - 1)],  # an int among floats: stays JSON
            "with_null": [None, *[0.5] * (n - 1)],
            "bools": [True] * n,
            "short": [0.25] * (n - 1),
            "nested": [[0.5] * n],
            "label": "std",
            "n": 3,
        },
        "b": [0.5] * n,  # not an object: kept as it is
    }
    kept = encode_curves(drawn)
    listed = {(name, field): dtype for name, field, dtype, _ in _listed(kept)}
    assert listed == {
        ("a", "floats"): "<f8",
        ("a", "small_ints"): "<i4",
        ("a", "large_ints"): "<i8",
    }
    _same(decode_curves(kept), drawn)
    _same(decode_curves(encode_curves({})), {})


def _damaged(kept: bytes) -> list[bytes]:
    at = len(KEPT_MAGIC)
    (size,) = struct.unpack_from("<I", kept, at)
    head = orjson.loads(zlib.decompress(kept[at + 4 : at + 4 + size]))
    body = kept[at + 4 + size :]

    def with_head(h: Any) -> bytes:
        z = zlib.compress(orjson.dumps(h))
        return KEPT_MAGIC + struct.pack("<I", len(z)) + z + body

    bad_dtype = {**head, "arrays": [[*head["arrays"][0][:2], "<f4", head["arrays"][0][3]]]}
    negative = {**head, "arrays": [[*head["arrays"][0][:3], -1]]}
    return [
        kept[:-1],  # an array cut short
        kept + b"\0",  # bytes after the arrays
        kept[: at + 2],  # the header's length cut
        kept[: at + 4 + size - 1],  # the header cut
        KEPT_MAGIC + struct.pack("<I", 3) + b"abc" + body,  # not zlib
        with_head(bad_dtype),
        with_head(negative),
        with_head({"doc": {}, "arrays": head["arrays"]}),  # a listed field without its curve
        with_head([1, 2]),
        b"\x78\x9c not zlib",
        zlib.compress(b"[1, 2]"),  # JSON, not an object
    ]


@pytest.mark.parametrize("case", range(11))
def test_damaged_bytes_are_refused_with_a_value_error(case: int) -> None:
    kept = encode_curves({"c": {"x": [0.5] * KEPT_ARRAY_MIN, "n": 1}})
    cases = _damaged(kept)
    assert len(cases) == 11
    with pytest.raises(ValueError, match="kept curves"):
        decode_curves(cases[case])
