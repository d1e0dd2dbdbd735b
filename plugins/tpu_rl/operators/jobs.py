"""The run's batch Jobs (conversion, GRPO client, export) through GKEStartJobOperator.

One class for the three, `build` naming the Job: what it does in the worker
(tpu_rl.operators.job_run: manifests, layout, storage, the triggers) is imported where a task runs,
not on every parse of the DAG file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.google.cloud.operators.kubernetes_engine import (
    GKEOperatorMixin,
    GKEStartJobOperator,
)

from tpu_rl.dag.limits import RunLimited
from tpu_rl.names import CONTAINER
from tpu_rl.operators import on_run_cluster

if TYPE_CHECKING:
    from airflow.sdk import Context
    from kubernetes.client import models as k8s

    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout

    JobBuilder = Callable[[RunLayout], Manifest] | str  # or a tpu_rl.operators.job_run.BUILDS name

JOB_BUILDS = ("conversion_job", "train_job", "export_job")


class RunJobOperator(RunLimited, GKEStartJobOperator):
    """GKEStartJobOperator (on the run's cluster unless named) for one of the run's Jobs, built
    at run time from the run's settings:
    `conversion_job` (skipped when a complete MaxText checkpoint exists), `train_job`, or
    `export_job` (of the newest checkpoint step whose save finished).

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

    def __init__(self, *, build: JobBuilder, **kwargs: Any) -> None:
        if not callable(build) and build not in JOB_BUILDS:
            raise ValueError(f"build {build!r} is none of {', '.join(JOB_BUILDS)}")
        kwargs.setdefault("base_container_name", CONTAINER)
        kwargs.setdefault("parallelism", 1)
        kwargs.setdefault("random_name_suffix", False)
        # finished pods hold no TPU; cleanup_kubernetes deletes them with their Job
        kwargs.setdefault("on_finish_action", "keep_pod")
        # the waits are the triggerer's: no worker slot is held while the Job runs
        kwargs.setdefault("wait_until_job_complete", True)
        kwargs.setdefault("deferrable", kwargs["wait_until_job_complete"])
        super().__init__(name="", namespace="", image="", **on_run_cluster(kwargs))
        self.build = build
        self.pending_timeout = timedelta(hours=1)
        self.pods_poll_interval = 10.0  # the run's poll_interval_seconds, at execute

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        """The Job to submit (or a skip)."""
        from tpu_rl.operators.job_run import job_manifest

        return job_manifest(self, layout, context)

    def configure(self, context: Context) -> Manifest:
        """Set the provider's fields from the run's manifest; returns that manifest."""
        from tpu_rl.operators.job_run import configure

        return configure(self, context)

    def execute(self, context: Context) -> Any:
        self.configure(context)
        return super().execute(context)

    def create_job(self, job_request_obj: k8s.V1Job) -> k8s.V1Job:
        """Create the Job; on a retry, follow the one this run already created while it runs."""
        from tpu_rl.operators.job_run import create_or_follow

        return create_or_follow(self, job_request_obj)

    def get_pods(self, pod_request_obj: k8s.V1Pod, context: Context, **kwargs: Any) -> NoReturn:
        """Never returns: the wait for the Job's pods and its end is the triggerer's."""
        from tpu_rl.operators.job_run import wait_in_triggerer

        wait_in_triggerer(self, pod_request_obj, context)
        raise AssertionError("wait_in_triggerer defers")  # pragma: no cover

    def execute_complete(self, context: Context, event: dict, **kwargs: Any) -> Any:
        """A failed wait or Job fails the task, saying why; the rest is the provider's."""
        from tpu_rl.operators.job_run import check_job_event

        check_job_event(self, event)
        return super().execute_complete(context, event, **kwargs)

    def defer(
        self, *, trigger: Any, method_name: str, kwargs: dict | None = None, timeout: Any = None
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
