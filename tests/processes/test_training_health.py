"""The training watchdog across a triggerer restart, with Airflow's real processes:
a trigger rebuilt by a new triggerer judges with what the killed one had seen (its memory: the
step intervals, the losses, the best reward, travels in the follower's state, saved on the
training Job, tpu_rl.rewards.position, and in the trigger's kwargs after a progress report).

Training is held after its first evaluation (step 10) while the triggerer is killed and a new
one started; then a NaN, or a stall right after the release: one step line after the restart
gives one new step interval, fewer than the three the stall rule waits for, so the new trigger
calls the silence a stall only with the intervals seen before the restart."""

from __future__ import annotations

import pytest

from sandbox.processes.deployment import Deployment
from sandbox.processes.runs import finish, start_run, task_log, wait_for_event
from sandbox.training_curve import TrainingFaults
from tests.support.process_runs import wait_for_task_line

WAIT = "wait_for_rewards"
# after test_processes.py's scenarios, on their deployment (make test: --dist loadgroup)
pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.defers]
# the stall floor (18 s): longer than the hold while the triggerer restarts (about 4 s), so
# the hold is no stall, and shorter than the Job's deadline (runs.LOADED_LIMITS); steps are
# 0.06 s apart, so the floor is the stall limit
HEALTH = {
    "num_batches": 100,
    "checkpoint_period": 10,
    "health_stall_floor_minutes": 0.3,
}


def restart_triggerer_while_held(deployment: Deployment, run) -> None:
    api, procs = deployment.api(), deployment.processes
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    api.wait_task(run.run_id, WAIT, {"deferred"})
    # the trigger has read the steps to the evaluation and saved its position (said after it)
    wait_for_task_line(deployment, run, WAIT, "Intermediate Eval step=10 ")
    procs.kill("triggerer")
    procs.start("triggerer")
    run.training_released.set()


def test_a_nan_after_a_triggerer_restart_stops_training(deployment: Deployment, e2e_report):
    faults = TrainingFaults(nan_at_step=15)
    run = start_run(deployment, deployment.api(), "nan_restart", 60, train_faults=faults, **HEALTH)
    restart_triggerer_while_held(deployment, run)
    tasks = finish(deployment, run, "failed", e2e_report)
    assert tasks[WAIT] == "failed" and tasks["export"] != "success", tasks
    log = task_log(deployment, run, WAIT)
    assert "Training health: nonfinite_loss at step 15" in log, log[-3000:]
    assert "the healthy checkpoint is step 10" in log, log[-3000:]


def test_a_stall_after_a_triggerer_restart_is_judged_on_the_intervals_before_it(
    deployment: Deployment, e2e_report
):
    faults = TrainingFaults(stall_at_step=12)
    run = start_run(
        deployment, deployment.api(), "stall_restart", 60, train_faults=faults, **HEALTH
    )
    restart_triggerer_while_held(deployment, run)
    tasks = finish(deployment, run, "failed", e2e_report)
    assert tasks[WAIT] == "failed" and tasks["export"] != "success", tasks
    log = task_log(deployment, run, WAIT)
    assert "Training health: stall at step 11" in log, log[-3000:]
