"""A failed `validate` as its log shows it: the list of problems once, at the end, unchained."""

from __future__ import annotations

import traceback
from types import SimpleNamespace

import pytest

PROBLEMS = [
    "- num_batchs: unknown setting (did you mean num_batches?)",
    "- zone: 'europe-west4-a' is not in region 'us-east5'",
]


def test_a_failed_validate_ends_its_log_with_the_problems_once(tutorial_conf):
    """Airflow's task runner logs a failing task's exception as Python renders it, chain
    included (airflow/sdk/execution_time/task_runner.py, _run_task_and_map_outcome:
    log.exception): one traceback, not two chained ones each holding the list, and the list
    is its last lines."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from tpu_rl.operators.checks import ValidateRunOperator

    conf = {**tutorial_conf, "zone": "europe-west4-a", "num_batchs": 3}
    context = {"params": conf, "run_id": "manual__1", "ti": SimpleNamespace(task_id="validate")}
    with pytest.raises(AirflowFailException) as failed:
        ValidateRunOperator().execute(context)
    logged = "".join(traceback.format_exception(failed.value))
    assert "The above exception was the direct cause" not in logged
    assert "During handling of the above exception" not in logged
    assert logged.count("Traceback (most recent call last)") == 1
    assert logged.count("2 invalid setting(s):") == 1
    last = logged.rstrip("\n").splitlines()[-3:]
    headline = f"{AirflowFailException.__module__}.AirflowFailException: 2 invalid setting(s):"
    assert last == [headline, *PROBLEMS]
