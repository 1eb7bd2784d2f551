"""Comparisons: stored, claimed by one task delivery at a time, and re-queued when lost.

A comparison is claimed with a heartbeat, like a submission's job, so that one whose worker
vanished is found (its heartbeat expired) and queued again (``lua/cmp_*.lua``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from service import keys
from service.store.base import StoreBase
from service.store.records import TERMINAL, decode, now_iso

__all__ = ["ComparisonStore"]


class ComparisonStore(StoreBase):
    """Comparisons and their claims (a part of :class:`service.store.Store`)."""

    def create_comparison(self, record: Mapping[str, Any]) -> None:
        """Store a queued comparison (``record``: id, owner, team, request, created_at,
        optionally callback_url)."""
        fields: dict[Any, Any] = {
            "id": record["id"],
            "owner": record["owner"],
            "status": "queued",
            "created_at": record["created_at"],
            "request": json.dumps(record["request"], separators=(",", ":")),
        }
        for name in ("team", "callback_url"):
            if record.get(name) is not None:
                fields[name] = record[name]
        self._call(lambda: self.client.hset(keys.comparison(record["id"]), mapping=fields))

    def get_comparison(self, cmp_id: str) -> dict[str, Any] | None:
        """The comparison's record (``request`` decoded) and its ``result`` once succeeded."""

        def read() -> dict[str, Any] | None:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.comparison(cmp_id))
            pipe.get(keys.comparison_result(cmp_id))
            raw, result = pipe.execute()
            if not raw:
                return None
            out: dict[str, Any] = {decode(k): decode(v) for k, v in raw.items()}
            out["request"] = json.loads(out["request"])
            out["result"] = None if result is None else json.loads(result)
            return out

        return self._call(read)

    def set_comparison_status(
        self,
        cmp_id: str,
        status: str,
        *,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
    ) -> None:
        """Move a comparison to ``status`` (with its result or error), atomically."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            fields: dict[Any, Any] = {"status": status}
            if status in TERMINAL:
                fields["finished_at"] = now_iso()
                if status == "succeeded":
                    fields["progress"] = "100.0"
            else:
                fields["started_at"] = now_iso()
            if error is not None:
                fields["error"] = error
            if result is not None:
                pipe.set(
                    keys.comparison_result(cmp_id),
                    json.dumps(result, allow_nan=False, separators=(",", ":")),
                )
            pipe.hset(keys.comparison(cmp_id), mapping=fields)
            if status in TERMINAL:  # no longer watched by the reaper
                pipe.delete(keys.comparison_heartbeat(cmp_id))
                pipe.zrem(keys.running_comparisons(), cmp_id)
            pipe.execute()

        self._call(write)

    def delete_comparison(self, cmp_id: str) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(
                keys.comparison(cmp_id),
                keys.comparison_result(cmp_id),
                keys.comparison_heartbeat(cmp_id),
                keys.comparison_plots(cmp_id),
            )
            pipe.zrem(keys.running_comparisons(), cmp_id)
            pipe.zrem(keys.resend_comparisons(), cmp_id)
            pipe.execute()

        self._call(write)

    def _cmp_keys(self, cmp_id: str) -> list[str]:
        return [
            keys.comparison(cmp_id),
            keys.comparison_heartbeat(cmp_id),
            keys.running_comparisons(),
        ]

    def claim_comparison(
        self, cmp_id: str, token: str, hb_ttl_s: float, max_attempts: int
    ) -> tuple[str, str]:
        """Claim a comparison for the task delivery ``token``, like :meth:`mark_running`:
        ``("started", attempt)``, ``("busy", holder)``, ``("terminal", status)`` (also when
        it has used ``max_attempts``: then failed with the reason) or ``("missing", "")``."""
        script = self._scripts["cmp_start"]
        ttl_ms = max(int(hb_ttl_s * 1000), 1)
        args: list[Any] = [cmp_id, now_iso(), time.time(), token, ttl_ms, max_attempts]
        out = self._call(lambda: script(keys=self._cmp_keys(cmp_id), args=args))
        return decode(out[0]), decode(out[1])

    def comparison_heartbeat(self, cmp_id: str, token: str, hb_ttl_s: float) -> bool:
        """Refresh the heartbeat of a running comparison; False when ``token`` no longer
        holds it (re-queued after its heartbeat lapsed, ended, deleted)."""
        script = self._scripts["cmp_heartbeat"]
        args: list[Any] = [token, max(int(hb_ttl_s * 1000), 1)]
        return bool(self._call(lambda: script(keys=self._cmp_keys(cmp_id)[:2], args=args)))

    def set_comparison_progress(self, cmp_id: str, token: str, progress: float) -> bool:
        """Write the progress (0..100) of a running comparison held by ``token``; False when
        it is not (ended, re-queued, deleted)."""
        script = self._scripts["cmp_progress"]
        value = repr(float(min(max(progress, 0.0), 100.0)))
        args: list[Any] = [token, value]
        return bool(self._call(lambda: script(keys=self._cmp_keys(cmp_id)[:2], args=args)))

    def orphaned_comparisons(self) -> list[str]:
        """Ids of running comparisons whose heartbeat has expired."""
        return self._expired(keys.running_comparisons(), keys.comparison_heartbeat)

    def requeue_comparison(self, cmp_id: str, max_attempts: int, hb_ttl_s: float) -> str:
        """Re-queue a running comparison without heartbeat (its task is to be published
        again, see :meth:`comparisons_to_resend`), or fail it once it used ``max_attempts``.
        Returns "requeued", "failed", "alive" or "skip" (no longer running)."""
        script = self._scripts["cmp_requeue"]
        args: list[Any] = [cmp_id, now_iso(), max_attempts, f"{hb_ttl_s:g}", time.time()]
        cmp_keys = [*self._cmp_keys(cmp_id), keys.resend_comparisons()]
        return decode(self._call(lambda: script(keys=cmp_keys, args=args)))

    def comparisons_to_resend(self) -> list[str]:
        """Re-queued comparisons whose task message is still to be published."""
        ids = self._call(lambda: self.client.zrange(keys.resend_comparisons(), 0, -1))
        return [decode(i) for i in ids]

    def mark_comparison_resent(self, cmp_id: str) -> None:
        self._call(lambda: self.client.zrem(keys.resend_comparisons(), cmp_id))
