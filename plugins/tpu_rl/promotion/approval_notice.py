"""The approval request told to the deployment's channels (tpu_rl.report.notify: the same
e-mail and webhook), with the link to the task's Required Actions page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier


@dataclass(frozen=True)
class ApprovalRequest:
    """A notice asking for a decision on a run's export."""

    dag_id: str
    run_id: str
    export_uri: str
    url: str

    @property
    def subject(self) -> str:
        return f"[{self.dag_id}] approval needed to promote: {self.run_id}"

    @property
    def text(self) -> str:
        return "\n".join(
            [
                self.subject,
                f"export: {self.export_uri}",
                "approve or reject (no answer by the timeout rejects): " + self.url,
            ]
        )


class ApprovalRequestNotifier(BaseNotifier):
    """Given to the approval as its `notifiers`: HITLOperator.execute calls each one once the
    request is stored, before the task waits (providers-standard operators/hitl.py)."""

    def notify(self, context: Any) -> None:
        from airflow.configuration import conf
        from airflow.providers.standard.operators.hitl import HITLOperator

        from tpu_rl.report.failures import channels
        from tpu_rl.report.notices import send_notices

        base = conf.get("api", "base_url", fallback="http://localhost:8080/")
        try:
            url = HITLOperator.generate_link_to_ui_from_context(context=context, base_url=base)
        except ValueError:  # not a HITL task: the run's own page
            url = f"{base.rstrip('/')}/dags/{context['dag'].dag_id}/runs/{context['run_id']}"
        task = context["task"]
        request = ApprovalRequest(
            context["dag"].dag_id, context["run_id"], getattr(task, "export_uri", "") or "", url
        )
        send_notices(channels(request), context, self.log)
