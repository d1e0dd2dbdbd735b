"""The reward wait on the run's training Job and backend, which resumes training after a
capacity loss."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, cast

from tpu_rl.dag.limits import setting_minutes
from tpu_rl.dag.links import CheckpointsLink, PodLogsLink
from tpu_rl.names import Step
from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.lineage import EmitsLineage
from tpu_rl.operators.training_resume import TrainingResumes

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.checkpoints.resume import History
    from tpu_rl.layout import RunLayout
    from tpu_rl.lineage.graph import StepLineage
    from tpu_rl.watch.health import Anomaly

    class RecordedAnomaly(Anomaly):
        """The anomaly the wait records (XCom `anomaly`, the run's summary): the watchdog's,
        with the healthy checkpoint kept and the run's health_action."""

        healthy_step: int | None
        healthy_checkpoint: str | None
        action: str | None


class WaitForRewardsSensor(EmitsLineage, TrainingResumes):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts (the total also capped at the run's work deadline).

    The names are computed from the run, as the steps that create the Job and JobSet compute
    them. The moment the wait ends, the Pathways backend is deleted (by the trigger, and here
    again, best effort), unless a successful wait leaves it for `evaluate_champion`. The
    Hugging Face token is registered with the masker here too: the wait relays pod log lines.
    Training stops right after the last save its capacity allows (tpu_rl.rewards.save_stop).

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
times; the result's `pre` is the first attempt's and `attempts` lists each attempt. When the
capacity ends on a schedule (a flex-start node's run duration, a calendar window), training
stops right after the last save that can finish before then and resumes from it on new nodes
or the ladder's next rung. Fails when the Job fails for another reason or
`training_timeout_minutes` passes.

**Failed?** The reason is in the task log; *Pod logs* opens the Job's log in Cloud Logging.
"""
    limit = setting_minutes("training_timeout_minutes", 2, total=True)
    operator_extra_links = (PodLogsLink(), CheckpointsLink())
    recorded_anomaly: RecordedAnomaly | None = None  # the watchdog's stop, when this try had one

    def __init__(self, **kwargs: Any) -> None:
        # on the run's cluster unless named; what it follows is set from the run in execute
        super().__init__(**{**RUN_CLUSTER, "job_name": "", **kwargs})

    def step_lineage(self, layout: RunLayout) -> StepLineage:
        """Training read the converted checkpoint and the dataset and wrote the steps Orbax
        committed (listed only when lineage is on: tpu_rl.operators.lineage)."""
        from tpu_rl import deployment, storage
        from tpu_rl.lineage import names
        from tpu_rl.lineage.graph import training_lineage

        committed = storage.committed_steps(layout.checkpoints_dir, deployment.gcp_conn_id())
        return training_lineage(
            names.converted_checkpoint(layout),
            names.training_data(layout),
            [names.checkpoint_step(layout, step) for step in committed],
        )

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """The watchdog's stop, when it stopped this try's training."""
        from tpu_rl.lineage.facets import KEYS, TRAINING_HEALTH, training_health_facet

        if self.recorded_anomaly is None:
            return {}
        return {KEYS[TRAINING_HEALTH]: training_health_facet(self.recorded_anomaly)}

    def execute(self, context: Context) -> Any:
        """Follow the run with its settings' intervals and limits; finish a resume a retry cut."""
        from tpu_rl.checkpoints import resume

        layout = self.set_run_objects(context)
        self.mask_token()
        history = resume.History.load(self.attempts_record)
        self.follow_settings(layout, history)
        if history.resuming:  # a retry in the middle of a resume: finish it
            return self.restart(context, layout, history)
        if (ended := self.ended_wait(context)) is not None:
            self.log.info("Training Job %s has ended: finishing without deferring.", self.job_name)
            return self.execute_complete(context, ended)
        return super().execute(context)

    def follow_settings(self, layout: RunLayout, history: History) -> None:
        """Set how the wait follows the run: its intervals, limits, capacity's end, spend and
        the watchdog's rules for this attempt."""
        from tpu_rl.dag.limits import DEADLINE_ATTR
        from tpu_rl.preflight.calendar_reservation import calendar_window
        from tpu_rl.report.spend_limit import training_spend
        from tpu_rl.watch.rules import WatchRules

        s = layout.settings
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        self.deadline_cap = getattr(self, DEADLINE_ATTR, None)
        self.keep_backend = self.champion_waits(layout)
        window = calendar_window(s, self.gcp_conn_id)
        self.watch = WatchRules(
            checkpoint_period=s.checkpoint_period,  # the last save its capacity allows
            total_steps=s.num_batches,  # train_rl's steps (rl.yml: one iteration, one epoch)
            capacity_ends_at=window.end if window else None,
            spend=training_spend(s),  # progress lines; the spend limit's stop
            health=self.attempt_health_rules(s, history),  # the watchdog's, for this attempt
            progress_every_s=s.progress_report_minutes * 60.0,  # the page's and note's
        )

    def ended_wait(self, context: Context) -> dict[str, Any] | None:
        """The reward trigger's event when the training Job has already ended (a retry after
        it), read by one poll of the wait; None while it runs or the poll cannot tell.

        Deferred, such a wait ends at its first poll, and a deferral that ends at once can fail
        the resumed try (apache/airflow#72716, see tpu_rl.backend.lifecycle.backend_runs). The
        backend goes in execute_complete unless kept, as after the trigger's event."""
        import asyncio

        from kubernetes.client.rest import ApiException

        from tpu_rl.jobs.job_trigger import job_ended
        from tpu_rl.kube.async_client import KubeApiError
        from tpu_rl.rewards.poll import LogFollower
        from tpu_rl.rewards.trigger import BACKEND_KEPT

        try:
            job = self.hook.get_job_status(job_name=self.job_name, namespace=self.namespace)
        except ApiException:  # gone or unreadable: the trigger says which
            return None
        if not job_ended(job):
            return None
        follower = LogFollower(**self.follow_args(self.wait_deadline(context)), log=self.log)

        async def poll_once() -> dict[str, Any] | None:
            try:
                return await follower.poll()
            except KubeApiError:  # transient: the trigger retries
                return None
            finally:
                await follower.close()

        event = asyncio.run(poll_once())
        if event is not None and self.keep_backend and event.get("status") == "success":
            return {**event, BACKEND_KEPT: True}
        return event

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The wait's end: the rewards with every attempt, a resume, or a failure; the backend
        goes."""
        from tpu_rl.checkpoints import resume
        from tpu_rl.rewards.trigger import BACKEND_KEPT
        from tpu_rl.run_summary import write_summary
        from tpu_rl.training_log import evaluations
        from tpu_rl.watch import curves, progress
        from tpu_rl.watch.ends import WaitEnd

        layout = self.set_run_objects(context)
        self.mask_token()
        history = resume.History.load(self.attempts_record)
        if event.get("curves"):  # the training's curves so far, for the RL page
            context["ti"].xcom_push(key=curves.XCOM_KEY, value=event["curves"])
        if event.get("reason") == progress.PROGRESS_EVENT:
            return self.report_progress(context, layout, history, event)
        if event.get("reason") == WaitEnd.CAPACITY_LOST:
            return self.resume_after_loss(context, layout, history, event)
        if event.get("reason") == WaitEnd.CAPACITY_ENDING:
            return self.resume_after_stop(context, layout, history, event)
        if event.get("reason") == WaitEnd.SPEND_LIMIT:
            return self.end_at_spend_limit(context, layout, history, event)
        if event.get("reason") == WaitEnd.TRAINING_UNHEALTHY:
            return self.end_unhealthy(context, layout, history, event)
        succeeded = event.get("status") == "success"
        history.end(
            event,
            resume.COMPLETED if succeeded else resume.FAILED,
            layout.pool_hosts,
            rung=layout.rung,
        )
        if not succeeded:
            self.record_attempts(context, history)
        try:
            result = super().execute_complete(context, event)
        finally:
            if not event.get(BACKEND_KEPT):
                self.release_tpus()
        # the gate compares with the base model: the first attempt's Pre line; each step's
        # evaluation is its latest attempt's (tpu_rl.training_log.evaluations)
        rewards = {
            "pre": history.first_pre,
            "post": result.get("post"),
            "intermediate": evaluations.by_step(history.evaluations),
            "attempts": history.attempts,
        }
        write_summary(context["ti"], self.task_id, rewards=rewards)  # each evaluation line not
        return {**result, **rewards, "evaluations": history.evaluations}

    def report_progress(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> NoReturn:
        """Training runs on (tpu_rl.watch.progress.PROGRESS_EVENT): put its progress and the
        evaluations the log has so far on the run's page (the summary's `progress` and
        `rewards`) and in its note, then wait on from the trigger's state, with the watchdog's
        memory and the log position it had."""
        from tpu_rl import deployment
        from tpu_rl.report.run_note import set_run_note
        from tpu_rl.run_summary import write_summary
        from tpu_rl.training_log.evaluations import so_far
        from tpu_rl.watch.progress import reported_text

        figures = dict(event.get("progress") or {})
        ti = context["ti"]
        state = event.get("state") or {}
        rewards = so_far(history.first_pre, history.evaluations, history.attempts, state)
        write_summary(ti, self.task_id, progress=figures, rewards=rewards)
        text = f"Training: {reported_text(figures)}. Running: the RL post-training page has it."
        set_run_note(deployment.airflow_api_conn_id(), ti.dag_id, ti.run_id, text)
        self.follow_settings(layout, history)
        self.defer_wait(context, state=event.get("state"))

    def end_at_spend_limit(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> dict[str, Any]:
        """Training stopped right after a save for the spend limit (tpu_rl.watch.progress):
        fail, or hand the newest evaluation up to that save to the gate as the run's result (the
        gate and export then take the newest committed step, the one it stopped at)."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.checkpoints import resume
        from tpu_rl.run_summary import write_summary
        from tpu_rl.training_log import evaluations
        from tpu_rl.watch import progress

        exporting = event.get("action") == progress.EXPORT
        outcome = resume.COMPLETED if exporting else resume.FAILED
        history.end(event, outcome, layout.pool_hosts, rung=layout.rung)
        self.record_attempts(context, history)
        self.release_tpus()
        message = str(event.get("message") or "")
        if not exporting:
            raise AirflowFailException(message)
        step = event.get("save_step")
        scored = [e for e in evaluations.by_step(history.evaluations) if e["step"] <= step]
        if not scored:
            raise AirflowFailException(f"{message}; but no evaluation up to step {step} to gate")
        self.log.warning("%s; gated on the evaluation of step %s", message, scored[-1]["step"])
        rewards = {
            "pre": history.first_pre,
            "post": {k: v for k, v in scored[-1].items() if k not in ("kind", "attempt")},
            "intermediate": evaluations.by_step(history.evaluations),
            "attempts": history.attempts,
        }
        write_summary(context["ti"], self.task_id, rewards=rewards)
        return {**rewards, "evaluations": history.evaluations, "spend_stop": event}

    def end_unhealthy(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> dict[str, Any]:
        """A fatal training health rule stopped training (tpu_rl.watch.health; the trigger
        deleted the Job and the backend). Records the anomaly and the newest healthy checkpoint
        (XCom `anomaly`), then fails (health_action=stop), hands the evaluation of the healthy
        checkpoint's step, or the newest one before it, to the gate, whose checkpoint choice
        skips every step at or after the anomaly (export_healthy), or resumes training once
        from the healthy checkpoint, or from the converted checkpoint when there is none: it
        starts over (resume; a resumed attempt's rules say stop)."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl import deployment
        from tpu_rl.checkpoints import resume
        from tpu_rl.checkpoints.checkpoint_choice import healthy_checkpoint
        from tpu_rl.run_summary import write_summary
        from tpu_rl.settings.choices import HealthAction
        from tpu_rl.training_log import evaluations
        from tpu_rl.watch import health

        # the wait's event carries the watchdog's health.Anomaly, as JSON
        # (tpu_rl.watch.core.unhealthy_event)
        found = cast("Anomaly", event.get("anomaly") or {})
        exporting = event.get("action") == HealthAction.EXPORT_HEALTHY
        # the attempt's own end, not the run's: an export of its healthy checkpoint, or the
        # resume after it, can still succeed
        history.end(event, resume.STOPPED_UNHEALTHY, layout.pool_hosts, rung=layout.rung)
        self.record_attempts(context, history)
        self.release_tpus()
        self.stop_training_job()
        below = int(found.get("anomaly_step") or 0)
        step, uri = healthy_checkpoint(layout.checkpoints_dir, deployment.gcp_conn_id(), below)
        anomaly: RecordedAnomaly = {
            **found,
            "healthy_step": step,
            "healthy_checkpoint": uri,
            "action": event.get("action"),
        }
        context["ti"].xcom_push(key="anomaly", value=anomaly)
        self.recorded_anomaly = anomaly
        write_summary(context["ti"], self.task_id, anomaly=anomaly)  # the page, note and report
        kept = f"the healthy checkpoint is step {step}: {uri}" if uri else "no healthy checkpoint"
        message = health.failure_text(anomaly, kept)
        resuming = event.get("action") == HealthAction.RESUME
        if resuming and not resume.health_resumed(history):  # once: then the rules say stop
            self.log.warning("%s", message)
            return self.resume_unhealthy(context, layout, history, anomaly)
        rewards: dict[str, Any] = {
            "pre": history.first_pre,
            "intermediate": evaluations.by_step(history.evaluations),
            "attempts": history.attempts,
        }
        if not exporting or step is None:
            write_summary(context["ti"], self.task_id, rewards=rewards)
            raise AirflowFailException(message)
        # the exported step's own evaluation, or the newest before it: never a later step's,
        # whose weights are not exported (the gate names it: tpu_rl.promotion.gate.candidate)
        scored = [e for e in rewards["intermediate"] if e["step"] <= step]
        if not scored:
            write_summary(context["ti"], self.task_id, rewards=rewards)
            raise AirflowFailException(
                f"{message}\nNo evaluation at or before the healthy step {step} to gate."
            )
        self.log.warning(
            "%s\nGated on the evaluation of step %s, the newest at or before the healthy step %s.",
            message,
            scored[-1]["step"],
            step,
        )
        post = {k: v for k, v in scored[-1].items() if k not in ("kind", "attempt")}
        rewards = {**rewards, "post": post}
        write_summary(context["ti"], self.task_id, rewards=rewards)
        return {**rewards, "evaluations": history.evaluations, "anomaly": anomaly}

    def stop_training_job(self) -> None:
        """Delete the training Job (the trigger did, unless the wait ended in a poke or at the
        first poll of a retry); never raises: cleanup deletes it too."""
        try:
            self.hook.batch_v1_client.delete_namespaced_job(
                name=self.job_name, namespace=self.namespace, propagation_policy="Foreground"
            )
        except Exception as err:  # gone already, or unreachable: cleanup's
            self.log.info("Training Job %s not deleted here (%s).", self.job_name, err)

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
        self.tensorboard_dir = layout.tensorboard_dir  # the watchdog reads its scalars
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
