"""Retrying a task is safe: no duplicate Job or JobSet, no failure on "already exists"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from airflow.sdk import BaseOperator

from sandbox.harness import Sandbox
from tests.support.e2e_runs import CLUSTER, context
from tpu_rl.operators.backend import StartPathwaysBackendOperator
from tpu_rl.operators.cluster_objects import CreateTokenSecretOperator, RunClusterStep
from tpu_rl.operators.job_steps import ConvertCheckpointOperator, StartTrainingOperator


@pytest.fixture
def box(tmp_path):
    with Sandbox(tmp_path).up(existing_cluster="gemma4-rl") as sandbox:
        yield sandbox


def test_a_retried_job_submission_follows_the_job_it_created(box):
    op = StartTrainingOperator(task_id="train", **CLUSTER)
    op.configure(context())
    first = op.create_job(op.build_job_request_obj(context()))
    again = op.create_job(op.build_job_request_obj(context()))
    jobs = box.emu.list("jobs", namespace="default")
    assert [j["metadata"]["name"] for j in jobs] == [first.metadata.name] == [again.metadata.name]
    # the retry found the Job first: posted again, the 409 is retried by the provider for 15 s
    posts = [r for r in box.emu.requests if r.method == "POST" and r.path.endswith("/jobs")]
    assert [r.status for r in posts] == [201]


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("Failed", "BackoffLimitExceeded"),  # a retry replaces a Job that failed
        ("Complete", "Completed"),  # clear + re-run from the UI: its pods gone, redo it
    ],
)
def test_a_retry_replaces_a_job_that_finished(box, condition, reason):
    op = StartTrainingOperator(task_id="train", **CLUSTER)
    op.configure(context())
    job = op.create_job(op.build_job_request_obj(context()))
    old_uid = box.emu.get("jobs", "default", job.metadata.name)["metadata"]["uid"]
    box.emu.set_job_condition("default", job.metadata.name, condition, reason=reason)
    op.create_job(op.build_job_request_obj(context()))
    jobs = box.emu.list("jobs", namespace="default")
    assert len(jobs) == 1 and jobs[0]["metadata"]["uid"] != old_uid


def test_secret_and_backend_tolerate_already_exists(box, monkeypatch):
    monkeypatch.setattr(RunClusterStep, "defer", lambda self, **kwargs: None)  # no wait
    for _ in range(2):
        for step in (CreateTokenSecretOperator, StartPathwaysBackendOperator):
            step(**CLUSTER).execute(context())
    assert len(box.emu.list("secrets", namespace="default")) == 1
    assert len(box.emu.list("jobsets", namespace="default")) == 1


def test_deferred_job_waits_keep_the_tasks_execution_timeout(monkeypatch):
    """The provider's Job trigger has no timeout of its own: ours passes execution_timeout."""
    seen = {}
    monkeypatch.setattr(BaseOperator, "defer", lambda self, **kw: seen.update(kw))
    op = ConvertCheckpointOperator(
        task_id="convert",
        execution_timeout=timedelta(hours=3),
        **CLUSTER,
    )
    op.defer(trigger=object(), method_name="execute_complete")
    assert seen["timeout"] == timedelta(hours=3)
