"""Champion against challenger: does this run's export beat the deployment's current champion,
both scored on the run's evaluation set, by `min_gain_over_champion` on each metric named? With
held-out evaluation, the paired verdict on the held-out items decides (`on_heldout`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tpu_rl.heldout.paired import Verdict
from tpu_rl.heldout.report import BASE, CHAMPION, HeldoutReport
from tpu_rl.training_log.evaluations import metric

NO_CHAMPION = "no champion yet: this run's export becomes the first candidate"

Metrics = Mapping[str, Any]


def compare_with_champion(
    champion: Mapping[str, Any] | None,
    champion_metrics: Metrics | None,
    challenger_metrics: Metrics | None,
    min_gain: Mapping[str, float],
) -> dict[str, Any]:
    """The comparison as compare_champion returns it: `beats` and a one-line `reason`.

    Beats means, for every metric of `min_gain`: challenger >= champion + its gain (the reward
    gate's rule: a negative gain is the loss allowed). No champion: beats, saying so. A metric
    missing or not finite on either side: does not beat, naming it."""
    result = {
        "champion": dict(champion) if champion else None,
        "champion_metrics": dict(champion_metrics) if champion_metrics is not None else None,
        "challenger_metrics": dict(challenger_metrics or {}),
    }
    if champion is None:
        return {**result, "beats": True, "reason": NO_CHAMPION}
    theirs_all, ours_all = champion_metrics or {}, challenger_metrics or {}
    missing = list(_unusable(theirs_all, ours_all, min_gain))
    if missing:
        reason = f"not promoted: no usable {'; '.join(missing)}"
        return {**result, "beats": False, "reason": reason}
    shortfalls: list[str] = []
    margins: list[str] = []
    for name, gain in min_gain.items():
        ours, theirs = float(ours_all[name]), float(theirs_all[name])
        line = f"{name} {ours:.4g} vs champion {theirs:.4g} (needs {gain:+g})"
        (shortfalls if ours < theirs + gain else margins).append(line)
    where = f"the champion from run {champion.get('run_id')}"
    if shortfalls:
        reason = f"not promoted: loses to {where}: {'; '.join(shortfalls)}"
        return {**result, "beats": False, "reason": reason}
    return {**result, "beats": True, "reason": f"beats {where}: {'; '.join(margins)}"}


def on_heldout(comparison: Mapping[str, Any], report: HeldoutReport) -> dict[str, Any]:
    """The comparison decided by the held-out items: beats only when the candidate is
    significantly better (McNemar's exact test at the report's level) than the champion, or,
    on a deployment's first run, than the base model, on a scored benchmark and worse on none;
    "not distinguishable" is said as such. The trainer's comparison stays as
    `trainer_reason`."""
    champion = comparison.get("champion")
    reference = CHAMPION if champion else BASE
    verdict = report.verdict(reference)
    if verdict is None:  # the champion's evaluation was not scored: the trainer's stands
        return dict(comparison)
    lines = "; ".join(report.reasons(reference))
    where = (
        f"the champion from run {champion.get('run_id')} on the held-out items"
        if champion
        else "the base model on the held-out items (no champion yet: the first must beat it)"
    )
    reason = {
        Verdict.BETTER: f"beats {where}: {lines}",
        Verdict.NOT_DISTINGUISHABLE: f"not promoted: not distinguishable from {where}: {lines}",
        Verdict.WORSE: f"not promoted: worse than {where}: {lines}",
    }[verdict]
    return {
        **comparison,
        "beats": verdict == Verdict.BETTER,
        "reason": reason,
        "heldout_verdict": str(verdict),
        "trainer_reason": comparison.get("reason"),
    }


def _unusable(
    champion: Metrics, challenger: Metrics, min_gain: Mapping[str, float]
) -> Iterator[str]:
    """'<metric> for the <side> (got <value>)' for each compared value that is not a finite
    number (MaxText logs `nan` when every reward was; RewardMetrics.as_dict makes it None)."""
    for name in min_gain:
        for side, metrics in (("champion", champion), ("challenger", challenger)):
            if metric(metrics, name) is None:
                yield f"{name} for the {side} (got {metrics.get(name)!r})"
