"""The run's three Jobs: conversion to MaxText, the GRPO client, and the export."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import pending_plus, pending_plus_step, rung_waits_plus
from tpu_rl.dag.links import JOB_LINKS, CheckpointsLink, ExportLink
from tpu_rl.names import Step
from tpu_rl.operators.jobs import RunJobStep
from tpu_rl.operators.lineage import EmitsLineage
from tpu_rl.operators.rung_move import PENDING_TIMEOUT, RungMove

if TYPE_CHECKING:
    from airflow.sdk import Context
    from kubernetes.client import CoreV1Api

    from tpu_rl.checkpoints.checkpoint_choice import Choice
    from tpu_rl.conversion_lock import ConversionLock, LockOwner
    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout
    from tpu_rl.lineage.graph import StepLineage


LOCK_XCOM = "conversion_lock"  # the lock object this task holds
XCOM_RETURN_KEY = "return_value"  # what `ti.xcom_pull(task_ids=...)` reads by default


class ConvertCheckpointOperator(EmitsLineage, RungMove, RunJobStep):
    """Converts the Hugging Face model unless a committed MaxText checkpoint of it exists.

    Committed means Orbax finalized step 0 (tpu_rl.storage.COMMIT_FILE): a conversion that died
    half-way leaves `0/_CHECKPOINT_METADATA` and arrays that must not be trained from. One run
    at a time converts into a folder (tpu_rl.conversion_lock); another waits for it. The Job
    runs on the TPU slice, so on a capacity ladder it is the first to ask for it: its pods
    still pending at the rung's wait limit move the run to the next rung (RungMove).
    """

    step_id = Step.CONVERT
    pods_of = "convert"
    step_doc = """
Converts the Hugging Face model to a MaxText checkpoint in
`gs://<bucket>/<model>/max-text-format/<hf repo>/<revision>/scan_layers-<true|false>/` with a
Kubernetes Job. Skipped when a committed conversion is already there; waits while another run
converts into the same folder (its lock object `conversion.lock` names that run).

**Failed?** The task log says how the Job ended; the *Pod logs* link opens the pod's log in
Cloud Logging. A wrong token or model id fails here.
"""
    limit = rung_waits_plus("conversion_timeout_minutes", 2)
    operator_extra_links = JOB_LINKS
    found_converted = False  # skipped: an earlier run's conversion is there

    def step_lineage(self, layout: RunLayout) -> StepLineage | None:
        """The Hugging Face model at its revision -> the converted checkpoint; nothing when
        skipped: the run reads the converted checkpoint an earlier run's convert wrote, the
        same dataset, so the graph joins there."""
        from tpu_rl.lineage import names
        from tpu_rl.lineage.graph import convert_lineage

        if self.found_converted:
            return None
        return convert_lineage(names.base_model(layout), names.converted_checkpoint(layout))

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """The TPUs and images the conversion ran on, when it ran."""
        if self.found_converted:
            return {}
        return self.tpu_facets(layout, self.ran_image_digests(layout))

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from tpu_rl.jobs import manifests

        self.skip_if_committed(layout)
        self.hold_folder(layout, context)
        try:
            self.skip_if_committed(layout)  # committed by the run that held the lock
        except BaseException:
            self.release_lock(context)
            raise
        return manifests.conversion_job(layout)

    def hold_folder(self, layout: RunLayout, context: Context) -> None:
        """Take the folder's lock for this run, or defer until it can be taken."""
        from tpu_rl.conversion_lock import acquire

        owner = self.lock_owner(layout, context)
        taken, holder = acquire(self.lock(layout), owner, self.run_state(context))
        if not taken:
            self.wait_for_lock(layout, holder)
        context["ti"].xcom_push(key=LOCK_XCOM, value=layout.maxtext_lock)

    def skip_if_committed(self, layout: RunLayout) -> None:
        from airflow.providers.common.compat.sdk import AirflowSkipException

        from tpu_rl import storage

        if storage.step_committed(layout.maxtext_step, self.gcp_conn_id):
            self.found_converted = True
            raise AirflowSkipException(f"{layout.maxtext_items} is committed: conversion skipped")

    def lock(self, layout: RunLayout) -> ConversionLock:
        from airflow.providers.google.cloud.hooks.gcs import GCSHook

        from tpu_rl.conversion_lock import ConversionLock

        client = GCSHook(gcp_conn_id=self.gcp_conn_id).get_conn()
        return ConversionLock(client, layout.maxtext_lock)

    def lock_owner(self, layout: RunLayout, context: Context) -> LockOwner:
        """This run; the lock lasts as long as the conversion can (its task's limit: the Job's
        deadline cannot be later)."""
        from tpu_rl.conversion_lock import LockOwner

        minutes = self.limit.minutes(layout.settings)
        return LockOwner(
            run_id=context["run_id"],
            dag_id=context["dag"].dag_id,
            deployment=layout.deployment,
            expires=time.time() + minutes * 60,
        )

    @staticmethod
    def run_state(context: Context) -> Callable[[str, str], str | None]:
        """A DAG run's state through the Task SDK (None when it cannot be read)."""

        def state(dag_id: str, run_id: str) -> str | None:
            try:
                found = context["ti"].get_dagrun_state(dag_id=dag_id, run_id=run_id)
            except Exception:  # deleted or unreadable: the lock's expiry decides
                return None
            return str(getattr(found, "value", found))  # an enum of the Task SDK's models

        return state

    def wait_for_lock(self, layout: RunLayout, owner: LockOwner | None) -> None:
        """Another run converts into this folder: check again after the poll interval."""
        from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

        who = owner.describe() if owner else "an unreadable lock"
        self.log.warning(
            "%s is being converted by %s (lock %s): waiting for it to commit or end.",
            layout.maxtext_dir,
            who,
            layout.maxtext_lock,
        )
        delay = timedelta(seconds=max(1, layout.settings.poll_interval_seconds))
        self.defer(trigger=TimeDeltaTrigger(delay), method_name="after_lock_wait")

    def after_lock_wait(self, context: Context, event: Any = None) -> Any:
        return self.execute(context)

    def release_lock(self, context: Context) -> None:
        """Give the folder back if this task took it; a lock left behind is stale once this
        run ends."""
        ti = context.get("ti")
        if ti is None or not ti.xcom_pull(task_ids=self.task_id, key=LOCK_XCOM):
            return
        try:
            layout = self.run_layout(context)
            self.lock(layout).release(self.lock_owner(layout, context))
        except Exception as err:  # the Job's outcome stands either way
            self.log.warning("Could not release the conversion lock: %s", err)

    def configure(self, context: Context) -> Manifest:
        """The provider's fields, and the pods' wait: the current rung's (a ladder's rung
        before the last waits `rung_wait_seconds`)."""
        from tpu_rl.cluster.ladder import wait_s

        manifest = super().configure(context)
        self.pending_timeout = timedelta(seconds=wait_s(self.run_layout(context).settings))
        return manifest

    def execute_complete(self, context: Context, event: dict[str, Any], **kwargs: Any) -> Any:
        """The Job ended (either way): the folder is free for another run. Pods still pending
        at the rung's wait limit move the run to the ladder's next rung, the lock kept (the
        deferral is not an Exception)."""
        if event.get("pods_wait") and event.get("reason") == PENDING_TIMEOUT:
            try:
                self.leave_rung(context, event)  # False: no rung to move to
            except Exception:
                self.release_lock(context)
                raise
        try:
            return super().execute_complete(context, event, **kwargs)
        finally:
            self.release_lock(context)

    def rung_holder(self, layout: RunLayout) -> tuple[str, str]:
        from tpu_rl.kube.objects import job_path

        name = layout.job_names["convert"]
        return f"Job {name}", job_path(layout.settings.namespace, name)

    def delete_rung_holder(self, layout: RunLayout) -> None:
        from tpu_rl.kube.swept import delete_labelled

        namespace, name = layout.settings.namespace, layout.job_names["convert"]
        delete_labelled(self.hook.get_conn(), "jobs", namespace, name)

    def core_api(self) -> CoreV1Api:
        return self.hook.core_v1_client


class StartTrainingOperator(RunJobStep):
    """Submits the GRPO client Job and returns at once (by default): the reward sensor
    follows it."""

    step_id = Step.TRAIN
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


class ExportCheckpointOperator(EmitsLineage, RunJobStep):
    """Exports the checkpoint step the run's `export_checkpoint` chooses among the steps Orbax
    committed (tpu_rl.checkpoints.checkpoint_choice). `rewards`: the reward wait's result
    (templated: an XComArg is pulled).

    Returns (XCom) {"step", "checkpoint_uri", "export_uri", "metrics" (the step's evaluation,
    None when it has none), "choice" ("best" or "last"), "final_step", "reason"}; the step is
    also its XCom `checkpoint_step`."""

    step_id = Step.EXPORT
    pods_of = "export"
    step_doc = """
Exports a checkpoint of this run to Hugging Face format in
`gs://<bucket>/<model>/hf-trained/<run>/`: the newest committed one (`export_checkpoint=last`),
or the committed one whose evaluation scored best on `best_metric` (`export_checkpoint=best`);
with held-out evaluation, the step it scored best. Its result names the step, how it was chosen
and its evaluation.

**Re-running it?** Clearing export clears the cluster and Secret setups too (the run's cleanup
removed them): it waits for them to run again instead of racing the redeploy.
"""
    limit = pending_plus("export_timeout_minutes", 2)
    operator_extra_links = (*JOB_LINKS, ExportLink())
    template_fields: Sequence[str] = (*RunJobStep.template_fields, "rewards")
    exported: Choice | None = None  # the step chosen, once the Job exported it

    def __init__(self, *, rewards: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rewards = rewards

    def step_lineage(self, layout: RunLayout) -> StepLineage | None:
        """The exported step (and the held-out results that chose it) -> the export; nothing
        before the step is known (execute_complete, after the Job)."""
        from tpu_rl.checkpoints.checkpoint_choice import HELDOUT
        from tpu_rl.lineage import names
        from tpu_rl.lineage.graph import export_lineage

        if self.exported is None:
            return None
        on_heldout = self.exported.choice == HELDOUT
        heldout = names.heldout_results(layout) if on_heldout else None
        step = names.checkpoint_step(layout, self.exported.step)
        return export_lineage(step, heldout, names.export_folder(layout))

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """The TPUs and images the export ran on; the trainer's own evaluation of the exported
        step and of the base model (the held-out evaluation's facet rides evaluate_heldout's
        event)."""
        from tpu_rl.checkpoints.checkpoint_choice import HELDOUT
        from tpu_rl.lineage.facets import EVALUATION, KEYS, trainer_evaluation_facet

        if self.exported is None:
            return {}
        facets = self.tpu_facets(layout, self.ran_image_digests(layout))
        if self.exported.choice == HELDOUT:
            return facets
        base = (self.rewards or {}).get("pre")
        facet = trainer_evaluation_facet(self.exported.step, self.exported.metrics, base)
        return {**facets, KEYS[EVALUATION]: facet}

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from tpu_rl import storage
        from tpu_rl.jobs import manifests
        from tpu_rl.run_summary import write_summary

        choice = self.choose(layout, context)
        if choice.uncommitted:
            self.log.warning(
                "Checkpoint step(s) %s have no Orbax %s: their save did not finish; not "
                "exporting from them.",
                choice.uncommitted,
                storage.COMMIT_FILE,
            )
        self.log.info("Exporting checkpoint step %d: %s.", choice.step, choice.reason)
        context["ti"].xcom_push(key="checkpoint_step", value=choice.step)
        write_summary(context["ti"], self.task_id, checkpoint_step=choice.step)
        return manifests.export_job(layout, choice.step)

    def execute_complete(self, context: Context, event: dict[str, Any], **kwargs: Any) -> None:
        """The Job ended well: push what was exported, from which step, why, and its evaluation
        (the same choice again: training is over, the committed steps cannot change). Pushed
        as the return value by hand: the pod operators' `do_xcom_push` (False) means the
        provider's sidecar XCom, and the task runner pushes no return value while it is off."""
        super().execute_complete(context, event, **kwargs)
        layout = self.run_layout(context)
        choice = self.choose(layout, context)
        self.exported = choice
        exported = {
            **choice.as_dict(),
            "checkpoint_uri": f"{layout.checkpoints_dir}{choice.step}/",
            "export_uri": layout.export_dir,
        }
        context["ti"].xcom_push(key=XCOM_RETURN_KEY, value=exported)

    def choose(self, layout: RunLayout, context: Context) -> Choice:
        """The step to export (tpu_rl.checkpoints.checkpoint_choice; the held-out evaluation's
        best when it ran); fails when none is committed."""
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl.checkpoints.checkpoint_choice import choose_for_run
        from tpu_rl.promotion.exported import heldout_result
        from tpu_rl.promotion.gate import heldout_choice

        s = layout.settings
        report = heldout_result(context["ti"], s)
        try:
            return choose_for_run(
                layout.checkpoints_dir,
                self.gcp_conn_id,
                self.rewards,
                s.export_checkpoint,
                s.best_metric,
                heldout_choice(report) if report else None,
            )
        except ValueError as err:
            raise AirflowException(str(err)) from None
