"""The corpus of real GRPO runs (sandbox/corpus/*.json, recorded by `make corpus`,
tools/trainer_corpus.py) and its replay through the product's training watch.

Each file is one run of the real trainer (Tunix's GRPOLearner on its toy model): the lines the
product reads with their absl timestamps, every TensorBoard scalar, and how it ended. `watch`
feeds a run to the follower's own pure step (`tpu_rl.rewards.line_reader.consume`, which judges
each step and evaluation line with the watchdog) and the event-file rule (`health.on_scalar`)
in the order the product would see them, and says whether and where the watchdog stopped it.

When the product sees the scalars: the event file is flushed every `log_period` steps
(Tunix's MetricsLoggerOptions.flush_every_n_steps, which MaxText sets from rl.yml's
log_period; grpo_toy.py passes --log-period) and at close, so the scalars of steps up to a
multiple of log_period are read after that step's line, the rest at the end of the run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tpu_rl.rewards.held_log import HeldLog
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.settings.params import default_settings
from tpu_rl.training_log.train_step import parse_step_line
from tpu_rl.watch import health
from tpu_rl.watch.state import FollowState

CORPUS = Path(__file__).resolve().parent / "corpus"
_ABSL = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6}) ")


@dataclass(frozen=True)
class CorpusRun:
    """One recorded run (tools/trainer_corpus.py writes the fields)."""

    name: str
    why: str
    command: str
    versions: dict[str, str]
    settings: dict[str, Any]
    seed: int
    fault: dict[str, Any] | None
    started: str
    wall_s: float
    exit_code: int | None
    stalled_for_s: float | None
    log: list[str]
    scalars: dict[str, list[list[Any]]]
    saves: list[int]

    @classmethod
    def load(cls, path: Path) -> CorpusRun:
        return cls(**json.loads(path.read_text()))

    @property
    def log_period(self) -> int:
        return int(self.settings.get("log-period", 20))

    def stamped(self) -> list[tuple[float, str]]:
        """Each line with its time (epoch seconds) and the Kubernetes timestamp in front, as a
        log read with timestamps=true sends it."""
        year = datetime.fromisoformat(self.started).year
        out = []
        for line in self.log:
            month, day, clock = _ABSL.match(line).groups()  # type: ignore[union-attr]
            at = datetime.fromisoformat(f"{year}-{month}-{day}T{clock}+00:00")
            stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            out.append((at.timestamp(), f"{stamp} {line}"))
        return out

    def series(self, tag: str) -> list[tuple[int, float]]:
        """One scalar's (step, value) in file order; nan and inf as floats."""
        return [(int(step), float(value)) for step, value in self.scalars.get(tag, [])]

    def losses(self) -> list[float]:
        return [line.loss for line in map(parse_step_line, self.log) if line is not None]


@dataclass(frozen=True)
class Verdict:
    """What the watchdog did with a run: None, or the anomaly it recorded and the step line the
    log had reached when it fired (`seen_step`) and that line's time (`at`)."""

    anomaly: dict[str, Any] | None
    seen_step: int | None = None
    at: float | None = None

    @property
    def rule(self) -> str | None:
        return None if self.anomaly is None else self.anomaly["rule"]


def default_rules() -> health.Rules:
    """The watchdog's rules at the run settings' defaults (what the form starts with)."""
    return health.Rules.from_settings(default_settings())


def runs() -> list[CorpusRun]:
    return [CorpusRun.load(path) for path in sorted(CORPUS.glob("*.json"))]


def watch(run: CorpusRun, rules: health.Rules) -> Verdict:
    """Replay `run` through the follower and the watchdog with `rules`."""
    state = FollowState(health=health.armed(None, rules))
    log = HeldLog(None, hold=True)  # the follower's lines (slow steps, evaluations): never said
    fed: dict[str, int] = {}
    seen_step, at = None, None
    for at, text in run.stamped():
        step = parse_step_line(text)
        seen_step = seen_step if step is None else step.step
        consume(state, [Line(text)], Resent(), log)
        if step is not None and step.step % run.log_period == 0 and not _fatal(state):
            _feed_scalars(state, run, fed, up_to=step.step)
        if _fatal(state):
            return Verdict(health.fatal(state.health), seen_step, at)
    _feed_scalars(state, run, fed, up_to=None)  # the metrics logger's close flushes the rest
    if _fatal(state):
        return Verdict(health.fatal(state.health), seen_step, at)
    for now in _silences(run, rules, at):
        if (stalled := health.on_quiet(state.health, now)) is not None:
            return Verdict(health.fatal(stalled), seen_step, now)
    return Verdict(None, seen_step, at)


def _silences(run: CorpusRun, rules: health.Rules, last: float | None) -> Iterator[float]:
    """When a stalled run is judged silent: after the silence recorded, and past the stall
    floor (a stopped process prints nothing again: SIGSTOP, and nothing resumes it)."""
    if run.stalled_for_s is None or last is None:
        return
    yield last + run.stalled_for_s
    yield last + rules.stall_floor_s + 1.0


def _feed_scalars(
    state: FollowState, run: CorpusRun, fed: dict[str, int], up_to: int | None
) -> None:
    source = f"gs://corpus/{run.name}/rl/tensorboard/events.out.tfevents"
    pending = [
        (step, tag, value)
        for tag in health.BOARD_TAGS
        for step, value in run.series(tag)
        if step > fed.get(tag, -1) and (up_to is None or step <= up_to)
    ]
    for step, tag, value in sorted(pending, key=lambda p: (p[0], p[1])):
        fed[tag] = max(step, fed.get(tag, -1))
        if not _fatal(state):
            state.health = health.on_scalar(state.health or {}, tag, step, value, source)


def _fatal(state: FollowState) -> bool:
    return health.fatal(state.health) is not None


def shows_at(run: CorpusRun) -> int:
    """The first step whose real output shows the run's fault: a nan or a diverged loss line,
    a KL past 1 (TensorBoard), or the step line that never came (a stall)."""
    kind = (run.fault or {}).get("kind")
    losses = list(enumerate(run.losses(), start=1))
    if kind == "overflow":
        return next(step for step, loss in losses if not math.isfinite(loss))
    if kind == "lr_collapse":
        return next(step for step, loss in losses if abs(loss) > 1.0)
    if kind == "kl_blowup":
        return next(step for step, kl in run.series(health.KL_TAG) if kl > 1.0)
    if kind == "stall":
        return len(losses) + 1
    raise ValueError(f"{run.name} has no fault")


def line_time(run: CorpusRun, step: int) -> float | None:
    """When the run logged step `step`'s line (epoch seconds), if it did."""
    for at, text in run.stamped():
        line = parse_step_line(text)
        if line is not None and line.step == step:
            return at
    return None
