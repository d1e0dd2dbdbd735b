"""Parse MaxText ``train_rl`` reward lines (Pre/Post RL Training, Intermediate Eval) from logs.

Pure functions only: used by the reward trigger, the reward sensor and ``make rewards``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["pre", "post", "intermediate"]

# Kubernetes `timestamps=true` prefix: RFC3339 or RFC3339Nano, then one space.
_K8S_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})) ?")
# The marker follows an absl prefix (`W1129 10:00:00.123456 140213 train_rl.py:824] `),
# a Python logging prefix (`WARNING:absl:`) or nothing.
_MARKER = re.compile(
    r"(?:^|(?<=[\]:\s]))"
    r"(?:(?P<pre>Pre RL Training)|(?P<post>Post RL Training)"
    r"|Intermediate Eval \(step=(?P<step>\d+)\)):\s*(?P<fields>.*)$"
)
_NUM = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
# `{accuracy=}` is a repr: a numpy scalar prints as `np.float64(18.75)`.
_FIELD = re.compile(
    rf"(?P<key>[a-z_]+)=(?:np\.\w+\()?(?P<value>{_NUM})\)?%?(?=,|\s|$)", re.IGNORECASE
)
_REQUIRED = ("corr", "total", "accuracy", "partial_accuracy", "format_accuracy")


@dataclass(frozen=True)
class RewardMetrics:
    """One evaluation result; accuracies are percentages (18.75 means 18.75 %)."""

    corr: int | float
    total: int | float
    accuracy: float
    partial_accuracy: float
    format_accuracy: float
    mean_reward: float | None  # absent in MaxText builds older than the reward logging

    def as_dict(self) -> dict[str, int | float | None]:
        """JSON-safe dict: non-finite floats (`nan`) become None."""
        out: dict[str, int | float | None] = {}
        for key in (*_REQUIRED, "mean_reward"):
            value = getattr(self, key)
            out[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        return out


@dataclass(frozen=True)
class RewardLine:
    """A parsed reward line; ``time`` is the Kubernetes timestamp when the log had one."""

    kind: Kind
    metrics: RewardMetrics
    step: int | None = None
    time: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step} if self.kind == "intermediate" else {}
        out.update(self.metrics.as_dict())
        if self.time is not None:
            out["time"] = self.time
        return out


@dataclass
class RewardLog:
    """Everything reward-related found in one log."""

    pre: RewardLine | None = None
    post: RewardLine | None = None
    intermediate: list[RewardLine] = field(default_factory=list)

    def add(self, line: RewardLine) -> None:
        if line.kind == "intermediate":
            self.intermediate.append(line)
        else:
            setattr(self, line.kind, line)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pre": self.pre.as_dict() if self.pre else None,
            "post": self.post.as_dict() if self.post else None,
            "intermediate": [line.as_dict() for line in self.intermediate],
        }


def is_reward_line(line: str) -> bool:
    """The line (with or without its timestamp) carries one of MaxText's reward markers."""
    return _MARKER.search(split_timestamp(line)[1]) is not None


def split_timestamp(line: str) -> tuple[str | None, str]:
    """Split an optional Kubernetes RFC3339 prefix from a log line (CR/LF stripped)."""
    line = line.rstrip("\r\n")
    match = _K8S_TIME.match(line)
    if not match:
        return None, line
    return match.group(1), line[match.end() :]


def _number(text: str) -> int | float:
    lowered = text.lower()
    if "nan" in lowered or "inf" in lowered:
        return float(lowered)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text)


def parse_metrics(fields: str) -> RewardMetrics | None:
    """Parse `corr=.., total=.., accuracy=..%, ...`; None if a required field is missing."""
    values = {m.group("key"): _number(m.group("value")) for m in _FIELD.finditer(fields)}
    if any(key not in values for key in _REQUIRED):
        return None
    mean_reward = values.get("mean_reward")
    return RewardMetrics(
        corr=values["corr"],
        total=values["total"],
        accuracy=float(values["accuracy"]),
        partial_accuracy=float(values["partial_accuracy"]),
        format_accuracy=float(values["format_accuracy"]),
        mean_reward=None if mean_reward is None else float(mean_reward),
    )


def parse_line(line: str) -> RewardLine | None:
    """Parse one log line; None unless it is a complete Pre, Post or Intermediate Eval line."""
    time, text = split_timestamp(line)
    match = _MARKER.search(text)
    if not match:
        return None
    metrics = parse_metrics(match.group("fields"))
    if metrics is None:
        return None
    if match.group("pre"):
        return RewardLine("pre", metrics, time=time)
    if match.group("post"):
        return RewardLine("post", metrics, time=time)
    return RewardLine("intermediate", metrics, step=int(match.group("step")), time=time)


def parse_lines(lines: Iterable[str]) -> RewardLog:
    """Collect reward lines; a later Pre or Post line (a restarted run) replaces an earlier one."""
    log = RewardLog()
    for line in lines:
        parsed = parse_line(line)
        if parsed is not None:
            log.add(parsed)
    return log


class LineAssembler:
    """Turn text arriving in arbitrary chunks into complete lines; keeps a partial tail."""

    def __init__(self) -> None:
        self._pending = ""

    @property
    def pending(self) -> str:
        """The partial line received so far (no newline yet)."""
        return self._pending

    def feed(self, chunk: str) -> list[str]:
        """Add a chunk; return the lines it completed, without their line endings."""
        data = self._pending + chunk
        *complete, self._pending = data.split("\n")
        return [line.rstrip("\r") for line in complete]

    def flush(self) -> str | None:
        """Return and clear the partial tail (for a stream that ended without a newline).

        A reward line without its newline is dropped: MaxText ends every line, so the output
        stopped inside it (the container exited mid-write) and its last number may be cut
        short (`mean_reward=0.1` of `0.1875`). Only complete lines count.
        """
        tail, self._pending = self._pending.rstrip("\r"), ""
        if is_reward_line(tail):
            return None
        return tail or None


def main(argv: list[str] | None = None) -> int:
    """`python -m tpu_rl.training_log.lines LOG_FILE`: print the rewards found in a saved log as
    JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m tpu_rl.training_log.lines", description=main.__doc__
    )
    parser.add_argument("log_file", help="a saved training log, plain or with k8s timestamps")
    args = parser.parse_args(argv)
    with open(args.log_file, encoding="utf-8", errors="replace", newline="") as handle:
        assembler = LineAssembler()
        lines = [line for chunk in handle for line in assembler.feed(chunk)]
        tail = assembler.flush()
    if tail:
        lines.append(tail)
    json.dump(parse_lines(lines).as_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
