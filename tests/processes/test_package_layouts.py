"""The triggerer killed while the reward wait is deferred, in each layout of the package a
deployment may have (LAYOUTS): a new triggerer resumes the wait without re-logging, and where the
triggerer cannot import tpu_rl the run fails at its first wait while its teardowns still run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox.processes.deployment import SITE, Deployment
from sandbox.processes.runs import (
    UNTIL_RELEASED_S,
    Run,
    finish,
    start_run,
    task_log,
    wait_for_event,
)
from tests.conftest import REPO
from tests.support.process_runs import wait_for_task_line

# The second of the two process groups (make test: --dist loadgroup), with the approval: each
# worker that runs one starts its own deployment, so the groups run side by side.
# Every layout relaunches: its case carries `relaunches(order=...)` (RUN_ORDER).
pytestmark = pytest.mark.xdist_group("processes-2")


# Where tpu_rl comes from, by process (COMMANDS' names); the API server always has plugins/.
# Cloud Composer 3 syncs the bucket's plugins/ to its workers and web server, not to the
# scheduler or the triggerer: "Cloud Composer 3 doesn't support custom plugins for the Airflow
# scheduler and the Airflow triggerer. Plugins aren't synchronized to these components"
# (https://cloud.google.com/composer/docs/composer-3/install-plugins). That page says nothing of
# the DAG processor: it gets no plugins/ either, the stricter shape. Custom code reaches every
# component as a PyPI package: here the wheel, installed into a folder of its own.
# With LocalExecutor the task processes (the workers) are the scheduler's children, with its
# environment: in "composer_wheel" they import tpu_rl from the wheel too; in
# "composer_plugins_folder" (Composer with the package in plugins/ only, as deployed before the
# wheel) the scheduler keeps plugins/ for their sake and only the triggerer has neither.
LAYOUTS = {
    "plugins_on_path": {},  # this repository's deployments: plugins/ on every process's path
    "composer_wheel": {"scheduler": "wheel", "dag-processor": "wheel", "triggerer": "wheel"},
    "composer_plugins_folder": {"triggerer": "neither"},
}


def layout_env(layout: str, site: Path | None, empty_plugins: Path) -> dict[str, dict[str, str]]:
    """Each process's environment in `layout`: `site` (the wheel) or nothing of tpu_rl on its
    path, and an empty plugins folder (Airflow puts the plugins folder on sys.path)."""
    paths = {"wheel": [SITE, site, REPO], "neither": [SITE, REPO]}
    return {
        name: {
            "PYTHONPATH": ":".join(str(p) for p in paths[source]),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(empty_plugins),
        }
        for name, source in LAYOUTS[layout].items()
    }


# each layout restarts the processes whose environment differs from the last test's; the
# wheel is built once per session. In the group's order (conftest.relaunch_order): the installed
# layout, the promotion's scenario (the scheduler's registry settings), then the triggerer alone
# without the package, then three processes on the wheel: 6 restarts, against 8 in file order.
# The compat tier (make test-compat: `defers`) runs the layouts that finish a run.
RUN_ORDER = {"plugins_on_path": 1, "composer_plugins_folder": 3, "composer_wheel": 4}


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(
            n,
            marks=[pytest.mark.relaunches(order=RUN_ORDER[n])]
            + ([pytest.mark.defers] if n != "composer_plugins_folder" else []),
        )
        for n in LAYOUTS
    ],
)
def test_triggerer_killed_mid_wait(
    deployment: Deployment, e2e_report, layout: str, request, tmp_path: Path
) -> None:
    """SIGKILL the triggerer while the wait is deferred; a new one resumes it without re-logging.

    In each layout of the package (LAYOUTS). Without the wheel and without plugins/, the
    triggerer cannot import the product's triggers: the waits fail, and the run with them.
    """
    api, procs = deployment.api(), deployment.processes
    site = request.getfixturevalue("composer_site") if layout == "composer_wheel" else None
    (tmp_path / "plugins").mkdir()
    deployment.relaunch(layout_env(layout, site, tmp_path / "plugins"))
    names = {"plugins_on_path": "triggerer_killed"}
    run = start_run(deployment, api, names.get(layout, layout), hold_training_s=UNTIL_RELEASED_S)
    if layout == "composer_plugins_folder":
        waits_failed_without_the_package(deployment, run, e2e_report)
        return
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    api.wait_task(run.run_id, "wait_for_rewards", {"deferred"})
    # the trigger has read and logged the first evaluation (said once its position is saved)
    wait_for_task_line(deployment, run, "wait_for_rewards", "Intermediate Eval step=10 ")
    procs.kill("triggerer")
    procs.start("triggerer")
    run.training_released.set()  # the new triggerer resumes the wait, ended or not by then
    tasks = finish(deployment, run, "success", e2e_report)
    assert tasks["wait_for_rewards"] == "success"
    wait_logs = task_log(deployment, run, "wait_for_rewards")
    assert wait_logs.count("Intermediate Eval step=10 ") == 1, "logged again after the restart"
    assert "Post RL Training" in wait_logs


def waits_failed_without_the_package(d: Deployment, run: Run, e2e_report: list) -> None:
    """The run failed at its waits on triggers of tpu_rl: the triggerer could not import them.
    start_backend's first try failed so; its retry found the backend running and went on
    without a wait, and the reward wait failed on every try. The teardowns, on workers, ran."""
    tasks = finish(d, run, "failed", e2e_report)
    assert {t for t, state in tasks.items() if state == "failed"} == {"wait_for_rewards", "outcome"}
    triggerer_logs = "".join(
        text for path, text in d.logs().items() if path.name.startswith("triggerer.")
    )
    cannot_import = r"PodsReadyTrigger error=.ModuleNotFoundError\(.No module named \\?'tpu_rl"
    assert re.search(cannot_import, triggerer_logs), "not the triggerer's import error"
