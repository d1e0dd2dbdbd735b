"""Where the reward follower is in the training log, and the pure step that consumes lines.

No I/O here: `LineCutter` turns log bytes into lines in bounded memory, `consume` skips the
lines already seen (by Kubernetes timestamp) and reads the new ones for MaxText's reward
lines. `FollowState` is JSON-safe, so a rebuilt trigger or the next poke continues from it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from tpu_rl.rewards import capacity_end, curves, health
from tpu_rl.rewards.held_log import HeldLog
from tpu_rl.rewards.lines import is_reward_line, parse_line, split_timestamp
from tpu_rl.rewards.train_step import parse_step_line
from tpu_rl.token_masking import redact

# Longest log line kept, in bytes: the rest of a longer line is dropped, the line is logged
# once as cut and never read as a reward line (MaxText's reward lines are ~200 bytes).
LINE_CAP = 64 * 1024
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
# A training step the log shows done when it logs no step line (tpu_rl.rewards.train_step):
# MaxText's `Intermediate Eval (step=N)`, every eval_interval steps (maxtext-v0.2.4
# src/maxtext/trainers/post_train/rl/hooks.py:98-102).
_EVAL_STEP = re.compile(r"Intermediate Eval \(step=(\d+)\)")

Result = dict[str, Any]


@dataclass
class FollowState:
    """Where the follower is: the pod and container instance, and the last line consumed."""

    pod_uid: str | None = None
    pod_name: str | None = None
    restart_count: int | None = None
    container_id: str | None = None
    last_time: str | None = None  # RFC3339Nano of the last consumed line
    seen_at_last_time: int = 0  # lines consumed at last_time (a re-read sends them again)
    pre: dict[str, Any] | None = None
    # the Intermediate Eval lines so far (step, metrics, time: ~200 bytes each), which the event
    # reports. Saved on the Job: past Kubernetes' 256 KiB of annotations (apimachinery's
    # api/validation/objectmeta.go, TotalAnnotationSizeLimitB), ~1000 lines, the PATCH is refused
    # and SavedPosition stops saving (a rebuilt trigger then reads the log from its start).
    intermediate: list[dict[str, Any]] = field(default_factory=list)
    pending_since: float | None = None  # epoch seconds something has been waiting to run
    backend_pods_seen: bool = False
    reward_lines: int = 0  # reward lines logged so far (a checkpoint is due after each)
    cut_lines: int = 0  # lines logged as cut so far
    reached_step: int | None = None  # the highest training step the log showed
    capacity_evidence: str | None = None  # the first sign the backend lost its capacity
    backend_created: str | None = None  # the backend JobSet's creationTimestamp
    step_marks: list[list[float]] = field(default_factory=list)  # the newest [step, epoch]s
    saved: list[float] | None = None  # the newest finished save: [step, epoch]
    judged_save: int | None = None  # the save whose stop-or-go was decided
    # training's pace, ETA, spend and the cadence of its lines (tpu_rl.rewards.progress)
    progress: dict[str, Any] | None = None
    # the training health watchdog's rules and memory (tpu_rl.rewards.health); None: off
    health: dict[str, Any] | None = None
    # the TensorBoard event files read (tpu_rl.rewards.event_files): each one's name and the
    # bytes of it consumed, in whole records (one file per pod start)
    event_offsets: dict[str, int] = field(default_factory=dict)
    # the training's curves for the RL page and the saves the log showed (tpu_rl.rewards.curves)
    curves: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FollowState:
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in (data or {}).items() if k in known}
        if isinstance(values.get("seen_at_last_time"), list):  # saved as hashes before
            values["seen_at_last_time"] = len(values["seen_at_last_time"])
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def attempt_facts(self) -> dict[str, Any]:
        """What an event ending the attempt carries: its Pre line, evaluations, reach, backend."""
        return {
            "pre": self.pre,
            "intermediate": self.intermediate,
            "reached_step": self.reached_step,
            "backend_created": self.backend_created,
        }

    def start_container(self, restart_count: int | None, container_id: str | None) -> None:
        """Read a new container instance's log from its beginning."""
        self.restart_count, self.container_id = restart_count, container_id
        self.last_time, self.seen_at_last_time = None, 0


@dataclass
class Resent:
    """How many lines at the last timestamp a read sends again that were consumed already
    (one from `sinceTime` does: the server starts at that whole second)."""

    count: int = 0


@dataclass(frozen=True)
class Line:
    """One log line without its newline; `cut` when it was longer than LINE_CAP."""

    text: str
    cut: bool = False


class LineCutter:
    """Log bytes in arbitrary chunks -> complete lines, in linear time and bounded memory.

    Holds at most `cap` bytes of the line in progress; splitting on b"\\n" before decoding
    keeps UTF-8 characters whole (a cut may split one: it is replaced).
    """

    def __init__(self, cap: int = LINE_CAP) -> None:
        self.cap = cap
        self._parts: list[bytes] = []
        self._size = 0
        self._cut = False

    def feed(self, data: bytes) -> list[Line]:
        *complete, rest = data.split(b"\n")
        lines = []
        for piece in complete:
            if self._parts or self._cut or len(piece) > self.cap:
                self._keep(piece)
                lines.append(self._take())
            else:  # a whole line in this chunk, under the cap: decoded as is
                lines.append(Line(piece.rstrip(b"\r").decode("utf-8", errors="replace")))
        self._keep(rest)
        return lines

    def flush(self) -> Line | None:
        """The partial last line, for a log that ended without a newline; never a reward
        line: MaxText ends every line, so one without its newline was cut mid-write (the
        container exited) and its last number may be short (`0.1` of `0.1875`)."""
        if not (self._size or self._cut):
            return None
        line = self._take()
        return None if is_reward_line(line.text) else line

    def _keep(self, piece: bytes) -> None:
        room = self.cap - self._size
        if len(piece) > room:
            self._cut, piece = True, piece[:room]
        if piece:
            self._parts.append(piece)
            self._size += len(piece)

    def _take(self) -> Line:
        raw, cut = b"".join(self._parts), self._cut
        self._parts, self._size, self._cut = [], 0, False
        return Line(raw.rstrip(b"\r").decode("utf-8", errors="replace"), cut)


def time_key(stamp: str) -> tuple[int, int]:
    """Sortable (epoch second, nanosecond) of an RFC3339(Nano) timestamp."""
    match = _STAMP.match(stamp)
    if match is None:
        raise ValueError(f"not an RFC3339 timestamp: {stamp!r}")
    return _key(match)


def _key(match: re.Match[str]) -> tuple[int, int]:
    whole, fraction, zone = match.groups()
    return _epoch_second(whole, zone), int((fraction or "0")[:9].ljust(9, "0"))


def _stamped(line: str) -> tuple[str | None, tuple[int, int], str]:
    """The line's Kubernetes timestamp, its `time_key` and the text after it, as
    `split_timestamp` finds them: one regex match for the usual `<stamp> <text>`."""
    head, _, rest = line.partition(" ")
    if (match := _STAMP.match(head)) is not None:
        return head, _key(match), rest.rstrip("\r\n")
    stamp, text = split_timestamp(line)
    return stamp, (time_key(stamp) if stamp else (0, 0)), text


@functools.lru_cache(maxsize=16)  # the lines of one second share it
def _epoch_second(whole: str, zone: str) -> int:
    return int(datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp())


def since_time(stamp: str) -> str:
    """The whole second a timestamp falls in, as `sinceTime` (servers truncate to seconds)."""
    second = time_key(stamp)[0]
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def consume(
    state: FollowState, lines: Iterable[Line], resent: Resent, log: logging.Logger | HeldLog
) -> Result | None:
    """Read the new lines: the success result at the Post line, else None.

    Skips lines already consumed: before the last timestamp, or the first `resent.count` at
    it (a log is sent in the same order each time). `resent` is updated in place, so the
    chunks of one read share it; memory stays constant however many lines share a stamp.
    """
    last = time_key(state.last_time) if state.last_time else None
    for line in lines:
        stamp, key, text = _stamped(line.text)
        if stamp is None:  # the tail of a line that began before sinceTime: seen already
            continue
        if last is not None and key < last:
            continue
        if key == last:
            if resent.count > 0:
                resent.count -= 1
                continue
            state.seen_at_last_time += 1
        else:
            last, resent.count = key, 0
            state.last_time, state.seen_at_last_time = stamp, 1
        if "step" in text or capacity_end.SAVED_MARKER in text:
            _mark_step(state, text, key[0] + key[1] / 1e9, log)
        if line.cut:
            state.cut_lines += 1
            log.warning(
                "Log line at %s is over %d bytes: cut, not read for rewards", stamp, LINE_CAP
            )
        elif (result := _on_line(state, stamp, text, log)) is not None:
            return result
        if state.health is not None and (unhealthy := unhealthy_event(state)) is not None:
            return unhealthy  # a fatal watchdog rule: the wait ends at this line
    return None


def error_event(reason: str, message: str) -> Result:
    """An event that ends the wait without rewards; secrets masked in its message."""
    return {"status": "error", "reason": reason, "message": redact(message)}


def unhealthy_event(state: FollowState) -> Result | None:
    """The event of the fatal watchdog rule the state recorded (tpu_rl.rewards.health), if any:
    the rule, step, evidence and anomaly step, and what health_action does next."""
    if (anomaly := health.fatal(state.health)) is None:
        return None
    action = health.Rules.from_dict((state.health or {}).get("rules")).action
    return {
        **error_event(health.REASON, health.describe(anomaly)),
        "anomaly": anomaly,
        "action": action,
        **state.attempt_facts(),
    }


def _mark_step(state: FollowState, text: str, at: float, log: logging.Logger | HeldLog) -> None:
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
            for warning in warnings:
                log.warning("%s", warning)
    elif evaluated := _EVAL_STEP.search(text):
        _reach(state, int(evaluated.group(1)))
    elif saved := capacity_end.SAVED.search(text):
        state.saved = [int(saved.group(1)), at]
        state.curves = curves.with_save(state.curves, int(saved.group(1)))
        _reach(state, int(saved.group(1)))


def _reach(state: FollowState, step: int) -> None:
    state.reached_step = max(step, state.reached_step or 0)


def _on_line(
    state: FollowState, stamp: str, text: str, log: logging.Logger | HeldLog
) -> Result | None:
    if "RL Training" not in text and "Intermediate Eval" not in text:  # parse_line's markers
        return None
    parsed = parse_line(text)
    if parsed is None:
        return None
    metrics = parsed.metrics.as_dict()
    state.reward_lines += 1
    if parsed.kind == "intermediate":
        log.info(
            "Intermediate Eval step=%s mean_reward=%s accuracy=%s%%",
            parsed.step,
            metrics["mean_reward"],
            metrics["accuracy"],
        )
        # replaced, not appended to: the saved position compares the old value with the new
        state.intermediate = [*state.intermediate, {**parsed.as_dict(), "time": stamp}]
        if state.health is not None:
            step = parsed.step or 0  # an intermediate line always has its step
            # as logged: the metrics hold a nan as None, which the watchdog must not skip
            reward = parsed.metrics.mean_reward
            state.health = health.on_eval(state.health, step, reward, text)
        return None
    if parsed.kind == "pre":
        log.info("Pre RL Training: %s", metrics)
        state.pre = metrics
        return None
    log.info("Post RL Training: %s", metrics)
    return {
        "status": "success",
        "pre": state.pre,
        "post": metrics,
        "post_time": stamp,
        "intermediate": state.intermediate,
        "reached_step": state.reached_step,
    }
