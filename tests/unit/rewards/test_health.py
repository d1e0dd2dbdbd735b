"""The training health watchdog's rules (tpu_rl.rewards.health) and their place in the follower."""

from __future__ import annotations

import json
import logging

from tpu_rl.rewards import health
from tpu_rl.rewards.follower import FollowState, Line, Resent, consume
from tpu_rl.rewards.position import parse_position

LINE = "I1204 12:00:00.123456 1 peft_trainer.py:735] Train step {step} training loss: {loss}"


def _memory(**rules: object) -> dict:
    return health.armed(None, health.Rules(**rules))  # type: ignore[arg-type]


def _steps(memory: dict, losses: list[float], start: int = 1, every: float = 60.0) -> dict:
    for index, loss in enumerate(losses):
        step = start + index
        memory, _ = health.on_step(
            memory, step, loss, 1000.0 + step * every, LINE.format(step=step, loss=loss)
        )
    return memory


def test_a_nan_loss_is_fatal_at_its_step() -> None:
    memory = _steps(_memory(), [0.6, 0.5, float("nan")])
    anomaly = health.fatal(memory)
    assert anomaly is not None
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.NONFINITE, 3, 3)
    assert "training loss: nan" in anomaly["evidence"][-1]


def test_inf_is_fatal_and_the_rule_can_be_turned_off() -> None:
    assert health.fatal(_steps(_memory(), [0.6, float("inf")]))["rule"] == health.NONFINITE
    assert health.fatal(_steps(_memory(nonfinite_loss=False), [0.6, float("inf")])) is None


def test_the_memory_holds_no_nan_so_the_saved_position_stays_readable() -> None:
    state = FollowState(pod_uid="u", health=_steps(_memory(), [0.6, float("nan")]))
    parse_position(json.dumps(state.as_dict()))  # refuses NaN: it would be unreadable


def test_a_loss_spike_over_the_factor_of_the_rolling_median_is_fatal() -> None:
    memory = _steps(_memory(spike_factor=10, spike_window=6), [0.5, 0.4, 0.45, 0.42, 0.4])
    assert health.fatal(memory) is None
    spiked = _steps(memory, [5.0], start=6)
    anomaly = health.fatal(spiked)
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.SPIKE, 6, 6)
    assert len(anomaly["evidence"]) == health.EVIDENCE_KEPT
    assert health.fatal(_steps(memory, [3.0], start=6)) is None  # under 10x the median


def test_no_spike_before_half_the_window_is_known() -> None:
    assert health.fatal(_steps(_memory(spike_window=20), [0.01, 5.0])) is None


def test_a_stall_is_fatal_past_the_factor_and_the_floor_while_the_pod_runs() -> None:
    memory = _steps(_memory(stall_factor=5, stall_floor_s=120), [0.5, 0.4, 0.4, 0.3])  # 60 s apart
    last_at = memory["last"][1]
    assert health.on_quiet(memory, last_at + 290) is None  # under 5 x 60 s
    stalled = health.on_quiet(memory, last_at + 301)
    anomaly = health.fatal(stalled)
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.STALL, 4, 5)
    floored = _steps(_memory(stall_factor=5, stall_floor_s=900), [0.5, 0.4, 0.4, 0.3])
    assert health.on_quiet(floored, last_at + 301) is None  # the floor holds it back
    assert health.on_quiet(_memory(), 10**9) is None  # no step line yet: no stall


def test_a_reward_collapse_from_the_best_is_fatal() -> None:
    memory = health.on_eval(_memory(reward_drop=1.0), 10, 1.0, "Intermediate Eval (step=10)")
    memory = health.on_eval(memory, 20, 2.5, "Intermediate Eval (step=20)")
    assert health.fatal(health.on_eval(memory, 30, 1.6, "x")) is None  # 0.9 down
    anomaly = health.fatal(health.on_eval(memory, 30, 1.4, "Intermediate Eval (step=30)"))
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.COLLAPSE, 30, 30)


def test_early_noise_in_small_rewards_is_no_collapse() -> None:
    memory = health.on_eval(_memory(), 10, 0.2, "Intermediate Eval (step=10)")
    assert health.fatal(health.on_eval(memory, 20, 0.05, "x")) is None


def test_a_slow_step_is_a_warning_not_fatal() -> None:
    memory = _steps(_memory(slow_factor=3), [0.5, 0.4, 0.4, 0.3])
    memory, warnings = health.on_step(memory, 5, 0.3, memory["last"][1] + 200, "line")
    assert health.fatal(memory) is None
    assert len(warnings) == 1 and "Slow step: step 5" in warnings[0]


def test_consume_ends_the_wait_at_the_nan_line_with_the_anomaly() -> None:
    state = FollowState(health=_memory(action=health.EXPORT_HEALTHY))
    lines = [
        Line(f"2026-12-04T12:00:0{i}Z " + LINE.format(step=i, loss=loss))
        for i, loss in enumerate(["0.5", "0.4", "nan"], start=1)
    ]
    lines.append(Line("2026-12-04T12:00:09Z W train_rl.py:823] Post RL Training: corr=1"))
    event = consume(state, lines, Resent(), logging.getLogger("t"))
    assert event is not None and event["reason"] == health.REASON
    assert event["anomaly"]["step"] == 3 and event["action"] == health.EXPORT_HEALTHY
    assert "nonfinite_loss at step 3" in event["message"]
    assert "Train step 3 training loss: nan" in event["message"]


def test_without_the_watchdog_consume_reads_on() -> None:
    state = FollowState()
    lines = [Line("2026-12-04T12:00:01Z " + LINE.format(step=1, loss="nan"))]
    assert consume(state, lines, Resent(), logging.getLogger("t")) is None
