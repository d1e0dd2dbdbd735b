"""The reward sensor with its intervals and limits taken from the run's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl import manifests
from tpu_rl.operators.kubernetes import delete_backend
from tpu_rl.reward_sensor import RewardSensor
from tpu_rl.runtime import layout_from_context

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RewardSensor):
    """RewardSensor whose poll interval, pending and total timeouts are the run's settings.

    The moment the wait ends, whichever way, it deletes the Pathways backend: the TPUs are
    released without waiting for the next task to be scheduled (`stop_backend` then finds
    it gone; `cleanup_kubernetes` covers runs whose wait never started).
    """

    def execute(self, context: Context) -> Any:
        s = layout_from_context(context).settings
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
        self.container_name = self.container_name or manifests.CONTAINER
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().execute_complete(context, event)
        finally:
            self._release_tpus()

    def _release_tpus(self) -> None:
        if not self.backend_jobset_name:
            return
        deleted = delete_backend(self.hook.get_conn(), self.namespace, self.backend_jobset_name)
        self.log.info(
            "Backend %s %s.", self.backend_jobset_name, "deleted" if deleted else "already gone"
        )
