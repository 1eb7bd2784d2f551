"""Property-based test of the API against its committed OpenAPI document (schemathesis).

What it covers: every operation of ``openapi/openapi.json`` (the committed file, not the app's
live document, so a drift between the two is a failure here too) is called with inputs that
schemathesis generates from the document, valid ones and invalid ones (positive and negative
modes), over real HTTP against the app under uvicorn on 127.0.0.1 with a real Redis. Every
answer must

* not be a 5xx (but the documented 503 of /readyz and of the plots, which wait on a worker:
  none runs here),
* have a status code the operation documents,
* have a content type the document declares for that status, and
* match the documented response schema.

Stateless: each operation on its own. Stateful: schemathesis' state machine follows the
document's OpenAPI links (createSubmission -> getSubmission / updateSubmission /
cancelSubmission / deleteSubmission, createBenchmark -> getBenchmark / getLeaderboard /
updateBenchmark / deleteBenchmark / createShareLink / listShareLinks, createShareLink ->
revokeShareLink, createApiKey -> revokeApiKey, createComparison -> getComparison), so ids
that exist are exercised, not only random ones.

Operations under ``/v1/admin`` and the benchmark writes are called with the admin key, the
others with a submitter key (both sent as ``Authorization`` headers). No worker consumes the
Redis database used here, so accepted submissions stay queued.

Deterministic (``derandomize``, no example database) and bounded: a few examples per
operation and a few short scenarios, about a minute on two shared cores. To run it longer,
set ``UQEVAL_SCHEMATHESIS_EXAMPLES`` (examples per operation and mode, default 8) and
``UQEVAL_SCHEMATHESIS_SCENARIOS`` (stateful scenarios, default 10), e.g.::

    UQEVAL_SCHEMATHESIS_EXAMPLES=500 UQEVAL_SCHEMATHESIS_SCENARIOS=300 \\
        python -m pytest -n 0 tests/service/test_api_schemathesis.py
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi import checks as openapi_checks

from service.api.app import create_app
from service.settings import Settings
from service.store import Store
from tests.service._api import ADMIN, LiveServer
from tests.stack import Db, clear_store, db_url

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
EXAMPLES = int(os.environ.get("UQEVAL_SCHEMATHESIS_EXAMPLES", "8"))
SCENARIOS = int(os.environ.get("UQEVAL_SCHEMATHESIS_SCENARIOS", "10"))


def _needs_a_worker(case: Any) -> bool:
    """Operations whose documented 503 is "not ready" or "retry later", not a failure: no
    worker runs here, so /readyz says not ready and a plot is never drawn."""
    return case.path == "/readyz" or "/plots/" in case.path


def no_server_error(ctx: Any, response: Any, case: Any) -> None:
    """No 5xx, but the 503 of an operation that waits on a worker (with Retry-After for a
    plot: the client is told when to come back)."""
    status = response.status_code
    if status == 503 and _needs_a_worker(case):
        assert case.path == "/readyz" or "retry-after" in {k.lower() for k in response.headers}
        return
    assert status < 500, f"{status} on {case.method} {case.path}: {response.text[:500]}"


#: What every answer is checked for: no 5xx, and conformance to the document.
CHECKS = [
    no_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]

config = schemathesis.Config.from_dict(
    {
        "generation": {
            "mode": "all",
            "max-examples": EXAMPLES,
            "deterministic": True,
            "database": "none",
            # Control characters in headers are refused by the HTTP client before sending.
            "exclude-header-characters": "\r\n\x00",
        },
        "phases": {"stateful": {"max-steps": 8}},
    }
)
schema = schemathesis.openapi.from_path(DOCUMENT, config=config)

HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


def _admin_only(method: str, path: str) -> bool:
    """Operations that need the admin key (the others are called as a submitter)."""
    if path.startswith("/v1/admin"):
        return True
    return path.startswith("/v1/benchmarks") and (method != "GET" or path.endswith("/share-links"))


class Api:
    """The live server, its session and the two keys."""

    def __init__(self, url: str, submitter: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.admin = dict(ADMIN)
        self.submitter = {"Authorization": f"Bearer {submitter}"}

    def headers(self, method: str, path: str) -> dict[str, str]:
        return self.admin if _admin_only(method.upper(), path) else self.submitter


@pytest.fixture(scope="module")
def live_api(session_settings: Settings) -> Iterator[Api]:
    """The app under uvicorn on a Redis database of its own, with a submitter key; the
    rate limit is off (thousands of requests from one key are the point here)."""
    assert session_settings.redis_url is not None
    url = db_url(session_settings.redis_url, Db.SCHEMATHESIS)
    test_settings = session_settings.model_copy(update={"redis_url": url, "rate_limit": 0})
    store = Store.from_url(url, test_settings)
    store.client.flushdb()
    try:
        with LiveServer(create_app(test_settings, store=store)) as server:
            r = requests.post(
                f"{server.url}/v1/admin/keys", json={"name": "schemathesis"}, headers=ADMIN
            )
            assert r.status_code == 201, r.text
            api = Api(server.url, r.json()["key"])
            try:
                yield api
            finally:
                api.session.close()
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


@pytest.mark.slow
@schema.parametrize()
@HYPOTHESIS
def test_stateless(case: Any, live_api: Api) -> None:
    case.call_and_validate(
        base_url=live_api.url,
        session=live_api.session,
        headers=live_api.headers(case.method, case.path),
        checks=CHECKS,
        timeout=30,
    )


class _Machine(schema.as_state_machine()):  # type: ignore[misc]
    api: Api

    def get_call_kwargs(self, case: Any) -> dict[str, Any]:
        return {
            "base_url": self.api.url,
            "session": self.api.session,
            "headers": self.api.headers(case.method, case.path),
            "timeout": 30,
        }

    def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
        case.validate_response(response, checks=CHECKS)


def test_stateful(live_api: Api) -> None:
    _Machine.api = live_api
    _Machine.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=8,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
    )
