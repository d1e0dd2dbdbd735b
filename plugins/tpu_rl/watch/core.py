"""The training watch's core: one pure step, `advance(state, event)`, judges what the training
shows and says what to do.

Events are what the shells read: a new log line (`LogLine`), the TensorBoard scalars of one
read of the event files (`BoardRead`), a silence while the pod runs (`Quiet`), a poll that read
all there was (`PollDone`: progress and spend), one that found nothing to end the wait
(`ReportDue`: the progress report at its cadence). Effects are
what the shells do: say a line in the task log (`Say`), end the wait with an event (`End`, its
reason a `WaitEnd`), end one deferral with a progress report (`Report`). The new state is a
shallow copy (its lists and dicts are replaced, never changed in place: tpu_rl.watch.state), so
a test is a list of events and the states and effects they give, in microseconds; the trigger,
the poking sensor and the corpus replay feed the same function.

No I/O here, and no Airflow, Kubernetes or Google import (an import contract holds it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tpu_rl.training_log.lines import parse_line
from tpu_rl.training_log.train_step import parse_step_line
from tpu_rl.watch import capacity_end, curves, health, progress
from tpu_rl.watch.ends import Result, WaitEnd, error_event
from tpu_rl.watch.state import FollowState

# Longest log line read, in bytes: the rest of a longer line is dropped by the reader, the line
# is said once as cut and never read as a reward line (MaxText's reward lines are ~200 bytes).
LINE_CAP = 64 * 1024
# A training step the log shows done when it logs no step line (tpu_rl.training_log.train_step):
# MaxText's `Intermediate Eval (step=N)`, every eval_interval steps (maxtext-v0.2.4
# src/maxtext/trainers/post_train/rl/hooks.py:98-102).
_EVAL_STEP = re.compile(r"Intermediate Eval \(step=(\d+)\)")
# A line holding none of these changes nothing the watch keeps (the reader's fast path).
MARKERS = ("step", capacity_end.SAVED_MARKER, "RL Training", "Intermediate Eval")


@dataclass(frozen=True)
class LogLine:
    """A new line of the training pod's log: its Kubernetes timestamp, that time in epoch
    seconds, the text after it, and whether the reader cut it at LINE_CAP."""

    stamp: str
    at: float
    text: str
    cut: bool = False


@dataclass(frozen=True)
class Scalar:
    """One scalar value of an event file (tensorboardX writes `Summary.Value(tag,
    simple_value)`, tensorboardX summary.py:163-166); `source`: the event file's name."""

    tag: str
    step: int
    value: float
    source: str


@dataclass(frozen=True)
class BoardRead:
    """The scalars one read of the run's TensorBoard event files found, oldest first."""

    scalars: tuple[Scalar, ...]


@dataclass(frozen=True)
class Quiet:
    """The training pod runs and the log said nothing new up to `now` (epoch seconds)."""

    now: float


@dataclass(frozen=True)
class PollDone:
    """A poll read all there was: the progress and spend are judged on the steps so far."""

    total_steps: int | None
    spend: progress.Spend


@dataclass(frozen=True)
class ReportDue:
    """The poll found nothing to end the wait: a progress report is due every `every_s` of the
    lines' time or every tenth of the steps (progress.report_due)."""

    every_s: float


Event = LogLine | BoardRead | Quiet | PollDone | ReportDue


@dataclass(frozen=True)
class Say:
    """A line for the task log (a warning when `warning`)."""

    text: str
    warning: bool = False


@dataclass(frozen=True)
class End:
    """End the wait with this event (`status` success, or error with a tpu_rl.watch.ends
    reason); a reason in ends.STOPS_TRAINING asks the shell to stop training first."""

    event: Result


@dataclass(frozen=True)
class Report:
    """End this deferral with a progress report; training goes on (progress.PROGRESS_EVENT)."""

    event: Result


Effect = Say | End | Report


def advance(state: FollowState, event: Event) -> tuple[FollowState, list[Effect]]:
    """The state after `event` and what to do about it. `state` is not changed."""
    new, effects = replace(state), list[Effect]()
    match event:
        case LogLine():
            _read_line(new, event, effects)
        case BoardRead():
            _read_board(new, event, effects)
        case Quiet():
            if (memory := health.on_quiet(new.health, event.now)) is not None:
                new.health = memory
                _end_if_unhealthy(new, effects)
        case PollDone():
            _judge_progress(new, event, effects)
        case ReportDue():
            if (report := progress.report_due(new, event.every_s)) is not None:
                effects.append(Report(report))
    return new, effects


def ended(effects: list[Effect]) -> Result | None:
    """The event of the effects' End or Report, if any."""
    return next((e.event for e in effects if isinstance(e, End | Report)), None)


def unhealthy_event(state: FollowState) -> Result | None:
    """The event of the fatal watchdog rule the state recorded (tpu_rl.watch.health), if any:
    the rule, step, evidence and anomaly step, and what health_action does next."""
    if state.health is None or (anomaly := health.fatal(state.health)) is None:
        return None
    action = state.health["rules"].action
    return {
        **error_event(WaitEnd.TRAINING_UNHEALTHY, health.describe(anomaly)),
        "anomaly": anomaly,
        "action": action,
        **state.attempt_facts(),
    }


def _read_line(state: FollowState, line: LogLine, effects: list[Effect]) -> None:
    if "step" in line.text or capacity_end.SAVED_MARKER in line.text:
        _mark_step(state, line.text, line.at, effects)
    if line.cut:
        state.cut_lines += 1
        text = f"Log line at {line.stamp} is over {LINE_CAP} bytes: cut, not read for rewards"
        effects.append(Say(text, warning=True))
    elif (result := _on_reward_line(state, line, effects)) is not None:
        effects.append(End(result))
        return
    if state.health is not None:
        _end_if_unhealthy(state, effects)  # a fatal watchdog rule: the wait ends at this line


def _end_if_unhealthy(state: FollowState, effects: list[Effect]) -> None:
    if (unhealthy := unhealthy_event(state)) is not None:
        effects.append(End(unhealthy))


def _mark_step(state: FollowState, text: str, at: float, effects: list[Effect]) -> None:
    """Note a step the log shows done (and when), or a save finished (capacity_end.SAVED): a
    step's checkpoint committed is that step done, its line still to come (Tunix logs it an
    update late)."""
    if line := parse_step_line(text):
        _reach(state, line.step)
        state.step_marks = [*state.step_marks, [line.step, at]][-capacity_end.MARKS_KEPT :]
        if state.health is not None:
            state.health, warnings = health.on_step(
                state.health, line.step, line.loss, at, text, line.perplexity
            )
            effects.extend(Say(warning, warning=True) for warning in warnings)
    elif evaluated := _EVAL_STEP.search(text):
        _reach(state, int(evaluated.group(1)))
    elif saved := capacity_end.SAVED.search(text):
        state.saved = [int(saved.group(1)), at]
        state.curves = curves.with_save(state.curves, int(saved.group(1)))
        _reach(state, int(saved.group(1)))


def _reach(state: FollowState, step: int) -> None:
    state.reached_step = max(step, state.reached_step or 0)


def _on_reward_line(state: FollowState, line: LogLine, effects: list[Effect]) -> Result | None:
    """The success result at the Post line; the Pre and Intermediate lines are kept."""
    text = line.text
    if "RL Training" not in text and "Intermediate Eval" not in text:  # parse_line's markers
        return None
    parsed = parse_line(text)
    if parsed is None:
        return None
    metrics = parsed.metrics.as_dict()
    state.reward_lines += 1
    if parsed.kind == "intermediate":
        effects.append(
            Say(
                f"Intermediate Eval step={parsed.step} mean_reward={metrics['mean_reward']} "
                f"accuracy={metrics['accuracy']}%"
            )
        )
        state.intermediate = [*state.intermediate, {**parsed.as_dict(), "time": line.stamp}]
        if state.health is not None:
            step = parsed.step or 0  # an intermediate line always has its step
            # as logged: the metrics hold a nan as None, which the watchdog must not skip
            reward = parsed.metrics.mean_reward
            state.health = health.on_eval(state.health, step, reward, text)
        return None
    if parsed.kind == "pre":
        effects.append(Say(f"Pre RL Training: {metrics}"))
        state.pre = metrics
        return None
    effects.append(Say(f"Post RL Training: {metrics}"))
    return {
        "status": "success",
        "pre": state.pre,
        "post": metrics,
        "post_time": line.stamp,
        "intermediate": state.intermediate,
        "reached_step": state.reached_step,
    }


def _read_board(state: FollowState, read: BoardRead, effects: list[Effect]) -> None:
    """Keep the page's curves of the scalars (the watchdog on or off) and judge those of
    health.BOARD_TAGS; the event of a fatal rule, said as a warning."""
    state.curves = curves.record(state.curves, read.scalars)
    if (memory := state.health) is None or health.fatal(memory):
        return
    for scalar in read.scalars:
        if scalar.tag in health.BOARD_TAGS:
            memory = health.on_scalar(memory, scalar.tag, scalar.step, scalar.value, scalar.source)
    state.health = memory
    if (unhealthy := unhealthy_event(state)) is not None:
        effects += [Say(unhealthy["message"], warning=True), End(unhealthy)]


def _judge_progress(state: FollowState, done: PollDone, effects: list[Effect]) -> None:
    """Say the training's progress at its cadence, warn once when the projected spend passes
    the limit, and stop at the save committed after that (_spend_stop)."""
    _, lines, passed = progress.observe(state, done.total_steps, done.spend)
    for index, line in enumerate(lines):
        warn = passed and index == len(lines) - 1  # the limit's line comes last
        effects.append(Say(line, warning=warn))
    if (stop := _spend_stop(state, done.spend, done.total_steps)) is not None:
        effects += [Say(stop["message"], warning=True), End(stop)]


def _spend_stop(
    state: FollowState, spend: progress.Spend, total_steps: int | None
) -> Result | None:
    """The `spend_limit` event at a committed save when the projected spend passes
    max_spend_usd then (the projection of the newest step line read); None to go on. Each save
    is judged once (`judged_save` in the progress state, which the saved position carries).
    The last step's save ends training anyway: never a stop."""
    figures = state.progress or {}
    if state.saved is None or figures.get("judged_save") == state.saved[0]:
        return None
    step = int(state.saved[0])
    state.progress = {**figures, "judged_save": step}
    projected = figures.get("projected_usd")
    if not progress.passes(projected, spend) or (total_steps is not None and step >= total_steps):
        return None
    return {
        **error_event(WaitEnd.SPEND_LIMIT, progress.stop_line(step, figures, spend)),
        "save_step": step,
        "action": spend.action,
        "progress": state.progress,
        **state.attempt_facts(),
    }
