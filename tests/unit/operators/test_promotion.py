"""tpu_rl.operators.promotion: approve is Airflow's ApprovalOperator, passing at once without
approval, skipping promote on a reject or a rejecting timeout."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tests.support.approval import COMPARISON, EXPORT, GATE, RUN_ID, TPU, PushingTI, asking_context
from tpu_rl.names import Step
from tpu_rl.operators.promotion import ApproveExportOperator
from tpu_rl.promotion.approval_text import (
    run_promotion,
)


def test_approval_is_airflows_own_with_a_timeout_that_rejects():
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    op = ApproveExportOperator()
    assert isinstance(op, ApprovalOperator)
    assert op.task_id == Step.APPROVE and op.defaults == ["Reject"]
    assert op.options == ["Approve", "Reject"] and not op.fail_on_reject
    assert op.response_timeout.total_seconds() == 24 * 3600  # approval_timeout_minutes' default


def test_without_approval_it_passes_at_once(monkeypatch):
    op = ApproveExportOperator()
    layout = SimpleNamespace(settings=SimpleNamespace(approval="none", hold_length_drift=2.0))
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    ti = PushingTI()
    assert op.execute({"ti": ti}) == {"approval": "none"}
    assert run_promotion(ti) == "not promoted"  # promote did not run (yet)
    ti.values[(Step.PROMOTE, "return_value")] = {"registry_version": None}
    assert run_promotion(ti) == "promoted (approval not required)"


def test_a_reject_skips_promote_and_the_verdict_still_says_who_rejected():
    """On Reject the operator skips its downstream by raising, so it returns nothing: the
    answer is kept apart (the process scenario's rejected run showed a bare "not promoted")."""
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    from tpu_rl.operators.promotion import PromoteExportOperator

    with DAG("approval_test", schedule=None):
        op = ApproveExportOperator()
        op >> PromoteExportOperator()
    ti = PushingTI()
    event = {
        "chosen_options": ["Reject"],
        "params_input": {},
        "responded_at": datetime(2026, 1, 1, tzinfo=UTC),
        "responded_by_user": {"id": "7", "name": "bo"},
    }
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        op.execute_complete({"ti": ti, "task": op}, event)
    assert skipped.value.tasks == [Step.PROMOTE]
    assert run_promotion(ti) == "not promoted: rejected by bo; the export stays"


class AskingTI(PushingTI):
    """A task instance with the run's results before approve: export, gate, comparison."""

    id = "0190-ti"

    def __init__(self) -> None:
        super().__init__()
        self.values |= {
            (Step.EXPORT, "return_value"): {
                "export_uri": EXPORT.export_uri,
                "step": 100,
                "metrics": EXPORT.metrics,
            },
            (Step.GATE, "return_value"): GATE,
            (Step.COMPARE_CHAMPION, "return_value"): COMPARISON,
        }


def ask(
    monkeypatch, op: ApproveExportOperator, answer: str, approval: str = "required", ti=None
) -> list[str] | None:
    """Run approve's execute up to the wait; the defaults stored with the request (what the
    scheduler answers at the timeout)."""
    from airflow.providers.standard.operators import hitl
    from airflow.sdk.exceptions import TaskAwaitingInput

    from tpu_rl.report import run_cost

    stored = {}
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **request: stored.update(request))
    monkeypatch.setattr(run_cost, "count_run_cost", lambda layout, context: TPU)
    settings = SimpleNamespace(
        approval=approval,
        hold_length_drift=2.0,
        approval_timeout_minutes=60,
        approval_timeout_answer=answer,
        capacity="spot",
    )
    layout = SimpleNamespace(run_id=RUN_ID, settings=settings)
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    with pytest.raises(TaskAwaitingInput):  # Airflow 3.3: the task waits in awaiting_input
        op.execute({**asking_context(op), "ti": ti or AskingTI()})
    assert "| mean_reward | 0.9000 | 1.1000 | 1.2000 |" in stored["body"]
    asked.update(stored)
    return stored["defaults"]


asked: dict = {}  # the last request ask() stored


def timed_out(defaults: list[str]) -> dict:
    """The event the scheduler resumes a timed-out approval with: its defaults as the answer,
    no one's (Airflow 3.3 jobs/scheduler_job_runner.py check_awaiting_input_timeouts)."""
    from airflow.models.hitl import HITLDetail

    detail = HITLDetail(options=["Approve", "Reject"], subject="s", defaults=defaults)
    detail.chosen_options = list(detail.defaults)
    detail.params_input = {}
    detail.responded_by = None
    detail.responded_at = datetime(2026, 5, 2, tzinfo=UTC)
    return detail.as_resume_event_payload(timedout=True)


def in_a_dag() -> ApproveExportOperator:
    from airflow.sdk import DAG

    from tpu_rl.operators.promotion import PromoteExportOperator

    with DAG("approval_timeout_test", schedule=None):
        op = ApproveExportOperator(notifiers=[])
        op >> PromoteExportOperator()
    return op


def test_a_timeout_rejects_by_default_and_promote_is_skipped(monkeypatch):
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    op = in_a_dag()
    defaults = ask(monkeypatch, op, "reject")
    assert defaults == ["Reject"]
    ti = PushingTI()
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        op.execute_complete({"ti": ti, "task": op}, timed_out(defaults))
    assert skipped.value.tasks == [Step.PROMOTE]
    assert run_promotion(ti) == "not promoted: the approval timed out (rejected); the export stays"


def test_a_timeout_approves_when_the_run_says_so(monkeypatch):
    op = in_a_dag()
    defaults = ask(monkeypatch, op, "approve")
    assert defaults == ["Approve"]
    ti = PushingTI()
    assert op.execute_complete({"ti": ti, "task": op}, timed_out(defaults))["chosen_options"] == [
        "Approve"
    ]
    ti.values[(Step.PROMOTE, "return_value")] = {"registry_version": None}
    assert run_promotion(ti) == "promoted (approved on timeout: approval_timeout_answer=approve)"


def drifting_curves() -> dict:
    """Curves whose batch reward rose while the completion length tripled."""
    from tpu_rl.watch import curves

    series = {
        curves.REWARD_MEAN: [[i, 0.1 + 0.01 * i] for i in range(40)],
        curves.LENGTH: [[i, 300.0 * (1 + 2 * i / 39)] for i in range(40)],
    }
    return {"stride": 1, "series": series, "last": {}}


def test_a_run_held_for_reward_hacking_asks_a_person_even_without_approval(monkeypatch):
    from tpu_rl.watch.curves import XCOM_KEY

    ti = AskingTI()
    ti.values[(Step.WAIT_FOR_REWARDS, XCOM_KEY)] = drifting_curves()
    assert ask(monkeypatch, in_a_dag(), "reject", approval="none", ti=ti) == ["Reject"]
    body = asked["body"]
    assert "## Held: possible reward hacking" in body
    assert "the training reward rose while the completion length grew 2.2 times" in body
    assert "- completion length (completions/train/mean_length) 369.2 tokens -> 830.8" in body


def test_curves_without_drift_let_a_run_without_approval_pass(monkeypatch):
    from tpu_rl.watch.curves import LENGTH, XCOM_KEY

    op = ApproveExportOperator()
    settings = SimpleNamespace(approval="none", hold_length_drift=2.0)
    monkeypatch.setattr(op, "run_layout", lambda context: SimpleNamespace(settings=settings))
    steady = drifting_curves()
    steady["series"][LENGTH] = [[i, 300.0] for i in range(40)]
    ti = PushingTI()
    ti.values[(Step.WAIT_FOR_REWARDS, XCOM_KEY)] = steady
    assert op.execute({"ti": ti}) == {"approval": "none"}


def test_a_held_wait_is_the_approval_timeout_or_what_the_run_has_left(monkeypatch):
    from datetime import timedelta

    from tpu_rl.dag import run_limits
    from tpu_rl.operators.promotion import held_wait

    s = SimpleNamespace(approval_timeout_minutes=60)
    now = datetime.now(UTC).timestamp()
    monkeypatch.setattr(run_limits, "work_deadline", lambda context, s: now + 600)
    assert timedelta(seconds=590) < held_wait({}, s) <= timedelta(seconds=600)
    monkeypatch.setattr(run_limits, "work_deadline", lambda context, s: now + 7200)
    assert held_wait({}, s) == timedelta(minutes=60)
    monkeypatch.setattr(run_limits, "work_deadline", lambda context, s: now - 5)
    assert held_wait({}, s) == timedelta(seconds=1)
    monkeypatch.setattr(run_limits, "work_deadline", lambda context, s: None)
    assert held_wait({}, s) == timedelta(minutes=60)
