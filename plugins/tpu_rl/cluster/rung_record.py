"""The capacity ladder's one record: the rungs the run tried, oldest first (tpu_rl.cluster.climb's
tries), kept as create_cluster's XCom `rungs`. The run stands on the newest try's rung: the last
deploy that stood, or the rung it is leaving while the next ones are deployed. create_cluster
writes the record as it climbs, and so does the task that moves the run to another rung
(tpu_rl.operators.rung_move: convert, start_backend, wait_for_rewards); every task reads it for
its rung (tpu_rl.dag.runtime), and so do the run report and the RL page.

Why create_cluster's XCom, written by other tasks too: a task's XComs are cleared each time it
runs again, a retry or a clear, though not when it resumes from a deferral (airflow-core
api_fastapi/execution_api/routes/task_instances.py, ti_run: "Send the keys to the SDK so that the
client requests to clear those XComs", "do not clear it for deferral"; task-sdk
execution_time/task_runner.py: "First, clear the xcom data sent from server"; both in 3.1.7 and
3.3.2). A rung a mover kept as its own XCom was lost when that task ran again, and its retry ran
on the rung before while the TPU pool stood on the new one. create_cluster's XComs are cleared
only when it runs again itself, and then it deploys the ladder from its first rung and writes the
record anew. A task may write another task's XCom of its run through the Task SDK's XCom.set
(the Execution API allows it: routes/xcoms.py has_xcom_access returns True in 3.1.7; in 3.3.2 it
limits only multi-team deployments, to a task's own team). Not a GCS object under the run's
folder: every task would read GCS for its rung, and the RL page, which reads the runs' XComs in
one query (tpu_rl.ui.runs), could not show the tries.
"""

from __future__ import annotations

from typing import Any

from tpu_rl.names import Step
from tpu_rl.settings.rungs import LadderError, Rung, parse_ladder

RECORD_TASK = Step.CREATE_CLUSTER  # the task whose XCom holds the record
RUNGS_KEY = "rungs"  # its key


def recorded_tries(ti: Any) -> list[dict[str, Any]]:
    """The ladder's tries as recorded for the run of `ti` ([] before any, or without a ladder)."""
    value = ti.xcom_pull(task_ids=RECORD_TASK, key=RUNGS_KEY)
    return list(value) if isinstance(value, list) else []


def standing_rung(tries: list[dict[str, Any]]) -> Rung | None:
    """The rung the run stands on: the newest try's; None before any (or one not read)."""
    if not tries or not isinstance(tries[-1], dict) or not isinstance(tries[-1].get("rung"), str):
        return None
    try:
        found = parse_ladder(tries[-1]["rung"])
    except LadderError:
        return None
    return found[0] if len(found) == 1 else None


def recorded_rung(ti: Any) -> Rung | None:
    """The rung the run of `ti` stands on, from the record; None before any."""
    return standing_rung(recorded_tries(ti))


def write_tries(ti: Any, tries: list[dict[str, Any]]) -> None:
    """Record the ladder's tries for the run of `ti`, whichever task `ti` is: as create_cluster's
    XCom, through the configured XCom backend (the providers' compat name for the Task SDK's
    XCom, in 3.1 and 3.3); and in the run's summary, for the RL page (tpu_rl.run_summary)."""
    from airflow.providers.common.compat.sdk import XCom

    from tpu_rl.run_summary import write_summary

    XCom.set(RUNGS_KEY, list(tries), dag_id=ti.dag_id, task_id=RECORD_TASK, run_id=ti.run_id)
    write_summary(ti, RECORD_TASK, rungs=list(tries))
