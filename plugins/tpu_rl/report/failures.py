"""What a stopped run's notification says, and the channels it goes to (tpu_rl.report.notify)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import takewhile
from typing import Any, Protocol

from airflow.configuration import conf
from airflow.sdk.bases.notifier import BaseNotifier

from tpu_rl.names import Step
from tpu_rl.token_masking import redact_secrets

CONFIG_SECTION = "tpu_rl"
REWARDS_TASK = Step.WAIT_FOR_REWARDS
GATE_TASK = Step.GATE
NOTICE_TIMEOUT_SECONDS = 5  # per try of a channel; a notice is tried twice at most
FIRST_LINE_CHARS = 500  # an error's line in a note, notice or summary


def first_line(error: object) -> str:
    """The first non-empty line of an error, without secrets this process registered (the
    Hugging Face token's wrapped pieces included: tpu_rl.token_masking), in at most
    FIRST_LINE_CHARS characters.

    A line that only announces a list ("2 invalid setting(s):") brings the list's items, `; `
    between them, as many as fit, then how many more there are: a run's note and notice then
    say every refused setting a person must fix, not the first of eight.
    """
    lines = [line.strip() for line in str(error or "").splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__ if error else "no error message"
    if text.endswith(":") and len(lines) > 1:
        items = list(takewhile(lambda line: line.startswith("- "), lines[1:]))
        text = _with_items(text, [item[2:] for item in items] or lines[1:2])
    return redact_secrets(text)[:FIRST_LINE_CHARS]


def _with_items(heading: str, items: list[str]) -> str:
    """`heading item; item; ... and N more`, within FIRST_LINE_CHARS (the first item always)."""
    shown = items[:1]
    for item in items[1:]:
        more = len(items) - len(shown) - 1
        tail = f" and {more} more" if more else ""
        if len(f"{heading} {'; '.join([*shown, item])}{tail}") > FIRST_LINE_CHARS:
            break
        shown.append(item)
    left = len(items) - len(shown)
    return f"{heading} {'; '.join(shown)}" + (f" and {left} more" if left else "")


def rewards_line(rewards: Mapping[str, Any] | None) -> str:
    """`pre 0.0821 -> post 0.1234 (gain +0.0413)`, or why there is none."""
    if not rewards or not rewards.get("post"):
        return "no rewards yet (training did not report them)"
    post = float(rewards["post"]["mean_reward"])
    if not rewards.get("pre"):
        return f"post mean_reward {post:.4f} (no pre-training line)"
    pre = float(rewards["pre"]["mean_reward"])
    return f"mean_reward pre {pre:.4f} -> post {post:.4f} (gain {post - pre:+.4f})"


@dataclass(frozen=True)
class RunFailure:
    """What a person needs to know about a stopped run."""

    dag_id: str
    run_id: str
    task_id: str | None
    reason: str
    rewards: str
    url: str

    @property
    def gate_stopped(self) -> bool:
        return self.task_id == GATE_TASK

    @property
    def subject(self) -> str:
        what = (
            "reward gate stopped the export"
            if self.gate_stopped
            else f"{self.task_id} failed"
            if self.task_id
            else "run failed"
        )
        return f"[{self.dag_id}] {what}: {self.run_id}"

    @property
    def text(self) -> str:
        return "\n".join(
            [
                self.subject,
                f"task: {self.task_id or '-'}",
                f"reason: {self.reason}",
                f"rewards: {self.rewards}",
                f"details: {self.url}",
            ]
        )


def told_by_the_worker(context: Mapping[str, Any]) -> bool:
    """Whether a task's failure callback runs in its worker, where it may write an XCom.

    A failure the scheduler found (the worker was killed, or its heartbeat timed out) is told
    from the DAG processor (airflow/dag_processing/processor.py, _execute_task_callbacks), whose
    supervisor reads no XCom write: SetXCom is not in its ToManager messages, so a push waits,
    unanswered, until dag_file_processor_timeout kills the callback, its notice unsent. Only the
    worker's task runner puts "exception" in the context (airflow/sdk/execution_time/
    task_runner.py, `context["exception"] = error`, before finalize runs the callbacks).
    """
    return "exception" in context


def failure_from_context(context: Mapping[str, Any]) -> RunFailure:
    """The failure a task's (or the DAG's) failure callback context describes."""
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    base = conf.get("api", "base_url", fallback="http://localhost:8080/").rstrip("/")
    if context.get("reason"):  # the DAG's callback: the run itself ended (e.g. timed out)
        return RunFailure(
            dag_id=dag_id,
            run_id=run_id,
            task_id=None,
            reason=f"the run ended: {context['reason']}",
            rewards="see the run's wait_for_rewards task",
            url=f"{base}/dags/{dag_id}/runs/{run_id}",
        )
    ti = context["ti"]
    rewards = ti.xcom_pull(task_ids=REWARDS_TASK)
    return RunFailure(
        dag_id=dag_id,
        run_id=run_id,
        task_id=ti.task_id,
        reason=(
            first_line(context["exception"])
            if told_by_the_worker(context)
            else "its worker ended without a word (killed, or its heartbeat timed out)"
        ),
        rewards=rewards_line(rewards if isinstance(rewards, Mapping) else None),
        url=ti.log_url,
    )


def chat_text(text: str) -> str:
    """Text a chat webhook shows as written: `&`, `<` and `>` escaped as Slack documents
    (docs.slack.dev/messaging/formatting-message-text, "Escaping text"), so `<!channel>`,
    `<users/all>` (Google Chat's mention, developers.google.com/workspace/chat/format-messages)
    or a disguised `<url|text>` link from a Param reach no one as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def setting(key: str) -> str:
    return (conf.get(CONFIG_SECTION, key, fallback="") or "").strip()


class Notice(Protocol):
    """A message for the deployment's channels: a failure, or an approval request."""

    @property
    def subject(self) -> str: ...

    @property
    def text(self) -> str: ...


def channels(failure: Notice) -> list[BaseNotifier]:
    """The provider notifiers the deployer configured, each carrying this notice's message."""
    found: list[BaseNotifier] = []
    if to := [a.strip() for a in setting("notify_email_to").split(",") if a.strip()]:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        found.append(
            SmtpNotifier(
                to=to,
                from_email=setting("notify_email_from") or None,
                subject=failure.subject,
                html_content=f"<pre>{html.escape(failure.text)}</pre>",
                smtp_conn_id=setting("notify_smtp_conn_id") or "smtp_default",
            )
        )
    if webhook := setting("notify_webhook_conn_id"):
        from airflow.providers.http.notifications.http import HttpNotifier

        found.append(
            HttpNotifier(
                http_conn_id=webhook,
                endpoint="",
                json={"text": chat_text(failure.text)},
                headers={"Content-Type": "application/json"},
                extra_options={"timeout": NOTICE_TIMEOUT_SECONDS},
            )
        )
    return found


def another_task_failed(context: Mapping[str, Any]) -> bool:
    """Whether a task of this run other than the current one failed (and so told people)."""
    ti, run_id = context["ti"], context["run_id"]
    others = [task_id for task_id in context["dag"].task_ids if task_id != ti.task_id]
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=others, run_ids=[run_id])
    return "failed" in states.get(run_id, {}).values()
