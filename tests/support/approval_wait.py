"""An approval in a dag.test() run: the scheduler's sweep that answers one nobody answered, and
the request's body as Airflow's Required Actions page shows it."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace

from sqlalchemy import select


@contextlib.contextmanager
def scheduler_timeout_sweep() -> Iterator[None]:
    """The scheduler's AWAITING_INPUT sweep, every second, beside dag.test(): Airflow 3.3 answers
    an approval nobody answered there (SchedulerJobRunner.check_awaiting_input_timeouts, which
    uses only the runner's log; dag.test() leaves AWAITING_INPUT tasks parked, waiting for an
    answer from outside: airflow/sdk/definitions/dag.py DAG.test)."""
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.utils.session import create_session

    stop = threading.Event()
    runner = SimpleNamespace(log=logging.getLogger("scheduler-sweep"))

    def sweep() -> None:
        while not stop.wait(1.0):
            with create_session() as session:
                SchedulerJobRunner.check_awaiting_input_timeouts(runner, session=session)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def approval_body(run_id: str) -> str:
    """The approval request's body, as Airflow's Required Actions page shows it."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        query = (
            select(HITLDetail.body)
            .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
            .where(TaskInstance.run_id == run_id, TaskInstance.task_id == "approve")
        )
        return session.scalars(query).one()
