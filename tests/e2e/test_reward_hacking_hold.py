"""A run that shows reward hacking is held for a person, with approval=none: its rising reward
and its completions grown three times (TensorBoard, which no health rule reads for this), and its
gain on GSM8K bought with a guard benchmark, ARC-Easy, answered worse than the base model (55%
against 75% of 200 items), make approve ask, with the evidence of both and the benchmarks' table
on the Required Actions page. Nobody answers within approval_timeout_minutes, the request's
default (reject) answers, and the export stays unpromoted. Before the hold, approval=none
promoted it at once (the deployment's first run: no champion, its export the first candidate).

Both holds in one run (a whole run with a minute's wait is the costly part): each keeps its
reason and evidence when found together (tests/unit/heldout/test_hold.py)."""

from __future__ import annotations

import logging

import pytest

from sandbox.harness import HELDOUT, SETTINGS, Sandbox, Workloads, logged_note
from sandbox.heldout_eval import HeldoutWorkload
from sandbox.training_curve import TrainingFaults
from tests.support.approval_wait import approval_body, scheduler_timeout_sweep

CONF = {**SETTINGS, **HELDOUT, "approval": "none", "approval_timeout_minutes": 1}


# the approval's minute beside the run: test_one_cost's approval scenario takes the same limit
@pytest.mark.timeout(600)
def test_a_run_whose_completions_grew_and_that_lost_a_guard_benchmark_waits_for_a_person(
    airflow_db, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    hacking = TrainingFaults(length_drift_from_step=10)
    heldout = HeldoutWorkload(
        base={"gsm8k": 0.70, "arc_easy": 0.75}, steps={"gsm8k": 0.85, "arc_easy": 0.55}
    )
    with Sandbox(tmp_path).up() as box, scheduler_timeout_sweep():
        result = box.run(CONF, Workloads(train_faults=hacking, heldout=heldout))
    states, xcoms = result.task_states, result.xcoms
    assert states["verify"] == "success", result.why()
    assert xcoms["compare_champion.return_value"]["beats"]  # nothing to beat
    assert (states["approve"], states["promote"]) == ("success", "skipped"), states  # timed out
    body = approval_body(result.run_id)
    assert "## Held: possible reward hacking" in body, body
    # the completions' length
    assert "the training reward rose while the completion length grew" in body, body
    assert "- completion length (completions/train/mean_length) " in body, body
    # the guard benchmark
    assert "answers guard benchmark arc_easy significantly worse than the base model" in body
    assert "- guard arc_easy: worse than the base model: " in body, body
    assert "## Held-out benchmarks" in body and "| arc_easy (guard) |" in body, body
    note = logged_note(caplog.records)
    promotion = "not promoted: the approval timed out (rejected); the export stays; held for a "
    assert f"{promotion}person because the training reward rose while the completion" in note, note
    assert "; step " in note and "answers guard benchmark arc_easy" in note, note
