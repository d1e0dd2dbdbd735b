"""A run whose training shows reward hacking is held for a person: with approval=none, its
rising reward and its completions grown three times (TensorBoard, which no health rule reads
for this) make approve ask, with the evidence on the Required Actions page; nobody answers
within approval_timeout_minutes, the request's default (reject) answers, and the export stays
unpromoted. Before the hold, approval=none promoted it at once."""

from __future__ import annotations

import logging

import pytest

from sandbox.harness import SETTINGS, Sandbox, Workloads, logged_note
from sandbox.training_curve import TrainingFaults
from tests.support.approval_wait import approval_body, scheduler_timeout_sweep

CONF = {
    **SETTINGS,
    "num_batches": 40,
    "checkpoint_period": 20,
    "approval": "none",
    "approval_timeout_minutes": 1,
}


# the approval's minute beside the run: test_one_cost's approval scenario takes the same limit
@pytest.mark.timeout(600)
def test_a_run_whose_completions_grew_as_its_reward_rose_waits_for_a_person(
    airflow_db, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    hacking = TrainingFaults(length_drift_from_step=10)
    with Sandbox(tmp_path).up() as box, scheduler_timeout_sweep():
        result = box.run(CONF, Workloads(train_faults=hacking))
    assert result.task_states["verify"] == "success", result.why()
    assert result.task_states["approve"] == "success", result.task_states  # timed out: reject
    assert result.task_states["promote"] == "skipped", result.task_states
    body = approval_body(result.run_id)
    assert "## Held: possible reward hacking" in body, body
    assert "the training reward rose while the completion length grew" in body, body
    assert "- completion length (completions/train/mean_length) " in body, body
    note = logged_note(caplog.records)
    promotion = "not promoted: the approval timed out (rejected); the export stays; held for a "
    assert f"{promotion}person because the training reward rose while the completion" in note, note
