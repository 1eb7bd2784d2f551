"""API keys, teams and rate limits: who may call the service, and how often.

A key's token is never stored, only its SHA-256 (compared in constant time). The one-round-trip
reads of the hot paths (:meth:`~service.store.Store.read_submission`,
:meth:`~service.store.Store.leaderboard_cached`) authenticate and count in their own script,
through :meth:`ApiKeyStore._read_with_key`.
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import redis

from service import keys
from service.store import scripts
from service.store.base import StoreBase, remember
from service.store.records import ApiKeyRecord, TeamRecord, decode, now_iso, sha256_hex

__all__ = ["ENV_ADMIN_NAME", "ApiKeyStore"]

#: Name of the admin key registered from ``UQEVAL_ADMIN_KEY``.
ENV_ADMIN_NAME = "admin (environment)"


class ApiKeyStore(StoreBase):
    """API keys, teams and rate limits (a part of :class:`service.store.Store`)."""

    def _put_api_key(
        self,
        name: str,
        role: Literal["admin", "submitter"],
        token: str,
        team: str | None = None,
        *,
        only_new: bool = False,
    ) -> ApiKeyRecord | None:
        """Store a key record for ``token``. ``only_new``: unless ``token`` is registered
        already, checked and written in one transaction (None when it was, by this process or
        another one at the same moment)."""
        record = ApiKeyRecord(
            key_id="key_" + secrets.token_hex(8),
            name=name,
            role=role,
            created_at=now_iso(),
            revoked=False,
            team=team,
        )
        digest = sha256_hex(token)
        fields: dict[Any, Any] = {
            "key_id": record.key_id,
            "name": record.name,
            "role": record.role,
            "created_at": record.created_at,
            "revoked": "0",
            "hash": digest,
        }
        if team is not None:
            fields["team"] = team

        def write() -> bool:
            pipe: Any
            with self.client.pipeline(transaction=True) as pipe:
                if only_new:
                    pipe.watch(keys.api_key_hash(digest))
                    if pipe.exists(keys.api_key_hash(digest)):
                        return False
                    pipe.multi()
                pipe.hset(keys.api_key(record.key_id), mapping=fields)
                pipe.hset(keys.api_key_auth(digest), mapping=fields)
                pipe.set(keys.api_key_hash(digest), record.key_id)
                pipe.zadd(keys.api_keys(), {record.key_id: time.time()})
                try:
                    pipe.execute()
                except redis.WatchError:  # registered meanwhile by another process
                    return False
                return True

        return record if self._call(write) else None

    def create_api_key(
        self,
        name: str,
        role: Literal["admin", "submitter"] = "submitter",
        team: str | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key: its record and the plaintext token (shown once, stored only hashed).

        ``team`` (a submitter key's team id) must exist (ValueError otherwise).
        """
        if role not in ("admin", "submitter"):
            raise ValueError(f"role must be 'admin' or 'submitter'; found {role!r}")
        if team is not None and self.get_team(team) is None:
            raise ValueError(f"no team {team!r}")
        token = "uqe_" + secrets.token_urlsafe(32)
        record = self._put_api_key(name, role, token, team)
        assert record is not None  # written unconditionally
        return record, token

    # --- teams ---------------------------------------------------------------------------------

    def create_team(self, name: str) -> TeamRecord:
        """A new team (its id is generated)."""
        record = TeamRecord(team_id="team_" + secrets.token_hex(6), name=name, created_at=now_iso())

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(
                keys.team(record.team_id),
                mapping={"team_id": record.team_id, "name": name, "created_at": record.created_at},
            )
            pipe.zadd(keys.teams(), {record.team_id: time.time()})
            pipe.execute()

        self._call(write)
        return record

    @staticmethod
    def _team_record(raw: Mapping[Any, Any]) -> TeamRecord:
        h = {decode(k): decode(v) for k, v in raw.items()}
        return TeamRecord(team_id=h["team_id"], name=h["name"], created_at=h["created_at"])

    def get_team(self, team_id: str) -> TeamRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.team(team_id)))
        return self._team_record(raw) if raw else None

    def team_names(self, team_ids: Iterable[str | None]) -> dict[str, str]:
        """Team id -> name for the teams among ``team_ids``, in one round trip (an id that
        is no team, such as the key id a submission without a team ranks under, is left
        out). Teams are never renamed, so a name read once stays right."""
        ids = list(dict.fromkeys(t for t in team_ids if t is not None))
        if not ids:
            return {}

        def read() -> dict[str, str]:
            pipe = self.client.pipeline(transaction=False)
            for team_id in ids:
                pipe.hget(keys.team(team_id), "name")
            return {t: decode(n) for t, n in zip(ids, pipe.execute(), strict=True) if n is not None}

        return self._call(read)

    def list_teams(self) -> list[TeamRecord]:
        """Every team, oldest first."""
        return [self._team_record(raw) for raw in self._hashes_of(keys.teams(), keys.team)]

    def _hashes_of(self, index: str, key_of: Callable[[str], str]) -> list[dict[Any, Any]]:
        """The hashes ``key_of(id)`` of the ids in the zset ``index``, in its order (one round
        trip for the hashes; those that do not exist are left out)."""

        def read() -> list[dict[Any, Any]]:
            ids = self.client.zrange(index, 0, -1)
            pipe = self.client.pipeline(transaction=False)
            for item in ids:
                pipe.hgetall(key_of(decode(item)))
            return [raw for raw in pipe.execute() if raw]

        return self._call(read)

    @staticmethod
    def _key_record(raw: Mapping[Any, Any]) -> tuple[ApiKeyRecord, str]:
        h = {decode(k): decode(v) for k, v in raw.items()}
        role: Literal["admin", "submitter"] = "admin" if h["role"] == "admin" else "submitter"
        rec = ApiKeyRecord(
            key_id=h["key_id"],
            name=h["name"],
            role=role,
            created_at=h["created_at"],
            revoked=h.get("revoked") == "1",
            team=h.get("team"),
        )
        return rec, h.get("hash", "")

    def authenticate(self, token: str) -> ApiKeyRecord | None:
        """The live key whose SHA-256 matches ``token`` (compared in constant time), else None."""
        if not token:
            return None
        digest = sha256_hex(token)

        def read() -> dict[Any, Any] | None:
            # One round trip: the record is copied under the token's hash when the key is
            # created (and revoked in both places at once).
            raw_auth: dict[Any, Any] = self.client.hgetall(keys.api_key_auth(digest))
            if raw_auth:
                return raw_auth
            # Keys created before that copy existed: look the record up by the hash.
            key_id = self.client.get(keys.api_key_hash(digest))
            if key_id is None:
                return None
            raw: dict[Any, Any] = self.client.hgetall(keys.api_key(decode(key_id)))
            return raw or None

        raw = self._call(read)
        if raw is None:
            return None
        record, stored = self._key_record(raw)
        if not hmac.compare_digest(stored.encode(), digest.encode()) or record.revoked:
            return None
        return record

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        raw = self._call(lambda: self.client.hgetall(keys.api_key(key_id)))
        return self._key_record(raw)[0] if raw else None

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first (revoked ones included, marked)."""
        return [self._key_record(raw)[0] for raw in self._hashes_of(keys.api_keys(), keys.api_key)]

    def revoke_api_key(self, key_id: str) -> bool:
        """Mark the key revoked; False when no such key exists."""

        def write() -> bool:
            digest = self.client.hget(keys.api_key(key_id), "hash")
            if digest is None:
                return False
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(keys.api_key(key_id), "revoked", "1")
            auth = keys.api_key_auth(decode(digest))
            # Only where the copy exists (keys created before it have none): HSET would
            # otherwise create a partial record.
            pipe.eval(scripts.source("revoke_copy"), 1, auth)
            pipe.execute()
            return True

        return self._call(write)

    def hit_rate(self, key_id: str, limit: int, window_s: int) -> int | None:
        """Count one request of ``key_id`` in the current fixed window of ``window_s``.

        Returns None while the key is within ``limit`` requests in the window, else the
        seconds until the window ends (for Retry-After). One round trip (INCR + EXPIRE).
        """
        now = time.time()
        window = int(now // window_s)
        key = keys.rate(key_id, window)

        def write() -> int:
            pipe = self.client.pipeline(transaction=True)
            pipe.incr(key)
            pipe.expire(key, window_s + 1)
            count, _ = pipe.execute()
            return int(count)

        if self._call(write) <= limit:
            return None
        return max(math.ceil((window + 1) * window_s - now), 1)

    def ensure_admin_key(self, token: str | None) -> str | None:
        """Register the admin ``token`` from the environment, or generate one at first start.

        Returns the generated plaintext (to print once), else None: when ``token`` is given
        (registered if new) or when a key was generated before (by any process). A new
        environment key replaces the previous one: earlier environment admin keys are revoked,
        so rotating ``UQEVAL_ADMIN_KEY`` retires the old value.

        Safe when several API processes start at once: the token is registered by one of them
        only (a second record of the same token would have each process revoke the other's,
        and the shared copy under the token's hash with them).
        """
        if token:
            current = self._put_api_key(ENV_ADMIN_NAME, "admin", token, only_new=True)
            if current is not None:
                for record in self.list_api_keys():
                    if (
                        record.name == ENV_ADMIN_NAME
                        and record.key_id != current.key_id
                        and not record.revoked
                    ):
                        self.revoke_api_key(record.key_id)
            return None
        claimed = self._call(lambda: self.client.set(keys.admin_generated(), now_iso(), nx=True))
        if not claimed:
            return None
        _, plaintext = self.create_api_key("admin (generated)", role="admin")
        return plaintext

    def _read_with_key(
        self,
        token: str,
        script: str,
        read_keys: list[str],
        read_args: list[Any],
        *,
        rate_limit: int,
        window_s: int,
    ) -> tuple[ApiKeyRecord | None, int | None, list[Any]]:
        """Run a read script made with ``lua/_admit.lua``: authenticate ``token``, count the
        request against its key's rate limit and read ``read_keys`` (its KEYS from 4 on, with
        ``read_args`` as its ARGV from 5 on) — one round trip.

        Authentication and counting are those of :meth:`authenticate` and :meth:`hit_rate`
        (``rate_limit`` requests per ``window_s``; 0: none; admin keys are not counted). The
        script needs the key's id before it runs (the record and the rate counter are keys of
        the id): it comes from this store's memo, filled by earlier reads; a wrong guess
        (another process's memo, a new key) costs one more round trip, never a wrong answer.

        Returns the key (None: unknown or revoked), the seconds until its rate-limit window
        ends when it is spent (Retry-After), and the script's reply when the key was admitted.
        """
        if not token:
            return None, None, []
        digest = sha256_hex(token)
        run = self._scripts[script]
        key_id = self._key_ids.get(digest, "")
        for _ in range(3):
            now = time.time()
            window = int(now // window_s)
            script_keys = [
                keys.api_key_hash(digest),
                keys.api_key(key_id),
                keys.rate(key_id, window),
            ]
            args = [key_id, digest, int(rate_limit), window_s + 1, *read_args]
            reply = self._call(lambda: run(keys=script_keys + read_keys, args=args))  # noqa: B023
            outcome = decode(reply[0])
            if outcome != "rekey":
                break
            key_id = decode(reply[1])
            remember(self._key_ids, digest, key_id)
        else:  # the key's id changed under us twice: not a key to trust
            return None, None, []
        if outcome == "denied":
            return None, None, []
        raw = reply[1]
        record, stored = self._key_record(dict(zip(raw[::2], raw[1::2], strict=True)))
        if not hmac.compare_digest(stored.encode(), digest.encode()) or record.revoked:
            return None, None, []
        if outcome == "limited":
            return record, max(math.ceil((window + 1) * window_s - now), 1), []
        return record, None, list(reply)
