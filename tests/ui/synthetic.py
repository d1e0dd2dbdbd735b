"""Synthetic runs of tpu_rl_post_training in Airflow's DB: DagRuns, task instances, and the
parts of their summaries (tpu_rl.run_summary) the page reads.

Bulk inserts with the shapes the real tasks write: every 7th run stopped by the gate, the
newest one still running. A finished run's timeline, from its start: create_cluster 0-15 min,
convert 15-20 min, start_backend at 20 min, the reward wait 2 h, export 10 min, cleanup_cluster
ending at 4 h, the run's end.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, text

from tpu_rl.names import DAG_ID
from tpu_rl.run_summary import SUMMARY_KEY

START = datetime(2026, 1, 5, 6, 0, tzinfo=UTC)
POOL_SECONDS = 2 * 3600.0
RUN_HOURS = 4
CONVERT_SECONDS = 5 * 60.0
EXPORT_SECONDS = 10 * 60.0


def rewards(i: int) -> tuple[float, float]:
    pre = 0.08 + 0.01 * math.sin(i / 5)
    post = pre - 0.02 if i % 7 == 3 else pre + 0.03 + 0.01 * math.cos(i / 3)
    return round(pre, 4), round(post, 4)


def clear_runs() -> None:
    """Remove every run of the DAG (their task instances and XComs go with them)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        session.execute(delete(XComModel).where(XComModel.dag_id == DAG_ID))
        session.execute(delete(TaskInstance).where(TaskInstance.dag_id == DAG_ID))
        session.execute(delete(DagRun).where(DagRun.dag_id == DAG_ID))


def add_runs(count: int) -> list[str]:
    """Insert `count` runs (oldest first, a week apart); their run ids."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    clear_runs()
    with create_session() as session:
        runs, tis, plan = [], [], {}
        for i in range(count):
            run_id = f"scheduled__synthetic-{i:04d}"
            begin = START + timedelta(days=7 * i)
            running = i == count - 1
            stopped = rewards(i)[1] < rewards(i)[0]
            runs.append(
                {
                    "dag_id": DAG_ID,
                    "run_id": run_id,
                    "run_type": "scheduled",
                    "state": "running" if running else "failed" if stopped else "success",
                    "run_after": begin,
                    "start_date": begin,
                    "end_date": None if running else begin + timedelta(hours=RUN_HOURS),
                    "conf": {"cluster_nodepool_count": 1 + i % 2},
                    "clear_number": 0,
                }
            )
            pool_start = begin + timedelta(minutes=20)
            pool_end = pool_start + timedelta(seconds=POOL_SECONDS)
            convert_start = pool_start - timedelta(seconds=CONVERT_SECONDS)
            tis.append(ti_row(run_id, "create_cluster", "success", begin, convert_start))
            tis.append(ti_row(run_id, "convert", "success", convert_start, pool_start))
            tis.append(ti_row(run_id, "start_backend", "success", pool_start, pool_start))
            if running:
                tis.append(ti_row(run_id, "wait_for_rewards", "deferred", pool_start))
            else:  # the sensor deletes the backend as its wait ends; stop_backend finds it gone
                tis.append(ti_row(run_id, "wait_for_rewards", "success", pool_start, pool_end))
                tis.append(ti_row(run_id, "stop_backend", "success", pool_end, pool_end))
                tis.append(ti_row(run_id, "gate", "failed" if stopped else "success", pool_end))
            if not running and not stopped:
                export_end = pool_end + timedelta(seconds=EXPORT_SECONDS)
                tis.append(ti_row(run_id, "export", "success", pool_end, export_end))
                tis.append(ti_row(run_id, "verify", "success", export_end))
            if not running:
                end = begin + timedelta(hours=RUN_HOURS)
                tis.append(ti_row(run_id, "cleanup_cluster", "success", end, end))
            plan[run_id] = (i, running, stopped)
        session.execute(insert(DagRun.__table__), runs)
        session.execute(insert(TaskInstance.__table__), tis)
        ids = dict(
            session.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id == DAG_ID)).all()
        )
        xcoms = [
            x
            for run_id, (i, running, stopped) in plan.items()
            for x in _summaries(ids[run_id], run_id, i, running, stopped)
        ]
        if xcoms:  # a lone running run has none
            session.execute(insert(XComModel.__table__), xcoms)
    return list(plan)


def _metrics(mean_reward: float, corr: int) -> dict[str, float]:
    return {"corr": corr, "total": 64, "accuracy": corr / 64 * 100, "mean_reward": mean_reward}


def ti_row(
    run_id: str, task_id: str, state: str, start: datetime, end: datetime | None = None
) -> dict[str, Any]:
    from airflow.models.taskinstance import uuid7

    return {
        "id": uuid7(),
        "dag_id": DAG_ID,
        "run_id": run_id,
        "task_id": task_id,
        "map_index": -1,
        "state": state,
        "start_date": start,
        "end_date": end,
        "pool": "default_pool",
        "pool_slots": 1,
        "try_number": 1,
    }


def _summaries(dag_run_id: int, run_id: str, i: int, running: bool, stopped: bool) -> list[dict]:
    """The parts of the run's summary its tasks wrote, by task."""
    if running:
        return []
    pre, post = rewards(i)
    parts: dict[str, dict[str, Any]] = {
        "wait_for_rewards": {
            "rewards": {"pre": _metrics(pre, 8), "post": _metrics(post, 6 if stopped else 12)}
        }
    }
    if stopped:  # what the failure callback records
        parts["gate"] = {
            "failure": f"reward gate: post-training mean_reward={post:.4f} is below pre-training "
            f"mean_reward={pre:.4f} + min_reward_gain=0; not exporting"
        }
    else:
        export = f"gs://bucket/gemma4-26b/hf-trained/rl-{i:010d}/"
        parts["gate"] = {"gate": {"pre_mean_reward": pre, "post_mean_reward": post,
                                  "gain": post - pre}}  # fmt: skip
        parts["export"] = {"checkpoint_step": 50}
        parts["verify"] = {"export_uri": export}
    return [_summary_row(dag_run_id, run_id, task_id, part) for task_id, part in parts.items()]


def _summary_row(dag_run_id: int, run_id: str, task_id: str, part: Any) -> dict[str, Any]:
    return {"dag_run_id": dag_run_id, "dag_id": DAG_ID, "run_id": run_id, "task_id": task_id,
            "key": SUMMARY_KEY, "map_index": -1, "value": part, "timestamp": START}  # fmt: skip


class RawText(str):
    """Text stored in the JSON column as it is: what no JSON type would write (SQLite's JSON
    column is TEXT and takes it; a driver's JSON type fails the whole query reading it)."""


def put_summary(session: Any, run_id: str, task_id: str, **fields: Any) -> None:
    """Set `fields` in `task_id`'s part of the run's summary, as tpu_rl.run_summary's
    write_summary does."""
    from airflow.models.xcom import XComModel

    _, where = _part_of(session, run_id, task_id)
    part = session.scalar(select(XComModel.value).where(*where))
    put_part(session, run_id, task_id, {**(part if isinstance(part, dict) else {}), **fields})


def put_part(session: Any, run_id: str, task_id: str, part: Any) -> None:
    """Store `part` as `task_id`'s whole part of the run's summary (RawText: as that text)."""
    from airflow.models.xcom import XComModel

    dag_run_id, where = _part_of(session, run_id, task_id)
    session.execute(delete(XComModel).where(*where))
    value = None if isinstance(part, RawText) else part
    session.execute(insert(XComModel.__table__), [_summary_row(dag_run_id, run_id, task_id, value)])
    if isinstance(part, RawText):
        session.execute(
            text("UPDATE xcom SET value = :v WHERE dag_run_id = :r AND task_id = :t AND key = :k"),
            {"v": str(part), "r": dag_run_id, "t": task_id, "k": SUMMARY_KEY},
        )


def _part_of(session: Any, run_id: str, task_id: str) -> tuple[int, tuple[Any, ...]]:
    """The run's id in the DB, and the condition that finds the task's part."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel

    dag_run_id = session.scalar(select(DagRun.id).where(DagRun.run_id == run_id))
    where = (
        XComModel.dag_run_id == dag_run_id,
        XComModel.task_id == task_id,
        XComModel.key == SUMMARY_KEY,
    )
    return dag_run_id, where


def drop_summary(session: Any, run_id: str) -> None:
    """Remove the run's summary: a run made before its tasks kept one."""
    from airflow.models.xcom import XComModel

    session.execute(
        delete(XComModel).where(XComModel.run_id == run_id, XComModel.key == SUMMARY_KEY)
    )
