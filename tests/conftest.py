"""Shared fixtures: the tutorial's settings and the schemas rendered objects must meet."""

from __future__ import annotations

import gc
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
# The test processes' garbage collector: three whole DAG runs in one worker (dag.test with Airflow,
# its providers and the sandbox loaded) spent 3.1 of their 28 CPU-s in collections at CPython's
# thresholds (700, 10, 10), 1.4 s at these. Only pytest's processes: the process scenarios'
# Airflow processes keep Airflow's own.
GC_THRESHOLDS = (50_000, 20, 100)


# A process scenario's ceiling, its deployment's start included (pytest-timeout counts fixtures):
# the harness's waits may each take sandbox.processes.api.LOADED_WAIT_S under CI's load.
PROCESS_SCENARIO_TIMEOUT_S = 1500


def pytest_configure(config: pytest.Config) -> None:
    gc.set_threshold(*GC_THRESHOLDS)


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
    """A process scenario's timeout (its own mark's, else PROCESS_SCENARIO_TIMEOUT_S) by SIGALRM,
    not pyproject's thread (which ends the worker): no task runs in its pytest process to take
    the alarm, so the timeout raises in the test and the deployment's teardown stops its Airflow
    processes, which would otherwise outlive it."""
    marker = item.get_closest_marker("timeout")
    seconds = marker.args[0] if marker and marker.args else PROCESS_SCENARIO_TIMEOUT_S
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


@pytest.fixture
def masking_restored(monkeypatch):
    """The secrets a test registers (Airflow's masker, tpu_rl.token_masking's pieces of a
    token) are forgotten after it: a token's pieces would mask the digits of later tests' text
    in the same process (`hf_...0123456789` masked a project number's `123456789`)."""
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    from tpu_rl import token_masking

    masker = _secrets_masker()
    monkeypatch.setattr(masker, "patterns", set(masker.patterns))
    monkeypatch.setattr(masker, "replacer", masker.replacer)
    monkeypatch.setattr(token_masking, "_pieces", set(token_masking._pieces))
    monkeypatch.setattr(token_masking, "_pattern", token_masking._pattern)


# -- the Kubernetes API emulator (the reward wait's helpers: tests/support/kube_wait.py) ---------


@pytest.fixture
def emu():
    """The sandbox's Kubernetes API emulator over HTTPS, its bearer token `tok-1`."""
    from sandbox.kube_emulator import running_emulator

    with running_emulator(token="tok-1") as emulator:
        yield emulator


@pytest.fixture
def creds(emu, monkeypatch: pytest.MonkeyPatch):
    """Google credentials, the one seam patched (GoogleBaseAsyncHook.get_token): each token
    asked for is the next of `creds.queue` (the emulator's at first)."""
    from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook

    from tests.support.kube_wait import Credentials, Token

    credentials = Credentials(emu.token)

    async def get_token(self: GoogleBaseAsyncHook, *, session: Any = None) -> Token:
        return Token(credentials.next())

    monkeypatch.setattr(GoogleBaseAsyncHook, "get_token", get_token)
    return credentials


@pytest.fixture
def gke_emu(monkeypatch: pytest.MonkeyPatch):
    """The emulator behind the GKE control plane (GKEHook.get_cluster answers its endpoint and
    CA, as GKE's API would; the calls are `gke_emu.cluster_calls`) and Google credentials
    (get_token): what the sensor and the operators find from the cluster's name."""
    from types import SimpleNamespace

    from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
    from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook

    from sandbox.kube_emulator import running_emulator
    from tests.support.kube_wait import Token

    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}'
    )
    with running_emulator(token="tok-1") as emulator:
        calls: list[str] = []

        def get_cluster(self: GKEHook, name: str, project_id: str, **_: Any) -> Any:
            calls.append(f"{project_id}/{self.location}/{name}")
            return SimpleNamespace(
                endpoint=emulator.url.removeprefix("https://"),
                master_auth=SimpleNamespace(cluster_ca_certificate=emulator.ca_b64),
            )

        async def get_token(self: GoogleBaseAsyncHook, *, session: Any = None) -> Token:
            return Token(emulator.token)

        monkeypatch.setattr(GKEHook, "get_cluster", get_cluster)
        monkeypatch.setattr(GoogleBaseAsyncHook, "get_token", get_token)
        emulator.cluster_calls = calls  # type: ignore[attr-defined]
        yield emulator


@pytest.fixture
def steps(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]):
    """The Intermediate Eval steps logged so far, in order.

    A follower logs to the logger it is given (caplog); a trigger to its own `self.log`,
    which Airflow's structlog prints to stdout.
    """
    import logging
    import re

    caplog.set_level(logging.INFO)
    printed: list[str] = []

    def logged() -> list[int]:
        printed.append(capsys.readouterr().out)
        text = "".join(printed) + "\n".join(r.getMessage() for r in caplog.records)
        return [int(n) for n in re.findall(r"Intermediate Eval step=(\d+)", text)]

    return logged


@pytest.fixture(params=[False, True], ids=["get", "stream"])
async def make_follower(request: pytest.FixtureRequest, emu):
    """kube_wait.follower() reading the log by a GET per poll (as the sensor) or one open
    stream (as the trigger), its stream closed after the test."""
    import logging

    from tests.support.kube_wait import SettledFollower, trigger_kwargs
    from tpu_rl.rewards.poll import LogFollower

    made: list[LogFollower] = []

    def make(**overrides: Any) -> LogFollower:
        kwargs = trigger_kwargs(emu, stream_log=request.param, **overrides)
        kwargs.pop("poll_interval")
        kind = SettledFollower if request.param else LogFollower
        made.append(kind(log=logging.getLogger("test.follower"), **kwargs))
        return made[-1]

    yield make
    for f in made:
        await f.close()
