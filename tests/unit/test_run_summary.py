"""The run's summary (tpu_rl.run_summary): each task keeps its own part, one task may write
another's (the rungs), and every field has a check on the page's side."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import XCom

from tests.xcom_run import Run, Task
from tpu_rl.cluster.rung_record import write_tries
from tpu_rl.names import Step
from tpu_rl.run_summary import SUMMARY_KEY, write_summary

RUN_ID = "manual__summary"


@pytest.fixture
def run(monkeypatch) -> Run:
    the_run = Run(RUN_ID)
    monkeypatch.setattr(XCom, "set", the_run.set)
    return the_run


def test_a_task_sets_its_fields_and_keeps_the_others_of_its_part(run):
    wait = Task(run, Step.WAIT_FOR_REWARDS)
    write_summary(wait, wait.task_id, attempts=[{"attempt": 1}])
    write_summary(wait, wait.task_id, looks=[{"at": 1.0, "nodes": {}}])
    write_summary(wait, wait.task_id, attempts=[{"attempt": 1}, {"attempt": 2}])
    assert run.xcoms == {
        (Step.WAIT_FOR_REWARDS, SUMMARY_KEY): {
            "attempts": [{"attempt": 1}, {"attempt": 2}],
            "looks": [{"at": 1.0, "nodes": {}}],
        }
    }


def test_a_step_that_moves_the_run_writes_the_rungs_in_create_clusters_part(run):
    """tpu_rl.cluster.rung_record's one write keeps the tries in the run's summary too."""
    tries = [{"rung": "spot@us-east5-b", "outcome": "no_slice"}]
    write_tries(Task(run, Step.START_BACKEND), tries)
    assert run.xcoms[(Step.CREATE_CLUSTER, SUMMARY_KEY)] == {"rungs": tries}
    assert (Step.START_BACKEND, SUMMARY_KEY) not in run.xcoms


def test_a_field_another_task_writes_is_refused(run):
    gate = Task(run, Step.GATE)
    with pytest.raises(ValueError, match="gate writes no summary field export_uri"):
        write_summary(gate, gate.task_id, export_uri="gs://b/x/")
    assert run.xcoms == {}
