"""Share links: read-only links to one benchmark's leaderboard pages, made by an admin.

A link is a random token given out once; Redis keeps only its SHA-256 (``share:{hash}`` ->
the link) and the benchmark's list of links without tokens (``bench:{id}:shares``). Revoking a
link deletes both, so its token stops working at once. A token opens the board of its own
benchmark only.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from service import keys
from service.store.base import StoreBase
from service.store.records import decode, now_iso, sha256_hex

__all__ = ["ShareLink", "ShareLinkStore"]

#: Prefix of share-link tokens (tells them apart from API keys in logs and bug reports).
TOKEN_PREFIX = "uqs_"


@dataclass(frozen=True)
class ShareLink:
    """One share link as stored (never its token)."""

    link_id: str
    bench_id: str
    created_at: str


class ShareLinkStore(StoreBase):
    """Share links of benchmark boards (a part of :class:`service.store.Store`)."""

    def create_share_link(self, bench_id: str) -> tuple[ShareLink, str]:
        """A new link to ``bench_id``'s board and its token (returned here only)."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        link = ShareLink("shr_" + secrets.token_hex(8), bench_id, now_iso())
        digest = sha256_hex(token)

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(
                keys.share_token(digest),
                json.dumps(
                    {"link_id": link.link_id, "bench_id": bench_id, "created_at": link.created_at}
                ),
            )
            pipe.hset(
                keys.share_links(bench_id),
                link.link_id,
                json.dumps({"token_hash": digest, "created_at": link.created_at}),
            )
            pipe.execute()

        self._call(write)
        return link, token

    def list_share_links(self, bench_id: str) -> list[ShareLink]:
        """The benchmark's links, oldest first (ids and creation times, no tokens)."""
        raw = self._call(lambda: self.client.hgetall(keys.share_links(bench_id)))
        links = [
            ShareLink(decode(link_id), bench_id, json.loads(doc)["created_at"])
            for link_id, doc in raw.items()
        ]
        return sorted(links, key=lambda link: (link.created_at, link.link_id))

    def revoke_share_link(self, bench_id: str, link_id: str) -> bool:
        """Delete a link of ``bench_id``; False when it has no such link."""

        def write() -> bool:
            raw = self.client.hget(keys.share_links(bench_id), link_id)
            if raw is None:
                return False
            digest = json.loads(raw)["token_hash"]
            pipe = self.client.pipeline(transaction=True)
            pipe.hdel(keys.share_links(bench_id), link_id)
            pipe.delete(keys.share_token(digest))
            pipe.execute()
            return True

        return self._call(write)

    def delete_share_links(self, bench_id: str) -> None:
        """Delete every link of a benchmark (when the benchmark is deleted)."""

        def write() -> None:
            raw: dict[Any, Any] = self.client.hgetall(keys.share_links(bench_id))
            tokens = [keys.share_token(json.loads(doc)["token_hash"]) for doc in raw.values()]
            self.client.delete(keys.share_links(bench_id), *tokens)

        self._call(write)

    def share_link(self, token: str) -> ShareLink | None:
        """The live link a token opens, or None (unknown or revoked)."""
        raw = self._call(lambda: self.client.get(keys.share_token(sha256_hex(token))))
        if raw is None:
            return None
        doc = json.loads(raw)
        return ShareLink(doc["link_id"], doc["bench_id"], doc["created_at"])
