"""The DAG's small steps as operators: validation, the bucket, the reward gate, the export check
and the run's verdict.

Plain operators rather than `@task`: importing `airflow.sdk.task` alone adds about 0.2 s to
every parse of the DAG file (`make bench`, parse_overhead_ratio).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from tpu_rl.limits import RunLimited

# The steps themselves (tpu_rl.tasks: settings, storage, the report) are imported where a task
# runs, not on every parse of the DAG file.

if TYPE_CHECKING:
    from airflow.sdk import Context


class ValidateSettingsOperator(RunLimited, BaseOperator):
    """The run's settings (Params + conf), checked; every problem in one failure."""

    def execute(self, context: Context) -> dict[str, Any]:
        from tpu_rl.tasks import validate_settings

        timeout = context["dag"].dagrun_timeout
        return validate_settings(context["params"], timeout.total_seconds() / 60)


class EnsureBucketOperator(RunLimited, GCSCreateBucketOperator):
    """The provider's bucket creation (unless it exists), under the run's limits."""


class RewardGateOperator(RunLimited, BaseOperator):
    """Fails the run before export unless post mean_reward >= pre + the run's min_reward_gain."""

    template_fields = ("rewards",)

    def __init__(self, *, rewards: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rewards = rewards

    def execute(self, context: Context) -> dict[str, float]:
        from tpu_rl.tasks import reward_gate

        return reward_gate(self.rewards, float(context["params"]["min_reward_gain"]))


class VerifyExportOperator(RunLimited, BaseOperator):
    """Checks the exported files, writes the run report, and emits the export's URI as an
    event of every outlet Asset."""

    def execute(self, context: Context) -> str:
        from tpu_rl.tasks import verify_export

        uri = verify_export(context)
        for asset in self.outlets:
            context["outlet_events"][asset].extra = {"uri": uri, "run_id": context["run_id"]}
        return uri


FAILED = ("failed", "upstream_failed")


class RunOutcomeOperator(RunLimited, BaseOperator):
    """The run's verdict, as a teardown: fails, naming them, unless `final_task` succeeded and no
    step or cleanup failed.

    Why a task: after "mark failed" (the UI or REST) Airflow 3.3 fails the running task, skips
    the pending ones and lets the teardowns finish; the run's state is then computed from its
    leaves, and skipped leaves count as success. This teardown (on_failure_fail_dagrun) is the
    one leaf, so a run stopped half-way, a failed step, or an incomplete cleanup all end the run
    failed.
    """

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
