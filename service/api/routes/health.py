"""Liveness, readiness and Prometheus metrics (no API key needed)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api.schemas import Health, Readiness
from service.store import Store, StoreUnavailable

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
    responses={503: {"model": Readiness, "description": "Redis unreachable or no live worker."}},
)
def readyz(request: Request) -> JSONResponse:
    """Ready when Redis answers and at least one worker is alive (heartbeat within its TTL)."""
    store: Store | None = getattr(request.app.state, "store", None)
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
    if reason is None and not workers:
        reason = "no live worker"
    body = Readiness(
        status="ready" if reason is None else "not_ready",
        redis=redis_ok,
        workers=sorted(workers),
        reason=reason,
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if reason is None else 503)


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
