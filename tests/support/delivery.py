"""make's delivery targets (deploy, dist, publish) run against fake gcloud, docker, twine and
curl on PATH (tests/unit/tools/delivery_bin): their environment, the calls they logged."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

from sandbox.paths import REPO

FAKES = REPO / "tests" / "unit" / "tools" / "delivery_bin"
PREFIX = "gs://us-central1-fake-env-bucket"
RSYNC_FLAGS = ["--recursive", "--delete-unmatched-destination-objects", "--exclude=.*__pycache__.*"]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
WHEEL_NAME = f"tpu_rl_airflow-{VERSION}-py3-none-any.whl"


def fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_GCLOUD_LOG": str(tmp_path / "gcloud.jsonl"),
        "FAKE_TWINE_LOG": str(tmp_path / "twine.jsonl"),
        "FAKE_CLOUD_STATE": str(tmp_path / "cloud-state.json"),
        "FAKE_DOCKER_LOG": str(tmp_path / "docker.jsonl"),
        "FAKE_CURL_LOG": str(tmp_path / "curl.log"),
    }
    make_variables = ("ENV", "LOCATION", "PROJECT", "REPOSITORY", "WHEEL", "DRY_RUN")
    for name in (*make_variables, "MAKEFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    env.update(extra)
    return env


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def make(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`make --no-print-directory <args>` in the project, with the fake tools first on PATH."""
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        env=fake_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
