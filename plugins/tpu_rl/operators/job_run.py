"""What RunJobOperator does in the worker: the Job built from the run's settings, its submission
(a retry follows the Job it created), the triggerer's wait, and a failed Job's verdict.

Imported where a Job task runs, not on every parse of the DAG file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from kubernetes.client import models as k8s
from kubernetes.client.rest import ApiException

from tpu_rl import storage
from tpu_rl.dag import runtime
from tpu_rl.dag.run_limits import capped_deadline
from tpu_rl.jobs import manifests
from tpu_rl.jobs.manifests import QUEUE_LABEL, Manifest
from tpu_rl.kube import verdicts
from tpu_rl.kube.objects import to_v1_job
from tpu_rl.layout import JOB_NAME_PREFIX, RunLayout

if TYPE_CHECKING:
    from tpu_rl.operators.jobs import RunJobOperator


def conversion_job(op: RunJobOperator, layout: RunLayout, context: Any) -> Manifest:
    """Converts the Hugging Face model unless a complete MaxText checkpoint of it exists.

    Complete means Orbax's `0/_CHECKPOINT_METADATA`, written last: a conversion that died
    half-way leaves arrays under `0/items` that must not be trained from.
    """
    if storage.object_exists(layout.maxtext_commit_marker, op.gcp_conn_id):
        raise AirflowSkipException(f"{layout.maxtext_items} is complete: conversion skipped")
    return manifests.conversion_job(layout)


def train_job(op: RunJobOperator, layout: RunLayout, context: Any) -> Manifest:
    """The GRPO client."""
    return manifests.train_job(layout)


def export_job(op: RunJobOperator, layout: RunLayout, context: Any) -> Manifest:
    """Exports the newest checkpoint step this run's training finished saving."""
    complete, unfinished = storage.checkpoint_steps(layout.checkpoints_dir, op.gcp_conn_id)
    step = complete[-1] if complete else None
    newer = [s for s in unfinished if step is None or s > step]
    if newer:
        op.log.warning(
            "Checkpoint step(s) %s have no Orbax commit marker (%s): their save did not "
            "finish; not exporting from them.",
            newer,
            " or ".join(storage.COMMIT_MARKERS),
        )
    if step is None:
        raise AirflowException(
            f"no complete checkpoint under {layout.checkpoints_dir}"
            + (f" (steps {unfinished} were never committed)" if unfinished else "")
        )
    op.log.info("Exporting checkpoint step %d.", step)
    context["ti"].xcom_push(key="checkpoint_step", value=step)
    return manifests.export_job(layout, step)


BUILDS: dict[str, Callable[[Any, RunLayout, Any], Manifest]] = {
    "conversion_job": conversion_job,
    "train_job": train_job,
    "export_job": export_job,
}


def job_manifest(op: RunJobOperator, layout: RunLayout, context: Any) -> Manifest:
    """The Job `op.build` names (a BUILDS key), or that a callable builds from the layout."""
    if callable(op.build):
        return op.build(layout)
    return BUILDS[op.build](op, layout, context)


def configure(op: RunJobOperator, context: Any) -> Manifest:
    """Set the provider's fields from the run's manifest; returns that manifest."""
    layout = runtime.layout_from_context(context)
    manifest = op.prepare(layout, context)
    meta, spec = manifest["metadata"], manifest["spec"]

    op.full_job_spec = to_v1_job(manifest)
    op.name = meta["name"].removeprefix(JOB_NAME_PREFIX)
    op.namespace = meta["namespace"]
    op.labels = meta["labels"]
    op.annotations = meta["annotations"]
    op.parallelism = spec["parallelism"]
    op.completions = spec["completions"]
    op.completion_mode = spec.get("completionMode")
    op.backoff_limit = spec["backoffLimit"]
    op.active_deadline_seconds = spec["activeDeadlineSeconds"]
    op.ttl_seconds_after_finished = spec["ttlSecondsAfterFinished"]
    op.image = spec["template"]["spec"]["containers"][0]["image"]
    op.pending_timeout = timedelta(minutes=layout.settings.pending_timeout_minutes)
    op.pods_poll_interval = float(layout.settings.poll_interval_seconds)
    op.job_poll_interval = op.pods_poll_interval
    return manifest


def create_or_follow(op: RunJobOperator, job: k8s.V1Job) -> k8s.V1Job:
    """Create the Job; on a retry, follow the one this run already created while it runs."""
    try:
        return submit(op, job)
    except ApiException as err:
        if err.status != 409:
            raise
    name, namespace = job.metadata.name, job.metadata.namespace
    existing = op.hook.get_job_status(job_name=name, namespace=namespace)
    if existing.metadata.deletion_timestamp:  # an earlier run's cleanup is removing it
        op.log.info("Job %s of an earlier run is being deleted; waiting for it.", name)
        wait_until_gone(op, name, namespace)
        return submit(op, job)
    # finished: failed, or complete with its pods gone (a cleared task is meant to redo it)
    if op.hook.is_job_failed(job=existing) or op.hook.is_job_complete(job=existing):
        op.log.info("Job %s from an earlier try has finished; replacing it.", name)
        op.hook.batch_v1_client.delete_namespaced_job(
            name=name, namespace=namespace, propagation_policy="Foreground"
        )
        wait_until_gone(op, name, namespace)
        return submit(op, job)
    op.log.info("Job %s already exists (an earlier try); following it.", name)
    return job


def submit(op: RunJobOperator, job: k8s.V1Job) -> k8s.V1Job:
    """The provider's create_job without its extras: a debug line formatting the whole Job as
    YAML even when debug logging is off (about 0.1 s), and the XCom of a link that
    tpu_rl.dag.links computes from the run."""
    op.hook.create_job(job=job)
    return job


def wait_until_gone(op: RunJobOperator, name: str, namespace: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            op.hook.get_job_status(job_name=name, namespace=namespace)
        except ApiException as err:
            if err.status == 404:
                return
            raise
        time.sleep(min(op.pods_poll_interval, 5))
    raise AirflowException(f"Job {name} was not deleted within 5 minutes")


def wait_in_triggerer(op: RunJobOperator, pod_request_obj: k8s.V1Pod, context: Any) -> None:
    """Defers: the triggerer waits for the Job's pods (Kueue, TPU capacity: it ends the wait
    with the scheduler's or Kueue's reason), then watches for the Job's end (one deferral:
    execute_complete comes next, with host 0's pod to read)."""
    from tpu_rl.jobs.job_trigger import PodsThenJobTrigger  # the triggerer's (aiohttp): when used
    from tpu_rl.kube.pods_trigger import PodsReadyTrigger

    namespace = pod_request_obj.metadata.namespace
    label_selector = op._build_find_pod_label_selector(context, exclude_checked=True)
    name = op.job.metadata.name
    op.log.info("Waiting in the triggerer for Job %s: its pods, then its end.", name)
    waiting = PodsReadyTrigger.for_operator(
        op,
        ("Job", namespace, name),
        label_selector,
        op.parallelism or 1,
        deadline=capped_deadline(op, op.pending_timeout.total_seconds()),
        poll_interval=op.pods_poll_interval,
        queued=QUEUE_LABEL in (op.job.metadata.labels or {}),
    )
    job = {
        "job_name": name,
        "job_namespace": namespace,
        "base_container_name": op.base_container_name,
        "poll_interval": op.job_poll_interval,
        "get_logs": op.get_logs,
        "do_xcom_push": op.do_xcom_push,
    }
    op.defer(trigger=PodsThenJobTrigger.around(waiting, job), method_name="execute_complete")


def check_job_event(op: RunJobOperator, event: dict[str, Any]) -> None:
    """Raises for a failed pods wait; before a failed Job's, logs the failed pods' last lines
    (the provider raises without writing them). A pods wait that failed says why (a Workload
    Kueue can never admit fails without retries); one that saw the Job or a pod fail is that
    Job's failure."""
    job_failed = event.get("status") == "error" and (
        not event.get("pods_wait") or event.get("reason") == verdicts.OWNER_FAILED
    )
    if job_failed:
        from tpu_rl.jobs.failed_pods import log_failed_pods

        job = event.get("name") or (op.job.metadata.name if op.job else None)
        namespace = event.get("namespace") or op.namespace
        try:
            log_failed_pods(op.client, op.log, job, namespace)
        except ApiException as err:
            op.log.warning("Could not read the failed pods' logs: %s", err.reason)
    if event.get("pods_wait"):
        if event.get("reason") == verdicts.KUEUE_REFUSED:
            raise AirflowFailException(event.get("message"))
        if job_failed:
            raise AirflowException(event.get("message"))
        raise AirflowException(
            f"{event.get('message')}: TPU capacity or Kueue admission is missing"
        )
