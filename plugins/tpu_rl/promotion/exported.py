"""What a run exported and what it scored, as `approve` and `promote` read it from the run's
XComs: the export step's result, and the champion comparison's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpu_rl.names import Step

# helper champ's step (issue 29): its XCom is {"champion", "champion_metrics",
# "challenger_metrics", "beats", "reason"}; the lead folds the name into tpu_rl.names.Step.
COMPARE_TASK = "compare_champion"
CHECKPOINT_STEP_KEY = "checkpoint_step"  # what export pushed before it returned its result


@dataclass(frozen=True)
class ExportedModel:
    """The verified export: where it is, the checkpoint and step it came from, its evaluation."""

    export_uri: str
    checkpoint_uri: str
    step: int | None
    metrics: dict[str, Any]


def exported_model(ti: Any, export_uri: str, checkpoints_dir: str) -> ExportedModel:
    """The export's result: {"step", "checkpoint_uri", "export_uri", "metrics", "choice"}.

    Until export returns that (issue 29's export of the best committed step), its pushed
    `checkpoint_step` and the run's last evaluation (`wait_for_rewards`' post line) stand in:
    export then took the newest committed step.
    """
    result = ti.xcom_pull(task_ids=Step.EXPORT)
    if isinstance(result, Mapping) and "export_uri" in result:
        return ExportedModel(
            export_uri=str(result["export_uri"]),
            checkpoint_uri=str(result.get("checkpoint_uri") or ""),
            step=result.get("step"),
            metrics=dict(result.get("metrics") or {}),
        )
    step = ti.xcom_pull(task_ids=Step.EXPORT, key=CHECKPOINT_STEP_KEY)
    rewards = ti.xcom_pull(task_ids=Step.WAIT_FOR_REWARDS)
    post = rewards.get("post") if isinstance(rewards, Mapping) else None
    return ExportedModel(
        export_uri=export_uri,
        checkpoint_uri=f"{checkpoints_dir}{step}/" if step is not None else "",
        step=step,
        metrics=dict(post or {}),
    )


def champion_comparison(ti: Any) -> Mapping[str, Any] | None:
    """compare_champion's result, if it ran (None before its step joins the DAG)."""
    value = ti.xcom_pull(task_ids=COMPARE_TASK)
    return value if isinstance(value, Mapping) else None
