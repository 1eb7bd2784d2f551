"""The benchmark, admin, catalogue and health calls of the client, each written once as an
operation of the sans-I/O core."""

from __future__ import annotations

from typing import Any

from uqeval._base import _id
from uqeval._http import Call, Op
from uqeval._transport import operation
from uqeval._upload import UploadCalls
from uqeval.models import ApiKey, Benchmark, Team

__all__ = ["AdminCalls"]


class AdminCalls(UploadCalls):
    """Benchmarks, teams, keys, the metric catalogue and health: the operations of
    :class:`uqeval.Client` and :class:`uqeval.AsyncClient`."""

    # -- benchmarks ------------------------------------------------------------------------

    @operation
    def benchmarks(self) -> Op[list[Benchmark]]:
        """Every benchmark, oldest first."""
        return self._benchmarks((yield from self._json(Call("GET", "/v1/benchmarks"))))

    @operation
    def benchmark(self, id: Any) -> Op[Benchmark]:
        """One benchmark's settings (never its targets)."""
        call = Call("GET", f"/v1/benchmarks/{_id(id)}")
        return Benchmark.from_json((yield from self._json(call)))

    @operation
    def create_benchmark(
        self,
        /,
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
    ) -> Op[Benchmark]:
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
        return Benchmark.from_json((yield from self._post_body(call, "benchmark")))

    @operation
    def update_benchmark(self, /, id: Any, **changes: Any) -> Op[Benchmark]:
        """Change a benchmark's settings (admin): ``name``, ``description``,
        ``primary_metric``, ``metrics``, ``rule``, ``quota``, ``baseline_id``,
        ``estimators``, ``max_final``, ``status`` (see :meth:`close_benchmark`)."""
        call = Call("PATCH", f"/v1/benchmarks/{_id(id)}", json=changes)
        return Benchmark.from_json((yield from self._json(call)))

    @operation
    def delete_benchmark(self, id: Any) -> Op[None]:
        """Delete a benchmark (admin)."""
        yield from self._send(self._delete_call(f"/v1/benchmarks/{_id(id)}"))

    @operation
    def close_benchmark(self, id: Any) -> Op[Benchmark]:
        """Close a benchmark (admin): its private board is revealed
        (``leaderboard(..., part="private")``), its finals are fixed, and it takes no new
        submissions. A closed benchmark never reopens; closing it again changes nothing.

        Returns
        -------
        Benchmark
            With ``status == "closed"`` and ``closed_at``.
        """
        return Benchmark.from_json((yield from self._json(self._close_call(id))))

    # -- admin -----------------------------------------------------------------------------

    @operation
    def teams(self) -> Op[list[Team]]:
        """Every team, oldest first (admin)."""
        return self._teams((yield from self._json(Call("GET", "/v1/admin/teams"))))

    @operation
    def create_team(self, name: str) -> Op[Team]:
        """Create a team (admin); give its id to :meth:`create_key`."""
        call = Call("POST", "/v1/admin/teams", policy="write", json={"name": name}, ok=(201,))
        return Team.from_json((yield from self._json(call)))

    @operation
    def keys(self) -> Op[list[ApiKey]]:
        """Every API key's record, never the secrets (admin)."""
        return self._keys((yield from self._json(Call("GET", "/v1/admin/keys"))))

    @operation
    def create_key(self, name: str, *, team_id: str | None = None) -> Op[ApiKey]:
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
        return ApiKey.from_json((yield from self._json(call)))

    @operation
    def revoke_key(self, id: Any) -> Op[None]:
        """Revoke a submitter key (admin): it stops working at once."""
        key_id = getattr(id, "key_id", id)
        yield from self._send(self._delete_call(f"/v1/admin/keys/{key_id}"))

    # -- catalogue and health --------------------------------------------------------------

    @operation
    def metrics(
        self, task: str | None = None, *, kind: str | None = None
    ) -> Op[list[dict[str, Any]]]:
        """The metric catalogue: each metric's name, task, direction, bounds, parameters
        (with their domains) and the kinds it applies to."""
        call = Call("GET", "/v1/metrics", params={"task": task, "kind": kind})
        doc = yield from self._json(call)
        return list(doc.get("metrics") or [])

    @operation
    def health(self) -> Op[dict[str, Any]]:
        """``GET /healthz``: the API process is up."""
        return dict((yield from self._json(Call("GET", "/healthz"))))

    @operation
    def ready(self) -> Op[dict[str, Any]]:
        """``GET /readyz``: whether Redis is reachable and a worker is live (``status`` is
        ``ready`` or ``not_ready`` with the ``reason``; no retry)."""
        response = yield from self._send(Call("GET", "/readyz", ok=(200, 503), policy="write"))
        return dict(response.json())
