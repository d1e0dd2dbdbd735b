"""JobSet's exclusive placement by node pool (multi-slice): each worker Job of the
Pathways JobSet takes one TPU slice of its own; a Job sized for two slices, or more Jobs than
slices, leaves pods Pending with kube-scheduler's inter-pod affinity reasons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.cluster_model import POOL_LABEL, ClusterModel
from sandbox.exclusive_placement import EXCLUSIVE
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.scheduler import Scheduler
from tests.support.sandbox_cluster import NS, VARS

JOBSET = "rl-1-backend"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    """Two v6e-32 slices (num_slices 2: two node pools of 8 hosts) and the backend's JobSet,
    exclusive by node pool as the product's (tpu_rl.backend.jobset)."""
    with running_emulator() as emulator:
        ClusterModel.described({**VARS, "num_slices": 2}).provision(emulator)
        emulator.create(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {
                    "name": JOBSET,
                    "namespace": NS,
                    "annotations": {EXCLUSIVE: POOL_LABEL},
                },
                "spec": {"replicatedJobs": []},
            }
        )
        yield emulator


def worker(job: str, index: int) -> dict[str, Any]:
    """A pod of worker Job `job`, as the JobSet's Job makes it: one TPU host."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}",
            "namespace": NS,
            "labels": {"jobset.sigs.k8s.io/jobset-name": JOBSET, "job-name": job},
        },
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x8"},
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}],
            "containers": [
                {"name": "w", "image": "x", "resources": {"limits": {"google.com/tpu": "4"}}}
            ],
        },
    }


def placed(emu: KubeEmulator, pods: list[dict[str, Any]]) -> dict[str, str]:
    """Each pod's node pool once scheduled, or its FailedScheduling message."""
    for pod in pods:
        emu.create(pod)
    Scheduler(emu).schedule()
    where = {}
    for pod in pods:
        found = emu.get("pods", NS, pod["metadata"]["name"])
        if node := found["spec"].get("nodeName"):
            where[pod["metadata"]["name"]] = emu.get("nodes", "", node)["metadata"]["labels"][
                POOL_LABEL
            ]
        else:
            [cond] = [c for c in found["status"]["conditions"] if c["type"] == "PodScheduled"]
            where[pod["metadata"]["name"]] = cond["message"]
    return where


def test_each_worker_job_takes_a_slice_of_its_own(emu: KubeEmulator) -> None:
    """Pods of the two Jobs arrive interleaved; first-fit alone would split both Jobs across
    the two pools."""
    pods = [worker(job, i) for i in range(8) for job in ("w-0", "w-1")]
    where = placed(emu, pods)
    pools = {job: {where[f"{job}-{i}"] for i in range(8)} for job in ("w-0", "w-1")}
    assert all(len(p) == 1 for p in pools.values()), pools
    assert pools["w-0"] != pools["w-1"], pools


def test_a_job_sized_for_two_slices_leaves_half_its_pods_pending(emu: KubeEmulator) -> None:
    """One worker Job of 16 hosts (a JobSet whose slices do not match the node pools)."""
    where = placed(emu, [worker("w-0", i) for i in range(16)])
    bound = {w for w in where.values() if w.startswith("gke-")}
    assert len(bound) == 1, where
    pending = [w for w in where.values() if not w.startswith("gke-")]
    assert len(pending) == 8 and all("didn't match pod affinity rules" in w for w in pending)


def test_more_jobs_than_slices_leave_the_extra_job_pending(emu: KubeEmulator) -> None:
    """Three Jobs of 4 hosts on two slices: the third may not share a slice, though hosts are
    free."""
    where = placed(emu, [worker(job, i) for job in ("w-0", "w-1", "w-2") for i in range(4)])
    assert len({where[f"w-{j}-0"] for j in (0, 1)}) == 2, where
    assert all("didn't match pod anti-affinity rules" in where[f"w-2-{i}"] for i in range(4))
