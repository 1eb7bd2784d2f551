"""Resumable uploads over real HTTP (uvicorn on 127.0.0.1): create, parts with checksums (a
corrupted part refused, then sent again), an interrupted client resuming from the status,
completion into the same submission as a one-shot POST, abort, expiry, access."""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.api.app import create_app
from service.api.routes import uploads
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_npz, gz, npz_bytes
from tests.service._api import ADMIN, NPZ, LiveServer, error_of, new_key, wait_terminal
from tests.service._uploads import PART, digest, parts_of, put

pytest_plugins = ["tests.service._api", "tests.service._uploads"]


def part_files(store: Store, upload_id: str) -> list[str]:
    """The parts of an upload in the blob store of the app's ``store``."""
    prefix = f"uploads/{upload_id}/"
    return sorted(info.key.removeprefix(prefix) for info in store.blobs.list(prefix))


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what differs between two runs of the same job (ids, times, URLs)."""
    out = {k: v for k, v in result.items() if k not in ("provenance", "timings", "plots")}
    out["plots"] = [p["name"] for p in result.get("plots", [])]
    return out


def test_resumable_upload_end_to_end(
    http: httpx.Client, up_settings: Settings, worker: Any, store: Store
) -> None:
    key = new_key(http, "uploader")
    body = gaussian_npz(20_000, seed=3)
    chunks = parts_of(body)
    assert len(chunks) >= 5

    r = http.post(
        "/v1/uploads",
        json={"size": len(body), "sha256": hashlib.sha256(body).hexdigest()},
        headers=key,
    )
    assert r.status_code == 201, r.text
    info = r.json()
    upload_id = info["id"]
    assert r.headers["Location"] == info["url"] == f"/v1/uploads/{upload_id}"
    assert (info["size"], info["part_size"], info["parts"], info["received"]) == (
        len(body),
        PART,
        math.ceil(len(body) / PART),
        [],
    )

    assert put(http, key, upload_id, 1, chunks[0]).json() == {
        "part": 1,
        "size": len(chunks[0]),
        "sha256": hashlib.sha256(chunks[0]).hexdigest(),
    }
    # part 2 damaged on the way: its bytes do not match the digest sent with it
    damaged = bytearray(chunks[1])
    damaged[100] ^= 0xFF
    r = http.put(
        f"/v1/uploads/{upload_id}/parts/2",
        content=bytes(damaged),
        headers={**key, **digest(chunks[1])},
    )
    assert r.status_code == 422
    assert (error_of(r)["code"], error_of(r)["field"]) == ("digest_mismatch", "Content-Digest")
    assert http.get(f"/v1/uploads/{upload_id}", headers=key).json()["received"] == [1]
    assert put(http, key, upload_id, 2, chunks[1]).status_code == 200
    assert put(http, key, upload_id, 4, chunks[3]).status_code == 200
    # the client stops here (interrupted); a new one resumes from the status
    http.close()

    with httpx.Client(base_url=str(http.base_url), timeout=60) as again:
        status = again.get(f"/v1/uploads/{upload_id}", headers=key).json()
        assert status["received"] == [1, 2, 4]
        r = again.post(f"/v1/uploads/{upload_id}/complete", headers=key)
        assert r.status_code == 409
        assert error_of(r)["code"] == "upload_incomplete"
        for n in range(1, status["parts"] + 1):
            if n not in status["received"]:
                assert put(again, key, upload_id, n, chunks[n - 1]).status_code == 200
        # each part kept under its SHA-256
        assert part_files(store, upload_id) == sorted(
            f"part-{n}-{hashlib.sha256(chunk).hexdigest()}"
            for n, chunk in enumerate(chunks, start=1)
        )
        done = again.post(f"/v1/uploads/{upload_id}/complete", headers=key)
        assert done.status_code == 202, done.text
        assert done.headers["Location"] == done.json()["status_url"]
        # completing again answers the same; the parts are gone
        assert again.post(f"/v1/uploads/{upload_id}/complete", headers=key).json() == done.json()
        assert part_files(store, upload_id) == []

        one_shot = again.post("/v1/submissions", content=body, headers={**key, **NPZ})
        assert one_shot.status_code == 202, one_shot.text
        a = wait_terminal(again, key, done.json()["id"])
        b = wait_terminal(again, key, one_shot.json()["id"])
        assert a["status"] == b["status"] == "succeeded", (a, b)
        assert a["n"] == b["n"] == 20_000
        assert comparable(a["result"]) == comparable(b["result"])


def test_only_the_creating_key_sees_an_upload(http: httpx.Client) -> None:
    owner, other = new_key(http, "owner"), new_key(http, "other")
    upload_id = http.post("/v1/uploads", json={"size": 10}, headers=owner).json()["id"]
    for method, path in (
        ("GET", f"/v1/uploads/{upload_id}"),
        ("POST", f"/v1/uploads/{upload_id}/complete"),
        ("DELETE", f"/v1/uploads/{upload_id}"),
    ):
        r = http.request(method, path, headers=other)
        assert r.status_code == 404, (method, r.text)
    assert put(http, other, upload_id, 1, b"0123456789").status_code == 404
    assert put(http, owner, upload_id, 1, b"0123456789").status_code == 200


def test_part_rules(http: httpx.Client, up_settings: Settings, store: Store) -> None:
    key = new_key(http, "parts")
    size = PART + 10
    upload_id = http.post("/v1/uploads", json={"size": size}, headers=key).json()["id"]
    data = b"x" * PART
    r = http.put(f"/v1/uploads/{upload_id}/parts/1", content=data, headers=key)
    assert (r.status_code, error_of(r)["field"]) == (422, "Content-Digest")
    r = put(http, key, upload_id, 1, data[:-1])
    assert r.status_code == 422 and "must hold 65536 bytes; found 65535" in error_of(r)["message"]
    r = put(http, key, upload_id, 2, b"y" * 11)
    assert r.status_code == 413
    r = put(http, key, upload_id, 3, b"y" * 10)
    assert (r.status_code, error_of(r)["field"]) == (422, "n")
    assert put(http, key, upload_id, 2, b"y" * 10).status_code == 200
    assert put(http, key, upload_id, 2, b"y" * 10).status_code == 200  # a retry is harmless
    too_big = up_settings.max_upload_bytes + 1
    r = http.post("/v1/uploads", json={"size": too_big}, headers=key)
    assert (r.status_code, error_of(r)["field"]) == (413, "size")
    # abort: the record and the parts go
    assert http.delete(f"/v1/uploads/{upload_id}", headers=key).status_code == 204
    assert part_files(store, upload_id) == []
    assert http.get(f"/v1/uploads/{upload_id}", headers=key).status_code == 404


def test_refused_body_keeps_the_upload_and_wrong_sha256(http: httpx.Client) -> None:
    key = new_key(http, "refused")
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "m", "analyses": {"metrics": ["nll"]}},
        mean=np.zeros(5),
        std=np.array([1.0, 1.0, -1.0, 1.0, 1.0]),
        y=np.zeros(5),
    )
    upload_id = http.post(
        "/v1/uploads", json={"size": len(body), "sha256": "0" * 64}, headers=key
    ).json()["id"]
    assert put(http, key, upload_id, 1, body).status_code == 200
    r = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    assert (r.status_code, error_of(r)["field"]) == (422, "sha256")
    upload_id = http.post("/v1/uploads", json={"size": len(body)}, headers=key).json()["id"]
    assert put(http, key, upload_id, 1, body).status_code == 200
    r = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    one_shot = http.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == one_shot.status_code == 422
    assert error_of(r) == error_of(one_shot)
    assert (error_of(r)["field"], error_of(r)["index"]) == ("std", 2)
    assert http.get(f"/v1/uploads/{upload_id}", headers=key).json()["received"] == [1]


def test_gzip_benchmark_upload_answers_as_post_benchmarks(http: httpx.Client, store: Store) -> None:
    y = np.random.default_rng(11).normal(size=30_000)
    req = {"name": "up", "task": "regression", "primary_metric": "crps"}
    body = gz(npz_bytes(req, y=y))
    submitter = new_key(http, "not-admin")
    r = http.post(
        "/v1/uploads", json={"size": len(body), "purpose": "benchmark"}, headers=submitter
    )
    assert (r.status_code, error_of(r)["field"]) == (403, "purpose")
    r = http.post(
        "/v1/uploads",
        json={"size": len(body), "purpose": "benchmark", "content_encoding": "gzip"},
        headers=ADMIN,
    )
    upload_id = r.json()["id"]
    for n, chunk in enumerate(parts_of(body), start=1):
        assert put(http, ADMIN, upload_id, n, chunk).status_code == 200
    done = http.post(f"/v1/uploads/{upload_id}/complete", headers=ADMIN)
    direct = http.post(
        "/v1/benchmarks", content=body, headers={**ADMIN, **NPZ, "Content-Encoding": "gzip"}
    )
    assert done.status_code == direct.status_code == 201, done.text
    varying = ("id", "created_at", "updated_at")
    assert {k: v for k, v in done.json().items() if k not in varying} == {
        k: v for k, v in direct.json().items() if k not in varying
    }
    held = store.load_benchmark_arrays(done.json()["id"])
    assert held is not None
    np.testing.assert_array_equal(held["y"], y)


def test_expired_uploads_lose_their_parts(
    settings: Settings, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = settings.model_copy(
        update={"upload_part_bytes": PART, "upload_ttl_s": 1, "data_dir": tmp_path}
    )
    monkeypatch.setattr(uploads, "SWEEP_INTERVAL_S", 0.0)
    with (
        LiveServer(create_app(short, store=store)) as live,
        httpx.Client(base_url=live.url, timeout=30) as http,
    ):
        key = new_key(http, "expiry")
        upload_id = http.post("/v1/uploads", json={"size": 10}, headers=key).json()["id"]
        assert put(http, key, upload_id, 1, b"0123456789").status_code == 200
        assert part_files(store, upload_id) == [
            f"part-1-{hashlib.sha256(b'0123456789').hexdigest()}"
        ]
        deadline = time.monotonic() + 30
        while http.get(f"/v1/uploads/{upload_id}", headers=key).status_code != 404:
            assert time.monotonic() < deadline, "the upload did not expire"
            time.sleep(0.2)
        # the next upload created sweeps the parts of expired ones
        assert http.post("/v1/uploads", json={"size": 10}, headers=key).status_code == 201
        assert part_files(store, upload_id) == []
