"""The sandbox's GKE knows v6e, v5p and tpu7x: it refuses a TPU pool of a topology its
machine type does not make, labels the nodes with the machine type's own accelerator and chips,
and leaves a pod whose selector or TPU limit does not match those nodes Pending."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.cloud import SANDBOX_BIN, sandbox_env
from sandbox.cluster_model import ClusterModel
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.scheduler import Scheduler
from sandbox.toolkit_expansion import policy_name
from sandbox.tpu_machines import TPU_MACHINES
from tests.support.cells import cell_conf
from tests.support.sandbox_cluster import NS, TPU_POOL, VARS, deploy_tutorial_blueprint
from tpu_rl.catalogue.cells import CELLS, Cell
from tpu_rl.plan import main as plan

ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


@pytest.mark.parametrize(
    ("machine", "topology", "offered"),
    [
        ("ct6e-standard-4t", "2x4", True),
        ("ct6e-standard-4t", "4x8", True),
        ("ct6e-standard-4t", "2x2x4", False),  # v6e slices are 2D
        ("ct5p-hightpu-4t", "2x2x1", True),
        ("ct5p-hightpu-4t", "2x4x4", True),
        ("ct5p-hightpu-4t", "16x16x24", True),  # 96 cubes: v5p's largest slice
        ("ct5p-hightpu-4t", "4x8", False),
        ("ct5p-hightpu-4t", "2x3x4", False),
        ("ct5p-hightpu-4t", "8x4x4", False),  # A <= B <= C
        ("ct5p-hightpu-4t", "24x24x24", False),  # 216 cubes > 140
        ("tpu7x-standard-4t", "4x4x4", True),
        ("tpu7x-standard-4t", "12x12x28", True),  # 63 cubes
        ("tpu7x-standard-4t", "16x32x32", False),  # 256 cubes > 144
    ],
)
def test_gcluster_refuses_a_topology_the_machine_type_does_not_make(
    tmp_path: Path, machine: str, topology: str, offered: bool
) -> None:
    """xpk's system_characteristics (sandbox/tpu_machines.py): GKE's 400 before any VM. (A
    tpu7x pool is placed by its workload policy: test_a_multi_host_tpu7x_pool_...)"""
    placement = {"type": "COMPACT", "tpu_topology": topology}
    boot = TPU_MACHINES[machine].boot_disks[0]
    edits: dict[str, Any] = {
        "machine_type": machine,
        "placement_policy": placement,
        "disk_type": boot,
    }
    used: tuple[dict[str, Any], ...] = ()
    if machine == "tpu7x-standard-4t":
        edits["placement_policy"], used = None, (workload_policy(topology),)
    done, status = deploy_tutorial_blueprint(tmp_path, edits, used=used)
    if offered:
        assert (done.returncode, status) == (0, "RUNNING"), done.stderr
    else:
        assert (done.returncode, status) == (1, "PARTIAL")
        assert (
            f"Error 400: Invalid TPU topology '{topology}' for machine type '{machine}'"
            in done.stderr
        )


def workload_policy(
    topology: str, kind: str = "HIGH_THROUGHPUT", region: str = "us-east5"
) -> dict[str, Any]:
    """Cluster Toolkit's gke-tpu-7x example's workload policy module (examples/gke-tpu-7x/
    gke-tpu-7x.yaml at 1047080, lines 144-152), of this topology, type and region."""
    return {
        "id": "workload_policy",
        "source": "modules/compute/resource-policy",
        "settings": {
            "name": "tpu7x-workload-policy",
            "project_id": "$(vars.project_id)",
            "region": region,
            "workload_policy": {"accelerator_topology": topology, "type": kind},
        },
    }


TPU7X = {"machine_type": "tpu7x-standard-4t", "placement_policy": None}
# the name the example's policy module gives its policy, in the sandbox's cloud
POLICY = policy_name("workload_policy", {"workload_policy": workload_policy("4x4x4")}, {})


@pytest.mark.parametrize(
    ("edits", "used", "refusal"),
    [
        # the tutorial's v6e placement, on TPU7x: a topology and no workload policy
        ({**TPU7X, "placement_policy": {"type": "COMPACT", "tpu_topology": "4x4x4"}}, (),
         "are placed by a workload policy: create one of type HIGH_THROUGHPUT with accelerator "
         "topology '4x4x4' in us-east5"),
        (TPU7X, (workload_policy("4x4x4", kind="HIGH_AVAILABILITY"),),
         f"resource policy '{POLICY}' is not a HIGH_THROUGHPUT workload policy"),
        (TPU7X, (workload_policy("4x4x4", region="us-central1"),),
         f"resource policy '{POLICY}' not found in region us-east5"),
        ({**TPU7X, "placement_policy": {"type": "COMPACT", "name": POLICY,
                                        "tpu_topology": "4x4x8"}},
         (workload_policy("4x4x4"),), "with accelerator topology '4x4x8'"),
        # Cluster Toolkit's gke-tpu-7x pool: placed by the workload policy it uses
        (TPU7X, (workload_policy("4x4x4"),), None),
        # one VM (2x2x1) is no multi-host slice; v5p keeps its topology flag
        ({**TPU7X, "placement_policy": {"type": "COMPACT", "tpu_topology": "2x2x1"}}, (), None),
        ({"machine_type": "ct5p-hightpu-4t", "disk_type": "pd-balanced",
          "placement_policy": {"type": "COMPACT", "tpu_topology": "4x4x4"}}, (), None),
    ],
)  # fmt: skip
def test_a_multi_host_tpu7x_pool_needs_a_workload_policy_of_its_topology(
    tmp_path: Path, edits: dict[str, Any], used: tuple[dict[str, Any], ...], refusal: str | None
) -> None:
    """GKE's Ironwood rule (sandbox/tpu_machines.py): a multi-host TPU7x pool's placement policy
    names a HIGH_THROUGHPUT workload policy of its topology in its region, else GKE's 400 before
    any VM. Placed so, gcluster counts its hosts from the policy's topology (16 VMs of 4x4x4)."""
    done, status = deploy_tutorial_blueprint(tmp_path, edits, used=used)
    if refusal is not None:
        assert (done.returncode, status) == (1, "PARTIAL")
        assert refusal in done.stderr, done.stderr
        return
    assert (done.returncode, status) == (0, "RUNNING"), done.stderr
    expanded = yaml.safe_load(
        (tmp_path / "c1" / ".ghpc" / "artifacts" / "expanded_blueprint.yaml").read_text()
    )
    pool = ClusterModel.from_blueprint(expanded, {}).pool(TPU_POOL)
    assert pool is not None
    topology = pool.labels["cloud.google.com/gke-tpu-topology"]
    assert pool.nodes == math.prod(int(d) for d in topology.split("x")) // 4, (pool, topology)


def deploy_plan(tmp_path: Path, cell: Cell, disk_type: str | None = None) -> tuple[int, str]:
    """`make plan`'s blueprint and deployment file for the cell, deployed as its create_cluster
    step runs gcluster (with the TPU pool's disk_type replaced, if given): its exit code and
    stderr."""
    tmp_path.mkdir(exist_ok=True)
    conf = tmp_path / "cell.json"
    conf.write_text(json.dumps(cell_conf(cell)))
    out = tmp_path / "out"
    assert plan([str(conf), str(out)]) == 0
    if disk_type is not None:
        bp = yaml.safe_load((out / "blueprint.yaml").read_text())
        [pool] = [
            m for g in bp["deployment_groups"] for m in g["modules"]
            if m["source"] == "modules/compute/gke-node-pool"
        ]  # fmt: skip
        pool["settings"]["disk_type"] = disk_type
        (out / "blueprint.yaml").write_text(yaml.safe_dump(bp))
    steps = json.loads((out / "plan.json").read_text())["steps"]
    [argv] = [s["argv"] for s in steps if s["id"] == "create_cluster"]
    env = {**os.environ, **sandbox_env(tmp_path, "http://unused", "http://unused")}
    done = subprocess.run(
        [sys.executable, str(SANDBOX_BIN / "gcluster"), *argv[1:]],
        cwd=out, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode, done.stderr


@pytest.mark.parametrize("cell", CELLS, ids=[f"{c.model_name}@{c.tpu_type}" for c in CELLS])
def test_every_catalogue_cells_cluster_deploys_on_the_sandboxs_gke(
    tmp_path: Path, cell: Cell
) -> None:
    """`make plan`'s blueprint and deployment file for each cell, deployed as its create_cluster
    step runs gcluster: GKE takes every cell's TPU pool (a tpu7x pool with its workload policy,
    a v5p pool booting from pd-balanced), with the slice's hosts as nodes."""
    code, stderr = deploy_plan(tmp_path, cell)
    assert code == 0, stderr
    [record] = json.loads((tmp_path / "cloud.json").read_text())["clusters"].values()
    assert record["status"] == "RUNNING"
    model = ClusterModel.from_blueprint(record["blueprint"], record["staged"])
    [pool] = [p for p in model.pools if p.slice_hosts]
    chips = math.prod(int(d) for d in cell.topology.split("x"))
    assert (pool.machine_type, pool.nodes) == (cell.generation.machine_type, chips // 4)
    assert pool.labels["cloud.google.com/gke-tpu-topology"] == cell.topology


@pytest.mark.parametrize(
    ("machine", "disk_type", "taken"),
    [
        ("ct5p-hightpu-4t", "hyperdisk-balanced", False),  # the tutorial blueprint's, on v5p
        ("ct5p-hightpu-4t", "pd-balanced", True),
        ("ct6e-standard-4t", "hyperdisk-balanced", True),
        ("ct6e-standard-4t", "pd-balanced", False),
        ("ct6e-standard-4t", None, False),  # unset: GKE's default, pd-balanced
    ],
)
def test_gke_refuses_a_tpu_pool_whose_boot_disk_its_machine_type_does_not_take(
    tmp_path: Path, machine: str, disk_type: str | None, taken: bool
) -> None:
    """Cloud TPU's disk table (sandbox/tpu_machines.py): v5p boots from Balanced Persistent Disk,
    v6e from Hyperdisk Balanced; another boot disk is GKE's 400 before any VM."""
    topology = "2x2x1" if machine == "ct5p-hightpu-4t" else "2x4"
    placement = {"type": "COMPACT", "tpu_topology": topology}
    edits = {"machine_type": machine, "placement_policy": placement, "disk_type": disk_type}
    done, status = deploy_tutorial_blueprint(tmp_path, edits)
    if taken:
        assert (done.returncode, status) == (0, "RUNNING"), done.stderr
        return
    assert (done.returncode, status) == (1, "PARTIAL")
    assert (
        "Error creating NodePool: googleapi: Error 400: Invalid value for field "
        f"'nodePool.config.diskType': '{disk_type or 'pd-balanced'}': machine type '{machine}' "
        "does not support this boot disk type" in done.stderr
    ), done.stderr


V5P_CELL = next(c for c in CELLS if c.generation.name == "v5p")


def test_a_v5p_cells_blueprint_boots_its_pool_from_what_gke_takes(tmp_path: Path) -> None:
    """The product's blueprint for a v5p cell deploys; the same blueprint with the TPU pool's
    disk_type the tutorial's v6e blueprint gives every pool (what the product rendered for every
    generation before) is GKE's 400 at node-pool creation."""
    code, stderr = deploy_plan(tmp_path / "product", V5P_CELL)
    assert code == 0, stderr
    code, stderr = deploy_plan(tmp_path / "tutorial", V5P_CELL, "hyperdisk-balanced")
    assert code == 1
    assert "'hyperdisk-balanced': machine type 'ct5p-hightpu-4t' does not support" in stderr


def worker(name: str, selector: dict[str, str], chips: str) -> dict[str, Any]:
    """A Pathways worker pod on the TPU pool, as the product's JobSet makes one."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}],
            "containers": [
                {"name": "w", "image": "x", "resources": {"limits": {"google.com/tpu": chips}}}
            ],
        },
    }


def scheduled(emu: KubeEmulator, pod: dict[str, Any]) -> str:
    """The node the scheduler binds the pod to, or its FailedScheduling message."""
    emu.create(pod)
    Scheduler(emu).schedule()
    found = emu.get("pods", NS, pod["metadata"]["name"])
    if node := found["spec"].get("nodeName"):
        return node
    [condition] = [c for c in found["status"]["conditions"] if c["type"] == "PodScheduled"]
    return condition["message"]


def test_v5p_nodes_carry_their_own_accelerator_and_chips(emu: KubeEmulator) -> None:
    """A v5p-32 pool (2x2x4: 4 hosts) whose blueprint still names v6e's accelerator: GKE labels
    its nodes tpu-v5p-slice with 4 chips each, so a pod selecting v6e, or asking 8 chips of a
    4-chip VM, stays Pending; the v5p pod with 4 chips is bound."""
    variables = {**VARS, "machine_type": "ct5p-hightpu-4t", "tpu_topology": "2x2x4",
                 "accelerator_type": "tpu-v6e-slice"}  # fmt: skip
    model = ClusterModel.described(variables)
    pool = model.pool(TPU_POOL)
    assert pool is not None and (pool.nodes, pool.labels[ACCELERATOR]) == (4, "tpu-v5p-slice")
    model.provision(emu)
    tpu_nodes = [n for n in emu.list("nodes") if ACCELERATOR in n["metadata"]["labels"]]
    assert {n["status"]["allocatable"]["google.com/tpu"] for n in tpu_nodes} == {"4"}
    topology = {"cloud.google.com/gke-tpu-topology": "2x2x4"}
    assert "didn't match Pod's node affinity/selector" in scheduled(
        emu, worker("v6e", {ACCELERATOR: "tpu-v6e-slice", **topology}, "4")
    )
    assert "Insufficient google.com/tpu" in scheduled(
        emu, worker("eight", {ACCELERATOR: "tpu-v5p-slice"}, "8")
    )
    assert scheduled(emu, worker("v5p", {ACCELERATOR: "tpu-v5p-slice", **topology}, "4")) in {
        n["metadata"]["name"] for n in tpu_nodes
    }
