"""The run DAG as check_run reads it, with a dagrun_timeout of the test's choosing."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from tests.budgets import step_tasks

DAY = 24 * 60


def run_dag(timeout_minutes: float) -> SimpleNamespace:
    """What check_run reads of the DAG: its dagrun_timeout and its steps' limits."""
    return SimpleNamespace(dagrun_timeout=timedelta(minutes=timeout_minutes), tasks=step_tasks())
