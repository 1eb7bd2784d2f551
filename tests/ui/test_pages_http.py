"""The web UI over plain HTTP: access rules (keys, cookie, public boards, share links), the
cookie never counting for writes, escaping, the security headers and the not-found pages."""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import markupsafe
import pytest

from service.api.deps import KEY_COOKIE
from tests.readme import README_URL, readme_block
from tests.ui.conftest import HOSTILE, Site
from uqcore import registry

pytestmark = pytest.mark.slow


def client(site: Site, key: str | None = None, **kw: Any) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=site.url, headers=headers, timeout=60, **kw)


def rows_of(body: str) -> list[str]:
    """The submission ids of a board page's rows, in page order."""
    return re.findall(r'<tr class="[^"]*" data-submission="([^"]+)"', body)


def api_board(site: Site, metric: str | None = None, bench: str | None = None) -> dict[str, Any]:
    with client(site, site.admin) as http:
        params = {"metric": metric} if metric else {}
        r = http.get(f"/v1/benchmarks/{bench or site.bench}/leaderboard", params=params)
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc


def page_ids(doc: dict[str, Any]) -> list[str]:
    ids = [e["submission_id"] for e in doc["entries"]]
    # the baseline row carries no submission id (it shows nothing of its submission)
    if doc["baseline"] is not None and not any(e["is_baseline"] for e in doc["entries"]):
        ids.append("")
    return ids


def test_board_rows_follow_the_api_and_sort_on_the_server(ui_site: Site) -> None:
    site = ui_site
    with client(site, site.key_b) as http:
        for metric in ("crps", "mae", "spearman"):
            r = http.get(f"/ui/benchmarks/{site.bench}", params={"metric": metric})
            assert r.status_code == 200, r.text
            assert rows_of(r.text) == page_ids(api_board(site, metric))
        # ?sort=mae on the crps board: the rows by each submission's own MAE (read from its
        # result document), lowest first
        r = http.get(f"/ui/benchmarks/{site.bench}", params={"sort": "mae"})
        assert r.status_code == 200
        ids = rows_of(r.text)
        maes = {}
        for sub in ids:
            doc = http.get(f"/v1/submissions/{sub}").json()
            maes[sub] = doc["result"]["metrics"]["mae"]["value"]
        assert ids == sorted(ids, key=lambda s: maes[s])
        assert sorted(ids) == sorted(page_ids(api_board(site)))
        assert http.get(f"/ui/benchmarks/{site.bench}", params={"sort": "nope"}).status_code == 404
        assert (
            http.get(f"/ui/benchmarks/{site.bench}", params={"metric": "ause"}).status_code == 404
        )


def test_board_shows_skill_against_the_baseline_for_scores_only(ui_site: Site) -> None:
    """The crps board (a score, best 0) has a skill column: 1 − value / the baseline's value,
    recomputed here from the API's values; spearman (not a score) has none."""
    site = ui_site
    doc = api_board(site, "crps")
    base = doc["baseline"]
    assert base is not None and base["value"] > 0
    with client(site, site.key_b) as http:
        body = http.get(f"/ui/benchmarks/{site.bench}", params={"metric": "crps"}).text
        assert "Skill vs baseline" in body
        shown = re.findall(
            r'<tr class="[^"]*" data-submission="([^"]+)">.*?<td class="num skill">([^<]*)</td>',
            body,
            flags=re.S,
        )
        by_id = {e["submission_id"]: e for e in doc["entries"] if e["submission_id"]}
        assert shown and all(sub in by_id for sub, _ in shown)
        for sub, text in shown:
            want = 1.0 - by_id[sub]["value"] / base["value"]
            assert float(text.replace("−", "-")) == pytest.approx(want, rel=1e-3, abs=1e-3)
        body = http.get(f"/ui/benchmarks/{site.bench}", params={"metric": "spearman"}).text
        assert "Skill vs baseline" not in body


def test_classification_board_under_an_estimator(ui_site: Site) -> None:
    site = ui_site
    with client(site, site.key_a) as http:
        for params in (
            {},
            {"metric": "auroc_ood"},
            {"metric": "auroc_ood", "estimator": "entropy_bma"},
            {"metric": "ece"},
        ):
            r = http.get(f"/ui/benchmarks/{site.cls_bench}", params=params)
            assert r.status_code == 200, (params, r.text)
            api = http.get(f"/v1/benchmarks/{site.cls_bench}/leaderboard", params=params).json()
            assert rows_of(r.text) == page_ids(api), params
            assert len(rows_of(r.text)) == 2
            for e in api["entries"]:
                assert f"{e['value']:.4g}" in r.text
        r = http.get(
            f"/ui/benchmarks/{site.cls_bench}",
            params={"metric": "auroc_ood", "estimator": "entropy_bma"},
        )
        assert 'data-sort="auroc_ood[entropy_bma]"' in r.text
        r = http.get(
            f"/ui/benchmarks/{site.cls_bench}", params={"metric": "auroc_ood", "estimator": "nope"}
        )
        assert r.status_code == 404 and "nope" in r.text


def test_board_needs_a_key_unless_public(ui_site: Site) -> None:
    site = ui_site
    with client(site) as anon:
        r = anon.get(f"/ui/benchmarks/{site.bench}")
        assert r.status_code == 401
        assert "/ui/login?next=" in r.text and "dropout-beta" not in r.text
        r = anon.get(f"/ui/benchmarks/{site.public_bench}")
        assert r.status_code == 200
        assert rows_of(r.text) == page_ids(api_board(site, bench=site.public_bench))
        assert "read-only view" in r.text
        # no links to submissions for a visitor without a key
        assert "/ui/submissions/" not in r.text
        # the index lists only the public board
        r = anon.get("/ui/benchmarks")
        assert r.status_code == 200
        assert "open-board" in r.text and "toy-regression" not in r.text
        # a key that is unknown answers the login page
        r = anon.get("/ui/benchmarks", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and "unknown or revoked" in r.text
        # CSV of the public board, the API's bytes
        r = anon.get(f"/ui/benchmarks/{site.public_bench}/leaderboard.csv")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        with client(site, site.admin) as adm:
            api = adm.get(
                f"/v1/benchmarks/{site.public_bench}/leaderboard",
                params={"format": "csv", "limit": 200},
            )
        assert r.content == api.content
        assert anon.get(f"/ui/benchmarks/{site.bench}/leaderboard.csv").status_code == 401


def test_public_board_setting_is_patchable(ui_site: Site) -> None:
    site = ui_site
    with client(site, site.admin) as adm, client(site) as anon:
        assert adm.get(f"/v1/benchmarks/{site.bench}").json()["public_board"] is False
        r = adm.patch(f"/v1/benchmarks/{site.bench}", json={"public_board": True})
        assert r.status_code == 200 and r.json()["public_board"] is True
        try:
            assert anon.get(f"/ui/benchmarks/{site.bench}").status_code == 200
        finally:
            r = adm.patch(f"/v1/benchmarks/{site.bench}", json={"public_board": False})
            assert r.json()["public_board"] is False
        assert anon.get(f"/ui/benchmarks/{site.bench}").status_code == 401
        with client(site, site.key_a) as sub:
            r = sub.patch(f"/v1/benchmarks/{site.bench}", json={"public_board": True})
            assert r.status_code == 403


def test_share_links_open_one_board_read_only_until_revoked(ui_site: Site) -> None:
    site = ui_site
    base = f"/v1/benchmarks/{site.bench}/share-links"
    with client(site, site.admin) as adm, client(site) as anon:
        with client(site, site.key_a) as sub:
            assert sub.post(base).status_code == 403
            assert sub.get(base).status_code == 403
        assert adm.post("/v1/benchmarks/bench_missing/share-links").status_code == 404
        r = adm.post(base)
        assert r.status_code == 201, r.text
        link = r.json()
        assert link["url"] == f"/ui/benchmarks/{site.bench}?share={link['token']}"
        listed = adm.get(base).json()["links"]
        assert [x["link_id"] for x in listed] == [link["link_id"]]
        assert link["token"] not in adm.get(base).text
        page = anon.get(link["url"])
        assert page.status_code == 200
        assert rows_of(page.text) == page_ids(api_board(site))
        assert "read-only view" in page.text and "/ui/submissions/" not in page.text
        # the CSV link on the page carries the token
        csv_href = html.unescape(re.search(r'id="csv" href="([^"]+)"', page.text)[1])
        assert f"share={link['token']}" in csv_href
        csv = anon.get(csv_href)
        api_csv = adm.get(
            f"/v1/benchmarks/{site.bench}/leaderboard", params={"format": "csv", "limit": 200}
        )
        assert csv.status_code == 200 and csv.content == api_csv.content
        # the token opens its own benchmark only, and nothing else
        other = anon.get(f"/ui/benchmarks/{site.public_bench}", params={"share": link["token"]})
        assert other.status_code == 404
        assert anon.get(f"/ui/submissions/{site.subs['a_public']}").status_code == 401
        assert (
            anon.get(
                f"/v1/benchmarks/{site.bench}/leaderboard",
                headers={"Authorization": f"Bearer {link['token']}"},
            ).status_code
            == 401
        )
        # revoked: 404 at once
        assert adm.delete(f"{base}/{link['link_id']}").status_code == 204
        assert anon.get(link["url"]).status_code == 404
        assert anon.get(csv_href).status_code == 404
        assert adm.get(base).json()["links"] == []
        assert adm.delete(f"{base}/{link['link_id']}").status_code == 404


def test_cookie_reads_but_never_writes(ui_site: Site) -> None:
    site = ui_site
    sub = site.subs["a_public"]
    cookies = {KEY_COOKIE: site.key_a}
    with client(site, cookies=cookies) as http:
        assert http.get(f"/v1/submissions/{sub}").status_code == 200
        assert http.head(f"/v1/benchmarks/{site.bench}").status_code in (200, 405)
        r = http.get(f"/v1/benchmarks/{site.bench}/leaderboard", params={"format": "csv"})
        assert r.status_code == 200 and r.text.startswith("rank,")
        body = {
            "model_name": "x",
            "prediction": {"kind": "gaussian", "mean": [0.0], "std": [1.0]},
            "y": [0.0],
        }
        assert http.post("/v1/submissions", json=body).status_code == 401
        assert (
            http.patch(f"/v1/submissions/{sub}", json={"visibility": "private"}).status_code == 401
        )
        assert http.delete(f"/v1/submissions/{sub}").status_code == 401
        assert http.post(f"/v1/submissions/{sub}/cancel").status_code == 401
        cmp = {"benchmark_id": site.bench, "submission_ids": [sub, site.subs["b_public"]]}
        assert http.post("/v1/comparisons", json=cmp).status_code == 401
    with client(site, cookies={KEY_COOKIE: site.admin}) as http:
        assert http.post(f"/v1/benchmarks/{site.bench}/share-links").status_code == 401
    # the submission is untouched
    with client(site, site.key_a) as http:
        assert http.get(f"/v1/submissions/{sub}").json()["visibility"] == "public"


def test_login_sets_and_logout_clears_the_cookie(ui_site: Site) -> None:
    site = ui_site
    with client(site, follow_redirects=False) as http:
        r = http.get("/ui/login")
        assert r.status_code == 200 and 'name="key"' in r.text
        r = http.post("/ui/login", data={"key": "not-a-key", "next": "/ui/metrics"})
        assert r.status_code == 401 and "unknown or revoked" in r.text
        assert KEY_COOKIE not in r.headers.get("set-cookie", "")
        r = http.post("/ui/login", data={"key": site.key_b, "next": "/ui/metrics"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/metrics"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{KEY_COOKIE}={site.key_b};")
        attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attrs
        assert "secure" not in attrs  # plain http here; https requests get Secure
        r = http.get(f"/ui/benchmarks/{site.bench}")
        assert r.status_code == 200 and "team-beta" in r.text
        # an absolute or protocol-relative next is not followed
        r = http.post("/ui/login", data={"key": site.key_b, "next": "//evil.example/"})
        assert r.headers["location"] == "/ui/benchmarks"
        r = http.post("/ui/logout")
        assert r.status_code == 303
        assert (
            f'{KEY_COOKIE}=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
        )
        http.cookies.clear()
        http.cookies.update(dict(httpx.Cookies()))
        assert http.get(f"/ui/benchmarks/{site.bench}").status_code == 401


def test_private_submission_and_comparison_of_another_team_are_not_found(ui_site: Site) -> None:
    site = ui_site
    private = site.subs["a_private"]
    with client(site, site.key_a) as a, client(site, site.key_b) as b:
        assert a.get(f"/ui/submissions/{private}").status_code == 200
        mine = a.get(f"/ui/comparisons/{site.comparison}")
        assert mine.status_code == 200
        theirs = b.get(f"/ui/submissions/{private}")
        unknown = b.get("/ui/submissions/sub_does_not_exist")
        assert theirs.status_code == unknown.status_code == 404
        assert "secret-alpha" not in theirs.text
        assert theirs.text.replace(private, "ID") == unknown.text.replace(
            "sub_does_not_exist", "ID"
        )
        assert b.get(f"/ui/comparisons/{site.comparison}").status_code == 404
        assert b.get("/ui/comparisons/cmp_nope").status_code == 404
        assert b.get("/ui/benchmarks/bench_nope").status_code == 404
        # public ones of other teams are readable, as over the API
        assert b.get(f"/ui/submissions/{site.subs['a_public']}").status_code == 200
    with client(site) as anon:
        assert anon.get(f"/ui/submissions/{private}").status_code == 401
        assert anon.get(f"/ui/comparisons/{site.comparison}").status_code == 401


def test_pages_escape_every_value(ui_site: Site) -> None:
    site = ui_site
    with client(site, site.key_a) as http:
        for path in (f"/ui/submissions/{site.inline}", f"/ui/submissions/{site.subs['a_public']}"):
            r = http.get(path)
            assert r.status_code == 200
            assert HOSTILE not in r.text and "<script>alert" not in r.text
            assert "onerror=alert" not in r.text.replace("onerror=alert(1)&gt;", "")
        page = http.get(f"/ui/submissions/{site.inline}").text
        assert str(markupsafe.escape(HOSTILE)) in page  # shown, as text
        r = http.get(f"/ui/benchmarks/{site.bench}")
        assert "<em>with markup</em>" not in r.text and "&lt;em&gt;with markup" in r.text
        # a query value is escaped where a page repeats it
        r = http.get("/ui/login", params={"next": '/ui/"><script>x</script>'})
        assert "<script>x" not in r.text


def test_security_headers_on_every_page(ui_site: Site) -> None:
    site = ui_site
    paths = [
        "/ui/benchmarks",
        f"/ui/benchmarks/{site.bench}",
        f"/ui/submissions/{site.inline}",
        f"/ui/comparisons/{site.comparison}",
        "/ui/metrics",
        "/ui/login",
        "/ui/submissions/sub_missing",
    ]
    with client(site, site.key_a) as http:
        for path in paths:
            r = http.get(path)
            assert r.headers["content-type"].startswith("text/html"), path
            csp = r.headers["content-security-policy"]
            assert "default-src 'self'" in csp and "img-src 'self' data:" in csp, path
            assert "unsafe-inline" not in csp
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["referrer-policy"] == "no-referrer"
            assert "no-store" in r.headers["cache-control"]
            # nothing from another origin: every src/href is relative to this site
            refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
            assert refs and all(u.startswith(("/", "#", "?", "data:")) for u in refs), (path, refs)
            assert "<script>" not in r.text and "style=" not in r.text
        r = http.get("/ui/", follow_redirects=False)
        assert r.status_code in (302, 307) and r.headers["location"] == "/ui/benchmarks"
        assert http.get("/ui/static/sort.js").status_code == 200
        assert http.get("/ui/static/nothing.js").status_code == 404


def test_glossary_lists_every_registry_metric_with_its_pitfalls(ui_site: Site) -> None:
    with client(ui_site) as http:
        r = http.get("/ui/metrics")
    assert r.status_code == 200
    for spec in registry.specs():
        anchor = f'id="{spec.task}-{spec.name}"'
        assert anchor in r.text, anchor
        assert str(markupsafe.escape(spec.summary)) in r.text
        assert str(markupsafe.escape(spec.reference)) in r.text
    for words in (
        "converges to zero",
        "no clear upper bound for AUSE",
        "multimodal",
        "Binning bias",
        "When to use",
    ):
        assert words in html.unescape(r.text), words


def test_readme_share_link_example_runs(ui_site: Site, tmp_path: Path) -> None:
    """The README's share-link commands, run by bash against the live site."""
    script = readme_block("share-link").replace(README_URL, ui_site.url)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "ADMIN_KEY": ui_site.admin,
        "BENCH": ui_site.bench,
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "404"], done.stdout
    with client(ui_site, ui_site.admin) as http:
        assert http.get(f"/v1/benchmarks/{ui_site.bench}/share-links").json()["links"] == []
