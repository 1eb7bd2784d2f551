"""The web UI in a real headless Chromium (tests/browser.py, network blocked but for loopback)
against the live site of :mod:`tests.ui.conftest`: every page loads with its data, the tables
hold the API's values in the API's order, sorting by a header click reorders the rows, every
image loads, the login form, logout, public boards and share links work, and another team's
private submission is not shown. Screenshots of each page are saved under
``$UQEVAL_ARTIFACTS/screenshots`` (default ``test-artifacts/screenshots``), printed at the end.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser import OfflinePage, open_page
from tests.ui.artifacts import screenshot_dir
from tests.ui.conftest import Site
from uqcore import registry

pytest_plugins = ["tests.browser"]
pytestmark = pytest.mark.slow

#: Every image of the page, once each has loaded or failed: [address, natural width].
IMAGES = """() => Promise.all([...document.images].map(img => img.complete
    ? Promise.resolve()
    : new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })
  )).then(() => [...document.images].map(img => [img.currentSrc || img.src, img.naturalWidth]))"""

ROWS = (
    """() => [...document.querySelectorAll('#board tbody tr')].map(tr => tr.dataset.submission)"""
)


@pytest.fixture(scope="session")
def shots() -> Path:
    """The screenshot folder (the test run prints it at the end: tests/conftest.py)."""
    return screenshot_dir()


@contextlib.contextmanager
def ui_page(browser: Any) -> Iterator[OfflinePage]:
    """A page of :func:`tests.browser.open_page` at a desktop width, where a leaderboard
    with four metric columns fits."""
    with open_page(browser) as tab:
        tab.page.set_viewport_size({"width": 1440, "height": 900})
        yield tab


def shot(tab: OfflinePage, folder: Path, name: str) -> None:
    tab.page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def images_load(tab: OfflinePage) -> list[tuple[str, int]]:
    """Every <img> of the page has loaded (natural width > 0); the logo is always one."""
    images = [tuple(x) for x in tab.page.evaluate(IMAGES)]
    assert images, "no image on the page (the logo at least is expected)"
    broken = [src for src, width in images if width <= 0]
    assert broken == [], broken
    return images  # type: ignore[return-value]


def login(tab: OfflinePage, site: Site, key: str, then: str) -> None:
    """Sign in through the form, as a person would, and land on ``then``."""
    page = tab.page
    page.goto(f"{site.url}/ui/login?next={then}")
    page.fill("#key", key)
    with page.expect_navigation():
        page.click("#login-submit")
    assert page.url == site.url + then, page.url


def api(site: Site, key: str, path: str, **params: Any) -> Any:
    with httpx.Client(base_url=site.url, timeout=60) as http:
        r = http.get(path, params=params, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        return r.json() if "json" in r.headers["content-type"] else r.text


def board_ids(doc: dict[str, Any]) -> list[str]:
    ids = [e["submission_id"] for e in doc["entries"]]
    # the baseline row carries no submission id (it shows nothing of its submission)
    if doc["baseline"] is not None and not any(e["is_baseline"] for e in doc["entries"]):
        ids.append("")
    return ids


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def only_status_errors(tab: OfflinePage) -> None:
    """Problems of a page answered with an error status: only that status, logged."""
    others = [p for p in tab.problems() if "status of 40" not in p]
    assert others == [], others


def test_leaderboard_page(ui_site: Site, browser: Any, shots: Path) -> None:
    site = ui_site
    doc = api(site, site.admin, f"/v1/benchmarks/{site.bench}/leaderboard")
    values: dict[str, dict[str, float]] = {}
    for sub in board_ids(doc):
        result = api(site, site.admin, f"/v1/submissions/{sub}")["result"]
        values[sub] = {m: v["value"] for m, v in result["metrics"].items()}
    with ui_page(browser) as tab:
        page = tab.page
        login(tab, site, site.key_b, f"/ui/benchmarks/{site.bench}")
        tab.wait_until("() => document.documentElement.dataset.sortReady === '1'")
        assert page.evaluate(ROWS) == board_ids(doc)
        # the table holds the API's entries: rank, value, interval, rank interval, P(best)
        marks = 0
        for e in doc["entries"]:
            row = page.locator(f"#board tbody tr[data-submission='{e['submission_id']}']")
            assert row.locator("td").nth(0).inner_text().strip() == str(e["rank"])
            cell = row.locator("td.metric-cell.selected")
            assert cell.locator(".value").inner_text() == fmt(e["value"])
            assert cell.locator(".interval").inner_text() == f"[{fmt(e['low'])}, {fmt(e['high'])}]"
            # the bar: the dot inside its interval
            x = {
                k: float(cell.locator(f"svg.bar {sel}").first.get_attribute(attr) or "nan")
                for k, sel, attr in (
                    ("dot", "circle.pt", "cx"),
                    ("low", "line.iv", "x1"),
                    ("high", "line.iv", "x2"),
                )
            }
            assert x["low"] <= x["dot"] <= x["high"], x
            interval = (
                str(e["rank_low"])
                if e["rank_low"] == e["rank_high"]
                else f"{e['rank_low']}–{e['rank_high']}"
            )
            assert row.locator("td.rank-interval").inner_text() == interval
            assert row.locator("td.p-best").inner_text() == f"{e['p_best']:.2f}"
            want = []
            if e["separable_from_leader"] is False and e["rank"] != 1:
                want.append("≈ leader")
            if e["separable_from_baseline"] is False and not e["is_baseline"]:
                want.append("≈ baseline")
            assert row.locator("td.marks .mark").all_inner_texts() == want
            marks += len(want)
            for metric in ("mae", "nll", "spearman"):
                i = ["crps", "mae", "nll", "spearman"].index(metric)
                shown = row.locator("td.metric-cell").nth(i).locator(".value").inner_text()
                assert shown == fmt(values[e["submission_id"]][metric]), metric
        assert marks > 0, json.dumps(
            doc
        )  # the seeded data have entries not separable from the leader
        # the baseline row is marked; the headers carry the direction and the definition
        base = site.subs["c_public"]
        assert "baseline" in (
            page.locator(f"tr[data-submission='{base}']").get_attribute("class") or ""
        )
        crps = page.locator("#board th[data-sort='crps']")
        assert "↓" in crps.inner_text()
        assert registry.get("crps").summary in (crps.get_attribute("title") or "")
        assert "↑" in page.locator("#board th[data-sort='spearman']").inner_text()
        images_load(tab)
        shot(tab, shots, "leaderboard")

        # sorting by a header click, best first in the metric's direction; again: reversed
        ids = board_ids(doc)
        for metric, best_first in (("mae", False), ("spearman", True), ("nll", False)):
            page.click(f"#board th[data-sort='{metric}'] a")
            want = sorted(ids, key=lambda s: values[s][metric], reverse=best_first)
            assert page.evaluate(ROWS) == want, metric
            page.click(f"#board th[data-sort='{metric}'] a")
            assert page.evaluate(ROWS) == want[::-1], metric
        assert page.url.endswith(f"/ui/benchmarks/{site.bench}")  # no navigation: the script
        page.click("#board th[data-sort='rank'] a")
        assert page.evaluate(ROWS) == ids
        # ties keep the order the rows had (here the API's)
        page.click("#board th[data-sort='p_best'] a")
        p_best = {e["submission_id"]: e["p_best"] for e in doc["entries"]}
        ranked = sorted(p_best, key=lambda s: -p_best[s])
        assert page.evaluate(ROWS)[: len(ranked)] == ranked
        shot(tab, shots, "leaderboard-sorted-by-p-best-then-rank")

        # the CSV link: the API's export, through the cookie
        href = page.get_attribute("#csv", "href")
        assert href is not None
        got = page.request.get(site.url + href)
        assert got.status == 200
        want_csv = api(
            site, site.admin, f"/v1/benchmarks/{site.bench}/leaderboard", format="csv", limit=200
        )
        assert got.text() == want_csv
        # another metric's board: its own order
        page.click("nav.switch a:text-is('spearman')")
        page.wait_for_url("**metric=spearman")
        spearman = api(
            site, site.admin, f"/v1/benchmarks/{site.bench}/leaderboard", metric="spearman"
        )
        assert page.evaluate(ROWS) == board_ids(spearman)
        images_load(tab)
        assert tab.problems() == []


def test_submission_report_page(ui_site: Site, browser: Any, shots: Path) -> None:
    site = ui_site
    doc = api(site, site.key_a, f"/v1/submissions/{site.inline}")
    result = doc["result"]
    with ui_page(browser) as tab:
        page = tab.page
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        login(tab, site, site.key_a, f"/ui/submissions/{site.inline}")
        names = page.eval_on_selector_all(
            "#metrics tbody tr td:first-child a", "els => els.map(e => e.textContent)"
        )
        assert names == list(result["metrics"])
        for name, m in result["metrics"].items():
            row = page.locator("#metrics tbody tr").nth(names.index(name))
            assert row.locator("td.value").inner_text() == fmt(m["value"])
            iv = m.get("interval") or {}
            if iv.get("low") is not None:
                assert (
                    row.locator("td.interval")
                    .inner_text()
                    .startswith(f"[{fmt(iv['low'])}, {fmt(iv['high'])}]")
                )
        assert page.locator("#not-applicable li").count() == len(result["not_applicable"])
        assert page.locator("#warnings li").count() == len(result["warnings"])
        prov = page.locator("#provenance").inner_text()
        assert result["provenance"]["input_hash"] in prov
        assert result["provenance"]["uqcore_version"] in prov
        # the model name is shown as text, never run
        assert page.locator("h1").inner_text() == doc["model_name"]
        assert dialogs == []  # the markup in the name and metadata never ran
        images_load(tab)
        plots = page.locator("#plots img").count()
        assert plots == len(result.get("plots") or [])
        shot(tab, shots, "submission")
        # a benchmark submission: its metrics and a link back to the board
        page.goto(f"{site.url}/ui/submissions/{site.subs['a_public']}")
        assert page.locator(f"a[href='/ui/benchmarks/{site.bench}']").count() == 1
        images_load(tab)
        shot(tab, shots, "submission-benchmark")
        assert tab.problems() == []


def test_comparison_page(ui_site: Site, browser: Any, shots: Path) -> None:
    site = ui_site
    doc = api(site, site.key_a, f"/v1/comparisons/{site.comparison}")
    result = doc["result"]
    cells = [(p, m, c) for p in result["pairs"] for m, c in p["metrics"].items()]
    with ui_page(browser) as tab:
        page = tab.page
        login(tab, site, site.key_a, f"/ui/comparisons/{site.comparison}")
        assert page.locator("#pairs tbody tr").count() == len(cells)
        diffs = page.eval_on_selector_all(
            "#pairs tbody tr td:nth-child(4)", "els => els.map(e => e.textContent)"
        )
        assert sorted(diffs) == sorted(fmt(c["diff"]) for _, _, c in cells)
        assert page.locator("svg.forest").count() == len({m for _, m, _ in cells})
        assert page.locator("svg.forest g.row").count() == len(cells)
        page.click("#pairs th[data-sort='diff']")
        shown = page.eval_on_selector_all(
            "#pairs tbody tr td:nth-child(4)", "els => els.map(e => Number(e.dataset.value))"
        )
        assert shown == sorted(c["diff"] for _, _, c in cells)
        images_load(tab)
        shot(tab, shots, "comparison")
        assert tab.problems() == []


def test_private_submission_is_not_shown_to_another_team(
    ui_site: Site, browser: Any, shots: Path
) -> None:
    site = ui_site
    private = site.subs["a_private"]
    with ui_page(browser) as tab:
        page = tab.page
        login(tab, site, site.key_b, "/ui/benchmarks")
        response = page.goto(f"{site.url}/ui/submissions/{private}")
        assert response is not None and response.status == 404
        assert page.locator("h1").inner_text() == "Not found"
        assert "secret-alpha" not in page.content()
        images_load(tab)
        shot(tab, shots, "private-submission-of-another-team")
        # the session's cookie reads through the API, but never writes
        got = page.request.get(f"{site.url}/v1/submissions/{site.subs['a_public']}")
        assert got.status == 200
        assert page.request.get(f"{site.url}/v1/submissions/{private}").status == 404
        body = {
            "model_name": "x",
            "prediction": {"kind": "gaussian", "mean": [0.0], "std": [1.0]},
            "y": [0.0],
        }
        assert page.request.post(f"{site.url}/v1/submissions", data=body).status == 401
        sub = site.subs["b_public"]
        patched = page.request.patch(
            f"{site.url}/v1/submissions/{sub}", data={"visibility": "private"}
        )
        assert patched.status == 401
        assert api(site, site.key_b, f"/v1/submissions/{sub}")["visibility"] == "public"
        only_status_errors(tab)
    with ui_page(browser) as tab:
        login(tab, site, site.key_a, "/ui/benchmarks")
        tab.page.goto(f"{site.url}/ui/submissions/{private}")
        assert tab.page.locator("h1").inner_text() == "secret-alpha"
        assert tab.problems() == []


def test_public_board_share_link_login_and_logout(ui_site: Site, browser: Any, shots: Path) -> None:
    site = ui_site
    with ui_page(browser) as tab:
        page = tab.page
        response = page.goto(f"{site.url}/ui/benchmarks/{site.public_bench}")
        assert response is not None and response.status == 200
        doc = api(site, site.admin, f"/v1/benchmarks/{site.public_bench}/leaderboard")
        assert page.evaluate(ROWS) == board_ids(doc)
        images_load(tab)
        shot(tab, shots, "public-board-without-key")
        response = page.goto(f"{site.url}/ui/benchmarks/{site.bench}")
        assert response is not None and response.status == 401
        assert page.locator("a.button[href^='/ui/login']").count() == 1
        shot(tab, shots, "private-board-without-key")
        only_status_errors(tab)

    headers = {"Authorization": f"Bearer {site.admin}"}
    links = f"{site.url}/v1/benchmarks/{site.bench}/share-links"
    link = httpx.post(links, headers=headers, timeout=60).json()
    with ui_page(browser) as tab:
        page = tab.page
        response = page.goto(site.url + link["url"])
        assert response is not None and response.status == 200
        doc = api(site, site.admin, f"/v1/benchmarks/{site.bench}/leaderboard")
        assert page.evaluate(ROWS) == board_ids(doc)
        assert page.locator("a[href^='/ui/submissions/']").count() == 0
        images_load(tab)
        shot(tab, shots, "share-link")
        revoked = httpx.delete(f"{links}/{link['link_id']}", headers=headers, timeout=60)
        assert revoked.status_code == 204
        response = page.reload()
        assert response is not None and response.status == 404
        shot(tab, shots, "share-link-revoked")
        only_status_errors(tab)

    with ui_page(browser) as tab:
        page = tab.page
        login(tab, site, site.key_c, "/ui/benchmarks")
        assert page.locator("#benchmarks tbody tr").count() == 3
        images_load(tab)
        shot(tab, shots, "benchmarks")
        page.goto(f"{site.url}/ui/benchmarks/{site.cls_bench}")
        page.click("nav.switch a:text-is('auroc_ood[entropy_bma]')")
        page.wait_for_url("**estimator=entropy_bma")
        doc = api(
            site,
            site.admin,
            f"/v1/benchmarks/{site.cls_bench}/leaderboard",
            metric="auroc_ood",
            estimator="entropy_bma",
        )
        assert page.evaluate(ROWS) == board_ids(doc)
        images_load(tab)
        shot(tab, shots, "leaderboard-classification-estimator")
        with page.expect_navigation():
            page.click("#logout")
        assert page.url.endswith("/ui/login")
        response = page.goto(f"{site.url}/ui/benchmarks/{site.bench}")
        assert response is not None and response.status == 401
        only_status_errors(tab)


def test_glossary_page(ui_site: Site, browser: Any, shots: Path) -> None:
    with ui_page(browser) as tab:
        page = tab.page
        page.goto(f"{ui_site.url}/ui/metrics")
        assert page.locator("article.metric").count() == len(registry.specs())
        spearman = page.locator("#regression-spearman")
        assert "converges to zero" in spearman.locator(".pitfall").inner_text()
        assert page.locator("#regression-ause .pitfall").count() == 1
        assert page.locator("#classification-ece .pitfall").count() == 1
        images_load(tab)
        shot(tab, shots, "metrics")
        assert tab.problems() == []
