"""Error responses shared by the routes' OpenAPI declarations."""

from __future__ import annotations

from typing import Any

from service.api.schemas import ErrorResponse

_DESCRIPTIONS = {
    400: "The body cannot be decoded (not JSON, not an NPZ archive, broken gzip).",
    401: "No API key, or an unknown or revoked one.",
    403: "The key may not do this (not an admin key, or another team's submission).",
    404: "No such resource for this key.",
    409: "Conflict with the resource's state.",
    413: "The body (or its decompressed content) exceeds the size limit.",
    415: "Unsupported Content-Type or Content-Encoding.",
    422: "The request is invalid; the error names the field, the rule and the first bad index.",
    429: "The key's rate limit is exceeded (code rate_limited), or the team's quota on the "
    "benchmark is spent (code quota_exceeded); Retry-After says when to retry.",
    503: "Redis or the blob store is unavailable; Retry-After says when to retry.",
    507: "The service's disk is full (its scratch directory or local blob store): nothing of "
    "the request was kept; Retry-After says when to retry.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses, all with :class:`ErrorResponse`.

    A route that needs a key (401) may also answer 429 (the key's rate limit).
    """
    wanted = sorted(set(statuses) | ({429} if 401 in statuses else set()))
    return {
        s: {"model": ErrorResponse, "description": _DESCRIPTIONS.get(s, "Error.")} for s in wanted
    }


def links(status: int, **targets: dict[str, str]) -> dict[int | str, dict[str, Any]]:
    """An OpenAPI ``links`` entry on the ``status`` answer: for each operation id, its
    parameters taken from this answer (runtime expressions such as ``$response.body#/id``),
    so that clients and stateful tests can follow a created resource to its operations."""
    return {
        status: {
            "links": {
                op[0].upper() + op[1:]: {"operationId": op, "parameters": params}
                for op, params in targets.items()
            }
        }
    }
