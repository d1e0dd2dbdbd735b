"""Deployments in whole in-process runs: a run whose deployment setting changes while it
trains still removes all it created; a cluster another deployment created and keeps is neither
adopted nor destroyed. A second deployment is simulated in this one process: another metadata
DB has neither the first's runs (dag.test replaces the run of the same id) nor its Variables
(deleted in between).

Two deployments sharing a cluster and a bucket, each run in flight beside the other's, and one's
janitor beside the other's run, are proven on real processes: tests/processes/test_deployments.py.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest

from sandbox.harness import SETTINGS, Sandbox

# One schedule slot: one run id in every Airflow. This hour's, not a fixed date: dag.test starts
# the run at its logical date (airflow/sdk/definitions/dag.py, DAG.test: start_date=logical_date
# or run_after), and the run's work deadline counts dagrun_timeout from that start.
SLOT = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
CONF = {**SETTINGS, "cluster_mode": "existing", "reservation": ""}  # one cluster, kept

pytestmark = pytest.mark.timeout(600)


def fresh_install() -> None:
    """Another Airflow's metadata DB: none of this one's Variables (its identity included)."""
    from airflow.models.variable import Variable

    Variable.delete("tpu_rl_deployment_id")


def stored_identity() -> str | None:
    from airflow.models.variable import Variable

    return Variable.get("tpu_rl_deployment_id", default_var=None)


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
