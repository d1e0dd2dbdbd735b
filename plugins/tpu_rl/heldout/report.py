"""The held-out evaluation's result: each scored step's accuracy, the best step, and per benchmark
the candidate against the base model and the champion, item by item (tpu_rl.heldout.paired).

The best step is chosen on the same items its verdict is then computed on: picking the best of k
steps favours the one the items happen to suit, so with k > 1 a verdict leans toward the
candidate by that selection (the winner's curse); heldout_top_k 1 avoids it, and the figures
name how many steps were scored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpu_rl.heldout.paired import PairedCounts, PairedVerdict, Verdict, verdict_of_counts

BASE, CHAMPION = "base", "champion"
NAMED = {BASE: "the base model", CHAMPION: "the champion"}  # as a person reads them
ItemResults = Mapping[str, bool]  # item id -> answered right


def step_label(step: int) -> str:
    return f"step-{step}"


@dataclass(frozen=True)
class BenchmarkRow:
    """One benchmark: the candidate's, the base model's and the champion's accuracy on its
    items, and the candidate's paired verdict against each reference scored."""

    task: str
    guard: bool
    items: int
    candidate: float
    base: float | None
    champion: float | None
    vs_base: PairedVerdict | None
    vs_champion: PairedVerdict | None

    def as_dict(self) -> dict[str, Any]:
        def counts(v: PairedVerdict | None) -> list[int] | None:
            if v is None:
                return None
            c = v.counts
            return [c.both, c.candidate_only, c.reference_only, c.neither]

        return {
            "task": self.task,
            "guard": self.guard,
            "items": self.items,
            "candidate": self.candidate,
            "base": self.base,
            "champion": self.champion,
            "vs_base": counts(self.vs_base),
            "vs_champion": counts(self.vs_champion),
        }

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], alpha: float) -> BenchmarkRow:
        def verdict(counts: Any) -> PairedVerdict | None:
            return None if counts is None else verdict_of_counts(PairedCounts(*counts), alpha)

        return cls(
            task=row["task"],
            guard=row["guard"],
            items=row["items"],
            candidate=row["candidate"],
            base=row["base"],
            champion=row["champion"],
            vs_base=verdict(row["vs_base"]),
            vs_champion=verdict(row["vs_champion"]),
        )


@dataclass(frozen=True)
class HeldoutReport:
    """The held-out evaluation of a run: its best step, each scored step's mean accuracy over
    the scored (not guard) benchmarks, a row per benchmark for that step, the level."""

    step: int
    step_scores: Mapping[int, float]
    rows: tuple[BenchmarkRow, ...]
    alpha: float

    @property
    def scored_rows(self) -> tuple[BenchmarkRow, ...]:
        return tuple(row for row in self.rows if not row.guard)

    def verdict(self, reference: str) -> Verdict | None:
        """Against BASE or CHAMPION over the scored benchmarks: worse when one is significantly
        worse, better when one is significantly better and none worse, otherwise not
        distinguishable; None when that reference was not scored."""
        verdicts = [v for row in self.scored_rows if (v := _against(row, reference)) is not None]
        if not verdicts:
            return None
        found = {v.verdict for v in verdicts}
        for outcome in (Verdict.WORSE, Verdict.BETTER):
            if outcome in found:
                return outcome
        return Verdict.NOT_DISTINGUISHABLE

    def reasons(self, reference: str) -> list[str]:
        """Each scored benchmark's verdict against `reference`, one line each, for a person."""
        return [
            f"{row.task}: {v.says(NAMED[reference])}"
            for row in self.scored_rows
            if (v := _against(row, reference)) is not None
        ]

    def worse_than_base(self, guards: bool) -> list[tuple[str, PairedVerdict]]:
        """The benchmarks (guards or scored ones) the candidate answers significantly worse than
        the base model, with that verdict."""
        return [
            (row.task, verdict)
            for row in self.rows
            if row.guard == guards
            and (verdict := row.vs_base) is not None
            and verdict.verdict == Verdict.WORSE
        ]

    def guard_falls(self) -> list[str]:
        """The guard benchmarks the candidate answers significantly worse than the base model
        (a capability the reward never scored, lost): one line each."""
        return [
            f"guard {task}: {verdict.says(NAMED[BASE])}"
            for task, verdict in self.worse_than_base(guards=True)
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "step_scores": {str(step): score for step, score in self.step_scores.items()},
            "rows": [row.as_dict() for row in self.rows],
            "alpha": self.alpha,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HeldoutReport:
        alpha = float(data["alpha"])
        return cls(
            step=int(data["step"]),
            step_scores={int(step): score for step, score in data["step_scores"].items()},
            rows=tuple(BenchmarkRow.from_dict(row, alpha) for row in data["rows"]),
            alpha=alpha,
        )


def report_of(found: Any) -> HeldoutReport | None:
    """The held-out report in an XCom's value (evaluate_heldout's result); None when the
    evaluation was off (the task skipped, nothing pushed)."""
    return HeldoutReport.from_dict(found) if isinstance(found, Mapping) else None


def _against(row: BenchmarkRow, reference: str) -> PairedVerdict | None:
    return row.vs_base if reference == BASE else row.vs_champion


def _accuracy(items: ItemResults) -> float:
    return sum(items.values()) / len(items)


def best_step(steps: Mapping[int, Mapping[str, ItemResults]], tasks: list[str]) -> int:
    """The step with the highest mean accuracy over `tasks`; ties to the later step."""
    return max(steps, key=lambda step: (mean_accuracy(steps[step], tasks), step))


def mean_accuracy(results: Mapping[str, ItemResults], tasks: list[str]) -> float:
    return sum(_accuracy(results[task]) for task in tasks) / len(tasks)


def heldout_report(
    steps: Mapping[int, Mapping[str, ItemResults]],
    references: Mapping[str, Mapping[str, ItemResults]],
    tasks: list[str],
    guards: list[str],
    alpha: float,
) -> HeldoutReport:
    """The report of per-item results: `steps` (step -> task -> items), `references` (BASE,
    CHAMPION when scored -> task -> items), the scored and guard task names. A reference or a
    step missing a task, or two models scored on different items, is refused (ValueError)."""
    if not steps:
        raise ValueError("no step was scored on the held-out benchmarks")
    for model, results in [*((step_label(s), r) for s, r in steps.items()), *references.items()]:
        if missing := [task for task in [*tasks, *guards] if task not in results]:
            raise ValueError(f"{model} has no results for {', '.join(missing)}")
    chosen = best_step(steps, tasks)
    candidate = steps[chosen]
    rows = []
    for task in [*tasks, *guards]:
        mine = candidate[task]

        def against(reference: str, task: str = task, mine: ItemResults = mine) -> Any:
            theirs = references.get(reference)
            if theirs is None:
                return None, None
            verdict = verdict_of_counts(PairedCounts.of_items(mine, theirs[task]), alpha)
            return _accuracy(theirs[task]), verdict

        base, vs_base = against(BASE)
        champion, vs_champion = against(CHAMPION)
        rows.append(
            BenchmarkRow(
                task,
                task in guards,
                len(mine),
                _accuracy(mine),
                base,
                champion,
                vs_base,
                vs_champion,
            )
        )
    scores = {step: mean_accuracy(results, tasks) for step, results in sorted(steps.items())}
    return HeldoutReport(chosen, scores, tuple(rows), alpha)
