"""``/readyz`` under ``uqeval serve``: the supervisor's state file names the children being
restarted; not ready while the managed Redis or every worker is, whatever Redis still holds
of a dead worker's heartbeat."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.api.app import create_app
from service.api.schemas import Readiness
from service.settings import Settings
from service.store import Store
from service.supervision import ChildState, read_state, write_state
from tests.service._api import TestClient
from tests.stack import Db, db_url

pytest_plugins = ["tests.service._api"]


@pytest.fixture
def own_db(settings: Settings, tmp_path: Path) -> Iterator[tuple[Settings, Store]]:
    """Settings on a database of the test Redis of this test alone, with a state file path."""
    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.READYZ)
    mine = settings.model_copy(
        update={"redis_url": url, "supervisor_state_file": tmp_path / "state.json"}
    )
    store = Store.from_url(url, mine)
    store.client.flushdb()
    try:
        yield mine, store
    finally:
        store.client.flushdb()
        store.close()


def children(**states: str) -> list[ChildState]:
    roles = {"redis": "redis", "api": "api"}
    return [
        ChildState(name=name.replace("_", "-"), role=roles.get(name, "worker"), state=state)  # type: ignore[arg-type]
        for name, state in states.items()
    ]


def readyz(settings: Settings, store: Store) -> tuple[int, dict[str, object]]:
    with TestClient(create_app(settings, store=store)) as client:
        r = client.get("/readyz")
    return r.status_code, r.json()


def test_without_a_state_file_nothing_is_restarting(own_db: tuple[Settings, Store]) -> None:
    settings, store = own_db
    store.register_worker("w1@host", {"pid": 1}, 60.0)
    assert readyz(settings, store) == (
        200,
        {
            "status": "ready",
            "redis": True,
            "workers": ["w1@host"],
            "reason": None,
            "restarting": [],
        },
    )
    # The setting unset: the file is not even looked for.
    plain = settings.model_copy(update={"supervisor_state_file": None})
    assert readyz(plain, store)[1]["restarting"] == []


def test_the_only_worker_restarting_is_not_ready_despite_its_heartbeat(
    own_db: tuple[Settings, Store],
) -> None:
    settings, store = own_db
    store.register_worker("w1@host", {"pid": 1}, 60.0)  # the dead worker's heartbeat lingers
    assert settings.supervisor_state_file is not None
    write_state(
        settings.supervisor_state_file, children(redis="up", worker_1="restarting", api="up")
    )
    code, body = readyz(settings, store)
    assert code == 503
    assert body["status"] == "not_ready"
    assert body["restarting"] == ["worker-1"]
    assert body["reason"] == "no live worker; restarting: worker-1"


def test_one_of_two_workers_restarting_is_ready_and_says_so(
    own_db: tuple[Settings, Store],
) -> None:
    settings, store = own_db
    store.register_worker("w1@host", {"pid": 1}, 60.0)
    assert settings.supervisor_state_file is not None
    write_state(
        settings.supervisor_state_file,
        children(redis="up", worker_1="up", worker_2="restarting", api="up"),
    )
    code, body = readyz(settings, store)
    assert (code, body["status"]) == (200, "ready")
    assert body["restarting"] == ["worker-2"]
    assert body["reason"] == "restarting: worker-2"


def test_redis_restarting_is_not_ready_even_once_it_answers(
    own_db: tuple[Settings, Store],
) -> None:
    settings, store = own_db
    store.register_worker("w1@host", {"pid": 1}, 60.0)
    assert settings.supervisor_state_file is not None
    write_state(settings.supervisor_state_file, children(redis="restarting", worker_1="up"))
    code, body = readyz(settings, store)
    assert code == 503
    assert body["redis"] is True and body["restarting"] == ["redis"]
    assert body["reason"] == "Redis is restarting; restarting: redis"


def test_an_unreadable_state_file_is_ignored(own_db: tuple[Settings, Store]) -> None:
    settings, store = own_db
    store.register_worker("w1@host", {"pid": 1}, 60.0)
    assert settings.supervisor_state_file is not None
    for text in ("{not json", '{"version": 2, "children": []}', '{"version": 1}'):
        settings.supervisor_state_file.write_text(text)
        assert read_state(settings.supervisor_state_file) is None
        code, body = readyz(settings, store)
        assert (code, body["restarting"], body["reason"]) == (200, [], None)


def test_old_documents_without_the_field_still_parse() -> None:
    old = {"status": "ready", "redis": True, "workers": ["w"], "reason": None}
    assert Readiness.model_validate(old).restarting == []
