"""tpu_rl.operators.job_steps: the Job steps are on the run's cluster unless one is named and
wait in the triggerer; convert's skip and folder lock; export's choice (the Jobs' waits:
test_jobs.py; export's committed step and the failed pods' logs:
tests/unit/jobs/test_failed_pods.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowSkipException

from tpu_rl.layout import RunLayout
from tpu_rl.operators.backend import StopPathwaysBackendOperator
from tpu_rl.operators.job_steps import (
    ConvertCheckpointOperator,
    ExportCheckpointOperator,
    StartTrainingOperator,
)
from tpu_rl.settings.run_settings import load_settings

NO_XCOMS = SimpleNamespace(xcom_pull=lambda **kwargs: None)  # a run before any result


def test_the_operators_are_on_the_runs_cluster_unless_named():
    job = ConvertCheckpointOperator(task_id="convert")
    assert (job.project_id, job.location, job.cluster_name) == (
        "{{ params.project }}",
        "{{ params.region }}",
        "{{ params.cluster_name }}",
    )
    assert job.deferrable and job.wait_until_job_complete
    train = StartTrainingOperator(task_id="train")
    assert not train.deferrable  # the provider refuses deferrable without the wait
    named = StopPathwaysBackendOperator(task_id="t", cluster_name="other")
    assert named.cluster_name == "other" and named.location == "{{ params.region }}"


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), "manual__j", "dep")


def test_a_committed_conversion_is_skipped(layout, monkeypatch):
    from tpu_rl import storage

    committed: list[str] = []
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: committed.append(uri) or True)
    with pytest.raises(AirflowSkipException, match="is committed: conversion skipped"):
        ConvertCheckpointOperator(task_id="convert").skip_if_committed(layout)
    assert committed == [layout.maxtext_step]
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: False)
    ConvertCheckpointOperator(task_id="convert").skip_if_committed(layout)


def test_the_lock_is_this_runs_for_as_long_as_the_conversion_may_take(layout):
    step = ConvertCheckpointOperator(task_id="convert")
    context = {"run_id": "manual__j", "dag": SimpleNamespace(dag_id="tpu_rl_post_training")}
    before = time.time()
    owner = step.lock_owner(layout, context)
    assert (owner.run_id, owner.dag_id, owner.deployment) == (
        "manual__j",
        "tpu_rl_post_training",
        "dep",
    )
    minutes = ConvertCheckpointOperator.limit.minutes(layout.settings)
    assert before + minutes * 60 <= owner.expires <= time.time() + minutes * 60


def test_a_runs_state_is_read_as_text_and_an_unreadable_one_is_none():
    class States:
        def get_dagrun_state(self, dag_id: str, run_id: str) -> object:
            if run_id == "gone":
                raise LookupError(run_id)
            return SimpleNamespace(value="running")

    state = ConvertCheckpointOperator.run_state({"ti": States()})
    assert state("d", "r") == "running" and state("d", "gone") is None


def test_an_export_without_a_committed_checkpoint_fails_naming_why(layout, monkeypatch):
    from tpu_rl.checkpoints import checkpoint_choice

    def no_choice(*args: object) -> None:
        raise ValueError("no committed checkpoint under gs://b/ck/")

    monkeypatch.setattr(checkpoint_choice, "choose_for_run", no_choice)
    with pytest.raises(AirflowException, match="no committed checkpoint under gs://b/ck/"):
        ExportCheckpointOperator(task_id="export").choose(layout, {"ti": NO_XCOMS})
