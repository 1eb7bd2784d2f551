"""The command line's exit codes, each caused for real against a live server, and the API key
kept out of everything it prints."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from service.redis_server import free_port
from tests.stack import ROOT
from tests.uqeval.cli_invoke import cli, cli_process, gaussian_data, loads, write_csv
from tests.uqeval.conftest import Live
from uqeval.cli import EXIT_CODES


def one_line(stderr: str) -> str:
    """The error line (the last line of stderr), checked to be one ``uqeval: error:`` line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("uqeval: error: "), stderr
    return lines[-1]


def test_exit_codes_are_documented() -> None:
    got = cli("--help")
    assert got.exit_code == 0
    for code in (0, 1, 2, 3, 4, 5, 6, 7):
        assert f"{code} {EXIT_CODES[code].split(' (')[0]}" in " ".join(got.stdout.split())


def test_exit_2_bad_input(live_server: Live, tmp_path: Path) -> None:
    key = live_server.new_key("bad")
    url = live_server.url
    got = cli("submit", str(tmp_path / "missing.npz"), url=url, key=key)
    assert got.exit_code == 2 and "missing.npz: no such file" in one_line(got.stderr)

    data = gaussian_data(n=5, seed=0)
    text = {"mean": data["mean"].astype(str), "std": data["std"].astype(str), "y": data["y"]}
    text["std"][3] = "abc"
    got = cli("submit", str(write_csv(tmp_path / "bad.csv", text)), url=url, key=key)
    assert got.exit_code == 2
    assert "column 'std' must hold numbers; found 'abc' at row 3 (field std[3])" in one_line(
        got.stderr
    )

    # Accepted by the file reader, refused by the server (422): its message, field and index.
    data["std"][2] = -1.0
    path = tmp_path / "neg.npz"
    np.savez(path, **data)
    got = cli("submit", str(path), url=url, key=key)
    assert got.exit_code == 2
    line = one_line(got.stderr)
    assert "std" in line and "[2]" in line, line

    got = cli("submit", str(path), "--no-such-flag", url=url, key=key)  # usage error
    assert got.exit_code == 2 and "--no-such-flag" in got.stderr


def test_exit_3_wrong_key_and_4_unknown_id(live_server: Live) -> None:
    got = cli("status", "sub_0123", url=live_server.url, key="not-a-valid-key")
    assert got.exit_code == 3, got.stderr
    one_line(got.stderr)
    got = cli("status", "sub_0123", url=live_server.url)  # no key at all
    assert got.exit_code == 3
    key = live_server.new_key("nf")
    for args in (("status", "sub_0123"), ("results", "sub_0123"), ("leaderboard", "bench_0")):
        got = cli(*args, url=live_server.url, key=key)
        assert got.exit_code == 4, (args, got.stderr)
        one_line(got.stderr)


def test_exit_5_a_job_cancelled_while_submit_waits(live_server: Live, tmp_path: Path) -> None:
    """``submit --wait`` (a real subprocess) follows a job that another command cancels: it
    ends with exit 5; ``results`` of that job says the same."""
    key = live_server.new_key("cancel")
    rng = np.random.default_rng(7)
    n = 4000
    mean = rng.normal(size=n)
    path = tmp_path / "slow.npz"
    np.savez(path, mean=mean, std=np.ones(n), y=mean + rng.normal(size=n))
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.update(
        PYTHONPATH=str(ROOT), UQEVAL_URL=live_server.url, UQEVAL_KEY=key, UQEVAL_CONFIG=os.devnull
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uqeval",
            "submit",
            str(path),
            "--stability",
            "--repeats",
            "1000",
            "--bootstrap",
            "5000",
            "--wait",
            "--json",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        items: list[dict[str, str]] = []
        while not items:
            assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
            items = loads(cli("list", "--json", url=live_server.url, key=key).stdout)["items"]
            time.sleep(0.05)
        sub_id = items[0]["id"]
        got = cli("cancel", sub_id, url=live_server.url, key=key)
        assert got.exit_code == 0, got.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 5, err
    assert out == ""
    assert "cancelled" in one_line(err) and key not in err
    got = cli("results", sub_id, url=live_server.url, key=key)
    assert got.exit_code == 5 and "cancelled" in one_line(got.stderr)


def test_exit_6_server_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    got = cli_process("--retries", "0", "status", "sub_0123", url=url, key="k-123456")
    assert got.returncode == 6, got.stderr
    assert got.stdout == ""
    one_line(got.stderr)


def test_exit_7_quota_spent(live_server: Live, tmp_path: Path) -> None:
    """A benchmark whose quota allows one submission per team: the second is refused (429)."""
    data = gaussian_data(n=10, seed=8)
    np.save(tmp_path / "y.npy", data["y"])
    spec = tmp_path / "bench.json"
    spec.write_text('{"name": "quota-1", "primary_metric": "mae", "quota": {"total": 1}}')
    got = cli(
        "benchmarks",
        "create",
        str(spec),
        "--targets",
        str(tmp_path / "y.npy"),
        url=live_server.url,
        key=live_server.admin_key,
    )
    assert got.exit_code == 0, got.stderr
    bench = got.stdout.strip()
    path = tmp_path / "p.npz"
    np.savez(path, mean=data["mean"], std=data["std"])
    key = live_server.new_key("quota")
    args = ("--retries", "0", "submit", str(path), "--benchmark", bench)
    assert cli(*args, url=live_server.url, key=key).exit_code == 0
    got = cli(*args, url=live_server.url, key=key)
    assert got.exit_code == 7, got.stderr
    assert "quota" in one_line(got.stderr)


def test_the_key_is_never_shown(live_server: Live, tmp_path: Path) -> None:
    """Whatever the command and however it ends, the key (from the environment, the option or
    the config file) is nowhere in stdout or stderr."""
    key = live_server.new_key("secret")
    wrong = "uqe-wrong-" + "x" * 20
    path = tmp_path / "p.npz"
    np.savez(path, **gaussian_data(n=8, seed=9))
    config = tmp_path / "config.toml"
    config.write_text(f'url = "{live_server.url}"\nkey = "{key}"\n')
    runs = [
        cli("--help", key=key),
        cli("--key", key, "--help"),
        cli("submit", "--help", key=key),
        cli("--key", key, "--url", live_server.url, "status", "sub_none"),  # 4
        cli("status", "sub_none", url=live_server.url, key=key),  # 4
        cli("submit", str(path), "--metrics", "mae,nope", url=live_server.url, key=key),  # 2
        cli(
            "submit",
            str(path),
            "--metrics",
            "mae",
            "--wait",
            "--json",
            url=live_server.url,
            key=key,
        ),  # 0
        cli("list", config=config),  # 0: url and key from the config file
        cli("--key", wrong, "--url", live_server.url, "list"),  # 3
        cli("--retries", "0", "--url", f"http://127.0.0.1:{free_port()}", "list", key=key),  # 6
    ]
    assert [r.exit_code for r in runs] == [0, 0, 0, 4, 4, 2, 0, 0, 3, 6], [r.stderr for r in runs]
    for r in runs:
        assert key not in r.stdout + r.stderr
        assert wrong not in r.stdout + r.stderr
