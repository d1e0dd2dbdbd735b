"""The DAG tests that change run states need Airflow's metadata DB (SQLite, per test worker)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()
