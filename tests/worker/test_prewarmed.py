"""The pre-warmed interpreter that the suite's workers and API servers fork from
(:mod:`tests.zygote`): a forked child is ``python -m <module>`` with the requested arguments,
environment, working directory, log and session, has the third-party imports already done and
the project's own still to do; its exit code and signals read as :class:`subprocess.Popen`'s;
an environment that could change what was imported gets a fresh interpreter; nothing forked
outlives the interpreter it forked from."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.settings import Settings
from tests import zygote
from tests.stack import ROOT, settings_env

PROBE = "tests.worker.prewarmed_probe"


@pytest.fixture(scope="module")
def prewarmed() -> Iterator[zygote.Zygote]:
    z = zygote.Zygote()
    try:
        yield z
    finally:
        z.close()


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_forked_child_is_the_module_run_as_main(prewarmed: zygote.Zygote, tmp_path: Path) -> None:
    out, log = tmp_path / "seen.json", tmp_path / "child.log"
    log.write_text("before\n")
    proc = prewarmed.spawn(
        PROBE, [str(out), "3"], cwd=tmp_path, env=_env(UQEVAL_PROBE="x"), log=log
    )
    assert proc.wait(timeout=60) == 3
    assert proc.returncode == 3 and proc.poll() == 3
    seen = json.loads(out.read_text())
    assert seen["name"] == "__main__"
    assert seen["argv"][1:] == [str(out), "3"]
    assert seen["argv"][0].endswith("prewarmed_probe.py")
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == _env(UQEVAL_PROBE="x")  # exactly the requested environment
    assert seen["session_leader"] and seen["stdin"] == os.devnull
    # third-party packages come imported; the project's modules, which read settings at
    # import, are the child's own to import
    assert seen["loaded"] == {"numpy": True, "celery": True, "service.settings": False}
    # stdout and stderr appended to the log
    assert log.read_text().splitlines() == ["before", "to stdout", "to stderr"]


def test_signals_and_timeouts_read_as_popen(prewarmed: zygote.Zygote, tmp_path: Path) -> None:
    proc = prewarmed.spawn(
        PROBE, [str(tmp_path / "o.json"), "0", "60"], cwd=ROOT, env=_env(), log=tmp_path / "l"
    )
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # its own process group, as start_new_session gives
    assert proc.wait(timeout=30) == -signal.SIGKILL
    other = prewarmed.spawn(
        PROBE, [str(tmp_path / "p.json"), "0", "60"], cwd=ROOT, env=_env(), log=tmp_path / "l"
    )
    other.terminate()
    assert other.wait(timeout=30) == -signal.SIGTERM
    other.kill()  # on an ended process, as Popen's: nothing happens


def test_an_environment_read_at_import_gets_a_fresh_interpreter(tmp_path: Path) -> None:
    if zygote.shared() is None:
        pytest.fail("the pre-warmed interpreter did not start")
    args = [sys.executable, "-m", PROBE, str(tmp_path / "seen.json"), "0"]
    forked = zygote.popen(args, cwd=ROOT, env=_env(UQEVAL_X="1"), log=tmp_path / "a")
    assert isinstance(forked, zygote.ForkedProcess)
    assert forked.wait(timeout=60) == 0
    assert json.loads((tmp_path / "seen.json").read_text())["loaded"]["numpy"]
    for changed in ({"NUMBA_NUM_THREADS": "1"}, {"UQCORE_JIT": "0"}, {"OMP_NUM_THREADS": "1"}):
        fresh = zygote.popen(args, cwd=ROOT, env=_env(**changed), log=tmp_path / "b")
        assert isinstance(fresh, subprocess.Popen), changed
        assert fresh.wait(timeout=60) == 0
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert not seen["loaded"]["numpy"] and seen["session_leader"]
    # a variable removed counts as changed as well
    env = _env()
    env.pop("HOME", None)
    if "HOME" in os.environ:
        assert isinstance(
            zygote.popen(args, cwd=ROOT, env=env, log=tmp_path / "c"), subprocess.Popen
        )


def test_nothing_forked_outlives_the_interpreter(tmp_path: Path) -> None:
    """Children that run, and children forked just before the end (which may not have made
    their session yet: CI once found one alive after it)."""
    z = zygote.Zygote()
    procs = []
    try:
        for i in range(6):
            args = [str(tmp_path / f"o{i}.json"), "0", "60"]
            procs.append(z.spawn(PROBE, args, cwd=ROOT, env=_env(), log=tmp_path / f"l{i}"))
        assert _alive(procs[0].pid)
    finally:
        z.close()
    assert [p.pid for p in procs if _alive(p.pid)] == []


def test_the_suites_workers_and_servers_are_forked(
    session_settings: Settings, tmp_path: Path
) -> None:
    # What the metric tests import in this process first (each sets variables of its own in
    # the environment); the environment the stack gives its workers and API servers must
    # still be one the pre-warmed interpreter accepts, else every start is a fresh one again.
    import sklearn  # noqa: F401

    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401
    prewarmed = zygote.shared()
    assert prewarmed is not None, "the pre-warmed interpreter did not start"
    args = [sys.executable, "-m", PROBE, str(tmp_path / "seen.json"), "0"]
    proc = zygote.popen(args, cwd=ROOT, env=settings_env(session_settings), log=tmp_path / "l")
    assert isinstance(proc, zygote.ForkedProcess), prewarmed.refused
    assert proc.wait(timeout=60) == 0
