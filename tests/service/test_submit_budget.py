"""The enqueue budget bounds the waits on Redis and the broker, not the writing of the arrays.

A large batch takes seconds to hash and to write to the blob store; before, those seconds
came out of ``enqueue_timeout_s`` and a 1.2 GB upload answered 503 although Redis was fine.
A slow blob store (a fault one cannot cause for real on a local disk) is a slowed ``put_file``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from service import jobs
from service.analyses import Analyses
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays


def test_slow_blob_writes_do_not_spend_the_enqueue_budget(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = settings.model_copy(update={"enqueue_timeout_s": 0.3})
    put_file = store.blobs.put_file
    put_bytes = store.blobs.put_bytes

    def slow_file(*args: Any, **kwargs: Any) -> None:
        time.sleep(0.4)  # each array's write alone exceeds the budget
        put_file(*args, **kwargs)

    def slow_bytes(*args: Any, **kwargs: Any) -> None:
        time.sleep(0.4)
        put_bytes(*args, **kwargs)

    monkeypatch.setattr(store.blobs, "put_file", slow_file)
    monkeypatch.setattr(store.blobs, "put_bytes", slow_bytes)
    arrays = gaussian_arrays(64)
    record, created = jobs.submit(
        store,
        budget,
        owner="key_test",
        kind="gaussian",
        n=64,
        model_name="m",
        metadata={},
        analyses=Analyses(metrics=["mae"]),
        arrays=arrays,
        idempotency_key=None,
        body_hash="b",
    )
    assert created
    stored = store.get_submission(record.id)
    # accepted and published (not rolled back): a session worker on this database may
    # already have taken it
    assert stored is not None and stored.status in ("queued", "running", "succeeded")
    loaded = store.load_arrays(record.id)
    assert loaded is not None
    for name, a in arrays.items():
        np.testing.assert_array_equal(loaded[name], a)
