"""The run's three Jobs: conversion to MaxText, the GRPO client, and the export."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import pending_plus, pending_plus_step
from tpu_rl.dag.links import JOB_LINKS, CheckpointsLink, ExportLink
from tpu_rl.operators.jobs import RunJobStep

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout


class ConvertCheckpointOperator(RunJobStep):
    """Converts the Hugging Face model unless a complete MaxText checkpoint of it exists.

    Complete means Orbax's `0/_CHECKPOINT_METADATA`, written last: a conversion that died
    half-way leaves arrays under `0/items` that must not be trained from.
    """

    step_id = "convert"
    pods_of = "convert"
    step_doc = """
Converts the Hugging Face model to a MaxText checkpoint in `gs://<bucket>/<model>/max-text-format/`
with a Kubernetes Job. Skipped when a complete conversion is already there.

**Failed?** The task log says how the Job ended; the *Pod logs* link opens the pod's log in
Cloud Logging. A wrong token or model id fails here.
"""
    limit = pending_plus("conversion_timeout_minutes", 2)
    operator_extra_links = JOB_LINKS

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from airflow.providers.common.compat.sdk import AirflowSkipException

        from tpu_rl import storage
        from tpu_rl.jobs import manifests

        if storage.object_exists(layout.maxtext_commit_marker, self.gcp_conn_id):
            raise AirflowSkipException(f"{layout.maxtext_items} is complete: conversion skipped")
        return manifests.conversion_job(layout)


class StartTrainingOperator(RunJobStep):
    """Submits the GRPO client Job and returns at once (by default): the reward sensor
    follows it."""

    step_id = "train"
    pods_of = "train"
    step_doc = """
Submits the GRPO client Job (`train_rl`) against the backend and returns at once;
`wait_for_rewards` follows it.
"""
    limit = pending_plus_step(2)
    operator_extra_links = (*JOB_LINKS, CheckpointsLink())

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("wait_until_job_complete", False)
        super().__init__(**kwargs)

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from tpu_rl.jobs import manifests

        return manifests.train_job(layout)


class ExportCheckpointOperator(RunJobStep):
    """Exports the newest checkpoint step this run's training finished saving."""

    step_id = "export"
    pods_of = "export"
    step_doc = """
Exports the newest checkpoint of this run to Hugging Face format in
`gs://<bucket>/<model>/hf-trained/<run>/`.

**Re-running it?** Clearing export clears the cluster and Secret setups too (the run's cleanup
removed them): it waits for them to run again instead of racing the redeploy.
"""
    limit = pending_plus("export_timeout_minutes", 2)
    operator_extra_links = (*JOB_LINKS, ExportLink())

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl import storage
        from tpu_rl.jobs import manifests

        complete, unfinished = storage.checkpoint_steps(layout.checkpoints_dir, self.gcp_conn_id)
        step = complete[-1] if complete else None
        newer = [s for s in unfinished if step is None or s > step]
        if newer:
            self.log.warning(
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
        self.log.info("Exporting checkpoint step %d.", step)
        context["ti"].xcom_push(key="checkpoint_step", value=step)
        return manifests.export_job(layout, step)
