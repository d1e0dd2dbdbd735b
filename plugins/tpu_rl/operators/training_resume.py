"""Resuming training in the reward wait: after a capacity loss, after a stop at the last save
before the capacity ends, and once after a fatal training health rule (health_action=resume,
its poisoned saves moved out of the checkpoint folder first); each a new backend, then a new
training Job, under the same names (MaxText restores its newest complete checkpoint)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from tpu_rl.operators.run_step import RunStep
from tpu_rl.rewards.sensor import RewardSensor

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.checkpoints.resume import History
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.fields import RunSettings
    from tpu_rl.storage import JsonObject
    from tpu_rl.watch.health import Rules


class TrainingResumes(RunStep, RewardSensor):
    """The reward wait's resumes (the base of WaitForRewardsSensor, whose run objects, hook,
    deadlines and XComs they use)."""

    attempts_record: JsonObject  # the run's record of the training attempts (set_run_objects)

    def set_run_objects(self, context: Context) -> RunLayout:
        """Point the wait at the run's objects; returns the run's layout."""
        raise NotImplementedError

    def release_tpus(self) -> None:
        """Delete the run's backend; never raises."""
        raise NotImplementedError

    def resume_after_loss(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> NoReturn:
        """Resume training from its newest complete checkpoint, or fail past the limit."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.checkpoints import resume

        limit, why = layout.settings.max_training_restarts, event.get("message", "")
        why = why.split("\n", 1)[0]  # the evidence; the log lines follow it
        history.end(event, resume.CAPACITY_LOST, layout.pool_hosts, rung=layout.rung)
        if not resume.may_resume(history, limit):
            self.record_attempts(context, history)
            self.release_tpus()
            raise AirflowFailException(resume.exhausted(history, limit, why))
        self.resume_from_save(
            context, layout, history, lambda step: resume.resume_line(step, history, limit, why)
        )

    def resume_after_stop(
        self, context: Context, layout: RunLayout, history: History, event: dict[str, Any]
    ) -> NoReturn:
        """Training stopped right after the last save its capacity allowed: resume from that
        save once the nodes whose time is up are gone (new capacity, a fresh run duration)."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.checkpoints import resume
        from tpu_rl.preflight.calendar_reservation import window_closed
        from tpu_rl.settings.capacity_modes import CapacityEnd, capacity_mode

        history.end(event, resume.STOPPED_AT_SAVE, layout.pool_hosts, rung=layout.rung)
        if capacity_mode(layout.settings.capacity).ends is not CapacityEnd.WINDOW_END:
            self.resume_from_save(
                context, layout, history,
                lambda step: f"Resuming from committed step {step} on new nodes.",
                event.get("nodes"), event.get("ends_at"),
            )  # fmt: skip
        # the calendar window is over: no new nodes there; the ladder's next rung, if any
        elif (nxt := self.leave_ended_rung(context, layout, event)) is None:
            self.record_attempts(context, history)
            raise AirflowFailException(window_closed(layout.settings, event["save_step"]))
        else:
            line = f"Resuming from committed step {{}} on the capacity ladder's next rung {nxt}."
            self.resume_from_save(context, layout, history, line.format, then="resume_on_next_rung")

    def resume_unhealthy(
        self, context: Context, layout: RunLayout, history: History, anomaly: Mapping[str, Any]
    ) -> NoReturn:
        """A fatal health rule stopped training (health_action=resume, the first time): open the
        health resume, drop the poisoned model's evaluations, and restart once the Job and
        backend are gone; resubmit_backend then quarantines the saves at or after the anomaly
        step, so MaxText restores the newest healthy one (tpu_rl.checkpoints.quarantine), or, with
        none, loads the converted checkpoint (load_parameters_path) as the first attempt did:
        training starts over."""
        from tpu_rl.checkpoints import resume

        below = int(anomaly["anomaly_step"])
        ended = history.attempts[-1]["attempt"]
        history.evaluations = resume.without_poisoned(history.evaluations, ended, below)
        history.begin(None, layout.pool_hosts, started=None, rung=layout.rung)
        history.attempts[-1][resume.HEALTH_RESUME] = {
            "rule": anomaly.get("rule"),
            "step": anomaly.get("step"),
            "anomaly_step": below,
            "moved": None,
            "quarantine": None,
        }
        history.resuming = True
        healthy = anomaly.get("healthy_step")
        start = (
            f"the newest checkpoint before step {below} (step {healthy})"
            if healthy is not None
            else f"the converted checkpoint (no save before step {below}: training starts over)"
        )
        self.log.warning(
            "health_action=resume: training resumes once from %s, once the training Job and "
            "backend are gone.",
            start,
        )
        self.record_attempts(context, history)
        self.restart(context, layout, history)

    def quarantine_poisoned(self, layout: RunLayout, history: History) -> None:
        """For a health resume not quarantined yet: move the saves at or after the anomaly step
        to the run's quarantine folder (the last attempt's pods are gone: none can commit
        another), note the step MaxText will restore, and say what changes."""
        from tpu_rl import storage
        from tpu_rl.checkpoints import quarantine, resume

        attempt = history.attempts[-1] if history.attempts else {}
        resumed = attempt.get(resume.HEALTH_RESUME)
        if not resumed or resumed.get("moved") is not None:
            return
        uri, conn = layout.checkpoints_dir, self.gcp_conn_id
        moved = quarantine.steps_from(uri, conn, int(resumed["anomaly_step"]))
        where = quarantine.quarantine_steps(uri, conn, moved)
        step, _ = storage.newest_committed_step(uri, conn)
        healthy = f"{uri.rstrip('/')}/{step}/" if step is not None else None
        attempt.update(resumed_from_step=step)
        attempt[resume.HEALTH_RESUME] = {**resumed, "moved": moved, "quarantine": where}
        self.log.warning("%s", resume.health_resume_line(step, healthy, moved, where))
        history.save(self.attempts_record)

    def attempt_health_rules(self, settings: RunSettings, history: History) -> Rules:
        """The watchdog's rules for the attempt the wait follows: the run's, but
        health_action=stop once training was resumed after an anomaly (never a resume loop)."""
        from dataclasses import replace

        from tpu_rl.checkpoints import resume
        from tpu_rl.settings.choices import HealthAction
        from tpu_rl.watch import health

        rules = health.Rules.from_settings(settings)
        if resume.health_resumed(history):
            rules = replace(rules, action=HealthAction.STOP)
        return rules

    def leave_ended_rung(
        self, context: Context, layout: RunLayout, event: dict[str, Any], outcome: str = ""
    ) -> str | None:
        """Record the rung being left (its capacity ended, or `outcome`) in the ladder's tries;
        the next rung, or None when there is none (then nothing is recorded)."""
        from tpu_rl.cluster import climb, ladder
        from tpu_rl.operators.rung_move import record_rung_left
        from tpu_rl.settings.rungs import Rung

        s = layout.settings
        rungs, current = ladder.rungs(s), Rung(s.capacity, s.zone)
        if current not in rungs or rungs.index(current) + 1 == len(rungs):
            return None
        why = str(event.get("message") or "").split("\n")[0]
        _, nxt = record_rung_left(context, s, outcome or climb.ENDED, why, self.log)
        return str(nxt)

    def resume_on_next_rung(self, context: Context, event: dict[str, Any]) -> None:
        """The ended rung's Job and backend are gone: deploy the next rungs until one stands,
        then submit the backend there."""
        from tpu_rl.operators.rung_move import deploy_rungs_after

        if event.get("status") == "success":
            deploy_rungs_after(context, self.run_layout(context).settings, self.log)
            self._layout = None  # the new rung's from here
        return self.resubmit_backend(context, event)

    def resume_from_save(
        self, context: Context, layout: RunLayout, history: History,
        line: Callable[[int | None], str], nodes: list[str] | None = None,
        until: float | None = None, then: str = "resubmit_backend",
    ) -> NoReturn:  # fmt: skip
        """Open the next attempt from the step Tunix restores, Orbax's newest finalized one
        (tpu_rl.storage), saying why (`line`), and restart training from it."""
        from tpu_rl import storage

        step, _ = storage.newest_committed_step(layout.checkpoints_dir, self.gcp_conn_id)
        self.log.warning(line(step))
        history.begin(step, layout.pool_hosts, started=None, rung=layout.rung)
        history.resuming = True
        self.record_attempts(context, history)
        self.restart(context, layout, history, nodes, until, then)

    def restart(
        self, context: Context, layout: RunLayout, history: History,
        nodes: list[str] | None = None, until: float | None = None,
        then: str = "resubmit_backend",
    ) -> NoReturn:  # fmt: skip
        """Delete the last attempt's Job and backend, and wait in the triggerer until they are
        gone (their pods end with a grace period) before new ones take the same names; and
        until `nodes` whose time is up are gone too (GKE removes them at `until` at the latest)
        so the new backend gets new ones."""
        from tpu_rl.kube import objects as kube
        from tpu_rl.kube.removed_trigger import REMOVAL_TIMEOUT_S, RemovedTrigger
        from tpu_rl.kube.swept import delete_labelled

        s, api_client = layout.settings, self.hook.get_conn()
        delete_labelled(api_client, "jobs", s.namespace, self.job_name)
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
            method_name=then,
        )

    def resubmit_backend(self, context: Context, event: dict[str, Any]) -> None:
        """The lost attempt is gone: move a health resume's poisoned saves away, submit a new
        backend under the same names and wait in the triggerer until it runs (capacity may take
        a while to return)."""
        from airflow.providers.common.compat.sdk import AirflowException
        from kubernetes.client import CustomObjectsApi

        from tpu_rl.backend.lifecycle import backend_running_trigger, submit_backend
        from tpu_rl.checkpoints import resume
        from tpu_rl.cluster.ladder import wait_s

        layout = self.set_run_objects(context)
        if event.get("status") != "success":
            raise AirflowException(f"resume: {event.get('message')}")
        history = resume.History.load(self.attempts_record)
        self.quarantine_poisoned(layout, history)
        submit_backend(CustomObjectsApi(self.hook.get_conn()), layout, self.log)
        history.attempts[-1].update(started=resume.now_iso(), rung=layout.rung)
        self.record_attempts(context, history)
        pending = min(self.wait_deadline(context), time.time() + wait_s(layout.settings))
        self.defer(
            trigger=backend_running_trigger(self, layout, pending), method_name="resume_training"
        )

    def resume_training(self, context: Context, event: dict[str, Any]) -> Any:
        """The new backend runs: submit the training Job again (same name, run_name and
        checkpoint directory: MaxText restores its newest checkpoint) and follow it afresh."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.backend.lifecycle import backend_failure
        from tpu_rl.checkpoints import resume
        from tpu_rl.cluster import climb
        from tpu_rl.jobs import manifests
        from tpu_rl.kube import objects as kube
        from tpu_rl.operators.rung_move import PENDING_TIMEOUT

        layout = self.set_run_objects(context)
        history = resume.History.load(self.attempts_record)
        if event.get("reason") == PENDING_TIMEOUT and (
            nxt := self.leave_ended_rung(context, layout, event, climb.NO_SLICE)
        ):  # the rung gave no slice back within its wait: resume on the next
            self.log.warning("Resuming on the capacity ladder's next rung %s.", nxt)
            return self.restart(context, layout, history, then="resume_on_next_rung")
        history.resuming = False
        if (failure := backend_failure(event)) is not None:
            history.end({}, resume.FAILED, layout.pool_hosts, rung=layout.rung)
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
        from tpu_rl.checkpoints import resume
        from tpu_rl.run_summary import write_summary

        history.save(self.attempts_record)
        context["ti"].xcom_push(key=resume.XCOM_KEY, value=history.attempts)
        write_summary(context["ti"], self.task_id, attempts=history.attempts)
