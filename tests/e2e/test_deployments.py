"""Two Airflow deployments on one sandbox cluster and bucket.

Both as shipped (no TPU_RL_DEPLOYMENT_ID): staging's run of a schedule slot is still in flight
(its Jobs and token Secret on the cluster, its checkpoints, attempts record and export in the
bucket) when production runs the same slot, hence the same run id. Production's run neither
follows, replaces nor deletes any of it, and production's janitor leaves it. A second
deployment is simulated in this one process: another metadata DB has neither the first's runs
(dag.test replaces the run of the same id) nor its Variables (deleted in between).

And a run whose deployment setting changes while it trains still removes all it created.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest

from sandbox.harness import SETTINGS, RunResult, Sandbox
from tests.support.e2e_runs import janitor_run

# One schedule slot: one run id in every Airflow. This hour's, not a fixed date: dag.test starts
# the run at its logical date (airflow/sdk/definitions/dag.py, DAG.test: start_date=logical_date
# or run_after), and the run's work deadline counts dagrun_timeout from that start.
SLOT = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
CONF = {**SETTINGS, "cluster_mode": "existing", "reservation": ""}  # one cluster, kept
KINDS = ("jobs", "jobsets", "secrets")

pytestmark = pytest.mark.timeout(600)


def fresh_install() -> None:
    """Another Airflow's metadata DB: none of this one's Variables (its identity included)."""
    from airflow.models.variable import Variable

    Variable.delete("tpu_rl_deployment_id")


def stored_identity() -> str | None:
    from airflow.models.variable import Variable

    return Variable.get("tpu_rl_deployment_id", default_var=None)


def cluster_objects(box: Sandbox) -> dict[str, tuple[str, str, Any]]:
    """Every Job, JobSet and Secret on the cluster: (uid, resourceVersion, data) by kind/name."""
    return {
        f"{kind}/{o['metadata']['name']}": (
            o["metadata"]["uid"],
            o["metadata"]["resourceVersion"],
            o.get("data"),
        )
        for kind in KINDS
        for o in box.emu.list(kind)
    }


def bucket_objects(box: Sandbox) -> dict[str, bytes]:
    """Every object of the bucket but the converted model's folder (shared on purpose)."""
    bucket = SETTINGS["gcs_bucket"]
    return {
        name: box.gcs.read(f"gs://{bucket}/{name}")
        for name in box.gcs.names(bucket)
        if "/max-text-format/" not in name
    }


@contextlib.contextmanager
def still_in_flight() -> Iterator[None]:
    """The run's Kubernetes cleanup does not happen yet: its objects stay as mid-run."""
    from tpu_rl.operators.cluster_objects import CleanupKubernetesOperator

    with mock.patch.object(CleanupKubernetesOperator, "execute", lambda self, context: {}):
        yield


@contextlib.contextmanager
def listed_clusters(box: Sandbox) -> Iterator[None]:
    from google.cloud.container_v1 import ClusterManagerClient

    with mock.patch.object(
        ClusterManagerClient,
        "list_clusters",
        lambda client, parent=None, **kw: box.control_plane.list_clusters(parent),
    ):
        yield


def test_two_deployments_share_a_cluster_and_bucket_without_touching_each_other(
    airflow_db, tmp_path
):
    with Sandbox(tmp_path).up(existing_cluster="gemma4-rl") as box, listed_clusters(box):
        fresh_install()
        with still_in_flight():
            staging = box.run(CONF, logical_date=SLOT)
        assert staging.state == "success", staging.why()
        staging_id = stored_identity()
        in_flight = cluster_objects(box)
        staging_files = bucket_objects(box)
        assert {k.split("/")[0] for k in in_flight} >= {"jobs", "secrets"}, in_flight
        assert any("/hf-trained/" in n for n in staging_files), sorted(staging_files)
        assert any("/checkpoints/" in n for n in staging_files), sorted(staging_files)

        fresh_install()  # production: another Airflow, configured the same way
        production: RunResult = box.run(CONF, logical_date=SLOT)
        assert production.run_id == staging.run_id
        assert production.state == "success", production.why()
        # production made its own Jobs and Secret (it followed none of staging's) and removed
        # only those: staging's are there, unchanged (same uid, version and token)
        assert production.task_states["train"] == "success"
        assert cluster_objects(box) == in_flight
        # staging's checkpoints, attempts record and export: not one byte changed; production's
        # export is a folder of its own
        files = bucket_objects(box)
        assert {n: files.get(n) for n in staging_files} == staging_files
        exports = {n.split("/hf-trained/")[1].split("/")[0] for n in files if "/hf-trained/" in n}
        assert len(exports) == 2, sorted(exports)
        # each install generated an identity of its own, from one and the same configuration
        production_id = stored_identity()
        assert None not in (staging_id, production_id) and staging_id != production_id

        # production's janitor, deletion on and no grace: staging's in-flight run is not its own
        state, report = janitor_run(
            {
                "project": SETTINGS["project"],
                "region": SETTINGS["region"],
                "gcs_bucket": SETTINGS["gcs_bucket"],
                "existing_clusters": ["gemma4-rl"],
                "dry_run": False,
                "grace_minutes": 0,
            }
        )
        assert state == "success", report
        assert report["remove"] == [] and report["failed"] == {}, report
        assert cluster_objects(box) == in_flight


def test_a_deployment_setting_changed_mid_run_does_not_orphan_the_run(airflow_db, tmp_path):
    """The setting changes once the training Job exists: the later Jobs and the cleanup keep the
    identity the run started with, and the cleanup removes everything the run made."""

    def change_setting_when_training_starts(resource: Any, obj: dict[str, Any]) -> None:
        if resource.kind == "Job" and obj["metadata"]["name"].endswith("-train"):
            os.environ["TPU_RL_DEPLOYMENT_ID"] = "renamed-mid-run"

    with Sandbox(tmp_path).up(
        existing_cluster="gemma4-rl", env={"TPU_RL_DEPLOYMENT_ID": "before-the-change"}
    ) as box:
        box.emu.admission_hooks.append(change_setting_when_training_starts)
        result = box.run(CONF)
        assert os.environ["TPU_RL_DEPLOYMENT_ID"] == "renamed-mid-run"
    assert result.state == "success", result.why()
    assert result.task_states["cleanup_kubernetes"] == "success"
    assert result.leftovers == []
    assert result.xcoms["validate.return_value"]["deployment_id"] == "before-the-change"


def test_a_cluster_of_another_deployment_is_neither_adopted_nor_destroyed(airflow_db, tmp_path):
    """Staging created `gemma4-rl` and keeps it; production's run names the same cluster: it
    shares the cluster's Terraform state, so deploying would adopt staging's cluster and the
    cleanup would destroy it. Production's run fails at create_cluster, naming the owner, and
    its cleanup_cluster and timeout callback leave the cluster."""
    from airflow.sdk.execution_time.xcom import XCom

    from tpu_rl.dag.callbacks import cleanup_after_timeout

    conf = {**SETTINGS, "cluster_mode": "create", "keep_cluster": True}
    with Sandbox(tmp_path).up() as box:
        fresh_install()
        staging = box.run(conf, logical_date=SLOT)
        assert staging.state == "success", staging.why()
        staging_id = stored_identity()
        clusters = box.control_plane.list_clusters(
            f"projects/{SETTINGS['project']}/locations/{SETTINGS['region']}"
        ).clusters
        assert [c.name for c in clusters] == [SETTINGS["cluster_name"]]

        fresh_install()
        production = box.run({**conf, "keep_cluster": False}, logical_date=SLOT)
        assert production.state == "failed"
        assert production.task_states["create_cluster"] == "failed", production.task_states
        assert production.task_states["cleanup_cluster"] == "success"
        assert f"deployment {staging_id!r}" in production.xcoms["create_cluster.failure"]
        record = production.xcoms["validate.return_value"]  # what the callback reads
        with mock.patch.object(XCom, "get_one", lambda **kw: record):
            timeout = cleanup_after_timeout({"reason": "timed_out", "run_id": production.run_id})
        assert timeout is not None and timeout["cluster"].startswith("kept: "), timeout
        assert box.control_plane.deleted == []
        clusters = box.control_plane.list_clusters(
            f"projects/{SETTINGS['project']}/locations/{SETTINGS['region']}"
        ).clusters
        assert [c.name for c in clusters] == [SETTINGS["cluster_name"]]
