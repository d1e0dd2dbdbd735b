"""The headless Pathways backend (the JobSet holding the TPU slice): started and waited for in
the triggerer, and stopped once the reward wait ended."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import SIDE, rung_waits, short_step
from tpu_rl.dag.links import BACKEND_LINKS
from tpu_rl.names import BACKEND_PODS, Step
from tpu_rl.operators.cluster_objects import RunClusterStep

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import RunSettings

PENDING_TIMEOUT = "pending_timeout"  # the pods trigger's event reason (kube.pods_trigger)
SCALE_UP_FAILED = "FailedScaleUp"  # GKE cluster autoscaler's event reason (see RungMove)


class RungMove(RunClusterStep):
    """Leaving a capacity ladder's rung whose TPU pool gave no slice within its wait limit.

    A flex-start pool is made with no node, so its deploy stands whatever the zone holds; the
    slice comes (or not) when the backend's pods ask for it. When they are still pending at the
    rung's wait limit (`rung_wait_seconds`, the last rung's `pending_timeout_minutes`: a
    stockout, a pool that cannot scale),
    start_backend deletes the backend, waits in the triggerer until it is gone, deploys the next
    rungs in turn (tpu_rl.cluster.climb: the pool is replaced, nothing of the old rung is left
    billing) and starts the backend there. GKE's reason is the cluster autoscaler's FailedScaleUp
    event on the backend's pods when there is one (GKE cluster-autoscaler, events package:
    failedScaleUpReason, zonalErrorMessageTemplate "Node scale up in zones %v associated with
    this pod failed: %v. Pod is at risk of not being scheduled.", outOfResourcesMessage "GCE out
    of resources"), else the pods' pending condition.
    """

    def leave_rung(self, context: Context, event: dict[str, Any]) -> bool:
        """Start the move when the ladder has a rung after the current one; fail naming each
        rung's reason after the last; False without a ladder."""
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl.cluster import climb, ladder
        from tpu_rl.dag.runtime import ladder_xcom
        from tpu_rl.kube import objects as kube
        from tpu_rl.kube.removed_trigger import REMOVAL_TIMEOUT_S, RemovedTrigger

        layout = self.run_layout(context)
        s = layout.settings  # on the current rung
        rungs, current = ladder.rungs(s), ladder.Rung(s.capacity, s.zone)
        if len(rungs) == 1 or current not in rungs:
            return False
        index = rungs.index(current)
        reason = self.scale_up_failure(layout) or str(event.get("message") or "")
        tries = ladder_xcom(context, climb.RUNGS_KEY) or []
        tries = climb.left_rung(tries, current, climb.NO_SLICE, reason)
        context["ti"].xcom_push(key=climb.RUNGS_KEY, value=tries)
        if index + 1 == len(rungs):  # cleanup_kubernetes deletes the backend
            raise AirflowException(climb.exhausted(tries))
        self.log.warning(climb.change_line(index, current, reason, rungs[index + 1]))
        name = layout.backend_jobset
        kube.delete_backend(self.custom.api_client, s.namespace, name)
        self.defer(
            trigger=RemovedTrigger.for_operator(
                self,
                {f"JobSet {name}": kube.jobset_path(s.namespace, name)},
                deadline=time.time() + REMOVAL_TIMEOUT_S,
                poll_interval=min(float(s.poll_interval_seconds), 5.0),
            ),
            method_name="deploy_next_rung",
        )
        return True

    def deploy_next_rung(self, context: Context, event: dict[str, Any]) -> Any:
        """The old rung's backend is gone: deploy the next rungs until one stands, then start
        the backend there."""
        from airflow.providers.common.compat.sdk import AirflowException

        if event.get("status") != "success":
            raise AirflowException(f"capacity ladder: {event.get('message')}")
        deploy_rungs_after(context, self.run_layout(context).settings, self.log)
        self._layout = None  # the layout is the new rung's from here
        return self.execute(context)

    def scale_up_failure(self, layout: RunLayout) -> str | None:
        """The newest FailedScaleUp event on the backend's pods, or None."""
        try:
            events = self.core.list_namespaced_event(layout.settings.namespace).items
        except Exception as err:  # the reason is worth less than the move
            self.log.info("Events not read (%s); the pods' condition is the reason.", err)
            return None
        prefix = f"{layout.backend_jobset}-"
        failed = [
            e
            for e in events
            if e.reason == SCALE_UP_FAILED and (e.involved_object.name or "").startswith(prefix)
        ]
        return failed[-1].message if failed else None


class StartPathwaysBackendOperator(RungMove):
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


def deploy_rungs_after(context: Context, current: RunSettings, log: Any) -> None:
    """Deploy the capacity ladder's rungs after `current` (the settings on the rung being left)
    in turn until one stands (tpu_rl.cluster.climb: the TPU pool is replaced, nothing of the old
    rung is left billing); the calling task pushes the tries and the new rung as XComs."""
    from tpu_rl import deployment
    from tpu_rl.cluster import blueprint, climb, ladder
    from tpu_rl.cluster.session import toolkit_bundle, toolkit_session
    from tpu_rl.dag.runtime import ladder_xcom, run_deployment
    from tpu_rl.settings.run_settings import load_settings

    settings = load_settings(dict(context["params"]))
    rungs, ti = ladder.rungs(settings), context["ti"]
    with toolkit_session(
        toolkit_bundle(settings),
        settings.project,
        run_deployment(context),
        deployment.check_gcp_connection(),
        blueprint.default_state_prefix(settings),
        settings.cluster_timeout_minutes * 60.0,
        log,
    ) as gcluster:
        climb.climb(
            settings,
            lambda on: gcluster(on, lambda steps: [steps.deploy]),
            log,
            lambda key, value: ti.xcom_push(key=key, value=value),
            start=rungs.index(ladder.Rung(current.capacity, current.zone)) + 1,
            tries=ladder_xcom(context, climb.RUNGS_KEY),
        )
