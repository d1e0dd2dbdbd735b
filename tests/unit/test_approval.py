"""approve: the body a person reads (metrics beside the champion's, the cost), what its answer
means for the run's verdict, and its pass-through when the run asks for no approval."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tpu_rl.names import Step
from tpu_rl.operators.promotion import ApproveExportOperator
from tpu_rl.promotion.approval_text import approval_body, promotion_line, run_promotion
from tpu_rl.promotion.exported import ExportedModel, exported_model

EXPORT = ExportedModel("gs://b/m/hf-trained/rl-1/", "gs://b/m/ck/100/", 100, {"accuracy": 0.41})
COMPARISON = {
    "champion": {"run_id": "scheduled__last-week", "export_uri": "gs://b/m/hf-trained/rl-0/"},
    "champion_metrics": {"accuracy": 0.38, "mean_reward": 1.1},
    "challenger_metrics": {"accuracy": 0.41, "mean_reward": 1.2},
    "beats": True,
    "reason": "accuracy +0.03 >= +0.01",
}
TPU = {
    "chip_hours": 16.0,
    "host_hours": 4.0,
    "hosts": 8,
    "pool_seconds": 1800.0,
    "estimated_cost_usd": None,
    "price": None,
    "tpu_type": "v6e-32",
}


def test_the_body_puts_the_export_beside_the_champion_and_gives_the_cost():
    body = approval_body("manual__1", EXPORT, COMPARISON, TPU, "spot")
    assert "checkpoint step 100 to `gs://b/m/hf-trained/rl-1/`" in body
    assert "| metric | this export | champion (scheduled__last-week) |" in body
    assert "| accuracy | 0.4100 | 0.3800 |" in body
    assert "| mean_reward | 1.2000 | 1.1000 |" in body
    assert "Comparison: accuracy +0.03 >= +0.01" in body
    assert "16.00 chip-hours = 4.00 host-hours" in body and "no price known" in body


def test_the_first_champion_and_a_run_without_comparison_say_so():
    first = approval_body("r", EXPORT, {**COMPARISON, "champion": None}, None, "spot")
    assert "no champion yet" in first and "| accuracy | 0.4100 |" in first
    assert "TPUs: not counted" in first
    assert "No champion comparison ran" in approval_body("r", EXPORT, None, TPU, "spot")


@pytest.mark.parametrize(
    ("promoted", "approval", "comparison", "line"),
    [
        (
            {"registry_version": None},
            {"approval": "none"},
            None,
            "promoted (approval not required)",
        ),
        (
            {"registry_version": "projects/p/locations/r/models/m@3"},
            {"chosen_options": ["Approve"], "responded_by_user": {"id": "1", "name": "ana"}},
            COMPARISON,
            "promoted (approved by ana); Vertex AI version projects/p/locations/r/models/m@3",
        ),
        (
            None,
            {"chosen_options": ["Reject"], "responded_by_user": {"id": "2", "name": "bo"}},
            COMPARISON,
            "not promoted: rejected by bo; the export stays",
        ),
        (
            None,
            {"chosen_options": ["Reject"], "responded_by_user": None},
            COMPARISON,
            "not promoted: the approval timed out (rejected); the export stays",
        ),
        (
            None,
            None,
            {**COMPARISON, "beats": False, "reason": "accuracy -0.02 < +0.01"},
            "not promoted: accuracy -0.02 < +0.01",
        ),
    ],
)
def test_the_run_says_whether_it_promoted_and_why_not(promoted, approval, comparison, line):
    assert promotion_line(promoted, approval, comparison) == line


class XComs:
    """A task instance's xcom_pull over fixed values by (task id, key)."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return self.values.get((task_ids, key))


def test_the_verdict_reads_the_steps_results():
    ti = XComs(
        {
            (Step.APPROVE, "answer"): {
                "chosen_options": ["Reject"],
                "responded_by_user": {"name": "bo"},
            },
            (Step.COMPARE_CHAMPION, "return_value"): COMPARISON,
        }
    )
    assert run_promotion(ti) == "not promoted: rejected by bo; the export stays"


def test_the_export_result_is_what_promotion_reads_and_without_one_it_refuses():
    shaped = {
        "step": 50,
        "checkpoint_uri": "gs://b/ck/50/",
        "export_uri": "gs://b/hf/",
        "metrics": {"accuracy": 0.5},
        "choice": "best",
    }
    got = exported_model(XComs({(Step.EXPORT, "return_value"): shaped}))
    assert got == ExportedModel("gs://b/hf/", "gs://b/ck/50/", 50, {"accuracy": 0.5})
    with pytest.raises(ValueError, match="export left no result"):
        exported_model(XComs({(Step.EXPORT, "checkpoint_step"): 75}))


def test_approval_is_airflows_own_with_a_timeout_that_rejects():
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    op = ApproveExportOperator()
    assert isinstance(op, ApprovalOperator)
    assert op.task_id == Step.APPROVE and op.defaults == ["Reject"]
    assert op.options == ["Approve", "Reject"] and not op.fail_on_reject
    assert op.response_timeout.total_seconds() == 24 * 3600  # approval_timeout_minutes' default


class PushingTI(XComs):
    map_index = -1

    def __init__(self) -> None:
        super().__init__({})

    def xcom_push(self, key: str, value) -> None:
        self.values[(Step.APPROVE, key)] = value


def test_without_approval_it_passes_at_once(monkeypatch):
    op = ApproveExportOperator()
    layout = SimpleNamespace(settings=SimpleNamespace(approval="none"))
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
