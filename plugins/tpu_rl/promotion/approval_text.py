"""What a person reads before approving a promotion, and what the run says of it afterwards.

The approval's body (Markdown, which Airflow's Required Actions page renders: HITLOperator's
`body`) puts the export's evaluation beside the base model's and the champion's, with the gate's
and the champion comparison's verdicts, the held-out benchmarks item by item (when evaluated),
the TPU cost so far and what no answer does; its summary is the run's note while it waits, and
the request's notice. `promotion_line` is the run's one line about it afterwards, in its verdict
and note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tpu_rl.heldout.hold import Hold
from tpu_rl.heldout.report import HeldoutReport
from tpu_rl.heldout.table import benchmark_table
from tpu_rl.names import Step
from tpu_rl.promotion.exported import ExportedModel, champion_comparison
from tpu_rl.promotion.promote import STATE_XCOM
from tpu_rl.report.run_report import cost_text
from tpu_rl.settings.choices import EVAL_METRICS
from tpu_rl.training_log.evaluations import LINE_FIELDS

APPROVE, REJECT = "Approve", "Reject"  # ApprovalOperator.APPROVE / .REJECT (providers-standard)
NOT_REQUIRED = "none"  # approve's result when the run's approval setting is none
ANSWER_KEY = "answer"  # approve's XCom: {"approval": "none"} or the chosen option and who chose
HOLD_KEY = "hold"  # approve's XCom when the training held it for a person: the hold's reason
BASE, CHALLENGER = "base (pre-training)", "this export (challenger)"
WHAT_IT_DOES = {
    APPROVE: "the export becomes this deployment's champion",
    REJECT: "the export stays where it is, unpromoted",
}


def timeout_option(answer: str) -> str:
    """The approval's option for the run's `approval_timeout_answer` (approve | reject)."""
    return APPROVE if answer == "approve" else REJECT


@dataclass(frozen=True)
class ApprovalCase:
    """What a person decides on: the export, the gate's result (tpu_rl.promotion.gate), the
    champion comparison (tpu_rl.promotion.comparison), the TPU cost so far, and what no answer
    by `deadline` answers (`timeout_option`)."""

    run_id: str
    export: ExportedModel
    gate: Mapping[str, Any] | None
    comparison: Mapping[str, Any] | None
    tpu: Mapping[str, Any] | None
    capacity: str
    timeout_option: str = REJECT
    deadline: datetime | None = None
    hold: Hold | None = None  # the evidence of reward hacking that asked a person to approve
    heldout: HeldoutReport | None = None  # evaluate_heldout's report; None: the evaluation is off


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a" if value is None else str(value)
    return str(value) if isinstance(value, int) else f"{value:.4f}"


Columns = Mapping[str, Mapping[str, Any] | None]


def metric_names(columns: Columns) -> list[str]:
    """The metrics any column has: MaxText's evaluation metrics in their order, then others (not
    where an Intermediate Eval line came from: its kind, attempt, step and time)."""
    found = {name for values in columns.values() for name in values or {}} - set(LINE_FIELDS)
    return [n for n in EVAL_METRICS if n in found] + sorted(found - set(EVAL_METRICS))


def metrics_table(columns: Columns) -> list[str]:
    """A Markdown table: one row per metric, one column per evaluated model."""
    lines = [f"| metric | {' | '.join(columns)} |", "|---" * (len(columns) + 1) + "|"]
    for name in metric_names(columns):
        cells = " | ".join(_number((values or {}).get(name)) for values in columns.values())
        lines.append(f"| {name} | {cells} |")
    return lines


def _gate_rows(gate: Mapping[str, Any] | None) -> Mapping[str, Mapping[str, Any]]:
    rows = (gate or {}).get("metrics")
    return rows if isinstance(rows, Mapping) else {}


def evaluation_columns(case: ApprovalCase) -> dict[str, Mapping[str, Any] | None]:
    """The three models side by side: the base model (the gate's pre-training figures), the
    champion (as scored on this run's evaluation set), this export."""
    rows = _gate_rows(case.gate)
    comparison = case.comparison or {}
    challenger = (
        comparison.get("challenger_metrics")
        or case.export.metrics
        or {name: row.get("candidate") for name, row in rows.items()}
    )
    champion = comparison.get("champion")
    if case.comparison is None:
        title = "champion: not compared"
    elif champion is None:
        title = "champion: none yet"
    else:
        title = f"champion ({champion.get('run_id', 'n/a')})"
    return {
        BASE: {name: row.get("pre") for name, row in rows.items()},
        title: comparison.get("champion_metrics") if champion else None,
        CHALLENGER: challenger,
    }


def gate_verdict(gate: Mapping[str, Any] | None) -> str:
    """The gate's verdict on this export against the base model, metric by metric."""
    rows = {n: r for n, r in _gate_rows(gate).items() if r.get("min_gain") is not None}
    if not rows:
        return "Gate: no result recorded"
    parts = [
        f"{name} {_number(row.get('candidate'))} vs base {_number(row.get('pre'))} "
        f"(gain {_number(row.get('gain'))}, needs {row['min_gain']:+g})"
        for name, row in rows.items()
    ]
    passed = all(row.get("passed") for row in rows.values())
    return f"Gate: {'passed' if passed else 'did not pass'}: {'; '.join(parts)}"


def champion_verdict(comparison: Mapping[str, Any] | None) -> str:
    """The champion comparison's verdict."""
    if comparison is None:
        return "Champion: no comparison ran for this run"
    if comparison.get("champion") is None:
        return "Champion: none yet, this export would be the first"
    return f"Champion: {comparison.get('reason') or 'n/a'}"


def timeout_text(case: ApprovalCase) -> str:
    """What no answer does, and by when."""
    by = f" by {case.deadline:%Y-%m-%d %H:%M} UTC" if case.deadline else ""
    return (
        f"No answer{by} answers **{case.timeout_option}** (the run's approval_timeout_answer): "
        f"{WHAT_IT_DOES[case.timeout_option]}."
    )


def cost_line(case: ApprovalCase) -> str:
    """The TPU cost so far (the cluster is gone: the run's whole TPU cost, but outcome's)."""
    if not case.tpu:
        return "TPUs: not counted"
    return f"TPU cost so far: {cost_text(case.tpu, case.capacity)}"


def approval_body(case: ApprovalCase) -> str:
    """The approval's Markdown body: the export, the three models' metrics side by side, the
    verdicts, the held-out benchmarks (when evaluated), the cost, what no answer does."""
    lines = [
        f"Run `{case.run_id}` exported checkpoint step {_number(case.export.step)} to "
        f"`{case.export.export_uri}`. **{APPROVE}**: {WHAT_IT_DOES[APPROVE]}. **{REJECT}**: "
        f"{WHAT_IT_DOES[REJECT]}.",
        "",
        timeout_text(case),
        "",
        *hold_section(case.hold),
        "## Evaluation",
        "",
        *metrics_table(evaluation_columns(case)),
        "",
        f"- {gate_verdict(case.gate)}",
        f"- {champion_verdict(case.comparison)}",
        "",
        *heldout_section(case.heldout),
        "## Cost",
        "",
        f"- {cost_line(case)}",
    ]
    return "\n".join(lines) + "\n"


def metric_lines(case: ApprovalCase) -> dict[str, str]:
    """Each metric's line: its base, champion and export values."""
    columns = evaluation_columns(case)
    base, champion, export = (values or {} for values in columns.values())
    return {
        name: f"{name}: base {_number(base.get(name))}, champion {_number(champion.get(name))}, "
        f"this export {_number(export.get(name))}"
        for name in metric_names(columns)
    }


def hold_line(hold: Hold) -> str:
    return f"Held for a person's approval: {hold.reason}."


def hold_section(hold: Hold | None) -> list[str]:
    """The body's section on why promotion waits for a person whatever the run's approval
    setting (tpu_rl.heldout.hold); nothing without a hold."""
    if hold is None:
        return []
    return [
        "## Held: possible reward hacking",
        "",
        hold_line(hold),
        "",
        *(f"- {e}" for e in hold.evidence),
        "",
    ]


def heldout_section(report: HeldoutReport | None) -> list[str]:
    """The body's section on the held-out benchmarks, the candidate against the champion and
    the base model item by item (tpu_rl.heldout.table); nothing without held-out evaluation."""
    if report is None:
        return []
    return ["## Held-out benchmarks", "", *benchmark_table(report), ""]


def verdict_lines(case: ApprovalCase) -> list[str]:
    """The hold, the gate's and the champion comparison's verdicts, the cost, what no answer
    does."""
    return [
        *([hold_line(case.hold)] if case.hold else []),
        gate_verdict(case.gate),
        champion_verdict(case.comparison),
        cost_line(case),
        timeout_text(case),
    ]


def approval_summary(case: ApprovalCase) -> list[str]:
    """The body in a few lines, for the request's notice: each metric's base, champion and
    export values, the verdicts, the cost, what no answer does."""
    return [*metric_lines(case).values(), *verdict_lines(case)]


MORE_METRICS = "More on the Required Actions page: "
CUT = " (cut: the Required Actions page has it whole)"


def summary_within(case: ApprovalCase, room: int) -> list[str]:
    """approval_summary in at most `room` characters, its lines joined by blank lines (the run's
    note: Airflow keeps 1,000 characters of it). The verdicts, the cost and what no answer does
    are kept whole; the metrics' lines in this order while they fit: the gated ones, MaxText's
    other evaluation metrics, the rest (its counts, corr and total); one line names the metrics
    left out, which the Required Actions page shows. Verdicts too long on their own are cut
    before what no answer does, which stays last."""
    lines, tail = metric_lines(case), verdict_lines(case)
    gated = {n for n, row in _gate_rows(case.gate).items() if row.get("min_gain") is not None}
    ranked = sorted(lines, key=lambda n: (n not in gated, n not in EVAL_METRICS))

    def fitted(kept: set[str]) -> list[str]:
        left = [n for n in lines if n not in kept]
        more = [MORE_METRICS + ", ".join(left)] if left else []
        return [*(lines[n] for n in lines if n in kept), *more, *tail]

    kept: set[str] = set()
    for name in ranked:
        if len("\n\n".join(fitted(kept | {name}))) > room:
            break
        kept.add(name)
    chosen = fitted(kept)
    if len("\n\n".join(chosen)) <= room:
        return chosen
    head = "\n\n".join(chosen[:-1])[: max(0, room - len(tail[-1]) - 2 - len(CUT))]
    return [head + CUT, tail[-1]]


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
    # a timeout answers with the defaults, as no one (HITLTrigger / the scheduler's sweep):
    # the run's approval_timeout_answer
    if chosen == APPROVE:
        return "approved on timeout: approval_timeout_answer=approve"
    return "the approval timed out (rejected)" if chosen == REJECT else f"{chosen} (no one)"


def promotion_line(
    promoted: Mapping[str, Any] | None,
    approval: Any,
    comparison: Mapping[str, Any] | None,
    failed_state: str | None = None,
    held: str | None = None,
) -> str:
    """The run's one line about its promotion, from promote's, approve's and the comparison's
    results, the state a failed promote left (its XCom `state`), and why a person was asked
    when the run's settings did not ask one (`held`: tpu_rl.heldout.hold)."""
    line = _promotion(promoted, approval, comparison, failed_state)
    return f"{line}; held for a person because {held}" if held else line


def _promotion(
    promoted: Mapping[str, Any] | None,
    approval: Any,
    comparison: Mapping[str, Any] | None,
    failed_state: str | None,
) -> str:
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
        # compare_champion's reason says "not promoted: ..." itself (promotion.comparison)
        why = str(comparison.get("reason") or "the champion stays")
        return f"not promoted: {why.removeprefix('not promoted: ')}"
    return "not promoted"


def run_promotion(ti: Any) -> str:
    """The run's promotion line from its task instance's view of the XComs."""
    promoted = ti.xcom_pull(task_ids=Step.PROMOTE)
    state = ti.xcom_pull(task_ids=Step.PROMOTE, key=STATE_XCOM)
    held = ti.xcom_pull(task_ids=Step.APPROVE, key=HOLD_KEY)
    return promotion_line(
        promoted if isinstance(promoted, Mapping) else None,
        ti.xcom_pull(task_ids=Step.APPROVE, key=ANSWER_KEY),
        champion_comparison(ti),
        state if isinstance(state, str) else None,
        held if isinstance(held, str) else None,
    )
