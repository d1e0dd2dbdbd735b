"""The gate: export only when the model to export gained enough over the base model on each
gated metric (by default mean_reward by `min_reward_gain`: the rule before `gate_metrics`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException

from tpu_rl.heldout.paired import Verdict
from tpu_rl.heldout.report import BASE, HeldoutReport
from tpu_rl.settings.choices import EVAL_METRICS
from tpu_rl.training_log.evaluations import gate_thresholds, metric

APART = ("accuracy", "format_accuracy")  # always told apart: format can rise as answers fail


def reward_gate(
    rewards: Mapping[str, Any] | None,
    min_gain: float,
    gate_metrics: Mapping[str, float] | None = None,
    candidate: tuple[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Stop before export unless, for each gated metric, candidate >= pre + its minimum gain.

    `candidate`: (what it is, its evaluation), e.g. ("step-30", {...}); by default the
    post-training line. Returns the mean rewards and gain (`pre_mean_reward`,
    `post_mean_reward`: the candidate's, `gain`) and, per metric, pre, candidate, gain, the
    minimum (None: not gated) and whether it passed.
    """
    if not rewards or not rewards.get("post"):
        raise AirflowFailException("no post-training metrics: the reward sensor gave none")
    label, judged = candidate or ("post-training", rewards["post"])
    pre = rewards.get("pre")
    if pre is None:
        raise AirflowFailException(
            f"{label} mean_reward={metric(judged, 'mean_reward')} but no pre-training line to "
            "compare with (num_test_batches=0?)"
        )
    gated = gate_thresholds(gate_metrics, min_gain)
    for name in gated:
        for which, line in (("pre-training", pre), (label, judged)):
            if metric(line, name) is None:
                raise AirflowFailException(
                    f"reward gate: the {which} line has no usable {name} (got "
                    f"{line.get(name) if isinstance(line, Mapping) else None!r}; a MaxText "
                    f"build without it, or a NaN){_apart(pre, judged)}; not exporting"
                )
    table = {name: _row(name, pre, judged, gated.get(name)) for name in EVAL_METRICS}
    short = [
        f"{label} {name}={_shown(table[name]['candidate'], name)} is below pre-training "
        f"{name}={_shown(table[name]['pre'], name)} + {gated[name]:g}"
        for name in gated
        if not table[name]["passed"]
    ]
    if short:
        raise AirflowFailException(
            f"reward gate: {'; '.join(short)}{_apart(pre, judged)}; not exporting"
        )
    reward = table["mean_reward"]
    return {
        "pre_mean_reward": reward["pre"],
        "post_mean_reward": reward["candidate"],
        "gain": reward["gain"],
        "candidate": label,
        "metrics": table,
    }


def heldout_gate(report: HeldoutReport) -> dict[str, Any]:
    """With held-out evaluation: stop before export when the candidate step answers a scored
    benchmark's items significantly worse than the base model (McNemar's exact test at the
    report's level): training made the model worse on what it was for. A gain need not be
    significant to export; promotion asks for one (tpu_rl.promotion.comparison.on_heldout).
    Returns the verdict and its lines."""
    verdict = report.verdict(BASE)
    lines = report.reasons(BASE)
    if verdict in (None, Verdict.WORSE):
        shown = "not scored" if verdict is None else "worse"
        raise AirflowFailException(
            f"held-out gate: step {report.step} is {shown} against the base model: "
            f"{'; '.join(lines) or 'the base model was not scored'}; not exporting"
        )
    return {"verdict": str(verdict), "reasons": lines, "step": report.step}


def heldout_choice(report: HeldoutReport) -> tuple[int, str]:
    """The step the held-out evaluation exports, and why (checkpoint_choice's `heldout`)."""
    scores = ", ".join(f"step {step} {score:.1%}" for step, score in report.step_scores.items())
    return report.step, f"held-out evaluation: the best score of the steps scored ({scores})"


def candidate(
    step: int, metrics: Mapping[str, Any] | None, post: Any
) -> tuple[str, Mapping[str, Any]] | None:
    """What the gate judges for the step export takes (`metrics`: its evaluation, if any,
    tpu_rl.checkpoints.checkpoint_choice.Choice), as reward_gate's `candidate`, named by the step
    evaluated; None: the Post line (the final step's, or standing in for a step without one).
    An Intermediate Eval carries its `step`, and so does the wait's `post` of a run stopped
    early (WaitForRewardsSensor: end_unhealthy, end_at_spend_limit), the newest evaluation at or
    before the step it stopped at: a step without one of its own is judged on that one."""
    line = metrics if metrics is not None else post
    evaluated = line.get("step") if isinstance(line, Mapping) else None
    if not isinstance(evaluated, int):
        return None
    if evaluated == step:
        return f"step-{step}", line
    return f"step-{evaluated} (the newest evaluation at or before step {step})", line


def _row(
    name: str, pre: Mapping[str, Any], judged: Mapping[str, Any], minimum: float | None
) -> dict[str, Any]:
    """One metric before and after, its gain and, when gated, its minimum and verdict."""
    before, after = metric(pre, name), metric(judged, name)
    gain = None if before is None or after is None else after - before
    # as the gate always compared: after >= before + minimum (not the rounded gain)
    passed = (
        None
        if minimum is None
        else before is not None and after is not None and after >= before + minimum
    )
    return {"pre": before, "candidate": after, "gain": gain, "min_gain": minimum, "passed": passed}


def _apart(pre: Mapping[str, Any], judged: Mapping[str, Any]) -> str:
    """Accuracy and format accuracy, before -> after, whatever is gated."""
    parts = [
        f"{name} {_shown(metric(pre, name))} -> {_shown(metric(judged, name))}" for name in APART
    ]
    return f" ({', '.join(parts)})"


def _shown(value: float | None, name: str = "") -> str:
    """Rewards to 4 decimals (as MaxText logs them), percentages as they are."""
    if value is None:
        return "n/a"
    return f"{value:.4f}" if name == "mean_reward" else f"{value:g}"
