"""The approval request, told where a person looks: the deployment's channels (tpu_rl.report.
notify: the same e-mail and webhook) and the run's note, on the run's own page, each with the
link to the task's Required Actions page (the decision, one click away) and the comparison in
short. The notifier is an argument of the approval at parse; what it sends is
tpu_rl.promotion.approval_request's, imported when it notifies."""

from __future__ import annotations

from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier


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
        from tpu_rl.promotion.approval_request import ApprovalRequest
        from tpu_rl.report.failures import channels
        from tpu_rl.report.notices import send_notices
        from tpu_rl.report.run_note import set_run_note

        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        case = getattr(context["task"], "approval_case", None)  # ApproveExportOperator's
        request = ApprovalRequest(dag_id, run_id, required_actions_url(context), case)
        set_run_note(deployment.airflow_api_conn_id(), dag_id, run_id, request.note)
        send_notices(channels(request), context, self.log)
