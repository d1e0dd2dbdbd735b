"""The wheel as `make dist` builds it, and an empty folder it alone is installed into (never
the shared virtualenv): for the wheel's tests and the process harness's Composer layout."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def _pip(*args: str, timeout_s: float) -> None:
    done = subprocess.run(
        [*PIP, *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def build_wheel(product: Path, scratch: Path, dist: Path) -> Path:
    """`product`'s wheel, built from a copy of its sources in `scratch` (no build/ left)."""
    shutil.copy(product / "pyproject.toml", scratch)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(product / "plugins" / "tpu_rl", scratch / "plugins" / "tpu_rl", ignore=ignore)
    _pip("wheel", "--no-deps", "-w", str(dist), str(scratch), timeout_s=600)
    return next(dist.glob("tpu_rl_airflow-*-py3-none-any.whl"))


def session_wheel(product: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`product`'s wheel (build_wheel), built once per test session however many xdist workers
    ask: the first builds it under the session's temporary root, which the workers' own
    folders are in (xdist/workermanage.py: a worker's basetemp is the session's / its name);
    the others wait for it and take it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    key = hashlib.sha256(str(product.resolve()).encode()).hexdigest()[:12]
    folder = root / f"tpu-rl-wheel-{key}"
    with FileLock(f"{folder}.lock"):
        built = sorted((folder / "dist").glob("tpu_rl_airflow-*-py3-none-any.whl"))
        if built:
            return built[0]
        shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
        (folder / "source").mkdir(parents=True)
        (folder / "dist").mkdir()
        return build_wheel(product, folder / "source", folder / "dist")


def install_wheel(wheel: Path, target: Path) -> Path:
    """`target` holding the wheel alone (its dependencies are the environment's)."""
    _pip("install", "--no-deps", "--target", str(target), str(wheel), timeout_s=300)
    return target
