"""The training pod's log as lines for the watch: bytes cut into lines in bounded memory
(`LineCutter`), the lines already read skipped by their Kubernetes timestamp, and each new line
the watch may care about handed to it (`consume`, tpu_rl.watch.core.advance)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from tpu_rl.rewards.held_log import Log
from tpu_rl.training_log.lines import is_reward_line, split_timestamp
from tpu_rl.watch.core import LINE_CAP, MARKERS, Event, LogLine, Say, advance, ended
from tpu_rl.watch.ends import Result
from tpu_rl.watch.state import FollowState

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


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
    """The whole second a timestamp falls in, as `sinceTime`: the API server forwards it to the
    kubelet in whole seconds (kubernetes pkg/registry/core/pod/strategy.go, LogLocation:
    `opts.SinceTime.Format(time.RFC3339)`), which sends every line not before it
    (pkg/kubelet/kuberuntime/logs/logs.go, ReadLogs), so the lines of that second come again."""
    second = time_key(stamp)[0]
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def consume(state: FollowState, lines: Iterable[Line], resent: Resent, log: Log) -> Result | None:
    """Read the new lines: each one the watch may care about (core.MARKERS, or cut) is a
    step of the watch (core.advance), whose lines are said in `log`; the event that ends the
    wait (the Post line's success, a fatal watchdog rule), else None.

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
        if not line.cut and not any(marker in text for marker in MARKERS):
            continue
        at = key[0] + key[1] / 1e9
        if (result := take_step(state, LogLine(stamp, at, text, line.cut), log)) is not None:
            return result
    return None


def take_step(state: FollowState, event: Event, log: Log) -> Result | None:
    """A step of the watch (core.advance) on the state the shells share: its new state taken,
    its lines said in `log`; the event that ends the wait or this deferral, if any."""
    new, effects = advance(state, event)
    state.adopt(new)
    for effect in effects:
        if isinstance(effect, Say):
            (log.warning if effect.warning else log.info)("%s", effect.text)
    return ended(effects)
