"""Whole DAG runs on flex-start and Spot capacity: late capacity, preemption, resume.

Without the resume: both preempted runs that should succeed fail (the wait ends with the
backend's failure at the first preemption); the used-up run fails at its first preemption
without a resume (no limit message, one client attempt); the real training error ends the same
(a client exception fails the run) and fails only on the wait's attempts record. A flex-start
slice that comes late is waited for in test_capacity_billing.py (200 minutes late).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sandbox.harness import FLEX, SPOT, RunResult, Sandbox, Workloads
from sandbox.workloads import DEFAULT_PRE
from tests.support.e2e_runs import attempts, no_tpu_left, reported_run

REPAIR_OUTLASTS_RESUME_S = 20_000.0  # simulated: 20 s of wall time at the sandbox's pace


@dataclass
class Case:
    name: str
    expected: str
    check: Callable[[RunResult, str], None]
    conf: dict[str, Any]
    workloads: Workloads = field(default_factory=Workloads)


def resumed_at_the_checkpoint(result: RunResult, log: str) -> None:
    assert result.preempted, "the fault did not fire"
    assert "Resuming training from checkpoint step 50 (resume 1 of 2) after capacity loss" in log
    client = result.ledger.attempts
    assert [a.restored_step for a in client] == [None, 50], client
    assert client[-1].steps[0] == 51 and client[-1].steps[-1] == 100, client[-1].steps
    assert 0 < result.ledger.steps_recomputed() <= 50  # at most one checkpoint period lost
    record = attempts(result)
    assert [(a["outcome"], a["resumed_from_step"]) for a in record] == [
        ("capacity_lost", None),
        ("completed", 50),
    ], record
    # preempted once step 60 is computed: Tunix logs step N's line an update late, so the log
    # shows step 59
    assert record[0]["reached_step"] >= 59 and record[1]["reached_step"] == 100, record
    assert all(a["started"] and a["ended"] and a["tpu_hosts"] == 8 for a in record), record
    gate = result.xcoms["gate.return_value"]
    assert gate["pre_mean_reward"] == DEFAULT_PRE.mean_reward, gate  # the base model's
    assert result.xcoms.get("export.checkpoint_step") == 100, result.xcoms
    no_tpu_left(result)


def resumed_when_capacity_returned(result: RunResult, log: str) -> None:
    resumed_at_the_checkpoint(result, log)
    after = log.split("Resuming training from checkpoint step 50", 1)[1]
    # the resumed backend waited in the triggerer for the repaired slice, then the client ran
    waited = after.split("Training Job", 1)[0]
    assert "Waiting: JobSet" in waited and "Unschedulable" in waited, waited[-2000:]


def resumes_used_up(result: RunResult, log: str) -> None:
    assert result.task_states["wait_for_rewards"] == "failed", result.task_states
    assert "lost its TPU capacity 2 times; max_training_restarts=1" in log
    assert [a["outcome"] for a in attempts(result)] == ["capacity_lost", "capacity_lost"]
    assert [a.restored_step for a in result.ledger.attempts] == [None, 20]  # resumed once
    assert result.task_states["cleanup_kubernetes"] == "success", result.task_states
    no_tpu_left(result)


def real_error_not_resumed(result: RunResult, log: str) -> None:
    assert result.task_states["wait_for_rewards"] == "failed", result.task_states
    assert "UNAVAILABLE: Pathways worker disconnected" in log  # the client's own exception
    assert "Resuming training" not in log and "capacity_lost" not in log
    assert len(result.ledger.attempts) == 1, result.ledger.attempts
    assert [a["outcome"] for a in attempts(result)] == ["failed"]
    no_tpu_left(result)


CASES = [
    Case(
        "spot_preempted_at_60_resumes_at_50",
        "success",
        resumed_at_the_checkpoint,
        SPOT,
        Workloads(preempt_at_steps=(60,)),
    ),
    Case(
        "flex_start_preempted_capacity_returns_late",
        "success",
        resumed_when_capacity_returned,
        {**FLEX, "pending_timeout_minutes": 2},
        # the scale-up the preempted backend's pods asked for must outlast the resume's own
        # work (the wait's end, a worker picking the task up, the old backend's deletion, the
        # new JobSet): that took over 1.8 s of wall time under load, then over 5.4 s in a CI
        # run at load average 13-17 on 2 cores (the new backend's 9 pods ready at once)
        Workloads(preempt_at_steps=(60,), provisioning_delay_s=REPAIR_OUTLASTS_RESUME_S),
    ),
    Case(
        "spot_preempted_more_often_than_max_training_restarts",
        "failed",
        resumes_used_up,
        {**SPOT, "max_training_restarts": 1, "checkpoint_period": 20},
        Workloads(preempt_at_steps=(30, 60)),
    ),
    Case(
        "spot_real_training_error_is_not_resumed",
        "failed",
        real_error_not_resumed,
        SPOT,
        Workloads(train_fail_at_step=60),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_capacity(case: Case, airflow_db, tmp_path, capfd, e2e_report):
    with Sandbox(tmp_path).up() as box:
        result, log = reported_run(box, case, case.conf, capfd, e2e_report)
        case.check(result, log)
