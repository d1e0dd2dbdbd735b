"""The run's summary: what the RL page shows of a run (tpu_rl.ui.runs), kept up to date by the
run's tasks as they produce it, and read by the page in one query of one XCom key.

Each field has one writer (FIELDS) and lives in that task's XCom `summary`, an object of the
fields it wrote; a field any task may write of its own (PER_TASK: its failure, its looks at the
TPU nodes) is in each writer's. Why a part per task, not one object on one task: a task's XComs
are cleared each time it runs again (airflow-core api_fastapi/execution_api/routes/
task_instances.py, ti_run: "Send the keys to the SDK so that the client requests to clear those
XComs"; task-sdk execution_time/task_runner.py: "First, clear the xcom data sent from server";
3.1.7 and 3.3.2), so a task run again drops its own fields and writes them anew, and a clear of a
task and its downstream drops theirs too: the summary never shows a verdict of a try that was
cleared. One object written by every task would keep those, and tasks that run side by side (export
beside stop_backend, verify beside the cleanups, any task's failure callback) would overwrite
each other's fields, an XCom being set whole. The rungs are create_cluster's part, also written
by the steps that move the run to another rung (tpu_rl.cluster.rung_record, the same reason).

To show one more thing of a run (for example training progress while it runs): add its field
here with its writer, call write_summary where that task knows it, and give it a check in
tpu_rl.ui.checks.CHECKS.
"""

from __future__ import annotations

from typing import Any

from tpu_rl.names import Step

SUMMARY_KEY = "summary"  # the XCom key of each task's part

# Each field of the summary and the one task whose part holds it.
FIELDS: dict[str, str] = {
    "rungs": Step.CREATE_CLUSTER,  # the capacity ladder's tries (tpu_rl.cluster.rung_record)
    "rewards": Step.WAIT_FOR_REWARDS,  # pre/post, each step's evaluation, the attempts
    "attempts": Step.WAIT_FOR_REWARDS,  # the training attempts, at each resume and on failure
    "progress": Step.WAIT_FOR_REWARDS,  # step, pace, ETA and spend while training runs
    "anomaly": Step.WAIT_FOR_REWARDS,  # a fatal health rule: rule, step, evidence, kept checkpoint
    "gate": Step.GATE,  # the gate's figures and the checkpoint it judged
    "checkpoint_step": Step.EXPORT,  # the step export took
    "export_uri": Step.VERIFY,  # the verified export's gs:// folder
    "cost": Step.OUTCOME,  # the run's TPU cost as outcome counted it (tpu_rl.report.run_cost)
}
# Fields any task writes in its own part: why it failed (tpu_rl.report.notify), its looks at
# the TPU nodes (tpu_rl.report.tpu_nodes).
PER_TASK = ("failure", "looks")


def write_summary(ti: Any, task_id: str, **fields: Any) -> None:
    """Set `fields` in `task_id`'s part of the summary of the run of `ti` (the others it holds
    stay): through `ti` for its own task, else through the Task SDK's XCom (the providers'
    compat name for it, in 3.1 and 3.3), as tpu_rl.cluster.rung_record writes."""
    unknown = set(fields) - {f for f, writer in FIELDS.items() if writer == task_id} - {*PER_TASK}
    if unknown:
        raise ValueError(f"{task_id} writes no summary field {', '.join(sorted(unknown))}")
    part = ti.xcom_pull(task_ids=task_id, key=SUMMARY_KEY)
    value = {**(part if isinstance(part, dict) else {}), **fields}
    if task_id == ti.task_id:
        ti.xcom_push(key=SUMMARY_KEY, value=value)
        return
    from airflow.providers.common.compat.sdk import XCom

    XCom.set(SUMMARY_KEY, value, dag_id=ti.dag_id, task_id=task_id, run_id=ti.run_id)
