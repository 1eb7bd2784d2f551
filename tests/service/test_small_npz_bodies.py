"""Small NPZ bodies (at most ``MEMORY_BODY_BYTES``, declared, not gzip-encoded) are read into
memory instead of a spool file: no spool directory is made for them, they are stored as a
spooled body would be (the same arrays, the same body hash for Idempotency-Key), and a member
that inflates past the inline size still goes to a file of a spool made for it, removed at
the end of the request."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import service.api.spool as spool_module
from service.api.spool import INLINE_MEMBER_BYTES, MEMORY_BODY_BYTES
from service.store import Store
from tests.factories import gaussian_arrays, gaussian_npz, gz
from tests.service._api import NPZ, TestClient, new_key

pytest_plugins = ["tests.service._api"]


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "small-bodies")


@pytest.fixture
def spools(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The spool directories made while the test runs."""
    made: list[Path] = []
    real = spool_module.tempfile.mkdtemp

    def mkdtemp(*args: Any, **kwargs: Any) -> str:
        path = real(*args, **kwargs)
        if Path(path).name.startswith("spool-"):
            made.append(Path(path))
        return path

    monkeypatch.setattr(spool_module.tempfile, "mkdtemp", mkdtemp)
    return made


def _stored(client: TestClient, sub_id: str) -> dict[str, np.ndarray]:
    store: Store = client.app.state.store  # type: ignore[attr-defined]
    arrays = store.load_arrays(sub_id)
    assert arrays is not None
    return {k: np.asarray(v) for k, v in arrays.items()}


def test_a_small_body_is_read_in_memory_and_stored_as_a_spooled_one(
    idle_api: TestClient, key: dict[str, str], spools: list[Path]
) -> None:
    body = gaussian_npz(500, seed=4)
    assert len(body) <= MEMORY_BODY_BYTES
    idem = {"Idempotency-Key": "small-body"}
    first = idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ, **idem})
    assert first.status_code == 202, first.text
    assert spools == []  # no directory, no file for it
    sent = gaussian_arrays(500, seed=4)
    stored = _stored(idle_api, first.json()["id"])
    for name in ("mean", "std", "y"):
        np.testing.assert_array_equal(stored[name], sent[name])

    # The same bytes gzip-encoded are spooled: the same body (hash) for the Idempotency-Key.
    again = idle_api.post(
        "/v1/submissions",
        content=gz(body),
        headers={**key, **NPZ, **idem, "Content-Encoding": "gzip"},
    )
    assert again.status_code == 202, again.text
    assert again.json()["id"] == first.json()["id"] and again.json()["replayed"] is True
    assert len(spools) == 1 and not spools[0].exists()  # made for it, then removed
    other = gaussian_npz(500, seed=5)
    conflict = idle_api.post("/v1/submissions", content=other, headers={**key, **NPZ, **idem})
    assert conflict.status_code == 409


def test_a_larger_body_is_spooled(
    idle_api: TestClient, key: dict[str, str], spools: list[Path]
) -> None:
    n = MEMORY_BODY_BYTES // 24 + 1000  # three float64 columns: past the in-memory size
    body = gaussian_npz(n, seed=6)
    assert len(body) > MEMORY_BODY_BYTES
    r = idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == 202, r.text
    assert len(spools) == 1 and not spools[0].exists()
    np.testing.assert_array_equal(
        _stored(idle_api, r.json()["id"])["y"], gaussian_arrays(n, 6)["y"]
    )


def test_a_small_body_whose_member_inflates_past_the_inline_size_uses_a_spool_file(
    idle_api: TestClient, key: dict[str, str], spools: list[Path]
) -> None:
    """A deflated member (``savez_compressed``) larger than INLINE_MEMBER_BYTES once inflated is
    extracted to a spool file and memory-mapped, as from a spooled body."""
    n = INLINE_MEMBER_BYTES // 8 + 4096
    request = {"kind": "gaussian", "model_name": "deflated", "analyses": {"metrics": ["mae"]}}
    y = np.zeros(n)
    buf = io.BytesIO()
    np.savez_compressed(
        buf, request=np.array(json.dumps(request)), mean=np.zeros(n), std=np.ones(n), y=y
    )
    body = buf.getvalue()
    assert len(body) <= MEMORY_BODY_BYTES
    r = idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == 202, r.text
    assert len(spools) == 1 and not spools[0].exists()
    stored = _stored(idle_api, r.json()["id"])
    assert stored["y"].shape == (n,) and not stored["y"].any()
    np.testing.assert_array_equal(stored["std"], np.ones(n))
