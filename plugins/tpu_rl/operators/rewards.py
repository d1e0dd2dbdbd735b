"""The reward sensor with its intervals and limits taken from the run's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl import deployment
from tpu_rl.limits import DEADLINE_ATTR
from tpu_rl.operators.kubernetes import delete_backend
from tpu_rl.reward_sensor import RewardSensor
from tpu_rl.runtime import layout_from_context

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RewardSensor):
    """RewardSensor whose poll interval, pending and total timeouts are the run's settings.

    The total timeout is also capped at the run's work deadline (`apply_run_limits`). The
    moment the wait ends, whichever way, the Pathways backend is deleted: by the trigger, and
    here again, best effort (a 5xx never costs the rewards; `stop_backend` and the
    `cleanup_kubernetes` teardown delete it too). The Hugging Face token is registered with the
    secrets masker in this process too: the wait relays the training pod's log lines.
    """

    def execute(self, context: Context) -> Any:
        s = layout_from_context(context).settings
        self._mask_token()
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        self.deadline_cap = getattr(self, DEADLINE_ATTR, None)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        self._mask_token()
        try:
            return super().execute_complete(context, event)
        finally:
            self._release_tpus()

    def _mask_token(self) -> None:
        """Register the token with the masker; one this process cannot read it cannot log."""
        try:
            deployment.hf_token()
        except deployment.DeploymentError as err:
            self.log.warning("Hugging Face token not registered for masking: %s", err)

    def _release_tpus(self) -> None:
        """Delete the backend; never raises (the rewards are worth more than this delete)."""
        if not self.backend_jobset_name:
            return
        try:
            deleted = delete_backend(self.hook.get_conn(), self.namespace, self.backend_jobset_name)
        except Exception as err:
            self.log.warning(
                "Could not delete backend %s now (%s); stop_backend and cleanup will.",
                self.backend_jobset_name,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
            return
        self.log.info(
            "Backend %s %s.", self.backend_jobset_name, "deleted" if deleted else "already gone"
        )
