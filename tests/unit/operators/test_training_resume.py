"""health_action=resume in the reward wait: the first fatal health rule opens one resume (its
poisoned model's evaluations dropped, its saves quarantined once the old pods are gone), from
the converted checkpoint when no save is healthy, the resumed attempt's watchdog says stop, and
a second anomaly fails the run."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.support.wait_task import BASE_PRE, Ti
from tpu_rl import storage
from tpu_rl.checkpoints import checkpoint_choice, quarantine, resume
from tpu_rl.dag import runtime
from tpu_rl.jobs.maxtext_flags import train_flags
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.settings.run_settings import load_settings

RESTARTS: list[int] = []


def new_sensor() -> run_rewards.WaitForRewardsSensor:
    return run_rewards.WaitForRewardsSensor(
        task_id="wait_for_rewards", project_id="p", location="l", cluster_name="c"
    )


@pytest.fixture
def layout(tutorial_conf, monkeypatch) -> RunLayout:
    run = RunLayout(
        load_settings({**tutorial_conf, "health_action": "resume"}), "manual__1", "deployment"
    )
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: run)
    return run


@pytest.fixture
def sensor(layout, monkeypatch, gcs_objects):
    def healthy(uri: str, conn: str, below: int) -> tuple[int, str]:
        return 30, f"{uri}30/"

    monkeypatch.setattr(checkpoint_choice, "healthy_checkpoint", healthy)
    cls = run_rewards.WaitForRewardsSensor
    RESTARTS.clear()
    monkeypatch.setattr(cls, "restart", lambda op, c, lay, h, *_: RESTARTS.append(h.resumes))
    monkeypatch.setattr(cls, "release_tpus", lambda op: None)
    monkeypatch.setattr(cls, "mask_token", lambda op: None)
    monkeypatch.setattr(cls, "stop_training_job", lambda op: None)
    return new_sensor()


def unhealthy(action: str = "resume") -> dict[str, Any]:
    """The reward trigger's event for a NaN at step 40 (tpu_rl.watch.core)."""
    anomaly = {
        "rule": "nonfinite_loss",
        "step": 40,
        "anomaly_step": 40,
        "why": "loss nan at step 40",
        "evidence": ["Train step 40 training loss: nan  - training perplexity: nan"],
    }
    return {
        "status": "error",
        "reason": "training_unhealthy",
        "message": "Training health: nonfinite_loss at step 40: loss nan at step 40",
        "anomaly": anomaly,
        "action": action,
        "pre": BASE_PRE,
        "intermediate": [{"step": 30, "mean_reward": 0.2}, {"step": 40, "mean_reward": 0.0}],
        "reached_step": 40,
    }


def test_the_first_anomaly_opens_one_health_resume_without_the_poisoned_evaluations(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, unhealthy())
    assert RESTARTS == [1]
    history = resume.History.load(sensor.attempts_record)
    outcomes = [a["outcome"] for a in history.attempts]
    assert history.resuming and outcomes == [resume.STOPPED_UNHEALTHY, None]
    assert history.attempts[-1][resume.HEALTH_RESUME] == {
        "rule": "nonfinite_loss",
        "step": 40,
        "anomaly_step": 40,
        "moved": None,  # once the old pods are gone (resubmit_backend)
        "quarantine": None,
    }
    steps = [e["step"] for e in history.evaluations if e["kind"] == "intermediate"]
    assert steps == [30]  # step 40's evaluation scored the poisoned model
    assert context["ti"].pushed["anomaly"]["action"] == "resume"
    assert context["ti"].pushed["anomaly"]["healthy_step"] == 30


def test_the_resumed_attempt_is_watched_with_health_action_stop(sensor, layout):
    fresh = resume.History()
    assert sensor.attempt_health_rules(layout.settings, fresh).action == "resume"
    sensor.execute_complete({"ti": Ti()}, unhealthy())
    history = resume.History.load(sensor.attempts_record)
    assert sensor.attempt_health_rules(layout.settings, history).action == "stop"


def test_a_second_anomaly_fails_the_run_instead_of_resuming_again(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, unhealthy())
    with pytest.raises(AirflowFailException, match="the healthy checkpoint is step 30"):
        sensor.execute_complete(context, unhealthy("resume"))  # never a resume loop
    assert RESTARTS == [1]


def test_the_poisoned_saves_are_quarantined_once_and_the_resume_says_what_changes(
    sensor, layout, monkeypatch, capsys
):
    sensor.execute_complete({"ti": Ti()}, unhealthy())
    moves: list[list[int]] = []
    where = layout.checkpoints_dir.removesuffix("checkpoints/actor/") + "quarantine/"
    monkeypatch.setattr(quarantine, "steps_from", lambda uri, conn, below: [40, 50])
    monkeypatch.setattr(
        quarantine, "quarantine_steps", lambda uri, conn, steps: moves.append(steps) or where
    )
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (30, []))
    for _ in range(2):  # a retry of resubmit_backend moves nothing again
        sensor.quarantine_poisoned(layout, resume.History.load(sensor.attempts_record))
    assert moves == [[40, 50]]
    attempt = resume.History.load(sensor.attempts_record).attempts[-1]
    assert attempt["resumed_from_step"] == 30
    assert attempt[resume.HEALTH_RESUME]["moved"] == [40, 50]
    said = capsys.readouterr().out
    healthy = f"{layout.checkpoints_dir}30/"
    assert f"Resuming training from healthy checkpoint step 30 ({healthy})" in said
    assert f"the saves of steps 40, 50 moved to {where}" in said
    assert "health_action is stop for this attempt" in said


def test_a_resume_with_no_healthy_save_starts_over_from_the_converted_checkpoint(
    sensor, layout, monkeypatch, capsys
):
    """health_action=resume promises a resume; with no save before the anomaly the run does not
    end as stop does. It starts over on the same slice: every save moved away, the
    new Job loads the converted checkpoint (load_parameters_path) as the first attempt did."""
    monkeypatch.setattr(checkpoint_choice, "healthy_checkpoint", lambda *_: (None, None))
    context = {"ti": Ti()}
    sensor.execute_complete(context, unhealthy())
    assert RESTARTS == [1]
    assert context["ti"].pushed["anomaly"]["healthy_step"] is None
    said = capsys.readouterr().out
    assert "training resumes once from the converted checkpoint (no save before step 40" in said
    # the old attempt's pods gone: its saves moved, none left for MaxText to restore
    monkeypatch.setattr(quarantine, "steps_from", lambda uri, conn, below: [40])
    monkeypatch.setattr(quarantine, "quarantine_steps", lambda uri, conn, steps: "gs://q/")
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (None, []))
    sensor.quarantine_poisoned(layout, resume.History.load(sensor.attempts_record))
    attempt = resume.History.load(sensor.attempts_record).attempts[-1]
    assert attempt["resumed_from_step"] is None and attempt[resume.HEALTH_RESUME]["moved"] == [40]
    said = capsys.readouterr().out
    assert "Resuming training from the converted checkpoint (no healthy save" in said
    assert f"load_parameters_path={layout.maxtext_items}" in train_flags(layout)
