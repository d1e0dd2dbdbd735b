"""The wheel as `make dist` builds it, and an empty folder it alone is installed into (never
the shared virtualenv): for the wheel's tests and the process harness's Composer layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def install_wheel(wheel: Path, target: Path) -> Path:
    """`target` holding the wheel alone (its dependencies are the environment's)."""
    _pip("install", "--no-deps", "--target", str(target), str(wheel), timeout_s=300)
    return target
