"""The training health watchdog's rules (tpu_rl.watch.health) and their place in the follower."""

from __future__ import annotations

import json
import logging
import math
import re

import pytest

from sandbox.training_curve import TrainingFaults
from sandbox.workloads import EvalResult
from tests.support import fault_replay
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.rewards.position import parse_position
from tpu_rl.settings.choices import HealthAction
from tpu_rl.watch import health
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.state import FollowState

LINE = "I1204 12:00:00.123456 1 peft_trainer.py:735] Train step {step} training loss: {loss}"


def _memory(**rules: object) -> dict:
    return health.armed(None, health.Rules.defaults(**rules))  # type: ignore[arg-type]


def _steps(memory: dict, losses: list[float], start: int = 1, every: float = 60.0) -> dict:
    for index, loss in enumerate(losses):
        step = start + index
        memory, _ = health.on_step(
            memory, step, loss, 1000.0 + step * every, LINE.format(step=step, loss=loss)
        )
    return memory


def test_a_nan_loss_is_fatal_at_its_step_and_distrusts_the_save_before_it() -> None:
    """Tunix logs step N's loss one update late, computed with the weights of N-1 updates: the
    save of N-1 is not trusted either."""
    memory = _steps(_memory(), [0.6, 0.5, float("nan")])
    anomaly = health.fatal(memory)
    assert anomaly is not None
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.NONFINITE, 3, 2)
    assert "training loss: nan" in anomaly["evidence"][-1]
    assert "no checkpoint from step 2 on is used" in health.describe(anomaly)
    first = health.fatal(_steps(_memory(), [float("nan")]))
    assert (first["step"], first["anomaly_step"]) == (1, 0)  # the first step's: no save trusted


def test_an_inf_perplexity_beside_a_finite_loss_is_fatal_with_its_line() -> None:
    """Tunix logs exp(loss) as the perplexity, inf past a float32 loss of ~88.7: an inf
    perplexity beside a finite loss is non-finite too."""
    state = FollowState(health=_memory())
    text = (
        "I1204 12:00:05.123456 1 peft_trainer.py:735] Train step {step} training loss: "
        "{loss}  - training perplexity: {perplexity}"
    )
    lines = [
        Line("2026-12-04T12:00:01Z " + text.format(step=1, loss="0.500000", perplexity="1.6")),
        Line("2026-12-04T12:00:02Z " + text.format(step=2, loss="95.000000", perplexity="inf")),
    ]
    event = consume(state, lines, Resent(), logging.getLogger("t"))
    assert event is not None and event["reason"] == WaitEnd.TRAINING_UNHEALTHY
    anomaly = event["anomaly"]
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.NONFINITE, 2, 1)
    assert "perplexity inf (loss 95) at step 2" in anomaly["why"]
    assert anomaly["evidence"] == [text.format(step=2, loss="95.000000", perplexity="inf")]
    off = _memory(nonfinite_loss=False, spike_factor=0.0)  # 95 is past the spike floor too
    assert health.fatal(health.on_step(off, 2, 95.0, 1.0, "x", float("inf"))[0]) is None


def test_a_nan_mean_reward_in_an_intermediate_eval_is_fatal_with_its_line() -> None:
    """The line's metrics hold a nan mean_reward as None: fatal, with its line, not skipped."""
    state = FollowState(health=_memory())
    metrics = "corr=3, total=64, accuracy=4.6875%, partial_accuracy=4.6875%, format_accuracy=50%"
    text = "W1204 12:00:05.123456 1 hooks.py:102] Intermediate Eval (step={step}): {metrics}, "
    text += "mean_reward={reward}"
    lines = [
        Line("2026-12-04T12:00:01Z " + text.format(step=10, metrics=metrics, reward="0.5000")),
        Line("2026-12-04T12:00:02Z " + text.format(step=20, metrics=metrics, reward="nan")),
    ]
    event = consume(state, lines, Resent(), logging.getLogger("t"))
    assert event is not None and event["reason"] == WaitEnd.TRAINING_UNHEALTHY
    anomaly = event["anomaly"]
    # an evaluation scores the weights its own step's checkpoint holds
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.NONFINITE, 20, 20)
    assert anomaly["why"] == "mean_reward nan at step 20"
    assert anomaly["evidence"] == [text.format(step=20, metrics=metrics, reward="nan")]
    assert state.intermediate[-1]["mean_reward"] is None  # the record stays JSON
    off = health.on_eval(_memory(nonfinite_loss=False), 20, float("nan"), "x")
    assert health.fatal(off) is None


def test_inf_is_fatal_and_the_rule_can_be_turned_off() -> None:
    assert health.fatal(_steps(_memory(), [0.6, float("inf")]))["rule"] == health.NONFINITE
    assert health.fatal(_steps(_memory(nonfinite_loss=False), [0.6, float("inf")])) is None


def test_the_memory_holds_no_nan_so_the_saved_position_stays_readable() -> None:
    state = FollowState(pod_uid="u", health=_steps(_memory(), [0.6, float("nan")]))
    parse_position(json.dumps(state.as_dict()))  # refuses NaN: it would be unreadable


def test_a_loss_spike_over_the_factor_of_the_rolling_median_is_fatal() -> None:
    rules = {"spike_factor": 10, "spike_window": 6, "spike_floor": 0.0}
    memory = _steps(_memory(**rules), [0.5, 0.4, 0.45, 0.42, 0.4])
    assert health.fatal(memory) is None
    spiked = _steps(memory, [5.0], start=6)
    anomaly = health.fatal(spiked)
    # update 6's loss is the weights of 5 updates': checkpoint 5 is not trusted either
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.SPIKE, 6, 5)
    assert len(anomaly["evidence"]) == health.EVIDENCE_KEPT
    assert health.fatal(_steps(memory, [3.0], start=6)) is None  # under 10x the median


def test_no_spike_before_half_the_window_is_known() -> None:
    assert health.fatal(_steps(_memory(spike_window=20, spike_floor=0.0), [0.01, 5.0])) is None


def test_grpo_s_sign_changing_loss_under_the_floor_is_no_spike() -> None:
    """The corpus's g2-b2-lr1e-3 run, healthy: losses of ~0.0004 then -0.236 (a batch with an
    empty completion), 600x the median, which the relative rule alone would call a spike."""
    losses = [-0.0, 0.0004, -0.0003, 0.0002, 0.0005, -0.0004, 0.0003, 0.0001, 0.0004, 0.0002]
    memory = _steps(_memory(), [*losses, -0.236388])
    assert health.fatal(memory) is None


def test_a_diverged_loss_past_the_floor_is_fatal_even_before_the_window_is_known() -> None:
    """The corpus's fault-lr-collapse logs -75728.5 at its third step."""
    anomaly = health.fatal(_steps(_memory(), [-0.058, 0.137, -75728.5]))
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.SPIKE, 3, 2)
    assert "health_spike_floor 10" in anomaly["why"]


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
    state = FollowState(health=_memory(action=HealthAction.EXPORT_HEALTHY))
    lines = [
        Line(f"2026-12-04T12:00:0{i}Z " + LINE.format(step=i, loss=loss))
        for i, loss in enumerate(["0.5", "0.4", "nan"], start=1)
    ]
    lines.append(Line("2026-12-04T12:00:09Z W train_rl.py:823] Post RL Training: corr=1"))
    event = consume(state, lines, Resent(), logging.getLogger("t"))
    assert event is not None and event["reason"] == WaitEnd.TRAINING_UNHEALTHY
    assert event["anomaly"]["step"] == 3 and event["action"] == HealthAction.EXPORT_HEALTHY
    assert "nonfinite_loss at step 3" in event["message"]
    assert "Train step 3 training loss: nan" in event["message"]


def test_consume_says_a_slow_step_as_a_warning_in_the_task_log_and_reads_on(caplog) -> None:
    caplog.set_level(logging.INFO)
    state = FollowState(health=_memory(slow_factor=3))
    stamps = [f"2026-12-04T12:{m:02d}:00Z " for m in (1, 2, 3, 4, 5, 15)]  # then 10 minutes
    lines = [Line(at + LINE.format(step=n, loss="0.5")) for n, at in enumerate(stamps, start=1)]
    assert consume(state, lines, Resent(), logging.getLogger("t")) is None
    [slow] = [r for r in caplog.records if "Slow step" in r.getMessage()]
    assert slow.levelno == logging.WARNING and "step 6 took 600.0s" in slow.getMessage()


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
    """While the same rollout's batch reward (TensorBoard step 10 for update 11) fell."""
    memory = _scalars(_memory(), health.SCORE_MEAN, [0.5] * 10 + [0.1], start=0)
    memory = _scalars(memory, health.KL_TAG, [0.01] * 10)
    assert health.fatal(memory) is None
    anomaly = health.fatal(_scalars(memory, health.KL_TAG, [0.5], start=11))
    assert anomaly is not None
    # update 11's KL is the weights of 10 updates': checkpoint 10 is not trusted either
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.KL_BLOWUP, 11, 10)
    assert anomaly["evidence"] == ["events.out.tfevents.1.h: actor/train/kl=0.5 at step 11"]
    assert "health_kl_factor" in anomaly["why"]


def test_a_kl_jump_while_the_reward_rises_is_a_policy_that_learns() -> None:
    """The corpus's lr1e-2 run, healthy, takes its KL from 0.03 to 1.26 in a step as its batch
    reward reaches 1.0; the KL rule alone would stop it."""
    memory = _scalars(_memory(), health.SCORE_MEAN, [0.2] * 10 + [0.95], start=0)
    memory = _scalars(memory, health.KL_TAG, [0.03] * 10)
    assert health.fatal(_scalars(memory, health.KL_TAG, [1.26], start=11)) is None
    unknown = _scalars(_memory(), health.KL_TAG, [0.03] * 10 + [1.26])  # no reward read yet
    assert health.fatal(unknown) is None


def test_a_negative_kl_estimate_does_not_lower_the_bar() -> None:
    """Tunix's `kl` is a log-ratio estimate: the corpus's layers2 run logs -9.1. The median is of
    magnitudes, so a window of negative values does not make every positive KL a blow-up."""
    memory = _scalars(_memory(), health.SCORE_MEAN, [0.5] * 10 + [0.4], start=0)
    memory = _scalars(memory, health.KL_TAG, [-1.4] * 10)
    assert health.fatal(_scalars(memory, health.KL_TAG, [2.4], start=11)) is None


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


def _means(memory: dict, means: list[float], start: int = 0) -> dict:
    return _scalars(memory, health.SCORE_MEAN, means, start=start)


def test_a_flat_reward_at_or_above_the_best_batch_is_saturated_not_collapsed() -> None:
    """The corpus's layers4 run scores every completion 1.0 for 35 batches: the task is
    learned, not collapsed. Flat below the best batch before it is a collapse."""
    memory = _means(_batches(_memory(reward_spread_steps=5), [(1.0, 0.0)] * 3), [0.5] * 3)
    saturated = _batches(_means(memory, [1.0] * 10, start=3), [(1.0, 1.0)] * 10, start=3)
    assert health.fatal(saturated) is None
    collapsed = _batches(_means(memory, [0.0] * 5, start=3), [(0.0, 0.0)] * 5, start=3)
    anomaly = health.fatal(collapsed)
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (
        health.STD_COLLAPSE,
        7,
        3,
    )
    assert "below the best batch reward 0.5" in anomaly["why"]


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


# -- the e2e tier's training faults, replayed through the watch ----------------------------------
# The sandbox's GRPO client with each fault the whole runs of tests/e2e/test_training_health.py
# injected, read as the reward wait reads it (tests/support/fault_replay.py): the rule, the step,
# the evidence and the checkpoint kept, as those runs showed them, in milliseconds (a whole
# run of 5-20 s would prove only a rule). Before the watchdog, each of these runs
# trained on to its Post line and exported step 100. A whole run stays for each end-to-end path:
# the stop, export_healthy, the event files' read (tests/e2e/test_training_health.py) and the
# resume (test_training_health_resume.py); the stall's on a running pod, tests/processes/.

REWARDING = {  # GSM8K's mean_reward adds several rewards of up to 3 each
    "pre": EvalResult(corr=8, mean_reward=0.5),
    "post": EvalResult(corr=12, mean_reward=2.5),
}


@pytest.mark.parametrize(
    ("faults", "client", "rule", "step", "anomaly_step", "kept", "evidence"),
    [
        (TrainingFaults(nan_at_step=35), {}, health.NONFINITE, 35, 34, 30,
         "Train step 35 training loss: nan"),
        (TrainingFaults(nan_at_step=35, nan_value=math.inf), {}, health.NONFINITE, 35, 34, 30,
         "Train step 35 training loss: inf"),
        # the diverged loss of the corpus's lr-collapse run, past health_spike_floor
        (TrainingFaults(loss_spike_at_step=45), {}, health.SPIKE, 45, 44, 40,
         "Train step 45 training loss: -75728.5"),
        # an evaluation scores its own step's weights: step 30's save came before its line
        (TrainingFaults(reward_collapse_at_eval=30, reward_collapse_by=1.5), REWARDING,
         health.COLLAPSE, 30, 30, 20, "Intermediate Eval (step=30)"),
    ],
    ids=["nan", "inf", "loss_spike", "reward_collapse"],
)  # fmt: skip
def test_a_fault_of_the_sandbox_s_client_is_stopped_at_its_line_keeping_the_save_before_it(
    faults, client, rule, step, anomaly_step, kept, evidence
) -> None:
    ran = fault_replay.replay(faults, **client)
    anomaly = ran.anomaly()
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (rule, step, anomaly_step)
    assert evidence in ran.ended()["message"]
    healthy, folder = ran.kept()
    assert healthy == kept and folder == f"{fault_replay.CHECKPOINTS}{kept}/"
    assert max(ran.bucket.step_folders()) < 100  # stopped: training never saved its last step


def test_a_stall_with_the_pod_alive_is_judged_after_the_floor_and_keeps_the_last_save() -> None:
    """The pod runs on, silent, in update 45: its last line is step 44's, and every save up to
    it is healthy (a stall poisons no weights)."""
    floor = fault_replay.rules(stall_floor_s=6.0)  # 0.1 min: steps are 0.06 s apart here
    ran = fault_replay.replay(TrainingFaults(stall_at_step=45), floor)
    anomaly = ran.anomaly()
    assert (anomaly["rule"], anomaly["step"], anomaly["anomaly_step"]) == (health.STALL, 44, 45)
    assert ran.kept()[0] == 40


def test_slow_steps_are_a_warning_and_the_wait_ends_at_the_post_line() -> None:
    ran = fault_replay.replay(TrainingFaults(slow_from_step=90, slow_factor=6.0))  # over 3x
    assert ran.ended()["status"] == "success" and ran.ended()["reached_step"] == 100
    # Tunix logs a step's line one step late: the first slow interval is step 89's line's
    warned = [int(re.search(r"Slow step: step (\d+) took", w)[1]) for w in ran.warnings()]
    assert warned and min(warned) == 89 and all(n >= 89 for n in warned), ran.warnings()


def test_a_kl_blow_up_in_the_event_files_stops_the_wait_and_keeps_the_save_before_it() -> None:
    ran = fault_replay.replay(TrainingFaults(kl_blowup_at_step=45))
    anomaly = ran.anomaly()
    assert anomaly["rule"] == health.KL_BLOWUP and anomaly["step"] >= 45
    assert anomaly["anomaly_step"] == anomaly["step"] - 1
    assert "events.out.tfevents." in ran.ended()["message"]
    assert "actor/train/kl=" in ran.ended()["message"]
    assert ran.kept()[0] == 40


def test_a_flat_batch_reward_in_the_event_files_stops_the_wait_at_the_rule_s_count() -> None:
    """Global step k's rewards are at TensorBoard step k - 1 (grpo_learner.py:376-403)."""
    spread = fault_replay.rules(reward_spread_steps=8)
    ran = fault_replay.replay(TrainingFaults(reward_spread_collapse_at_step=42), spread)
    anomaly = ran.anomaly()
    assert anomaly["rule"] == health.STD_COLLAPSE
    assert (anomaly["anomaly_step"], anomaly["step"]) == (41, 41 + 8 - 1)
    assert "rewards/train/score/max=" in ran.ended()["message"]
    assert "events.out.tfevents." in ran.ended()["message"]
    assert ran.kept()[0] is not None and ran.kept()[0] < 41
