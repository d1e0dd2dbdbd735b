"""Run a probe around one parse of a DAG file in a fresh interpreter, as a DAG processor's fork
parses it, and read the JSON the probe prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.conftest import AIRFLOW_ENV, REPO

DAG_FILES = ["tpu_rl_post_training.py", "tpu_rl_janitor.py"]


def probe_parse(probe: str, dag_file: str) -> Any:
    """`probe` (Python that runs the file at sys.argv[1] and prints JSON) on `dag_file`."""
    env = {
        **os.environ,
        **AIRFLOW_ENV,
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", probe, str(REPO / "dags" / dag_file)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
