"""Quality gates on the client side: the :class:`Gate` answer and the check specifications
of ``Client.gate`` and ``uqeval gate`` (``"crps:0.01"``, ``"ece:5%"``, ``"auroc_ood[entropy]:0.02"``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from uqeval.errors import BadRequest
from uqeval.models import TERMINAL

__all__ = ["Gate", "parse_check", "parse_checks"]

_CHECK = re.compile(
    r"^(?P<metric>[A-Za-z0-9_]+)(?:\[(?P<estimator>[A-Za-z0-9_.-]+)\])?:"
    r"(?P<allowed>[^%]+)(?P<pct>%)?$"
)


def parse_check(spec: Any) -> dict[str, Any]:
    """One check of a gate: ``"metric:allowed"`` (absolute, in the metric's units),
    ``"metric:allowed%"`` (relative: a percentage of the reference's |value|), with
    ``metric[estimator]`` for an estimator; or a mapping with ``metric``, ``allowed``,
    ``mode`` and ``estimator`` as the API takes it.

    >>> parse_check("crps:0.01")
    {'metric': 'crps', 'allowed': 0.01, 'mode': 'absolute'}
    >>> parse_check("auroc_ood[entropy_bma]:5%")
    {'metric': 'auroc_ood', 'allowed': 0.05, 'mode': 'relative', 'estimator': 'entropy_bma'}
    """
    if isinstance(spec, dict):
        return dict(spec)
    text = str(spec).strip()
    m = _CHECK.match(text)
    if m is None:
        raise BadRequest(
            f"a check is metric:allowed, metric:allowed% or metric[estimator]:allowed; "
            f"found {text!r}",
            field="checks",
        )
    try:
        allowed = float(m.group("allowed"))
    except ValueError:
        allowed = math.nan
    if not math.isfinite(allowed) or allowed < 0:
        raise BadRequest(
            f"the allowance of check {text!r} must be a number >= 0; found {m.group('allowed')!r}",
            field="checks",
        )
    out: dict[str, Any] = {"metric": m.group("metric")}
    if m.group("pct"):
        out.update(allowed=round(allowed / 100.0, 12), mode="relative")
    else:
        out.update(allowed=allowed, mode="absolute")
    if m.group("estimator"):
        out["estimator"] = m.group("estimator")
    return out


def parse_checks(specs: Any) -> list[dict[str, Any]]:
    """:func:`parse_check` of each entry (a single string or mapping counts as one)."""
    if isinstance(specs, str | dict):
        specs = [specs]
    return [parse_check(s) for s in specs]


@dataclass(frozen=True)
class Gate:
    """A quality gate: its request, state and, once it succeeded, ``passed`` (True, False,
    or None when no check failed but one could not be decided), the checks and the evidence."""

    id: str
    status: str
    error: str | None
    request: dict[str, Any]
    passed: bool | None
    reason: str | None
    checks: list[dict[str, Any]]
    evidence: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Gate:
        return cls(
            id=str(doc["id"]),
            status=str(doc.get("status")),
            error=doc.get("error"),
            request=dict(doc.get("request") or {}),
            passed=doc.get("passed"),
            reason=doc.get("reason"),
            checks=list(doc.get("checks") or []),
            evidence=dict(doc.get("evidence") or {}),
            raw=doc,
        )

    @property
    def done(self) -> bool:
        """True once the gate has ended (succeeded, failed or cancelled)."""
        return self.status in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"
