"""Whole DAG runs whose TPU capacity ends on a schedule: training stops right after
the last save that can finish before the end, releases the slice, and resumes from that save
on new capacity, with no step lost.

Without the stop at a save, the flex-start run's slice is taken away at its max run duration in
the middle of step 9: the first attempt ends `capacity_lost` and its steps past the save are
computed again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sandbox.harness import FLEX, SETTINGS, Sandbox, Workloads
from tests.support.e2e_runs import attempts, no_tpu_left, reported_run

STEP_S = 3000.0  # simulated seconds per step: 3 wall seconds, far above the wait's reaction
# a flex-start node lives 32000 simulated s: room for the saves of steps 4 and 8 (one every
# 4 steps), not for step 12's; a resumed attempt's new nodes have room for steps 9 to 16
FLEX_MAX_RUN_S = 32000
CONF = {**FLEX, "num_batches": 16, "checkpoint_period": 4, "max_training_restarts": 1}
# a calendar reservation of the sandbox's reservation name: a save after every step, more
# steps than its window holds (preflight asks the window for one step at an assumed 60 s),
# then flex-start in the other zone (the Job's deadline counts simulated time: 30 steps of
# 3000 s need more than the default 12 h)
ZONE, NEXT_ZONE = SETTINGS["zone"], "us-east5-a"
CALENDAR = {
    **SETTINGS,
    "capacity": "calendar",
    "capacity_ladder": f"calendar@{ZONE}, flex_start@{NEXT_ZONE}",
    "num_batches": 30,
    "checkpoint_period": 1,
    "training_timeout_minutes": 2400,
    # each rung of the ladder gets its own cluster limit (2 x 45 min): the run's worst case
    # stays within the DAG's time limit beside the long training limit
    "cluster_timeout_minutes": 45,
}


@dataclass
class Case:
    name: str
    expected: str
    workloads: Workloads = field(default_factory=Workloads)


def test_flex_start_max_run_duration_stops_at_a_save_and_resumes_on_new_nodes(
    airflow_db, tmp_path, capfd, e2e_report
):
    """The slice's nodes end 32000 s after they come: the wait stops training right after the
    last save that can finish before then, the backend is deleted, the run waits until those
    nodes are gone, and a new slice trains on from that save, to step 16.

    At the sandbox's pace that is the save of step 8 (step 12's could not finish in time), then
    steps 9 to 16. Which save is last depends on the pace the wait measures and on when
    training started on the new nodes, both wall time here: on CI's loaded 2 cores the first
    stop came at step 4 and a second at step 8. So the test holds what every pace must keep:
    each stop right after a save, each attempt resuming from the one before, no step computed
    twice, no node's time running out under training. Which save the rule picks, at a given
    pace and end, is tests/unit/watch/test_capacity_end.py's (it fails a rule that stops a save
    early)."""
    w = Workloads(train_step_s=STEP_S, flex_max_run_s=FLEX_MAX_RUN_S)
    case = Case("flex_start_max_run_duration", "success", w)
    with Sandbox(tmp_path).up() as box:
        result, log = reported_run(box, case, CONF, capfd, e2e_report)
        report = result.gcs.read(f"{result.xcoms['verify.return_value']}run-report.md").decode()
    record = attempts(result)
    *stopped, last = [(a["outcome"], a["resumed_from_step"], a["reached_step"]) for a in record]
    saves = [reached for _, _, reached in stopped]
    assert stopped and last == ("completed", saves[-1], 16), record
    assert {outcome for outcome, _, _ in stopped} == {"stopped_at_save"}, record
    assert [resumed for _, resumed, _ in stopped] == [None, *saves[:-1]], record
    assert all(s % 4 == 0 for s in saves) and saves == sorted(set(saves)) and saves[0] > 0, saves
    for step in saves:
        assert f"the save of step {step} is the last that can finish before then" in log, step
    assert {a["rung"] for a in record} == {"flex_start@us-east5-b"}, record
    assert "- attempt 1 ended: Capacity ends at" in report, report  # the stop, with its reason
    client = result.ledger.attempts
    assert [a.restored_step for a in client] == [None, *saves], client
    for before, after in itertools.pairwise(client):
        assert before.steps[-1] + 1 == after.steps[0], [a.steps for a in client]
    assert result.ledger.steps_recomputed() == 0  # nothing computed twice
    assert result.preempted == [], result.preempted  # no node's time ran out under training
    assert "capacity_lost" not in {a["outcome"] for a in record}
    assert result.xcoms.get("export.checkpoint_step") == 16, result.xcoms
    no_tpu_left(result)


def test_a_calendar_window_is_waited_for_stopped_at_a_save_and_the_next_rung_finishes(
    airflow_db, tmp_path, capfd, e2e_report
):
    """The window opens 80 s after the run starts and lasts 65 s, less than 30 steps of 3 s:
    create_cluster waits (deferred) for its start, training stops right after the last save
    that can finish before its end, and the ladder's next rung (flex-start in us-east5-a)
    trains the rest from that save, with no step computed twice."""
    with Sandbox(tmp_path).up() as box:
        # counted from the run's start, not the sandbox's: under CI's load validate, preflight
        # and the bucket once took more than 15 s, and on a slower machine more than 30 s, and
        # the window was open when create_cluster asked (no wait to see); now 80 s, for
        # a machine more loaded still
        start = datetime.now(UTC) + timedelta(seconds=80)
        window = (start, start + timedelta(seconds=65))
        w = Workloads(train_step_s=STEP_S, calendar_window=window)
        case = Case("calendar_window_then_next_rung", "success", w)
        result, log = reported_run(box, case, CALENDAR, capfd, e2e_report)
    assert "Waiting in the triggerer for the calendar window to open" in log
    opened = result.ledger.clock.simulated_at(start)
    assert min(n.started for n in result.ledger.nodes if n.tpu) >= opened - 1  # not before
    record = attempts(result)
    assert [(a["outcome"], a["rung"]) for a in record] == [
        ("stopped_at_save", f"calendar@{ZONE}"),
        ("completed", f"flex_start@{NEXT_ZONE}"),
    ], record
    saved = record[0]["reached_step"]
    assert 0 < saved < 30 and record[1]["resumed_from_step"] == saved, record
    assert f"Capacity ladder: rung 1 calendar@{ZONE} could not give the whole slice" in log
    tries = result.xcoms["create_cluster.rungs"]  # the ladder's record
    assert [(t["rung"], t["outcome"]) for t in tries] == [
        (f"calendar@{ZONE}", "capacity_ended"),
        (f"flex_start@{NEXT_ZONE}", "ready"),
    ], tries
    assert result.ledger.steps_recomputed() == 0  # nothing computed twice
    assert result.xcoms.get("export.checkpoint_step") == 30, result.xcoms
    no_tpu_left(result)
    assert result.clusters == {}
