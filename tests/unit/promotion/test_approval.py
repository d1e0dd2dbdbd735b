"""approve: the body a person reads (metrics beside the champion's, the cost), what its answer
means for the run's verdict, and its pass-through when the run asks for no approval."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tpu_rl.names import Step
from tpu_rl.operators.promotion import ApproveExportOperator
from tpu_rl.promotion.approval_text import (
    ApprovalCase,
    approval_body,
    promotion_line,
    run_promotion,
)
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


GATE = {
    "pre_mean_reward": 0.9,
    "post_mean_reward": 1.2,
    "gain": 0.3,
    "candidate": "post-training",
    "metrics": {
        "accuracy": {"pre": 0.3, "candidate": 0.41, "gain": 0.11, "min_gain": None, "passed": None},
        "mean_reward": {"pre": 0.9, "candidate": 1.2, "gain": 0.3, "min_gain": 0.1, "passed": True},
    },
}
DEADLINE = datetime(2026, 5, 2, 12, 30, tzinfo=UTC)


def case(**changes) -> ApprovalCase:
    facts = {
        "run_id": "manual__1",
        "export": EXPORT,
        "gate": GATE,
        "comparison": COMPARISON,
        "tpu": TPU,
        "capacity": "spot",
        "deadline": DEADLINE,
    }
    return ApprovalCase(**(facts | changes))


def test_the_body_puts_base_champion_and_challenger_side_by_side_with_verdicts_and_cost():
    body = approval_body(case())
    assert "checkpoint step 100 to `gs://b/m/hf-trained/rl-1/`" in body
    header = "| metric | base (pre-training) | champion (scheduled__last-week) | this export "
    assert header + "(challenger) |" in body
    assert "| accuracy | 0.3000 | 0.3800 | 0.4100 |" in body
    assert "| mean_reward | 0.9000 | 1.1000 | 1.2000 |" in body
    assert "Gate: passed: mean_reward 1.2000 vs base 0.9000 (gain 0.3000, needs +0.1)" in body
    assert "Champion: accuracy +0.03 >= +0.01" in body
    assert "16.00 chip-hours = 4.00 host-hours" in body and "no price known" in body
    assert "No answer by 2026-05-02 12:30 UTC answers **Reject**" in body


def test_the_first_champion_and_a_run_without_comparison_say_so():
    first = approval_body(case(comparison={**COMPARISON, "champion": None}, tpu=None))
    assert (
        "| metric | base (pre-training) | champion: none yet | this export (challenger) |" in first
    )
    assert "| accuracy | 0.3000 | n/a | 0.4100 |" in first
    assert "Champion: none yet, this export would be the first" in first
    assert "TPUs: not counted" in first
    alone = approval_body(case(comparison=None))
    assert "champion: not compared" in alone and "Champion: no comparison ran" in alone


def test_a_timeout_that_approves_says_so_in_the_body():
    body = approval_body(case(timeout_option="Approve"))
    assert "answers **Approve**" in body and "becomes this deployment's champion" in body


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
            {"registry_version": None},
            {"chosen_options": ["Approve"], "responded_by_user": None},
            COMPARISON,
            "promoted (approved on timeout: approval_timeout_answer=approve)",
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


RUN_ID = "manual__2026-05-01T10:00:00+00:00"
DECISION = f"/dags/tpu_rl_post_training/runs/{RUN_ID}/tasks/approve/required_actions"


def asking_context(op: ApproveExportOperator) -> dict:
    ti = SimpleNamespace(
        id="0190-ti", dag_id="tpu_rl_post_training", run_id=RUN_ID, task_id=op.task_id, map_index=-1
    )
    return {
        "dag": SimpleNamespace(dag_id=ti.dag_id),
        "run_id": RUN_ID,
        "task": op,
        "task_instance": ti,
    }


def test_the_run_note_and_the_notice_link_the_decision_with_the_comparison(monkeypatch):
    """The run's page shows its note first: while approve waits, the note's first line is the
    link to the Required Actions page of the task (the route the UI's own link takes)."""
    from tpu_rl.deployment import airflow_api_conn_id
    from tpu_rl.promotion.approval_notice import ApprovalRequestNotifier
    from tpu_rl.report import failures, notices, run_note

    notes, notices_sent = [], []
    monkeypatch.setattr(run_note, "set_run_note", lambda *args: notes.append(args) or True)
    monkeypatch.setattr(failures, "channels", lambda request: notices_sent.append(request) or [])
    monkeypatch.setattr(notices, "send_notices", lambda channels, context, log: [])
    op = ApproveExportOperator()
    op.approval_case = case()
    ApprovalRequestNotifier().notify(asking_context(op))
    [(conn_id, dag_id, run_id, note)] = notes
    assert (conn_id, dag_id, run_id) == (airflow_api_conn_id(), "tpu_rl_post_training", RUN_ID)
    first = note.split("\n\n")[0]
    assert first.startswith("**Awaiting approval**: [Approve or reject](http")
    assert f"{DECISION}?map_index=-1)" in first
    assert "mean_reward: base 0.9000, champion 1.1000, this export 1.2000" in note
    assert "Gate: passed" in note and "TPU cost so far: 16.00 chip-hours" in note
    [request] = notices_sent
    assert f"{DECISION}?map_index=-1" in request.text and "answers **Reject**" in request.text


# What `make demo-ui` showed (issue 44's evidence): MaxText's six evaluation figures, a Spot price
# with its source, a run id as Airflow names a manual run; the note it set was cut at 1,000
# characters in the middle of its last line, "No answer by 2026-12-06 19:57 UTC answer".
DEMO_METRICS = {
    "corr": 12,
    "total": 64,
    "accuracy": 18.75,
    "partial_accuracy": 20.3125,
    "format_accuracy": 85.9375,
    "mean_reward": 0.1234,
}
DEMO_CHAMPION = "manual__2026-12-05T19:55:21.917132+00:00"
DEMO_CASE = {
    "run_id": "manual__2026-12-05T19:57:00.459510+00:00",
    "export": ExportedModel("gs://b/m/hf-trained/rl-2/", "gs://b/m/ck/20/", 20, DEMO_METRICS),
    "gate": {
        "metrics": {
            name: {
                "pre": pre,
                "candidate": DEMO_METRICS[name],
                "gain": DEMO_METRICS[name] - pre,
                "min_gain": gain,
                "passed": True,
            }
            for name, pre, gain in (
                ("accuracy", 12.5, None),
                ("partial_accuracy", 20.3125, None),
                ("format_accuracy", 85.9375, None),
                ("mean_reward", 0.0821, 0.0),
            )
        }
    },
    "comparison": {
        "champion": {"run_id": DEMO_CHAMPION},
        "champion_metrics": DEMO_METRICS | {"corr": 10, "accuracy": 15.625, "mean_reward": 0.1},
        "challenger_metrics": DEMO_METRICS,
        "beats": True,
        "reason": f"beats the champion from run {DEMO_CHAMPION}: mean_reward 0.1234 vs "
        "champion 0.1 (needs +0)",
    },
    "tpu": TPU
    | {
        "chip_hours": 0.2932,
        "host_hours": 0.0733,
        "estimated_cost_usd": 0.3562,
        "price": {
            "usd_per_chip_hour": 1.215,
            "basis": "list price",
            "source": "Cloud Billing catalogue (TPU SKUs), as mirrored by public price catalogues",
            "read": "2026-12-04",
            "region": "us-east5",
            "mode": "spot",
            "capacity": "spot",
        },
    },
    "capacity": "spot",
    "deadline": datetime(2026, 12, 6, 19, 57, tzinfo=UTC),
}


@pytest.mark.parametrize("gated", [["mean_reward"], ["accuracy", "partial_accuracy"]])
def test_a_note_too_long_for_airflow_keeps_the_link_the_verdicts_the_cost_and_the_timeout(gated):
    """A run's note holds at most 1,000 characters: the one a waiting approval sets keeps its
    link, the verdicts, the cost and what no answer does whole, and the gated metrics' lines;
    the metric lines that do not fit are named, left to the Required Actions page."""
    from tpu_rl.promotion.approval_notice import ApprovalRequest
    from tpu_rl.report.run_note import NOTE_LIMIT

    gate = {
        "metrics": {
            name: row | {"min_gain": 0.0 if name in gated else None}
            for name, row in DEMO_CASE["gate"]["metrics"].items()
        }
    }
    facts = DEMO_CASE | {"gate": gate}
    url = f"http://127.0.0.1:8093{DECISION}?map_index=-1"
    note = ApprovalRequest("tpu_rl_post_training", facts["run_id"], url, ApprovalCase(**facts)).note
    assert len(note) <= NOTE_LIMIT
    lines = note.split("\n\n")
    assert lines[0] == f"**Awaiting approval**: [Approve or reject]({url})"
    assert lines[-1] == (
        "No answer by 2026-12-06 19:57 UTC answers **Reject** (the run's "
        "approval_timeout_answer): the export stays where it is, unpromoted."
    )
    assert lines[-2].startswith("TPU cost so far: 0.29 chip-hours") and lines[-2].endswith(")")
    assert lines[-3] == f"Champion: {DEMO_CASE['comparison']['reason']}"
    assert lines[-4].startswith("Gate: passed: ")
    gate_line = lines[-4]
    assert all(f"{name} {DEMO_METRICS[name]:.4f} vs base" in gate_line for name in gated)
    # each metric has its line, or is named in the line before the verdicts, the first gated
    # one always shown; MaxText's counts (corr, total) left out before the evaluation metrics
    more = lines[-5].removeprefix("More on the Required Actions page: ")
    assert more != lines[-5], note
    shown = [line.split(":")[0] for line in lines[1:-5]]
    assert sorted(shown + more.split(", ")) == sorted(DEMO_METRICS), note
    assert gated[0] in shown and {"corr", "total"} <= set(more.split(", ")), note


def test_verdicts_too_long_for_the_note_are_cut_before_what_no_answer_does():
    from tpu_rl.promotion.approval_notice import ApprovalRequest
    from tpu_rl.report.run_note import NOTE_LIMIT

    long = {**COMPARISON, "reason": "accuracy +0.03 >= +0.01; " * 60}
    note = ApprovalRequest("d", "manual__1", "http://x/a", case(comparison=long)).note
    assert len(note) <= NOTE_LIMIT
    *head, last = note.split("\n\n")
    assert head[0] == "**Awaiting approval**: [Approve or reject](http://x/a)"
    assert head[-1].endswith("(cut: the Required Actions page has it whole)")
    assert last.startswith("No answer by 2026-05-02 12:30 UTC answers **Reject**")


def test_a_note_that_fits_is_the_whole_summary():
    from tpu_rl.promotion.approval_notice import ApprovalRequest

    request = ApprovalRequest("tpu_rl_post_training", "manual__1", "http://x/a", case())
    assert request.note.split("\n\n")[1:] == request.summary


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


def ask(monkeypatch, op: ApproveExportOperator, answer: str) -> list[str] | None:
    """Run approve's execute up to the wait; the defaults stored with the request (what the
    scheduler answers at the timeout)."""
    from airflow.providers.standard.operators import hitl
    from airflow.sdk.exceptions import TaskAwaitingInput

    from tpu_rl.report import run_cost

    stored = {}
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **request: stored.update(request))
    monkeypatch.setattr(run_cost, "count_run_cost", lambda layout, context: TPU)
    settings = SimpleNamespace(
        approval="required",
        approval_timeout_minutes=60,
        approval_timeout_answer=answer,
        capacity="spot",
    )
    layout = SimpleNamespace(run_id=RUN_ID, settings=settings)
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    with pytest.raises(TaskAwaitingInput):  # Airflow 3.3: the task waits in awaiting_input
        op.execute({**asking_context(op), "ti": AskingTI()})
    assert "| mean_reward | 0.9000 | 1.1000 | 1.2000 |" in stored["body"]
    return stored["defaults"]


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
