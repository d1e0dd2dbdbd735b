"""Airflow's four processes (api-server, scheduler, dag-processor, triggerer) for `make demo-ui`.

Each runs in its own process group with its output in <home>/processes/<name>.log, and its
Python starts with the sandbox's seam (seam/sitecustomize.py) on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import REPO

SEAM_DIR = Path(__file__).parent / "seam"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
USER, PASSWORD = "admin", "admin"  # the simple auth manager's demo login (loopback only)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def airflow_env(home: Path, port: int, seam_file: Path) -> dict[str, str]:
    """This process's environment (the sandbox's: fakes on PATH, emulators) plus Airflow's."""
    env = {k: v for k, v in os.environ.items() if k != "TPU_RL_SCHEDULE"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(SEAM_DIR), str(REPO / "plugins"), str(REPO)]),
            "TPU_RL_DEMO_SEAM": str(seam_file),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY": "1",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            # the log servers' fixed default ports may be taken by another Airflow
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        }
    )
    return env


class AirflowProcesses:
    """Starts the database and the four components; stops them (their groups) on exit."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env
        self.logs = home / "processes"
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "airflow", *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self) -> None:
        (self.home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
        if self._spawn("db-migrate", "db", "migrate").wait() != 0:
            raise RuntimeError(f"airflow db migrate failed: see {self.logs / 'db-migrate.log'}")
        for name in COMPONENTS:
            self.procs[name] = self._spawn(name, name)

    def dead(self) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class Api:
    """Airflow's REST API as the demo's user."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.client = httpx.Client(base_url=base, timeout=30)

    def login(self) -> None:
        done = self.client.post("/auth/token", json={"username": USER, "password": PASSWORD})
        done.raise_for_status()
        self.client.headers["Authorization"] = f"Bearer {done.json()['access_token']}"

    def get(self, path: str, **params: object) -> httpx.Response:
        return self.client.get(path, params=params)

    def wait_ready(self, dag_id: str, processes: AirflowProcesses, timeout: float) -> None:
        """Until the api-server answers, the user can log in and the DAG is parsed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if dead := processes.dead():
                raise RuntimeError(f"{', '.join(dead)} exited: see {processes.logs}")
            try:
                if "Authorization" not in self.client.headers:
                    self.login()
                if self.get(f"/api/v2/dags/{dag_id}").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise TimeoutError(f"Airflow was not ready in {timeout:.0f} s: see {processes.logs}")
