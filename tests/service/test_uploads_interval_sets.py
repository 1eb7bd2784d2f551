"""Large interval and prediction-set NPZ bodies: validated from spooled files in blocks of rows
with the same 422 as on whole arrays (the first bad row of the body, in the message too), and
sent by resumable upload into the same evaluation as a one-shot POST."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.api import spool
from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.factories import npz_bytes
from tests.service._api import NPZ, LiveServer, TestClient, error_of, new_key, wait_terminal

pytest_plugins = ["tests.service._api"]

N = 4000
BLOCK = 1000
C = 3


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "blocks")


def _post(client: TestClient, key: dict[str, str], body: bytes, *, blocks: bool) -> Any:
    """POST ``body`` validated in blocks of BLOCK rows (members spooled to files), or on the
    whole arrays (one block, members in memory)."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(spool, "CHUNK_ROWS", BLOCK if blocks else 10**9)
        mp.setattr(spool, "INLINE_MEMBER_BYTES", 1 if blocks else 10**12)
        return client.post("/v1/submissions", content=body, headers={**key, **NPZ})
    finally:
        mp.undo()


def interval(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=N)
    return {
        "lower": centre - rng.uniform(0.1, 1.0, size=N),
        "upper": centre + rng.uniform(0.1, 1.0, size=N),
        "y": centre + 0.5 * rng.normal(size=N),
    }


def sets(seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(C), size=N)
    return {"sets": probs >= 0.25, "probs": probs, "labels": rng.integers(0, C, size=N)}


def _req(kind: str, metrics: Any) -> dict[str, Any]:
    return {"kind": kind, "model_name": "blocks", "analyses": {"metrics": metrics}}


def _upper_below_lower(row: int) -> bytes:
    a = interval()
    a["upper"][row] = a["lower"][row] - 1.0
    return npz_bytes(_req("interval", "all"), level=np.float64(0.9), **a)


def _bad_entry(row: int) -> bytes:
    a = sets()
    s = a["sets"].astype(np.uint8)
    s[row, 1] = 2
    return npz_bytes(_req("prediction_set", ["brier"]), **{**a, "sets": s})


def _probs_off(row: int) -> bytes:
    a = sets()
    a["probs"][row] = [0.6, 0.6, 0.1]
    return npz_bytes(_req("prediction_set", ["brier"]), **a)


def _level(value: Any) -> bytes:
    return npz_bytes(_req("interval", "all"), level=np.asarray(value), **interval())


REFUSED = {
    "upper-below-lower-in-block-3": (lambda: _upper_below_lower(2500), "upper", 2500, "2500"),
    "upper-below-lower-last-row": (lambda: _upper_below_lower(N - 1), "upper", N - 1, "3999"),
    "sets-entry-in-block-4": (lambda: _bad_entry(3100), "sets", 3100, "sets[3100, 1]"),
    "probs-off-simplex-in-block-3": (lambda: _probs_off(2200), "probs", 2200, "probs[2200]"),
    "level-above-one": (lambda: _level(1.5), "level", None, "level"),
    "level-nan": (lambda: _level(np.nan), "level", None, "level"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_in_blocks_equal_those_on_whole_arrays(
    idle_api: TestClient, key: dict[str, str], case: str
) -> None:
    make, field, index, fragment = REFUSED[case]
    body = make()
    whole = _post(idle_api, key, body, blocks=False)
    blocked = _post(idle_api, key, body, blocks=True)
    assert whole.status_code == 422, whole.text
    assert blocked.status_code == 422, blocked.text
    assert (error_of(whole)["field"], error_of(whole)["index"]) == (field, index)
    assert error_of(blocked) == error_of(whole)
    assert fragment in error_of(blocked)["message"]


def test_interval_rule_names_both_bounds_at_the_global_row(
    idle_api: TestClient, key: dict[str, str]
) -> None:
    """upper < lower is a rule across two fields: the block's row of each is moved to the
    body's row (lower[2500], not lower[500])."""
    blocked = error_of(_post(idle_api, key, _upper_below_lower(2500), blocks=True))
    assert "upper[2500]" in blocked["message"] and "lower[2500]" in blocked["message"]
    assert "[500]" not in blocked["message"]


def test_accepted_in_blocks_stores_sets_and_level_as_sent(
    idle_api: TestClient, key: dict[str, str]
) -> None:
    a = sets()
    body = npz_bytes(_req("prediction_set", ["brier"]), **a)
    r = _post(idle_api, key, body, blocks=True)
    assert r.status_code == 202, r.text
    stored = idle_api.app.state.store.load_arrays(r.json()["id"])  # type: ignore[attr-defined]
    assert stored["sets"].dtype == np.bool_
    np.testing.assert_array_equal(stored["sets"], a["sets"])
    np.testing.assert_array_equal(stored["probs"], a["probs"])
    i = interval()
    r = _post(idle_api, key, npz_bytes(_req("interval", "all"), level=0.75, **i), blocks=True)
    # no regression metric may apply to an interval yet: then "all" is refused as such
    if r.status_code == 422:
        assert error_of(r)["code"] == "metric_not_applicable"
        return
    assert r.status_code == 202, r.text
    stored = idle_api.app.state.store.load_arrays(r.json()["id"])  # type: ignore[attr-defined]
    assert float(stored["level"]) == 0.75
    np.testing.assert_array_equal(stored["lower"], i["lower"])


# --------------------------------------------------------------------------------------------
# resumable upload
# --------------------------------------------------------------------------------------------

PART = 64 << 10


@pytest.fixture
def http(settings: Settings, store: Store, tmp_path: Path) -> Iterator[httpx.Client]:
    up = settings.model_copy(update={"upload_part_bytes": PART, "data_dir": tmp_path})
    with (
        LiveServer(create_app(up, store=store)) as live,
        httpx.Client(base_url=live.url, timeout=60) as client,
    ):
        yield client


def _put(http: httpx.Client, key: dict[str, str], upload_id: str, n: int, data: bytes) -> Any:
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    headers = {
        **key,
        "Content-Type": "application/octet-stream",
        "Content-Digest": f"sha-256=:{digest}:",
    }
    return http.put(f"/v1/uploads/{upload_id}/parts/{n}", content=data, headers=headers)


def test_prediction_set_by_resumable_upload(http: httpx.Client, worker: Any) -> None:
    key = new_key(http, "uploader")
    a = sets(seed=5)
    body = npz_bytes(_req("prediction_set", ["brier", "nll"]), **a)
    chunks = [body[i : i + PART] for i in range(0, len(body), PART)]
    assert len(chunks) >= 3
    r = http.post(
        "/v1/uploads",
        json={"size": len(body), "sha256": hashlib.sha256(body).hexdigest()},
        headers=key,
    )
    assert r.status_code == 201, r.text
    upload_id = r.json()["id"]
    for n in reversed(range(1, len(chunks) + 1)):  # any order
        assert _put(http, key, upload_id, n, chunks[n - 1]).status_code == 200
    done = http.post(f"/v1/uploads/{upload_id}/complete", headers=key)
    assert done.status_code == 202, done.text
    doc = wait_terminal(http, key, done.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert (doc["kind"], doc["n"]) == ("prediction_set", N)
    probs, labels = a["probs"], a["labels"]
    want_brier = float(np.mean(((probs - np.eye(C)[labels]) ** 2).sum(axis=1)))
    want_nll = float(-np.mean(np.log(probs[np.arange(N), labels])))
    got = doc["result"]["metrics"]
    assert got["brier"]["value"] == pytest.approx(want_brier, rel=1e-12)
    assert got["nll"]["value"] == pytest.approx(want_nll, rel=1e-12)
