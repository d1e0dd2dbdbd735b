"""The reward sensor with what it follows, its intervals and limits taken from the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl import manifests
from tpu_rl.kube import delete_backend
from tpu_rl.layout import JOB_NAME_PREFIX, RunLayout
from tpu_rl.reward_sensor import RewardSensor
from tpu_rl.runtime import layout_from_context

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RewardSensor):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts.

    The names are computed from the run (settings and run id), as the steps that create the
    Job and JobSet compute them: no XCom template. The moment the wait ends, whichever way,
    it deletes the Pathways backend: the TPUs are released without waiting for the next task
    (`stop_backend` then finds it gone; `cleanup_kubernetes` covers runs whose wait never
    started).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("job_name", "")  # set from the run in execute
        super().__init__(**kwargs)

    def execute(self, context: Context) -> Any:
        s = self._follow_run(context).settings
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
        self.container_name = self.container_name or manifests.CONTAINER
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        self._follow_run(context)
        try:
            return super().execute_complete(context, event)
        finally:
            self._release_tpus()

    def _follow_run(self, context: Context) -> RunLayout:
        """Follow the run's training Job (its training container) and backend JobSet."""
        layout = layout_from_context(context)
        self.namespace = layout.settings.namespace
        self.job_name = JOB_NAME_PREFIX + layout.train_job_base
        self.container_name = manifests.CONTAINER
        self.backend_jobset_name = layout.backend_jobset
        return layout

    def _release_tpus(self) -> None:
        deleted = delete_backend(self.hook.get_conn(), self.namespace, self.backend_jobset_name)
        self.log.info(
            "Backend %s %s.", self.backend_jobset_name, "deleted" if deleted else "already gone"
        )
