"""The reward sensor with what it follows, its intervals and limits taken from the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl import deployment, manifests
from tpu_rl.kube import delete_backend
from tpu_rl.layout import JOB_NAME_PREFIX, RunLayout
from tpu_rl.limits import DEADLINE_ATTR
from tpu_rl.reward_sensor import RewardSensor
from tpu_rl.runtime import layout_from_context

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RewardSensor):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts.

    The names are computed from the run (settings and run id), as the steps that create the
    Job and JobSet compute them: no XCom template. The total timeout is also capped at the
    run's work deadline (`apply_run_limits`). The moment the wait ends, whichever way, the
    Pathways backend is deleted: by the trigger, and here again, best effort (a 5xx never
    costs the rewards; `stop_backend` and the `cleanup_kubernetes` teardown delete it too).
    The Hugging Face token is registered with the secrets masker in this process too: the
    wait relays the training pod's log lines.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("job_name", "")  # set from the run in execute
        super().__init__(**kwargs)

    def execute(self, context: Context) -> Any:
        s = self._follow_run(context).settings
        self._mask_token()
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
        self.container_name = self.container_name or manifests.CONTAINER
        self.deadline_cap = getattr(self, DEADLINE_ATTR, None)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        self._follow_run(context)
        self._mask_token()
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
