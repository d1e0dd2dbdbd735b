"""One operator class per step: each on the run's cluster unless one is named."""

from __future__ import annotations

from tpu_rl.operators.backend import StopPathwaysBackendOperator
from tpu_rl.operators.job_steps import ConvertCheckpointOperator, StartTrainingOperator


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
