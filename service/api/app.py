"""The FastAPI application: ``create_app(settings)`` wires routes, errors, metrics and the store.

Run it with ``uvicorn service.api.app:create_app --factory`` (settings from the environment;
``REDIS_URL`` must point at a Redis server), or through ``uqeval serve``, which also starts a
managed Redis and a worker. The store is opened at startup (lifespan); the configured admin
key is registered then, or one is generated at first start and logged once.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic.json_schema import models_json_schema

import uqcore
from service import ui
from service.api import docs, errors
from service.api.auth import register_admin_key
from service.api.bodylimit import BodyLimit
from service.api.deps import single_query_values
from service.api.observability import Metrics, RequestMetrics
from service.api.routes import (
    admin,
    benchmarks,
    catalogue,
    comparisons,
    finals,
    gates,
    health,
    leaderboards,
    notifications,
    plots,
    sharelinks,
    submissions,
    suites,
    uploads,
)
from service.api.schemas import (
    BenchmarkCreate,
    BenchmarkRequest,
    SubmissionCreate,
    SubmissionRequest,
)
from service.settings import Settings, get_settings
from service.store import Store, StoreUnavailable

log = logging.getLogger("uqeval.api")

DESCRIPTION = """\
Evaluate uncertainty-quantification predictions over HTTP.

POST a prediction batch with its targets to `/v1/submissions` (JSON for small batches, a NumPy
`.npz` upload for large ones, optionally gzip-encoded); a worker computes the requested
metrics with uqcore, with bootstrap intervals and a stability study when asked; poll
`/v1/submissions/{sub_id}` for the status and the results. The metric catalogue is
`GET /v1/metrics`.

**Authentication.** Every `/v1` route except the catalogue needs an API key, sent as
`Authorization: Bearer <key>` or `X-API-Key: <key>`. Admins create submitter keys under
`/v1/admin/keys`, each of a team (`/v1/admin/teams`). A submitter key reads and changes its
team's submissions and reads public ones; other ids answer 404. Admin keys read everything.

**Benchmarks.** Admins register hidden targets at `/v1/benchmarks`; submit against one with
`benchmark_id` instead of `y`. The targets are never readable through the API.

**Errors.** Every error answer is `{"error": {"code", "message", "field", "index"}}`: `field`
names the offending request field (e.g. `prediction.std`, or the NPZ member `std`) and
`index` its first offending row. Each query parameter an operation declares takes one value:
one given twice is refused (422), not reduced to one of its values.

**Numbers.** Results never contain NaN or infinity: an undefined value is `null` and a
warning says why.
"""

TAGS = [
    {"name": "metrics", "description": "The metric catalogue (uqcore's registry)."},
    {"name": "submissions", "description": "Submit prediction batches and read results."},
    {
        "name": "benchmarks",
        "description": "Benchmarks with hidden targets (admins create them; every key reads "
        "their metadata, never the targets).",
    },
    {
        "name": "comparisons",
        "description": "Paired bootstrap comparisons of submissions on a benchmark.",
    },
    {
        "name": "gates",
        "description": "Quality gates: is a candidate worse than a reference beyond an allowance?",
    },
    {
        "name": "plots",
        "description": "Plots of submissions, comparisons and leaderboards, as PNG or SVG.",
    },
    {"name": "admin", "description": "Teams and API keys (admin key required)."},
    {"name": "health", "description": "Liveness, readiness and Prometheus metrics."},
    {
        "name": "suites",
        "description": "Benchmark suites: leaderboards aggregated over several benchmarks.",
    },
]

#: Models documented in the OpenAPI document without being parsed by FastAPI (the submission
#: body is decoded by hand to stream it under a size limit and to accept NPZ).
EXTRA_SCHEMAS = (SubmissionCreate, SubmissionRequest, BenchmarkCreate, BenchmarkRequest)


def _operation_id(route: APIRoute) -> str:
    return route.name


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app``, with the hand-decoded request models added."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    _, defs = models_json_schema(
        [(m, "validation") for m in EXTRA_SCHEMAS],
        ref_template="#/components/schemas/{model}",
    )
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in defs.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    doc["components"]["schemas"] = dict(sorted(schemas.items()))
    app.openapi_schema = doc
    return doc


def create_app(settings: Settings | None = None, *, store: Store | None = None) -> FastAPI:
    """The API app. ``store`` (optional) is used instead of opening one on ``settings``."""
    settings = settings if settings is not None else get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = store is None
        if own:
            if not settings.redis_url:
                raise RuntimeError(
                    "REDIS_URL is not set: point it at a Redis server, or start everything "
                    "with `uqeval serve`"
                )
            app.state.store = Store.from_url(settings.redis_url, settings)
        else:
            app.state.store = store
        try:
            register_admin_key(settings, app.state.store)
            app.state.admin_key_ready = True
        except StoreUnavailable as exc:
            # Readiness reports it; the key is registered at the first authenticated request.
            log.warning("Redis unavailable at startup (%s); admin key not registered yet", exc)
        app.state.read_limiter = anyio.CapacityLimiter(settings.read_threads)
        frozen = settings.gc_freeze
        if frozen:  # see Settings.gc_freeze
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            if frozen:
                gc.unfreeze()
            if own:
                app.state.store.close()
            app.state.store = None
            app.state.metrics.process_exit()

    app = FastAPI(
        title="uq-eval",
        version=uqcore.__version__,
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        # served by service.api.docs from the installed package, not from a CDN
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = None
    app.state.admin_key_ready = False
    metrics = Metrics()
    metrics.watch_store(lambda: app.state.store)
    app.state.metrics = metrics
    errors.install(app)
    for router in (
        catalogue.router,
        submissions.router,
        uploads.router,
        benchmarks.router,
        leaderboards.router,
        sharelinks.router,
        comparisons.router,
        notifications.router,
        plots.router,
        admin.router,
        health.router,
        gates.router,  # quality gates
        finals.router,
        suites.router,
    ):
        # The API's routes, not the pages of the UI (which answer their errors as pages).
        app.include_router(router, dependencies=[Depends(single_query_values)])
    docs.install(app)
    ui.install(app)  # the web pages under /ui/
    app.add_middleware(BodyLimit)  # bodies read whole by FastAPI: at most 1 MiB
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app
