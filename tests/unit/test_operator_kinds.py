"""One operator class per kind: the step, command or build names what it does, and a name of
none of them fails the parse, not the run."""

from __future__ import annotations

import pytest

from tpu_rl.operators import cluster_steps, job_run, tasks
from tpu_rl.operators.jobs import JOB_BUILDS, RunJobOperator
from tpu_rl.operators.kubernetes import CLUSTER_STEPS, RunClusterOperator
from tpu_rl.operators.steps import PYTHON_STEPS, RunStepOperator


def test_every_named_step_has_its_code_where_the_task_runs():
    assert set(PYTHON_STEPS) == set(tasks.STEPS)
    assert set(CLUSTER_STEPS) == set(cluster_steps.STEPS)
    assert set(cluster_steps.RESUMES) <= set(CLUSTER_STEPS)
    assert set(JOB_BUILDS) == set(job_run.BUILDS)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RunStepOperator(task_id="t", step="train"), "'train' is none of validate"),
        (lambda: RunClusterOperator(task_id="t", step="gate"), "'gate' is none of hf_token"),
        (lambda: RunJobOperator(task_id="t", build="train"), "'train' is none of conversion"),
    ],
)
def test_an_unknown_step_fails_when_the_dag_is_parsed(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_operators_are_on_the_runs_cluster_unless_named():
    job = RunJobOperator(task_id="convert", build="conversion_job")
    assert (job.project_id, job.location, job.cluster_name) == (
        "{{ params.project }}",
        "{{ params.region }}",
        "{{ params.cluster_name }}",
    )
    assert job.deferrable and job.wait_until_job_complete
    train = RunJobOperator(task_id="train", build="train_job", wait_until_job_complete=False)
    assert not train.deferrable  # the provider refuses deferrable without the wait
    named = RunClusterOperator(task_id="t", step="stop_backend", cluster_name="other")
    assert named.cluster_name == "other" and named.location == "{{ params.region }}"
