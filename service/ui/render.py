"""Rendering of the UI's pages: the Jinja2 environment (autoescaping every value), the security
headers of every page, and the error page.

Pages carry a Content-Security-Policy that allows nothing but this origin (images also as
``data:`` URLs): no inline script or style runs, so an escaped value that slipped through
could still not execute. They are never cached by shared caches and send no Referer (a share
link's token is in the page's address).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

import uqcore
from service.ui.viewer import PageError, Viewer

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Frame-Options": "DENY",
}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    autoescape=True,
    undefined=jinja2.ChainableUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def page(
    request: Request,
    template: str,
    viewer: Viewer,
    *,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered with ``context`` (every value escaped), with the UI's headers."""
    body = _env.get_template(template).render(
        viewer=viewer,
        version=uqcore.__version__,
        path=request.url.path,
        **context,
    )
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


async def page_error(request: Request, exc: Exception) -> HTMLResponse:
    """The error page of a :class:`PageError` (no Redis access: it renders from the error)."""
    assert isinstance(exc, PageError)
    headers = dict(SECURITY_HEADERS)
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="uq-eval"'
    body = _env.get_template("error.html").render(
        viewer=Viewer(),
        version=uqcore.__version__,
        path=request.url.path,
        title=exc.title,
        error=exc,
        next=request.url.path
        + (f"?{request.url.query}" if request.url.query and exc.login else ""),
    )
    return HTMLResponse(body, status_code=exc.status, headers=headers)
