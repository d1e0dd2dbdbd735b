"""Airflow's environment for a sandboxed run, set when this module is imported: Airflow reads its
configuration at import, so the tests' conftest and the tools import this first.

A throw-away home and this project's folders. Retries wait one second, not five minutes. The
Kubernetes provider's own API retries keep their production waits (1, 2, 4, 8 s): shortened, a
resubmission racing its predecessor's deletion under load failed where production waits.
"""

from __future__ import annotations

import os
import tempfile

from sandbox.paths import REPO

AIRFLOW_ENV = {
    "AIRFLOW_HOME": tempfile.mkdtemp(prefix="tpu-rl-airflow-home-"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY": "1",
}
os.environ.update(AIRFLOW_ENV)
