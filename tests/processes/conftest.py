"""One production-shaped deployment per xdist worker, shared by the scenarios of this folder that
run there, and stopped after the last of them: its five processes would otherwise idle beside the
worker's later tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.processes.deployment import (
    Deployment,
    harness_folder,
    product_root,
    running_deployment,
)
from sandbox.processes.postgres import missing
from sandbox.processes.runs import DEPLOYER_ENV
from sandbox.run_errors import error_lines
from tests.packaging.install import install_wheel, session_wheel


@pytest.fixture(scope="package")
def running() -> Iterator[Deployment]:
    if reason := missing():
        pytest.skip(reason)
    with (
        harness_folder("tpu-rl-processes-") as folder,
        running_deployment(folder, DEPLOYER_ENV) as d,
    ):
        print(f"\nprocess harness start-up: {json.dumps(d.timings)}")
        yield d


@pytest.fixture
def deployment(running: Deployment, request: pytest.FixtureRequest) -> Deployment:
    """The worker's deployment, its processes as installed; a test marked `relaunches` gives
    them an environment of its own (Deployment.relaunch), which stays until a test wants
    another: the last test's is never put back, and two in a row restart only what differs."""
    if not request.node.get_closest_marker("relaunches"):
        running.relaunch({})
    return running


def relaunch_order(item: pytest.Item) -> int:
    """Where a scenario runs in its group: those on the installed environment first, then the
    relaunching ones by their `relaunches(order=N)`, the order in which consecutive ones restart
    the fewest processes (a restart costs 5-15 CPU-s a process and its wait for health)."""
    marker = item.get_closest_marker("relaunches")
    return 0 if marker is None else marker.kwargs.get("order", 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This folder's scenarios in relaunch_order, in the places they were collected in: an
    environment a scenario gives stays for the next (Deployment.relaunch), so none has to be
    put back between two that want the installed one."""
    here = Path(__file__).parent
    places = [i for i, item in enumerate(items) if here in item.path.parents]
    ordered = sorted((items[i] for i in places), key=relaunch_order)
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


@pytest.fixture(scope="session")
def composer_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The product's wheel (as `make dist` builds it, once per session) installed alone into an
    empty folder, as Composer installs a PyPI package: for processes without plugins/ on their
    path."""
    wheel = session_wheel(product_root(), tmp_path_factory)
    return install_wheel(wheel, tmp_path_factory.mktemp("composer-site"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed scenario's report carries each Airflow process's error lines and last lines
    (its deployment folder is removed at the end: in CI they are the only trace of why)."""
    outcome = yield
    report = outcome.get_result()
    found = getattr(item, "funcargs", {}).get("deployment")
    if report.when != "call" or not report.failed or not isinstance(found, Deployment):
        return
    for path, text in found.logs().items():
        if path.suffix != ".log" or "tasks" in path.parts:
            continue
        lines = text.splitlines()
        report.sections.append(
            (f"{path.name}: error lines, then its last 30", "\n".join(
                [*error_lines(text, last=20), "...", *(line[:300] for line in lines[-30:])]
            ))
        )  # fmt: skip
