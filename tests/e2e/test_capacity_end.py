"""Whole DAG runs whose TPU capacity ends on a schedule (issue 30): training stops right after
the last save that can finish before the end, releases the slice, and resumes from that save
on new capacity, with no step lost.

Against the product before the stop at a save (59af1c6's parent, with this sandbox), the
flex-start run's slice is taken away at its max run duration in the middle of step 9: the
first attempt ends `capacity_lost` and its steps past the save are computed again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.e2e.test_capacity import attempts, no_tpu_left
from tests.e2e.test_strict_cloud import reported_run
from tests.sandbox.harness import FLEX, Sandbox, Workloads

STEP_S = 3000.0  # simulated seconds per step: 3 wall seconds, far above the wait's reaction
# a flex-start node lives 32000 simulated s: room for the saves of steps 4 and 8 (one every
# 4 steps), not for step 12's; a resumed attempt's new nodes have room for steps 9 to 16
FLEX_MAX_RUN_S = 32000
CONF = {**FLEX, "num_batches": 16, "checkpoint_period": 4, "max_training_restarts": 1}


@dataclass
class Case:
    name: str
    expected: str
    workloads: Workloads = field(default_factory=Workloads)


def test_flex_start_max_run_duration_stops_at_a_save_and_resumes_on_new_nodes(
    airflow_db, tmp_path, capfd, e2e_report
):
    """The slice's nodes end 32000 s after they come: the wait stops training right after the
    save of step 8 (step 12's could not finish in time), the backend is deleted, the run waits
    until those nodes are gone, and a new slice trains steps 9 to 16 from that save."""
    w = Workloads(train_step_s=STEP_S, flex_max_run_s=FLEX_MAX_RUN_S)
    case = Case("flex_start_max_run_duration", "success", w)
    with Sandbox(tmp_path).up() as box:
        result, log = reported_run(box, case, CONF, capfd, e2e_report)
    record = attempts(result)
    assert [(a["outcome"], a["resumed_from_step"], a["reached_step"]) for a in record] == [
        ("stopped_at_save", None, 8),
        ("completed", 8, 16),
    ], record
    assert "the save of step 8 is the last that can finish before then" in log, log[-3000:]
    client = result.ledger.attempts
    assert [a.restored_step for a in client] == [None, 8], client
    assert client[0].steps[-1] == 8 and client[1].steps[0] == 9, [a.steps for a in client]
    assert result.ledger.steps_recomputed() == 0  # nothing computed twice
    assert result.preempted == [], result.preempted  # no node's time ran out under training
    assert "capacity_lost" not in {a["outcome"] for a in record}
    assert result.xcoms.get("export.checkpoint_step") == 16, result.xcoms
    no_tpu_left(result)
