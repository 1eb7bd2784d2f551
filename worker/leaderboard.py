"""A finished benchmark submission's leaderboard entries (written with its result).

Each metric's sort key is its *badness* (:func:`service.leaderboard.badness`), lower is better
whatever the metric's direction.
Only public submissions on a benchmark rank; a metric whose value is undefined (null) does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from service.leaderboard import badness
from service.store import Ranking, SubmissionRecord

__all__ = ["ranking"]


def ranking(record: SubmissionRecord, result: Mapping[str, Any]) -> Ranking | None:
    """The entries of ``record`` on its benchmark's boards; None when it does not rank
    (no benchmark, or private)."""
    if record.benchmark is None or record.visibility != "public":
        return None
    entries: dict[str, tuple[float, dict[str, Any]]] = {}
    for name, m in result.get("metrics", {}).items():
        value = m.get("value")
        if not isinstance(value, int | float) or not math.isfinite(value):
            continue
        interval = m.get("interval") or {}
        shown = {
            "value": value,
            "low": interval.get("low"),
            "high": interval.get("high"),
            "std": interval.get("std"),
        }
        entries[name] = (badness(name, value, m.get("params")), shown)
    return Ranking(
        benchmark=record.benchmark,
        team=record.team if record.team is not None else record.owner,
        created_ts=record.created_ts,
        entries=entries,
    )
