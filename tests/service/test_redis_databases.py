"""The test Redis server's databases (:class:`tests.stack.Db`): each exists on the server,
and the tests choose theirs through that one list, so that none shares a database with a
stack that keeps a worker on it."""

from __future__ import annotations

import re
from pathlib import Path

import redis

from tests.stack import Db, db_url

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_database_exists_on_the_test_server(redis_server: str) -> None:
    client = redis.Redis.from_url(redis_server)
    try:
        count = int(client.config_get("databases")["databases"])
    finally:
        client.close()
    assert max(Db) < count, f"the server has {count} databases"
    for db in Db:
        one = redis.Redis.from_url(db_url(redis_server, db))
        try:
            assert one.connection_pool.connection_kwargs["db"] == int(db)
            assert one.ping()
        finally:
            one.close()


def test_test_modules_take_their_database_from_the_list() -> None:
    """No test builds a Redis URL with a database number of its own: a URL's database comes
    from ``db_url(url, Db.<NAME>)``."""
    by_hand = re.compile(r"""rsplit\(["']/["'], 1\)\[0\]\s*\+""")
    call = re.compile(r"\bdb_url\(([^()]*(?:\([^()]*\))?[^()]*)\)")
    found = []
    for path in sorted(set(TESTS.rglob("*.py")) - {Path(__file__).resolve()}):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("def "):
                continue
            calls = call.findall(line)
            if by_hand.search(line) or any(", Db." not in c for c in calls):
                found.append(f"{path.relative_to(TESTS)}:{i}: {line.strip()}")
    assert found == []
