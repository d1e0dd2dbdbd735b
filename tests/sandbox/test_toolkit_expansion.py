"""The fake gcluster expands TPU pools as Cluster Toolkit's expandHardwareSettings does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import VENDOR
from tests.sandbox.cloud import SANDBOX_BIN, sandbox_env
from tests.sandbox.cluster_model import ClusterModel
from tests.sandbox.test_capacity import TPU_POOL, VARS


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
    bp = yaml.safe_load((VENDOR / "cluster-toolkit" / "gke-tpu-v6e-advanced.yaml").read_text())
    bp["vars"].update(VARS, region="us-east5", reservation="r1", kueue_configuration_path="")
    for group in bp["deployment_groups"]:
        for module in group["modules"]:
            if module["source"] == "modules/compute/gke-node-pool":
                module["settings"].update(edits)
    (tmp_path / "bp.yaml").write_text(yaml.safe_dump(bp))
    env = {**os.environ, **sandbox_env(tmp_path, "http://unused", "http://unused"),
           "FAKE_GCLUSTER_FAIL": fault}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SANDBOX_BIN / "gcluster"), "deploy", "bp.yaml", "--auto-approve"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
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
    status = json.loads((tmp_path / "cloud.json").read_text())["clusters"]["c1"]["status"]
    if refusal is None:
        assert (done.returncode, status) == (0, "RUNNING"), done.stderr
        model = ClusterModel.from_blueprint(expanded, {})
        tpu = model.pool(TPU_POOL)
        assert tpu is not None and tpu.scales_from_zero == (static is None)
    else:
        assert (done.returncode, status) == (1, "PARTIAL") and refusal in done.stderr
