"""The run's verdict, as a teardown: the run succeeded only when its last step did.

Why a task: after "mark failed" (the UI or REST) Airflow 3.3 fails the running task, skips the
pending ones and lets the teardowns finish; the run's state is then computed from its leaves,
and skipped leaves count as success. This teardown (on_failure_fail_dagrun) is the one leaf, so
a run stopped half-way, a failed step, or an incomplete cleanup all end the run failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from tpu_rl.limits import RunLimited

if TYPE_CHECKING:
    from airflow.sdk import Context

FAILED = ("failed", "upstream_failed")


class RunOutcomeOperator(RunLimited, BaseOperator):
    """Fails, naming them, unless `final_task` succeeded and no step or cleanup failed."""

    ui_color = "#eeeeee"

    def __init__(self, *, final_task: str, watched: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.final_task = final_task
        self.watched = list(watched)

    def execute(self, context: Context) -> dict[str, Any]:
        run_id = context["run_id"]
        states = (
            context["ti"]
            .get_task_states(dag_id=context["dag"].dag_id, task_ids=self.watched, run_ids=[run_id])
            .get(run_id, {})
        )
        failed = {task: state for task, state in states.items() if state in FAILED}
        final = states.get(self.final_task)
        if failed or final != "success":
            listed = ", ".join(f"{task} {state}" for task, state in sorted(failed.items()))
            raise AirflowFailException(
                f"the run did not succeed: {self.final_task} is {final}"
                + (f"; {listed}" if listed else " (stopped before it ran: marked failed?)")
            )
        self.log.info("%s succeeded and every cleanup did its part.", self.final_task)
        return {"final_task": self.final_task, "states": states}
