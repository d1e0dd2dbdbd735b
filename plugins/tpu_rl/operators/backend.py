"""The headless Pathways backend (the JobSet holding the TPU slice): started and waited for in
the triggerer, and stopped once the reward wait ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import SIDE, rung_waits, short_step
from tpu_rl.dag.links import BACKEND_LINKS
from tpu_rl.names import BACKEND_PODS, Step
from tpu_rl.operators.cluster_objects import RunClusterStep
from tpu_rl.operators.rung_move import PENDING_TIMEOUT, RungMove

if TYPE_CHECKING:
    from airflow.sdk import Context
    from kubernetes.client import CoreV1Api

    from tpu_rl.layout import RunLayout


class StartPathwaysBackendOperator(RungMove, RunClusterStep):
    """Creates the run's headless Pathways JobSet, then waits in the triggerer until all its
    pods run (at most the run's pending timeout); on a capacity ladder, a rung whose pods are
    still pending then is left for the next (RungMove)."""

    step_id = Step.START_BACKEND
    pods_of = BACKEND_PODS
    step_doc = """
Starts the headless Pathways backend (a JobSet holding the TPU slice) and waits until all its
pods run, at most `pending_timeout_minutes` (TPU capacity or Kueue can hold them). With a
`capacity_ladder`, pods still pending after `rung_wait_seconds` (on the last rung: the pending
timeout) move the run to the next rung: the backend is
deleted, the next rung's TPU pool deployed, and the backend started there.

**Failed?** Pending pods: the log names the condition (Kueue admission, TPU capacity).
"""
    limit = rung_waits(2)
    operator_extra_links = BACKEND_LINKS

    def execute(self, context: Context) -> str:
        from tpu_rl.backend.lifecycle import backend_running_trigger, backend_runs, submit_backend
        from tpu_rl.cluster.ladder import wait_s
        from tpu_rl.dag.run_limits import capped_deadline

        layout = self.run_layout(context)
        if not submit_backend(self.custom, layout, self.log) and backend_runs(self.custom, layout):
            self.log.info("All the backend's pods run already: nothing to wait for.")
            return layout.backend_jobset
        self.defer(
            trigger=backend_running_trigger(
                self, layout, capped_deadline(self, wait_s(layout.settings))
            ),
            method_name="execute_complete",
        )

    def rung_holder(self, layout: RunLayout) -> tuple[str, str]:
        from tpu_rl.kube.objects import jobset_path

        name = layout.backend_jobset
        return f"JobSet {name}", jobset_path(layout.settings.namespace, name)

    def delete_rung_holder(self, layout: RunLayout) -> None:
        from tpu_rl.kube.objects import delete_backend

        delete_backend(self.custom.api_client, layout.settings.namespace, layout.backend_jobset)

    def core_api(self) -> CoreV1Api:
        return self.core

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """The backend JobSet's name once all its pods run (the training client may start)."""
        from tpu_rl.backend.lifecycle import backend_failure

        if (failure := backend_failure(event)) is not None:
            if event.get("reason") == PENDING_TIMEOUT and self.leave_rung(context, event):
                return self.run_layout(context).backend_jobset  # not reached: leave_rung defers
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
