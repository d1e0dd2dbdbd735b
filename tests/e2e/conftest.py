"""Fixtures of the end-to-end tier; `airflow_db` (tests/conftest.py) is the session's fresh
SQLite metadata DB, reset once per worker and shared with tests/ui.

A scenario takes `sandbox`, a started sandbox of its own (sandbox/harness.py):

    def test_x(airflow_db, sandbox):
        result = sandbox.run({**SETTINGS, ...}, Workloads(...))

or starts one with other options: `with Sandbox(tmp_path).up(existing_cluster=...) as box:`.
A fresh sandbox costs well under 0.1 s (emulators on loopback, environment patched), so every
scenario has its own and none inherits another's cluster, bucket or ledger; what a run costs is
Airflow's (dag.test: the first run in a worker builds the in-process Execution API, 10-20 s,
each later one about 5 s of CPU) and the simulated time the scenario asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.harness import Sandbox


@pytest.fixture
def sandbox(airflow_db, tmp_path: Path) -> Iterator[Sandbox]:
    """A started sandbox (no existing cluster, the default environment) for this test."""
    with Sandbox(tmp_path).up() as box:
        yield box
