"""Parsing a DAG file changes nothing of Airflow's: no class state set as a side effect of an
import (each parse is a fresh fork of the DAG processor, so such a write buys nothing lasting
and hides what the parse really costs; `make bench` measures that cost as Airflow pays it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import AIRFLOW_ENV, REPO

DAG_FILES = ["tpu_rl_post_training.py", "tpu_rl_janitor.py"]
BASE_OPERATOR_CHANGED_BY_PARSE = """
import json, runpy, sys
from airflow.sdk import BaseOperator
before = dict(vars(BaseOperator))
runpy.run_path(sys.argv[1])
after = vars(BaseOperator)
print(json.dumps(sorted(k for k in {*before, *after} if before.get(k) is not after.get(k))))
"""


@pytest.mark.parametrize("dag_file", DAG_FILES)
def test_parsing_a_dag_file_leaves_airflows_base_operator_as_it_was(dag_file):
    env = {
        **os.environ,
        **AIRFLOW_ENV,
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", BASE_OPERATOR_CHANGED_BY_PARSE, str(REPO / "dags" / dag_file)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
