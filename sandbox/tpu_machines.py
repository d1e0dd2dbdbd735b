"""GKE's TPU machine types as the sandbox's cloud knows them: chips per VM, the accelerator label
GKE puts on the nodes, the VM's allocatable CPU and memory, the boot disk types its VMs take and
the slice topologies a node pool of the machine type may have. GKE refuses a TPU pool of another
topology or boot disk type; its nodes carry the machine type's own accelerator label and chips,
whatever the blueprint's variables say.

Kept apart from the product's tpu_rl.tpu (the same public facts, read again here) so that the
sandbox checks the product rather than agreeing with it. The fake gcluster loads this file
beside itself (the fake bundle carries it), so it imports nothing of the sandbox.

Sources:
- AI-Hypercomputer/xpk@367c838 (2026-06-25), src/xpk/core/system_characteristics.py: line 25
  SUB_SLICING_TOPOLOGIES; 207-231 generate_tpu_topologies (2x2x1, 2x2x2, 2x2x4, 2x4x4, then
  AxBxC of multiples of 4 up to 256, A <= B <= C, at most `max_cubes` cubes of 4x4x4);
  583-592 tpu7x-standard-4t (gke_accelerator tpu7x, max_cubes=144); 706-712 ct6e-standard-4t
  (tpu-v6e-slice, '2x2' + SUB_SLICING_TOPOLOGIES); 717-723 ct5p-hightpu-4t (tpu-v5p-slice,
  max_cubes=140); compute_chips_per_vm (285-286): 4 chips per VM.
- vCPUs and memory of a 4-chip VM: https://docs.cloud.google.com/tpu/docs/tpu7x, "System
  architecture" (read 2026-12-05): v5p 208 vCPUs / 448 GB, v6e 180 / 720, TPU7x 224 / 960.
  Allocatable is that less GKE's reservations (https://cloud.google.com/kubernetes-engine/docs/
  concepts/plan-node-sizes, "Node allocatable resources": CPU 6% of the first core, 1% of the
  next, 0.5% of the next 2, 0.25% above 4; memory 25% of the first 4 GiB, 20% of the next 4,
  10% of the next 8, 6% of the next 112, 2% above 128 GiB, and a 100 MiB eviction threshold);
  ct6e keeps the figures the sandbox had (EMULATOR_API.md).
- Boot disks: a GKE node boots from pd-balanced (GKE's default from 1.24), pd-standard, pd-ssd or
  hyperdisk-balanced (https://cloud.google.com/kubernetes-engine/docs/how-to/custom-boot-disks,
  "Specifying a node boot disk type"), of those the types the TPU generation supports: v6e
  Hyperdisk Balanced (and Hyperdisk ML, no boot disk), v5p Balanced Persistent Disk
  (https://cloud.google.com/tpu/docs/setup-persistent-disk, "TPU support for Hyperdisk and
  Persistent Disk"), TPU7x Hyperdisk Balanced (and Hyperdisk ML;
  https://docs.cloud.google.com/tpu/docs/storage-options-compute, "TPU generation and supported
  disk types").
- Ironwood's workload policy: https://docs.cloud.google.com/kubernetes-engine/docs/concepts/
  tpu-ironwood, "Workload policy for multi-host node pools" (read 2026-12-05): "Ironwood (TPU7x)
  uses a workload policy to configure the physical placement of the underlying infrastructure
  when you create multi-host TPU slice node pools. You create a workload policy and then apply
  it by using the --placement-policy flag. This policy replaces the --tpu-topology flag used by
  other TPU versions." and "Ironwood (TPU7x) supports the High throughput workload policy." The
  policy is a Compute Engine resource policy (`gcloud compute resource-policies create
  workload-policy NAME --type=HIGH_THROUGHPUT --accelerator-topology=...`,
  https://cloud.google.com/sdk/gcloud/reference/compute/resource-policies/create/workload-policy)
  that the pool's placement policy names; container.v1 NodePool.PlacementPolicy.policy_name:
  "The resource policy must be in the same project and region as the node pool. If not found,
  InvalidArgument error is returned."
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

SMALL_CUBES = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")
V6E_TOPOLOGIES = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_TOPOLOGY = re.compile(r"[1-9]\d*(x[1-9]\d*){1,2}")
MAX_DIM = 256  # generate_tpu_topologies' MAX
HYPERDISK, PD_BALANCED = ("hyperdisk-balanced",), ("pd-balanced",)  # boot disk types (above)
GKE_DEFAULT_BOOT_DISK = "pd-balanced"  # custom-boot-disks: "By default, GKE uses balanced PD"


@dataclass(frozen=True)
class TpuMachine:
    """A TPU machine type of GKE: its nodes' label and chips, and the slices it makes."""

    machine_type: str
    accelerator: str  # cloud.google.com/gke-tpu-accelerator on its nodes
    chips: int  # google.com/tpu allocatable on each node
    cpu: str  # allocatable
    memory: str  # allocatable
    boot_disks: tuple[str, ...]  # the node boot disk types its VMs take
    max_cubes: int = 0  # 3D machine types: the largest slice in cubes of 4x4x4; 0: 2D

    def offers(self, topology: str) -> bool:
        """GKE makes a slice of this topology from this machine type."""
        if not _TOPOLOGY.fullmatch(topology):
            return False
        dims = [int(d) for d in topology.split("x")]
        if not self.max_cubes:
            return topology in V6E_TOPOLOGIES
        if len(dims) != 3:
            return False
        if topology in SMALL_CUBES:
            return True
        return (
            all(d % 4 == 0 and d <= MAX_DIM for d in dims)
            and dims == sorted(dims)
            and math.prod(d // 4 for d in dims) <= self.max_cubes
        )


TPU_MACHINES = {
    m.machine_type: m
    for m in (
        TpuMachine("ct6e-standard-4t", "tpu-v6e-slice", 4, "179500m", "683Gi", HYPERDISK),
        # 208 vCPUs: 208000 - (60 + 10 + 10 + 204 * 2.5) = 207410m; 448 GB = 417.2 GiB less
        # 1 + 0.8 + 0.8 + 6.72 + 2% of 289.2 (5.8) and 0.1: 401.9 GiB
        TpuMachine(
            "ct5p-hightpu-4t", "tpu-v5p-slice", 4, "207410m", "401Gi", PD_BALANCED, max_cubes=140
        ),
        # 224 vCPUs: 224000 - (60 + 10 + 10 + 220 * 2.5) = 223370m; 960 GB = 894.1 GiB less
        # 9.32 + 2% of 766.1 (15.3) and 0.1: 869.4 GiB
        TpuMachine("tpu7x-standard-4t", "tpu7x", 4, "223370m", "869Gi", HYPERDISK, max_cubes=144),
    )
}


def topology_refusal(machine_type: str, topology: str) -> str | None:
    """GKE's 400 for a TPU node pool whose topology the machine type does not make (wording
    approximated), or None."""
    machine = TPU_MACHINES.get(machine_type)
    if machine is None:
        return f"machine type {machine_type!r} is not a TPU machine type this cloud offers"
    if machine.offers(topology):
        return None
    return (
        f"Invalid TPU topology {topology!r} for machine type {machine_type!r}: "
        "not a supported slice shape"
    )


def boot_disk_refusal(machine_type: str, disk_type: str | None) -> str | None:
    """GKE's 400 for a TPU node pool whose boot disk type (GKE's default when unset) the machine
    type's VMs do not take (wording approximated), or None."""
    machine = TPU_MACHINES.get(machine_type)
    disk = disk_type or GKE_DEFAULT_BOOT_DISK
    if machine is None or disk in machine.boot_disks:
        return None
    return (
        f"Invalid value for field 'nodePool.config.diskType': {disk!r}: machine type "
        f"{machine_type!r} does not support this boot disk type (supported: "
        f"{', '.join(machine.boot_disks)})"
    )


# The machine types whose multi-host pools GKE places by a workload policy only (above).
WORKLOAD_POLICY_MACHINES = ("tpu7x-standard-4t",)
HIGH_THROUGHPUT = "HIGH_THROUGHPUT"


def workload_policy_refusal(
    machine_type: str,
    topology: str,
    region: str,
    placement: dict[str, object],
    policies: dict[str, dict[str, object]],
) -> str | None:
    """GKE's 400 for a multi-host Ironwood (TPU7x) node pool in `region` whose placement policy
    names no HIGH_THROUGHPUT workload policy of its topology there (wording approximated), or
    None. `policies`: the project's resource policies by name, each with its `region`, `type` and
    `accelerator_topology`."""
    machine = TPU_MACHINES.get(machine_type)
    if machine is None or machine_type not in WORKLOAD_POLICY_MACHINES:
        return None
    dims = [int(d) for d in topology.split("x")] if _TOPOLOGY.fullmatch(topology) else []
    if not dims or math.prod(dims) <= machine.chips:  # one VM: a single-host slice
        return None
    name = str(placement.get("name") or "")
    if not name:
        return (
            f"multi-host TPU slice node pools of machine type {machine_type!r} are placed by a "
            f"workload policy: create one of type {HIGH_THROUGHPUT} with accelerator topology "
            f"{topology!r} in {region} and name it in the node pool's placement policy "
            "(--placement-policy); a TPU topology alone is not supported"
        )
    policy = policies.get(name)
    if policy is None or policy.get("region") != region:
        return f"resource policy {name!r} not found in region {region}"
    kind, shape = str(policy.get("type") or "").upper(), policy.get("accelerator_topology")
    if kind != HIGH_THROUGHPUT or shape != topology:
        return (
            f"resource policy {name!r} is not a {HIGH_THROUGHPUT} workload policy with "
            f"accelerator topology {topology!r} (it has type {kind or 'none'}, topology "
            f"{shape or 'none'})"
        )
    return None
