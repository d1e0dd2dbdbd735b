"""The reward sensor with what it follows, its intervals and limits taken from the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import RunLimited
from tpu_rl.operators import on_run_cluster
from tpu_rl.rewards.sensor import RewardSensor

# What the wait does (tpu_rl.operators.reward_resume: layout, manifests, kube, resume history) is
# imported where it runs, not on every parse of the DAG file.

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RunLimited, RewardSensor):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts.

    The names are computed from the run (settings and run id), as the steps that create the
    Job and JobSet compute them: no XCom template. The total timeout is also capped at the
    run's work deadline (`apply_run_limits`). The moment the wait ends, whichever way, the
    Pathways backend is deleted: by the trigger, and here again, best effort (a 5xx never
    costs the rewards; `stop_backend` and the `cleanup_kubernetes` teardown delete it too).
    The Hugging Face token is registered with the secrets masker in this process too: the
    wait relays the training pod's log lines.

    When the training lost its TPU capacity (a `capacity_lost` event: preempted or removed
    nodes, evicted pods), the wait resumes it at most `max_training_restarts` times: a new
    backend, then a new training Job, under the same names, run_name and checkpoint directory
    (MaxText restores its newest complete checkpoint), within the same total timeout. The
    result's `pre` is the first attempt's Pre line; `attempts` lists the attempts (also pushed
    under the XCom key "attempts" at each resume or failure). The count of resumes lives in the
    task state store, so retries do not reset it. (Deferred waits only: a poking sensor fails.)
    """

    def __init__(self, **kwargs: Any) -> None:
        # on the run's cluster unless named; what it follows is set from the run in execute
        super().__init__(**on_run_cluster({"job_name": "", **kwargs}))

    def execute(self, context: Context) -> Any:
        from tpu_rl.operators.reward_resume import start

        return start(self, context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from tpu_rl.operators.reward_resume import complete

        return complete(self, context, event)

    def resubmit_backend(self, context: Context, event: dict[str, Any]) -> None:
        """After a capacity loss, the lost attempt is gone: a new backend, waited for."""
        from tpu_rl.operators.reward_resume import resubmit_backend

        resubmit_backend(self, context, event)

    def resume_training(self, context: Context, event: dict[str, Any]) -> Any:
        """The new backend runs: the training Job again, followed afresh."""
        from tpu_rl.operators.reward_resume import resume_training

        return resume_training(self, context, event)
