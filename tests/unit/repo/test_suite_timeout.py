"""The suite's per-test timeout still ends a test that hangs after a run's timed task."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

HUNG_AFTER_A_TIMED_TASK = """
import time

import pytest
from airflow.sdk.execution_time.timeout import timeout


@pytest.mark.timeout(2)
def test_hangs():
    with timeout(60):  # what dag.test() enters around a task that has an execution_timeout
        pass
    time.sleep(30)  # a run waiting for pods that never come
"""


def test_a_test_hung_after_airflows_own_timeout_is_ended(tmp_path):
    hung = tmp_path / "test_hung.py"
    hung.write_text(HUNG_AFTER_A_TIMED_TASK)
    config = ["-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO)]
    plugins_off = ["-p", "no:cacheprovider", "-p", "no:xdist"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *config, *plugins_off, str(hung)],
        capture_output=True,
        text=True,
        timeout=25,
        check=False,
    )
    assert done.returncode != 0 and "Timeout" in done.stdout + done.stderr, done.stdout
