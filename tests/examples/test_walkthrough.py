"""The real-data walkthrough (examples/walkthrough.py) end to end, as a user runs it: it starts
its own server, and must exit 0 with its checks passed and leave no process behind; and its
checks must fail when the over-confident model does not lose."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.stack import ROOT

SCRIPT = ROOT / "examples" / "walkthrough.py"


def load_walkthrough() -> ModuleType:
    spec = importlib.util.spec_from_file_location("walkthrough", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_walkthrough_runs_and_its_checks_pass(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    # The server's temporary data directory lands here, so that what it leaves is visible.
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    try:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        left = processes_mentioning(str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "[FAILED]" not in out
    # Progress while waiting, every model's job ending succeeded.
    assert len(re.findall(r"succeeded 100\.0%", out)) == 7, out
    for board in ("diabetes · mae", "diabetes · ece", "digits · accuracy", "digits · ece"):
        header = re.search(rf"Leaderboard {board} .*ranks current\)\n(.*\n)((?:\s+\d+ .*\n)+)", out)
        assert header, f"no leaderboard {board} with current ranks:\n{out}"
        rows = header.group(2).splitlines()
        assert len(rows) == (4 if board.startswith("diabetes") else 3)
        # every row: a bootstrap interval and a rank interval
        assert all(re.search(r"\[[\d.e-]+, [\d.e-]+\]\s+\d+–\d+$", r) for r in rows), rows
    for metric in ("mae", "accuracy"):
        assert re.search(rf"\[ok\] {metric}: paired difference exactly 0", out)
    assert len(re.findall(r"\[ok\] ece: paired interval .* excludes 0", out)) == 2
    assert len(re.findall(r"\[ok\] nll: paired interval .* excludes 0", out)) == 2
    assert len(re.findall(r"\[ok\] the server's \d+ values equal uqcore's here", out)) == 2
    assert out.rstrip().splitlines()[-1].startswith("OK: the over-confident models lose")
    # The server it started is stopped and its data directory removed.
    assert left == []
    assert not any(tmp_path.glob("uqeval-walkthrough-*"))


def board(*rows: tuple[str, float]) -> SimpleNamespace:
    return SimpleNamespace(entries=[SimpleNamespace(model_name=n, value=v) for n, v in rows])


def model(name: str, **values: float) -> SimpleNamespace:
    return SimpleNamespace(name=name, result=SimpleNamespace(value=values.get))


def test_checks_fail_when_the_overconfident_model_does_not_lose() -> None:
    """The script's checks (its exit code) are not a formality: a twin that is as well
    calibrated, or that differs in accuracy, fails them by name."""
    w = load_walkthrough()
    task = SimpleNamespace(
        models=[model("good", ece=0.02, nll=0.3), model("sharp", ece=0.02, nll=0.9)],
        calibrated="good",
        overconfident="sharp",
        accuracy_metric="accuracy",
        calibration_metrics=("ece", "nll"),
    )
    diffs = {
        "accuracy": {"diff": -0.01, "low": -0.02, "high": 0.0},
        "ece": {"diff": 0.0, "low": -0.01, "high": 0.01},
        "nll": {"diff": -0.6, "low": -0.8, "high": -0.4},
    }
    checks = w.Checks()
    checks.dataset = "toy"
    w.check_story(task, {"accuracy": board(("good", 0.93), ("sharp", 0.94))}, diffs, checks)
    assert [f.split(" (")[0] for f in checks.failures] == [
        "toy: accuracy: the same value on the leaderboard",
        "toy: accuracy: paired difference exactly 0, its interval [-0.02, +0] contains 0",
        "toy: ece: worse for the over-confident model",
        "toy: ece: paired interval of the difference [-0.01, +0.01] excludes 0",
    ]

    checks = w.Checks()
    diffs.update(accuracy={"diff": 0.0, "low": 0.0, "high": 0.0})
    diffs.update(ece={"diff": -0.03, "low": -0.05, "high": -0.01})
    task.models[1] = model("sharp", ece=0.05, nll=0.9)
    w.check_story(task, {"accuracy": board(("good", 0.93), ("sharp", 0.93))}, diffs, checks)
    assert checks.failures == []
