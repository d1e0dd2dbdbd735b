"""The per-run report: run-report.json and run-report.md next to the exported model.

`outcome` writes it once the export is verified and every cleanup is done, with the run's cost
as `outcome` counted it (tpu_rl.report.run_cost: the one figure the note and the RL page show
too), in chip-hours and host-hours, with the rule and the price it used. Each training attempt
(a resume after capacity loss starts a new one) is listed with its TPU node-hours and the steps
the next attempt computed again. Every evaluation (the base model's, each intermediate step's,
the final model's) is a row of a table, the exported step marked, with how it was chosen (the
gate's `checkpoint`: the choice export takes). With held-out evaluation, its table per benchmark
(tpu_rl.heldout.table). The Markdown is for people: rounded numbers
(rewards 3 decimals, hours and dollars 2), "n/a" for what is unknown, the export's Cloud
console link.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from tpu_rl import deployment
from tpu_rl.checkpoints import resume
from tpu_rl.checkpoints.resume import costed, steps_recomputed
from tpu_rl.cluster.rung_record import recorded_tries
from tpu_rl.heldout.report import HeldoutReport
from tpu_rl.heldout.table import benchmark_table, verdict_line
from tpu_rl.layout import RunLayout, console_url, split_gcs_uri
from tpu_rl.names import Step
from tpu_rl.report.billing import billed_text
from tpu_rl.report.run_cost import NO_DURATIONS, finished_step_durations
from tpu_rl.settings.choices import EVAL_METRICS
from tpu_rl.training_log.evaluations import step_table

log = logging.getLogger(__name__)

JSON_NAME = "run-report.json"
MARKDOWN_NAME = "run-report.md"
UNKNOWN = "n/a"  # a cell or value the run did not produce


def build_report(
    layout: RunLayout,
    rewards: Mapping[str, Any] | None,
    gate: Mapping[str, Any] | None,
    checkpoint_step: int | None,
    durations: Mapping[str, float] | None,
    tpu: Mapping[str, Any],
    champion: Mapping[str, Any] | None = None,
    rungs: list[dict[str, Any]] | None = None,
    heldout: HeldoutReport | None = None,
) -> dict[str, Any]:
    """The report as a JSON-ready dict. The token is never a setting, so it cannot be here.

    `tpu`: the run's cost as `outcome` counted it (tpu_rl.report.run_cost.count_tpu_cost);
    `champion`: compare_champion's result (tpu_rl.promotion.comparison), if it ran.
    `rungs`: the capacity ladder's tries (tpu_rl.cluster.climb), none without a ladder.
    `heldout`: evaluate_heldout's report, kept as its XCom (`heldout`) when the run had one.
    """
    settings = layout.settings
    rewards = rewards or {}
    attempts = costed(rewards.get("attempts") or [])
    choice = (gate or {}).get("checkpoint")
    report = {
        "run_id": layout.run_id,
        "run": layout.slug,
        "export_uri": layout.export_dir,
        "export_url": console_url(layout.export_dir),
        "checkpoint_step": checkpoint_step,
        "checkpoint_choice": choice,
        "metrics": {"pre": rewards.get("pre"), "post": rewards.get("post")},
        "evaluations": step_table(rewards, choice),
        "post_time": rewards.get("post_time"),
        "gate": dict(gate) if gate else None,
        "champion": dict(champion) if champion else None,
        "durations_seconds": None if durations is None else dict(durations),
        "tpu": dict(tpu),
        "capacity": settings.capacity,
        "attempts": attempts,
        "steps_recomputed": steps_recomputed(attempts),
        "capacity_rungs": list(rungs or []),
        "settings": settings.to_dict(),
    }
    if heldout is not None:
        report["heldout"] = heldout.as_dict()
    report["summary"] = summary(report)
    return report


def summary(report: Mapping[str, Any]) -> str:
    """One paragraph: what was trained, how the reward moved, what it cost, where it is."""
    s, gate = report["settings"], report["gate"] or {}
    reward = (
        f"mean_reward went from {gate['pre_mean_reward']:.3f} to {gate['post_mean_reward']:.3f} "
        f"(gain {gate['gain']:+.3f}, gate passed)"
        if gate.get("gain") is not None
        else "gate passed"
        if gate
        else "no reward gate result"
    )
    choice = report.get("checkpoint_choice") or {}
    why = f" ({choice['reason']})" if choice.get("reason") else ""
    resumes = max(0, len(report["attempts"]) - 1)
    unhealthy = sum(resume.HEALTH_RESUME in a for a in report["attempts"])
    causes = " and ".join(
        what
        for count, what in (
            (resumes - unhealthy, "losing TPU capacity"),
            (unhealthy, "a training health anomaly"),
        )
        if count
    )
    resumed = (
        f" Training resumed {resumes} time(s) after {causes} and computed "
        f"{report['steps_recomputed']} step(s) again."
        if resumes
        else ""
    )
    return (
        f"GRPO post-training of {s['hf_model_path']} ({s['model_name']}) for "
        f"{s['num_batches']} batches on {report['tpu']['slices']} x {report['tpu']['tpu_type']}: "
        f"{reward}. TPUs: {cost_text(report['tpu'], report['capacity'])}. Checkpoint step "
        f"{_cell(report['checkpoint_step'])}{why} exported to {report['export_uri']}.{resumed}"
        + (f" Champion: {report['champion']['reason']}." if report.get("champion") else "")
        + (f" {verdict_line(_heldout(report))}." if report.get("heldout") else "")
    )


def cost_text(tpu: Mapping[str, Any], capacity: str) -> str:
    """The cost in words: chip-hours, host-hours, dollars and the price it used."""
    hours = (
        f"{tpu['chip_hours']:.2f} chip-hours = {tpu['host_hours']:.2f} host-hours "
        f"({tpu['hosts']} hosts x {tpu['pool_seconds'] / 3600:.2f} h)"
    )
    cost, price = tpu["estimated_cost_usd"], tpu["price"]
    read = f", read {price['read']}" if price and price.get("read") else ""
    if billed := billed_text(tpu):
        return f"{hours}, {billed}{read}"
    if cost is None or not price:
        return f"{hours}, no price known for {tpu['tpu_type']}"
    return (
        f"{hours}, about ${cost:,.2f} at {price['usd_per_chip_hour']:g} USD per chip-hour, "
        f"the {capacity} price in {price['region']}, {price['basis']} ({price['source']}{read})"
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    """The same report for people: rounded numbers, no empty cell, the export's console link."""
    tpu = report["tpu"]
    lines = [f"# Run report: {report['run_id']}", "", report["summary"], "", "## Export", ""]
    lines += [
        f"- Files: `{report['export_uri']}` ([Cloud console]({report['export_url']}))",
        f"- Checkpoint step: {_cell(report['checkpoint_step'])}",
        "",
        "## Metrics",
        "",
        "| metric | pre | post |",
        "|---|---|---|",
    ]
    pre, post = report["metrics"]["pre"] or {}, report["metrics"]["post"] or {}
    for name in sorted(set(pre) | set(post)):
        digits = 3 if "reward" in name else 2
        lines.append(
            f"| {name} | {_number(pre.get(name), digits)} | {_number(post.get(name), digits)} |"
        )
    lines += evaluations_markdown(report["evaluations"])
    lines += champion_lines(report.get("champion"))
    lines += heldout_markdown(report)
    lines += ["", "## Cost", "", f"- TPUs: {cost_text(tpu, report['capacity'])}"]
    lines += [f"- Counted as: {tpu['rule_text']}", f"- TPU nodes seen: {tpu['nodes_seen']}"]
    lines += ["", "## Training attempts", "", f"Capacity: {report['capacity']}.", ""]
    lines += [
        "| attempt | on | from step | reached step | outcome | TPU hosts | TPU node-hours "
        "| steps computed again |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {a['attempt']} | {_cell(a.get('rung'))} | {a['resumed_from_step'] or 0} "
        f"| {_cell(a['reached_step'])} | {_cell(a['outcome'])} | {a['tpu_hosts']} "
        f"| {_number(a['tpu_node_hours'], 2)} | {_cell(a['steps_recomputed'])} |"
        for a in report["attempts"]
    ]
    lines += [
        f"- attempt {a['attempt']} ended: {a['why']}" for a in report["attempts"] if a.get("why")
    ]
    lines += _rung_lines(report.get("capacity_rungs") or [])
    lines += ["", "## Step durations", ""]
    durations = report["durations_seconds"]
    if durations is None:
        lines.append(NO_DURATIONS)
    else:
        lines += ["| step | seconds |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in durations.items()]
    lines += ["", "## Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {code_cell(json.dumps(v))} |" for k, v in report["settings"].items()]
    return "\n".join(lines) + "\n"


def evaluations_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The table of metric per evaluated step, the exported step in bold and marked."""
    if not rows:
        return []
    lines = ["", "## Evaluations", "", f"| step | {' | '.join(EVAL_METRICS)} |"]
    lines.append("|---" * (len(EVAL_METRICS) + 1) + "|")
    digits = {name: 3 if "reward" in name else 2 for name in EVAL_METRICS}
    for row in rows:
        step = _cell(row["step"])
        if row["label"] != "intermediate":
            step = f"{step} ({row['label']})"
        if row["chosen"]:
            step = f"**{step}** exported"
        cells = " | ".join(_number(row[name], digits[name]) for name in EVAL_METRICS)
        lines.append(f"| {step} | {cells} |")
    return lines


def champion_lines(comparison: Mapping[str, Any] | None) -> list[str]:
    """The champion comparison's section: its verdict, then each metric of both sides."""
    if not comparison:
        return []
    lines = ["", "## Champion", "", comparison["reason"]]
    theirs = comparison.get("champion_metrics")
    if theirs is None:
        return lines
    ours = comparison.get("challenger_metrics") or {}
    lines += ["", "| metric | champion | this run |", "|---|---|---|"]
    for name in sorted(set(theirs) | set(ours)):
        digits = 3 if "reward" in name else 2
        lines.append(
            f"| {name} | {_number(theirs.get(name), digits)} | {_number(ours.get(name), digits)} |"
        )
    return lines


def _heldout(report: Mapping[str, Any]) -> HeldoutReport:
    return HeldoutReport.from_dict(report["heldout"])


def heldout_markdown(report: Mapping[str, Any]) -> list[str]:
    """The held-out benchmarks' section: the table per benchmark and how to read it; nothing
    when the run had no held-out evaluation."""
    if not report.get("heldout"):
        return []
    return ["", "## Held-out benchmarks", "", *benchmark_table(_heldout(report))]


def _rung_lines(rungs: list[dict[str, Any]]) -> list[str]:
    """The capacity ladder's section: one line per rung tried, with GKE's reason."""
    if not rungs:
        return []
    lines = ["", "## Capacity ladder", ""]
    for i, t in enumerate(rungs, 1):
        why = f": {t['reason']}" if t.get("reason") else ""
        span = f"{t['started']} to {t['ended']}"
        lines.append(f"- rung {i} {t['rung']}: {t['outcome']} ({span}){why}")
    return lines


def code_cell(text: str) -> str:
    """Text as a table cell's code span whatever it holds: a longer fence, pipes escaped."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def _cell(value: Any) -> str:
    """A table cell: the value, or n/a when unknown."""
    return UNKNOWN if value is None or value == "" else str(value)


def _number(value: Any, digits: int) -> str:
    """A number rounded to `digits` decimals (an integer as it is), or n/a when unknown."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _cell(value)
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def write_report(report: Mapping[str, Any], gcp_conn_id: str) -> list[str]:
    """Upload run-report.json and run-report.md into the export folder; their URIs."""
    bucket, prefix = split_gcs_uri(report["export_uri"])
    hook = GCSHook(gcp_conn_id=gcp_conn_id)
    files = {
        JSON_NAME: (json.dumps(report, indent=2) + "\n", "application/json"),
        MARKDOWN_NAME: (render_markdown(report), "text/markdown"),
    }
    for name, (data, mime_type) in files.items():
        hook.upload(bucket, f"{prefix}{name}", data=data, mime_type=mime_type)
    return [f"gs://{bucket}/{prefix}{name}" for name in files]


def publish_run_report(
    layout: RunLayout,
    context: Any,
    tpu: Mapping[str, Any],
    heldout: HeldoutReport | None = None,
) -> str:
    """Build the report from this run's XComs, finished steps, counted cost and held-out
    evaluation (evaluate_heldout's report, read by its caller), upload it; the Markdown file's
    URI."""
    ti = context["ti"]
    report = build_report(
        layout,
        rewards=ti.xcom_pull(task_ids=Step.WAIT_FOR_REWARDS),
        gate=ti.xcom_pull(task_ids=Step.GATE),
        checkpoint_step=ti.xcom_pull(task_ids=Step.EXPORT, key="checkpoint_step"),
        durations=finished_step_durations(ti, context["dag"].task_ids),
        tpu=tpu,
        champion=ti.xcom_pull(task_ids=Step.COMPARE_CHAMPION),
        rungs=recorded_tries(ti) if layout.settings.capacity_ladder else None,
        heldout=heldout,
    )
    uris = write_report(report, deployment.gcp_conn_id())
    for uri in uris:
        log.info("Wrote %s", uri)
    log.info("Summary: %s", report["summary"])
    return uris[-1]
