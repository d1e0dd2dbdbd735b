"""What a person reads before approving a promotion, and what the run says of it afterwards.

The approval's body is the run's report in short (Markdown, which Airflow's Required Actions page
renders: HITLOperator's `body`): the exported step's metrics, the champion comparison, the TPU
cost. `promotion_line` is the run's one line about it, in its verdict and note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_rl.names import Step
from tpu_rl.promotion.exported import ExportedModel, champion_comparison
from tpu_rl.promotion.promote import STATE_XCOM
from tpu_rl.report.run_report import cost_text

APPROVE, REJECT = "Approve", "Reject"  # ApprovalOperator.APPROVE / .REJECT (providers-standard)
NOT_REQUIRED = "none"  # approve's result when the run's approval setting is none
ANSWER_KEY = "answer"  # approve's XCom: {"approval": "none"} or the chosen option and who chose


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a" if value is None else str(value)
    return str(value) if isinstance(value, int) else f"{value:.4f}"


def metrics_table(columns: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """A Markdown table: one row per metric, one column per evaluated model."""
    names = sorted({name for values in columns.values() for name in values or {}})
    lines = [f"| metric | {' | '.join(columns)} |", "|---" * (len(columns) + 1) + "|"]
    for name in names:
        cells = " | ".join(_number((values or {}).get(name)) for values in columns.values())
        lines.append(f"| {name} | {cells} |")
    return lines


def approval_body(
    run_id: str,
    export: ExportedModel,
    comparison: Mapping[str, Any] | None,
    tpu: Mapping[str, Any] | None,
    capacity: str,
) -> str:
    """The approval's Markdown body: the export, its metrics beside the champion's, the cost."""
    lines = [
        f"Run `{run_id}` exported checkpoint step {_number(export.step)} to "
        f"`{export.export_uri}`. Approve to make it this deployment's champion; reject (or let "
        "the approval time out) to leave the export where it is, unpromoted.",
        "",
        "## Evaluation",
        "",
    ]
    if comparison is None:
        lines += metrics_table({"this export": export.metrics})
        lines += ["", "No champion comparison ran for this run."]
    elif comparison.get("champion") is None:
        lines += metrics_table({"this export": export.metrics})
        lines += ["", "This deployment has no champion yet: this export would be its first."]
    else:
        champion = comparison["champion"]
        lines += metrics_table(
            {
                "this export": comparison.get("challenger_metrics") or export.metrics,
                f"champion ({champion.get('run_id', 'n/a')})": comparison.get("champion_metrics"),
            }
        )
        lines += ["", f"Comparison: {comparison.get('reason') or 'n/a'}"]
    lines += ["", "## Cost", ""]
    lines.append(f"- TPUs so far: {cost_text(tpu, capacity)}" if tpu else "- TPUs: not counted")
    return "\n".join(lines) + "\n"


def approval_decision(result: Any) -> str | None:
    """approve's result in words; None when approve did not finish (skipped, failed)."""
    if not isinstance(result, Mapping):
        return None
    if result.get("approval") == NOT_REQUIRED:
        return "approval not required"
    chosen = (result.get("chosen_options") or [None])[0]
    user = result.get("responded_by_user") or {}
    if user:
        return f"{'approved' if chosen == APPROVE else 'rejected'} by {user.get('name')}"
    # a timeout answers with the defaults, as no one (HITLTrigger / the scheduler's sweep)
    return "the approval timed out (rejected)" if chosen == REJECT else f"{chosen} (no one)"


def promotion_line(
    promoted: Mapping[str, Any] | None,
    approval: Any,
    comparison: Mapping[str, Any] | None,
    failed_state: str | None = None,
) -> str:
    """The run's one line about its promotion, from promote's, approve's and the comparison's
    results, and the state a failed promote left (its XCom `state`)."""
    decision = approval_decision(approval)
    if isinstance(promoted, Mapping):
        where = promoted.get("registry_version")
        registry = f"; Vertex AI version {where}" if where else ""
        return f"promoted ({decision}){registry}"
    if failed_state:
        return f"not promoted: promote failed ({decision}); {failed_state}"
    if decision and decision.startswith(("rejected", "the approval timed out")):
        return f"not promoted: {decision}; the export stays"
    if comparison is not None and comparison.get("beats") is False:
        return f"not promoted: {comparison.get('reason') or 'the champion stays'}"
    return "not promoted"


def run_promotion(ti: Any) -> str:
    """The run's promotion line from its task instance's view of the XComs."""
    promoted = ti.xcom_pull(task_ids=Step.PROMOTE)
    state = ti.xcom_pull(task_ids=Step.PROMOTE, key=STATE_XCOM)
    return promotion_line(
        promoted if isinstance(promoted, Mapping) else None,
        ti.xcom_pull(task_ids=Step.APPROVE, key=ANSWER_KEY),
        champion_comparison(ti),
        state if isinstance(state, str) else None,
    )
