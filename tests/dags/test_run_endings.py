"""How runs end, decided by Airflow's own scheduling code on the metadata DB: the teardowns run
after "mark failed", a half-deployed cluster is destroyed, and the run's state is the truth.

The scheduler loop is Airflow's (DagRun.update_state); the tasks it schedules are "run" here by
setting their end state, except the verdict task, whose real execute() decides.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest

from tests.conftest import PIPELINE, REPO
from tpu_rl.names import DAG_ID
from tpu_rl.operators.checks import RunOutcomeOperator

BEFORE_WAIT = PIPELINE[: PIPELINE.index("wait_for_rewards")]


@pytest.fixture(scope="module")
def serialized_dag(airflow_db):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dagbag import DBDagBag
    from airflow.utils.session import create_session

    from sandbox.dagbags import bundle_dag_bag, sync_bag_to_db

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        bag = bundle_dag_bag(REPO / "dags", bundle)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    with create_session() as session:
        return DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)


def start_run(run_id: str, states: dict[str, str]) -> None:
    """A running run whose tasks are in these states (the others not started)."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunTriggeredByType

    trigger_dag(DAG_ID, run_id=run_id, triggered_by=DagRunTriggeredByType.TEST)
    with create_session() as session:
        run = session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=run_id).one()
        run.state = "running"
        for task_id, state in states.items():
            session.query(TaskInstance).filter_by(
                dag_id=DAG_ID, run_id=run_id, task_id=task_id
            ).update({"state": state})


def task_states(run_id: str) -> dict[str, str | None]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=DAG_ID, run_id=run_id)
        return {ti.task_id: getattr(ti.state, "value", ti.state) for ti in tis}


def verdict(run_id: str) -> str:
    """The verdict task's real execute(), reading states as the Task SDK would."""

    def get_task_states(dag_id, task_ids, run_ids):
        states = task_states(run_id)
        return {run_id: {t: states.get(t) for t in task_ids}}

    op = RunOutcomeOperator(
        task_id="outcome", final_task="verify", watched=list(task_states(run_id))
    )
    context = {
        "ti": SimpleNamespace(get_task_states=get_task_states),
        "dag": SimpleNamespace(dag_id=DAG_ID),
        "run_id": run_id,
    }
    try:
        op.execute(context)
    except Exception:
        return "failed"
    return "success"


def schedule(
    dag, run_id: str, run_task: Callable[[str], str], passes: int = 30
) -> tuple[str, list[str]]:
    """Airflow's scheduling decisions, pass after pass; each schedulable task ends as
    `run_task` says. Returns the run's final state and the tasks that ran, in order."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    ran: list[str] = []
    for _ in range(passes):
        with create_session() as session:
            run = session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=run_id).one()
            run.dag = dag
            schedulable, _ = run.update_state(session=session, execute_callbacks=False)
            state = getattr(run.state, "value", run.state)
            if state in ("success", "failed"):
                return state, ran
            ids = [ti.task_id for ti in schedulable]
        for task_id in ids:
            end = verdict(run_id) if task_id == "outcome" else run_task(task_id)
            ran.append(task_id)
            with create_session() as session:
                session.query(TaskInstance).filter_by(
                    dag_id=DAG_ID, run_id=run_id, task_id=task_id
                ).update({"state": end})
    raise AssertionError(f"run {run_id} did not end: {task_states(run_id)}")


def test_a_run_marked_failed_while_the_wait_is_deferred_cleans_up_and_ends_failed(
    serialized_dag,
):
    from airflow.api.common.mark_tasks import set_dag_run_state_to_failed
    from airflow.utils.session import create_session

    run_id = "manual__marked-failed"
    start_run(run_id, {**dict.fromkeys(BEFORE_WAIT, "success"), "wait_for_rewards": "deferred"})
    with create_session() as session:  # what PATCH .../dagRuns/{id} {"state": "failed"} calls
        set_dag_run_state_to_failed(dag=serialized_dag, run_id=run_id, commit=True, session=session)
    states = task_states(run_id)
    assert states["wait_for_rewards"] == "failed"
    assert {states[t] for t in ("gate", "export", "verify", "stop_backend")} == {"skipped"}
    assert {states[t] for t in ("cleanup_kubernetes", "cleanup_cluster", "outcome")} == {None}

    final, ran = schedule(serialized_dag, run_id, lambda task_id: "success")
    assert ran == ["cleanup_kubernetes", "cleanup_cluster", "outcome"]
    assert final == "failed"
    assert task_states(run_id)["outcome"] == "failed"


def test_without_the_verdict_airflow_would_call_that_run_a_success(serialized_dag):
    """Why `outcome` exists: the leaves skipped by "mark failed" count as success."""
    from airflow.api.common.mark_tasks import set_dag_run_state_to_failed
    from airflow.utils.session import create_session

    run_id = "manual__marked-failed-no-verdict"
    start_run(run_id, {**dict.fromkeys(BEFORE_WAIT, "success"), "wait_for_rewards": "deferred"})
    with create_session() as session:
        set_dag_run_state_to_failed(dag=serialized_dag, run_id=run_id, commit=True, session=session)
    ran = []
    final, _ = schedule(serialized_dag, run_id, lambda task_id: ran.append(task_id) or "success")
    # the verdict really ran and failed; had it passed, the run would have succeeded:
    assert final == "failed"
    from airflow.models.taskinstance import TaskInstance

    with create_session() as session:
        session.query(TaskInstance).filter_by(
            dag_id=DAG_ID, run_id=run_id, task_id="outcome"
        ).update({"state": "success"})
        from airflow.models.dagrun import DagRun

        run = session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=run_id).one()
        run.state = "running"
        run.dag = serialized_dag
        run.update_state(session=session, execute_callbacks=False)
        assert getattr(run.state, "value", run.state) == "success"


def test_a_half_deployed_cluster_is_destroyed(serialized_dag):
    run_id = "manual__deploy-failed"
    start_run(
        run_id,
        {
            "validate": "success",
            "preflight": "success",
            "ensure_bucket": "success",
            "create_cluster": "failed",
        },
    )
    final, ran = schedule(serialized_dag, run_id, lambda task_id: "success")
    states = task_states(run_id)
    assert ran == ["cleanup_cluster", "outcome"]
    assert states["cleanup_kubernetes"] == "upstream_failed"  # no Kubernetes object was made
    assert final == "failed"


def test_a_run_whose_validate_failed_ends_at_once_with_nothing_to_clean(serialized_dag):
    run_id = "manual__invalid"
    start_run(run_id, {"validate": "failed"})
    # the failure runs down the whole chain, approve and promote included
    final, ran = schedule(serialized_dag, run_id, lambda task_id: "success", passes=9)
    states = task_states(run_id)
    assert ran == ["outcome"] and final == "failed"
    assert states["cleanup_kubernetes"] == states["cleanup_cluster"] == "upstream_failed"


def test_a_failed_training_fails_the_run_after_both_cleanups_succeeded(serialized_dag):
    run_id = "manual__training-failed"
    start_run(run_id, {**dict.fromkeys(BEFORE_WAIT, "success"), "wait_for_rewards": "failed"})
    final, ran = schedule(serialized_dag, run_id, lambda task_id: "success")
    # evaluate_heldout runs however stop_backend ended (all_done): without the wait's result
    # it skips; the gate after it is upstream_failed by the wait all the same
    assert ran == ["evaluate_heldout", "cleanup_kubernetes", "cleanup_cluster", "outcome"]
    assert final == "failed"
    states = task_states(run_id)
    assert states["cleanup_kubernetes"] == states["cleanup_cluster"] == "success"
    assert states["gate"] == states["export"] == "upstream_failed"


def test_a_run_that_did_everything_succeeds(serialized_dag):
    run_id = "manual__all-good"
    start_run(run_id, dict.fromkeys(BEFORE_WAIT, "success"))
    final, ran = schedule(serialized_dag, run_id, lambda task_id: "success")
    assert final == "success" and ran[-1] == "outcome"
    # the cleanups start once export ended, beside verify (which only reads the bucket); the
    # champion comparison follows verify; approval waits for it and for cleanup_cluster, and the
    # promotion follows approval. Which of cleanup_cluster and compare_champion the
    # scheduler starts first is its own choice (Airflow 3.1 and 3.3 differ)
    ending = {"verify", "cleanup_kubernetes", "cleanup_cluster", "compare_champion"}
    assert set(ran[-7:-3]) == ending
    assert ran.index("verify") < ran.index("compare_champion")
    assert ran[-3:-1] == ["approve", "promote"]
    assert ran.index("cleanup_kubernetes") < ran.index("cleanup_cluster")
