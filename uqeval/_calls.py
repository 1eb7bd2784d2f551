"""Every call of the API, written once: the operations that :class:`uqeval.Client` and
:class:`uqeval.AsyncClient` run on their transports."""

from __future__ import annotations

from uqeval._admin import AdminCalls
from uqeval._boards import BoardCalls
from uqeval._platform import PlatformCalls

__all__ = ["Calls"]


class Calls(BoardCalls, AdminCalls, PlatformCalls):
    """Submissions, uploads, leaderboards, comparisons, gates, benchmarks, admin, suites and
    notifications, as operations of the sans-I/O core."""
