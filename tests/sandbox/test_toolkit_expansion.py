"""The fake gcluster expands TPU pools as Cluster Toolkit's expandHardwareSettings does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox import zone_capacity
from sandbox.cluster_model import ClusterModel
from sandbox.toolkit_expansion import planned_changes
from tests.support.sandbox_cluster import TPU_POOL, deploy_tutorial_blueprint


@pytest.mark.parametrize(
    ("edits", "fault", "static", "refusal"),
    [
        ({}, "", 8, None),  # the tutorial's reservation pool: static, 4x8 / 4 chips per VM
        ({"spot": True, "reservation_affinity": None}, "", 8, None),
        ({"enable_flex_start": True, "reservation_affinity": None,
          "autoscaling_min_node_count": 0, "autoscaling_max_node_count": 8}, "", None, None),
        ({"enable_flex_start": True, "reservation_affinity": None, "static_node_count": 8}, "",
         8, "enable_flex_start does not work with static_node_count"),
        ({"spot": True, "reservation_affinity": None}, "spot-stockout", 8, "GCE_STOCKOUT"),
    ],
)  # fmt: skip
def test_gcluster_expands_tpu_pools_as_cluster_toolkit_does(
    tmp_path: Path, edits: dict[str, Any], fault: str, static: int | None, refusal: str | None
) -> None:
    """pkg/config/hardware.go expandHardwareSettings: a TPU pool with a topology and no
    static_node_count gets the slice's hosts, unless enable_flex_start; a Spot pool is static,
    so a Spot stockout fails the deploy (PARTIAL), nothing waits for capacity."""
    done, status = deploy_tutorial_blueprint(tmp_path, edits, fault)
    expanded = yaml.safe_load(
        (tmp_path / "c1" / ".ghpc" / "artifacts" / "expanded_blueprint.yaml").read_text()
    )
    pool = next(
        m["settings"]
        for g in expanded["deployment_groups"]
        for m in g["modules"]
        if m["source"] == "modules/compute/gke-node-pool"
    )
    assert pool.get("static_node_count") == static
    if refusal is None:
        assert (done.returncode, status) == (0, "RUNNING"), done.stderr
        model = ClusterModel.from_blueprint(expanded, {})
        tpu = model.pool(TPU_POOL)
        assert tpu is not None and tpu.scales_from_zero == (static is None)
    else:
        assert (done.returncode, status) == (1, "PARTIAL") and refusal in done.stderr


def _write_capacity(path: Path, clock: float, end: float | None, kind: str = "stockout") -> str:
    window = {"capacity": "spot", "zone": "us-east5-b", "start": 0.0, "end": end, "kind": kind}
    path.write_text(json.dumps({"clock": clock, "stockouts": [window]}))
    return str(path)


def _spot_blueprint(timeout: str | None) -> dict[str, Any]:
    pool = {"static_node_count": 8, "spot": True, "zones": ["$(vars.zone)"]}
    if timeout:
        pool["timeout_create"] = timeout
    module = {"id": "tpu", "source": "modules/compute/gke-node-pool", "settings": pool}
    return {
        "vars": {"zone": "us-east5-b", "project_id": "p"},
        "deployment_groups": [{"group": "primary", "modules": [module]}],
    }


@pytest.mark.parametrize(
    ("timeout", "end", "answer"),
    [
        (None, None, "timeout while waiting for state to become 'DONE' (last state: 'RUNNING', "
         "timeout: 30m0s)"),  # the provider's 30-minute default: terraform gives up first
        ("45m", None, "Not all instances running in IGM after 35m0s. Expected 8, running 0"),
        ("45m", 20 * 60.0, None),  # the VMs come back within GKE's wait: the pool stands
        ("45m", 40 * 60.0, "GCE_STOCKOUT"),  # after GKE's wait: GKE's stockout answer
    ],
)  # fmt: skip
def test_a_static_pool_waits_for_its_vms_on_the_simulated_clock(tmp_path, timeout, end, answer):
    """GKE's instance-group wait (35m) beside terraform's create timeout: whichever ends first
    answers, unless the stockout ends before both."""
    path = _write_capacity(tmp_path / "capacity.json", 0.0, end)
    refusal = zone_capacity.deploy_refusal(_spot_blueprint(timeout), path)
    if answer is None:
        assert refusal is None
    else:
        assert refusal is not None and answer in refusal, refusal


def _ladder_blueprint(pool_name: str, pool_zone: str, cluster_zone: str, flex: bool) -> dict:
    cluster = {
        "system_node_pool_zones": [cluster_zone],
        "enable_pathways_for_tpus": True,
    }
    pool = {"name": pool_name, "zones": [pool_zone], "enable_flex_start": flex}
    return {
        "vars": {},
        "deployment_groups": [
            {
                "group": "primary",
                "modules": [
                    {"id": "c", "source": "modules/scheduler/gke-cluster", "settings": cluster},
                    {"id": "tpu", "source": "modules/compute/gke-node-pool", "settings": pool},
                ],
            }
        ],
    }


def test_terraform_moves_every_pool_with_the_clusters_zones_and_replaces_a_renamed_pool():
    """The cluster's zones feed its system pool and cpu-np (gke-cluster main.tf), node_locations
    is updated in place, a pool's name forces a new pool."""
    first = _ladder_blueprint("pool", "us-east5-b", "us-east5-b", True)
    moved = _ladder_blueprint("pool", "us-east5-a", "us-east5-a", True)  # zone moved
    assert planned_changes(first, moved) == {
        "google_container_cluster.gke_cluster": "update in place",
        "google_container_node_pool.system_node_pools[0]": "update in place",
        "google_container_node_pool.cpu_np[0]": "update in place",
        "module.tpu.google_container_node_pool.node_pool[0]": "update in place",
    }
    rung2 = _ladder_blueprint("pool-rung2", "us-east5-a", "us-east5-b", True)  # the fix
    assert planned_changes(first, rung2) == {
        "module.tpu.google_container_node_pool.node_pool[0]": "replace"
    }
    assert planned_changes(None, first) == {}
