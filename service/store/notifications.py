"""Webhook secrets and deliveries: what is sent where, and every attempt made.

A delivery is one event (a submission or comparison ended) to one callback URL: a hash
(``delivery:{id}``) with the event, the target and its state (``pending``, ``delivered``,
``failed`` once retries stop), a bounded list of its attempts, and its place in the resource's
list of deliveries. Everything expires :data:`DELIVERY_TTL_S` after its last write. The
secret an API key signs with is kept in clear (``webhook-secret:{key_id}``): unlike an API
key it must be read back to sign (see docs/webhooks.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import redis

from service import keys
from service.store.base import StoreBase
from service.store.records import decode

__all__ = ["DELIVERY_TTL_S", "MAX_ATTEMPTS_KEPT", "CallbackTarget", "NotificationStore"]

#: How long delivery records are kept after their last write (s).
DELIVERY_TTL_S = 30 * 86400
#: Attempts kept per delivery (the oldest are dropped first).
MAX_ATTEMPTS_KEPT = 50
#: Deliveries kept per submission or comparison (the oldest are dropped first).
MAX_DELIVERIES_KEPT = 100

Scope = Literal["submission", "comparison"]


@dataclass(frozen=True)
class CallbackTarget:
    """What the end hook needs of a submission or comparison."""

    status: str
    callback_url: str | None
    owner: str
    finished_at: str | None
    error: str | None


class NotificationStore(StoreBase):
    """Webhook secrets and deliveries (a part of :class:`service.store.Store`)."""

    # --- secrets -----------------------------------------------------------------------------

    def set_webhook_secret(self, key_id: str, secret: str, created_at: str) -> None:
        """Create or replace the webhook secret of API key ``key_id``."""
        mapping: dict[Any, Any] = {"secret": secret, "created_at": created_at}
        self._call(lambda: self.client.hset(keys.webhook_secret(key_id), mapping=mapping))

    def webhook_secret(self, key_id: str) -> str | None:
        """The webhook secret of API key ``key_id`` (None: it has none)."""
        raw = self._call(lambda: self.client.hget(keys.webhook_secret(key_id), "secret"))
        return None if raw is None else decode(raw)

    # --- targets -----------------------------------------------------------------------------

    def callback_target(self, scope: Scope, ident: str) -> CallbackTarget | None:
        """The status, callback URL, owner and end of a submission or comparison (None:
        unknown)."""
        key = keys.submission(ident) if scope == "submission" else keys.comparison(ident)
        fields = ["status", "callback_url", "owner", "finished_at", "error"]
        raw = self._call(lambda: self.client.hmget(key, fields))
        if raw[0] is None:
            return None
        status, url, owner, finished_at, error = (None if v is None else decode(v) for v in raw)
        return CallbackTarget(str(status), url, owner or "", finished_at, error)

    # --- deliveries --------------------------------------------------------------------------

    def open_delivery(
        self, scope: Scope, ident: str, delivery: dict[str, str], *, once: bool
    ) -> bool:
        """Record the pending ``delivery`` (its fields; ``id`` among them) of a submission or
        comparison, due now. ``once``: only if no delivery was opened for its end before
        (the end hook may be called by every path that ends a job); returns whether it was
        recorded."""
        did = delivery["id"]
        marker = keys.ended_delivery(scope, ident)
        listing = keys.deliveries(scope, ident)

        def write() -> bool:
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        if once:
                            pipe.watch(marker)
                            if pipe.exists(marker):
                                return False
                        pipe.multi()
                        if once:
                            pipe.set(marker, did, ex=DELIVERY_TTL_S)
                        pipe.hset(keys.delivery(did), mapping=delivery)
                        pipe.expire(keys.delivery(did), DELIVERY_TTL_S)
                        pipe.lpush(listing, did)
                        pipe.ltrim(listing, 0, MAX_DELIVERIES_KEPT - 1)
                        pipe.expire(listing, DELIVERY_TTL_S)
                        pipe.zadd(keys.deliveries_due(), {did: time.time()})
                        pipe.execute()
                        return True
                    except redis.WatchError:
                        continue

        return self._call(write)

    def get_delivery(self, delivery_id: str) -> dict[str, str] | None:
        """The fields of delivery ``delivery_id`` (None: unknown or expired)."""
        raw = self._call(lambda: self.client.hgetall(keys.delivery(delivery_id)))
        return {decode(k): decode(v) for k, v in raw.items()} if raw else None

    def delivery_attempts(self, delivery_id: str) -> list[dict[str, Any]]:
        """The attempts of a delivery, oldest first (at most :data:`MAX_ATTEMPTS_KEPT`)."""
        raw = self._call(lambda: self.client.lrange(keys.delivery_attempts(delivery_id), 0, -1))
        return [json.loads(item) for item in raw]

    def list_deliveries(self, scope: Scope, ident: str) -> list[dict[str, Any]]:
        """The deliveries of a submission or comparison, newest first, each with its
        ``attempts_log`` (the attempts, oldest first)."""

        def read() -> list[dict[str, Any]]:
            ids = [decode(i) for i in self.client.lrange(keys.deliveries(scope, ident), 0, -1)]
            pipe = self.client.pipeline(transaction=False)
            for did in ids:
                pipe.hgetall(keys.delivery(did))
                pipe.lrange(keys.delivery_attempts(did), 0, -1)
            replies = pipe.execute()
            out: list[dict[str, Any]] = []
            for raw, attempts in zip(replies[::2], replies[1::2], strict=True):
                if not raw:
                    continue
                doc: dict[str, Any] = {decode(k): decode(v) for k, v in raw.items()}
                doc["attempts_log"] = [json.loads(a) for a in attempts]
                out.append(doc)
            return out

        return self._call(read)

    def lock_delivery(self, delivery_id: str, token: str, ttl_s: float) -> bool:
        """Take the right to send delivery ``delivery_id`` for ``ttl_s`` (False: held)."""
        ttl_ms = max(int(ttl_s * 1000), 1)
        key = keys.delivery_lock(delivery_id)
        return bool(self._call(lambda: self.client.set(key, token, nx=True, px=ttl_ms)))

    def unlock_delivery(self, delivery_id: str) -> None:
        self._call(lambda: self.client.delete(keys.delivery_lock(delivery_id)))

    def record_attempt(
        self,
        delivery_id: str,
        attempt: dict[str, Any],
        *,
        status: Literal["pending", "delivered", "failed"],
        next_ts: float | None,
    ) -> None:
        """Append ``attempt`` to the delivery's log and move it to ``status`` (``pending``:
        its next attempt due at ``next_ts``), in one transaction."""
        did = delivery_id
        fields: dict[Any, Any] = {
            "status": status,
            "attempts": str(int(attempt["attempt"])),
            "last_attempt_at": str(attempt["at"]),
        }
        if attempt.get("error"):
            fields["last_error"] = str(attempt["error"])
        elif attempt.get("status_code") is not None and status != "delivered":
            fields["last_error"] = f"HTTP {attempt['status_code']}"
        if status == "delivered":
            fields["delivered_at"] = str(attempt["at"])
        if next_ts is not None:
            fields["next_ts"] = repr(float(next_ts))

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            log = keys.delivery_attempts(did)
            pipe.rpush(log, json.dumps(attempt, separators=(",", ":")))
            pipe.ltrim(log, -MAX_ATTEMPTS_KEPT, -1)
            pipe.expire(log, DELIVERY_TTL_S)
            pipe.hset(keys.delivery(did), mapping=fields)
            if status != "pending":
                pipe.hdel(keys.delivery(did), "next_ts")
            pipe.expire(keys.delivery(did), DELIVERY_TTL_S)
            if status == "pending" and next_ts is not None:
                pipe.zadd(keys.deliveries_due(), {did: next_ts})
            else:
                pipe.zrem(keys.deliveries_due(), did)
            pipe.execute()

        self._call(write)

    def overdue_deliveries(self, before_ts: float) -> list[str]:
        """Pending deliveries whose next attempt was due before ``before_ts``."""
        ids = self._call(
            lambda: self.client.zrangebyscore(keys.deliveries_due(), "-inf", before_ts)
        )
        return [decode(i) for i in ids]

    def postpone_delivery(self, delivery_id: str, due_ts: float) -> None:
        """Look at an overdue delivery again at ``due_ts`` (its task was published again)."""
        self._call(lambda: self.client.zadd(keys.deliveries_due(), {delivery_id: due_ts}, xx=True))
