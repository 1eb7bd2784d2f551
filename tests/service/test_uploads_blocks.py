"""NPZ bodies validated from spooled files in blocks of rows: the same answers as on whole
arrays (the same 422 messages, fields and first bad index across blocks), and the same stored
arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.api import spool
from tests.factories import gz, npz_bytes
from tests.service._api import ADMIN, NPZ, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]

N = 4000
BLOCK = 1000


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "blocks")


def _post(client: TestClient, key: dict[str, str], body: bytes, *, blocks: bool) -> Any:
    """POST ``body`` with validation in blocks of BLOCK rows (members spooled to files), or on
    the whole arrays (one block, members in memory)."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(spool, "CHUNK_ROWS", BLOCK if blocks else 10**9)
        mp.setattr(spool, "INLINE_MEMBER_BYTES", 1 if blocks else 10**12)
        return client.post("/v1/submissions", content=body, headers={**key, **NPZ})
    finally:
        mp.undo()


def _gaussian(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=N)
    std = rng.uniform(0.5, 1.5, size=N)
    return {"mean": mean, "std": std, "y": mean + std * rng.normal(size=N)}


def _req(kind: str, metrics: list[str] | None = None) -> dict[str, Any]:
    return {"kind": kind, "model_name": "blocks", "analyses": {"metrics": metrics or ["nll"]}}


def _bad_gaussian(field: str, row: int, value: float) -> bytes:
    a = _gaussian()
    a[field] = a[field].copy()
    a[field][row] = value
    return npz_bytes(_req("gaussian"), **a)


def _probs_body(bad_row: int | None = None, label_row: int | None = None) -> bytes:
    rng = np.random.default_rng(1)
    c = 4
    probs = rng.dirichlet(np.ones(c), size=N)
    labels = rng.integers(0, c, size=N)
    if bad_row is not None:
        probs[bad_row] = [0.7, 0.7, -0.2, -0.2]
    if label_row is not None:
        labels[label_row] = c
    return npz_bytes(_req("probs", ["nll"]), probs=probs, labels=labels)


def _ensemble_body(member: int, row: int) -> bytes:
    rng = np.random.default_rng(2)
    mp = rng.dirichlet(np.ones(3), size=(2, N)).astype(np.float32)
    mp[member, row] = [1.5, -0.25, -0.25]
    labels = rng.integers(0, 3, size=N)
    return npz_bytes(_req("ensemble", ["nll"]), member_probs=mp, labels=labels)


def _mixture_body(row: int) -> bytes:
    rng = np.random.default_rng(3)
    w = rng.dirichlet(np.ones(2), size=N)
    w[row] = [0.9, 0.3]
    means = rng.normal(size=(N, 2))
    stds = rng.uniform(0.5, 1.0, size=(N, 2))
    y = rng.normal(size=N)
    return npz_bytes(_req("mixture", ["crps"]), weights=w, means=means, stds=stds, y=y)


def _weights_body(weights: np.ndarray) -> bytes:
    return npz_bytes(_req("gaussian"), sample_weight=weights, **_gaussian())


def _groups_body(row: int) -> bytes:
    groups = np.zeros(N, dtype=np.uint64)
    groups[row] = 2**64 - 1  # above the largest int64 group
    return npz_bytes(_req("gaussian"), groups=groups, **_gaussian())


REFUSED = {
    "std-negative-in-block-3": (lambda: _bad_gaussian("std", 2500, -0.3), "std", 2500),
    "mean-nan-last-row": (lambda: _bad_gaussian("mean", N - 1, np.nan), "mean", N - 1),
    "y-inf-in-block-2": (lambda: _bad_gaussian("y", 1234, np.inf), "y", 1234),
    "float32-std": (
        lambda: npz_bytes(
            _req("gaussian"),
            **{k: v.astype(np.float32) for k, v in _gaussian().items()}
            | {"std": np.r_[np.ones(3001, np.float32), -np.ones(N - 3001, np.float32)]},
        ),
        "std",
        3001,
    ),
    "probs-off-simplex": (lambda: _probs_body(bad_row=3100), "probs", 3100),
    "label-out-of-range": (lambda: _probs_body(label_row=3500), "labels", 3500),
    "ensemble-member-row": (lambda: _ensemble_body(1, 2600), "member_probs", 1),
    "mixture-weights-row": (lambda: _mixture_body(2050), "weights", 2050),
    "negative-weight": (
        lambda: _weights_body(np.r_[np.ones(2100), -1.0, np.ones(N - 2101)]),
        "sample_weight",
        2100,
    ),
    "all-zero-weights": (lambda: _weights_body(np.zeros(N)), "sample_weight", None),
    "group-out-of-range": (lambda: _groups_body(2999), "groups", 2999),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_in_blocks_equal_those_on_whole_arrays(
    idle_api: TestClient, key: dict[str, str], case: str
):
    make, field, index = REFUSED[case]
    body = make()
    whole = _post(idle_api, key, body, blocks=False)
    blocked = _post(idle_api, key, body, blocks=True)
    assert whole.status_code == 422, whole.text
    assert blocked.status_code == 422, blocked.text
    # the row was placed by the test: the first bad row counts from the body's first row
    assert (error_of(whole)["field"], error_of(whole)["index"]) == (field, index)
    assert error_of(blocked) == error_of(whole)


def test_zero_weights_in_one_block_only_are_accepted(idle_api: TestClient, key: dict[str, str]):
    """ "Not all zero" is a rule on all the weights: one block of zeros does not break it."""
    w = np.ones(N)
    w[:BLOCK] = 0.0
    body = _weights_body(w)
    for blocks in (False, True):
        r = _post(idle_api, key, body, blocks=blocks)
        assert r.status_code == 202, r.text


@pytest.mark.parametrize("compressed", [False, True])
def test_accepted_in_blocks_stores_the_arrays_as_sent(
    idle_api: TestClient, key: dict[str, str], compressed: bool
):
    a = _gaussian(5)
    a["mean"] = a["mean"].astype(np.float32)
    body = gz(npz_bytes(_req("gaussian"), compressed=compressed, **a))
    headers = {**key, **NPZ, "Content-Encoding": "gzip"}
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(spool, "CHUNK_ROWS", BLOCK)
        mp.setattr(spool, "INLINE_MEMBER_BYTES", 1)
        r = idle_api.post("/v1/submissions", content=body, headers=headers)
    finally:
        mp.undo()
    assert r.status_code == 202, r.text
    store = idle_api.app.state.store  # type: ignore[attr-defined]
    stored = store.load_arrays(r.json()["id"])
    assert set(stored) == {"mean", "std", "y"}
    for name, value in a.items():
        assert stored[name].dtype == value.dtype
        np.testing.assert_array_equal(stored[name], value)
    # nothing of the request is left in the scratch directory
    assert not any(spool.scratch_dir(idle_api.app.state.settings).iterdir())  # type: ignore[attr-defined]


def test_benchmark_targets_in_blocks(idle_api: TestClient):
    y = np.random.default_rng(7).normal(size=N).astype(np.float32)
    req = {"name": "blocks", "task": "regression", "primary_metric": "crps"}
    bad = y.copy()
    bad[3333] = np.nan
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(spool, "CHUNK_ROWS", BLOCK)
        mp.setattr(spool, "INLINE_MEMBER_BYTES", 1)
        refused = idle_api.post(
            "/v1/benchmarks", content=npz_bytes(req, y=bad), headers={**ADMIN, **NPZ}
        )
        made = idle_api.post(
            "/v1/benchmarks", content=npz_bytes(req, y=y), headers={**ADMIN, **NPZ}
        )
    finally:
        mp.undo()
    assert refused.status_code == 422
    assert (error_of(refused)["field"], error_of(refused)["index"]) == ("y", 3333)
    assert error_of(refused)["message"] == "y must be finite; y[3333] is not"
    assert made.status_code == 201, made.text
    store = idle_api.app.state.store  # type: ignore[attr-defined]
    held = store.load_benchmark_arrays(made.json()["id"])
    assert held["y"].dtype == np.float64  # targets are kept as float64, as before
    np.testing.assert_array_equal(held["y"], y.astype(np.float64))


@pytest.mark.parametrize(
    ("field", "row"), [("labels", 2500), ("soft_labels", 1700), ("ood", 3999), (None, None)]
)
def test_classification_benchmark_targets_in_blocks(
    idle_api: TestClient, field: str | None, row: int | None
):
    rng = np.random.default_rng(8)
    c = 3
    labels = rng.integers(0, c, size=N)
    soft = rng.dirichlet(np.ones(c), size=N)
    ood = rng.integers(0, 2, size=N).astype(np.int8)
    if field == "labels":
        labels[row] = -1
    elif field == "soft_labels":
        soft[row] = [0.9, 0.9, -0.8]
    elif field == "ood":
        ood[row] = 7
    req = {"name": "cls", "task": "classification", "primary_metric": "nll"}
    body = npz_bytes(req, labels=labels, soft_labels=soft, ood=ood)
    answers = []
    for blocks in (False, True):
        mp = pytest.MonkeyPatch()
        try:
            mp.setattr(spool, "CHUNK_ROWS", BLOCK if blocks else 10**9)
            mp.setattr(spool, "INLINE_MEMBER_BYTES", 1 if blocks else 10**12)
            answers.append(idle_api.post("/v1/benchmarks", content=body, headers={**ADMIN, **NPZ}))
        finally:
            mp.undo()
    whole, blocked = answers
    if field is None:
        assert whole.status_code == blocked.status_code == 201, blocked.text
        store = idle_api.app.state.store  # type: ignore[attr-defined]
        held = store.load_benchmark_arrays(blocked.json()["id"])
        expected = store.load_benchmark_arrays(whole.json()["id"])
        assert set(held) == set(expected) == {"labels", "soft_labels", "ood"}
        for name in held:
            assert held[name].dtype == expected[name].dtype
            np.testing.assert_array_equal(held[name], expected[name])
        return
    assert whole.status_code == blocked.status_code == 422
    assert (error_of(whole)["field"], error_of(whole)["index"]) == (field, row)
    assert error_of(blocked) == error_of(whole)
