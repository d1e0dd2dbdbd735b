"""Whole tpu_rl_post_training runs on the real trainer: the training pod runs Tunix's
GRPOLearner on its toy model on CPU (sandbox/real_trainer/grpo_toy.py), its output in the pod
log as it comes and its Orbax saves and TensorBoard files mirrored into the sandbox's Cloud
Storage as the pod writes them. The product follows it as it follows MaxText on TPUs: the
reward follower and its watchdog read the real step lines, progress is reported, the export
takes the newest committed real save, and a real stall or non-finite loss is stopped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.harness import SETTINGS, Workloads
from sandbox.orbax_saves import complete_steps
from sandbox.real_trainer.process import GRPO_TOY, RealTrainer
from tests.support.real_trainer import CONF, STEPS
from tpu_rl.watch import health
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.progress import PROGRESS_EVENT

# Every run keeps the default health rules (the faults' own runs shorten the stall floor).
# Without health_spike_floor the loss_spike rule stops this healthy run at step 11,
# "loss -0.165466 at step 11 is over 10x the median 0.000496 of the last 10 losses": real
# GRPO's loss sits near 0 (about beta * KL) with large negative steps on batches with an empty
# completion (Train step 7: -0.117961, 9: -0.072256, 11: -0.165466).


@pytest.fixture
def judged_steps(monkeypatch) -> list[int]:
    """The step of every step line the reward follower handed the watchdog, in order (the
    trigger runs in this process under dag.test)."""
    seen: list[int] = []
    judge = health.on_step

    def spy(memory, step, *args, **kwargs):
        seen.append(step)
        return judge(memory, step, *args, **kwargs)

    monkeypatch.setattr(health, "on_step", spy)
    return seen


def unhealthy(result) -> list[dict]:
    return [e for e in result.trigger_events if e.get("reason") == WaitEnd.TRAINING_UNHEALTHY]


def trainers_left() -> list[str]:
    """This process's children still running (or unreaped) grpo_toy.py."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:"))
        if int(parent) == os.getpid() and (str(GRPO_TOY) in command or not command):
            left.append(f"{proc.name}: {command or '(zombie)'}")
    return left


def committed_steps(result) -> list[int]:
    """The run's steps whose save is complete on the bucket."""
    run = result.ledger.attempts[0].run_name
    prefix = f"gemma4-26b/trained/{run}/checkpoints/actor/"
    return complete_steps(result.gcs.names(SETTINGS["gcs_bucket"], prefix), prefix)


def test_a_real_run_trains_exports_its_newest_save_and_leaves_nothing(sandbox, judged_steps):
    result = sandbox.run(CONF, Workloads(real_trainer=RealTrainer()))
    # the watchdog stopped nothing (see CONF: the loss_spike rule once did, at step 11)
    assert not unhealthy(result), unhealthy(result)[0]["message"]
    assert result.state == "success", result.why()
    # the trainer logged every step once, and the follower judged each line once, in order
    (attempt,) = result.ledger.attempts
    assert (attempt.steps, attempt.outcome) == (list(range(1, STEPS + 1)), "completed")
    assert judged_steps == list(range(1, STEPS + 1))
    # progress and an ETA were reported while it trained
    reports = [e["progress"] for e in result.trigger_events if e.get("reason") == PROGRESS_EVENT]
    assert reports, result.trigger_events
    assert reports[0]["total_steps"] == STEPS and reports[0]["steps_per_hour"] > 0
    assert all(r["eta"] for r in reports)
    assert result.xcoms["wait_for_rewards.summary"]["progress"]["step"] == reports[-1]["step"]
    # the real Pre, Intermediate Eval and Post lines reached the gate
    rewards = result.xcoms["wait_for_rewards.return_value"]
    assert [line["step"] for line in rewards["intermediate"]] == [5, 10, 15, 20]
    assert rewards["pre"]["total"] == rewards["post"]["total"] == 8
    # the export took the newest committed real save
    assert committed_steps(result) == [1, 5, 10, 15, 20]
    assert [c.step for c in result.ledger.checkpoints] == [1, 5, 10, 15, 20]
    assert result.xcoms["export.checkpoint_step"] == STEPS
    assert result.xcoms["export.return_value"]["checkpoint_uri"].endswith(f"/actor/{STEPS}/")
    run = attempt.run_name
    board = result.gcs.names(SETTINGS["gcs_bucket"], f"gemma4-26b/trained/{run}/tensorboard/")
    assert len(board) == 1 and "/events.out.tfevents." in board[0]
    assert result.leftovers == [] and trainers_left() == []


def test_a_real_stall_is_stopped_and_its_process_killed(sandbox):
    # the process stops itself (SIGSTOP) as update 14 starts: alive, silent; 12 s of silence is
    # a stall here (compiling the first step and evaluations takes 1-5 s between two lines)
    conf = {**CONF, "health_stall_floor_minutes": 0.2}
    result = sandbox.run(conf, Workloads(real_trainer=RealTrainer(fault="stall", fault_step=14)))
    assert result.state == "failed", result.why()
    (event,) = unhealthy(result)
    assert event["anomaly"]["rule"] == "stall"
    # the last line before the silence: Tunix writes update N's line in update N + 1, after
    # its computation (peft_trainer.py _write_train_metrics), so step 13's never came
    assert event["anomaly"]["step"] == 12
    (attempt,) = result.ledger.attempts
    assert attempt.steps == list(range(1, 13))
    assert attempt.outcome == "killed"  # SIGKILLed with its pod, stopped as it was
    # the newest save on the bucket (step 10's may have been still on its way: the process
    # stopped its save thread too)
    healthy = result.xcoms["wait_for_rewards.anomaly"]["healthy_step"]
    assert healthy == max(s for s in committed_steps(result) if s <= 12)
    assert result.task_states["export"] != "success"
    assert result.leftovers == [] and trainers_left() == []


def test_a_real_non_finite_loss_is_stopped_and_nothing_after_it_exported(sandbox):
    # from step 12's batch on the rewards overflow GRPO's advantages: step 12's loss is nan
    trainer = RealTrainer(fault="overflow", fault_step=12)
    result = sandbox.run(CONF, Workloads(real_trainer=trainer))
    assert result.state == "failed", result.why()
    (event,) = unhealthy(result)
    assert event["anomaly"]["rule"] == "nonfinite_loss"
    assert event["anomaly"]["step"] == 12
    assert "Train step 12 training loss: nan" in event["message"]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert anomaly["healthy_step"] < 12 and anomaly["healthy_step"] in committed_steps(result)
    exported = result.xcoms.get("export.checkpoint_step")
    assert exported is None or exported < 12, exported
    assert not (result.ledger.poisoned_steps(result.ledger.attempts[0].run_name) & {exported})
    assert result.leftovers == [] and trainers_left() == []


def test_a_real_nan_is_quarantined_and_training_resumes_from_the_healthy_save(sandbox):
    """health_action=resume on the real trainer: the saves the nan poisoned are moved to the
    run's quarantine folder, and the second trainer process restores the newest healthy save
    from the bucket (Tunix's `Restored params from step`) and trains on to the end."""
    # a save every 2 steps (and step 1): 11 saves, so Orbax's rotation (10 kept) leaves the
    # healthy ones even when the toy, faster than a poll, trained on to its end before the stop
    conf = {**CONF, "checkpoint_period": 2, "health_action": "resume"}
    trainer = RealTrainer(fault="overflow", fault_step=12, first_attempt_only=True)
    result = sandbox.run(conf, Workloads(real_trainer=trainer))
    assert result.state == "success", result.why()
    (event,) = unhealthy(result)
    anomaly = event["anomaly"]
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == ("nonfinite_loss", 12, 11)
    first, second = result.ledger.attempts
    assert first.steps[-1] >= 12 and first.outcome in ("killed", "completed")
    assert second.restored_step == 10  # the newest save before the anomaly step
    assert second.steps == list(range(11, STEPS + 1)) and second.outcome == "completed"
    # the poisoned saves live in the quarantine folder only; the export is the resumed run's
    quarantine = f"gemma4-26b/trained/{first.run_name}/quarantine/"
    names = result.gcs.names(SETTINGS["gcs_bucket"], quarantine)
    moved = {name.removeprefix(quarantine).split("/")[0] for name in names}
    assert "12" in moved and not {"2", "4", "6", "8", "10"} & moved, moved
    assert result.xcoms["export.checkpoint_step"] == STEPS
    # the report says why it resumed and what it computed again: steps 11 and 12
    report = result.gcs.read(f"{result.xcoms['verify.return_value']}run-report.md").decode()
    assert (
        "resumed 1 time(s) after a training health anomaly and computed 2 step(s) again" in report
    ), report
    assert result.leftovers == [] and trainers_left() == []
