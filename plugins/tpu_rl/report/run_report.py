"""The per-run report: run-report.json and run-report.md next to the exported model.

TPU-hours and cost come from tpu_rl.report.billing (the RL page uses the same computation): the
TPU nodes' life as the run's steps saw it, counted to this report (written at verify, before
cleanup: the export's scale-down tail and a static pool's remaining life come after it), and
the price of the run's capacity mode, both named in the report. Each training attempt (a resume
after capacity loss starts a new one) is listed with its TPU node-hours and the steps the next
attempt computed again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from tpu_rl import deployment
from tpu_rl.layout import RunLayout, split_gcs_uri
from tpu_rl.report.billing import CREATED_POOL, EXISTING_STATIC_POOL, TPU_NODES, tpu_billing
from tpu_rl.report.tpu_nodes import XCOM_KEY, Look, merged
from tpu_rl.rewards.resume import costed, steps_recomputed

log = logging.getLogger(__name__)

# Steps whose pods hold every host of the slice: conversion, the backend's life (start_backend
# creates it, the reward sensor deletes it the moment its wait ends), export.
TPU_STEPS = ("convert", "start_backend", "train", "wait_for_rewards", "export")
JSON_NAME = "run-report.json"
MARKDOWN_NAME = "run-report.md"


# Read from the task's own instance in a worker: the task SDK's RuntimeTaskInstance has
# get_task_breadcrumbs from task SDK 1.2 (Airflow 3.2; airflow/sdk/execution_time/task_runner.py),
# Airflow 3.1's has no way to read the other tasks' durations.
NO_DURATIONS = "step durations need Airflow 3.2 or later (task breadcrumbs)"


def reads_step_durations(ti: Any) -> bool:
    """Whether this Airflow lets a task read its run's step durations (task breadcrumbs)."""
    return hasattr(ti, "get_task_breadcrumbs")


def finished_step_durations(ti: Any) -> dict[str, float] | None:
    """Seconds per finished step of this task's run; None when this Airflow cannot tell."""
    if not reads_step_durations(ti):
        return None
    return step_durations(ti.get_task_breadcrumbs(ti.dag_id, ti.run_id))


def step_durations(breadcrumbs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds per finished step from Airflow's task breadcrumbs (task_id, duration, ...)."""
    return {
        str(b["task_id"]): float(b["duration"])
        for b in breadcrumbs
        if b.get("duration") is not None and b.get("map_index", -1) == -1
    }


def build_report(
    layout: RunLayout,
    rewards: Mapping[str, Any] | None,
    gate: Mapping[str, Any] | None,
    checkpoint_step: int | None,
    durations: Mapping[str, float] | None,
    run_seconds: float,
    looks: list[Look] | None = None,
) -> dict[str, Any]:
    """The report as a JSON-ready dict. The token is never a setting, so it cannot be here.

    `run_seconds` is the run's age when the report is written (at verify); `looks` the TPU
    nodes the run's steps saw (tpu_rl.report.tpu_nodes), counted up to now. Without `looks`
    the pool is counted by task times; without `durations` too (Airflow 3.1) a pool that
    scales from zero is counted from the run's start, and the rule says so.
    """
    settings = layout.settings
    now = time.time()
    task_seconds = {
        CREATED_POOL: run_seconds,
        EXISTING_STATIC_POOL: run_seconds,
        TPU_NODES: run_seconds
        if durations is None
        else sum(durations.get(step, 0.0) for step in TPU_STEPS),
    }
    tpu = tpu_billing(
        settings,
        layout.pool_hosts,
        looks or [],
        (now - run_seconds, now),
        task_seconds,
        "this report (verify), before cleanup",
    )
    if durations is None and tpu["rule"] == TPU_NODES:
        tpu["rule_text"] += f"; from the run's start: {NO_DURATIONS}"
    rewards = rewards or {}
    attempts = costed(rewards.get("attempts") or [])
    report = {
        "run_id": layout.run_id,
        "run": layout.slug,
        "export_uri": layout.export_dir,
        "checkpoint_step": checkpoint_step,
        "metrics": {"pre": rewards.get("pre"), "post": rewards.get("post")},
        "post_time": rewards.get("post_time"),
        "gate": dict(gate) if gate else None,
        "durations_seconds": None if durations is None else dict(durations),
        "tpu": {"tpu_type": settings.tpu_type, "slices": settings.cluster_nodepool_count, **tpu},
        "capacity": settings.capacity,
        "attempts": attempts,
        "steps_recomputed": steps_recomputed(attempts),
        "settings": settings.to_dict(),
    }
    report["summary"] = summary(report)
    return report


def summary(report: Mapping[str, Any]) -> str:
    """One paragraph: what was trained, how the reward moved, what it cost, where it is."""
    s, tpu, gate = report["settings"], report["tpu"], report["gate"] or {}
    reward = (
        f"mean_reward went from {gate['pre_mean_reward']:.4f} to {gate['post_mean_reward']:.4f} "
        f"(gain {gate['gain']:+.4f}, gate passed)"
        if gate
        else "no reward gate result"
    )
    resumes = max(0, len(report["attempts"]) - 1)
    resumed = (
        f" Training resumed {resumes} time(s) after losing TPU capacity and computed "
        f"{report['steps_recomputed']} step(s) again."
        if resumes
        else ""
    )
    cost, price = tpu["estimated_cost_usd"], tpu["price"] or {}
    cost_text = (
        f"about ${cost:,.2f} at {price['usd_per_chip_hour']:.2f} USD per chip-hour, the "
        f"{report['capacity']} price's {price['basis']} ({price['source']}, {price['read']})"
        if cost is not None
        else "no price known"
    )
    return (
        f"GRPO post-training of {s['hf_model_path']} ({s['model_name']}) for "
        f"{s['num_batches']} batches on {tpu['slices']} x {tpu['tpu_type']}: {reward}. "
        f"{tpu['hosts']} TPU hosts billed {tpu['pool_seconds'] / 3600:.2f} h, "
        f"{tpu['tpu_hours']:.2f} TPU-hours ({cost_text}; counted as {tpu['rule_text']}). "
        f"Checkpoint step {report['checkpoint_step']} exported to {report['export_uri']}."
        f"{resumed}"
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    """The same report for people."""
    tpu = report["tpu"]
    lines = [f"# Run report: {report['run_id']}", "", report["summary"], "", "## Metrics", ""]
    lines += ["| metric | pre | post |", "|---|---|---|"]
    pre, post = report["metrics"]["pre"] or {}, report["metrics"]["post"] or {}
    for name in sorted(set(pre) | set(post)):
        lines.append(f"| {name} | {pre.get(name, '')} | {post.get(name, '')} |")
    lines += ["", "## TPU", ""]
    lines += [f"- {key}: {value}" for key, value in tpu.items()]
    lines += ["", "## Training attempts", "", f"Capacity: {report['capacity']}.", ""]
    lines += [
        "| attempt | from step | reached step | outcome | TPU hosts | TPU node-hours "
        "| steps computed again |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {a['attempt']} | {a['resumed_from_step'] or 0} | {_blank(a['reached_step'])} "
        f"| {a['outcome']} | {a['tpu_hosts']} | {_blank(a['tpu_node_hours'], '.2f')} "
        f"| {_blank(a['steps_recomputed'])} |"
        for a in report["attempts"]
    ]
    lines += ["", "## Step durations", "", "| step | seconds |", "|---|---|"]
    durations = report["durations_seconds"]
    lines += [f"| {k} | {v:.1f} |" for k, v in (durations or {}).items()]
    lines += [] if durations is not None else ["", NO_DURATIONS]
    lines += ["", "## Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | `{json.dumps(v)}` |" for k, v in report["settings"].items()]
    return "\n".join(lines) + "\n"


def _blank(value: Any, spec: str = "") -> str:
    """A table cell: the value formatted, or empty when unknown."""
    return "" if value is None else format(value, spec)


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


def run_age_seconds(context: Any) -> float:
    """Seconds since the run started (the first task's start when the run has no start yet)."""
    started = getattr(context["dag_run"], "start_date", None) or context["ti"].start_date
    return max(0.0, (datetime.now(UTC) - started).total_seconds())


def run_looks(ti: Any, task_ids: list[str]) -> list[Look]:
    """The TPU nodes the run's steps saw (their `tpu_nodes` XComs; None for a task without)."""
    return merged(ti.xcom_pull(task_ids=task_ids, key=XCOM_KEY) or [])


def publish_run_report(layout: RunLayout, context: Any) -> str:
    """Build the report from this run's XComs and finished steps, upload it; its summary."""
    ti = context["ti"]
    report = build_report(
        layout,
        rewards=ti.xcom_pull(task_ids="wait_for_rewards"),
        gate=ti.xcom_pull(task_ids="gate"),
        checkpoint_step=ti.xcom_pull(task_ids="export", key="checkpoint_step"),
        durations=finished_step_durations(ti),
        run_seconds=run_age_seconds(context),
        looks=run_looks(ti, list(context["dag"].task_ids)),
    )
    for uri in write_report(report, deployment.gcp_conn_id()):
        log.info("Wrote %s", uri)
    log.info("Summary: %s", report["summary"])
    return report["summary"]
