"""The training's curves for the RL page: loss, KL, batch reward (mean, max, min) and completion
length per step, from the TensorBoard scalars the reward wait already reads for the watchdog
(tpu_rl.rewards.event_files, tpu_rl.rewards.poll), and the steps the log showed saved.

No I/O. The curves live in `FollowState.curves` (the saved position carries them, so a rebuilt
trigger goes on with them) and go to the wait's XCom XCOM_KEY with each progress report and at
the wait's end: apart from the run's summary, which the page reads for every run, since the page
reads the curves of the runs it draws only (tpu_rl.ui.curves).

Bounded: at most MAX_POINTS points per tag, kept at the steps that are a multiple of `stride`,
which doubles (dropping every other point) whenever a tag would pass it, plus each tag's newest
point, so a curve reaches the step training is at; values rounded to 6 significant digits.
JSON-safe: a nan or inf is not kept (the position refuses them, tpu_rl.rewards.position); the
watchdog records it as its anomaly, which the page marks.

Steps are TensorBoard's: the actor's tags at its update (1-based), the rollout's `rewards/*` and
`completions/*` one lower (0-based; tpu_rl.watch.health explains both).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

LOSS, KL = "actor/train/loss", "actor/train/kl"
REWARD_MEAN, REWARD_MAX = "rewards/train/score/mean", "rewards/train/score/max"
REWARD_MIN, LENGTH = "rewards/train/score/min", "completions/train/mean_length"
CURVE_TAGS = (LOSS, KL, REWARD_MEAN, REWARD_MAX, REWARD_MIN, LENGTH)
XCOM_KEY = "curves"  # wait_for_rewards' XCom of them
MAX_POINTS = 200  # per tag: 6 tags of ~20 bytes a point stay ~25 KB on the Job's annotation
SAVES_KEPT = 100  # the newest save steps kept
# MaxText's rl.yml `max_num_checkpoints_to_keep` (tpu_rl.checkpoints.checkpoint_choice): Orbax keeps
# the newest this many saves
CHECKPOINTS_KEPT = 10


def _point(step: int, value: float) -> list[float]:
    return [int(step), float(f"{value:.6g}")]


def record(curves: dict[str, Any] | None, scalars: Iterable[Any]) -> dict[str, Any] | None:
    """The curves with `scalars` (event_files.Scalar: tag, step, value) of CURVE_TAGS added,
    downsampled to MAX_POINTS per tag; a new dict (never changed in place), or `curves` itself
    when nothing was added."""
    added = [s for s in scalars if s.tag in CURVE_TAGS and math.isfinite(s.value)]
    if not added:
        return curves
    found = dict(curves or {})
    stride = int(found.get("stride") or 1)
    series = {tag: list(points) for tag, points in (found.get("series") or {}).items()}
    last = dict(found.get("last") or {})
    for scalar in added:
        points = series.setdefault(scalar.tag, [])
        if points and scalar.step <= points[-1][0]:  # a restarted pod repeats its steps
            points[:] = [p for p in points if p[0] < scalar.step]
        if scalar.step % stride == 0:
            points.append(_point(scalar.step, scalar.value))
        last[scalar.tag] = _point(scalar.step, scalar.value)
        while len(points) > MAX_POINTS:
            stride *= 2
            series = {t: [p for p in ps if p[0] % stride == 0] for t, ps in series.items()}
            points = series[scalar.tag]
    return {**found, "stride": stride, "series": series, "last": last}


def with_save(curves: dict[str, Any] | None, step: int) -> dict[str, Any]:
    """The curves with a committed save of `step` (the log's save line) among `saves`."""
    found = dict(curves or {})
    saves = [s for s in found.get("saves") or [] if s != step]
    return {**found, "saves": sorted([*saves, step])[-SAVES_KEPT:]}


def points(curves: dict[str, Any] | None, tag: str) -> list[list[float]]:
    """One tag's points, oldest first, its newest point included."""
    found = curves or {}
    kept = list((found.get("series") or {}).get(tag) or [])
    newest = (found.get("last") or {}).get(tag)
    if newest and (not kept or newest[0] > kept[-1][0]):
        kept.append(newest)
    return kept
