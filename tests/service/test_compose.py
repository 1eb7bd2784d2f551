"""The production files, checked for structure (no Docker engine runs here).

The compose file and the Dockerfile are parsed and held to what the service needs: Redis with
AOF (everysec) and no eviction on a volume, health checks, an API and scalable CPU workers,
a GPU worker with an NVIDIA device reservation and the ``gpu`` extra, commands that the
``uqeval`` CLI accepts, and environment variables that :class:`Settings` reads.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.settings import Settings
from service.store import Store
from tests.stack import Db, db_url
from uqeval.cli import command

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped)."""
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def flags(command: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, arg in enumerate(command):
        if arg.startswith("--") and i + 1 < len(command):
            out[arg] = str(command[i + 1])
    return out


def test_services_present(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"redis", "minio", "api", "worker-cpu", "worker-gpu"}


def test_redis_is_durable_and_never_evicts(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = [str(c) for c in redis["command"]]
    assert command[0] == "redis-server"
    f = flags(command)
    assert f["--appendonly"] == "yes"
    assert f["--appendfsync"] == "everysec"
    assert f["--maxmemory-policy"] == "noeviction"
    volume, target = redis["volumes"][0].split(":")[:2]
    assert target == "/data" and volume in compose["volumes"]
    assert "redis-cli" in redis["healthcheck"]["test"]


#: The services that store data (the others are the app's processes).
STORAGE = {"redis", "minio"}


def test_every_service_has_a_healthcheck_and_waits_for_redis(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert "healthcheck" in service, name
        if name not in STORAGE:
            assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
            assert service["depends_on"]["minio"]["condition"] == "service_healthy", name
            assert service["environment"]["REDIS_URL"] == "redis://redis:6379/0", name


def test_the_app_keeps_its_arrays_in_the_minio_bucket(compose: dict[str, Any]) -> None:
    minio = compose["services"]["minio"]
    assert any(v.endswith(":/data") for v in minio["volumes"])
    assert "mc mb --ignore-existing local/uqeval" in minio["command"][0]
    assert "local/uqeval" in " ".join(minio["healthcheck"]["test"])
    for name in ("api", "worker-cpu", "worker-gpu"):
        env = compose["services"][name]["environment"]
        assert env["UQEVAL_BLOB_URL"].startswith("s3://uqeval/"), name
        assert env["UQEVAL_BLOB_ENDPOINT_URL"] == "http://minio:9000", name
        # the app's credentials are those the server was started with
        assert env["AWS_ACCESS_KEY_ID"] == minio["environment"]["MINIO_ROOT_USER"], name
        assert env["AWS_SECRET_ACCESS_KEY"] == minio["environment"]["MINIO_ROOT_PASSWORD"], name


def seconds(duration: str) -> float:
    """A compose duration (``30s``, ``1m30s``, ``500ms``) in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", str(duration))
    assert parts and "".join(n + u for n, u in parts) == str(duration), duration
    return sum(float(n) * units[u] for n, u in parts)


def test_every_service_restarts_and_checks_its_health_in_bounded_time(
    compose: dict[str, Any],
) -> None:
    for name, service in compose["services"].items():
        # A process that exits (killed, out of memory, gave up on Redis) is started again.
        assert service["restart"] in ("unless-stopped", "always"), name
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert 0 < seconds(check["timeout"]) < seconds(check["interval"]) <= 60, name
        assert 1 <= int(check["retries"]) <= 30, name
        assert seconds(check.get("start_period", "0s")) <= 60, name
    for name in ("api", "worker-cpu", "worker-gpu"):
        assert compose["services"][name]["depends_on"] == {
            "redis": {"condition": "service_healthy"},
            "minio": {"condition": "service_healthy"},
        }, name


def test_the_api_checks_liveness_not_readiness(compose: dict[str, Any]) -> None:
    """/readyz is 503 while Redis or every worker is down; marking the API unhealthy then
    would not help (restarting it mends neither), so its check is /healthz."""
    test = " ".join(compose["services"]["api"]["healthcheck"]["test"])
    assert "/healthz" in test and "/readyz" not in test


def test_the_worker_check_reads_the_heartbeat(
    compose: dict[str, Any], settings: Settings, tmp_path: Path
) -> None:
    """The workers' check, run as the container would (``CMD``): unhealthy until a worker
    named ``celery@<this host>`` announced itself in Redis, healthy after (a busy solo worker
    keeps announcing itself, while it could not answer a Celery ping)."""
    for name in ("worker-cpu", "worker-gpu"):
        test = compose["services"][name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"], name
    code = compose["services"]["worker-cpu"]["healthcheck"]["test"][3]
    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.COMPOSE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.update(REDIS_URL=url, PYTHONPATH=str(ROOT))

    def check() -> int:
        return subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, timeout=60, check=False
        ).returncode

    store = Store.from_url(url, settings)
    store.client.flushdb()
    try:
        assert check() == 1
        store.register_worker(f"celery@{socket.gethostname()}", {"pid": 1}, 60.0)
        assert check() == 0
    finally:
        store.client.flushdb()
        store.close()


def parse(args: list[str]) -> tuple[str, dict[str, Any]]:
    """The subcommand and its options as the ``uqeval`` command line parses ``args`` (a usage
    error, such as an unknown flag, raises)."""
    sub = command().commands[args[0]]
    return args[0], sub.make_context(args[0], list(args[1:])).params


def test_commands_are_accepted_by_the_cli(compose: dict[str, Any]) -> None:
    for name in ("api", "worker-cpu", "worker-gpu"):
        cmd = compose["services"][name]["command"]
        assert cmd[0] == "uqeval", name
        assert parse(cmd[1:])[0] == ("api" if name == "api" else "worker")
    assert parse(compose["services"]["worker-cpu"]["command"][1:])[1]["queues"] == "cpu"
    gpu_queues = parse(compose["services"]["worker-gpu"]["command"][1:])[1]["queues"]
    assert "gpu" in gpu_queues.split(",")


def test_environment_names_are_settings(compose: dict[str, Any]) -> None:
    known = {"REDIS_URL"} | {f"UQEVAL_{f.upper()}" for f in Settings.model_fields}
    known |= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}  # boto3's
    for name, service in compose["services"].items():
        if name in STORAGE:
            continue
        for var in service.get("environment", {}):
            assert var in known, f"{name}: {var} is not a setting"
    env = compose["services"]["worker-cpu"]["environment"]
    assert int(env["UQEVAL_VISIBILITY_TIMEOUT_S"]) > int(env["UQEVAL_JOB_HARD_TIME_LIMIT_S"])


def test_cpu_workers_scale(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker-cpu"]
    assert "container_name" not in worker and "ports" not in worker
    assert worker["environment"]["UQEVAL_BACKEND"] == "numpy"


def test_gpu_worker_reserves_an_nvidia_device_and_installs_the_gpu_extra(
    compose: dict[str, Any],
) -> None:
    gpu = compose["services"]["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert "gpu" in gpu["build"]["args"]["EXTRAS"].split(",")
    assert gpu["environment"]["UQEVAL_BACKEND"] == "auto"
    assert gpu["image"] != compose["services"]["api"]["image"]


def test_api_publishes_its_port(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    assert any(str(p).endswith(":8000") for p in api["ports"])
    assert api["environment"]["UQEVAL_HOST"] == "0.0.0.0"


def test_dockerfile_is_slim_non_root_with_both_entry_points(dockerfile: list[str]) -> None:
    froms = [ln for ln in dockerfile if ln.startswith("FROM ")]
    assert froms and all("${PYTHON_IMAGE}" in ln for ln in froms)
    default_image = next(ln for ln in dockerfile if ln.startswith("ARG PYTHON_IMAGE="))
    assert default_image.endswith("-slim")
    users = [ln for ln in dockerfile if ln.startswith("USER ")]
    assert users and not users[-1].split()[1].startswith(("root", "0"))
    cmd = next(ln for ln in reversed(dockerfile) if ln.startswith("CMD "))
    assert json.loads(cmd[4:]) == ["uqeval", "api"]  # exec form
    assert any("HEALTHCHECK" in ln and "/healthz" in ln for ln in dockerfile)
    copied = {ln.split()[1] for ln in dockerfile if ln.startswith("COPY ") and "--from" not in ln}
    for package in ("uqcore", "service", "worker"):
        assert package in copied, package


def test_dockerignore_keeps_local_state_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".uqeval", "tests"} <= ignored


def test_readme_documents_every_setting() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Settings", 1)[1]
    for name in Settings.model_fields:
        var = "REDIS_URL" if name == "redis_url" else f"UQEVAL_{name.upper()}"
        assert f"| `{var}` |" in table, f"README's settings table lacks {var}"
