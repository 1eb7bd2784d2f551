"""The interactive API pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), that work offline.

FastAPI's own pages load Swagger UI and ReDoc from a public CDN (and ReDoc its fonts from
Google), so on an air-gapped evaluation cluster they are blank. Here both pages load their
JavaScript, CSS and favicon from the ``fastapi-offline`` package's ``static/`` directory,
mounted under :data:`STATIC_URL`: the builds of Swagger UI 5 (Apache-2.0) and ReDoc 2 (MIT)
that FastAPI itself links to, redistributed by that MIT-licensed package, which follows their
releases. Only the assets are taken from it: the routes are ours, so the app factory keeps its
settings, and they stay out of the OpenAPI document.
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

#: Where the pages' assets are served (same origin as the pages).
STATIC_URL = "/static/docs"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"

#: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png.
ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"

#: ReDoc 2 shows its maker's logo, loaded from this address, in the side menu whatever its
#: options say; :func:`redoc_js` replaces it.
REDOC_LOGO_URL = "https://cdn.redoc.ly/redoc/logo-mini.svg"

#: Swagger UI's parameters beyond FastAPI's defaults. ``validatorUrl: null``: no badge image
#: fetched from the public validator.swagger.io (a request that would leave the network).
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}


@functools.cache
def redoc_js() -> bytes:
    """The package's ``redoc.standalone.js`` with the logo's address replaced by ``data:,``.

    ``data:,`` is no image, so the logo's own error handler removes it: the page makes no
    request outside its origin (the "API docs by Redocly" link stays, as text).
    """
    return (
        (ASSETS_DIR / "redoc.standalone.js")
        .read_bytes()
        .replace(REDOC_LOGO_URL.encode(), b"data:,")
    )


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` on ``app`` (created with ``docs_url=None, redoc_url=None``)."""
    if not (ASSETS_DIR / "swagger-ui-bundle.js").is_file():  # a broken install, said at start
        raise RuntimeError(f"the API pages' assets are missing from {ASSETS_DIR}")

    # Under its own name, so it is never taken for the package's file; declared before the
    # mount, which would otherwise answer for every path under STATIC_URL.
    @app.get(f"{STATIC_URL}/redoc.offline.js", include_in_schema=False)
    async def redoc_script() -> Response:
        return Response(redoc_js(), media_type="text/javascript; charset=utf-8")

    app.mount(STATIC_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        # root_path: the pages work behind a proxy that mounts the API under a prefix.
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{STATIC_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{STATIC_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{STATIC_URL}/favicon.png",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{STATIC_URL}/redoc.offline.js",
            redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png",
            with_google_fonts=False,
        )
