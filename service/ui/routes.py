"""The pages of the web UI under ``/ui/``: benchmarks, a leaderboard, a submission's report, a
comparison, the metric glossary, and the login form.

Every page is rendered on the server from the store's data with the API's access rules; the
routes are plain functions, so FastAPI runs them (and their Redis round trips) in its thread
pool, never on the event loop. The only writes are the login and logout, which set and clear
the key cookie.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from service.api import access
from service.api.auth import ensure_admin_key
from service.api.deps import KEY_COOKIE, get_store
from service.api.errors import ApiError
from service.api.routes import leaderboards as lb
from service.api.routes.comparisons import may_read
from service.kinds import task_of
from service.leaderboard import board_name, own_estimator, result_entries
from service.settings import Settings
from service.splits import Part
from service.store import BenchmarkRecord, RenderedPage, Store
from service.ui import glossary, views
from service.ui.render import page
from service.ui.viewer import PageError, Viewer, check_board, login_needed, not_found, viewer
from uqcore import registry

router = APIRouter(prefix="/ui", include_in_schema=False)

#: Rows of a leaderboard page (the API's page size limit is 1000).
BOARD_ROWS = 200

#: Largest login form body read (the key and the next address).
LOGIN_BODY_BYTES = 4096

Text = Annotated[str | None, Query(max_length=200)]


def _store(request: Request) -> Store:
    try:
        return get_store(request)
    except ApiError as exc:
        raise PageError(exc.status, "Starting", exc.message) from None


@router.get("/")
def ui_home() -> RedirectResponse:
    return RedirectResponse("/ui/benchmarks", status_code=307)


# --- benchmarks ----------------------------------------------------------------------------


@router.get("/benchmarks")
def benchmarks_page(request: Request) -> Response:
    store = _store(request)
    who = viewer(request, store)
    shown = [b for b in store.list_benchmarks() if who.key is not None or b.public_board]
    suites = [s for s in store.list_suites() if who.key is not None or s.public_board]
    return page(
        request, "benchmarks.html", who, benchmarks=shown, suites=suites, title="Benchmarks"
    )


def _board_query(
    bench: BenchmarkRecord, metric: str | None, estimator: str | None
) -> tuple[str, str | None, str]:
    """(metric, estimator asked, selected board name) of a page's query."""
    name = metric or bench.primary_metric
    if name not in bench.metrics:
        raise PageError(404, "Not found", f"Benchmark {bench.name!r} shows no metric {name!r}.")
    if estimator is None:
        return name, None, name
    spec = registry.get(name, bench.task)
    return name, estimator, board_name(name, estimator, own_estimator(spec, bench.params.get(name)))


def _render_board(
    request: Request,
    store: Store,
    bench_id: str,
    metric: str | None,
    estimator: str | None,
    fmt: lb.Format,
    part: Part = "public",
) -> RenderedPage:
    """The API's leaderboard answer (JSON or CSV), from its cache or rendered, with the same
    rules and bytes as ``GET /v1/benchmarks/{id}/leaderboard`` (``part``: its query)."""
    settings: Settings = request.app.state.settings
    key = lb.page_key(bench_id, metric, estimator, 0, BOARD_ROWS, fmt, part)
    try:
        rendered = store.leaderboard_render(
            bench_id,
            key,
            lambda b: lb._deps(b, metric, estimator, part),
            lambda snap: lb._render(
                store, settings, snap, metric, estimator, 0, BOARD_ROWS, fmt, part
            ),
            lb.PAGE_TTL_S,
        )
    except ApiError as exc:
        raise PageError(
            404 if exc.status in (409, 422) else exc.status, "Not found", exc.message
        ) from None
    if rendered is None:
        raise not_found(f"benchmark {bench_id!r}")
    return rendered


def _part(bench: BenchmarkRecord, part: str | None) -> Part:
    """The board part a page asks for: "public" (default), or "private" once a benchmark
    with a split is closed (else a not-found page saying why)."""
    if part in (None, "public"):
        return "public"
    if part != "private":
        raise PageError(404, "Not found", f"A board has no part {part!r}: public or private.")
    if not bench.is_split:
        raise PageError(404, "Not found", f"Benchmark {bench.name!r} has no private part.")
    if bench.status != "closed":
        raise PageError(
            404,
            "Not found",
            f"The private board of {bench.name!r} is revealed when the benchmark closes.",
        )
    return "private"


def _link(path: str, **params: str | None) -> str:
    query = {k: v for k, v in params.items() if v is not None}
    return path + ("?" + urlencode(query) if query else "")


@router.get("/benchmarks/{bench_id}")
def board_page(
    request: Request,
    bench_id: str,
    metric: Text = None,
    estimator: Text = None,
    sort: Text = None,
    share: Text = None,
    part: Text = None,
) -> Response:
    store = _store(request)
    who = viewer(request, store, share=share)
    bench = check_board(who, store.get_benchmark(bench_id), bench_id)
    name, asked, selected = _board_query(bench, metric, estimator)
    shown_part = _part(bench, part)
    doc = json.loads(_render_board(request, store, bench_id, name, asked, "json", shown_part).body)
    boards = list(bench.metrics)
    if selected not in boards:
        boards.insert(boards.index(name) + 1, selected)
    if shown_part == "private":
        # the private board ranks finals by their private values; the other metrics' columns
        # would be public values: only the ranked metric is shown
        boards = [selected]
    private = "private" if shown_part == "private" else None
    if sort is not None and sort not in ("rank", "p_best", *boards):
        raise PageError(404, "Not found", f"This board cannot be sorted by {sort!r}.")
    rows_ids = [e["submission_id"] for e in doc["entries"]]
    # The baseline row carries no submission id (it shows nothing of its submission); its
    # values on the other boards are looked up here by the benchmark's baseline.
    base_id = bench.baseline if doc.get("baseline") is not None else None
    if base_id is not None and base_id not in rows_ids:
        rows_ids.append(base_id)
    others = [b for b in boards if b != selected]
    found = store.leaderboard_entries_of(bench_id, others, rows_ids)
    base_entries: dict[str, Any] = {}
    if base_id is not None and any((b, base_id) not in found for b in others):
        # a private baseline has no board entries: its values come from its result
        result = store.get_result(base_id) or {}
        base_entries = {b: shown for b, (_, shown) in result_entries(result, bench.task).items()}

    def shown(board: str, sub_id: str | None) -> dict[str, Any] | None:
        sub_id = base_id if sub_id is None else sub_id
        got = found.get((board, sub_id)) if sub_id is not None else None
        if got is None and sub_id is not None and sub_id == base_id:
            got = base_entries.get(board)
        return got

    columns, rows = views.board_table(doc, selected, bench.task, boards, bench.params, shown, sort)
    token = who.share_token
    csv_url = _link(
        f"/ui/benchmarks/{quote(bench_id, safe='')}/leaderboard.csv",
        metric=metric,
        estimator=estimator,
        share=token,
        part=private,
    )
    base_path = f"/ui/benchmarks/{quote(bench_id, safe='')}"
    # (label, page, shown now): the public board and, once revealed, the private one
    parts = []
    if bench.is_split and bench.status == "closed":
        for label, value in (("public", None), ("private", "private")):
            link = _link(base_path, metric=metric, estimator=estimator, share=token, part=value)
            parts.append((label, link, value == private))
    switch = []  # (board, its page, shown now): every metric, and each under the estimators
    for m in bench.metrics:
        switch.append((m, _link(base_path, metric=m, share=token, part=private), m == selected))
        own = own_estimator(registry.get(m, bench.task), bench.params.get(m))
        for e in bench.estimators or [] if own is not None else []:
            if e != own:
                b = board_name(m, e, own)
                link = _link(base_path, metric=m, estimator=e, share=token, part=private)
                switch.append((b, link, b == selected))
    sort_links = {
        key: _link(
            base_path, metric=metric, estimator=estimator, sort=key, share=token, part=private
        )
        for key in ("rank", "p_best", *boards)
    }
    plots = [
        {**p, "src": views.plot_src(str(p.get("url", "")))}
        for p in (doc.get("plots") or [])
        if who.key is not None and isinstance(p, dict) and p.get("url")
    ]
    return page(
        request,
        "board.html",
        who,
        title=f"{bench.name} — leaderboard",
        bench=bench,
        board=doc,
        columns=columns,
        rows=rows,
        selected=selected,
        sort=sort or "rank",
        csv_url=csv_url,
        switch=switch,
        sort_links=sort_links,
        plots=plots,
        read_only=who.key is None,
        definition=glossary.lookup(bench.task, selected),
        parts=parts,
        part=shown_part,
        # shown only for a board whose metric is a score with a baseline (else all null)
        skill_column=any(r.entry.get("skill_vs_baseline") is not None for r in rows),
    )


@router.get("/benchmarks/{bench_id}/leaderboard.csv")
def board_csv(
    request: Request,
    bench_id: str,
    metric: Text = None,
    estimator: Text = None,
    share: Text = None,
    part: Text = None,
) -> Response:
    """The board's CSV export (the API's bytes), for a key, a share link or a public board."""
    store = _store(request)
    who = viewer(request, store, share=share)
    bench = check_board(who, store.get_benchmark(bench_id), bench_id)
    name, asked, _ = _board_query(bench, metric, estimator)
    rendered = _render_board(request, store, bench_id, name, asked, "csv", _part(bench, part))
    return Response(
        rendered.body,
        media_type="text/csv",
        headers={
            "Content-Disposition": rendered.disposition,
            "Cache-Control": "private, no-store",
            "Referrer-Policy": "no-referrer",
        },
    )


# --- submissions and comparisons -----------------------------------------------------------


def _need_key(who: Viewer, what: str) -> None:
    if who.key is None:
        raise login_needed(what)


@router.get("/submissions/{sub_id}")
def submission_page(request: Request, sub_id: str) -> Response:
    store = _store(request)
    who = viewer(request, store)
    _need_key(who, "this submission")
    assert who.key is not None
    record, raw = store.get_submission_and_result(sub_id)
    if record is None or not access.can_read(who.key, record):
        raise not_found(f"submission {sub_id!r}")
    result = json.loads(raw) if raw is not None else None
    task = task_of(record.kind)
    bench = store.get_benchmark(record.benchmark) if record.benchmark else None
    team = record.team if record.team is not None else None
    names = store.team_names([team]) if team else {}
    plots = [
        {**p, "src": views.plot_src(str(p.get("url", "")))}
        for p in ((result or {}).get("plots") or [])
        if isinstance(p, dict) and p.get("url")
    ]
    not_applicable = sorted(((result or {}).get("not_applicable") or {}).items())
    return page(
        request,
        "submission.html",
        who,
        title=f"{record.model_name} — submission",
        record=record,
        result=result,
        task=task,
        bench=bench,
        team_name=names.get(team) if team else None,
        metrics=views.metric_rows(result or {}, task),
        not_applicable=not_applicable,
        warnings=list((result or {}).get("warnings") or []),
        provenance=(result or {}).get("provenance") or {},
        analyses=json.dumps(record.analyses.document(), indent=1, sort_keys=True),
        metadata=json.dumps(record.metadata, indent=1, sort_keys=True),
        plots=plots,
        fmt=views.fmt,
    )


@router.get("/comparisons/{cmp_id}")
def comparison_page(request: Request, cmp_id: str) -> Response:
    store = _store(request)
    who = viewer(request, store)
    _need_key(who, "this comparison")
    key = who.key
    assert key is not None
    doc = store.get_comparison(cmp_id)
    if doc is None:
        raise not_found(f"comparison {cmp_id!r}")
    if not may_read(key, doc):
        raise not_found(f"comparison {cmp_id!r}")
    req = doc.get("request") or {}
    bench = store.get_benchmark(str(req.get("benchmark_id", "")))
    task = bench.task if bench is not None else "regression"
    result = doc.get("result") or {}
    subs = result.get("submissions") or {}
    names = {
        sid: f"{s.get('model_name') or sid} ({s.get('team_name') or s.get('team_id') or '—'})"
        for sid, s in subs.items()
    }
    metrics: list[str] = []
    for p in result.get("pairs") or []:
        for m in p.get("metrics") or {}:
            if m not in metrics:
                metrics.append(m)
    pairs = [
        {
            "a": p["a"],
            "b": p["b"],
            "metric": m,
            "c": c,
            "entry": glossary.lookup(task, m),
        }
        for m in metrics
        for p in result.get("pairs") or []
        if (c := (p.get("metrics") or {}).get(m))
    ]
    plots = [
        {**p, "src": views.plot_src(str(p.get("url", "")))}
        for p in (doc.get("plots") or result.get("plots") or [])
        if isinstance(p, dict) and p.get("url")
    ]
    return page(
        request,
        "comparison.html",
        who,
        title=f"Comparison {cmp_id}",
        cmp=doc,
        req=req,
        bench=bench,
        result=result,
        names=names,
        pairs=pairs,
        ranks=result.get("ranks") or {},
        forests=views.forests(result, metrics, task, {k: v for k, v in names.items()}),
        plots=plots,
        fmt=views.fmt,
    )


# --- glossary ------------------------------------------------------------------------------


@router.get("/metrics")
def metrics_page(request: Request) -> Response:
    store = _store(request)
    who = viewer(request, store)
    return page(request, "metrics.html", who, title="Metric glossary", families=glossary.families())


# --- login ---------------------------------------------------------------------------------


def _next(value: str | None) -> str:
    """Where to go after login: a page of the UI only (no open redirect)."""
    if value and value.startswith("/ui/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/benchmarks"


@router.get("/login")
def login_page(request: Request, next: Text = None) -> Response:
    return page(request, "login.html", Viewer(), title="Sign in", next=_next(next))


def _check_key(request: Request, token: str) -> bool:
    store = _store(request)
    ensure_admin_key(request, store)
    return store.authenticate(token) is not None


@router.post("/login")
async def login(request: Request) -> Response:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > LOGIN_BODY_BYTES:
            raise PageError(413, "Too large", "The login form is too large.")
    form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    token = (form.get("key") or [""])[0].strip()
    target = _next((form.get("next") or [""])[0])
    if not token or not await run_in_threadpool(_check_key, request, token):
        return page(
            request,
            "login.html",
            Viewer(),
            title="Sign in",
            next=target,
            error="This API key is unknown or revoked.",
            status=401,
        )
    out = RedirectResponse(target, status_code=303)
    out.set_cookie(
        KEY_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return out


@router.post("/logout")
def logout(request: Request) -> Response:
    out = RedirectResponse("/ui/login", status_code=303)
    out.delete_cookie(
        KEY_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return out


# --- benchmark suites ----------------------------------------------------------------------


def _suite_answer(request: Request, store: Store, suite_id: str, view: str, fmt: str) -> Any:
    """The API's suite leaderboard answer (cached or rendered, the same bytes)."""
    from service.api.routes import suites as suite_routes

    if view not in ("rows", "tasks"):
        raise PageError(404, "Not found", f"A suite has no view {view!r}: rows or tasks.")
    settings: Settings = request.app.state.settings
    rendered = suite_routes.answer(
        store,
        settings,
        suite_id,
        view,  # type: ignore[arg-type]
        0,
        BOARD_ROWS,
        fmt,  # type: ignore[arg-type]
    )
    if rendered is None:
        raise not_found(f"suite {suite_id!r}")
    return rendered


def _visible_suite(who: Viewer, store: Store, suite_id: str) -> Any:
    """The suite whose page ``who`` may see: any key, or nobody when its board is public."""
    suite = store.get_suite(suite_id)
    if suite is None:
        raise not_found(f"suite {suite_id!r}")
    if who.key is None and not suite.public_board:
        raise login_needed("this suite's leaderboard")
    return suite


@router.get("/suites/{suite_id}")
def suite_page(request: Request, suite_id: str, view: Text = None) -> Response:
    store = _store(request)
    who = viewer(request, store)
    suite = _visible_suite(who, store, suite_id)
    shown = view or "rows"
    doc = json.loads(_suite_answer(request, store, suite_id, shown, "json").body)
    base = f"/ui/suites/{quote(suite_id, safe='')}"
    names = {b.id: b.name for b in store.list_benchmarks()}
    team = suite.baseline_team
    baseline = store.team_names([team]).get(team, team) if team else "each benchmark's baseline"
    return page(
        request,
        "suite.html",
        who,
        title=f"{suite.name} — suite leaderboard",
        suite=suite,
        board=doc,
        view=shown,
        bench_names=names,
        baseline=baseline,
        views=[(v, _link(base, view=v), v == shown) for v in ("rows", "tasks")],
        csv_url=_link(f"{base}/leaderboard.csv", view=shown),
        fmt=views.fmt,
        read_only=who.key is None,
    )


@router.get("/suites/{suite_id}/leaderboard.csv")
def suite_csv(request: Request, suite_id: str, view: Text = None) -> Response:
    """The suite board's CSV export (the API's bytes), for a key or a public suite."""
    store = _store(request)
    who = viewer(request, store)
    _visible_suite(who, store, suite_id)
    rendered = _suite_answer(request, store, suite_id, view or "rows", "csv")
    return Response(
        rendered.body,
        media_type="text/csv",
        headers={
            "Content-Disposition": rendered.disposition,
            "Cache-Control": "private, no-store",
            "Referrer-Policy": "no-referrer",
        },
    )
