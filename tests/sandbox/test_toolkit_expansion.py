"""The fake gcluster expands TPU pools as Cluster Toolkit's expandHardwareSettings does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sandbox.cluster_model import ClusterModel
from tests.sandbox.test_capacity import TPU_POOL, deploy_tutorial_blueprint


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
