"""The approval request, told where a person looks: the deployment's channels (tpu_rl.report.
notify: the same e-mail and webhook) and the run's note, on the run's own page, each with the
link to the task's Required Actions page (the decision, one click away) and the comparison in
short."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.notifier import BaseNotifier

if TYPE_CHECKING:
    from tpu_rl.promotion.approval_text import ApprovalCase


@dataclass(frozen=True)
class ApprovalRequest:
    """A notice asking for a decision on a run's export."""

    dag_id: str
    run_id: str
    url: str
    case: ApprovalCase | None = None

    @property
    def subject(self) -> str:
        return f"[{self.dag_id}] approval needed to promote: {self.run_id}"

    @property
    def summary(self) -> list[str]:
        """The comparison in short (tpu_rl.promotion.approval_text.approval_summary)."""
        from tpu_rl.promotion.approval_text import approval_summary

        return approval_summary(self.case) if self.case else []

    @property
    def text(self) -> str:
        export = f"export: {self.case.export.export_uri}" if self.case else "export: n/a"
        return "\n".join([self.subject, export, *self.summary, "approve or reject: " + self.url])

    @property
    def note(self) -> str:
        """The run's note while the approval waits (Markdown): the link first, then the
        comparison in short, within the note's limit (approval_text.summary_within: the
        verdicts, the cost and what no answer does whole, the metrics that fit)."""
        from tpu_rl.promotion.approval_text import summary_within
        from tpu_rl.report.run_note import NOTE_LIMIT

        first = f"**Awaiting approval**: [Approve or reject]({self.url})"
        room = NOTE_LIMIT - len(first) - 2
        lines = [first, *(summary_within(self.case, room) if self.case else [])]
        return "\n\n".join(lines)[:NOTE_LIMIT]


def required_actions_url(context: Any) -> str:
    """The task's Required Actions page (HITLOperator.generate_link_to_ui: `/dags/<dag>/runs/
    <run>/tasks/<task>/required_actions` under Airflow's `[api] base_url`); the run's page for
    a task that is not a HITL one."""
    from airflow.configuration import conf
    from airflow.providers.standard.operators.hitl import HITLOperator

    base = conf.get("api", "base_url", fallback="http://localhost:8080/")
    try:
        return HITLOperator.generate_link_to_ui_from_context(context=context, base_url=base)
    except ValueError:
        return f"{base.rstrip('/')}/dags/{context['dag'].dag_id}/runs/{context['run_id']}"


class ApprovalRequestNotifier(BaseNotifier):
    """Given to the approval as its `notifiers`: HITLOperator.execute calls each one once the
    request is stored, before the task waits (providers-standard operators/hitl.py). Sets the
    run's note (outcome replaces it at the run's end) and tells the channels."""

    def notify(self, context: Any) -> None:
        from tpu_rl import deployment
        from tpu_rl.report.failures import channels
        from tpu_rl.report.notices import send_notices
        from tpu_rl.report.run_note import set_run_note

        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        case = getattr(context["task"], "approval_case", None)  # ApproveExportOperator's
        request = ApprovalRequest(dag_id, run_id, required_actions_url(context), case)
        set_run_note(deployment.airflow_api_conn_id(), dag_id, run_id, request.note)
        send_notices(channels(request), context, self.log)
