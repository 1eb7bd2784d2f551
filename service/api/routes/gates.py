"""Quality gates: POST /v1/gates queues a paired-bootstrap gate of a candidate submission
against a reference on one benchmark; GET /v1/gates/{gate_id} reads its decision.

A gate is stored, claimed, re-queued and run like a comparison (its request has ``kind:
"gate"``; the worker's comparison task computes it with :mod:`worker.gates`), and it follows
the comparisons' rules: the submissions must be readable by the caller, and the bootstrap's
B and seed are the benchmark's unless an admin chooses them (the targets are hidden,
docs/hidden-targets.md). For the same reason keys other than admins choose the confidence
among a few fixed values (each one reveals one order statistic of the bootstrap) and see
p-values rounded up to 0.01 (:data:`worker.gates.P_VALUE_GRID`).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from service.api import access
from service.api.deps import KeyDep, SettingsDep, StoreDep
from service.api.errors import ApiError
from service.api.routes.common import errors, links
from service.api.routes.comparisons import _parameters, may_read, queue_job
from service.api.schemas.gates import GateAccepted, GateCheckResult, GateCreate, GateDetail
from service.leaderboard import board_name, own_estimator, takes_estimator
from service.rest_text import did_you_mean
from service.settings import Settings
from service.store import ApiKeyRecord, BenchmarkRecord, Store
from uqcore import registry

router = APIRouter(tags=["gates"])

#: The confidences any key may choose (besides the benchmark's level); admins choose any.
OPEN_CONFIDENCES = (0.9, 0.95, 0.99)


def _confidence(bench: BenchmarkRecord, key: ApiKeyRecord, given: float | None) -> float:
    level = float(bench.bootstrap.get("level", 0.95))
    if given is None:
        return level
    allowed = (*OPEN_CONFIDENCES, level)
    if key.role != "admin" and not any(math.isclose(given, c, abs_tol=1e-12) for c in allowed):
        raise ApiError(
            422,
            f"confidence must be one of {', '.join(f'{c:g}' for c in allowed)} on benchmark "
            f"{bench.id!r} (its targets are hidden: only admins choose another); found {given!r}",
            field="confidence",
        )
    return float(given)


def _submission(
    store: Store, key: ApiKeyRecord, bench: BenchmarkRecord, sub_id: str, field: str
) -> None:
    record = store.get_submission(sub_id)
    if record is None or not access.can_read(key, record):
        raise ApiError(404, f"no submission {sub_id!r}", field=field)
    if record.benchmark != bench.id:
        raise ApiError(
            422,
            f"{field} {sub_id!r} is on benchmark {record.benchmark!r}, not {bench.id!r}; gate "
            "two submissions of the same benchmark",
            field=field,
        )
    if record.status != "succeeded":
        raise ApiError(
            422,
            f"{field} {sub_id!r} has status {record.status}; only succeeded submissions are gated",
            field=field,
        )


def _checks(bench: BenchmarkRecord, body: GateCreate) -> tuple[list[dict[str, Any]], list[str]]:
    """Each check with its entry name (``metric`` or ``metric[estimator]``), and the
    estimators other than the metrics' own that the computation needs."""
    out: list[dict[str, Any]] = []
    estimators: list[str] = []
    for i, check in enumerate(body.checks):
        m = check.metric
        if m not in bench.metrics:
            raise ApiError(
                422,
                f"benchmark {bench.id!r} shows metrics {bench.metrics}; found {m!r}."
                + did_you_mean(m, bench.metrics),
                field="checks",
                index=i,
            )
        spec = registry.get(m, bench.task)
        own = own_estimator(spec, bench.params.get(m))
        est = check.estimator
        if est is not None:
            available = [own, *(bench.estimators or [])] if takes_estimator(spec) else []
            if est not in available:
                raise ApiError(
                    422,
                    f"checks[{i}].estimator {est!r} is not available for {m!r} on benchmark "
                    f"{bench.id!r}; available: {', '.join(e for e in available if e) or 'none'}",
                    field="checks",
                    index=i,
                )
            if est != own and est not in estimators:
                estimators.append(est)
        entry = board_name(m, est, own)
        if any(
            (c["entry"], c["mode"], c["allowed"]) == (entry, check.mode, check.allowed) for c in out
        ):
            raise ApiError(
                422,
                f"check {entry!r} ({check.mode}, allowed {check.allowed:g}) is listed twice",
                field="checks",
                index=i,
            )
        out.append(
            {
                "metric": m,
                "estimator": est,
                "entry": entry,
                "allowed": check.allowed,
                "mode": check.mode,
            }
        )
    return out, estimators


def _request(store: Store, key: ApiKeyRecord, body: GateCreate) -> dict[str, Any]:
    bench = store.get_benchmark(body.benchmark_id)
    if bench is None:
        raise ApiError(404, f"no benchmark {body.benchmark_id!r}", field="benchmark_id")
    given = SimpleNamespace(
        n_resamples=body.n_resamples, seed=body.seed, level=None, method=body.method
    )
    parameters = _parameters(bench, key, given)  # type: ignore[arg-type]
    parameters["method"] = "percentile"
    confidence = _confidence(bench, key, body.confidence)
    alpha = 1.0 - confidence
    if math.floor(alpha * (parameters["n_resamples"] + 1) + 1e-9) < 1:
        raise ApiError(
            422,
            f"{parameters['n_resamples']} resamples are too few for confidence {confidence}: "
            f"the bound needs (1 − confidence)(B + 1) >= 1, B >= {math.ceil(1 / alpha - 1)}",
            field="confidence",
        )
    _submission(store, key, bench, body.candidate, "candidate")
    _submission(store, key, bench, body.reference, "reference")
    checks, estimators = _checks(bench, body)
    request: dict[str, Any] = {
        "kind": "gate",
        "benchmark_id": bench.id,
        "candidate": body.candidate,
        "reference": body.reference,
        "submission_ids": [body.candidate, body.reference],
        "metrics": list(dict.fromkeys(c["metric"] for c in checks)),
        "checks": checks,
        "confidence": confidence,
        "correction": body.correction,
        "exact_p_values": key.role == "admin",
        **parameters,
    }
    if estimators:
        request["estimators"] = estimators
    return request


def _create(
    store: Store, settings: Settings, key: ApiKeyRecord, body: GateCreate
) -> dict[str, Any]:
    return queue_job(store, settings, key, "gate_", _request(store, key, body))


@router.post(
    "/v1/gates",
    operation_id="createGate",
    summary="Gate a candidate submission against a reference",
    status_code=202,
    response_model=GateAccepted,
    responses={
        **errors(400, 401, 404, 413, 422, 503),
        **links(202, getGate={"gate_id": "$response.body#/id"}),
    },
)
async def create_gate(
    body: GateCreate, request: Request, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> JSONResponse:
    """Queue a quality gate: for each check (metric, allowance), is the candidate worse than
    the reference by more than the allowance, with the stated confidence? The degradation
    D = badness(candidate) − badness(reference) (> 0: worse) is bootstrapped on the
    benchmark's paired resamples; a check fails iff its (Holm-adjusted) p-value of H0:
    D <= allowance is <= 1 − confidence — with one check, iff the lower one-sided bound of D
    exceeds the allowance. The gate passes iff every check passes (docs/gates.md)."""
    record = await run_in_threadpool(_create, store, settings, key, body)
    url = str(request.app.url_path_for("get_gate", gate_id=record["id"]))
    accepted = GateAccepted(id=record["id"], status="queued", status_url=url)
    return JSONResponse(accepted.model_dump(), status_code=202, headers={"Location": url})


def readable_gate(store: Store, key: ApiKeyRecord, gate_id: str) -> dict[str, Any]:
    """The gate ``gate_id`` if ``key`` may read it (its team's; admins: all); 404 like an
    unknown id otherwise (and for a comparison's id)."""
    doc = store.get_comparison(gate_id) if gate_id.startswith("gate_") else None
    if doc is None or doc["request"].get("kind") != "gate" or not may_read(key, doc):
        raise ApiError(404, f"no gate {gate_id!r}", field="gate_id")
    return doc


@router.get(
    "/v1/gates/{gate_id}",
    operation_id="getGate",
    summary="Status and decision of a gate",
    response_model=GateDetail,
    responses=errors(401, 404, 422, 503),
)
def get_gate(
    gate_id: Annotated[str, Path(min_length=1, max_length=100)], key: KeyDep, store: StoreDep
) -> GateDetail:
    """The gate's status (queued, running, succeeded, failed with the reason) and, once it
    succeeded, ``passed`` (true, false, or null when a check could not be decided), each
    check's values, degradation, bounds, p-values and outcome, and the evidence (B, seed,
    level, method, resampling unit, correction). Another team's gate answers 404."""
    doc = readable_gate(store, key, gate_id)
    result = doc["result"] or {}
    return GateDetail(
        id=doc["id"],
        status=doc["status"],
        progress=float(doc["progress"]) if "progress" in doc else None,
        created_at=doc["created_at"],
        finished_at=doc.get("finished_at"),
        error=doc.get("error"),
        request={k: v for k, v in doc["request"].items() if k not in ("kind", "exact_p_values")},
        passed=result.get("passed"),
        reason=result.get("reason"),
        checks=[GateCheckResult(**c) for c in result["checks"]] if result else None,
        evidence=result.get("evidence"),
        warnings=list(result.get("warnings") or []),
    )
