"""A finished benchmark submission's leaderboard entries (written with its result).

The boards are those of :func:`service.leaderboard.result_entries`: one per metric and, for a
classification benchmark that names estimators, one per (metric, estimator) named
``"metric[estimator]"``. Each entry's sort key is its *badness*
(:func:`service.leaderboard.badness`, looked up in the submission's task), lower is better
whatever the metric's direction. The entries are stored with every benchmark submission's
result; the store puts them on the boards only while the submission is public (so a later
visibility change can move it on or off them). A value that is undefined (null) does not rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.kinds import task_of
from service.leaderboard import result_entries
from service.store import Ranking, SubmissionRecord

__all__ = ["ranking"]


def ranking(record: SubmissionRecord, result: Mapping[str, Any]) -> Ranking | None:
    """The entries of ``record`` on its benchmark's boards (whatever its visibility); None
    without a benchmark."""
    if record.benchmark is None:
        return None
    return Ranking(
        benchmark=record.benchmark,
        team=record.team if record.team is not None else record.owner,
        created_ts=record.created_ts,
        entries=result_entries(result, task_of(record.kind)),
    )
