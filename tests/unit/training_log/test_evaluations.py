"""Evaluation as data: every Pre, Intermediate Eval and Post line of every training
attempt is kept, each step's evaluation is its latest attempt's, and the per-step table marks
the exported step."""

from __future__ import annotations

from typing import Any

from tests.support.wait_task import (
    BASE_PRE,
    POST,
    RESTORED_PRE,
    QuietLog,
    Ti,
    lost,
    new_sensor,
    saved_history,
)
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.training_log.evaluations import by_step, step_table
from tpu_rl.watch.state import FollowState

FIELDS = "corr=9, total=64, accuracy={acc}%, partial_accuracy=20%, format_accuracy=80%, "


def eval_line(second: int, step: int, acc: float, reward: float) -> str:
    return (
        f"2026-12-01T10:00:{second:02d}Z W1201 train_rl.py:702] Intermediate Eval "
        f"(step={step}): {FIELDS.format(acc=acc)}mean_reward={reward}"
    )


def mid(step: int, reward: float) -> dict[str, Any]:
    return {"step": step, "mean_reward": reward, "accuracy": 10.0, "time": f"t{step}"}


def test_the_follower_keeps_every_intermediate_line_and_reports_them_with_post():
    state = FollowState()
    lines = [
        eval_line(1, 10, 14.0625, 0.2),
        eval_line(2, 20, 12.5, 0.15),
        "2026-12-01T10:00:03Z W1201 train_rl.py:824] Post RL Training: "
        + FIELDS.format(acc=15.625)
        + "mean_reward=0.18",
    ]
    event = consume(state, [Line(text) for text in lines], Resent(), QuietLog())
    assert event is not None and event["post"]["mean_reward"] == 0.18
    assert [(m["step"], m["mean_reward"], m["time"]) for m in event["intermediate"]] == [
        (10, 0.2, "2026-12-01T10:00:01Z"),
        (20, 0.15, "2026-12-01T10:00:02Z"),
    ]
    assert event["intermediate"][0]["accuracy"] == 14.0625
    # the position the Job's annotation saves carries them to a rebuilt trigger
    assert FollowState.from_dict(state.as_dict()).intermediate == event["intermediate"]


def test_a_resumed_run_keeps_every_attempts_lines_and_each_steps_latest(sensor):
    """Attempt 1 evaluates steps 10..60 and is lost at 62; attempt 2 restores 50, logs Pre for
    it, evaluates 60 again (recomputed) and 70..90, then Post."""
    context = {"ti": Ti()}
    first = [mid(step, 0.1 + step / 1000) for step in (10, 20, 30, 40, 50, 60)]
    sensor.execute_complete(context, {**lost(BASE_PRE, 62), "intermediate": first})
    kept = saved_history(sensor).evaluations  # in the run's record: a retry still has them
    assert [(e["kind"], e["attempt"], e["step"]) for e in kept][:2] == [
        ("pre", 1, 0),
        ("intermediate", 1, 10),
    ]
    second = [mid(60, 0.05), *(mid(step, 0.2) for step in (70, 80, 90))]
    success = {"status": "success", "pre": RESTORED_PRE, "post": POST, "post_time": "t"}
    result = new_sensor().execute_complete(
        {"ti": Ti()}, {**success, "intermediate": second, "reached_step": 100}
    )
    evaluations = result["evaluations"]
    assert [(e["kind"], e["attempt"]) for e in evaluations].count(("pre", 2)) == 1
    assert next(e for e in evaluations if e["kind"] == "pre" and e["attempt"] == 2)["step"] == 50
    assert len(evaluations) == 1 + 6 + 1 + 4 + 1  # both Pre lines, all 10 evaluations, Post
    by = {line["step"]: line for line in result["intermediate"]}
    assert sorted(by) == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert by[60]["attempt"] == 2 and by[60]["mean_reward"] == 0.05  # the recomputed step's
    assert by[50]["attempt"] == 1
    assert result["pre"] == BASE_PRE and result["post"] == POST


def test_by_step_takes_the_latest_attempt_of_a_step():
    lines = [
        {"kind": "intermediate", "attempt": 1, "step": 20, "mean_reward": 0.3},
        {"kind": "intermediate", "attempt": 1, "step": 10, "mean_reward": 0.1},
        {"kind": "pre", "attempt": 2, "step": 10, "mean_reward": 0.1},
        {"kind": "intermediate", "attempt": 2, "step": 20, "mean_reward": 0.2},
    ]
    assert [(e["step"], e["attempt"]) for e in by_step(lines)] == [(10, 1), (20, 2)]


def test_the_step_table_marks_the_exported_step_and_puts_post_at_the_final_step():
    rewards = {
        "pre": {"mean_reward": 0.08, "accuracy": 12.5},
        "intermediate": [mid(10, 0.2), mid(20, float("nan"))],
        "post": {"mean_reward": 0.12, "accuracy": 18.75},
    }
    rows = step_table(rewards, {"step": 10, "final_step": 30})
    assert [(r["step"], r["label"], r["chosen"]) for r in rows] == [
        (0, "pre", False),
        (10, "intermediate", True),
        (20, "intermediate", False),
        (30, "post", False),
    ]
    assert rows[2]["mean_reward"] is None and rows[3]["format_accuracy"] is None
    last = step_table(rewards, {"step": 30, "final_step": 30})
    assert [r["chosen"] for r in last] == [False, False, False, True]
    assert [r["step"] for r in step_table(rewards, None)] == [0, 10, 20, None]


def test_the_report_tables_each_metric_per_step_with_the_exported_step_marked():
    from tpu_rl.report.run_report import evaluations_markdown

    rewards = {
        "pre": {"accuracy": 12.5, "partial_accuracy": 20.0, "format_accuracy": 80.0,
                "mean_reward": 0.0821},
        "intermediate": [{"step": 10, "accuracy": 14.0625, "mean_reward": 0.25}],
        "post": {"accuracy": 18.75, "mean_reward": 0.1234},
    }  # fmt: skip
    lines = evaluations_markdown(step_table(rewards, {"step": 10, "final_step": 50}))
    assert lines[3] == "| step | accuracy | partial_accuracy | format_accuracy | mean_reward |"
    assert lines[5:] == [
        "| 0 (pre) | 12.50 | 20.00 | 80.00 | 0.082 |",
        "| **10** exported | 14.06 | n/a | n/a | 0.250 |",
        "| 50 (post) | 18.75 | n/a | n/a | 0.123 |",
    ]
    assert evaluations_markdown([]) == []
