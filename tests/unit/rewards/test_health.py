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


def _scalars(memory: dict, tag: str, values: list[float], start: int = 1) -> dict:
    for index, value in enumerate(values):
        memory = health.on_scalar(memory, tag, start + index, value, "events.out.tfevents.1.h")
    return memory


def _batches(memory: dict, spreads: list[tuple[float, float]], start: int = 0) -> dict:
    """Each step's score max and min, as Tunix writes them (max first)."""
    for index, (top, bottom) in enumerate(spreads):
        step = start + index
        memory = health.on_scalar(memory, health.SCORE_MAX, step, top, "f")
        memory = health.on_scalar(memory, health.SCORE_MIN, step, bottom, "f")
    return memory


def test_a_kl_over_the_factor_of_its_median_and_the_floor_is_a_fatal_blow_up() -> None:
    memory = _scalars(_memory(), health.KL_TAG, [0.01] * 10)
    assert health.fatal(memory) is None
    anomaly = health.fatal(_scalars(memory, health.KL_TAG, [0.5], start=11))
    assert anomaly is not None
    # update 11's KL is the weights of 10 updates': checkpoint 10 is not trusted either
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.KL_BLOWUP, 11, 10)
    assert anomaly["evidence"] == ["events.out.tfevents.1.h: actor/train/kl=0.5 at step 11"]
    assert "health_kl_factor" in anomaly["why"]


def test_a_kl_under_the_floor_a_kl_of_zero_and_a_rule_turned_off_never_fire() -> None:
    small = _scalars(_memory(), health.KL_TAG, [0.001] * 10)
    assert health.fatal(_scalars(small, health.KL_TAG, [0.05], start=11)) is None  # 50x, < 0.1
    beta_zero = _scalars(_memory(), health.KL_TAG, [0.0] * 30)  # GRPO with beta 0 logs kl 0
    assert health.fatal(beta_zero) is None
    off = _scalars(_memory(kl_factor=0), health.KL_TAG, [0.01] * 10 + [50.0])
    assert health.fatal(off) is None


def test_no_kl_blow_up_before_half_the_window_is_known() -> None:
    assert health.fatal(_scalars(_memory(), health.KL_TAG, [0.01, 0.01, 5.0])) is None


def test_a_step_already_judged_and_a_nan_kl_are_skipped() -> None:
    memory = _scalars(_memory(), health.KL_TAG, [0.01] * 12)
    # a restarted pod's new file repeats the steps since its checkpoint
    again = _scalars(memory, health.KL_TAG, [9.0], start=5)
    assert again == memory
    assert health.fatal(_scalars(memory, health.KL_TAG, [float("nan")], start=13)) is None


def test_rewards_all_equal_for_the_rule_s_steps_in_a_row_are_a_fatal_std_collapse() -> None:
    memory = _batches(_memory(reward_spread_steps=5), [(1.0, 0.0)] * 3)
    flat = _batches(memory, [(2.0, 2.0)] * 4, start=3)
    assert health.fatal(flat) is None
    anomaly = health.fatal(_batches(flat, [(2.0, 2.0)], start=7))
    assert anomaly is not None
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (
        health.STD_COLLAPSE,
        7,
        3,
    )
    assert "score/max=2 rewards/train/score/min=2 at step 7" in anomaly["evidence"][0]


def test_one_batch_with_a_spread_starts_the_count_again() -> None:
    flat = [(0.0, 0.0)] * 4
    memory = _batches(_memory(reward_spread_steps=5), [*flat, (1.0, 0.0), *flat])
    assert health.fatal(memory) is None
    assert health.fatal(_batches(_memory(reward_spread_steps=0), [(0.0, 0.0)] * 50)) is None


def test_a_max_and_min_read_in_two_polls_still_pair_and_the_memory_stays_json() -> None:
    memory = _memory(reward_spread_steps=2)
    memory = health.on_scalar(memory, health.SCORE_MAX, 0, 1.0, "f")
    memory = health.on_scalar(memory, health.SCORE_MIN, 0, 1.0, "f")
    memory = health.on_scalar(memory, health.SCORE_MAX, 1, 1.0, "f")  # the flush cut here
    state = FollowState(pod_uid="u", health=memory, event_offsets={"events.out.tfevents.1.h": 96})
    resumed = parse_position(json.dumps(state.as_dict()))
    memory = health.on_scalar(resumed.health, health.SCORE_MIN, 1, 1.0, "f")
    assert health.fatal(memory)["rule"] == health.STD_COLLAPSE
    assert resumed.event_offsets == {"events.out.tfevents.1.h": 96}
