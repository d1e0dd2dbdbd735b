"""DAG tests run Airflow on a throw-away home and SQLite database."""

from __future__ import annotations

import os
import tempfile

_home = tempfile.mkdtemp(prefix="tpu-rl-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _home)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
