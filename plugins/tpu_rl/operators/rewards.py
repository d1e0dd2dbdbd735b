"""The reward wait on the run's training Job and backend, which resumes training after a
capacity loss."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import setting_minutes
from tpu_rl.dag.links import CheckpointsLink, PodLogsLink
from tpu_rl.names import Step
from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.run_step import RunStep
from tpu_rl.rewards.sensor import RewardSensor

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.layout import RunLayout
    from tpu_rl.rewards.resume import History

REMOVAL_TIMEOUT_S = 300  # how long a lost attempt's Job and backend may take to go


class WaitForRewardsSensor(RunStep, RewardSensor):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts (the total also capped at the run's work deadline).

    The names are computed from the run (settings and run id), as the steps that create the Job
    and JobSet compute them: no XCom template. The moment the wait ends, whichever way, the
    Pathways backend is deleted: by the trigger, and here again, best effort (a 5xx never costs
    the rewards; `stop_backend` and the `cleanup_kubernetes` teardown delete it too); but a
    successful wait leaves it running when the deployment has a champion, for
    `evaluate_champion` to score on it before `stop_backend` deletes it. The
    Hugging Face token is registered with the secrets masker in this process too: the wait
    relays the training pod's log lines.

    When the training lost its TPU capacity (a `capacity_lost` event: preempted or removed
    nodes, evicted pods), the wait resumes it at most `max_training_restarts` times: a new
    backend, then a new training Job, under the same names, run_name and checkpoint directory
    (MaxText restores its newest complete checkpoint), within the same total timeout. The
    result's `pre` is the first attempt's Pre line, `evaluations` every evaluation line of every
    attempt, `intermediate` each step's latest one; `attempts` lists the attempts (also pushed
    under the XCom key "attempts" at each resume or failure). The attempts live in the run's
    `training_attempts` object in GCS (see rewards.resume), so retries do not reset them.
    (Deferred waits only: a poking sensor fails.)
    """

    step_id = Step.WAIT_FOR_REWARDS
    pods_of = "train"  # the Job it follows
    step_doc = """
Follows the training Job's log (deferred: no worker slot while it waits) until the
`Post RL Training` line, and returns the pre- and post-training rewards. When training loses
its TPU capacity (preempted or removed nodes, evicted pods), it resumes from the newest complete
checkpoint with a new backend and Job under the same names, at most `max_training_restarts`
times; the result's `pre` is the first attempt's and `attempts` lists each attempt. Fails when
the Job fails for another reason or `training_timeout_minutes` passes.

**Failed?** The reason is in the task log; *Pod logs* opens the Job's log in Cloud Logging.
"""
    limit = setting_minutes("training_timeout_minutes", 2, total=True)
    operator_extra_links = (PodLogsLink(), CheckpointsLink())

    def __init__(self, **kwargs: Any) -> None:
        # on the run's cluster unless named; what it follows is set from the run in execute
        super().__init__(**{**RUN_CLUSTER, "job_name": "", **kwargs})

    def execute(self, context: Context) -> Any:
        """Follow the run with its settings' intervals and limits; finish a resume a retry cut."""
        from tpu_rl.dag.limits import DEADLINE_ATTR
        from tpu_rl.rewards import resume

        layout = self.set_run_objects(context)
        s = layout.settings
        self.mask_token()
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        self.deadline_cap = getattr(self, DEADLINE_ATTR, None)
        self.keep_backend = self.champion_waits(layout)
        self.checkpoint_period = s.checkpoint_period  # stops at the last save its capacity allows
        history = resume.History.load(self.attempts_record)
        if history.resuming:  # a retry in the middle of a resume: finish it
            return self.restart(context, layout, history)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The wait's end: the rewards with every attempt, a resume, or a failure; the backend
        goes."""
        from tpu_rl.rewards import capacity_end, capacity_loss, evaluations, resume
        from tpu_rl.rewards.trigger import BACKEND_KEPT

        layout = self.set_run_objects(context)
        self.mask_token()
        history = resume.History.load(self.attempts_record)
        if event.get("reason") == capacity_loss.REASON:
            return self.resume_after_loss(context, layout, history, event)
        if event.get("reason") == capacity_end.REASON:
            return self.resume_after_stop(context, layout, history, event)
        succeeded = event.get("status") == "success"
        history.end(event, resume.COMPLETED if succeeded else resume.FAILED, layout.pool_hosts)
        if not succeeded:
            self.record_attempts(context, history)
        try:
            result = super().execute_complete(context, event)
        finally:
            if not event.get(BACKEND_KEPT):
                self.release_tpus()
        # the gate compares with the base model: the first attempt's Pre line; each step's
        # evaluation is its latest attempt's (tpu_rl.rewards.evaluations)
        return {
            **result,
            "pre": history.first_pre,
            "intermediate": evaluations.by_step(history.evaluations),
            "evaluations": history.evaluations,
            "attempts": history.attempts,
        }

    def resume_after_loss(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> Any:
        """Resume training from its newest complete checkpoint, or fail past the limit."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl import storage
        from tpu_rl.rewards import resume

        limit, why = layout.settings.max_training_restarts, event.get("message", "")
        why = why.split("\n", 1)[0]  # the evidence; the log lines follow it
        history.end(event, resume.CAPACITY_LOST, layout.pool_hosts)
        if not resume.may_resume(history, limit):
            self.record_attempts(context, history)
            self.release_tpus()
            raise AirflowFailException(resume.exhausted(history, limit, why))
        # the step Tunix restores: Orbax's newest finalized one (tpu_rl.storage)
        step, _ = storage.newest_committed_step(layout.checkpoints_dir, self.gcp_conn_id)
        self.log.warning(resume.resume_line(step, history, limit, why))
        history.begin(step, layout.pool_hosts, started=None)
        history.resuming = True
        self.record_attempts(context, history)
        return self.restart(context, layout, history)

    def resume_after_stop(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> Any:
        """Training stopped right after the last save its capacity allowed: resume from that
        save once the nodes whose time is up are gone (new capacity, a fresh run duration)."""
        from tpu_rl import storage
        from tpu_rl.rewards import resume

        history.end(event, resume.STOPPED_AT_SAVE, layout.pool_hosts)
        step, _ = storage.newest_committed_step(layout.checkpoints_dir, self.gcp_conn_id)
        self.log.info("Resuming from committed step %s (stopped at %s).", step, event["save_step"])
        history.begin(step, layout.pool_hosts, started=None)
        history.resuming = True
        self.record_attempts(context, history)
        return self.restart(context, layout, history, event.get("nodes"), event.get("ends_at"))

    def restart(
        self, context: Context, layout: RunLayout, history: History,
        nodes: list[str] | None = None, until: float | None = None,
    ) -> None:  # fmt: skip
        """Delete the last attempt's Job and backend, and wait in the triggerer until they are
        gone (their pods end with a grace period) before new ones take the same names; and
        until `nodes` whose time is up are gone too (GKE removes them at `until` at the latest)
        so the new backend gets new ones."""
        from tpu_rl.kube import objects as kube
        from tpu_rl.kube.removed_trigger import RemovedTrigger

        s, api_client = layout.settings, self.hook.get_conn()
        kube.delete_labelled(api_client, "jobs", s.namespace, self.job_name)
        kube.delete_backend(api_client, s.namespace, layout.backend_jobset)
        objects = {
            f"Job {self.job_name}": kube.job_path(s.namespace, self.job_name),
            f"JobSet {layout.backend_jobset}": kube.jobset_path(s.namespace, layout.backend_jobset),
            **{f"Node {n}": f"{kube.NODES_PATH}/{n}" for n in nodes or []},
        }
        removed_by = max(time.time(), until or 0.0) + REMOVAL_TIMEOUT_S
        self.defer(
            trigger=RemovedTrigger.for_operator(
                self,
                objects,
                deadline=min(self.wait_deadline(context), removed_by),
                poll_interval=min(float(s.poll_interval_seconds), 5.0),
            ),
            method_name="resubmit_backend",
        )

    def resubmit_backend(self, context: Context, event: dict[str, Any]) -> None:
        """The lost attempt is gone: submit a new backend under the same names and wait in the
        triggerer until it runs (capacity may take a while to return)."""
        from airflow.providers.common.compat.sdk import AirflowException
        from kubernetes.client import CustomObjectsApi

        from tpu_rl.backend.lifecycle import backend_running_trigger, submit_backend
        from tpu_rl.rewards import resume

        layout = self.set_run_objects(context)
        if event.get("status") != "success":
            raise AirflowException(f"resume: {event.get('message')}")
        submit_backend(CustomObjectsApi(self.hook.get_conn()), layout, self.log)
        history = resume.History.load(self.attempts_record)
        history.attempts[-1]["started"] = resume.now_iso()
        self.record_attempts(context, history)
        pending = time.time() + layout.settings.pending_timeout_minutes * 60.0
        pending = min(self.wait_deadline(context), pending)
        self.defer(
            trigger=backend_running_trigger(self, layout, pending), method_name="resume_training"
        )

    def resume_training(self, context: Context, event: dict[str, Any]) -> Any:
        """The new backend runs: submit the training Job again (same name, run_name and
        checkpoint directory: MaxText restores its newest checkpoint) and follow it afresh."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.backend.lifecycle import backend_failure
        from tpu_rl.jobs import manifests
        from tpu_rl.kube import objects as kube
        from tpu_rl.rewards import resume

        layout = self.set_run_objects(context)
        history = resume.History.load(self.attempts_record)
        history.resuming = False
        if (failure := backend_failure(event)) is not None:
            history.end({}, resume.FAILED, layout.pool_hosts)
            self.record_attempts(context, history)
            self.release_tpus()
            raise AirflowFailException(f"resume {history.resumes}: {failure}") from failure
        created = kube.create_job(
            self.hook.get_conn(), layout.settings.namespace, manifests.train_job(layout)
        )
        self.log.info("Training Job %s %s.", self.job_name, "submitted" if created else "exists")
        history.save(self.attempts_record)
        return self.execute(context)

    def record_attempts(self, context: Context, history: History) -> None:
        """Save the history in the run's record and push its attempts as an XCom (a failed run
        still tells them)."""
        from tpu_rl.rewards import resume

        history.save(self.attempts_record)
        context["ti"].xcom_push(key=resume.XCOM_KEY, value=history.attempts)

    def champion_waits(self, layout: RunLayout) -> bool:
        """The deployment has a champion for evaluate_champion to score on this run's backend:
        a successful wait leaves the backend running (stop_backend deletes it after)."""
        from tpu_rl.promotion.champion import ChampionStore

        store = ChampionStore(layout.model_root, layout.deployment, self.gcp_conn_id)
        try:
            return store.read() is not None
        except Exception as err:  # evaluate_champion reads it again and says what it finds
            self.log.warning("Champion record %s not read (%s).", store.uri, err)
            return False

    def set_run_objects(self, context: Context) -> RunLayout:
        """Point the sensor at the run's training Job (its training container), backend JobSet
        and record of the training attempts; returns the run's layout."""
        from tpu_rl import storage
        from tpu_rl.names import CONTAINER

        layout = self.run_layout(context)
        self.namespace = layout.settings.namespace
        self.job_name = layout.job_names["train"]
        # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
        self.container_name = CONTAINER
        self.backend_jobset_name = layout.backend_jobset
        self.attempts_record = storage.JsonObject(layout.training_attempts, self.gcp_conn_id)
        return layout

    def mask_token(self) -> None:
        """Register the token with the masker; one this process cannot read it cannot log."""
        from tpu_rl import deployment

        try:
            deployment.hf_token()
        except deployment.DeploymentError as err:
            self.log.warning("Hugging Face token not registered for masking: %s", err)

    def release_tpus(self) -> None:
        """Delete the backend; never raises (the rewards are worth more than this delete)."""
        from tpu_rl.kube import objects as kube

        name = self.backend_jobset_name
        if not name:
            return
        try:
            deleted = kube.delete_backend(self.hook.get_conn(), self.namespace, name)
        except Exception as err:
            self.log.warning(
                "Could not delete backend %s now (%s); stop_backend and cleanup will.",
                name,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
            return
        self.log.info("Backend %s %s.", name, "deleted" if deleted else "already gone")
