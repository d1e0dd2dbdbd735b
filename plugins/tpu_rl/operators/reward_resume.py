"""What RunRewardSensor does in the worker: follow the run's training Job and backend with the
run's intervals and limits, release the TPUs when the wait ends, and resume training after a
capacity loss (imported where the wait runs, not on every parse of the DAG file)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException
from kubernetes.client import CustomObjectsApi

from tpu_rl import deployment, storage
from tpu_rl.backend.lifecycle import backend_failure, backend_running_trigger, submit_backend
from tpu_rl.dag import runtime
from tpu_rl.dag.limits import DEADLINE_ATTR
from tpu_rl.jobs import manifests
from tpu_rl.kube import objects as kube
from tpu_rl.names import CONTAINER
from tpu_rl.rewards import capacity_loss, resume
from tpu_rl.rewards.sensor import RewardSensor
from tpu_rl.rewards.wait import wait_deadline

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout
    from tpu_rl.operators.rewards import RunRewardSensor

REMOVAL_TIMEOUT_S = 300  # how long a lost attempt's Job and backend may take to go


def start(sensor: RunRewardSensor, context: Any) -> Any:
    """Follow the run with its settings' intervals and limits; finish a resume a retry cut."""
    layout = follow_run(sensor, context)
    s = layout.settings
    mask_token(sensor)
    sensor.poll_interval = sensor.poke_interval = float(s.poll_interval_seconds)
    sensor.pending_timeout = s.pending_timeout_minutes * 60.0
    sensor.timeout = s.training_timeout_minutes * 60.0
    sensor.deadline_cap = getattr(sensor, DEADLINE_ATTR, None)
    history = resume.History.load(context.get("task_state_store"))
    if history.resuming:  # a retry in the middle of a resume: finish it
        return restart(sensor, context, layout, history)
    return RewardSensor.execute(sensor, context)


def complete(sensor: RunRewardSensor, context: Any, event: dict[str, Any]) -> dict[str, Any]:
    """The wait's end: the rewards with every attempt, a resume, or a failure; the backend goes."""
    layout = follow_run(sensor, context)
    mask_token(sensor)
    store = context.get("task_state_store")
    history = resume.History.load(store)
    if event.get("reason") == capacity_loss.REASON and store is not None:
        return resume_after_loss(sensor, context, layout, history, event)
    succeeded = event.get("status") == "success"
    history.end(event, resume.COMPLETED if succeeded else resume.FAILED, layout.pool_hosts)
    if not succeeded:
        keep(context, history)
    try:
        result = RewardSensor.execute_complete(sensor, context, event)
    finally:
        release_tpus(sensor)
    # the gate compares with the base model: the first attempt's Pre line
    return {**result, "pre": history.first_pre, "attempts": history.attempts}


def resume_after_loss(
    sensor: RunRewardSensor,
    context: Any,
    layout: RunLayout,
    history: resume.History,
    event: dict[str, Any],
) -> Any:
    """Resume training from its newest complete checkpoint, or fail past the limit."""
    limit, why = layout.settings.max_training_restarts, event.get("message", "")
    why = why.split("\n", 1)[0]  # the evidence; the log lines follow it
    history.end(event, resume.CAPACITY_LOST, layout.pool_hosts)
    if not resume.may_resume(history, limit):
        keep(context, history)
        release_tpus(sensor)
        raise AirflowFailException(resume.exhausted(history, limit, why))
    complete_steps, _ = storage.checkpoint_steps(layout.checkpoints_dir, sensor.gcp_conn_id)
    step = complete_steps[-1] if complete_steps else None
    sensor.log.warning(resume.resume_line(step, history, limit, why))
    history.begin(step, layout.pool_hosts, started=None)
    history.resuming = True
    keep(context, history)
    return restart(sensor, context, layout, history)


def restart(
    sensor: RunRewardSensor, context: Any, layout: RunLayout, history: resume.History
) -> None:
    """Delete the lost attempt's Job and backend, and wait in the triggerer until they are gone
    (their pods end with a grace period) before new ones take the same names."""
    from tpu_rl.kube.removed_trigger import RemovedTrigger  # the triggerer's (aiohttp): when used

    s, api_client = layout.settings, sensor.hook.get_conn()
    kube.delete_labelled(api_client, "jobs", s.namespace, sensor.job_name)
    kube.delete_backend(api_client, s.namespace, layout.backend_jobset)
    objects = {
        f"Job {sensor.job_name}": kube.job_path(s.namespace, sensor.job_name),
        f"JobSet {layout.backend_jobset}": kube.jobset_path(s.namespace, layout.backend_jobset),
    }
    sensor.defer(
        trigger=RemovedTrigger.for_operator(
            sensor,
            objects,
            deadline=min(wait_deadline(sensor, context), time.time() + REMOVAL_TIMEOUT_S),
            poll_interval=min(float(s.poll_interval_seconds), 5.0),
        ),
        method_name="resubmit_backend",
    )


def resubmit_backend(sensor: RunRewardSensor, context: Any, event: dict[str, Any]) -> None:
    """The lost attempt is gone: submit a new backend under the same names and wait in the
    triggerer until it runs (capacity may take a while to return)."""
    layout = follow_run(sensor, context)
    if event.get("status") != "success":
        raise AirflowException(f"resume: {event.get('message')}")
    submit_backend(CustomObjectsApi(sensor.hook.get_conn()), layout, sensor.log)
    history = resume.History.load(context.get("task_state_store"))
    history.attempts[-1]["started"] = resume.now_iso()
    keep(context, history)
    pending = time.time() + layout.settings.pending_timeout_minutes * 60.0
    pending = min(wait_deadline(sensor, context), pending)
    sensor.defer(
        trigger=backend_running_trigger(sensor, layout, pending), method_name="resume_training"
    )


def resume_training(sensor: RunRewardSensor, context: Any, event: dict[str, Any]) -> Any:
    """The new backend runs: submit the training Job again (same name, run_name and checkpoint
    directory: MaxText restores its newest checkpoint) and follow it afresh."""
    layout = follow_run(sensor, context)
    store = context.get("task_state_store")
    history = resume.History.load(store)
    history.resuming = False
    if (failure := backend_failure(event)) is not None:
        history.end({}, resume.FAILED, layout.pool_hosts)
        keep(context, history)
        release_tpus(sensor)
        raise AirflowFailException(f"resume {history.resumes}: {failure}") from failure
    created = kube.create_job(
        sensor.hook.get_conn(), layout.settings.namespace, manifests.train_job(layout)
    )
    sensor.log.info("Training Job %s %s.", sensor.job_name, "submitted" if created else "exists")
    history.save(store)
    return sensor.execute(context)


def keep(context: Any, history: resume.History) -> None:
    """Save the history; push the attempts so far (a failed run still tells them)."""
    history.save(context.get("task_state_store"))
    context["ti"].xcom_push(key=resume.XCOM_KEY, value=history.attempts)


def follow_run(sensor: RunRewardSensor, context: Any) -> RunLayout:
    """Follow the run's training Job (its training container) and backend JobSet."""
    layout = runtime.layout_from_context(context)
    sensor.namespace = layout.settings.namespace
    sensor.job_name = layout.job_names["train"]
    # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
    sensor.container_name = CONTAINER
    sensor.backend_jobset_name = layout.backend_jobset
    return layout


def mask_token(sensor: RunRewardSensor) -> None:
    """Register the token with the masker; one this process cannot read it cannot log."""
    try:
        deployment.hf_token()
    except deployment.DeploymentError as err:
        sensor.log.warning("Hugging Face token not registered for masking: %s", err)


def release_tpus(sensor: RunRewardSensor) -> None:
    """Delete the backend; never raises (the rewards are worth more than this delete)."""
    if not sensor.backend_jobset_name:
        return
    try:
        deleted = kube.delete_backend(
            sensor.hook.get_conn(), sensor.namespace, sensor.backend_jobset_name
        )
    except Exception as err:
        sensor.log.warning(
            "Could not delete backend %s now (%s); stop_backend and cleanup will.",
            sensor.backend_jobset_name,
            str(err).splitlines()[0] if str(err) else type(err).__name__,
        )
        return
    sensor.log.info(
        "Backend %s %s.", sensor.backend_jobset_name, "deleted" if deleted else "already gone"
    )
