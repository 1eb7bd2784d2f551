"""The web UI: server-rendered pages of benchmarks, leaderboards, submissions, comparisons and
the metric glossary under ``/ui/``, served by the API itself.

:func:`install` mounts the pages (:mod:`service.ui.routes`), their static files (CSS and a
small script that sorts tables; nothing is fetched from another site) and the error page. The
templates and static files ship in the package (``pyproject.toml`` package data).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.ui.render import STATIC, page_error
from service.ui.routes import router
from service.ui.viewer import PageError

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Add the UI's routes, static files and error page to ``app``."""
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=str(STATIC)), name="ui-static")
    app.add_exception_handler(PageError, page_error)
