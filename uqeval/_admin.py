"""The benchmark, admin, catalogue and health calls of :class:`uqeval.Client` (a base class of
it, to keep each file to one concern)."""

from __future__ import annotations

from typing import Any

import httpx

from uqeval._base import ClientBase, _id
from uqeval._http import Call
from uqeval.models import ApiKey, Benchmark, Team

__all__ = ["AdminCalls"]


class AdminCalls(ClientBase):
    """Benchmarks, teams, keys, the metric catalogue and health: the synchronous calls."""

    def _send(self, call: Call) -> httpx.Response:
        raise NotImplementedError

    def _json(self, call: Call) -> Any:
        return self._send(call).json()

    def _post_body(self, call: Call, purpose: str, upload_id: str | None = None) -> Any:
        raise NotImplementedError

    # -- benchmarks ------------------------------------------------------------------------

    def benchmarks(self) -> list[Benchmark]:
        """Every benchmark, oldest first."""
        return self._benchmarks(self._json(Call("GET", "/v1/benchmarks")))

    def benchmark(self, id: Any) -> Benchmark:
        """One benchmark's settings (never its targets)."""
        return Benchmark.from_json(self._json(Call("GET", f"/v1/benchmarks/{_id(id)}")))

    def create_benchmark(
        self,
        name: str,
        *,
        task: str = "regression",
        y: Any = None,
        labels: Any = None,
        soft_labels: Any = None,
        ood: Any = None,
        groups: Any = None,
        primary_metric: str,
        metrics: Any = None,
        private_mask: Any = None,
        **settings: Any,
    ) -> Benchmark:
        """Create a benchmark with hidden targets (admin).

        Parameters
        ----------
        name : str
            Its name.
        task : {"regression", "classification"}
            Regression takes ``y``; classification ``labels`` (optionally ``soft_labels``
            and ``ood``).
        y, labels, soft_labels, ood, groups : array_like, optional
            The hidden targets and the optional group label per row.
        primary_metric : str
            The leaderboard's default metric.
        metrics : list of str or str, optional
            The metrics computed and shown (default: the primary one).
        private_mask : array_like of bool, optional
            N flags, True for a private row: the public/private split given row by row (not
            with ``private_fraction``). Fixed at creation.
        **settings
            Any other field of the API's ``BenchmarkCreate``: ``description``, ``rule``,
            ``quota``, ``kinds``, ``n_classes``, ``estimators``, ``params``, ``bootstrap``,
            ``seed``; ``private_fraction`` (0 <= f < 1: that share of rows, drawn by the
            server with a secret seed, is private: boards and results show the public rows
            until :meth:`close_benchmark`; fixed at creation) and ``max_final`` (the most
            finals a team may mark, 1..100, default 2).

        Returns
        -------
        Benchmark
        """
        targets = {"y": y, "labels": labels, "soft_labels": soft_labels, "ood": ood}
        targets["groups"] = groups
        targets["private_mask"] = self._mask(private_mask)
        call = self._create_benchmark_call(name, task, targets, primary_metric, metrics, settings)
        return Benchmark.from_json(self._post_body(call, "benchmark"))

    def update_benchmark(self, id: Any, **changes: Any) -> Benchmark:
        """Change a benchmark's settings (admin): ``name``, ``description``,
        ``primary_metric``, ``metrics``, ``rule``, ``quota``, ``baseline_id``,
        ``estimators``, ``max_final``, ``status`` (see :meth:`close_benchmark`)."""
        call = Call("PATCH", f"/v1/benchmarks/{_id(id)}", json=changes)
        return Benchmark.from_json(self._json(call))

    def delete_benchmark(self, id: Any) -> None:
        """Delete a benchmark (admin)."""
        self._send(self._delete_call(f"/v1/benchmarks/{_id(id)}"))

    def close_benchmark(self, id: Any) -> Benchmark:
        """Close a benchmark (admin): its private board is revealed
        (``leaderboard(..., part="private")``), its finals are fixed, and it takes no new
        submissions. A closed benchmark never reopens; closing it again changes nothing.

        Returns
        -------
        Benchmark
            With ``status == "closed"`` and ``closed_at``.
        """
        return Benchmark.from_json(self._json(self._close_call(id)))

    # -- admin -----------------------------------------------------------------------------

    def teams(self) -> list[Team]:
        """Every team, oldest first (admin)."""
        return self._teams(self._json(Call("GET", "/v1/admin/teams")))

    def create_team(self, name: str) -> Team:
        """Create a team (admin); give its id to :meth:`create_key`."""
        call = Call("POST", "/v1/admin/teams", policy="write", json={"name": name}, ok=(201,))
        return Team.from_json(self._json(call))

    def keys(self) -> list[ApiKey]:
        """Every API key's record, never the secrets (admin)."""
        return self._keys(self._json(Call("GET", "/v1/admin/keys")))

    def create_key(self, name: str, *, team_id: str | None = None) -> ApiKey:
        """Create a submitter key (admin).

        Returns
        -------
        ApiKey
            Its ``key`` is the secret, shown this once.
        """
        body: dict[str, Any] = {"name": name}
        if team_id is not None:
            body["team_id"] = getattr(team_id, "team_id", team_id)
        call = Call("POST", "/v1/admin/keys", policy="write", json=body, ok=(201,))
        return ApiKey.from_json(self._json(call))

    def revoke_key(self, id: Any) -> None:
        """Revoke a submitter key (admin): it stops working at once."""
        key_id = getattr(id, "key_id", id)
        self._send(self._delete_call(f"/v1/admin/keys/{key_id}"))

    # -- catalogue and health --------------------------------------------------------------

    def metrics(self, task: str | None = None, *, kind: str | None = None) -> list[dict[str, Any]]:
        """The metric catalogue: each metric's name, task, direction, bounds, parameters
        (with their domains) and the kinds it applies to."""
        doc = self._json(Call("GET", "/v1/metrics", params={"task": task, "kind": kind}))
        return list(doc.get("metrics") or [])

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: the API process is up."""
        return dict(self._json(Call("GET", "/healthz")))

    def ready(self) -> dict[str, Any]:
        """``GET /readyz``: whether Redis is reachable and a worker is live (``status`` is
        ``ready`` or ``not_ready`` with the ``reason``; no retry)."""
        response = self._send(Call("GET", "/readyz", ok=(200, 503), policy="write"))
        return dict(response.json())
