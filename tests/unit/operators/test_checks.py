"""The run's checks (tpu_rl.operators.checks): outcome's verdict, as the run's note and its
failure read it (the failed task first), the held-out evaluation it passes to the report and the
note, and a failed `validate` as its log shows it (the list of problems once, at the end,
unchained)."""

from __future__ import annotations

import traceback
from types import SimpleNamespace

import pytest

from tests.conftest import PIPELINE
from tests.support.approval import XComs
from tests.support.heldout import GSM8K, heldout_xcom
from tpu_rl import run_summary
from tpu_rl.names import Step
from tpu_rl.operators.checks import RunOutcomeOperator, failure_verdict
from tpu_rl.report import run_cost, run_note, run_report

# every step a failed validate keeps from running but verify (named apart) and outcome
STEPS = [*PIPELINE[1:-1], "stop_backend", "cleanup_kubernetes", "cleanup_cluster"]


def test_a_failed_validate_names_it_first_and_counts_what_it_kept_from_running():
    states = {"validate": "failed", "verify": "upstream_failed"}
    states |= dict.fromkeys(STEPS, "upstream_failed")
    assert failure_verdict("verify", states) == (
        "the run did not succeed: validate failed; verify is upstream_failed; "
        "not run (upstream_failed): cleanup_cluster, cleanup_kubernetes, convert and 10 more"
    )


def test_a_failed_export_names_the_few_tasks_it_kept_from_running():
    states = {**dict.fromkeys(STEPS, "success"), "export": "failed", "verify": "upstream_failed"}
    assert failure_verdict("verify", states) == (
        "the run did not succeed: export failed; verify is upstream_failed"
    )


def test_a_failed_cleanup_after_a_verified_export_fails_the_run():
    states = {**dict.fromkeys(STEPS, "success"), "cleanup_cluster": "failed", "verify": "success"}
    assert failure_verdict("verify", states) == "the run did not succeed: cleanup_cluster failed"


def test_a_run_stopped_before_verify_ran_says_so_and_a_clean_run_has_no_verdict():
    states = dict.fromkeys(STEPS, "success")
    assert failure_verdict("verify", {**states, "verify": None}) == (
        "the run did not succeed: verify is None (stopped before it ran: marked failed?)"
    )
    assert failure_verdict("verify", {**states, "verify": "success"}) is None


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


def test_outcome_puts_the_held_out_evaluation_in_the_report_and_the_note(monkeypatch):
    """With heldout_tasks, evaluate_heldout's report reaches the run's report and note; without,
    neither gets one (the step skipped)."""
    given: dict = {}
    monkeypatch.setattr(run_cost, "count_run_cost", lambda layout, context: None)
    monkeypatch.setattr(run_summary, "write_summary", lambda ti, task_id, **fields: None)
    monkeypatch.setattr(
        run_report,
        "publish_run_report",
        lambda layout, context, tpu, heldout=None: given.update(report=heldout) or "r.md",
    )
    monkeypatch.setattr(
        run_note, "set_run_note", lambda conn, dag_id, run_id, text: given.update(note=text)
    )
    ti = XComs({(Step.EVALUATE_HELDOUT, "return_value"): heldout_xcom(GSM8K)})
    ti.xcom_push = lambda key, value: None
    ti.dag_id, ti.run_id = "tpu_rl_post_training", "manual__1"
    op = RunOutcomeOperator(final_task="verify")
    for tasks in ([], ["gsm8k"]):
        layout = SimpleNamespace(settings=SimpleNamespace(heldout_tasks=tasks))
        monkeypatch.setattr(op, "run_layout", lambda context, layout=layout: layout)
        op.report_results({"ti": ti}, None, "promoted", verified=True)
        if not tasks:
            assert given["report"] is None and "Held-out" not in given["note"]
    assert given["report"].step == 100
    assert "Held-out (95% level): step 100 better than the base model" in given["note"]
