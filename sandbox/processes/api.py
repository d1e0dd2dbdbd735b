"""The REST calls the Airflow UI makes (public API /api/v2), with a JWT from /auth/token."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tpu_rl.names import DAG_ID

FINISHED = {"success", "failed"}
# a task instance in one of these stays there unless someone clears it
ENDED = {"success", "failed", "upstream_failed", "skipped", "removed"}
# Seconds between polls: each poll is a request the API server serves (a run's task instances:
# about 10-20 ms of its CPU). Polled every 0.3 s, the API server spent 6.3 CPU-s on a 32-s run;
# every 1 s, 4.2 (one deployment, nothing else running).
POLL_S = 1.0
# How long the harness waits for Airflow to get somewhere (a task's state, a run's end, a
# process's health): a ceiling, never a pace. CI's 2 cores under four xdist workers made runs
# take several times their quiet time (a run at approve after 180 s, an API server not ready
# after 180 s at the session's start), so it is wide: a real hang still fails, 10 minutes in.
LOADED_WAIT_S = 600.0


def wait_until(
    what: str, check: Callable[[], Any], timeout_s: float = LOADED_WAIT_S, poll_s: float = POLL_S
) -> Any:
    """Poll until check() returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class AirflowApi:
    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url
        token = httpx.post(
            f"{base_url}/auth/token", json={"username": username, "password": password}, timeout=30
        )
        token.raise_for_status()
        self.client = httpx.Client(
            base_url=f"{base_url}/api/v2",
            headers={"Authorization": f"Bearer {token.json()['access_token']}"},
            timeout=30,
        )

    def _json(self, method: str, path: str, *, again_after_5xx: bool = False, **kw: Any) -> Any:
        """The answer's JSON, or AssertionError with the status and body; `again_after_5xx`:
        a server error is asked once more (saying so), as a person clicks again."""
        response = self.client.request(method, path, **kw)
        if again_after_5xx and response.status_code >= 500:
            print(f"{method} {path}: {response.status_code} {response.text[:200]}; once more")
            time.sleep(POLL_S)
            response = self.client.request(method, path, **kw)
        if response.is_error:
            raise AssertionError(f"{method} {path}: {response.status_code} {response.text}")
        return response.json()

    def trigger(self, conf: dict[str, Any], run_id: str, dag_id: str = DAG_ID) -> dict[str, Any]:
        """The UI's Trigger button."""
        body = {"dag_run_id": run_id, "conf": conf, "logical_date": None}
        return self._json("POST", f"/dags/{dag_id}/dagRuns", json=body)

    def dag(self, dag_id: str = DAG_ID) -> dict[str, Any]:
        return self._json("GET", f"/dags/{dag_id}")

    def run(self, run_id: str, dag_id: str = DAG_ID) -> dict[str, Any]:
        return self._json("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def variable(self, key: str) -> str:
        return self._json("GET", f"/variables/{key}")["value"]

    def mark_run(self, run_id: str, state: str) -> dict[str, Any]:
        """The UI's "Mark run as failed/success", clicked once more after a server error, as a
        person would: on Airflow 3.1.8 and PostgreSQL the PATCH once answered 500 while the
        run's reward wait was deferred (a clean-clone CI run; alone it passed 3 times of 3).
        The request's session rolls back on an error (_get_session in
        api_fastapi/common/db/common.py, through utils/session.py create_session, lines 41-46),
        and marking a run failed twice is marking it once."""
        path = f"/dags/{DAG_ID}/dagRuns/{run_id}"
        return self._json("PATCH", path, again_after_5xx=True, json={"state": state})

    def task_instances(self, run_id: str) -> dict[str, dict[str, Any]]:
        body = self._json("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=100")
        return {ti["task_id"]: ti for ti in body["task_instances"]}

    def task_states(self, run_id: str) -> dict[str, str | None]:
        return {task: ti["state"] for task, ti in self.task_instances(run_id).items()}

    def xcom(self, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """A task's XCom, as the UI's XCom tab reads it."""
        path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}"
        return self._json("GET", path, params={"deserialize": True})["value"]

    def hitl_detail(self, run_id: str, task_id: str) -> dict[str, Any]:
        """A Human-in-the-loop task's request, as the Required Actions page reads it."""
        path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        return self._json("GET", path)

    def respond(self, run_id: str, task_id: str, option: str) -> dict[str, Any]:
        """A person's answer on the Required Actions page (core_api routes/public/hitl.py,
        update_hitl_detail: PATCH .../taskInstances/{task_id}/{map_index}/hitlDetails)."""
        path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        body = {"chosen_options": [option], "params_input": {}}
        return self._json("PATCH", path, json=body)

    def clear_task(self, run_id: str, task_id: str) -> Any:
        """The UI's Clear on one task instance with its downstream tasks, as the UI posts it."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": [task_id],
            "include_downstream": True,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": True,
        }
        return self._json("POST", f"/dags/{DAG_ID}/clearTaskInstances", json=body)

    def wait(self, what: str, check: Callable[[], Any], timeout_s: float) -> Any:
        return wait_until(what, check, timeout_s)

    def wait_finished(
        self, run_id: str, dag_id: str = DAG_ID, timeout_s: float = LOADED_WAIT_S
    ) -> str:
        return self.wait(
            f"{dag_id} run {run_id} to finish",
            lambda: (s := self.run(run_id, dag_id)["state"]) in FINISHED and s,
            timeout_s,
        )

    def wait_task(
        self, run_id: str, task_id: str, states: set[str], timeout_s: float = LOADED_WAIT_S
    ) -> dict:
        """Poll until the task is in one of `states`; fail at once when it ends in another (it
        will not change again), and on a timeout name every task's state of the run."""

        def reached() -> dict | None:
            ti = self.task_instances(run_id).get(task_id)
            state = ti and ti["state"]
            if state in states:
                return ti
            if state in ENDED:
                raise AssertionError(
                    f"{task_id} ended {state}, not {sorted(states)}: {self.task_states(run_id)}"
                )
            return None

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ti := reached():
                return ti
            time.sleep(POLL_S)
        raise AssertionError(
            f"timed out after {timeout_s:.0f} s waiting for {task_id} in {sorted(states)}; "
            f"the run's tasks: {self.task_states(run_id)}"
        )
