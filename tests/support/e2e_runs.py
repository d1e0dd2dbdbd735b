"""Helpers of the whole-run scenarios (tests/e2e): a run reported for `make e2e`, the reward
wait's attempts, nothing of a run left billing, a task's context without a run, a janitor run."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from sandbox.harness import SETTINGS, RunResult, Sandbox
from tpu_rl.names import JANITOR_DAG_ID


def reported_run(
    box: Sandbox, case: Any, conf: dict[str, Any], capfd: Any, report: list[dict]
) -> tuple[RunResult, str]:
    """Run `case` (its name, expected state, workloads) with `conf`: its result and the output
    (task logs); the entry for `make e2e`'s report, and the expected final state checked."""
    result = box.run(conf, case.workloads)
    output = capfd.readouterr()
    passed = result.state == case.expected
    report.append(
        {
            "name": case.name,
            "dag_run_state": result.state,
            "expected_state": case.expected,
            "passed": passed,
        }
    )
    log = output.out + output.err
    assert passed, result.why(log)
    return result, log


def attempts(result: RunResult) -> list[dict[str, Any]]:
    """The wait's attempts record: from its result, or (a failed wait) its 'attempts' XCom."""
    done = result.xcoms.get("wait_for_rewards.return_value") or {}
    return done.get("attempts") or result.xcoms.get("wait_for_rewards.attempts") or []


def no_tpu_left(result: RunResult) -> None:
    """Nothing of the run is left, and no TPU node bills any more (scaled away or destroyed)."""
    assert result.leftovers == [], result.leftovers
    tpu = [
        n["metadata"]["name"]
        for n in result.emu.list("nodes")
        if "google.com/tpu" in (n.get("status") or {}).get("allocatable", {})
    ]
    assert tpu == [], tpu


RUN_ID = "manual__2026-11-29T12:00:00+00:00"
CLUSTER = {
    "project_id": SETTINGS["project"],
    "location": SETTINGS["region"],
    "cluster_name": "gemma4-rl",
}
RECORD = {"deployment_id": "test-deployment"}  # validate's record of the run's identity


def context() -> dict:
    """A task's context in the sandbox's settings without a run: its task instance reads
    validate's record of the deployment."""
    ti = SimpleNamespace(
        dag_id="tpu_rl_post_training",
        task_id="t",
        run_id=RUN_ID,
        try_number=1,
        map_index=-1,
        xcom_pull=lambda task_ids, key="return_value", **kw: (
            RECORD if (task_ids, key) == ("validate", "return_value") else None
        ),
    )
    return {
        "params": dict(SETTINGS),
        "run_id": RUN_ID,
        "ti": ti,
        "dag": SimpleNamespace(dag_id="d"),
    }


def janitor_run(conf: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One janitor run: its state and the sweep's report (the report task's when it passed)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from sandbox.dagbags import DagBag

    dag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags[JANITOR_DAG_ID]
    dag_run = dag.test(run_conf=conf)
    with create_session() as session:
        xcoms = {
            x.task_id: x.value
            for x in session.query(XComModel).filter_by(
                dag_id=JANITOR_DAG_ID, run_id=dag_run.run_id, key="return_value"
            )
        }
    return getattr(dag_run.state, "value", dag_run.state), xcoms.get("report") or xcoms["sweep"]
