"""The held-out evaluation for a person and for the model registry: a Markdown table per
benchmark (the approval page, the run's report and note), short lines where a table does not fit,
and Vertex AI Model Registry labels of the candidate's scores and verdicts; no I/O."""

from __future__ import annotations

import hashlib
import re

from tpu_rl.heldout.paired import PairedVerdict, Verdict
from tpu_rl.heldout.report import BASE, CHAMPION, NAMED, BenchmarkRow, HeldoutReport

NOT_SCORED = "—"  # a reference the evaluation did not score (a deployment's first run: no champion)
VERDICT_WORDS = {
    Verdict.BETTER: "better",
    Verdict.WORSE: "worse",
    Verdict.NOT_DISTINGUISHABLE: "not distinguishable",
}
# Google Cloud's label rules, which Vertex AI's Model.labels follows (its description links them,
# https://goo.gl/xmQnxf: googleapiclient's discovery_cache/documents/aiplatform.v1.json,
# GoogleCloudAiplatformV1Model.labels): "Each resource can have multiple labels, up to a maximum
# of 64"; keys and values at most 63 characters of lowercase letters, digits, '_' and '-', a key
# starting with a letter (https://cloud.google.com/resource-manager/docs/creating-managing-labels
# #requirements).
LABELS_PER_RESOURCE = 64
LABEL_LENGTH = 63
KEY_PREFIX = "heldout_"
# a scored benchmark's label keys: heldout_<task><suffix>
TASK_SUFFIXES = ("_acc", f"_vs_{CHAMPION}", f"_vs_{BASE}")
NOT_LABEL = re.compile(r"[^a-z0-9_-]")
HASH_LENGTH = 6  # hex digits of a task name's hash that keep a shortened or changed key its own


def level(report: HeldoutReport) -> str:
    """The verdicts' confidence level: alpha 0.05 -> '95%'."""
    return f"{(1 - report.alpha) * 100:g}%"


def _against(row: BenchmarkRow, reference: str) -> PairedVerdict | None:
    return row.vs_base if reference == BASE else row.vs_champion


def _points(share: float) -> str:
    return f"{share * 100:+.1f}"


def _difference(verdict: PairedVerdict | None) -> str:
    """The accuracy difference in points with its interval: '+2.0 (-0.8 to +4.8)'."""
    if verdict is None:
        return NOT_SCORED
    low, high = verdict.interval
    return f"{_points(verdict.counts.difference)} ({_points(low)} to {_points(high)})"


def _verdict(verdict: PairedVerdict | None) -> str:
    return NOT_SCORED if verdict is None else VERDICT_WORDS[verdict.verdict]


def _accuracy(value: float | None) -> str:
    return NOT_SCORED if value is None else f"{value:.1%}"


def _benchmark(row: BenchmarkRow) -> str:
    return f"{row.task} (guard)" if row.guard else row.task


def benchmark_table(report: HeldoutReport) -> list[str]:
    """A Markdown table, a row per benchmark (guards marked): its items, the candidate's, the
    champion's and the base model's accuracy, the candidate's difference from each in points
    with its interval and its verdict; then the line that says how to read them
    (`reading_line`)."""
    points = f"points ({level(report)} interval)"
    lines = [
        f"| Benchmark | Items | Candidate (step {report.step}) | Champion | Base "
        f"| vs champion, {points} | verdict vs champion | vs base, {points} | verdict vs base |",
        "|---" * 9 + "|",
    ]
    lines += [
        f"| {_benchmark(row)} | {row.items:,} | {_accuracy(row.candidate)} "
        f"| {_accuracy(row.champion)} | {_accuracy(row.base)} "
        f"| {_difference(row.vs_champion)} | {_verdict(row.vs_champion)} "
        f"| {_difference(row.vs_base)} | {_verdict(row.vs_base)} |"
        for row in report.rows
    ]
    return [*lines, "", reading_line(report)]


def _smallest(row: BenchmarkRow) -> str:
    """The smallest gain the items could show against each reference scored:
    'gsm8k 2.1 points vs the champion, 3.0 points vs the base model'."""
    shown = []
    for reference in (CHAMPION, BASE):
        if (verdict := _against(row, reference)) is not None:
            gain = verdict.smallest_detectable_gain
            figure = "none possible" if gain is None else f"{gain * 100:.1f} points"
            shown.append(f"{figure} vs {NAMED[reference]}")
    return f"{row.task} {', '.join(shown) or NOT_SCORED}"


def reading_line(report: HeldoutReport) -> str:
    """How to read the table: the level, the smallest gain the items could show, and how many
    steps were scored (the best of several, chosen on these items, leans their way)."""
    scored = len(report.step_scores)
    if scored > 1:
        steps = ", ".join(str(step) for step in report.step_scores)
        chosen = (
            f"{scored} steps scored ({steps}); step {report.step} is the best of them on these "
            "same items, so its verdicts lean its way (heldout_top_k 1 avoids it)"
        )
    else:
        chosen = f"1 step scored (step {report.step}): not chosen on these items"
    gains = "; ".join(_smallest(row) for row in report.rows)
    return (
        f"Level {level(report)} (McNemar's exact test, p < {report.alpha:g}). The smallest gain "
        f"these items could show: {gains}. {chosen}."
    )


def verdict_line(report: HeldoutReport) -> str:
    """The candidate's overall verdict against the base model and the champion, and each guard
    that fell, in one line."""
    said = [
        f"{VERDICT_WORDS[verdict]} {'from' if verdict == Verdict.NOT_DISTINGUISHABLE else 'than'} "
        f"{NAMED[reference]}"
        for reference in (BASE, CHAMPION)
        if (verdict := report.verdict(reference)) is not None
    ]
    fell = [task for task, _ in report.worse_than_base(guards=True)]
    guards = f"; guard {', '.join(fell)} worse than the base model" if fell else ""
    return (
        f"Held-out ({level(report)} level): step {report.step} "
        f"{', '.join(said) or 'not compared'}{guards}"
    )


def benchmark_lines(report: HeldoutReport) -> list[str]:
    """One short line per benchmark, where a table does not fit (the run's note)."""

    def versus(row: BenchmarkRow, reference: str, value: float | None) -> str:
        verdict = _against(row, reference)
        if verdict is None or value is None:
            return f"{reference} {NOT_SCORED}"
        diff = _points(verdict.counts.difference)
        return f"{reference} {value:.1%} ({_verdict(verdict)}, {diff} points)"

    return [
        f"{_benchmark(row)}: {row.candidate:.1%} on {row.items:,} items; "
        f"{versus(row, CHAMPION, row.champion)}; {versus(row, BASE, row.base)}"
        for row in report.rows
    ]


def _label_task(task: str, room: int) -> str:
    """`task` as a part of a label key in at most `room` characters: lowercase, other characters
    '_'; a name changed or cut that way ends with its hash, so two never share a key."""
    plain = NOT_LABEL.sub("_", task.lower())
    if plain == task and len(plain) <= room:
        return plain
    digest = hashlib.sha256(task.encode()).hexdigest()[:HASH_LENGTH]
    return f"{plain[: room - HASH_LENGTH - 1]}-{digest}"


def heldout_labels(
    report: HeldoutReport, prefix: str = "", room: int = LABELS_PER_RESOURCE
) -> dict[str, str]:
    """Label keys (each after `prefix`) and values of the evaluation: `heldout_step`, and per
    scored benchmark `heldout_<task>_acc` (the candidate's accuracy in tenths of a point),
    `heldout_<task>_vs_champion` and `heldout_<task>_vs_base` (the verdicts, when that reference
    was scored). At most `room` labels (what the version's other labels leave of Vertex's 64): a
    benchmark's labels all or none, in the report's order."""
    key = f"{prefix}{KEY_PREFIX}"
    task_room = LABEL_LENGTH - len(key) - max(map(len, TASK_SUFFIXES))
    labels = {f"{key}step": str(report.step)} if room > 0 else {}
    for row in report.scored_rows:
        task = f"{key}{_label_task(row.task, task_room)}"
        mine = {f"{task}_acc": str(round(row.candidate * 1000))}
        for reference in (CHAMPION, BASE):
            if (verdict := _against(row, reference)) is not None:
                mine[f"{task}_vs_{reference}"] = str(verdict.verdict)
        if len(labels) + len(mine) > room:
            break
        labels |= mine
    return labels
