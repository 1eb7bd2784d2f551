"""Liveness, readiness and Prometheus metrics (no API key needed)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api.schemas import Health, Readiness
from service.blobs import BlobUnavailable
from service.settings import Settings
from service.store import Store, StoreUnavailable
from service.supervision import read_state

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz", summary="Liveness", response_model=Health)
def healthz() -> Health:
    """The API process is up (says nothing about Redis or workers)."""
    return Health()


@router.get(
    "/readyz",
    operation_id="readyz",
    summary="Readiness",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "Redis unreachable or no live worker (or all of them being "
            "restarted by `uqeval serve`).",
        }
    },
)
def readyz(request: Request) -> JSONResponse:
    """Ready when Redis answers and at least one worker is alive (heartbeat within its TTL).

    Under ``uqeval serve`` the supervisor's state file (``UQEVAL_SUPERVISOR_STATE_FILE``)
    adds the children being restarted: not ready while the managed Redis or every worker is
    (a dead worker's heartbeat outlives it by up to its TTL; the supervisor knows at once)."""
    store: Store | None = getattr(request.app.state, "store", None)
    settings: Settings | None = getattr(request.app.state, "settings", None)
    supervisor = read_state(settings.supervisor_state_file if settings is not None else None)
    restarting = supervisor.restarting if supervisor is not None else []
    redis_ok = False
    workers: list[str] = []
    reason: str | None = None
    if store is None:
        reason = "the service is starting"
    else:
        try:
            redis_ok = store.ping()
            workers = store.live_workers()
        except StoreUnavailable:
            reason = "Redis is unreachable"
        if reason is None:  # the arrays' store too (its reason says so; the schema is Redis')
            try:
                store.blobs.ping()
            except BlobUnavailable as exc:
                reason = f"the blob store is unreachable: {exc}"
    if supervisor is not None and reason is None and "redis" in restarting:
        reason = "Redis is restarting"  # it answers, but is not yet back for the supervisor
    if reason is None and (not workers or (supervisor and supervisor.all_down("worker"))):
        reason = "no live worker"
    ready = reason is None
    if restarting:
        reason = f"{reason}; restarting: " if reason else "restarting: "
        reason += ", ".join(restarting)
    body = Readiness(
        status="ready" if ready else "not_ready",
        redis=redis_ok,
        workers=sorted(workers),
        reason=reason,
        restarting=restarting,
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    operation_id="prometheusMetrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "content": {
                "text/plain": {
                    "schema": {"type": "string"},
                    "example": 'uqeval_queue_depth{queue="cpu"} 0.0\n',
                }
            },
            "description": "Prometheus text exposition format.",
        }
    },
)
def prometheus_metrics(request: Request) -> Response:
    """Requests by route and status, request latency, queue depth per queue, running jobs,
    live workers, job outcomes and job durations per queue."""
    data = generate_latest(request.app.state.metrics.registry)
    return Response(data, media_type=CONTENT_TYPE_LATEST)
