"""Rows of the "RL post-training" page from Airflow's metadata DB: two queries for any count.

One query reads the DAG runs with the task instances the page needs joined in (the cluster's
creation and destruction, the TPU steps, the steps that delete the backend, the gate's state);
one reads the summaries of all those runs (tpu_rl.run_summary: one XCom key, a part per task
that wrote one) and their held-out reports (evaluate_heldout's return value, the row's
`heldout`: tpu_rl.ui.heldout_view; null when held-out evaluation was off). A run that ended
with no summary at all was made before the tasks kept one: its row shows what Airflow itself
knows (state, times, the gate's verdict, the hours its tasks' times give) and says "no run
summary" (`summary` false), not a second reading of the XComs older versions wrote: they stay
in Airflow's XCom view, and in the run's note and report where those were written. A run's
chip-hours, host-hours and cost are the figure its `outcome` counted (XCom `tpu_cost`,
tpu_rl.report.run_cost), the one its report and note show; a run whose `validate` failed has
none; only another run without it (one that timed out, whose teardowns were skipped, or one
from before that count) is counted here, by the same tpu_rl.report.billing, to the cluster's
destruction for a cluster the run made, else to the run's end; each training attempt shows its
TPU node-hours and the steps computed again after it. A value it cannot read (an XCom or conf
of the wrong shape, tpu_rl.ui.checks) is left out of its run's row, whose `error` says what it
was; the other rows and the answer are untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XCOM_RETURN_KEY, XComModel
from sqlalchemy import Text, and_, cast, or_, select
from sqlalchemy.orm import Session, aliased

from tpu_rl.checkpoints.resume import costed, steps_recomputed
from tpu_rl.heldout.report import report_of
from tpu_rl.layout import console_url, pool_hosts
from tpu_rl.names import DAG_ID, UI_PREFIX, Step
from tpu_rl.report.billing import CREATED_POOL, EXISTING_STATIC_POOL, TPU_NODES, tpu_billing
from tpu_rl.report.run_note import report_page
from tpu_rl.report.run_report import MARKDOWN_NAME
from tpu_rl.report.tpu_nodes import merged
from tpu_rl.run_summary import FIELDS, PER_TASK, SUMMARY_KEY
from tpu_rl.settings.cell_defaults import cell_defaults
from tpu_rl.settings.fields import SETTING_FIELDS, RunSettings
from tpu_rl.training_log.evaluations import step_table
from tpu_rl.ui import checks
from tpu_rl.ui.checks import Malformed
from tpu_rl.ui.heldout_view import heldout_view

if TYPE_CHECKING:
    from tpu_rl.watch.health import Anomaly

DEFAULTS = RunSettings()
VERDICTS = {"success": "passed", "failed": "stopped", "upstream_failed": "not reached"}
RAN = ("success", "failed")  # task states of a step that ran (not upstream_failed or skipped)
# Steps that delete the backend, first to last: the pool ended at the first of them that ran.
# The reward sensor deletes it when its wait ends; cleanup_kubernetes when the wait never ran.
POOL_ENDERS = (Step.WAIT_FOR_REWARDS, Step.STOP_BACKEND, Step.CLEANUP_KUBERNETES)
# Steps whose pods hold every host of the slice besides the backend's: conversion and export.
HOST_STEPS = (Step.CONVERT, Step.EXPORT)
# the task instances joined into each row: whether the settings were valid, the cluster's life,
# the TPU steps, the gate's verdict
JOINED_TASKS = (
    Step.VALIDATE,
    Step.CREATE_CLUSTER,
    Step.CLEANUP_CLUSTER,
    Step.START_BACKEND,
    *POOL_ENDERS,
    *HOST_STEPS,
    Step.GATE,
)


def _ti(task_id: str) -> tuple[Any, Any]:
    """An alias of TaskInstance for one task of the run, and its join condition."""
    ti = aliased(TaskInstance, name=task_id)
    on = and_(
        ti.dag_id == DagRun.dag_id,
        ti.run_id == DagRun.run_id,
        ti.task_id == task_id,
        ti.map_index == -1,
    )
    return ti, on


def _columns(task_id: str, ti: Any) -> list[Any]:
    """The joined task instance's state, start and end, as `<task_id>_state`, `_start`, `_end`."""
    return [
        ti.state.label(f"{task_id}_state"),
        ti.start_date.label(f"{task_id}_start"),
        ti.end_date.label(f"{task_id}_end"),
    ]


def fetch_runs(session: Session, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` runs of the DAG, newest first, as the page's rows."""
    joined = {task_id: _ti(task_id) for task_id in JOINED_TASKS}
    query = select(
        DagRun.id,
        DagRun.run_id,
        DagRun.state,
        DagRun.run_after,
        DagRun.start_date,
        DagRun.end_date,
        cast(DagRun.conf, Text).label("conf"),  # parsed per run: see checks.parsed
        *(column for task_id, (ti, _) in joined.items() for column in _columns(task_id, ti)),
    )
    for ti, on in joined.values():
        query = query.outerjoin(ti, on)
    runs = session.execute(
        query.where(DagRun.dag_id == DAG_ID)
        .order_by(DagRun.run_after.desc(), DagRun.id.desc())
        .limit(limit)
    ).all()
    values, heldout = _xcoms(session, [r.id for r in runs])
    return [_row(r, values.get(r.id), heldout.get(r.id)) for r in runs]


def _xcoms(
    session: Session, run_ids: list[int]
) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """In one query: each run's summary (_summaries) and the JSON text of its held-out report
    (evaluate_heldout's return value: pushed once it succeeded, cleared when it runs again;
    none when held-out evaluation is off, the step skipped). Runs without either are absent."""
    if not run_ids:
        return {}, {}
    rows = session.execute(
        select(
            XComModel.dag_run_id,
            XComModel.task_id,
            XComModel.key,
            cast(XComModel.value, Text).label("value"),  # parsed per part: see checks.parsed
        )
        .where(
            XComModel.dag_run_id.in_(run_ids),
            or_(
                XComModel.key == SUMMARY_KEY,
                and_(
                    XComModel.task_id == Step.EVALUATE_HELDOUT,
                    XComModel.key == XCOM_RETURN_KEY,
                ),
            ),
            XComModel.map_index == -1,
        )
        .order_by(XComModel.timestamp)
    )
    parts, heldout = [], {}
    for row in rows:
        if row.key == SUMMARY_KEY:
            parts.append(row)
        else:
            heldout[row.dag_run_id] = row.value
    return _summaries(parts), heldout


def _summaries(parts: list[Any]) -> dict[int, dict[str, Any]]:
    """Each run's summary from its tasks' parts (oldest first), merged: a field from the task
    that writes it (tpu_rl.run_summary.FIELDS), the first failure by time, every task's looks;
    `errors` says what could not be read. Runs without a part are absent."""
    found: dict[int, dict[str, Any]] = {}
    for row in parts:
        values = found.setdefault(row.dag_run_id, {})
        try:
            part = checks.summary_part(checks.parsed(row.value))
        except Malformed as error:  # the row shows the rest, and says what it could not read
            values.setdefault("errors", []).append(f"summary of {row.task_id}: {error}")
            continue
        for name, value in part.items():
            if FIELDS.get(name) != row.task_id and name not in PER_TASK:
                continue  # not this task's to write, or a field this version does not show
            try:
                checked = checks.CHECKS[name](value)
            except Malformed as error:
                values.setdefault("errors", []).append(f"{row.task_id}'s {name}: {error}")
                continue
            if name == "looks":
                values.setdefault("looks", []).append(checked)
            elif name == "failure":  # the first one wins
                values.setdefault("failure", {"task_id": row.task_id, "message": checked})
            else:
                values[name] = checked
    return found


def _report_uri(summary: Mapping[str, Any]) -> str | None:
    """Where the run's report is: outcome writes it beside a verified export when it counts
    the cost (RunOutcomeOperator.report_results)."""
    export_uri = summary.get("export_uri")
    return export_uri + MARKDOWN_NAME if export_uri and summary.get("cost") else None


def report_uri(session: Session, run_id: str) -> str:
    """The gs:// URI of the run's report; LookupError saying why when it has none."""
    dag_run_id = session.scalar(
        select(DagRun.id).where(DagRun.dag_id == DAG_ID, DagRun.run_id == run_id)
    )
    if dag_run_id is None:
        raise LookupError(f"{DAG_ID} has no run {run_id!r}.")
    summary = _xcoms(session, [dag_run_id])[0].get(dag_run_id, {})
    if uri := _report_uri(summary):
        return uri
    why = "outcome has not written it yet" if summary.get("export_uri") else "no verified export"
    raise LookupError(
        f"Run {run_id!r} has no report ({why}): outcome writes it beside a verified export."
    )


def _settings(conf_json: str | None) -> RunSettings:
    """The run's settings as far as its conf tells (defaults for the rest), unvalidated."""
    conf = checks.conf(checks.parsed(conf_json))
    return RunSettings(**{k: v for k, v in conf.items() if k in SETTING_FIELDS})


def _backend_seconds(run: Any) -> float:
    """How long the backend's TPU pool existed: start_backend's start to the first deleter."""
    if run.start_backend_state not in RAN:
        return 0.0
    ends = (getattr(run, f"{t}_end") for t in POOL_ENDERS if getattr(run, f"{t}_state") in RAN)
    return _seconds(run.start_backend_start, next(ends, None)) or 0.0


def _task_seconds(run: Any) -> dict[str, float]:
    """The pool's seconds under each task-time rule (tpu_rl.report.billing), for a run whose
    steps recorded no TPU nodes."""
    created = (
        _seconds(run.create_cluster_start, run.cleanup_cluster_end or run.end_date)
        if run.create_cluster_start
        else 0.0
    )
    steps = (
        _seconds(getattr(run, f"{t}_start"), getattr(run, f"{t}_end"))
        for t in HOST_STEPS
        if getattr(run, f"{t}_state") in RAN
    )
    return {
        CREATED_POOL: created or 0.0,
        EXISTING_STATIC_POOL: _seconds(run.start_date, run.end_date) or 0.0,
        TPU_NODES: _backend_seconds(run) + sum(s or 0.0 for s in steps),
    }


def _until(run: Any) -> tuple[float, str]:
    """Where the count ends: the cluster's destruction (a cluster the run made), else the run's
    end."""
    if run.cleanup_cluster_state in RAN and run.cleanup_cluster_end and run.create_cluster_start:
        return run.cleanup_cluster_end.timestamp(), "cleanup_cluster's end"
    return run.end_date.timestamp(), "the run's end"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start and end else None


def _gain(pre: Mapping[str, Any], post: Mapping[str, Any]) -> float | None:
    """post - pre mean_reward: the gate's figure when it passed, else from the rewards."""
    if pre.get("mean_reward") is None or post.get("mean_reward") is None:
        return None
    return float(post["mean_reward"]) - float(pre["mean_reward"])


def row_reason(error: Exception) -> str:
    """An exception as one line for the row's `error` (never a traceback)."""
    return str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"


# what building a part of a row from values of unexpected shape raises
ROW_ERRORS = (ValueError, KeyError, TypeError, AttributeError)


def _tpu(run: Any, x: Mapping[str, Any]) -> dict[str, Any]:
    """The run's hours and cost (tpu_rl.report.billing), from its settings and looks."""
    settings = _settings(run.conf)
    until, until_text = _until(run)
    return tpu_billing(
        settings,
        pool_hosts(settings),
        merged(x.get("looks") or []),
        (run.start_date.timestamp(), until),
        _task_seconds(run),
        until_text,
    )


def _progress(run: Any, x: Mapping[str, Any], rewards: Mapping[str, Any]) -> str | None:
    """A running run's training progress in a line; None once it has rewards or has ended."""
    from tpu_rl.watch.progress import reported_text

    figures = x.get("progress")
    if not figures or run.end_date is not None or rewards.get("post") or x.get("anomaly"):
        return None
    return reported_text(figures)


def _health(found: Anomaly | None) -> str | None:
    """What the training watchdog found (the wait's XCom `anomaly`: the watchdog's, with the
    healthy checkpoint and the health_action), the checkpoint it kept and what to do next, in a
    line."""
    from tpu_rl.watch.health import describe, next_step

    if not found:
        return None
    uri = found.get("healthy_checkpoint")
    kept = f"; kept step {found.get('healthy_step')}: {uri}" if uri else "; no healthy checkpoint"
    action = f" (health_action={found.get('action')})"
    return f"{describe(found)}{kept}{action}. {next_step(found)}"


def _setup(run: Any) -> dict[str, Any]:
    """What the run trains on, for its columns and the compare view: model, TPU, slices,
    capacity, and its settings that differ from the defaults (as its conf gave them)."""
    given = _given(run.conf)
    settings = filled_settings(given)
    return {
        "model": settings.model_name,
        "tpu_type": settings.tpu_type,
        "slices": _slices(settings),
        "capacity": str(settings.capacity),
        "settings": {k: v for k, v in given.items() if v != getattr(DEFAULTS, k)},
    }


def _given(conf_json: str | None) -> dict[str, Any]:
    """The settings the run's conf gives (null: not given, as the form's emptied fields)."""
    conf = checks.conf(checks.parsed(conf_json))
    return {k: v for k, v in conf.items() if k in SETTING_FIELDS and v is not None}


def filled_settings(given: Mapping[str, Any]) -> RunSettings:
    """The run's settings as validate reads them, unvalidated: those it does not give from its
    catalogue cell (tpu_rl.settings.cell_defaults), else the defaults."""
    filled = {k: v for k, v in cell_defaults(given).items() if k in SETTING_FIELDS}
    return RunSettings(**given, **filled)


def run_settings(conf_json: str | None) -> RunSettings:
    """The settings of a run's conf (filled_settings)."""
    return filled_settings(_given(conf_json))


def _slices(settings: RunSettings) -> str:
    """The slices and how they split: "1", or "4 (2 train + 2 sample)"."""
    count, trainer = settings.cluster_nodepool_count, settings.num_trainer_slices
    split = f" ({trainer} train + {settings.num_samplers_slices} sample)" if trainer != -1 else ""
    return f"{count}{split}"


def _anomaly_mark(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Where the page's curves mark the watchdog's anomaly: its rule and steps."""
    return {k: found.get(k) for k in ("rule", "step", "anomaly_step")} if found else None


def _heldout(value: str | None) -> dict[str, Any] | None:
    """The run's held-out evaluation for the page (tpu_rl.ui.heldout_view); None without one."""
    report = report_of(checks.heldout_report(checks.parsed(value)))
    return heldout_view(report) if report else None


def _row(run: Any, summary: Mapping[str, Any] | None, heldout: str | None = None) -> dict[str, Any]:
    x = summary or {}
    errors = list(x.get("errors", []))
    try:
        heldout_shown = _heldout(heldout)
    except ROW_ERRORS as error:
        errors.append(f"held-out evaluation not shown: {row_reason(error)}")
        heldout_shown = None
    rewards = x.get("rewards") or {}
    pre, post = rewards.get("pre") or {}, rewards.get("post") or {}
    gate = x.get("gate") or {}
    tpu: dict[str, Any] = x.get("cost") or {}
    # while the run goes on, its nodes may still bill; a run whose settings never validated
    # has no cost, as its outcome and note say (RunOutcomeOperator.report_results)
    if not tpu and run.end_date is not None and run.validate_state != "failed":
        try:
            tpu = _tpu(run, x)
        except ROW_ERRORS as error:  # a conf validation refuses, or the conf is no object
            errors.append(f"cost not counted: {row_reason(error)}")
    try:
        setup = _setup(run)
    except ROW_ERRORS as error:  # a conf of the wrong shape: its row says so, once
        if not any(row_reason(error) in said for said in errors):
            errors.append(f"settings not shown: {row_reason(error)}")
        setup = {"model": None, "tpu_type": None, "slices": None, "capacity": None, "settings": {}}
    try:
        attempts = costed(rewards.get("attempts") or x.get("attempts") or [])
    except ROW_ERRORS as error:
        errors.append(f"attempts not shown: {row_reason(error)}")
        attempts = []
    export_uri = x.get("export_uri")
    run_path = f"dags/{DAG_ID}/runs/{quote(run.run_id, safe='')}"
    return {
        "run_id": run.run_id,
        "state": run.state,
        "run_after": run.run_after.isoformat() if run.run_after else None,
        "duration_seconds": _seconds(run.start_date, run.end_date),
        "pre_mean_reward": pre.get("mean_reward"),
        "post_mean_reward": post.get("mean_reward"),
        "pre_accuracy": pre.get("accuracy"),
        "post_accuracy": post.get("accuracy"),
        "gain": gate.get("gain", _gain(pre, post)),
        "gate": VERDICTS.get(run.gate_state or "", "pending" if run.end_date is None else "-"),
        "failure": x.get("failure") if run.state == "failed" else None,
        "chip_hours": tpu.get("chip_hours"),
        "host_hours": tpu.get("host_hours"),
        "tpu_hours_rule": tpu.get("rule"),
        "tpu_hours_rule_text": tpu.get("rule_text"),
        "estimated_cost_usd": tpu.get("estimated_cost_usd"),
        "price": tpu.get("price"),
        "attempts": attempts,
        "steps_recomputed": steps_recomputed(attempts),
        "rungs": x.get("rungs") or [],
        "checkpoint_step": x.get("checkpoint_step"),
        # each evaluated step's metrics, the exported one marked (the gate's choice: export's)
        "evaluations": step_table(rewards, gate.get("checkpoint")),
        # evaluate_heldout's scores per step, best step and benchmark rows; None when it was off
        "heldout": heldout_shown,
        "export_uri": export_uri,
        "export_url": console_url(export_uri) if export_uri else None,
        # the run's report page (tpu_rl.ui.app) once outcome wrote the report, relative to the
        # page (UI_PREFIX/) as the page's own api/runs
        "report_url": (
            report_page(run.run_id).removeprefix(f"{UI_PREFIX}/") if _report_uri(x) else None
        ),
        "billed_as": tpu.get("billed_as"),
        "run_url": run_path,
        "logs_url": f"{run_path}/tasks/wait_for_rewards",
        # while training runs: its step, ETA and spend (the reward wait's last report)
        "progress": _progress(run, x, rewards),
        # a fatal training health rule: the rule, the step, the evidence, the checkpoint kept
        "health": _health(x.get("anomaly")),
        "anomaly": _anomaly_mark(x.get("anomaly")),  # marked on the curves (tpu_rl.ui.curves)
        **setup,
        "error": "; ".join(errors) or None,  # what of the run could not be read, or None
        # False: the run ended without a summary (made before its tasks kept one)
        "summary": summary is not None or run.end_date is None,
    }
