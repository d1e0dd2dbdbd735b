"""The Cluster Toolkit runtime and operators against fake gcluster/terraform and a loopback
bundle server. Only the cloud is fake: credentials come from a real Airflow connection."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import structlog
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from google.api_core.exceptions import NotFound
from google.cloud.container_v1.types import Cluster

from sandbox.cloud import SANDBOX_BIN, BundleServer, GkeControlPlane, fake_bundle, make_bundle
from sandbox.paths import REPO
from tests.support.cells import cell_conf
from tpu_rl.catalogue.cells import CELLS
from tpu_rl.cluster import blueprint
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.cluster.toolkit import ClusterToolkitError
from tpu_rl.janitor.params import JanitorParams
from tpu_rl.operators.cluster import CreateClusterOperator, DestroyClusterOperator
from tpu_rl.operators.janitor import Sweep
from tpu_rl.settings.run_settings import load_settings, read_settings

ROOT = REPO
COMMANDS = {"deploy": CreateClusterOperator, "destroy": DestroyClusterOperator}
VERSION = "v1.103.0"
PRIVATE_KEY = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
)
KEY_ID = "f00dfacecafe0123456789"
SETTINGS = {
    "project": "tpu-rl-example",
    "region": "us-east5",
    "zone": "us-east5-b",
    "cluster_name": "gemma4-rl",
    "gcs_bucket": "tpu-rl-example-bucket",
    "reservation": "v6e-32-reservation",
    "cluster_toolkit_version": VERSION,
}
STATE_KEY = "tpu-rl-example-bucket/tpu-rl/terraform/gemma4-rl"


@pytest.fixture
def server():
    srv = BundleServer()
    srv.files[f"/mirror/{VERSION}/{blueprint.bundle_name()}"] = fake_bundle()
    yield srv
    srv.close()


def deployed(state: Path, name: str) -> Cluster:
    """GKEHook.get_cluster on the fake cloud: a cluster gcluster deployed, with its labels."""
    clusters = json.loads(state.read_text()).get("clusters", {}) if state.exists() else {}
    record = clusters.get(name)
    if not record or record.get("status") != "RUNNING":
        raise NotFound(f"cluster {name} not found")
    return Cluster(name=name, status=Cluster.Status.RUNNING, resource_labels=record["labels"])


@pytest.fixture
def cloud(tmp_path, monkeypatch, server):
    """The fake cloud, fake tools on PATH (no real terraform), a real Airflow connection."""
    log, state = tmp_path / "calls.jsonl", tmp_path / "cloud.json"
    python_bin = Path(sys.executable).parent  # `env python3` in the fakes: this venv's
    monkeypatch.setenv("PATH", f"{SANDBOX_BIN}:{python_bin}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_CLOUD_LOG", str(log))
    monkeypatch.setenv("FAKE_CLOUD_STATE", str(state))
    monkeypatch.delenv("FAKE_GCLUSTER_FAIL", raising=False)
    monkeypatch.setenv("AIRFLOW__TPU_RL__GCLUSTER_RELEASE_BASE_URL", server.url)
    monkeypatch.setenv("AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "test-deployment")  # the janitor's destroys
    key = {
        "type": "service_account",
        "project_id": "tpu-rl-example",
        "private_key_id": KEY_ID,
        "private_key": PRIVATE_KEY,
        "client_email": "airflow@tpu-rl-example.iam.gserviceaccount.com",
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": key}}),
    )
    monkeypatch.setattr(GKEHook, "get_cluster", lambda hook, name, **kw: deployed(state, name))

    class Cloud:
        def calls(self, tool: str | None = None) -> list[dict]:
            if not log.exists():
                return []
            lines = [json.loads(x) for x in log.read_text().splitlines()]
            return [c for c in lines if tool in (None, c["tool"])]

        def state(self) -> dict:
            return json.loads(state.read_text()) if state.exists() else {}

        def clusters(self) -> dict:
            return self.state().get("clusters", {})

    return Cloud()


def run(command: str, **kwargs) -> list[dict]:
    """Execute `gcluster <command>` as a task would; returns its log events."""
    op = COMMANDS[command](task_id=command, settings=dict(SETTINGS), **kwargs)
    with structlog.testing.capture_logs() as logs:
        op.execute(context={})
    return logs


# ensure_bundle ---------------------------------------------------------------------------


def test_bundle_downloaded_once_then_cached(tmp_path, server):
    first = cluster_toolkit.ensure_bundle(VERSION, tmp_path, server.url)
    second = cluster_toolkit.ensure_bundle(VERSION, tmp_path, server.url)
    assert first == second == tmp_path / VERSION / blueprint.bundle_name().removesuffix(".tgz")
    assert os.access(first / "gcluster", os.X_OK)
    assert (first / blueprint.BUNDLE_BLUEPRINT).is_file()
    assert server.requests == [f"/mirror/{VERSION}/{blueprint.bundle_name()}"]
    assert not [p for p in (tmp_path / VERSION).iterdir() if p.name.startswith(".download-")]


def test_missing_bundle_names_the_url(tmp_path, server):
    with pytest.raises(ClusterToolkitError, match=r"/mirror/v9\.9\.9/gcluster_bundle_"):
        cluster_toolkit.ensure_bundle("v9.9.9", tmp_path, server.url)
    assert not (tmp_path / "v9.9.9" / blueprint.bundle_name().removesuffix(".tgz")).exists()


@pytest.mark.parametrize(
    "members",
    [
        {"gcluster": (b"#!/bin/sh\n", 0o755), "../escape": (b"x", 0o644)},
        {"/abs/gcluster": (b"#!/bin/sh\n", 0o755)},
        {"bin/gcluster": (b"#!/bin/sh\n", 0o755)},
    ],
)
def test_unsafe_or_wrong_bundle_is_refused_and_not_cached(tmp_path, server, members):
    server.files[f"/mirror/v0.0.1/{blueprint.bundle_name()}"] = make_bundle(members)
    with pytest.raises(ClusterToolkitError, match="bundle"):
        cluster_toolkit.ensure_bundle("v0.0.1", tmp_path / "cache", server.url)
    assert not (tmp_path / "escape").exists()
    assert not (tmp_path / "cache" / "v0.0.1" / "gcluster_bundle_linux_amd64").exists()


# require_terraform and run_gcluster -----------------------------------------------------


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "tool.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_output_streamed_line_by_line_with_secrets_masked(tmp_path, caplog):
    argv = script(
        tmp_path,
        "import sys\nprint('line one 100%')\nprint('key hunter22 here', file=sys.stderr)\n"
        f"print({PRIVATE_KEY!r})\nprint('done')\n",
    )
    with caplog.at_level(logging.INFO, logger="t"):
        cluster_toolkit.run_gcluster(
            argv, tmp_path, logging.getLogger("t"), 10, secrets=["hunter22", PRIVATE_KEY]
        )
    lines = [r.getMessage() for r in caplog.records]
    assert "line one 100%" in lines and "key *** here" in lines and "done" in lines
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in caplog.text
    assert "hunter22" not in caplog.text


def test_failure_raises_with_the_last_lines(tmp_path):
    argv = script(tmp_path, "for i in range(100): print(f'step {i}')\nraise SystemExit(3)\n")
    with pytest.raises(ClusterToolkitError, match=r"python3? tool.py failed \(exit 3\)") as err:
        cluster_toolkit.run_gcluster(argv, tmp_path, logging.getLogger("t"), 10)
    assert "step 99" in str(err.value) and "step 0\n" not in str(err.value)


def test_timeout_stops_the_process_group(tmp_path):
    argv = script(tmp_path, "import time\nprint('waiting', flush=True)\ntime.sleep(60)\n")
    with pytest.raises(ClusterToolkitError, match=r"(?s)tool.py timed out after 1s.*waiting"):
        cluster_toolkit.run_gcluster(argv, tmp_path, logging.getLogger("t"), 1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_killed_worker_takes_gcluster_and_terraform_down_with_it(tmp_path):
    """SIGKILL of the task process: no gcluster deploys on as an orphan beside the retry."""
    pids = tmp_path / "pids"
    argv = script(
        tmp_path,
        "import os, subprocess, time\n"
        "terraform = subprocess.Popen(['sleep', '120'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{terraform.pid}}')\n"
        "time.sleep(120)\n",
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import logging, pathlib, sys; from tpu_rl.cluster import toolkit as c; "
            f"c.run_gcluster({argv!r}, pathlib.Path({str(tmp_path)!r}), logging.getLogger(), 300)",
        ],
        env={**os.environ, "PYTHONPATH": str(Path(cluster_toolkit.__file__).parents[2])},
    )
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    gcluster, terraform = (int(p) for p in pids.read_text().split())
    assert _alive(gcluster) and _alive(terraform)
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 20
    while (_alive(gcluster) or _alive(terraform)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(gcluster) and not _alive(terraform)


# operators ------------------------------------------------------------------------------


def test_deploy_then_destroy_from_another_empty_folder(cloud, server):
    run("deploy")
    cluster = cloud.clusters()["gemma4-rl"]
    assert cluster["status"] == "RUNNING"
    assert cluster["labels"] == blueprint.cluster_labels(load_settings(SETTINGS), "test-deployment")
    assert cluster["vars"]["system_node_pool_disk_size_gb"] == 200
    assert cloud.state()["tfstate"] == {STATE_KEY: ["gemma4-rl"]}
    deploy_calls = cloud.calls("gcluster")
    assert [c["argv"][0] for c in deploy_calls] == ["deploy"]
    deploy_dir = deploy_calls[0]["cwd"]
    assert not Path(deploy_dir).exists()  # the worker's folder is gone, as on another worker

    run("destroy")
    assert cloud.clusters() == {}
    assert cloud.state()["tfstate"] == {}
    create, destroy = cloud.calls("gcluster")[1:]
    assert create["argv"][0] == "create" and destroy["argv"] == [
        "destroy",
        "gemma4-rl",
        "--auto-approve",
    ]
    assert create["cwd"] == destroy["cwd"] != deploy_dir
    assert len(server.requests) == 1  # the bundle was cached for the second task
    for call in cloud.calls():
        assert call["credentials_readable"], call
        assert call["env"]["TF_INPUT"] == "0"
    assert {c["env"]["CLOUDSDK_CORE_PROJECT"] for c in cloud.calls("gcluster")} == {
        "tpu-rl-example"
    }
    assert [c["argv"][1:] for c in cloud.calls("terraform")] == [
        ["init", "-input=false"],
        ["apply", "-auto-approve"],
        ["init", "-input=false"],
        ["destroy", "-auto-approve"],
    ]


def test_deploy_argv_is_the_planned_one(cloud):
    run("deploy")
    expected = blueprint.blueprint_argv("deploy", load_settings(SETTINGS))
    assert cloud.calls("gcluster")[0]["argv"] == expected[1:]


def test_deploy_twice_is_idempotent(cloud):
    run("deploy")
    run("deploy")
    assert cloud.clusters()["gemma4-rl"]["status"] == "RUNNING"
    assert cloud.state()["tfstate"] == {STATE_KEY: ["gemma4-rl"]}


def test_half_way_deploy_is_destroyable(cloud, monkeypatch):
    monkeypatch.setenv("FAKE_GCLUSTER_FAIL", "deploy-halfway")
    with pytest.raises(
        ClusterToolkitError, match=r"(?s)gcluster deploy failed \(exit 1\).*stockout"
    ):
        run("deploy")
    assert cloud.clusters()["gemma4-rl"]["status"] == "PARTIAL"
    monkeypatch.delenv("FAKE_GCLUSTER_FAIL")
    run("destroy")
    assert cloud.clusters() == {}


def test_destroy_fails_once_then_retry_succeeds(cloud, monkeypatch):
    run("deploy")
    monkeypatch.setenv("FAKE_GCLUSTER_FAIL", "destroy-once")
    with pytest.raises(ClusterToolkitError, match=r"(?s)destroy failed.*timed out"):
        run("destroy")
    assert "gemma4-rl" in cloud.clusters()
    run("destroy")  # the task's retry
    assert cloud.clusters() == {}


def test_destroy_when_already_gone_succeeds_every_time(cloud):
    run("destroy")
    run("destroy")
    assert cloud.clusters() == {}
    assert [c["argv"][0] for c in cloud.calls("gcluster")] == [
        "create",
        "destroy",
        "create",
        "destroy",
    ]


def test_missing_terraform_fails_before_any_gcluster_call(cloud, monkeypatch, tmp_path):
    bin_without_terraform = tmp_path / "bin"
    bin_without_terraform.mkdir()
    shutil.copy(SANDBOX_BIN / "gcluster", bin_without_terraform / "gcluster")
    monkeypatch.setenv("PATH", f"{bin_without_terraform}:{Path(sys.executable).parent}:/bin")
    with pytest.raises(ClusterToolkitError, match="terraform is not on PATH"):
        run("deploy")
    assert cloud.calls() == []


def test_secrets_masked_in_the_streamed_task_log(cloud, monkeypatch):
    monkeypatch.setenv("FAKE_GCLUSTER_LEAK", "1")  # the fake prints the whole key file
    logs = run("deploy")
    text = "\n".join(str(e["event"]) for e in logs)
    assert "Apply complete! cluster gemma4-rl is RUNNING" in text
    assert '"client_email": "airflow@tpu-rl-example.iam.gserviceaccount.com"' in text
    assert KEY_ID not in text
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in text
    assert "***" in text


def test_existing_cluster_or_keep_cluster_is_never_touched(cloud, server):
    for extra in ({"cluster_mode": "existing"}, {"keep_cluster": True}):
        op = DestroyClusterOperator(task_id="d", settings={**SETTINGS, **extra})
        op.execute(context={})
    op = CreateClusterOperator(task_id="c", settings={**SETTINGS, "cluster_mode": "existing"})
    op.execute(context={})
    assert cloud.calls() == [] and server.requests == []


def test_the_operators_template_the_settings():
    for operator in COMMANDS.values():
        assert set(operator.template_fields) == {"settings", "gcp_conn_id", "state_prefix"}


def test_the_staged_kueue_configuration_covers_the_pathways_backend(tmp_path):
    """The blueprint stages kueue-configuration.yaml.tftpl from beside itself: edited there."""
    import yaml

    from sandbox.paths import BLUEPRINT_FIXTURES
    from tests.conftest import TUTORIAL_CONF

    bundle = tmp_path / "bundle"
    example = bundle / "examples" / "gke-tpu-v6e"
    example.mkdir(parents=True)
    for name in ("gke-tpu-v6e-advanced.yaml", "kueue-configuration.yaml.tftpl"):
        shutil.copy(BLUEPRINT_FIXTURES / name, example / name)
    work = tmp_path / "work"
    work.mkdir()
    settings = load_settings(json.loads(Path(TUTORIAL_CONF).read_text()))
    cluster_toolkit.prepare_workdir(work, bundle, settings, "test-deployment", "prefix")
    docs = list(yaml.safe_load_all((work / "kueue-configuration.yaml.tftpl").read_text()))
    (queue,) = [d for d in docs if d["kind"] == "ClusterQueue"]
    assert set(queue["spec"]["resourceGroups"][0]["coveredResources"]) == {
        "google.com/tpu",
        "cpu",
        "memory",
    }
    assert "${tpu_quota}" in (work / "kueue-configuration.yaml.tftpl").read_text()


# The janitor's destroy of a leftover cluster ---------------------------------------------

SHAPES = [(cell, slices) for cell in CELLS for slices in (1, 2)]


class NoActiveRuns:
    """RunStates of a janitor that finds no queued or running run."""

    def active_clusters(self) -> tuple[dict[str, str], str | None]:
        return {}, None


@pytest.mark.parametrize(
    ("cell", "slices"), SHAPES, ids=[f"{c.model_name}@{c.tpu_type}x{n}" for c, n in SHAPES]
)
def test_the_janitor_destroys_a_leftover_cluster_of_every_catalogue_shape(cloud, cell, slices):
    """The cluster of each cell with one or two slices, left 5 hours ago (recorded as the fake
    gcluster's deploy records it; a two-slice one from before validate refused two slices): the
    sandbox's GKE lists it, the janitor rebuilds its settings from the node pools and picks it,
    and its destroy task removes it and its state."""
    shape = {"cluster_name": "leftover", "cluster_nodepool_count": slices}
    run, _ = read_settings({**cell_conf(cell), **shape})  # its shape: no run is validated here
    state = {
        "clusters": {
            run.cluster_name: {
                "status": "RUNNING",
                "project": run.project,
                "location": run.region,
                "labels": blueprint.cluster_labels(run, "test-deployment"),
                "vars": blueprint.deployment_vars(run),
                "create_time": (datetime.now(UTC) - timedelta(hours=5)).isoformat(),
            }
        },
        "tfstate": {f"{run.gcs_bucket}/{blueprint.default_state_prefix(run)}": ["leftover"]},
    }
    state_file = Path(os.environ["FAKE_CLOUD_STATE"])
    state_file.write_text(json.dumps(state))
    endpoint = SimpleNamespace(url="https://127.0.0.1:1", ca_b64="")
    [cluster] = (
        GkeControlPlane(endpoint, state_file)
        .list_clusters(f"projects/{run.project}/locations/-")
        .clusters
    )
    p = JanitorParams.from_params(
        {
            "project": run.project,
            "region": run.region,
            "gcs_bucket": run.gcs_bucket,
            "dry_run": False,
        }
    )
    sweep = Sweep(p, NoActiveRuns(), logging.getLogger("janitor"))
    names, settings, kept = sweep.clusters([cluster])
    assert (names, kept, sweep.failed) == (["leftover"], {}, {})
    DestroyClusterOperator(task_id="destroy_cluster", settings=settings[0]).execute(context={})
    assert cloud.clusters() == {} and cloud.state()["tfstate"] == {}
    assert [c["argv"][0] for c in cloud.calls("gcluster")] == ["create", "destroy"]
