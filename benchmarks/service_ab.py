"""The service's hot read paths of two commits, side by side in one run.

A change that moves code around (a reshaping, a refactor of the store or the routes) must not
make the reads users poll slower. This benchmark runs the working tree and another commit
(``--base REV``, checked out in a temporary git worktree) as two ``uqeval serve --workers 1``
stacks on loopback at the same time, gives each the same data, and then, in alternating rounds
(old, new, new, old, ...: drift of the shared machine's load hits both alike), measures:

* the route's work of a result read (``service.api.routes.submissions.read``: what the async
  route runs in its one trip through the thread pool) and of a cached leaderboard page
  (``service.api.routes.leaderboards.serve``), each called ``--calls`` times in a separate
  process that imports that commit's code, against its stack's Redis, unloaded: time per call
  and Redis round trips per call;
* 50 minimal closed-loop clients reading the finished submission (N = 10^4, every metric) and
  the leaderboard's first page (``--entries`` submissions) for ``--seconds`` each: p50, p99,
  reads per second, errors.

The figures are medians over ``--rounds`` rounds; the ratio is new / old (below 1: the new
commit is faster). Run from the repository root:

    python benchmarks/service_ab.py --base <commit>          # about 5 minutes
    python benchmarks/service_ab.py --base <commit> --quick  # a smoke run

Writes the "Service: read paths, two commits side by side" section of ``benchmarks/RESULTS.md``
(``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECTION = "Service: read paths, two commits side by side"


# ------------------------------------------------------------------------------------------
# the probe: runs in a child process on one commit's code (PYTHONPATH = that tree)
# ------------------------------------------------------------------------------------------


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Per-call time and Redis round trips of the two routes' work, on the code this process
    imports (``service`` from ``PYTHONPATH``)."""
    from types import SimpleNamespace

    import redis

    from service.api.routes.leaderboards import serve
    from service.api.routes.submissions import read
    from service.settings import Settings
    from service.store import Store

    sent = [0]

    class Counting(redis.Connection):
        def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            sent[0] += 1
            super().send_packed_command(*args, **kwargs)

    pool = redis.ConnectionPool.from_url(spec["redis_url"])
    pool.connection_class = Counting
    store = Store(redis.Redis(connection_pool=pool))
    state = SimpleNamespace(store=store, settings=Settings(rate_limit=0), admin_key_ready=True)
    request: Any = SimpleNamespace(app=SimpleNamespace(state=state))
    token, calls = spec["token"], spec["calls"]
    calls_of = {
        "result read": lambda: read(request, token, spec["sub_id"]).body,
        "leaderboard page (cached)": lambda: (
            serve(request, token, spec["bench_id"], None, None, 0, 50, "json").body
        ),
    }
    out: dict[str, Any] = {"file": sys.modules["service.store"].__file__}
    for name, call in calls_of.items():
        body = call()  # warm: the key's id learnt, the page cached
        sent[0] = 0
        # Five batches: the fastest is the route's own cost (the others carry what the shared
        # machine did meanwhile), the median what a read costs here now.
        batch, per_batch = max(calls // 5, 1), []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(batch):
                call()
            per_batch.append((time.perf_counter() - t0) / batch)
        out[name] = {
            "per_call": min(per_batch),
            "per_call_median": sorted(per_batch)[2],
            "trips": sent[0] / (5 * batch),
            "size": len(body),
        }
    store.close()
    return out


# ------------------------------------------------------------------------------------------
# the parent: two stacks, alternated rounds, the report
# ------------------------------------------------------------------------------------------


def _run_probe(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--probe", json.dumps(spec)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the probe failed on {tree}:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    if not str(result["file"]).startswith(str(tree)):
        raise RuntimeError(f"the probe imported {result['file']}, not the code of {tree}")
    return result


def _cli_module(tree: Path) -> str:
    """The command-line module of a checkout (it moved from ``service.cli`` to ``uqeval``)."""
    return "uqeval" if (tree / "uqeval" / "__main__.py").exists() else "service.cli"


def _commit(tree: Path) -> str:
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=tree,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return rev + (" + uncommitted changes" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--base", help="the other commit (the old side)")
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=None, help="reader phase (default 10)")
    parser.add_argument("--calls", type=int, default=None, help="probe calls (default 2000)")
    parser.add_argument("--entries", type=int, default=None, help="board size (default 200)")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    if args.probe:
        # This file's folder (first on sys.path) holds benchmarks/service.py, which would
        # shadow the package: the tree under test (the working directory) goes first.
        sys.path.insert(0, os.getcwd())
        print(json.dumps(probe(json.loads(args.probe))))
        return
    if not args.base:
        parser.error("--base REV is required")

    sys.path.insert(0, str(ROOT))
    from benchmarks._results import write_section
    from benchmarks.service import (
        Stack,
        leaderboard,
        leaderboard_reads,
        loadavg,
        machine,
        pct,
        reads,
        redis_url,
    )

    rounds = args.rounds or (1 if args.quick else 3)
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    calls = args.calls or (300 if args.quick else 2000)
    entries = args.entries or (20 if args.quick else 200)
    started = datetime.now().strftime("%Y-%m-%d")
    t_start = time.perf_counter()
    load_start = loadavg()

    with tempfile.TemporaryDirectory(prefix="uqeval-ab-") as tmp:
        old_tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(old_tree), args.base],
            cwd=ROOT,
            check=True,
        )
        trees = {"old": old_tree, "new": ROOT}
        commits = {side: _commit(tree) for side, tree in trees.items()}
        stacks: dict[str, Any] = {}
        samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}

        def add(side: str, name: str, value: float) -> None:
            samples[side].setdefault(name, []).append(value)

        try:
            setup: dict[str, Any] = {}
            for i, (side, tree) in enumerate(trees.items()):
                st = Stack(1, Path(tmp), index=i, root=tree, module=_cli_module(tree))
                stacks[side] = st
                print(f"start {side} ({commits[side]}) ...", flush=True)
                st.start()
                setup[side] = {"board": leaderboard(st, entries, 1000, 100)}
            for r in range(rounds):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                for side in order:
                    st = stacks[side]
                    print(f"round {r + 1}: {side} (load {loadavg()})", flush=True)
                    sub = reads(st, 50, seconds, 10_000, raw=True)
                    add(side, "result read, 50 clients: p50", pct(sub["lat"], 50))
                    add(side, "result read, 50 clients: p99", pct(sub["lat"], 99))
                    add(side, "result read, 50 clients: reads/s", len(sub["lat"]) / sub["elapsed"])
                    add(side, "errors", float(len(sub["errors"])))
                    board = setup[side]["board"]
                    lb = leaderboard_reads(st, board["path"], 50, seconds)
                    add(side, "leaderboard page, 50 clients: p50", pct(lb["lat"], 50))
                    add(side, "leaderboard page, 50 clients: p99", pct(lb["lat"], 99))
                    add(
                        side,
                        "leaderboard page, 50 clients: reads/s",
                        len(lb["lat"]) / lb["elapsed"],
                    )
                    add(side, "errors", float(len(lb["errors"])))
                    token = st.key["Authorization"].removeprefix("Bearer ")
                    # The submission the readers polled (reads() posts one per phase): the
                    # newest of the stack's key.
                    sub_id = _newest_submission(st)
                    spec = {
                        "redis_url": redis_url(st),
                        "token": token,
                        "sub_id": sub_id,
                        "bench_id": board["bench_id"],
                        "calls": calls,
                    }
                    pr = _run_probe(trees[side], spec)
                    for what in ("result read", "leaderboard page (cached)"):
                        add(side, f"{what}: route's work per call, best", pr[what]["per_call"])
                        add(
                            side,
                            f"{what}: route's work per call, median",
                            pr[what]["per_call_median"],
                        )
                        add(side, f"{what}: Redis round trips per call", pr[what]["trips"])
        finally:
            for st in stacks.values():
                st.stop()
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT, check=False
            )
    text = report(samples, commits, args, rounds, seconds, calls, entries)
    text = (
        f"Run: `python benchmarks/service_ab.py {' '.join(sys.argv[1:])}` on {started}, {(time.perf_counter() - t_start) / 60:.1f} min. Machine: {machine()}; "
        f"1-minute load average {load_start} at the start, {loadavg()} at the end.\n\n" + text
    )
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


def _newest_submission(stack: Any) -> str:
    import httpx

    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        r = client.get("/v1/submissions", params={"limit": 1}, headers=stack.key)
        r.raise_for_status()
        doc = r.json()
    items = doc.get("items", doc.get("submissions", []))
    return str(items[0]["id"])


def _fmt(name: str, value: float) -> str:
    if "reads/s" in name or "round trips" in name or name == "errors":
        return f"{value:.0f}" if "reads/s" in name or name == "errors" else f"{value:.2f}"
    return f"{value * 1e3:.3f} ms" if value < 0.01 else f"{value * 1e3:.1f} ms"


def report(
    samples: dict[str, dict[str, list[float]]],
    commits: dict[str, str],
    args: argparse.Namespace,
    rounds: int,
    seconds: float,
    calls: int,
    entries: int,
) -> str:
    lines = [
        f"Old: `{commits['old']}`; new: `{commits['new']}`. Both stacks are `uqeval serve "
        "--workers 1` (rate limit off: the readers share one key) on 127.0.0.1, running at the "
        f"same time; {rounds} rounds, the sides alternated (old, new, new, old, ...). Each round: "
        f"50 minimal closed-loop clients read the finished N = 10^4 submission (every metric) "
        f"for {seconds:g} s, then the first page (50 rows) of a leaderboard of {entries} "
        f"submissions for {seconds:g} s; then a separate process on that side's code calls the "
        f"two routes' work {calls} times against its stack's Redis (unloaded), in 5 batches: the "
        "fastest batch's time per call ('best': the code's own cost) and the median batch's. "
        "Medians over the rounds; ratio = new / old (below 1: the new code is faster; the 50-client figures of "
        "one side swing by 10-20 % between rounds on this shared 2-core machine).",
        "",
        "| quantity | old | new | new / old |",
        "|---|---:|---:|---:|",
    ]
    for name in samples["new"]:
        if name == "errors":
            continue
        old = statistics.median(samples["old"][name])
        new = statistics.median(samples["new"][name])
        ratio = new / old if old else float("nan")
        lines.append(f"| {name} | {_fmt(name, old)} | {_fmt(name, new)} | {ratio:.2f} |")
    errs = {side: int(sum(samples[side].get("errors", []))) for side in ("old", "new")}
    lines += ["", f"Errors of the readers: old {errs['old']}, new {errs['new']}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
