"""The Pathways backend JobSet: its submission once Kueue covers it, the triggerer's wait until
its pods run, and what a failed wait raises (for start_backend and the reward wait's resume)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from kubernetes.client import CustomObjectsApi
from kubernetes.client.rest import ApiException

from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.kube import kueue, verdicts
from tpu_rl.kube.objects import JOBSET, JOBSET_NAME_LABEL

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout


def submit_backend(custom: CustomObjectsApi, layout: RunLayout, log: Any) -> None:
    """Create the run's headless Pathways JobSet once Kueue is known to cover it; one an
    earlier try created is kept."""
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
        log.info("JobSet %s/%s exists from an earlier try; waiting on it.", namespace, name)


def backend_running_trigger(operator: Any, layout: RunLayout, deadline: float) -> Any:
    """The triggerer's wait (no worker slot) until all the backend's pods run; a Workload
    Kueue can never admit ends it within one poll."""
    from tpu_rl.kube.pods_trigger import PodsReadyTrigger  # the triggerer's (aiohttp): when used

    namespace, name, settings = layout.settings.namespace, layout.backend_jobset, layout.settings
    return PodsReadyTrigger.for_operator(
        operator,
        ("JobSet", namespace, name),
        f"{JOBSET_NAME_LABEL}={name}",
        1 + layout.hosts * settings.cluster_nodepool_count,
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
