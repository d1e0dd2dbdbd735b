"""Training that survives capacity loss: the resume decisions of the reward wait (the limit, a
real error, the first Pre line kept; tpu_rl.checkpoints.resume's history of the attempts) and
health_action=resume's. The verdict of capacity lost or a real failure is tests/unit/kube/
test_verdicts.py's; the follower's capacity_lost event against the Kubernetes API emulator,
tests/integration/test_capacity_lost.py's."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.conftest import MemoryObject
from tests.support.wait_task import (
    BASE_PRE,
    POST,
    RESTORED_PRE,
    Ti,
    lost,
    new_sensor,
    saved_history,
)
from tpu_rl.checkpoints import resume
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

# -- the resume decisions ----------------------------------------------------------------------


def test_resumes_from_the_newest_complete_step_and_keeps_the_first_pre(sensor, capsys):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    assert sensor.restarts == [1]  # one resume open: the new attempt
    said = "Resuming training from checkpoint step 50 (resume 1 of 2) after capacity loss: pod"
    assert said in capsys.readouterr().out
    history = saved_history(sensor)
    assert history.resuming and [a["resumed_from_step"] for a in history.attempts] == [None, 50]
    assert context["ti"].pushed["attempts"][0]["outcome"] == "capacity_lost"
    success = {"status": "success", "pre": RESTORED_PRE, "post": POST, "post_time": "t"}
    result = sensor.execute_complete(context, {**success, "reached_step": 100})
    assert result["pre"] == BASE_PRE and result["post"] == POST  # the gate's baseline
    assert [(a["outcome"], a["reached_step"]) for a in result["attempts"]] == [
        ("capacity_lost", 60),
        ("completed", 100),
    ]
    assert result["attempts"][0]["started"] == "2026-12-01T10:00:00Z"


def test_capacity_lost_more_often_than_allowed_fails_naming_the_attempts(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    sensor.execute_complete(context, lost(RESTORED_PRE, 70))
    with pytest.raises(AirflowFailException, match="lost its TPU capacity 3 times") as failed:
        sensor.execute_complete(context, lost(RESTORED_PRE, 80))
    assert "max_training_restarts=2" in str(failed.value) and "attempt 3" in str(failed.value)
    assert sensor.restarts == [1, 2]
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["capacity_lost"] * 3


def test_a_real_training_error_is_not_resumed(sensor):
    context = {"ti": Ti()}
    error = {"status": "error", "reason": "pod_failed", "message": "exit 1", "pre": BASE_PRE}
    with pytest.raises(AirflowFailException, match="pod_failed"):
        sensor.execute_complete(context, error)
    assert sensor.restarts == []
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["failed"]


def test_a_retry_during_a_resume_finishes_it(sensor, gcs_objects, tutorial_conf):
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    resume.History(attempts=[], resuming=True).save(
        MemoryObject(gcs_objects, layout.training_attempts)
    )
    sensor.execute({"ti": Ti()})
    assert sensor.restarts == [0]


def test_a_resumed_run_keeps_its_attempts_and_first_pre_across_tries(
    sensor, gcs_objects, tutorial_conf
):
    """No task state store (Airflow before 3.3): the record in the run's GCS folder carries the
    attempts and the base model's Pre line to the next try, in a new process."""
    sensor.execute_complete({"ti": Ti()}, lost(BASE_PRE, 60))
    assert sensor.restarts == [1]
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    assert list(gcs_objects) == [f"{layout.trained_dir}{layout.slug}/training_attempts.json"]
    assert (
        RunLayout(layout.settings, "manual__2", "test-deployment").training_attempts
        not in gcs_objects
    )
    success = {"status": "success", "pre": RESTORED_PRE, "post": POST, "post_time": "t"}
    result = new_sensor().execute_complete({"ti": Ti()}, {**success, "reached_step": 100})
    assert result["pre"] == BASE_PRE  # the gate's baseline, not the restored model's
    assert [a["outcome"] for a in result["attempts"]] == ["capacity_lost", "completed"]


def test_a_resumed_backend_that_never_runs_fails_the_wait_and_ends_its_attempt(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    timeout = {"status": "error", "reason": "pending_timeout", "message": "0/9 pods running"}
    with pytest.raises(AirflowFailException, match="resume 1: 0/9 pods running"):
        sensor.resume_training(context, timeout)
    history = saved_history(sensor)
    assert not history.resuming
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["capacity_lost", "failed"]


# -- the health resume (health_action=resume) ---------------------------------------------------


def test_a_health_resume_is_told_from_the_attempts():
    history = resume.History()
    history.begin(None, 8, started=None)
    assert not resume.health_resumed(history)
    history.begin(30, 8, started=None)
    history.attempts[-1][resume.HEALTH_RESUME] = {"anomaly_step": 40, "moved": None}
    assert resume.health_resumed(history)


def test_the_poisoned_attempts_evaluations_from_the_anomaly_step_on_are_dropped():
    lines = [
        {"kind": "pre", "attempt": 1, "step": 0},
        {"kind": "intermediate", "attempt": 1, "step": 30},
        {"kind": "intermediate", "attempt": 1, "step": 40},
        {"kind": "post", "attempt": 1, "step": None},
        {"kind": "intermediate", "attempt": 2, "step": 40},
    ]
    kept = resume.without_poisoned(lines, 1, 40)
    assert [(e["attempt"], e["step"]) for e in kept] == [(1, 0), (1, 30), (1, None), (2, 40)]


def test_the_health_resume_line_says_what_changes():
    line = resume.health_resume_line(30, "gs://b/r/checkpoints/actor/30/", [40], "gs://b/r/q/")
    assert line.startswith(
        "Resuming training from healthy checkpoint step 30 (gs://b/r/checkpoints/actor/30/) on "
        "the same slice: the save of step 40 moved to gs://b/r/q/; the watchdog starts afresh; "
        "health_action is stop for this attempt"
    )
    assert "no save at or after the anomaly step" in resume.health_resume_line(None, None, [], "")
