"""The training watch's core (tpu_rl.watch.core): each rule, stop and report as a list of events
in and the effects out, with no cluster, bucket or clock; the state given is never changed."""

from __future__ import annotations

import copy

from tpu_rl.watch import core, health, progress
from tpu_rl.watch.core import BoardRead, End, LogLine, PollDone, Quiet, Report, ReportDue, Say
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.state import FollowState

T0 = 1_800_000_000.0
STEP = "I1204 12:00:00.123456 1 peft_trainer.py:735] Train step {n} training loss: {loss}"
SAVED = (
    "[process=0][thread=save_finalize] Finished saving checkpoint (finalized tmp dir) to "
    "`gs://b/run/checkpoints/actor/{n}`."
)
# MaxText's evaluation line (train_rl.py), as the sandbox's pods and the corpus print it
REWARDS = (
    "W1129 10:00:00.123456 140213 train_rl.py:824] {kind} RL Training: corr=7, total=64, "
    "accuracy=10.9375%, partial_accuracy=10.9375%, format_accuracy=85.9375%, mean_reward={mean}"
)


def run(events: list[core.Event], state: FollowState | None = None):
    """Feed the events in order, as the shells do, until one ends the wait: the last state and
    every effect."""
    state, effects = state or FollowState(health=health.armed(None, health.Rules.defaults())), []
    for event in events:
        state, more = core.advance(state, event)
        effects += more
        if core.ended(more) is not None:
            break
    return state, effects


def step(n: int, loss: float | str = 0.01, at: float | None = None) -> LogLine:
    at = T0 + 60 * n if at is None else at
    return LogLine("2026-12-04T12:00:00Z", at, STEP.format(n=n, loss=loss))


def saved(n: int) -> LogLine:
    return LogLine("2026-12-04T12:00:00Z", T0 + 60 * n + 30, SAVED.format(n=n))


def reward_line(kind: str, mean: float) -> LogLine:
    return LogLine("2026-12-04T12:00:00Z", T0, REWARDS.format(kind=kind, mean=mean))


def ends(effects: list) -> list[dict]:
    return [e.event for e in effects if isinstance(e, End)]


def test_the_post_line_ends_the_wait_with_the_pre_and_post_rewards():
    state, effects = run([reward_line("Pre", 0.1), step(1), step(2), reward_line("Post", 0.4)])
    (event,) = ends(effects)
    assert event["status"] == "success" and event["reached_step"] == 2
    assert (event["pre"]["mean_reward"], event["post"]["mean_reward"]) == (0.1, 0.4)
    said = [e.text for e in effects if isinstance(e, Say)]
    assert said[0].startswith("Pre RL Training:") and said[-1].startswith("Post RL Training:")
    assert state.reward_lines == 2 and [m[0] for m in state.step_marks] == [1, 2]


def test_a_nan_loss_ends_the_wait_unhealthy_and_distrusts_the_step_before():
    _, effects = run([step(1), step(2), step(3, "nan"), step(4)])
    (event,) = ends(effects)  # the first fatal line ends it: nothing after is read
    assert event["reason"] == WaitEnd.TRAINING_UNHEALTHY == "training_unhealthy"
    assert (event["anomaly"]["rule"], event["anomaly"]["anomaly_step"]) == (health.NONFINITE, 2)


def test_advance_changes_nothing_it_was_given():
    state = FollowState(health=health.armed(None, health.Rules.defaults()))
    before = copy.deepcopy(state.as_dict())
    for event in (step(1), saved(1), step(2, "nan"), Quiet(T0 + 10_000)):
        new, _ = core.advance(state, event)
        assert new is not state
    assert state.as_dict() == before


def test_a_flat_batch_reward_for_the_rule_s_steps_ends_the_wait():
    rules = health.Rules.defaults(reward_spread_steps=3)
    state = FollowState(health=health.armed(None, rules))
    rising = [
        core.Scalar(tag, n, value, "events.out.tfevents.1.host")
        for n in range(5)
        for tag, value in (
            (health.SCORE_MEAN, 0.2 + n / 10),
            (health.SCORE_MAX, 0.9),
            (health.SCORE_MIN, 0.0),
        )
    ]
    flat = [
        core.Scalar(tag, n, 0.0, "events.out.tfevents.1.host")
        for n in range(5, 8)
        for tag in (health.SCORE_MEAN, health.SCORE_MAX, health.SCORE_MIN)
    ]
    state, effects = run([BoardRead(tuple(rising))], state)
    assert effects == [] and state.curves["last"][health.SCORE_MAX] == [4, 0.9]
    _, effects = run([BoardRead(tuple(flat))], state)
    (event,) = ends(effects)
    assert event["anomaly"]["rule"] == health.STD_COLLAPSE
    assert (event["anomaly"]["anomaly_step"], event["anomaly"]["step"]) == (5, 7)
    assert effects[0] == Say(event["message"], warning=True)  # said before the end


def test_a_silence_past_the_stall_rule_ends_the_wait_and_a_shorter_one_does_not():
    state, _ = run([step(n) for n in range(1, 6)])  # a step a minute
    assert core.advance(state, Quiet(T0 + 6 * 60))[1] == []
    _, effects = core.advance(state, Quiet(T0 + 5 * 60 + 1801))  # over 30 min and 5x the pace
    (event,) = ends(effects)
    assert event["anomaly"]["rule"] == health.STALL


def test_the_spend_limit_stops_at_the_next_committed_save_and_a_report_comes_when_due():
    spend = progress.Spend("spot", progress.USAGE, 100.0, max_usd=5.0)
    state, effects = run([step(1), step(2), step(3), PollDone(100, spend)])
    assert any(e.warning and e.text.startswith("Projected spend") for e in effects)
    assert ends(effects) == []  # no save yet: training goes on to it
    _, effects = run([saved(4), step(4), PollDone(100, spend)], state)
    (event,) = ends(effects)
    assert event["reason"] == WaitEnd.SPEND_LIMIT and event["save_step"] == 4
    _, effects = run([ReportDue(0.0)], state)
    (report,) = [e.event for e in effects if isinstance(e, Report)]
    assert report["reason"] == progress.PROGRESS_EVENT and report["status"] == "running"
