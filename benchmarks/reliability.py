"""The service's reliability promises, measured on a stack that is killed while it works.

Each part starts its own stack on 127.0.0.1 (:mod:`benchmarks._chaos`): a managed Redis (AOF,
``appendfsync everysec``), Celery workers (``python -m uqeval worker --concurrency 2``: a
master and 2 prefork children each) and the API (uvicorn), with the admin key in
``UQEVAL_ADMIN_KEY``. The harness itself kills and restarts processes (no supervisor). What
became of each submission is read from Redis directly, not through the API
(:mod:`benchmarks._load`):

* lost: accepted (202) but absent from the store, or never terminal within the wait;
* duplicated: one Idempotency-Key answered with two ids, a result document written more than
  once (Redis keyspace notifications), or more succeeded task runs (workers' logs) or
  succeeded counts (the store's job counter) than succeeded submissions — reported apart;
* wrong: a stored metric value that differs from ``uqcore.evaluate`` on the same arrays
  (relative 1e-9);
* failed: ended failed or cancelled.

Parts (``--only a,b,...``):

(a) chaos: 200 submissions (N = 2000, mae/crps/nll, B = 2000 bootstrap resamples) from 4
    client threads, while pool children and whole workers that hold a running job are
    SIGKILLed at seeded random intervals (a killed worker is restarted 0.5-2 s later);
(b) Redis SIGKILLed twice under load (8 submissions/s), left down 3 s, restarted on the same
    port and data directory: accepted submissions lost (expected 0 with AOF) and, as a
    control, the same with persistence off (no AOF, no RDB), which must lose some; seconds
    of 503 seen by a /readyz probe (every 0.1 s) and by the clients' POSTs;
(c) SIGTERM (warm shutdown) of a worker holding a job, then of the API, under load (8/s);
    each restarted at once;
(d) half of a large body (NPZ, N = 10^6, 24 MB; JSON, N = 2.5·10^5) sent, then the API
    SIGKILLed and restarted, or the client gone (socket closed): no submission visible
    (admin list, store keys), also after the reaper's window; the same Idempotency-Key then
    submits anew;
(e) soak: 1 submission/s for ``--soak-minutes`` (30) through a submitter key, raw arrays kept
    ``--retention`` s (30): RSS of API and workers, the store's keys by kind before and after
    retention, every job's time from creation to end.

Run from the repository root:

    python benchmarks/reliability.py                          # everything (about 40 min)
    python benchmarks/reliability.py --quick --soak-minutes 2 # a smoke run (about 6 min)
    python benchmarks/reliability.py --only b,d

Writes the "Reliability" section of ``benchmarks/RESULTS.md`` (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _reliability as R  # noqa: E402
from benchmarks._results import write_section  # noqa: E402

PARTS = ("a", "b", "c", "d", "e")


def mb(x: float) -> str:
    return f"{x / 2**20:+.1f} MB" if x < 0 or x > 0 else "0 MB"


def row(name: str, got: Any, expected: str) -> str:
    return f"| {name} | {got} | {expected} |"


def ok(flag: bool) -> str:
    return "yes" if flag else "**NO**"


def table(rows: list[str]) -> str:
    return "\n".join(["| figure | measured | expected |", "|---|---|---|", *rows])


def outcome_rows(r: dict[str, Any]) -> list[str]:
    dup_detail = (
        f"written twice {len(r['written_twice'])}, key with two ids "
        f"{len(r['idem_two_ids'])}; task runs succeeded {r['log_succeeded_runs']}, "
        f"counter {r['stats_succeeded']}"
    )
    return [
        row("submitted / accepted (202)", f"{r['submitted']} / {r['accepted']}", "all accepted"),
        row("refused after retries", f"{r['refused']} {r['refusals'][:1]}", "0"),
        row("lost (missing + never terminal)", f"{r['lost']}", "0"),
        row("duplicated", f"{r['duplicated']} ({dup_detail})", "0; runs = counter = succeeded"),
        row("records nobody was told of", r["extra_records"], "0"),
        row("wrong (≠ uqcore.evaluate)", r["wrong"], "0"),
        row("failed", f"{r['failed']} {list(r['failed_reasons'].values())[:1]}", "0"),
        row("succeeded", r["succeeded"], "= accepted"),
        row("client-visible errors (retried)", r["client_errors"] or "none", "only during kills"),
        row(
            "workers that died on their own (restarted by the harness)",
            f"{r['worker_self_exits']} {r['self_exit_reasons'][:1]}",
            "0",
        ),
        row("processes left after stop", len(r["survivors"]), "0"),
    ]


def report_a(r: dict[str, Any]) -> str:
    s = r["settings"]
    head = (
        f"### (a) Chaos: workers SIGKILLed\n\n{s['count']} submissions (N = {s['n']}, "
        f"mae/crps/nll, B = {s['bootstrap']}) from {s['clients']} threads; 2 workers × 2 "
        f"prefork children; heartbeat 0.5 s, TTL 4 s. Kills at seeded intervals, each of a "
        f"worker holding a running job.\n"
    )
    rows = [
        row(
            "kills: pool child / whole worker (holding a job)",
            f"{r['kills_child']} / {r['kills_worker']} ({r['kills_busy']})",
            "as planned",
        ),
        row("jobs re-queued by the reaper", r["requeued"], "≈ jobs of killed workers"),
        *outcome_rows(r),
        row("wall time", f"{r['wall_s']:.0f} s", "—"),
    ]
    return head + "\n" + table(rows)


def report_b(r: dict[str, Any], control: dict[str, Any] | None) -> str:
    s = r["settings"]
    head = (
        f"### (b) Redis SIGKILLed under load\n\n{s['count']} submissions at {s['rate']}/s "
        f"from 4 threads; Redis SIGKILLed {r['redis_kills']}×, down {s['down_s']:.0f} s each, "
        "restarted on the same port and data directory. AOF on (`appendfsync everysec`); the "
        "control has no AOF and no RDB snapshots.\n"
    )
    rows = [
        row("Redis down in all", f"{r['redis_down_s']:.1f} s", "—"),
        row("/readyz not 200 (probe every 0.1 s)", f"{r['readyz_not_ready_s']:.1f} s", "≈ down"),
        row("  of which 503", f"{r['readyz_503_s']:.1f} s", "all of it"),
        row("POSTs answered 503: first to last", f"{r['post_503_span_s']:.1f} s", "≤ down"),
        *outcome_rows(r),
    ]
    text = head + "\n" + table(rows)
    if control is not None:
        c = control
        text += (
            "\n\nControl, persistence off (same load and kills): the measurement must see "
            "loss.\n\n"
            + table(
                [
                    row("accepted (202)", c["accepted"], "—"),
                    row("accepted and lost", c["lost"], "> 0"),
                    row("detects loss", ok(c["lost"] > 0), "yes"),
                    row("/readyz not 200", f"{c['readyz_not_ready_s']:.1f} s", "≈ down"),
                    row("client-visible errors", c["client_errors"] or "none", "—"),
                ]
            )
        )
    return text


def report_c(r: dict[str, Any]) -> str:
    s = r["settings"]
    head = (
        f"### (c) SIGTERM of a worker and of the API under load\n\n{s['count']} submissions "
        f"at {s['rate']}/s (B = {s['bootstrap']}); SIGTERM to the worker's master (warm "
        "shutdown) while it holds a job, then to the API (uvicorn's graceful shutdown); each "
        "started again at once, the API on the same port.\n"
    )
    rows = [
        row("jobs the worker held at SIGTERM", r["worker_jobs_held"], "≥ 1"),
        row("worker exit after SIGTERM", f"{r['worker_exit_s']:.1f} s", "its job's end"),
        row("API exit after SIGTERM", f"{r['api_exit_s']:.1f} s", "< 1 s"),
        row("API unreachable (SIGTERM to ready)", f"{r['api_down_s']:.1f} s", "—"),
        *outcome_rows(r),
    ]
    return head + "\n" + table(rows)


def report_d(r: dict[str, Any]) -> str:
    head = (
        "### (d) API killed mid-upload\n\nA raw socket sends the headers and half the body "
        "of POST /v1/submissions (admin key, an Idempotency-Key), then the API is SIGKILLed "
        "and restarted (or the socket is closed, API alive). Visible = the admin's list "
        "total, `sub:*` keys in the store, `pending` entries.\n\n"
        "| body | how | bytes | listed | sub keys | pending | expected |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    b = r["before"]
    lines = [f"| (before) | — | — | {b['listed']} | {b['sub_keys']} | {b['pending']} | — |"]
    for c in r["cases"]:
        lines.append(
            f"| {c['format']} | {c['how']} | {c['bytes'] / 2**20:.1f} MB | {c['listed']} | "
            f"{c['sub_keys']} | {c['pending']} | as before |"
        )
    a = r["after"]
    lines.append(
        f"| (after the reaper's window) | — | — | {a['listed']} | {a['sub_keys']} | "
        f"{a['pending']} | as before |"
    )
    rp = r["replay"]
    tail = (
        f"\n\nThe interrupted Idempotency-Key then submits the whole body: {rp.get('status')}, "
        f"replayed {rp.get('replayed')}, job {rp.get('final')} (expected 202, False, "
        f"succeeded). Unhandled errors the API logged for the interrupted uploads: "
        f"{r['unhandled_errors_logged']} (expected 0"
        + (
            "; a client gone mid-upload surfaces as starlette's ClientDisconnect, logged "
            "with a traceback as an internal error)."
            if r["unhandled_errors_logged"]
            else ")."
        )
    )
    return head + "\n".join(lines) + tail


def report_e(r: dict[str, Any]) -> str:
    head = (
        f"### (e) Soak\n\n{r['count']} submissions at 1/s for {r['minutes']:g} min (N = 2000, "
        f"B = 100, a submitter key, rate limit on with a 5 s window), one worker of 2 children; "
        f"`raw_retention_s` = {r['retention_s']} s. RSS from the first minute on (or the "
        "first tenth of a shorter run) to the end.\n"
    )
    f, la, mx, g = r["rss_first"], r["rss_last"], r["rss_max"], r["rss_growth"]
    rows = [
        row(
            "API RSS first → last (max)",
            f"{f['api'] / 2**20:.0f} → {la['api'] / 2**20:.0f} MB ({mx['api'] / 2**20:.0f})",
            "flat",
        ),
        row("  growth", mb(g["api"]), "≈ 0"),
        row(
            "workers RSS (masters + children) first → last",
            f"{f['workers'] / 2**20:.0f} → {la['workers'] / 2**20:.0f} MB",
            "flat",
        ),
        row("  growth", mb(g["workers"]), "≈ 0"),
        row("Redis used memory growth", mb(g["redis_used"]), "the kept results"),
        row("jobs over the bound", f"{r['over_bound']} (bound {r['bound_s']:.0f} s)", "0"),
        row("job time p50 / max", f"{r['job_s_p50']:.2f} / {r['job_s_max']:.2f} s", "—"),
        *outcome_rows(r),
    ]
    cb, ce, ca = r["census_before"], r["census_end"], r["census_after"]
    kinds = sorted(set(cb) | set(ce) | set(ca))
    census = [
        "| keys | before | at the end | after retention | expected after retention |",
        "|---|---|---|---|---|",
    ]
    expect = {
        "sub": "1 per submission (kept)",
        "sub:result": "1 per submission (kept)",
        "sub:curves": "1 per submission (kept)",
        "sub:arrays": "0 (expired)",
        "sub:hb": "0",
        "rate": "0 (expired with the window)",
        "idem": f"1 per submission, expiring after 24 h ({r['idem_without_ttl']} without TTL)",
        "celery": "as before",
        "other": "as before + the key's indexes",
    }
    for k in kinds:
        census.append(
            f"| {k} | {cb.get(k, 0)} | {ce.get(k, 0)} | {ca.get(k, 0)} | {expect.get(k, '—')} |"
        )
    new = ", ".join(r["other_new"]) or "none"
    return (
        head
        + "\n"
        + table(rows)
        + "\n\nRedis keys by kind:\n\n"
        + "\n".join(census)
        + f"\n\nNew keys of kind other: {new}."
    )


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--only", default=",".join(PARTS), help="parts to run, e.g. a,b")
    parser.add_argument("--soak-minutes", type=float, default=30.0, help="length of (e)")
    parser.add_argument("--retention", type=int, default=30, help="raw_retention_s in (e)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill schedule")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    only = [p for p in args.only.split(",") if p]
    unknown = set(only) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {','.join(PARTS)}")
    q = args.quick
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.monotonic()
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="uqeval-reliability-") as tmp:
        base = Path(tmp)
        if "a" in only:
            print("(a) chaos ...", flush=True)
            res["a"] = R.chaos(
                base / "a",
                count=40 if q else 200,
                kills=5 if q else 20,
                # The 200 jobs drain in well under a minute on 2 cores: kills every 0.5-2 s,
                # so that the draw holds whole-worker kills too, not only pool children.
                interval_s=(1.0, 3.0) if q else (0.5, 2.0),
                seed=args.seed,
            )
        if "b" in only:
            print("(b) Redis killed ...", flush=True)
            count, kills = (40, 1) if q else (120, 2)
            res["b"] = R.redis_kill(base / "b", count=count, kills=kills, seed=args.seed + 1)
            print("(b) control, persistence off ...", flush=True)
            res["b_control"] = R.redis_kill(
                base / "b-control",
                appendonly=False,
                count=count,
                kills=kills,
                seed=args.seed + 1,
                wait_s=60.0,
            )
        if "c" in only:
            print("(c) SIGTERM ...", flush=True)
            res["c"] = R.sigterm(base / "c", count=40 if q else 120, seed=args.seed + 2)
        if "d" in only:
            print("(d) killed mid-upload ...", flush=True)
            res["d"] = R.upload(base / "d", n=250_000 if q else 1_000_000)
        if "e" in only:
            print(f"(e) soak, {args.soak_minutes:g} min ...", flush=True)
            res["e"] = R.soak(base / "e", minutes=args.soak_minutes, retention_s=args.retention)
    minutes = (time.monotonic() - t0) / 60
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=str))
    parts = []
    if "a" in res:
        parts.append(report_a(res["a"]))
    if "b" in res:
        parts.append(report_b(res["b"], res.get("b_control")))
    if "c" in res:
        parts.append(report_c(res["c"]))
    if "d" in res:
        parts.append(report_d(res["d"]))
    if "e" in res:
        parts.append(report_e(res["e"]))
    intro = (
        f"Written by `python benchmarks/reliability.py{' --quick' if q else ''} "
        f"--only {','.join(only)} --soak-minutes {args.soak_minutes:g}` on {started} "
        f"({minutes:.0f} min; {machine()}). Every process on 127.0.0.1; the harness kills "
        "and restarts them itself; outcomes read from Redis directly. Lost, duplicated and "
        "wrong are defined in the script's docstring. The CI short forms are "
        "tests/reliability/test_chaos.py."
    )
    body = intro + "\n\n" + "\n\n".join(parts)
    print(body)
    if not args.no_write:
        write_section("Reliability", body)


if __name__ == "__main__":
    main()
