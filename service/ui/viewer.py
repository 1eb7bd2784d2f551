"""Who is looking at a page: the API key of the request (header or login cookie), a board's
share link, or nobody — and the page errors that answer them.

Pages read through the store with the API's rules (:mod:`service.api.access`): the same key
sees the same submissions and comparisons, and another team's private submission is "not
found" on a page exactly as over the API. A benchmark's board is also shown without a key when
the benchmark's ``public_board`` is set, or with a live share link of that benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from service.api.auth import ensure_admin_key
from service.api.deps import KEY_COOKIE
from service.settings import Settings
from service.store import ApiKeyRecord, BenchmarkRecord, ShareLink, Store


class PageError(Exception):
    """A page that cannot be shown: rendered as the error page with ``status``."""

    def __init__(self, status: int, title: str, message: str, *, login: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
        #: Offer the login form (a page that needs a key).
        self.login = login


def not_found(what: str) -> PageError:
    return PageError(404, "Not found", f"There is no {what} here, or you may not see it.")


def login_needed(what: str) -> PageError:
    return PageError(401, "Sign in", f"Sign in with an API key to see {what}.", login=True)


@dataclass(frozen=True)
class Viewer:
    """The request's key (None: no key) and the share link it came with (None: none)."""

    key: ApiKeyRecord | None = None
    share: ShareLink | None = None
    #: The share token as given (kept in the page's links: CSV, metric switches).
    share_token: str | None = None

    @property
    def admin(self) -> bool:
        return self.key is not None and self.key.role == "admin"


def request_token(request: Request) -> str | None:
    """The API key a page request carries: ``Authorization: Bearer``, ``X-API-Key``, or the
    login cookie (pages are GET requests)."""
    auth = request.headers.get("authorization", "")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    header = request.headers.get("x-api-key")
    if header:
        return header
    return request.cookies.get(KEY_COOKIE) or None


def viewer(request: Request, store: Store, *, share: str | None = None) -> Viewer:
    """The viewer of a page. A key that is unknown or revoked answers the login page (401);
    a spent rate limit 429; an unknown or revoked share token 404."""
    settings: Settings = request.app.state.settings
    token = request_token(request)
    key = None
    if token is not None:
        ensure_admin_key(request, store)
        key = store.authenticate(token)
        if key is None:
            raise PageError(
                401, "Sign in", "The API key is unknown or revoked; sign in again.", login=True
            )
        if settings.rate_limit > 0 and key.role != "admin":
            wait = store.hit_rate(key.key_id, settings.rate_limit, settings.rate_limit_window_s)
            if wait is not None:
                raise PageError(429, "Slow down", f"Rate limit exceeded; retry in {wait} s.")
    link = None
    if share is not None:
        link = store.share_link(share)
        if link is None:
            raise not_found("board for this link (it may have been revoked)")
    return Viewer(key=key, share=link, share_token=share if link is not None else None)


def check_board(viewer: Viewer, bench: BenchmarkRecord | None, bench_id: str) -> BenchmarkRecord:
    """The benchmark whose board ``viewer`` may see: any key, a share link of this very
    benchmark, or nobody when the board is public. A share link of another benchmark is
    refused as not found."""
    if viewer.share is not None and viewer.share.bench_id != bench_id:
        raise not_found("board for this link")
    if bench is None:
        raise not_found(f"benchmark {bench_id!r}")
    if viewer.key is None and viewer.share is None and not bench.public_board:
        raise login_needed("this leaderboard")
    return bench
