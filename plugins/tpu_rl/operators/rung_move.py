"""Leaving a capacity ladder's rung whose TPU pool gave no slice within its wait limit: the
first workload that asks for the slice (the conversion Job, or the backend JobSet when the
conversion is already in the bucket) is deleted, the next rung deployed, and the step started
again there."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    from airflow.sdk import Context
    from kubernetes.client import CoreV1Api

    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.fields import RunSettings
    from tpu_rl.settings.rungs import Rung

PENDING_TIMEOUT = "pending_timeout"  # the pods trigger's event reason (kube.pods_trigger)
SCALE_UP_FAILED = "FailedScaleUp"  # GKE cluster autoscaler's event reason (see RungMove)


class RungMove(RunStep):
    """The base of the steps whose workload asks for the TPU slice on a capacity ladder (first
    in their bases, before the step's kind: RunJobStep, RunClusterStep).

    A flex-start pool is made with no node, so its deploy stands whatever the zone holds; the
    slice comes (or not) when a workload's pods ask for it. When they are still pending at the
    rung's wait limit (`rung_wait_seconds`, the last rung's `pending_timeout_minutes`: a
    stockout, a pool that cannot scale), the step deletes its workload (`rung_holder`), waits in
    the triggerer until it is gone, deploys the next rungs in turn (tpu_rl.cluster.climb: the
    pool is replaced, nothing of the old rung is left billing) and runs again there. GKE's
    reason is the cluster autoscaler's FailedScaleUp event on the workload's pods when there is
    one (GKE cluster-autoscaler, events package: failedScaleUpReason, zonalErrorMessageTemplate
    "Node scale up in zones %v associated with this pod failed: %v. Pod is at risk of not being
    scheduled.", outOfResourcesMessage "GCE out of resources"), else the pods' pending condition.
    """

    def rung_holder(self, layout: RunLayout) -> tuple[str, str]:
        """The workload asking for the slice: its kind and name ("JobSet x") and API path; its
        pods' names start with its name."""
        raise NotImplementedError

    def delete_rung_holder(self, layout: RunLayout) -> None:
        raise NotImplementedError

    def core_api(self) -> CoreV1Api:
        raise NotImplementedError

    def leave_rung(self, context: Context, event: dict[str, Any]) -> bool:
        """Start the move when the ladder has a rung after the current one; fail naming each
        rung's reason after the last; False without a ladder."""
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl.cluster import climb, ladder
        from tpu_rl.kube.removed_trigger import REMOVAL_TIMEOUT_S, RemovedTrigger
        from tpu_rl.settings.rungs import Rung

        layout = self.run_layout(context)
        s = layout.settings  # on the current rung
        rungs = ladder.rungs(s)
        if len(rungs) == 1 or Rung(s.capacity, s.zone) not in rungs:
            return False
        what, path = self.rung_holder(layout)
        reason = self.scale_up_failure(layout, what.split()[-1]) or str(event.get("message") or "")
        tries, nxt = record_rung_left(context, s, climb.NO_SLICE, reason, self.log)
        if nxt is None:  # cleanup_kubernetes deletes the workload
            raise AirflowException(climb.exhausted(tries))
        self.delete_rung_holder(layout)
        self.defer(
            trigger=RemovedTrigger.for_operator(
                self,
                {what: path},
                deadline=time.time() + REMOVAL_TIMEOUT_S,
                poll_interval=min(float(s.poll_interval_seconds), 5.0),
            ),
            method_name="deploy_next_rung",
        )
        return True

    def deploy_next_rung(self, context: Context, event: dict[str, Any]) -> Any:
        """The old rung's workload is gone: deploy the next rungs until one stands, then run
        the step again there."""
        from airflow.providers.common.compat.sdk import AirflowException

        if event.get("status") != "success":
            raise AirflowException(f"capacity ladder: {event.get('message')}")
        deploy_rungs_after(context, self.run_layout(context).settings, self.log)
        self._layout = None  # the layout is the new rung's from here
        return self.execute(context)

    def scale_up_failure(self, layout: RunLayout, owner: str) -> str | None:
        """The newest FailedScaleUp event on the pods of `owner`, or None."""
        try:
            events = self.core_api().list_namespaced_event(layout.settings.namespace).items
        except Exception as err:  # the reason is worth less than the move
            self.log.info("Events not read (%s); the pods' condition is the reason.", err)
            return None
        prefix = f"{owner}-"
        failed = [
            e
            for e in events
            if e.reason == SCALE_UP_FAILED and (e.involved_object.name or "").startswith(prefix)
        ]
        return failed[-1].message if failed else None


def record_rung_left(
    context: Context, current: RunSettings, outcome: str, reason: str, log: Any
) -> tuple[list[dict[str, Any]], Rung | None]:
    """Record the rung the run is on (`current`: the settings on it) as left with `outcome` and
    `reason` in the ladder's record (tpu_rl.cluster.rung_record; the run stands on it until the
    next rung stands), and say where the run moves: the tries and the next rung (None: it was
    the last)."""
    from tpu_rl.cluster import climb, ladder
    from tpu_rl.cluster.rung_record import recorded_tries, write_tries
    from tpu_rl.settings.rungs import Rung

    rungs, rung = ladder.rungs(current), Rung(current.capacity, current.zone)
    tries = climb.left_rung(recorded_tries(context["ti"]), rung, outcome, reason)
    write_tries(context["ti"], tries)
    index = rungs.index(rung)
    if index + 1 == len(rungs):
        return tries, None
    log.warning(climb.change_line(index, rung, reason, rungs[index + 1]))
    return tries, rungs[index + 1]


def deploy_rungs_after(context: Context, current: RunSettings, log: Any) -> None:
    """Deploy the capacity ladder's rungs after `current` (the settings on the rung being left)
    in turn until one stands (tpu_rl.cluster.climb: the TPU pool is replaced, nothing of the old
    rung is left billing); each rung's try goes to the ladder's record
    (tpu_rl.cluster.rung_record), whose newest is the rung the run then stands on."""
    from tpu_rl import deployment
    from tpu_rl.cluster import blueprint, climb, ladder
    from tpu_rl.cluster.rung_record import recorded_tries, write_tries
    from tpu_rl.cluster.session import toolkit_bundle, toolkit_session
    from tpu_rl.dag.runtime import run_deployment
    from tpu_rl.settings.run_settings import load_settings
    from tpu_rl.settings.rungs import Rung

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
            lambda tries: write_tries(ti, tries),
            start=rungs.index(Rung(current.capacity, current.zone)) + 1,
            tries=recorded_tries(ti),
        )
