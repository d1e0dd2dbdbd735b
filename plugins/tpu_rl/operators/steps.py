"""The DAG's small Python steps as operators: validation, the reward gate, the export check.

Plain operators rather than `@task`: importing `airflow.sdk.task` alone adds about 0.2 s to
every parse of the DAG file (`make bench`, parse_overhead_ratio).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

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
