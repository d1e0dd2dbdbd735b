"""tpu_rl.operators.promotion: approve is Airflow's ApprovalOperator, passing at once without
approval, skipping promote on a reject or a rejecting timeout."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tests.support.approval import COMPARISON, EXPORT, GATE, RUN_ID, TPU, PushingTI, asking_context
from tests.support.heldout import GSM8K, GSM8K_WORSE, MMLU_FELL, heldout_xcom
from tpu_rl.names import Step
from tpu_rl.operators.promotion import ApproveExportOperator
from tpu_rl.promotion.approval_text import (
    run_promotion,
)
from tpu_rl.promotion.exported import heldout_result


def test_approval_is_airflows_own_with_a_timeout_that_rejects():
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    op = ApproveExportOperator()
    assert isinstance(op, ApprovalOperator)
    assert op.task_id == Step.APPROVE and op.defaults == ["Reject"]
    assert op.options == ["Approve", "Reject"] and not op.fail_on_reject
    assert op.response_timeout.total_seconds() == 24 * 3600  # approval_timeout_minutes' default


def test_without_approval_it_passes_at_once(monkeypatch):
    op = ApproveExportOperator()
    settings = SimpleNamespace(approval="none", hold_length_drift=2.0, heldout_tasks=[])
    layout = SimpleNamespace(settings=settings)
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
    monkeypatch,
    op: ApproveExportOperator,
    answer: str,
    approval: str = "required",
    ti=None,
    heldout_tasks: list[str] | None = None,
    drift: float = 2.0,
) -> list[str] | None:
    """Run approve's execute up to the wait; the defaults stored with the request (what the
    scheduler answers at the timeout). `heldout_tasks`: the run's held-out benchmarks (none:
    off); `drift`: its hold_length_drift."""
    from airflow.providers.standard.operators import hitl
    from airflow.sdk.exceptions import TaskAwaitingInput

    from tpu_rl.report import run_cost

    stored = {}
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **request: stored.update(request))
    monkeypatch.setattr(run_cost, "count_run_cost", lambda layout, context: TPU)
    settings = SimpleNamespace(
        approval=approval,
        hold_length_drift=drift,
        heldout_tasks=heldout_tasks or [],
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
    settings = SimpleNamespace(approval="none", hold_length_drift=2.0, heldout_tasks=[])
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


def held_out(ti: AskingTI, *rows: dict) -> AskingTI:
    """`ti` with evaluate_heldout's report of `rows`."""
    ti.values[(Step.EVALUATE_HELDOUT, "return_value")] = heldout_xcom(*rows)
    return ti


def test_a_guard_benchmark_fallen_below_the_base_model_holds_a_run_without_approval(monkeypatch):
    """With hold_length_drift off too: the held-out report is still judged."""
    ti = held_out(AskingTI(), GSM8K, MMLU_FELL)
    assert ask(monkeypatch, in_a_dag(), "reject", "none", ti, ["gsm8k"], drift=0) == ["Reject"]
    body = asked["body"]
    held = body[body.index("## Held: possible reward hacking") : body.index("## Evaluation")]
    assert "step 100 answers guard benchmark mmlu significantly worse than the base model" in held
    assert "- guard mmlu: worse than the base model: 62.0% vs 68.0% on 500 items" in held
    assert "## Held-out benchmarks" in body and "| mmlu (guard) | 500 | 62.0% |" in body
    assert ti.values[(Step.APPROVE, "hold")].startswith("step 100 answers guard benchmark mmlu")


def test_a_verdict_worse_than_the_base_model_holds_while_the_reward_rose(monkeypatch):
    from tpu_rl.watch.curves import LENGTH, XCOM_KEY

    steady = drifting_curves()
    steady["series"][LENGTH] = [[i, 300.0] for i in range(40)]
    ti = held_out(AskingTI(), GSM8K_WORSE)
    ti.values[(Step.WAIT_FOR_REWARDS, XCOM_KEY)] = steady
    ask(monkeypatch, in_a_dag(), "reject", "none", ti, ["gsm8k"])
    held = asked["body"][: asked["body"].index("## Evaluation")]
    assert "the training reward rose while step 100 answers held-out benchmark gsm8k" in held
    assert "- batch reward (rewards/train/score/mean) 0.145 -> 0.445" in held
    assert "- gsm8k: worse than the base model: 56.0% vs 64.0% on 1000 items" in held


def test_the_hold_reads_no_xcom_with_both_judges_off_and_judges_the_report_when_on(monkeypatch):
    """heldout_tasks empty (evaluate_heldout skipped) and hold_length_drift 0: approve reads no
    XCom at all, not even a report left there; with heldout_tasks that report holds the run."""
    op = ApproveExportOperator()
    settings = SimpleNamespace(approval="none", hold_length_drift=0, heldout_tasks=[])
    monkeypatch.setattr(op, "run_layout", lambda context: SimpleNamespace(settings=settings))
    ti = held_out(AskingTI(), GSM8K, MMLU_FELL)
    read = []
    pull = ti.xcom_pull
    monkeypatch.setattr(ti, "xcom_pull", lambda **kw: read.append(kw) or pull(**kw))
    assert op.execute({"ti": ti}) == {"approval": "none"}
    assert read == []
    settings.heldout_tasks = ["gsm8k"]  # on: the same report holds the run
    assert op.reward_hacking_hold({"ti": ti}, 0, heldout_result(ti, settings)) is not None


def test_promote_labels_the_registry_version_with_the_held_out_evaluation(monkeypatch):
    from tpu_rl.operators.promotion import PromoteExportOperator
    from tpu_rl.promotion import promote

    given = {}

    def promote_export(layout, export, comparison, conn_id, log, heldout=None):
        given["heldout"] = heldout
        return {"export_uri": export.export_uri, "run_id": RUN_ID, "step": 100, "metrics": {}}

    monkeypatch.setattr(promote, "promote_export", promote_export)
    op = PromoteExportOperator()
    for tasks, expected in (([], None), (["gsm8k"], 100)):
        layout = SimpleNamespace(settings=SimpleNamespace(heldout_tasks=tasks))
        monkeypatch.setattr(op, "run_layout", lambda context, layout=layout: layout)
        op.execute({"ti": held_out(AskingTI(), GSM8K)})
        assert getattr(given["heldout"], "step", None) == expected
