"""What each rung of a capacity ladder creates, for `make plan` (tpu_rl.cluster.ladder_plan).
The plan's files of a whole ladder: tests/unit/cluster/test_ladder.py."""

from __future__ import annotations

import yaml

from sandbox.paths import BLUEPRINT_FIXTURES
from tests.support.ladder import TWO_RUNGS, example
from tpu_rl.cluster import blueprint, capacity
from tpu_rl.cluster.ladder_plan import ladder_plan, rung_file, tpu_pool_name
from tpu_rl.settings.run_settings import load_settings

BLUEPRINT = (BLUEPRINT_FIXTURES / "gke-tpu-v6e-advanced.yaml").read_text()  # the tutorial's


def test_rung_one_uses_the_clusters_own_files_the_others_their_own():
    assert rung_file(1, "blueprint.yaml") == "blueprint.yaml"
    assert rung_file(3, "deployment.yaml") == "rung-3.deployment.yaml"


def test_each_rung_is_a_row_in_order_and_the_later_rungs_files_are_the_plans():
    settings = load_settings({**example(), "capacity_ladder": TWO_RUNGS})
    rows, files = ladder_plan(BLUEPRINT, settings, "d", "state/prefix")
    assert [r["rung"] for r in rows] == ["reservation@us-east5-b", "spot@us-east5-a"]
    first, second = rows
    assert first["files"] == ["blueprint.yaml", "deployment.yaml"]
    assert second["files"] == ["rung-2.blueprint.yaml", "rung-2.deployment.yaml"]
    assert sorted(files) == sorted(second["files"])  # rung 1's are the cluster's own
    assert (first["tpu_pool"], second["tpu_pool"]) == ("gke-tpu-v6e-pool", "gke-tpu-v6e-pool-rung2")
    assert "(reservation v6e-32-reservation)" in first["creates"]
    assert "replacing the previous rung's pool" in second["creates"]
    assert "replacing" not in first["creates"]
    assert first["cross_zone"] is None and second["cross_zone"] is not None
    assert second["timeout_create"] == capacity.POOL_CREATE_TIMEOUT
    assert second["node_selector"] == {"cloud.google.com/gke-spot": "true"}
    deployment = yaml.safe_load(files["rung-2.deployment.yaml"])
    assert deployment["vars"]["zone"] == "us-east5-a"


def test_the_tpu_pool_is_the_node_pool_module_of_the_blueprint():
    assert tpu_pool_name(BLUEPRINT) == "gke-tpu-v6e-pool"
    edited = yaml.safe_load(BLUEPRINT)
    for group in edited["deployment_groups"]:
        for module in group.get("modules") or []:
            if module.get("source") == blueprint.NODE_POOL_SOURCE:
                module["settings"]["name"] = "renamed"
    assert tpu_pool_name(yaml.safe_dump(edited)) == "renamed"
