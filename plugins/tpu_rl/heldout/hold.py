"""The hold on reward hacking: evidence that the training reward rose for the wrong reason, which
makes promotion wait for a person's approval (approval=none included), never automatic.

Today's evidence is the completion length: the batch reward (TensorBoard
`rewards/train/score/mean`) rose while the mean completion length
(`completions/train/mean_length`) drifted past `hold_length_drift` times its start, longer or
shorter: a policy that pads, truncates or repeats to please its reward function moves its length
before any held-out score shows it. Each is judged on the wait's curves (tpu_rl.watch.curves):
the mean of the first and of the last WINDOW share of a series' points. On the 13 real Tunix
GRPO runs of sandbox/corpus without a fault the length moves 0.98 to 1.44 times.

With held-out evaluation (tpu_rl.heldout.report) there is more: a guard benchmark, a capability
the reward never scores, answered significantly worse than the base model; or a scored benchmark
answered significantly worse than the base model while the batch reward rose.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpu_rl.heldout.paired import Verdict
from tpu_rl.heldout.report import BASE, NAMED, HeldoutReport
from tpu_rl.watch import curves

WINDOW = 0.25  # the share of a series' points at its start and at its end compared
MIN_POINTS = 8  # fewer points than this in a series: not judged (too short to tell a trend)


@dataclass(frozen=True)
class Hold:
    """Why promotion waits for a person, and the figures that show it."""

    reason: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Trend:
    """A series' start and end: the means of its first and last WINDOW of points."""

    tag: str
    first_step: int
    last_step: int
    start: float
    end: float

    @property
    def ratio(self) -> float:
        return self.end / self.start if self.start else float("inf")

    def says(self, what: str, unit: str = "") -> str:
        return (
            f"{what} ({self.tag}) {self.start:.4g}{unit} -> {self.end:.4g}{unit} from step "
            f"{self.first_step} to {self.last_step}"
        )


def trend(found: Mapping[str, Any] | None, tag: str, before: int | None = None) -> Trend | None:
    """The start and end of one curve, its points before TensorBoard step `before` only when
    given; None when it has fewer than MIN_POINTS points."""
    points = curves.points(dict(found) if found else None, tag)
    if before is not None:
        points = [p for p in points if p[0] < before]
    if len(points) < MIN_POINTS:
        return None
    width = max(1, round(len(points) * WINDOW))
    return Trend(
        tag=tag,
        first_step=int(points[0][0]),
        last_step=int(points[-1][0]),
        start=statistics.fmean(p[1] for p in points[:width]),
        end=statistics.fmean(p[1] for p in points[-width:]),
    )


def length_drift_hold(
    found: Mapping[str, Any] | None, max_drift: float, exported_step: int | None = None
) -> Hold | None:
    """A hold when the batch reward rose while the completion length moved past `max_drift`
    times its start (or below its start / `max_drift`); None otherwise, or with max_drift 0
    (off), or when either curve is too short to judge.

    Judged on the training of the exported checkpoint only: the rollouts of its updates, the
    TensorBoard steps before `exported_step` (a rollout's step is one lower than its update's,
    tpu_rl.watch.curves), not what came after it (a NaN's garbage after a healthy export)."""
    if not max_drift:
        return None
    reward = trend(found, curves.REWARD_MEAN, exported_step)
    length = trend(found, curves.LENGTH, exported_step)
    if reward is None or length is None or reward.end <= reward.start:
        return None
    if 1 / max_drift <= length.ratio <= max_drift:
        return None
    return Hold(
        reason=(
            f"the training reward rose while the completion length {_moved(length.ratio)}, past "
            f"hold_length_drift {max_drift:g}: a sign of reward hacking"
        ),
        evidence=(
            reward.says("batch reward"),
            length.says("completion length", " tokens"),
        ),
    )


def heldout_hold(
    report: HeldoutReport | None, found: Mapping[str, Any] | None, exported_step: int | None = None
) -> Hold | None:
    """A hold when the held-out evaluation's candidate answers a guard benchmark significantly
    worse than the base model, or, while the batch reward rose (judged as length_drift_hold
    judges it), its verdict against the base model is worse; None otherwise, or without a
    report (held-out evaluation off)."""
    if report is None:
        return None
    reasons: list[str] = []
    evidence: list[str] = []
    if falls := report.guard_falls():
        fell = [task for task, _ in report.worse_than_base(guards=True)]
        reasons.append(
            f"step {report.step} answers guard benchmark {', '.join(fell)} significantly worse "
            "than the base model: a capability the reward never scored, lost"
        )
        evidence += falls
    reward = trend(found, curves.REWARD_MEAN, exported_step)
    worse = report.verdict(BASE) == Verdict.WORSE
    if worse and reward is not None and reward.end > reward.start:
        rows = report.worse_than_base(guards=False)
        reasons.append(
            f"the training reward rose while step {report.step} answers held-out benchmark "
            f"{', '.join(task for task, _ in rows)} significantly worse than the base model: a "
            "sign of reward hacking"
        )
        evidence.append(reward.says("batch reward"))
        evidence += [f"{task}: {verdict.says(NAMED[BASE])}" for task, verdict in rows]
    return Hold("; ".join(reasons), tuple(evidence)) if reasons else None


def joined(*holds: Hold | None) -> Hold | None:
    """The holds found as one: their reasons and their evidence in order; None without any."""
    found = [hold for hold in holds if hold is not None]
    if not found:
        return None
    return Hold(
        "; ".join(hold.reason for hold in found),
        tuple(line for hold in found for line in hold.evidence),
    )


def _moved(ratio: float) -> str:
    if ratio >= 1:
        return f"grew {ratio:.2g} times"
    return f"shrank {1 / ratio:.2g} times" if ratio else "shrank to nothing"
