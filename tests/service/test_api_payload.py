"""Body handling: content types, gzip, size limits while streaming (with and without
Content-Length), gzip bombs, broken bodies."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Iterator

import pytest

from service.api.errors import ApiError
from service.api.payload import read_limited
from tests.factories import gaussian_json, gaussian_npz, gz
from tests.service._api import NPZ, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "payload")


@pytest.fixture
def small(idle_api: TestClient, idle_settings) -> TestClient:
    """The idle app with 64 KiB limits (JSON and NPZ)."""
    idle_api.app.state.settings = idle_settings.model_copy(  # type: ignore[attr-defined]
        update={"max_body_bytes": 65536, "max_json_body_bytes": 65536}
    )
    return idle_api


def _chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _count(client: TestClient, key: dict[str, str]) -> int:
    return int(client.get("/v1/submissions", headers=key).json()["total"])


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "multipart/form-data; boundary=x", "application/xml", None],
)
def test_unsupported_content_type_is_415(
    idle_api: TestClient, key: dict[str, str], content_type: str | None
):
    headers = dict(key)
    if content_type is not None:
        headers["Content-Type"] = content_type
    r = idle_api.post("/v1/submissions", content=b"{}", headers=headers)
    assert r.status_code == 415
    err = error_of(r)
    assert (err["code"], err["field"]) == ("unsupported_media_type", "Content-Type")
    assert "application/x-npz" in err["message"]


def test_unsupported_content_encoding_is_415(idle_api: TestClient, key: dict[str, str]):
    r = idle_api.post(
        "/v1/submissions",
        content=b"{}",
        headers={**key, "Content-Type": "application/json", "Content-Encoding": "br"},
    )
    assert r.status_code == 415
    assert error_of(r)["field"] == "Content-Encoding"


def test_json_charset_parameter_is_accepted(idle_api: TestClient, key: dict[str, str]):
    r = idle_api.post(
        "/v1/submissions",
        content=json.dumps(gaussian_json(5)).encode(),
        headers={**key, "Content-Type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 202, r.text


@pytest.mark.parametrize("fmt", ["json", "npz"])
def test_gzip_bodies_are_accepted(idle_api: TestClient, key: dict[str, str], fmt: str):
    if fmt == "json":
        body, ctype = json.dumps(gaussian_json(20)).encode(), "application/json"
    else:
        body, ctype = gaussian_npz(20), "application/x-npz"
    r = idle_api.post(
        "/v1/submissions",
        content=gz(body),
        headers={**key, "Content-Type": ctype, "Content-Encoding": "gzip"},
    )
    assert r.status_code == 202, r.text
    assert idle_api.get(r.json()["status_url"], headers=key).json()["n"] == 20


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "empty"),
        (b"[1, 2]", "an object"),
    ],
)
def test_malformed_json(idle_api: TestClient, key: dict[str, str], body: bytes, words: str):
    r = idle_api.post(
        "/v1/submissions", content=body, headers={**key, "Content-Type": "application/json"}
    )
    assert r.status_code in (400, 422)
    assert words in error_of(r)["message"]


def test_malformed_npz_and_gzip_are_400(idle_api: TestClient, key: dict[str, str]):
    r = idle_api.post("/v1/submissions", content=b"PK\x03\x04garbage", headers={**key, **NPZ})
    assert r.status_code == 400
    assert "NPZ" in error_of(r)["message"]
    r = idle_api.post(
        "/v1/submissions",
        content=b"\x1f\x8b\x08\x00garbage",
        headers={**key, **NPZ, "Content-Encoding": "gzip"},
    )
    assert r.status_code == 400
    assert "gzip" in error_of(r)["message"]
    truncated = gz(gaussian_npz(50))[:-20]
    r = idle_api.post(
        "/v1/submissions", content=truncated, headers={**key, **NPZ, "Content-Encoding": "gzip"}
    )
    assert r.status_code == 400
    assert "truncated" in error_of(r)["message"]


@pytest.mark.parametrize("fmt", ["json", "npz"])
def test_oversize_body_with_content_length_is_413(small: TestClient, key: dict[str, str], fmt: str):
    if fmt == "json":
        body, ctype = json.dumps(gaussian_json(5000)).encode(), "application/json"
    else:
        body, ctype = gaussian_npz(5000), "application/x-npz"
    assert len(body) > 65536
    r = small.post("/v1/submissions", content=body, headers={**key, "Content-Type": ctype})
    assert r.status_code == 413
    err = error_of(r)
    assert err["code"] == "payload_too_large"
    assert "65536" in err["message"]
    assert _count(small, key) == 0


def test_oversize_chunked_body_without_content_length_is_413(
    small: TestClient, key: dict[str, str]
):
    body = gaussian_npz(5000)
    r = small.post("/v1/submissions", content=_chunks(body), headers={**key, **NPZ})
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert r.status_code == 413
    assert error_of(r)["code"] == "payload_too_large"
    # A chunked body under the limit is fine.
    r = small.post("/v1/submissions", content=_chunks(gaussian_npz(50)), headers={**key, **NPZ})
    assert r.status_code == 202, r.text


def test_gzip_bomb_is_413(small: TestClient, key: dict[str, str]):
    bomb = gzip.compress(b"\0" * (50 << 20), compresslevel=9)
    assert len(bomb) < 65536
    r = small.post(
        "/v1/submissions",
        content=_chunks(bomb),
        headers={**key, **NPZ, "Content-Encoding": "gzip"},
    )
    assert r.status_code == 413
    assert "decompressed" in error_of(r)["message"]


def test_npz_members_inflating_past_the_limit_are_413(small: TestClient, key: dict[str, str]):
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez_compressed(buf, request=np.array("{}"), y=np.zeros(1 << 20))
    assert len(buf.getvalue()) < 65536
    r = small.post("/v1/submissions", content=buf.getvalue(), headers={**key, **NPZ})
    assert r.status_code == 413
    assert "uncompressed" in error_of(r)["message"]


# --------------------------------------------------------------------------------------------
# read_limited on its own
# --------------------------------------------------------------------------------------------


async def _agen(parts: list[bytes]) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


def _read(parts: list[bytes], limit: int, gzip_: bool = False, length: str | None = None) -> bytes:
    return asyncio.run(read_limited(_agen(parts), content_length=length, limit=limit, gzip=gzip_))


def test_read_limited_counts_every_chunk():
    assert _read([b"ab", b"", b"cd"], limit=4) == b"abcd"
    with pytest.raises(ApiError) as exc:
        _read([b"ab", b"cd", b"e"], limit=4)
    assert exc.value.status == 413
    with pytest.raises(ApiError) as exc:
        _read([b"ab"], limit=4, length="5")
    assert exc.value.status == 413
    with pytest.raises(ApiError) as exc:
        _read([b"ab"], limit=4, length="five")
    assert exc.value.status == 400


def test_read_limited_gzip_members_and_limits():
    data = b"x" * 10_000
    packed = gzip.compress(data[:4000]) + gzip.compress(data[4000:])
    parts = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    assert _read(parts, limit=10_000, gzip_=True) == data
    with pytest.raises(ApiError) as exc:
        _read(parts, limit=9_999, gzip_=True)
    assert exc.value.status == 413
    raw_deflate = zlib.compress(data)
    with pytest.raises(ApiError) as exc:
        _read([raw_deflate], limit=20_000, gzip_=True)
    assert exc.value.status == 400
