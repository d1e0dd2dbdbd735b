"""The janitor rebuilds a leftover cluster's settings from GKE's node pools, capacity included."""

from __future__ import annotations

import pytest
from google.cloud.container_v1 import Cluster

from tpu_rl.janitor.params import JanitorParams
from tpu_rl.janitor.rules import destroy_settings
from tpu_rl.settings.run_settings import load_settings

PARAMS = JanitorParams(
    project="tpu-rl-sandbox",
    region="us-east5",
    clusters=(),
    existing_clusters=(),
    namespace="default",
    grace_minutes=60,
    dry_run=False,
    gcs_bucket="tpu-rl-sandbox-bucket",
    cluster_toolkit_version="v1.82.0",
)


def cluster(**node_config) -> Cluster:
    pool = {
        "name": "gke-tpu-v6-pool",
        "locations": ["us-east5-b"],
        "config": {"machine_type": "ct6e-standard-4t", **node_config},
        "placement_policy": {"tpu_topology": "4x8"},
    }
    return Cluster(name="gemma4-rl", locations=["us-east5-b"], node_pools=[pool])


@pytest.mark.parametrize(
    ("node_config", "capacity"),
    [
        ({"reservation_affinity": {"values": ["v6e-32-reservation"]}}, "reservation"),
        ({"flex_start": True}, "flex_start"),
        ({"spot": True}, "spot"),
    ],
)
def test_a_leftover_cluster_of_any_capacity_can_be_destroyed(node_config, capacity):
    settings = load_settings(destroy_settings(cluster(**node_config), PARAMS))
    assert settings.capacity == capacity
    assert settings.reservation == ("v6e-32-reservation" if capacity == "reservation" else "")
