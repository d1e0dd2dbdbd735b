"""The DAG's small steps as operators: the bucket, and one operator for the Python steps
(validation, the reward gate, the export check, the run's verdict).

Plain operators rather than `@task`: importing `airflow.sdk.task` alone adds about 0.2 s to
every parse of the DAG file. One class for the Python steps, `step` naming which: their code
(tpu_rl.operators.tasks: settings, storage, the report) is imported where a task runs, not on every
parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator
from airflow.sdk import BaseOperator

from tpu_rl.dag.limits import RunLimited
from tpu_rl.operators import RUN_CLUSTER

if TYPE_CHECKING:
    from airflow.sdk import Context

PYTHON_STEPS = ("validate", "gate", "verify", "outcome")


class EnsureBucketOperator(RunLimited, GCSCreateBucketOperator):
    """The provider's bucket creation (unless it exists), under the run's limits; by default
    the run's bucket, in its region."""

    def __init__(self, **kwargs: Any) -> None:
        run_bucket = {
            "bucket_name": "{{ params.gcs_bucket }}",
            "project_id": RUN_CLUSTER["project_id"],
            "location": RUN_CLUSTER["location"],  # the cluster's region
            "storage_class": "STANDARD",  # the operator's MULTI_REGIONAL is refused in a region
        }
        super().__init__(**{**run_bucket, **kwargs})


class RunStepOperator(RunLimited, BaseOperator):
    """One of the run's Python steps (tpu_rl.operators.tasks), with `inputs` as its arguments
    (templated,
    so an XComArg among them is pulled):

    - `validate`: the run's settings (Params + conf), checked; every problem in one failure.
    - `gate` (`rewards`): fails the run before export unless post mean_reward >= pre + the
      run's min_reward_gain.
    - `verify`: checks the exported files, writes the run report, and emits the export's URI
      as an event of every outlet Asset.
    - `outcome` (`final_task`, `watched`): the run's verdict, as a teardown: fails, naming
      them, unless `final_task` succeeded and no watched task (by default: every other task,
      steps and cleanups) failed.
    """

    template_fields: Sequence[str] = ("inputs",)

    def __init__(self, *, step: str, inputs: Mapping[str, Any] | None = None, **kwargs: Any):
        if step not in PYTHON_STEPS:
            raise ValueError(f"step {step!r} is none of {', '.join(PYTHON_STEPS)}")
        super().__init__(**kwargs)
        self.step = step
        self.inputs = dict(inputs or {})

    def execute(self, context: Context) -> Any:
        from tpu_rl.operators.tasks import STEPS

        return STEPS[self.step](self, context, **self.inputs)
