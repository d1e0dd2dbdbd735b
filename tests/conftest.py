"""Shared fixtures: the tutorial's settings and the schemas rendered objects must meet."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox.airflow_env import AIRFLOW_ENV  # noqa: F401  (sets Airflow's environment first)
from sandbox.paths import REPO, TUTORIAL_CONF

VENDOR = REPO / "tests" / "fixtures" / "vendor"
SEED = VENDOR / "seed" / "000_cc31040e9d977fc6.txt"
JOBSET_CRD = VENDOR / "schemas" / "jobset-v0.10.1.crd.yaml"
# The DAG's work, in the order the run does it (written out here, not taken from the product).
PIPELINE = [
    "validate",
    "preflight",
    "ensure_bucket",
    "create_cluster",
    "hf_token_secret",
    "convert",
    "start_backend",
    "train",
    "wait_for_rewards",
    "gate",
    "export",
    "verify",
]

# Each folder's tier (pyproject.toml's markers), slowest first: `make test-fast` runs unit,
# integration and dag.
TIERS = {
    "maxtext": "maxtext",
    "trainer": "trainer",
    "processes": "processes",
    "ui": "ui",
    "e2e": "e2e",
    "packaging": "e2e",
    "dags": "dag",
    "integration": "integration",
    "sandbox": "unit",
    "unit": "unit",
}
TIER_ORDER = list(dict.fromkeys(TIERS.values()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its folder's tier, so no test file carries the marker itself, and
    hand the slowest tiers to the workers first (file order kept within a tier), so that the
    process scenarios' one long group does not start last under `-n 2`."""
    tests = Path(__file__).parent
    rank = {}
    for item in items:
        folder = item.path.relative_to(tests).parts[0]
        if folder not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests/{folder}/ has no tier in TIERS")
        item.add_marker(TIERS[folder])
        if TIERS[folder] == "processes":
            raise_timeout_in_the_test(item)
        rank[item.nodeid] = TIER_ORDER.index(TIERS[folder])
    items.sort(key=lambda item: rank[item.nodeid])


def raise_timeout_in_the_test(item: pytest.Item) -> None:
    """A process scenario's timeout by SIGALRM, not pyproject's thread (which ends the worker):
    no task runs in its pytest process to take the alarm, so the timeout raises in the test and
    the deployment's teardown stops its Airflow processes, which would otherwise outlive it."""
    marker = item.get_closest_marker("timeout")
    seconds = marker.args[0] if marker and marker.args else item.config.getini("timeout")
    item.add_marker(pytest.mark.timeout(float(seconds), method="signal"), append=False)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `--dist loadgroup`, fail a grouped test that pytest-xdist could not group: its
    worker marks one by appending `@<group>` to the node id (xdist/remote.py,
    WorkerInteractor.pytest_collection_modifyitems), which pytest 9.2 ignores (pytest-xdist
    #1386); the group's session deployment would then start on every worker."""
    config = item.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rsplit("]", 1)[-1]:
        pytest.fail(
            "pytest-xdist did not keep this test in its xdist_group: the pinned pytest drops "
            "xdist's group suffix (pytest-xdist #1386); pin a pytest it supports",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A fresh metadata DB (SQLite in AIRFLOW_HOME) for the session: the e2e and ui tiers share
    it, so one worker resets it once (tests/dags keeps a fixture of its own)."""
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def tutorial_conf() -> dict:
    return json.loads(TUTORIAL_CONF.read_text())


@pytest.fixture(scope="session")
def e2e_report():
    """Entries of `make e2e REPORT=<file>` (both harnesses), written when the session ends."""
    entries: list[dict] = []
    yield entries
    target = os.environ.get("E2E_REPORT")
    if target:
        Path(target).write_text(json.dumps(entries, indent=2) + "\n")


class MemoryObject:
    """storage.JsonObject's double: a JSON value per GCS URI in a dict that outlives operators
    (as GCS outlives tries and processes)."""

    def __init__(self, objects: dict[str, str], uri: str) -> None:
        self.objects, self.uri = objects, uri

    def read(self) -> Any:
        return json.loads(self.objects[self.uri]) if self.uri in self.objects else None

    def write(self, value: Any) -> None:
        self.objects[self.uri] = json.dumps(value)


@pytest.fixture
def gcs_objects(monkeypatch) -> dict[str, str]:
    from tpu_rl import storage

    objects: dict[str, str] = {}
    monkeypatch.setattr(storage, "JsonObject", lambda uri, conn: MemoryObject(objects, uri))
    return objects
