"""What a run exported and what it scored, as `approve` and `promote` read it from the run's
XComs: the export step's result, the champion comparison's, and the held-out evaluation's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tpu_rl.heldout.report import HeldoutReport, report_of
from tpu_rl.names import Step

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings


@dataclass(frozen=True)
class ExportedModel:
    """The verified export: where it is, the checkpoint and step it came from, its evaluation."""

    export_uri: str
    checkpoint_uri: str
    step: int | None
    metrics: dict[str, Any]


def exported_model(ti: Any) -> ExportedModel:
    """The export's result: {"step", "checkpoint_uri", "export_uri", "metrics", "choice"}
    (tpu_rl.operators.job_steps.ExportCheckpointOperator pushes it)."""
    result = ti.xcom_pull(task_ids=Step.EXPORT)
    if not isinstance(result, Mapping) or "export_uri" not in result:
        raise ValueError(f"export left no result to promote (its XCom: {result!r})")
    return ExportedModel(
        export_uri=str(result["export_uri"]),
        checkpoint_uri=str(result.get("checkpoint_uri") or ""),
        step=result.get("step"),
        metrics=dict(result.get("metrics") or {}),
    )


def champion_comparison(ti: Any) -> Mapping[str, Any] | None:
    """compare_champion's result, if it ran (None before its step joins the DAG)."""
    value = ti.xcom_pull(task_ids=Step.COMPARE_CHAMPION)
    return value if isinstance(value, Mapping) else None


def heldout_result(ti: Any, settings: RunSettings) -> HeldoutReport | None:
    """evaluate_heldout's report; None when the run's held-out evaluation is off (heldout_tasks
    empty: the step skips, and no XCom is read) or left no report."""
    if not settings.heldout_tasks:
        return None
    return report_of(ti.xcom_pull(task_ids=Step.EVALUATE_HELDOUT))
