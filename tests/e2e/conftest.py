"""End-to-end runs need Airflow's metadata database: a fresh SQLite one per test session."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture(scope="session")
def e2e_report():
    """Entries of `make e2e REPORT=<file>`, written when the session ends."""
    entries: list[dict] = []
    yield entries
    target = os.environ.get("E2E_REPORT")
    if target:
        Path(target).write_text(json.dumps(entries, indent=2) + "\n")
