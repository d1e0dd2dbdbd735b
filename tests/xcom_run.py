"""One DAG run's XComs in memory, as Airflow keeps them, for tests of tasks that read and write
them (the rung record, the run summary) without a metadata database."""

from __future__ import annotations

import json
from typing import Any

from tpu_rl.names import DAG_ID


class Run:
    """A run's XComs by (task, key). Any task may write any task's (the Task SDK's XCom.set:
    airflow-core execution_api routes/xcoms.py has_xcom_access). A task's XComs are cleared
    each time it runs again (a retry, a clear), not when it resumes from a deferral: airflow-core
    api_fastapi/execution_api/routes/task_instances.py, ti_run ("Send the keys to the SDK so that
    the client requests to clear those XComs"), and task-sdk execution_time/task_runner.py
    ("First, clear the xcom data sent from server")."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.xcoms: dict[tuple[str, str], Any] = {}

    def start(self, task_id: str) -> Task:
        """A try of `task_id` starts: its XComs of earlier tries are gone."""
        self.xcoms = {k: v for k, v in self.xcoms.items() if k[0] != task_id}
        return Task(self, task_id)

    def set(self, key: str, value: Any, *, dag_id: str, task_id: str, run_id: str, **_: Any):
        """The Task SDK's XCom.set, through JSON as the API stores it."""
        assert (dag_id, run_id) == (DAG_ID, self.run_id)
        self.xcoms[(task_id, key)] = json.loads(json.dumps(value))


class Task:
    """A task instance of the run as a task sees it (context["ti"])."""

    def __init__(self, run: Run, task_id: str) -> None:
        self.run, self.task_id, self.dag_id, self.run_id = run, task_id, DAG_ID, run.run_id

    def xcom_push(self, key: str, value: Any) -> None:
        self.run.set(key, value, dag_id=DAG_ID, task_id=self.task_id, run_id=self.run_id)

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        return self.run.xcoms.get((task_ids, key))
