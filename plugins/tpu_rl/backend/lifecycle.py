"""The Pathways backend JobSet: its submission once Kueue covers it, the triggerer's wait until
its pods run, and what a failed wait raises (for start_backend and the reward wait's resume)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from kubernetes.client import CustomObjectsApi
from kubernetes.client.rest import ApiException

from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.backend import kueue
from tpu_rl.kube import verdicts
from tpu_rl.kube.objects import JOBSET, JOBSET_NAME_LABEL

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout


def submit_backend(custom: CustomObjectsApi, layout: RunLayout, log: Any) -> bool:
    """Create the run's headless Pathways JobSet once Kueue is known to cover it; one an
    earlier try created is kept (False: it was there already)."""
    jobset = pathways_jobset.backend_jobset(layout)
    namespace, name = layout.settings.namespace, layout.backend_jobset
    if layout.settings.kueue_queue:
        try:
            kueue.ensure_coverage(custom, layout, jobset, log)
        except kueue.KueueError as err:
            raise AirflowFailException(str(err)) from err
    try:
        custom.create_namespaced_custom_object(namespace=namespace, body=jobset, **JOBSET)
        log.info("Created JobSet %s/%s.", namespace, name)
    except ApiException as err:
        if err.status != 409:
            raise
        log.info("JobSet %s/%s exists from an earlier try.", namespace, name)
        return False
    return True


def backend_pod_count(layout: RunLayout) -> int:
    """The backend's pods: its head and a worker per TPU host of every slice."""
    return 1 + layout.pool_hosts


def found_backend(custom: CustomObjectsApi, layout: RunLayout) -> dict[str, Any] | None:
    """The run's backend JobSet as the cluster has it; None when there is none."""
    namespace, name = layout.settings.namespace, layout.backend_jobset
    try:
        found: dict[str, Any] = custom.get_namespaced_custom_object(
            namespace=namespace, name=name, **JOBSET
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return found


def backend_runs(custom: CustomObjectsApi, layout: RunLayout) -> bool:
    """All the backend's pods run already (a JobSet an earlier try made): nothing to wait for.

    A wait deferred then ends at once, and Airflow's scheduler can fail the resumed try when it
    drains the deferring try's executor event after the resume started (apache/airflow#72716,
    open in 3.3; the scheduled and queued variants were fixed by #66431 and #68741): a step
    whose wait is met does not defer, as Airflow's deferrable sensors poke before deferring.
    """
    from kubernetes.client import CoreV1Api

    namespace, name = layout.settings.namespace, layout.backend_jobset
    if (jobset := found_backend(custom, layout)) is None:
        return False
    selector = f"{JOBSET_NAME_LABEL}={name}"
    found = CoreV1Api(custom.api_client).list_namespaced_pod(namespace, label_selector=selector)
    pods = [custom.api_client.sanitize_for_serialization(p) for p in found.items]
    what = f"JobSet {name}"
    failure, waiting = verdicts.pods_verdict(what, jobset, pods, backend_pod_count(layout), True)
    return failure is None and waiting is None


def backend_running_trigger(operator: Any, layout: RunLayout, deadline: float) -> Any:
    """The triggerer's wait (no worker slot) until all the backend's pods run; a Workload
    Kueue can never admit ends it within one poll."""
    from tpu_rl.kube.pods_trigger import PodsReadyTrigger  # the triggerer's (aiohttp): when used

    namespace, name, settings = layout.settings.namespace, layout.backend_jobset, layout.settings
    return PodsReadyTrigger.for_operator(
        operator,
        ("JobSet", namespace, name),
        f"{JOBSET_NAME_LABEL}={name}",
        backend_pod_count(layout),
        need_running=True,
        deadline=deadline,
        poll_interval=float(settings.poll_interval_seconds),
        queued=bool(settings.kueue_queue),
    )


def backend_failure(event: dict[str, Any]) -> Exception | None:
    """What a failed backend wait raises: a Kueue refusal fails without retries."""
    if event.get("reason") == verdicts.KUEUE_REFUSED:
        return AirflowFailException(f"Pathways backend: {event.get('message')}")
    if event.get("status") != "success":
        return AirflowException(f"{event.get('message')} (TPU capacity or Kueue)")
    return None
