"""The headless Pathways backend (the JobSet holding the TPU slice): started and waited for in
the triggerer, and stopped once the reward wait ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import SIDE, pending_plus_step, short_step
from tpu_rl.dag.links import BACKEND_LINKS
from tpu_rl.names import BACKEND_PODS, Step
from tpu_rl.operators.cluster_objects import RunClusterStep

if TYPE_CHECKING:
    from airflow.sdk import Context


class StartPathwaysBackendOperator(RunClusterStep):
    """Creates the run's headless Pathways JobSet, then waits in the triggerer until all its
    pods run (at most the run's pending timeout)."""

    step_id = Step.START_BACKEND
    pods_of = BACKEND_PODS
    step_doc = """
Starts the headless Pathways backend (a JobSet holding the TPU slice) and waits until all its
pods run, at most `pending_timeout_minutes` (TPU capacity or Kueue can hold them).

**Failed?** Pending pods: the log names the condition (Kueue admission, TPU capacity).
"""
    limit = pending_plus_step(2)
    operator_extra_links = BACKEND_LINKS

    def execute(self, context: Context) -> None:
        from tpu_rl.backend.lifecycle import backend_running_trigger, submit_backend
        from tpu_rl.dag.run_limits import capped_deadline

        layout = self.run_layout(context)
        submit_backend(self.custom, layout, self.log)
        pending = layout.settings.pending_timeout_minutes * 60
        self.defer(
            trigger=backend_running_trigger(self, layout, capped_deadline(self, pending)),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """The backend JobSet's name once all its pods run (the training client may start)."""
        from tpu_rl.backend.lifecycle import backend_failure

        if (failure := backend_failure(event)) is not None:
            raise failure
        return self.run_layout(context).backend_jobset


class StopPathwaysBackendOperator(RunClusterStep):
    """Deletes the backend JobSet (it holds the TPUs); already gone is fine.

    The reward sensor deletes it when its wait ends (unless the deployment has a champion:
    then evaluate_champion runs on it first), and cleanup_kubernetes deletes it in any run, so
    this step deletes a backend kept for the champion and otherwise only makes sure.
    """

    step_id = Step.STOP_BACKEND
    pods_of = BACKEND_PODS
    step_doc = """
Deletes the Pathways JobSet once the reward wait ended and the champion was evaluated on it,
beside the gate and the export, so the TPUs stop billing. Without a champion the wait already
released it, so this only makes sure.
"""
    limit = short_step(2, SIDE)
    operator_extra_links = BACKEND_LINKS

    def execute(self, context: Context) -> bool:
        from tpu_rl.kube.objects import delete_backend

        layout = self.run_layout(context)
        namespace, name = layout.settings.namespace, layout.backend_jobset
        deleted = delete_backend(self.custom.api_client, namespace, name)
        self.log.info("Backend %s %s.", name, "deleted" if deleted else "already gone")
        return deleted
