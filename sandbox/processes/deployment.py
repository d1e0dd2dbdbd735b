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
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from sandbox.cloud import free_port
from sandbox.harness import HF_TOKEN
from sandbox.paths import REPO
from sandbox.processes.airflow_processes import COMMANDS, AirflowProcesses
from sandbox.processes.api import LOADED_WAIT_S, AirflowApi
from sandbox.processes.emulators import ProcessSandbox, running_sandbox
from sandbox.processes.postgres import DATABASE, Postgres, running_postgres
from tpu_rl.deployment import DEPLOYMENT_VARIABLE
from tpu_rl.names import DAG_ID

SITE = Path(__file__).parent / "site"
USERNAME = "admin"
MIGRATED = "airflow_migrated"  # a database as `airflow db migrate` leaves it: a fresh install
# Fast loops so faults are seen in seconds, and a longer execution API timeout for a loaded
# machine; everything else is Airflow's production default.
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
    # Airflow's 5 s default: with four xdist workers on two cores a task's start call to the API
    # server once timed out (the janitor's sweep: "Workload execution failed", httpx.ReadTimeout).
    # Airflow's own advice (config.yml, [workers] execution_api_timeout): "Increase this value if
    # you experience timeout errors under high load."
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
    # A task's supervisor notices its process's exit only between waits of up to this long
    # (sdk/execution_time/supervisor.py _monitor_subprocess: select() for at most
    # MIN_HEARTBEAT_INTERVAL; 5 s by default): about one workload in five reported its end 5 s
    # late. A deferring try's late exit event, read once the resumed try runs, fails that try
    # (apache/airflow#72716; jobs/scheduler_job_runner.py process_executor_events): it failed a
    # resumed export on both tries in loaded runs.
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
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
    hf_token: str = HF_TOKEN  # the password of its huggingface_default connection
    _api: AirflowApi | None = field(default=None, init=False, repr=False)  # api() makes it

    def api(self) -> AirflowApi:
        """Its REST client, made once: each new one asks for a token and builds an SSL context
        (a fifth of the test process's CPU in a scenario when made per call)."""
        if self._api is None:
            self._api = AirflowApi(self.url, self.username, self.password)
        return self._api

    def identity(self) -> str:
        """The identity this deployment generated at its first run's validate (the shipped
        configuration: no TPU_RL_DEPLOYMENT_ID), from its Variable."""
        return self.api().variable(DEPLOYMENT_VARIABLE)

    def relaunch(self, own_env: dict[str, dict[str, str]]) -> None:
        """Give processes an environment of their own (`own_env`: process -> variables that
        replace the deployment's; {} puts every one back), restart those that change, and wait
        until all are healthy and a restarted DAG processor has parsed the DAG again (what the
        DAG reads from its environment, e.g. its dagrun_timeout, is then in the database)."""
        procs, api = self.processes, self.api()
        changed = [n for n in COMMANDS if procs.own_env.get(n, {}) != own_env.get(n, {})]
        if not changed:
            return
        parsed = api.dag()["last_parsed_time"]
        procs.own_env = dict(own_env)
        procs.restart(*changed)

        def ready() -> bool:
            again = "dag-processor" not in changed or api.dag()["last_parsed_time"] != parsed
            return again and _healthy(self.url)

        _wait("the restarted processes (and the DAG parsed again)", ready, LOADED_WAIT_S, procs)

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
    (tmp / "tmp").mkdir(exist_ok=True)
    return {
        "TPU_RL_SCHEDULE": "",  # the DAG unscheduled: runs come from the form or the API only
        "AIRFLOW_HOME": str(home),
        # temporary files in the deployment's folder, removed with it: a task process killed
        # with SIGKILL leaves its gcluster folder (cluster/session.py) behind
        "TMPDIR": str(tmp / "tmp"),
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
def harness_folder(prefix: str) -> Iterator[Path]:
    """A deployment's folder (Airflow home, logs, sandbox files), removed at the end unless
    $PROCESS_HARNESS_KEEP is set; not under pytest's basetemp, which other sessions prune."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        if os.environ.get("PROCESS_HARNESS_KEEP"):
            print(f"\nprocess harness folder kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


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
    (tmp / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    database = contextlib.nullcontext() if sqlite else running_postgres(tmp / "logs/postgres.log")
    with (
        running_sandbox(tmp / "sandbox", time_scale, form_defaults) as sandbox,
        database as postgres,
    ):
        timings = {"sandbox_and_postgres_s": time.monotonic() - started}
        with airflow_deployment(
            tmp, sandbox, postgres, extra_env or {}, port, password, timings
        ) as deployment:
            timings["startup_total_s"] = time.monotonic() - started
            yield deployment


@contextlib.contextmanager
def another_deployment(
    first: Deployment, tmp: Path, extra_env: dict[str, str]
) -> Iterator[Deployment]:
    """A second Airflow installation on the first one's sandbox (cluster, bucket, cloud): its
    own metadata database (a copy of the first one's as `db migrate` left it, on the same
    PostgreSQL server) and its own four processes."""
    assert first.postgres is not None, "a second deployment needs the first one's PostgreSQL"
    postgres = first.postgres.another(f"airflow_{secrets.token_hex(4)}", template=MIGRATED)
    with airflow_deployment(tmp, first.sandbox, postgres, extra_env, None, None, {}) as d:
        yield d


@contextlib.contextmanager
def airflow_deployment(
    tmp: Path,
    sandbox: ProcessSandbox,
    postgres: Postgres | None,
    extra_env: dict[str, str],
    port: int | None,
    password: str | None,
    timings: dict[str, float],
) -> Iterator[Deployment]:
    """The four Airflow processes of one deployment on its database and `sandbox`, ready;
    stopped on exit. A database named MIGRATED is ready for them as it is; another is migrated
    first (and, on PostgreSQL, copied as MIGRATED for another deployment)."""
    log_dir = tmp / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
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
        **extra_env,
    }
    procs = AirflowProcesses(env, log_dir)
    try:
        mark = time.monotonic()
        if postgres is None or postgres.database != MIGRATED:
            procs.airflow("db", "migrate")
        if postgres is not None and postgres.database == DATABASE:
            postgres.another(MIGRATED, template=DATABASE)  # before any process connects
        timings["db_migrate_s"] = time.monotonic() - mark
        mark = time.monotonic()
        for name in COMMANDS:
            procs.start(name)
        url = f"http://127.0.0.1:{port}"
        health = f"{url}/api/v2/monitor/health"
        _wait(
            "the API server", lambda: httpx.get(health, timeout=5).is_success, LOADED_WAIT_S, procs
        )
        timings["api_server_s"] = time.monotonic() - mark
        deployment = Deployment(url, USERNAME, password, sandbox, postgres, procs, log_dir, timings)
        if conn := extra_env.get("AIRFLOW_CONN_HUGGINGFACE_DEFAULT"):
            deployment.hf_token = json.loads(conn)["password"]
        api = deployment.api()
        _wait(
            "the DAG parsed",
            lambda: api.client.get(f"/dags/{DAG_ID}").is_success,
            LOADED_WAIT_S,
            procs,
        )
        timings["dag_parsed_s"] = time.monotonic() - mark
        _wait("scheduler and triggerer", lambda: _healthy(url), LOADED_WAIT_S, procs)
        timings["all_healthy_s"] = time.monotonic() - mark
        yield deployment
    finally:
        procs.stop_all()


def _healthy(url: str) -> bool:
    health = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
    return all(
        (health.get(part) or {}).get("status") == "healthy"
        for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
    )
