"""End-to-end runs need Airflow's metadata database: a fresh SQLite one per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()
