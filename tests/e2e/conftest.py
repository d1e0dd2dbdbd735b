"""End-to-end runs need Airflow's metadata database: a fresh SQLite one per test session."""

from __future__ import annotations

import pytest

from tests.sandbox.harness import Sandbox


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def sandbox(airflow_db, tmp_path):
    with Sandbox(tmp_path).up() as box:
        yield box
