"""``/docs`` and ``/redoc`` work with no network: their assets come from the API itself.

The pages' HTML and CSS are scanned for addresses outside the server, and both pages are
loaded in headless Chromium (tests/browser.py) against the API under uvicorn with every
request to another host aborted: each operation of the committed OpenAPI document must be
rendered, and no request may have tried to leave.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from service.api import docs
from tests.browser import open_page
from tests.service._api import LiveServer, TestClient

pytest_plugins = ["tests.browser", "tests.service._api"]

ROOT = Path(__file__).resolve().parents[2]

#: An absolute address (scheme or protocol-relative) anywhere in a text.
EXTERNAL = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}", re.IGNORECASE)
#: The ``src``/``href`` attributes of an HTML page, and ``url(...)``/``@import`` of a CSS.
HTML_REFS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
CSS_URLS = re.compile(r"""url\(\s*["']?([^"')]*)["']?\s*\)|@import\s+["']([^"']*)["']""")


def _document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "openapi" / "openapi.json").read_text("utf-8"))
    return doc


def _operations() -> list[tuple[str, str, str, str]]:
    """(METHOD, path, operationId, summary) of every operation of the committed document."""
    return sorted(
        (method.upper(), path, op["operationId"], op["summary"])
        for path, item in _document()["paths"].items()
        for method, op in item.items()
    )


def _without_data_uris(css: str) -> str:
    # An inline SVG names its XML namespace (http://www.w3.org/2000/svg); nothing is fetched.
    return re.sub(r"""url\(\s*["']?data:[^)]*\)""", "url()", css)


@pytest.mark.parametrize("page", [docs.DOCS_URL, docs.REDOC_URL])
def test_pages_reference_only_their_own_server(api: TestClient, page: str):
    r = api.get(page)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    html = r.text
    assert EXTERNAL.findall(html) == [], html
    assert "fonts.googleapis" not in html
    refs = [u for u in HTML_REFS.findall(html) if u]
    assert refs, html
    assert {u for u in refs if not u.startswith(docs.STATIC_URL + "/")} == set(), refs
    for url in refs:
        asset = api.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url
    if page == docs.DOCS_URL:
        assert '"validatorUrl": null' in html  # no badge from validator.swagger.io


def test_assets_are_the_packages(api: TestClient):
    css = api.get(f"{docs.STATIC_URL}/swagger-ui.css")
    assert css.headers["content-type"].startswith("text/css")
    assert css.content == (docs.ASSETS_DIR / "swagger-ui.css").read_bytes()
    refs = [a or b for a, b in CSS_URLS.findall(_without_data_uris(css.text))]
    assert [u for u in refs if u and EXTERNAL.match(u)] == []
    assert EXTERNAL.findall(_without_data_uris(css.text)) == []

    js = api.get(f"{docs.STATIC_URL}/swagger-ui-bundle.js")
    assert "javascript" in js.headers["content-type"]
    assert js.content == (docs.ASSETS_DIR / "swagger-ui-bundle.js").read_bytes()

    redoc = api.get(f"{docs.STATIC_URL}/redoc.offline.js")
    assert "javascript" in redoc.headers["content-type"]
    original = (docs.ASSETS_DIR / "redoc.standalone.js").read_bytes()
    assert docs.REDOC_LOGO_URL.encode() in original
    assert docs.REDOC_LOGO_URL.encode() not in redoc.content
    assert len(redoc.content) == len(original) - len(docs.REDOC_LOGO_URL) + len("data:,")

    assert api.get(f"{docs.STATIC_URL}/../app.py").status_code == 404


def test_pages_stay_out_of_the_openapi_document(api: TestClient):
    paths = api.get("/openapi.json").json()["paths"]
    assert paths.keys() == _document()["paths"].keys()
    assert not [p for p in paths if p.startswith(("/docs", "/redoc", "/static"))]


# --------------------------------------------------------------------------------------------
# in a real browser, offline
# --------------------------------------------------------------------------------------------

SWAGGER_OPERATIONS = """() => [...document.querySelectorAll('.opblock')].map(b => [
    b.querySelector('.opblock-summary-method')?.textContent.trim(),
    b.querySelector('.opblock-summary-path')?.getAttribute('data-path'),
    b.querySelector('.opblock-summary-description')?.textContent.trim(),
])"""

REDOC_OPERATIONS = """() => [...document.querySelectorAll('h2 > a[href*="/operation/"]')].map(a => [
    a.getAttribute('href').split('/operation/')[1],
    a.parentElement.textContent.trim(),
])"""

NAMED = ("Submit a prediction batch for evaluation", "The metric catalogue")


@pytest.mark.slow
def test_swagger_ui_renders_offline(live_server: LiveServer, browser: Any, tmp_path: Path):
    ops = _operations()
    with open_page(browser) as tab:
        page = tab.page
        page.goto(live_server.url + docs.DOCS_URL)
        tab.wait_until("n => document.querySelectorAll('.opblock').length >= n", len(ops))
        for summary in NAMED:
            assert page.get_by_text(summary, exact=True).first.is_visible(), summary
        rendered = sorted(tuple(x) for x in page.evaluate(SWAGGER_OPERATIONS))
        assert rendered == [(m, p, s) for m, p, _, s in ops]
        page.screenshot(path=str(tmp_path / "docs.png"))  # kept for a failing run
        assert tab.problems() == []
    # The browser leaves nothing behind in this process: later tests run event loops here.
    assert asyncio.run(asyncio.sleep(0, result="free")) == "free"


@pytest.mark.slow
def test_redoc_renders_offline(live_server: LiveServer, browser: Any, tmp_path: Path):
    ops = _operations()
    with open_page(browser) as tab:
        page = tab.page
        page.goto(live_server.url + docs.REDOC_URL)
        tab.wait_until(
            """n => document.querySelectorAll('h2 > a[href*="/operation/"]').length >= n""",
            len(ops),
        )
        for summary in NAMED:
            assert page.get_by_role("heading", name=summary).first.is_visible(), summary
        rendered = sorted(tuple(x) for x in page.evaluate(REDOC_OPERATIONS))
        assert rendered == sorted((op_id, s) for _, _, op_id, s in ops)
        menu = page.locator('li[data-item-id*="/operation/"]')
        assert menu.count() == len(ops)
        page.screenshot(path=str(tmp_path / "redoc.png"))
        assert tab.problems() == []
