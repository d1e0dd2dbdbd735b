"""The reward sensor with what it follows, its intervals and limits taken from the run."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException
from kubernetes.client import CustomObjectsApi

from tpu_rl import deployment
from tpu_rl.limits import DEADLINE_ATTR, RunLimited
from tpu_rl.names import CONTAINER
from tpu_rl.operators import on_run_cluster
from tpu_rl.reward_sensor import RewardSensor

# What the run is made of (layout, manifests, kube, resume history) is imported where the wait
# runs, not on every parse of the DAG file.

REMOVAL_TIMEOUT_S = 300  # how long a lost attempt's Job and backend may take to go

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl import resume
    from tpu_rl.layout import RunLayout


class RunRewardSensor(RunLimited, RewardSensor):
    """RewardSensor on the run's training Job and backend, with the run's poll interval,
    pending and total timeouts.

    The names are computed from the run (settings and run id), as the steps that create the
    Job and JobSet compute them: no XCom template. The total timeout is also capped at the
    run's work deadline (`apply_run_limits`). The moment the wait ends, whichever way, the
    Pathways backend is deleted: by the trigger, and here again, best effort (a 5xx never
    costs the rewards; `stop_backend` and the `cleanup_kubernetes` teardown delete it too).
    The Hugging Face token is registered with the secrets masker in this process too: the
    wait relays the training pod's log lines.

    When the training lost its TPU capacity (a `capacity_lost` event: preempted or removed
    nodes, evicted pods), the wait resumes it at most `max_training_restarts` times: a new
    backend, then a new training Job, under the same names, run_name and checkpoint directory
    (MaxText restores its newest complete checkpoint), within the same total timeout. The
    result's `pre` is the first attempt's Pre line; `attempts` lists the attempts (also pushed
    under the XCom key "attempts" at each resume or failure). The count of resumes lives in the
    task state store, so retries do not reset it. (Deferred waits only: a poking sensor fails.)
    """

    def __init__(self, **kwargs: Any) -> None:
        # on the run's cluster unless named; what it follows is set from the run in execute
        super().__init__(**on_run_cluster({"job_name": "", **kwargs}))

    def execute(self, context: Context) -> Any:
        from tpu_rl import resume

        layout = self._follow_run(context)
        s = layout.settings
        self._mask_token()
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        # by name: a webhook-injected sidecar makes the client pod's container list ambiguous
        self.container_name = self.container_name or CONTAINER
        self.deadline_cap = getattr(self, DEADLINE_ATTR, None)
        history = resume.History.load(context.get("task_state_store"))
        if history.resuming:  # a retry in the middle of a resume: finish it
            return self._restart(context, layout, history)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from tpu_rl import capacity_loss, resume

        layout = self._follow_run(context)
        self._mask_token()
        store = context.get("task_state_store")
        history = resume.History.load(store)
        if event.get("reason") == capacity_loss.REASON and store is not None:
            return self._resume(context, layout, history, event)
        succeeded = event.get("status") == "success"
        history.end(event, resume.COMPLETED if succeeded else resume.FAILED, layout.pool_hosts)
        if not succeeded:
            self._keep(context, history)
        try:
            result = super().execute_complete(context, event)
        finally:
            self._release_tpus()
        # the gate compares with the base model: the first attempt's Pre line
        return {**result, "pre": history.first_pre, "attempts": history.attempts}

    # -- resume after capacity loss ---------------------------------------------------------

    def _resume(
        self, context: Context, layout: RunLayout, history: resume.History, event: dict[str, Any]
    ) -> Any:
        """Resume training from its newest complete checkpoint, or fail past the limit."""
        from tpu_rl import resume
        from tpu_rl.storage import checkpoint_steps

        limit, why = layout.settings.max_training_restarts, event.get("message", "")
        why = why.split("\n", 1)[0]  # the evidence; the log lines follow it
        history.end(event, resume.CAPACITY_LOST, layout.pool_hosts)
        if not resume.may_resume(history, limit):
            self._keep(context, history)
            self._release_tpus()
            raise AirflowFailException(resume.exhausted(history, limit, why))
        complete, _ = checkpoint_steps(layout.checkpoints_dir, self.gcp_conn_id)
        step = complete[-1] if complete else None
        self.log.warning(resume.resume_line(step, history, limit, why))
        history.begin(step, layout.pool_hosts, started=None)
        history.resuming = True
        self._keep(context, history)
        return self._restart(context, layout, history)

    def _restart(self, context: Context, layout: RunLayout, history: resume.History) -> None:
        """Delete the lost attempt's Job and backend, and wait in the triggerer until they are
        gone (their pods end with a grace period) before new ones take the same names."""
        from tpu_rl import kube
        from tpu_rl.removed_trigger import RemovedTrigger

        s, api_client = layout.settings, self.hook.get_conn()
        kube.delete_labelled(api_client, "jobs", s.namespace, self.job_name)
        kube.delete_backend(api_client, s.namespace, layout.backend_jobset)
        objects = {
            f"Job {self.job_name}": kube.job_path(s.namespace, self.job_name),
            f"JobSet {layout.backend_jobset}": kube.jobset_path(s.namespace, layout.backend_jobset),
        }
        self.defer(
            trigger=RemovedTrigger.for_operator(
                self,
                objects,
                deadline=min(self._deadline(context), time.time() + REMOVAL_TIMEOUT_S),
                poll_interval=min(float(s.poll_interval_seconds), 5.0),
            ),
            method_name="resubmit_backend",
        )

    def resubmit_backend(self, context: Context, event: dict[str, Any]) -> None:
        """The lost attempt is gone: submit a new backend under the same names and wait in the
        triggerer until it runs (capacity may take a while to return)."""
        from tpu_rl import resume
        from tpu_rl.backend import backend_running_trigger, submit_backend

        layout = self._follow_run(context)
        if event.get("status") != "success":
            raise AirflowException(f"resume: {event.get('message')}")
        submit_backend(CustomObjectsApi(self.hook.get_conn()), layout, self.log)
        history = resume.History.load(context.get("task_state_store"))
        history.attempts[-1]["started"] = resume.now_iso()
        self._keep(context, history)
        pending = time.time() + layout.settings.pending_timeout_minutes * 60.0
        pending = min(self._deadline(context), pending)
        self.defer(
            trigger=backend_running_trigger(self, layout, pending),
            method_name="resume_training",
        )

    def resume_training(self, context: Context, event: dict[str, Any]) -> Any:
        """The new backend runs: submit the training Job again (same name, run_name and
        checkpoint directory: MaxText restores its newest checkpoint) and follow it afresh."""
        from tpu_rl import kube, manifests, resume
        from tpu_rl.backend import backend_failure

        layout = self._follow_run(context)
        store = context.get("task_state_store")
        history = resume.History.load(store)
        history.resuming = False
        if (failure := backend_failure(event)) is not None:
            history.end({}, resume.FAILED, layout.pool_hosts)
            self._keep(context, history)
            self._release_tpus()
            raise AirflowFailException(f"resume {history.resumes}: {failure}") from failure
        created = kube.create_job(
            self.hook.get_conn(), layout.settings.namespace, manifests.train_job(layout)
        )
        self.log.info("Training Job %s %s.", self.job_name, "submitted" if created else "exists")
        history.save(store)
        return self.execute(context)

    def _keep(self, context: Context, history: resume.History) -> None:
        """Save the history; push the attempts so far (a failed run still tells them)."""
        from tpu_rl import resume

        history.save(context.get("task_state_store"))
        context["ti"].xcom_push(key=resume.XCOM_KEY, value=history.attempts)

    def _follow_run(self, context: Context) -> RunLayout:
        """Follow the run's training Job (its training container) and backend JobSet."""
        from tpu_rl.runtime import layout_from_context

        layout = layout_from_context(context)
        self.namespace = layout.settings.namespace
        self.job_name = layout.job_names["train"]
        self.container_name = CONTAINER
        self.backend_jobset_name = layout.backend_jobset
        return layout

    def _mask_token(self) -> None:
        """Register the token with the masker; one this process cannot read it cannot log."""
        try:
            deployment.hf_token()
        except deployment.DeploymentError as err:
            self.log.warning("Hugging Face token not registered for masking: %s", err)

    def _release_tpus(self) -> None:
        """Delete the backend; never raises (the rewards are worth more than this delete)."""
        from tpu_rl.kube import delete_backend

        if not self.backend_jobset_name:
            return
        try:
            deleted = delete_backend(self.hook.get_conn(), self.namespace, self.backend_jobset_name)
        except Exception as err:
            self.log.warning(
                "Could not delete backend %s now (%s); stop_backend and cleanup will.",
                self.backend_jobset_name,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
            return
        self.log.info(
            "Backend %s %s.", self.backend_jobset_name, "deleted" if deleted else "already gone"
        )
