"""The parts of a resumable upload are kept under their SHA-256, over real HTTP (uvicorn on
127.0.0.1), the real Redis and the local blob store: bytes sent for a part while its upload is
being completed never replace the bytes the completion reads; a part sent again with other
bytes replaces the earlier ones, which are removed; a part that arrives after its upload was
completed is not kept; an upload created before parts were keyed by digest completes from its
parts as they were stored."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service import keys
from service.api.routes import uploads
from service.store import Store
from tests.factories import gaussian_npz
from tests.service._api import LiveServer, error_of, new_key, submission_total
from tests.service._uploads import PART, digest, parts_of, put

pytest_plugins = ["tests.service._api", "tests.service._uploads"]


def stored(store: Store, upload_id: str) -> dict[str, bytes]:
    """The upload's objects in the blob store: name -> bytes."""
    prefix = f"uploads/{upload_id}/"
    return {
        info.key.removeprefix(prefix): store.blobs.get_bytes(info.key)
        for info in store.blobs.list(prefix)
    }


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def created(http: httpx.Client, key: dict[str, str], body: bytes) -> str:
    r = http.post("/v1/uploads", json={"size": len(body)}, headers=key)
    assert r.status_code == 201, r.text
    upload_id: str = r.json()["id"]
    return upload_id


def send_all(http: httpx.Client, key: dict[str, str], upload_id: str, body: bytes) -> None:
    for n, part in enumerate(parts_of(body), start=1):
        r = put(http, key, upload_id, n, part)
        assert r.status_code == 200, r.text


def accepted_n(http: httpx.Client, key: dict[str, str], done: httpx.Response) -> int:
    """The number of points of the submission a completion made (read from the body it
    joined: 202 only when every part matched what its PUT recorded)."""
    r = http.get(done.headers["Location"], headers=key)
    assert r.status_code == 200, r.text
    n: int = r.json()["n"]
    return n


class Midway:
    """A part whose body stops halfway until the route has passed its checks and started
    reading it; then ``between()`` runs (what happens meanwhile), then the rest is sent."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, between: Any) -> None:
        self.reading = threading.Event()
        self.between = between
        original = uploads.spool_body

        async def spool_body(*args: Any, **kwargs: Any) -> Any:
            self.reading.set()
            return await original(*args, **kwargs)

        monkeypatch.setattr(uploads, "spool_body", spool_body)

    def body(self, data: bytes) -> Iterator[bytes]:
        yield data[: len(data) // 2]
        assert self.reading.wait(30), "the route did not start reading the part"
        self.between()
        yield data[len(data) // 2 :]

    def put(
        self, http: httpx.Client, key: dict[str, str], upload_id: str, n: int, data: bytes
    ) -> httpx.Response:
        headers = {**key, "Content-Type": "application/octet-stream", **digest(data)}
        return http.put(
            f"/v1/uploads/{upload_id}/parts/{n}", content=self.body(data), headers=headers
        )


def sent_then_locked_midway(
    http: httpx.Client, store: Store, monkeypatch: pytest.MonkeyPatch, name: str, seed: int
) -> tuple[dict[str, str], bytes, str, str, Midway]:
    """A new key's upload with every part sent, and a :class:`Midway` that makes another
    completion take the upload once a part has passed the route's early checks: the key, the
    body, the upload id, its lock and the Midway."""
    key = new_key(http, name)
    body = gaussian_npz(5000, seed=seed)
    upload_id = created(http, key, body)
    send_all(http, key, upload_id, body)
    lock = keys.upload_completing(upload_id)
    midway = Midway(monkeypatch, lambda: store.client.set(lock, "another", px=60_000))
    return key, body, upload_id, lock, midway


def test_bytes_sent_while_a_completion_starts_do_not_replace_the_ones_it_reads(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, body, upload_id, lock, midway = sent_then_locked_midway(
        http, store, monkeypatch, "midway", 21
    )
    first = parts_of(body)[0]
    other = bytes(b ^ 0x5A for b in first)  # other bytes of the same size

    r = midway.put(http, key, upload_id, 1, other)
    assert (r.status_code, error_of(r)["code"]) == (409, "upload_completing"), r.text
    held = stored(store, upload_id)
    assert held[f"part-1-{sha(first)}"] == first  # the bytes the completion reads, unchanged
    assert f"part-1-{sha(other)}" not in held  # the refused bytes are not kept
    assert len(held) == len(parts_of(body))

    store.client.delete(lock)
    done = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    assert done.status_code == 202, done.text
    assert accepted_n(http, key, done) == 5000


def test_the_same_bytes_sent_while_a_completion_runs_leave_its_part_in_place(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, body, upload_id, lock, midway = sent_then_locked_midway(
        http, store, monkeypatch, "same", 22
    )
    first = parts_of(body)[0]

    r = midway.put(http, key, upload_id, 1, first)  # a retry of a part already received
    assert (r.status_code, error_of(r)["code"]) == (409, "upload_completing"), r.text
    assert stored(store, upload_id)[f"part-1-{sha(first)}"] == first
    store.client.delete(lock)
    assert http.post(f"/v1/uploads/{upload_id}/complete", headers=key).status_code == 202


def test_a_part_sent_again_with_other_bytes_replaces_them(http: httpx.Client, store: Store) -> None:
    key = new_key(http, "replaced")
    body = gaussian_npz(5000, seed=23)
    upload_id = created(http, key, body)
    first = parts_of(body)[0]
    wrong = bytes(len(first))  # right size, wrong bytes (a client that changed its file)
    assert put(http, key, upload_id, 1, wrong).status_code == 200
    assert list(stored(store, upload_id)) == [f"part-1-{sha(wrong)}"]
    send_all(http, key, upload_id, body)
    assert sorted(stored(store, upload_id)) == sorted(
        f"part-{n}-{sha(part)}" for n, part in enumerate(parts_of(body), start=1)
    )
    # sending a part again with the same bytes keeps it
    assert put(http, key, upload_id, 1, first).status_code == 200
    assert stored(store, upload_id)[f"part-1-{sha(first)}"] == first
    done = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    assert done.status_code == 202, done.text
    assert accepted_n(http, key, done) == 5000
    assert stored(store, upload_id) == {}


def test_a_part_that_arrives_after_its_upload_was_completed_is_not_kept(
    http: httpx.Client, server: LiveServer, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key(http, "late")
    body = gaussian_npz(5000, seed=24)
    upload_id = created(http, key, body)
    send_all(http, key, upload_id, body)
    answers: list[httpx.Response] = []

    def complete() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as other:
            answers.append(other.post(f"/v1/uploads/{upload_id}/complete", headers=key))

    midway = Midway(monkeypatch, complete)
    r = midway.put(http, key, upload_id, 2, parts_of(body)[1])
    assert answers[0].status_code == 202, answers[0].text
    assert r.status_code == 409, r.text
    assert "already complete" in error_of(r)["message"]
    assert stored(store, upload_id) == {}
    assert submission_total(http, key) == 1


def test_an_upload_from_before_digest_keys_completes_from_its_parts(
    http: httpx.Client, store: Store
) -> None:
    key = new_key(http, "legacy")
    body = gaussian_npz(5000, seed=25)
    upload_id = created(http, key, body)
    # as an earlier version recorded it: no part_keys, parts under uploads/<id>/part-<n>
    assert store.client.hdel(keys.upload(upload_id), "part_keys") == 1
    send_all(http, key, upload_id, body)
    assert sorted(stored(store, upload_id)) == sorted(
        f"part-{n}" for n in range(1, len(parts_of(body)) + 1)
    )
    assert len(body) > PART
    done = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    assert done.status_code == 202, done.text
    assert accepted_n(http, key, done) == 5000
    assert stored(store, upload_id) == {}
