"""The held-out evaluation as the RL page shows it (a run's `heldout`): each scored step's
accuracy, drawn beside the trainer's evaluations per step, the best step, and a row per benchmark
as the Markdown table of tpu_rl.heldout.table has it, its verdicts in words; no I/O.

Accuracies, differences and their intervals are shares of the items (0..1): the page shows them
as percentages and points."""

from __future__ import annotations

from typing import Any

from tpu_rl.heldout.paired import PairedVerdict
from tpu_rl.heldout.report import BASE, CHAMPION, NAMED, BenchmarkRow, HeldoutReport
from tpu_rl.heldout.table import VERDICT_WORDS, level, reading_line, verdict_line


def heldout_view(report: HeldoutReport) -> dict[str, Any]:
    """`step`: the best step; `scores`: each scored step's mean accuracy over the scored
    benchmarks, by step; `rows`: a row per benchmark (guards marked); `level`, `verdict` (the
    overall verdict's line) and `reading` (how to read the verdicts) as the run's report says
    them."""
    return {
        "step": report.step,
        "scores": [
            {"step": step, "score": score} for step, score in sorted(report.step_scores.items())
        ],
        "rows": [_row(row) for row in report.rows],
        "level": level(report),
        "verdict": verdict_line(report),
        "reading": reading_line(report),
    }


def _row(row: BenchmarkRow) -> dict[str, Any]:
    return {
        "task": row.task,
        "guard": row.guard,
        "items": row.items,
        "candidate": row.candidate,
        "champion": row.champion,
        "base": row.base,
        "vs_champion": _versus(row.vs_champion, NAMED[CHAMPION]),
        "vs_base": _versus(row.vs_base, NAMED[BASE]),
    }


def _versus(verdict: PairedVerdict | None, reference: str) -> dict[str, Any] | None:
    """The candidate against one reference: the verdict in words, the accuracy difference and
    its interval, the whole sentence (PairedVerdict.says); None when it was not scored."""
    if verdict is None:
        return None
    return {
        "verdict": VERDICT_WORDS[verdict.verdict],
        "difference": verdict.counts.difference,
        "interval": list(verdict.interval),
        "says": verdict.says(reference),
    }
