"""tpu_rl.promotion.approval_notice: the notifier a waiting approval calls sets the run's note
and tells the channels."""

from __future__ import annotations

from tests.support.approval import DECISION, RUN_ID, asking_context, case
from tpu_rl.operators.promotion import ApproveExportOperator


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


# What `make demo-ui` showed: MaxText's six evaluation figures, a Spot price
# with its source, a run id as Airflow names a manual run; the note it set was cut at 1,000
# characters in the middle of its last line, "No answer by 2026-12-06 19:57 UTC answer".
