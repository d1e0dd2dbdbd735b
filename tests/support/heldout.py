"""Held-out evaluation results as evaluate_heldout's XCom holds them (HeldoutReport.as_dict):
benchmark rows built from the paired counts of each comparison, so every accuracy and verdict
is the one those counts give."""

from __future__ import annotations

from typing import Any

from tpu_rl.heldout.report import HeldoutReport

Counts = tuple[int, int, int, int]  # both, candidate only, reference only, neither


def row(task: str, vs_base: Counts, vs_champion: Counts | None = None, guard: bool = False) -> dict:
    """A benchmark's row: its accuracies are those of the counts against the base model (and
    the champion, None: not scored)."""
    items = sum(vs_base)

    def reference(counts: Counts | None) -> float | None:
        return None if counts is None else (counts[0] + counts[2]) / items

    return {
        "task": task,
        "guard": guard,
        "items": items,
        "candidate": (vs_base[0] + vs_base[1]) / items,
        "base": reference(vs_base),
        "champion": reference(vs_champion),
        "vs_base": list(vs_base),
        "vs_champion": None if vs_champion is None else list(vs_champion),
    }


# gsm8k: 76.0% against the base's 64.0% (better), the champion's 74.0% (not distinguishable)
GSM8K = row("gsm8k", (600, 160, 40, 200), (700, 60, 40, 200))
# arc_easy: 67.5% against the base's 62.5% (better), the champion's 66.0% (not distinguishable)
ARC = row("arc_easy", (240, 30, 10, 120), (250, 20, 14, 116))
# a guard that fell: 62.0% against the base's 68.0% (worse), the champion's 62.0%
MMLU_FELL = row("mmlu", (300, 10, 40, 150), (300, 10, 10, 180), guard=True)
# gsm8k worse than the base: 56.0% against 64.0%
GSM8K_WORSE = row("gsm8k", (500, 60, 140, 300), (500, 60, 40, 400))


def heldout_xcom(
    *rows: dict[str, Any],
    step: int = 100,
    step_scores: dict[str, float] | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """evaluate_heldout's return value: by default two steps scored, 100 the best."""
    return {
        "step": step,
        "step_scores": step_scores if step_scores is not None else {"80": 0.70, str(step): 0.72},
        "rows": list(rows or (GSM8K,)),
        "alpha": alpha,
    }


def heldout(*rows: dict[str, Any], **changes: Any) -> HeldoutReport:
    """The report of heldout_xcom, as its readers rebuild it."""
    return HeldoutReport.from_dict(heldout_xcom(*rows, **changes))


def without_champion(xcom_row: dict[str, Any]) -> dict[str, Any]:
    """The row of a deployment's first run: no champion scored."""
    return {**xcom_row, "champion": None, "vs_champion": None}
