"""The run's batch Jobs through GKEStartJobOperator: the shared base (the Job built from the
run's settings, a retry following the Job it created, the triggerer's waits, a failed Job's
last log lines). The three steps are in tpu_rl.operators.job_steps."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.google.cloud.operators.kubernetes_engine import (
    GKEOperatorMixin,
    GKEStartJobOperator,
)

from tpu_rl.names import CONTAINER
from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.run_step import RunStep

JOB_NAME_LABEL = "job-name"
# A deferral whose trigger fires within seconds can fail the resumed try (apache/airflow#72716,
# see tpu_rl.backend.lifecycle.backend_runs): a Job that has ended when its wait would start
# (one an earlier try follows) or ends within SETTLE_S (a quick one: the sandbox's export
# ended 0.15 s after its submission, its trigger fired 1.5 s after the deferral) is finished
# on the worker. A TPU Job runs minutes: this costs each waiting step SETTLE_S of its worker.
SETTLE_S = 1.0
SETTLE_POLL_S = 0.1

if TYPE_CHECKING:
    from airflow.sdk import BaseOperatorLink, Context
    from airflow.triggers.base import BaseTrigger
    from kubernetes.client import models as k8s

    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout


class RunJobStep(RunStep, GKEStartJobOperator):
    """GKEStartJobOperator (on the run's cluster unless named) for a Job built at run time from
    the run's settings (`prepare`, per step).

    It also handles the provider's traps: pods that appear late (Kueue, TPU capacity) are
    waited for in the triggerer up to the pending timeout; a retry finds the Job it already
    created instead of failing on "already exists"; the deferred wait keeps the task's
    execution_timeout.
    """

    ui_color = "#d9e8fb"
    # The Job is built from the run's settings at execute: the provider's 25 pod fields hold
    # nothing to render, and every worker call records each rendered field (a pydantic adapter
    # per field and an Execution API call for the lot).
    template_fields: Sequence[str] = tuple(GKEOperatorMixin.template_fields)
    # BaseOperator's type: the provider's tuple (GKEStartJobOperator) is unannotated, so mypy
    # infers the type of its one link, which no step's links fit
    operator_extra_links: Collection[BaseOperatorLink]  # type: ignore[assignment]
    namespace: str  # the Job's ("" until configure: the provider's may be None, never ours)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("base_container_name", CONTAINER)
        kwargs.setdefault("parallelism", 1)
        kwargs.setdefault("random_name_suffix", False)
        # finished pods hold no TPU; cleanup_kubernetes deletes them with their Job
        kwargs.setdefault("on_finish_action", "keep_pod")
        # the waits are the triggerer's: no worker slot is held while the Job runs
        kwargs.setdefault("wait_until_job_complete", True)
        kwargs.setdefault("deferrable", kwargs["wait_until_job_complete"])
        super().__init__(name="", namespace="", image="", **{**RUN_CLUSTER, **kwargs})
        self.pending_timeout = timedelta(hours=1)
        self.pods_poll_interval = 10.0  # the run's poll_interval_seconds, at execute

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        """The Job to submit (or a skip)."""
        raise NotImplementedError

    def configure(self, context: Context) -> Manifest:
        """Give the provider the run's manifest as its `full_job_spec`; returns that manifest.

        build_job_request_obj keeps every field of that spec the operator leaves empty
        (cncf-kubernetes operators/job.py: reconcile_jobs, pod_generator.merge_objects) and
        adds Airflow's pod labels. Two it sets whatever the spec says: the name, prefixed with
        "job-" (job.py: `f"{JOB_NAME_PREFIX}{job.metadata.name}"`), and the parallelism, whose
        constructor default (1 in 10.25.0; ours in 10.11.1) is not empty. The namespace too:
        left empty, the pod template's would be looked up in the Kubernetes connection or the
        worker's own pod (pod.py: build_pod_request_obj)."""
        from tpu_rl.kube.objects import to_v1_job
        from tpu_rl.layout import JOB_NAME_PREFIX

        layout = self.run_layout(context)
        manifest = self.prepare(layout, context)
        self.full_job_spec = to_v1_job(manifest)
        self.name = manifest["metadata"]["name"].removeprefix(JOB_NAME_PREFIX)
        self.namespace = manifest["metadata"]["namespace"]
        self.parallelism = manifest["spec"]["parallelism"]
        self.pending_timeout = timedelta(minutes=layout.settings.pending_timeout_minutes)
        self.pods_poll_interval = float(layout.settings.poll_interval_seconds)
        self.job_poll_interval = self.pods_poll_interval
        return manifest

    def execute(self, context: Context) -> Any:
        """Submit the run's Job (a retry follows the one it created); with
        wait_until_job_complete, wait in the triggerer for its pods and then its end, unless
        the Job has ended within SETTLE_S (then it is finished here, as the triggerer's event
        would).

        The provider's execute is not used: it looks for the Job's pods at once, and fails
        when they do not exist yet (Kueue or TPU capacity can delay them)."""
        self.configure(context)
        self.job_request_obj = self.build_job_request_obj(context)
        self.job = self.create_job(job_request_obj=self.job_request_obj)
        ti = context["ti"]
        ti.xcom_push(key="job_name", value=self.job.metadata.name)
        ti.xcom_push(key="job_namespace", value=self.job.metadata.namespace)
        if self.wait_until_job_complete:
            if (ended := self.ended_within_settle(self.job)) is not None:
                self.log.info("Job %s has ended: finishing without deferring.", ended["name"])
                return self.execute_complete(context, ended)
            self.wait_in_triggerer(context)
        ti.xcom_push(key="job", value=self.job.to_dict())
        return None

    def ended_within_settle(self, created: k8s.V1Job) -> dict[str, Any] | None:
        """The event the triggerer's wait would fire, when the `created` Job has ended or ends
        within SETTLE_S; None when it still runs then."""
        from tpu_rl.jobs.job_trigger import ended_job_event, job_ended

        name, namespace = created.metadata.name, created.metadata.namespace
        deadline = time.monotonic() + SETTLE_S
        while True:
            job = self.hook.get_job_status(job_name=name, namespace=namespace)
            if job_ended(job):
                pods = self.host_zero_pod(name, namespace) if self.get_logs else None
                return ended_job_event(job, pods)
            if time.monotonic() >= deadline:
                return None
            time.sleep(SETTLE_POLL_S)

    def create_job(self, job_request_obj: k8s.V1Job) -> k8s.V1Job:
        """Create the Job; on a retry, follow the one this run already created while it runs.

        The Job is looked up before it is created: the provider's create_job retries a 409
        AlreadyExists as transient (kubernetes_helper_functions.py: TRANSIENT_STATUS_CODES holds
        409; generic_api_retry waits 1+2+4+8 s between its 5 attempts), 15 s lost per retry."""
        from kubernetes.client.rest import ApiException

        name, namespace = job_request_obj.metadata.name, job_request_obj.metadata.namespace
        try:
            existing = self.hook.get_job_status(job_name=name, namespace=namespace)
        except ApiException as err:
            if err.status != 404:
                raise
            return self.submit(job_request_obj)
        if existing.metadata.deletion_timestamp:  # an earlier run's cleanup is removing it
            self.log.info("Job %s of an earlier run is being deleted; waiting for it.", name)
            self.wait_until_gone(name, namespace)
            return self.submit(job_request_obj)
        # finished: failed, or complete with its pods gone (a cleared task is meant to redo it)
        if self.hook.is_job_failed(job=existing) or self.hook.is_job_complete(job=existing):
            self.log.info("Job %s from an earlier try has finished; replacing it.", name)
            self.hook.batch_v1_client.delete_namespaced_job(
                name=name, namespace=namespace, propagation_policy="Foreground"
            )
            self.wait_until_gone(name, namespace)
            return self.submit(job_request_obj)
        self.log.info("Job %s already exists (an earlier try); following it.", name)
        return job_request_obj

    def ran_image_digests(self, layout: RunLayout) -> dict[str, str]:
        """The digests the step's Job's pods ran (their containers' imageID), by the reference
        the settings gave: the pods are kept until the run's cleanup (on_finish_action)."""
        from tpu_rl.jobs.pod_images import pod_image_digests

        if self.pods_of is None:
            return {}
        job = layout.job_names[self.pods_of]
        return pod_image_digests(self.client, layout.settings.namespace, f"{JOB_NAME_LABEL}={job}")

    def host_zero_pod(self, job: str, namespace: str) -> list[str]:
        """Host 0's pod of the Job (none when its pods are gone), as the triggerer's wait names
        it."""
        from tpu_rl.jobs.job_trigger import host_zero

        selector = f"{JOB_NAME_LABEL}={job}"
        found = self.client.list_namespaced_pod(namespace, label_selector=selector)
        return host_zero([pod_meta(pod) for pod in found.items])

    def submit(self, job: k8s.V1Job) -> k8s.V1Job:
        """The provider's create_job without its extras: a debug line formatting the whole Job
        as YAML even when debug logging is off (about 0.1 s), and the XCom of a link that
        tpu_rl.dag.links computes from the run."""
        self.hook.create_job(job=job)
        return job

    def wait_until_gone(self, name: str, namespace: str) -> None:
        from airflow.providers.common.compat.sdk import AirflowException
        from kubernetes.client.rest import ApiException

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                self.hook.get_job_status(job_name=name, namespace=namespace)
            except ApiException as err:
                if err.status == 404:
                    return
                raise
            time.sleep(min(self.pods_poll_interval, 5))
        raise AirflowException(f"Job {name} was not deleted within 5 minutes")

    def wait_in_triggerer(self, context: Context) -> NoReturn:
        """Defers: the triggerer waits for the Job's pods (Kueue, TPU capacity: it ends the wait
        with the scheduler's or Kueue's reason), then watches for the Job's end (one deferral:
        execute_complete comes next, with host 0's pod to read)."""
        from tpu_rl.dag.run_limits import capped_deadline
        from tpu_rl.jobs.job_trigger import PodsThenJobTrigger
        from tpu_rl.jobs.manifests import QUEUE_LABEL
        from tpu_rl.kube.pods_trigger import PodsReadyTrigger

        assert self.job is not None, "execute creates the Job before it waits"
        namespace, name = self.job.metadata.namespace, self.job.metadata.name
        # the label the Job controller gives the Job's pods
        label_selector = f"{JOB_NAME_LABEL}={name}"
        self.log.info("Waiting in the triggerer for Job %s: its pods, then its end.", name)
        waiting = PodsReadyTrigger.for_operator(
            self,
            ("Job", namespace, name),
            label_selector,
            self.parallelism or 1,
            deadline=capped_deadline(self, self.pending_timeout.total_seconds()),
            poll_interval=self.pods_poll_interval,
            queued=QUEUE_LABEL in (self.job.metadata.labels or {}),
        )
        job = {
            "job_name": name,
            "job_namespace": namespace,
            "base_container_name": self.base_container_name,
            "poll_interval": self.job_poll_interval,
            "get_logs": self.get_logs,
            "do_xcom_push": self.do_xcom_push,
        }
        self.defer(trigger=PodsThenJobTrigger.around(waiting, job), method_name="execute_complete")

    def execute_complete(self, context: Context, event: dict[str, Any], **kwargs: Any) -> Any:
        """A failed wait or Job fails the task, saying why; the rest is the provider's.

        This worker did not read the token: registered first, it is masked in the Job's log
        and the failed pods' last lines it writes."""
        from tpu_rl import deployment
        from tpu_rl.token_masking import register_hf_token

        register_hf_token(deployment.hf_conn_id())
        self.check_job_event(event)
        return super().execute_complete(context, event, **kwargs)

    def check_job_event(self, event: dict[str, Any]) -> None:
        """Raises for a failed pods wait; before a failed Job's, logs the failed pods' last
        lines (the provider raises without writing them). A pods wait that failed says why (a
        Workload Kueue can never admit fails without retries); one that saw the Job or a pod
        fail is that Job's failure."""
        from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
        from kubernetes.client.rest import ApiException

        from tpu_rl.kube import verdicts

        job_failed = event.get("status") == "error" and (
            not event.get("pods_wait") or event.get("reason") == verdicts.OWNER_FAILED
        )
        if job_failed:
            from tpu_rl.jobs.failed_pods import log_failed_pods

            job = event.get("name") or (self.job.metadata.name if self.job else None)
            namespace = event.get("namespace") or self.namespace
            try:
                log_failed_pods(self.client, self.log, job, namespace)
            except ApiException as err:
                self.log.warning("Could not read the failed pods' logs: %s", err.reason)
        if event.get("pods_wait"):
            if event.get("reason") == verdicts.KUEUE_REFUSED:
                raise AirflowFailException(event.get("message"))
            if job_failed:
                raise AirflowException(event.get("message"))
            raise AirflowException(
                f"{event.get('message')}: TPU capacity or Kueue admission is missing"
            )

    def defer(
        self,
        *,
        trigger: BaseTrigger,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | float | None = None,
    ) -> NoReturn:
        """Defer with what is left of the task's limit (the run's settings): the provider's
        Job trigger has no timeout, and Airflow does not apply execution_timeout to a deferral."""
        from tpu_rl.dag.run_limits import time_left

        super().defer(
            trigger=trigger,
            method_name=method_name,
            kwargs=kwargs,
            timeout=timeout or time_left(self) or self.execution_timeout,
        )


def pod_meta(pod: k8s.V1Pod) -> dict[str, Any]:
    """A pod's name, labels and annotations, as the API's JSON names them."""
    meta = pod.metadata
    return {"name": meta.name, "labels": meta.labels, "annotations": meta.annotations}
