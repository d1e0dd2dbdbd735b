"""One production-shaped Airflow deployment on loopback: the sandbox, a PostgreSQL server (or
SQLite, for `make demo-ui`) and the four Airflow processes. `running_deployment(tmp)` is the entry
point, for the process scenarios and for tools/demo_ui.

    with running_deployment(Path("/tmp/x")) as d:
        print(d.url, d.username, d.password)   # the UI and REST API
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO
from tests.processes.airflow_processes import COMMANDS, AirflowProcesses
from tests.processes.api import DAG_ID, AirflowApi
from tests.processes.postgres import Postgres, running_postgres
from tests.processes.sandbox import ProcessSandbox, running_sandbox
from tests.sandbox.cloud import free_port

SITE = Path(__file__).parent / "site"
USERNAME = "admin"
DEPLOYMENT_ID = "sandbox-processes"
# Fast loops so faults are seen in seconds; everything else is Airflow's production default.
FAST = {
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
    "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "5",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "120",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
    "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
    "AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY": "1",
    "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "1",
    "AIRFLOW__CORE__PARALLELISM": "4",
}


@dataclass
class Deployment:
    url: str
    username: str
    password: str
    sandbox: ProcessSandbox
    postgres: Postgres | None  # None on SQLite
    processes: AirflowProcesses
    log_dir: Path
    timings: dict[str, float] = field(default_factory=dict)

    def api(self) -> AirflowApi:
        return AirflowApi(self.url, self.username, self.password)

    def relaunch(self, own_env: dict[str, dict[str, str]]) -> None:
        """Give processes an environment of their own (`own_env`: process -> variables that
        replace the deployment's; {} puts every one back), restart those that change, and wait
        until all are healthy."""
        procs = self.processes
        changed = [n for n in COMMANDS if procs.own_env.get(n, {}) != own_env.get(n, {})]
        procs.own_env = dict(own_env)
        procs.restart(*changed)
        _wait("the restarted processes", lambda: _healthy(self.url), 120, procs)

    def logs(self) -> dict[Path, str]:
        """Every process log and task log written so far."""
        return {
            p: p.read_text(errors="replace") for p in sorted(self.log_dir.rglob("*")) if p.is_file()
        }


def product_root() -> Path:
    """Whose dags/ and plugins/ the processes run: this checkout, or $PROCESS_HARNESS_PRODUCT
    (e.g. an older commit's `git archive`, to show a scenario failing against it)."""
    return Path(os.environ.get("PROCESS_HARNESS_PRODUCT") or REPO)


def airflow_env(tmp: Path, db_url: str, port: int, password_file: Path) -> dict[str, str]:
    home = tmp / "airflow-home"
    product = product_root()
    home.mkdir(parents=True, exist_ok=True)
    return {
        "TPU_RL_SCHEDULE": "",  # the DAG unscheduled: runs come from the form or the API only
        "AIRFLOW_HOME": str(home),
        "PYTHONPATH": f"{SITE}:{product / 'plugins'}:{REPO}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(product / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(product / "plugins"),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__AUTH_MANAGER": (
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
        ),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(password_file),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(tmp / "logs" / "tasks"),
        "AIRFLOW__LOGGING__DAG_PROCESSOR_CHILD_PROCESS_LOG_DIRECTORY": str(
            tmp / "logs" / "dag-processor"
        ),
        # the log servers' fixed default ports may be taken by another Airflow
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "TPU_RL_DEPLOYMENT_ID": DEPLOYMENT_ID,
        **FAST,
    }


def _wait(what: str, check, timeout_s: float, procs: AirflowProcesses) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if dead := procs.dead():
            raise RuntimeError(f"{dead} exited while waiting for {what}: see {procs.log_dir}")
        with contextlib.suppress(httpx.HTTPError):
            if check():
                return
        time.sleep(0.3)
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s: see {procs.log_dir}")


@contextlib.contextmanager
def metadata_database(log_dir: Path, sqlite: bool) -> Iterator[Postgres | None]:
    """A PostgreSQL server for the process scenarios; nothing for SQLite (a file in tmp)."""
    if sqlite:
        yield None
    else:
        with running_postgres(log_dir / "postgres.log") as postgres:
            yield postgres


@contextlib.contextmanager
def running_deployment(
    tmp: Path,
    extra_env: dict[str, str] | None = None,
    *,
    port: int | None = None,
    password: str | None = None,
    sqlite: bool = False,
    time_scale: float = 0.001,
    form_defaults: dict[str, Any] | None = None,
) -> Iterator[Deployment]:
    """Sandbox, database and the four Airflow processes, ready; everything stopped on exit.

    `make demo-ui` passes its port and password, SQLite, a watchable time scale and the
    sandbox's settings as the trigger form's defaults; the process scenarios take the defaults."""
    log_dir = tmp / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.monotonic()
    with (
        running_sandbox(tmp / "sandbox", time_scale, form_defaults) as sandbox,
        metadata_database(log_dir, sqlite) as postgres,
    ):
        timings["sandbox_and_postgres_s"] = time.monotonic() - started
        password = password or secrets.token_urlsafe(12)
        password_file = tmp / "passwords.json"
        password_file.write_text(json.dumps({USERNAME: password}))
        port = port or free_port()
        db_url = postgres.url if postgres else f"sqlite:///{tmp / 'airflow.db'}"
        env = {
            **os.environ,
            **sandbox.env,
            **airflow_env(tmp, db_url, port, password_file),
            # the deployment's own REST API, through which `outcome` sets the run's note
            "AIRFLOW_CONN_TPU_RL_AIRFLOW_API": json.dumps(
                {
                    "conn_type": "http",
                    "host": f"http://127.0.0.1:{port}",
                    "login": USERNAME,
                    "password": password,
                }
            ),
            **(extra_env or {}),
        }
        procs = AirflowProcesses(env, log_dir)
        try:
            mark = time.monotonic()
            procs.airflow("db", "migrate")
            timings["db_migrate_s"] = time.monotonic() - mark
            mark = time.monotonic()
            for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
                procs.start(name)
            url = f"http://127.0.0.1:{port}"
            _wait(
                "the API server",
                lambda: httpx.get(f"{url}/api/v2/monitor/health", timeout=5).is_success,
                180,
                procs,
            )
            timings["api_server_s"] = time.monotonic() - mark
            deployment = Deployment(
                url, USERNAME, password, sandbox, postgres, procs, log_dir, timings
            )
            api = deployment.api()
            _wait(
                "the DAG parsed", lambda: api.client.get(f"/dags/{DAG_ID}").is_success, 180, procs
            )
            timings["dag_parsed_s"] = time.monotonic() - mark
            _wait("scheduler and triggerer", lambda: _healthy(url), 120, procs)
            timings["all_healthy_s"] = time.monotonic() - mark
            timings["startup_total_s"] = time.monotonic() - started
            yield deployment
        finally:
            procs.stop_all()


def _healthy(url: str) -> bool:
    health = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
    return all(
        (health.get(part) or {}).get("status") == "healthy"
        for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
    )
