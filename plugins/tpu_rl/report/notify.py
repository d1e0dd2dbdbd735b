"""Failure and reward-gate notifications: why a run stopped, to whoever the deployer named.

No code to change: the deployer names the channels in Airflow's configuration, section
`[tpu_rl]` (or `AIRFLOW__TPU_RL__<KEY>` environment variables), and keeps the credentials in
Airflow connections:

- `notify_email_to`: comma-separated addresses, mailed through the SMTP connection
  `notify_smtp_conn_id` (default `smtp_default`; its extra `from_email` is the sender);
- `notify_webhook_conn_id`: an HTTP connection whose host is a webhook URL that takes
  `{"text": ...}` (Google Chat and Slack incoming webhooks do).

Each channel is the provider's own notifier (SmtpNotifier, HttpNotifier), each try bounded to a
few seconds and tried twice at most (tpu_rl.report.notices); a channel that fails or does not
answer is logged with the reason and never hides the run's own failure or holds its cleanup.
The first line of every failure a worker reports is also kept as the task's XCom `failure`,
which the RL post-training page shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.notifier import BaseNotifier

if TYPE_CHECKING:
    from airflow.sdk import DAG

FAILURE_XCOM_KEY = "failure"


class RunFailureNotifier(BaseNotifier):
    """Tells the configured channels why a run stopped; as a task's or the DAG's failure callback.

    The DAG's callback speaks only when no task did (the run timed out or was marked failed):
    a task's failure has already been told by that task's callback. With `only_when_untold`
    (the run's verdict task), it speaks only when no other task of the run failed.
    """

    def __init__(self, *, only_when_untold: bool = False) -> None:
        super().__init__()
        self.only_when_untold = only_when_untold

    def notify(self, context: Any) -> None:
        from tpu_rl import deployment
        from tpu_rl.report.failures import (
            another_task_failed,
            channels,
            failure_from_context,
            told_by_the_worker,
        )
        from tpu_rl.report.notices import send_notices
        from tpu_rl.run_summary import write_summary
        from tpu_rl.token_masking import register_hf_token

        if context.get("reason") == "task_failure":
            return
        # This process (a task's worker, or the DAG processor for the DAG's callback, which
        # serves connections too: airflow/dag_processing/processor.py, GetConnection) may not
        # have read the token: registered here, the notice and the logs mask it.
        register_hf_token(deployment.hf_conn_id())
        if self.only_when_untold and another_task_failed(context):
            return
        failure = failure_from_context(context)
        if failure.task_id and told_by_the_worker(context):
            context["ti"].xcom_push(FAILURE_XCOM_KEY, failure.reason)
            write_summary(context["ti"], context["ti"].task_id, failure=failure.reason)
        send_notices(channels(failure), context, self.log)


def notify_failures(dag: DAG) -> None:
    """Every task without a failure callback of its own tells the channels when it fails.

    Set on the tasks, not in default_args: Airflow's serializer stores the source code of a
    callable in default_args (inspect.getsource) on every parse of the DAG file.
    """
    for task in dag.tasks:
        if not task.on_failure_callback:
            task.on_failure_callback = [RunFailureNotifier()]
