"""`make demo-ui` driven once in headless Chromium, as a person uses it.

Starts the demo (Airflow's own api-server, scheduler, dag-processor and triggerer wired to the
sandbox), logs in on Airflow's login page, triggers tpu_rl_post_training from its form, waits for
the run to succeed, takes screenshots of the form, the grid, the graph, a task's log and the RL
post-training page (test-artifacts/demo-ui/), and checks that the run's rewards are on that page
and that the demo printed the run's report, which the note and the page open in Airflow.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import pytest

from sandbox.cloud import free_port
from sandbox.harness import SETTINGS
from sandbox.processes.api import AirflowApi
from sandbox.processes.deployment import USERNAME as USER
from sandbox.processes.runs import task_errors
from tests.conftest import REPO
from tests.ui.chromium import Chromium, chromium_path
from tools.demo_ui import PASSWORD
from tpu_rl.names import DAG_ID, JANITOR_DAG_ID

SHOTS = REPO / "test-artifacts" / "demo-ui"
READY_S, RUN_S = 300, 600  # on a loaded 2-core machine a run of 16 tasks took 2.5 min; now 20
POLL_S = 0.5  # how often the REST API is asked whether the runs ended


class Demo:
    """`make demo-ui PORT=<port>` in the background, its output collected line by line."""

    def __init__(self, home: Path, port: int) -> None:
        # -o: the venv stamp counts as up to date, so make does not reinstall while tests run
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "-o", ".venv/.installed", "demo-ui", f"PORT={port}"],
            cwd=REPO,
            env={**os.environ, "DEMO_UI_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal gives it
        )
        self.lines: list[str] = []
        self.home = home
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := [line for line in self.lines if text in line]:
                return found[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"no line with {text!r}:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        """Ctrl-C (SIGINT to make and the demo, as a terminal sends it); the demo then stops
        Airflow's processes, which run in process groups of their own."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:  # a loaded machine: Airflow's four processes each stop within 10 s, then the sandbox
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            # Airflow's processes run in groups of their own: found before their parent goes
            groups = {os.getpgid(c.pid) for c in self._descendants()} | {self.proc.pid}
            for group in groups:
                with contextlib.suppress(OSError):
                    os.killpg(group, signal.SIGKILL)
            return self.proc.wait()

    def _descendants(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            return psutil.Process(self.proc.pid).children(recursive=True)
        return []

    def dump_stacks(self) -> None:
        """The demo's threads' stacks into its sandbox.log (faulthandler on SIGUSR1), and the
        last of them into the test's lines: where a demo that did not stop was."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                if os.getpgid(int(pid)) == self.proc.pid and self._is_demo(pid):
                    os.kill(int(pid), signal.SIGUSR1)
        time.sleep(2)
        log = self.home / "sandbox.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        self.lines += ["stacks of a demo that did not stop:", *text.splitlines()[-60:]]

    @staticmethod
    def _is_demo(pid: str) -> bool:
        with contextlib.suppress(OSError):
            return b"tools.demo_ui" in Path(f"/proc/{pid}/cmdline").read_bytes()
        return False


def log_in(browser: Chromium, url: str) -> None:
    """Airflow's login page (the simple auth manager's), typed into as a person does."""
    browser.call("Page.navigate", url=url)
    browser.wait_for("!!document.querySelector('input[name=username]')")
    for name, text in (("username", USER), ("password", PASSWORD)):
        browser.evaluate(f"document.querySelector('input[name={name}]').focus()")
        browser.call("Input.insertText", text=text)
    browser.wait_for("!document.querySelector('button[type=submit]').disabled")
    browser.evaluate("document.querySelector('button[type=submit]').click()")
    browser.wait_for("!location.pathname.startsWith('/auth/')")


def trigger_from_the_form(browser: Chromium) -> None:
    browser.wait_for("!!document.querySelector('[data-testid=trigger-dag-button]')")
    browser.evaluate("document.querySelector('[data-testid=trigger-dag-button]').click()")
    browser.wait_for("!!document.querySelector('[data-testid=trigger-dag-submit]')")
    browser.wait_for("document.body.innerText.includes('Run control')")
    browser.screenshot(SHOTS / "form.png")
    browser.evaluate("document.querySelector('[data-testid=trigger-dag-submit]').click()")


def wait_for_run(api: AirflowApi) -> dict:
    deadline = time.monotonic() + RUN_S
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):  # an api-server too busy to answer: ask again
            runs = api.client.get(f"/dags/{DAG_ID}/dagRuns").json()["dag_runs"]
            if runs and runs[0]["state"] in ("success", "failed"):
                return runs[0]
        time.sleep(POLL_S)
    raise AssertionError(f"the run did not end in {RUN_S} s")


def why_failed(api: AirflowApi, home: Path, run: dict, lines: list[str]) -> str:
    """A failed run's message: the demo's lines, the tasks that did not succeed, their errors."""
    states = api.task_states(run["dag_run_id"])
    unusual = {t: s for t, s in states.items() if s not in ("success", "skipped")}
    errors = task_errors(home / "logs", run["dag_run_id"], unusual)
    return "\n".join([*lines, f"tasks not success/skipped: {unusual}", errors])


def keep_logs(home: Path) -> None:
    """A failed run's Airflow logs where a later test run does not rotate them away."""
    target = SHOTS / "logs"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(home / "logs", target, ignore=shutil.ignore_patterns("dag-processor"))
    if (home / "sandbox.log").is_file():  # the demo's own output past its terminal lines
        shutil.copy(home / "sandbox.log", target / "sandbox.log")


def page_text(browser: Chromium, url: str, until: str, shot: str) -> str:
    browser.call("Page.navigate", url=url)
    browser.wait_for(until)
    time.sleep(1)  # let the last requests paint
    browser.screenshot(SHOTS / shot)
    return browser.evaluate("document.body.innerText")


def janitor_runs_in_the_sandbox(api: AirflowApi) -> None:
    """The janitor makes no run while Airflow starts (it starts paused); unpaused as
    its form's "Unpause on trigger" does, its sweeps (triggered and scheduled) read the
    sandbox's project and region from the demo's Variable and succeed."""
    janitor = JANITOR_DAG_ID
    assert api.client.get(f"/dags/{janitor}").json()["is_paused"] is True
    assert api.client.get(f"/dags/{janitor}/dagRuns").json()["dag_runs"] == []
    api.client.patch(f"/dags/{janitor}", json={"is_paused": False}).raise_for_status()
    params = api.client.get(f"/dags/{janitor}/details").json()["params"]
    filled = {name: params[name]["value"] for name in ("project", "region", "gcs_bucket")}
    assert filled == {k: SETTINGS[k] for k in filled}, filled  # its form opens filled in
    api.trigger({}, "janitor-from-the-demo", janitor)
    assert api.wait_finished("janitor-from-the-demo", janitor, 180) == "success"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = api.client.get(f"/dags/{janitor}/dagRuns").json()["dag_runs"]
        if all(r["state"] in ("success", "failed") for r in runs):
            break
        time.sleep(POLL_S)
    assert {r["dag_run_id"]: r["state"] for r in runs if r["state"] != "success"} == {}


@pytest.mark.timeout(900)
@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_demo_ui_trigger_from_the_form_then_grid_graph_logs_and_rl_page(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    demo = Demo(tmp_path / "home", port)
    browser, done = None, False
    try:
        assert demo.wait_for_line("Airflow UI:", READY_S) == f"Airflow UI: {base}/dags/{DAG_ID}"
        assert demo.wait_for_line("login:", 5).startswith(f"login: {USER} / {PASSWORD}")
        browser = Chromium(tmp_path / "profile", timeout=120)
        log_in(browser, f"{base}/dags/{DAG_ID}")
        trigger_from_the_form(browser)
        api = AirflowApi(base, USER, PASSWORD)
        run = wait_for_run(api)
        assert run["state"] == "success", why_failed(api, tmp_path / "home", run, demo.lines)
        assert run["conf"]["project"] == "tpu-rl-sandbox"  # the form sent the sandbox's settings
        janitor_runs_in_the_sandbox(api)
        # outcome put the results on the run's own page, through the deployment's REST API
        note = run["note"] or ""
        assert note.startswith("**succeeded: model exported and verified**"), note
        assert "mean_reward 0.082 -> 0.123 (+0.041)" in note, note
        # the demo's reservation: its hours, and its cost as the commitment (report/billing.py)
        assert "TPU cost: " in note and "paid by its commitment" in note, note
        assert "chip-hours" in note and "host-hours" in note and "run-report.md" in note
        # the report as a page of Airflow's own (the console link of the sandbox's bucket opens
        # nothing): the note links it
        report_page = f"{base}/tpu-rl/report/{quote(run['dag_run_id'], safe='')}"
        assert f"[open]({report_page.removeprefix(base)})" in note, note
        run_url = f"{base}/dags/{DAG_ID}/runs/{run['dag_run_id']}"

        grid = page_text(
            browser,
            run_url,
            "document.body.innerText.includes('cleanup_cluster')",
            "grid.png",
        )
        assert "validate" in grid and "wait_for_rewards" in grid
        browser.evaluate("document.querySelector('[aria-label*=raph i]').click()")
        browser.wait_for("document.querySelectorAll('.react-flow__node').length >= 15")
        time.sleep(1)
        browser.screenshot(SHOTS / "graph.png")

        log = page_text(
            browser,
            f"{run_url}/tasks/wait_for_rewards",
            "document.body.innerText.includes('Post RL Training')",
            "task-log.png",
        )
        assert "mean_reward" in log

        browser.call("Page.navigate", url=f"{base}/tpu-rl/")
        assert browser.wait_for("document.body && document.body.dataset.state") == "ready"
        rows = browser.evaluate(
            "[...document.querySelectorAll('#runs tbody tr')]"
            ".map(tr => [...tr.cells].map(td => td.textContent))"
        )
        browser.screenshot(SHOTS / "rl-page.png")
        assert len(rows) == 1
        assert {"0.0821", "0.1234", "+0.0413", "passed"} <= set(rows[0])
        reports = "[...document.querySelectorAll('#runs a')].filter(a => a.textContent == 'report')"
        assert browser.evaluate(f"{reports}.map(a => a.href)") == [report_page]
        report_text = page_text(
            browser, report_page, "document.querySelectorAll('table').length > 1", "report.png"
        )
        assert "All runs: RL post-training page" in report_text
        assert "mean_reward\t0.082\t0.123" in report_text, report_text[:2000]

        report = demo.wait_for_line("mean_reward went from", 60)
        assert "0.082 to 0.123" in report and "gate passed" in report
        kept = demo.wait_for_line("run report:", 5).split("run report: ", 1)[1]
        assert kept.endswith("run-report.md") and Path(kept).is_file()  # outlives the demo
        done = True
    finally:
        if browser:
            browser.close()
        returncode = demo.stop()
        if not done or returncode not in (0, -signal.SIGINT):
            keep_logs(tmp_path / "home")
    # make itself dies of the SIGINT, as on a terminal; the demo stopped everything it started
    assert returncode in (0, -signal.SIGINT), "\n".join(demo.lines)
    assert demo.lines[-2:] == ["stopping Airflow and the sandbox", "stopped"]
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # the api-server is gone
    # the terminal shows the demo's lines only; Airflow's and the emulators' go to files
    assert not [line for line in demo.lines if "[info" in line or "Traceback" in line]
