"""TPU slice facts per generation (v6e, v5p, tpu7x), in one table: machine type, chips and JAX
devices per VM, GKE's and Pathways' names, the boot disk type its node pool takes, the largest
slice, whether GKE places a multi-host slice by a workload policy, which topologies a slice may
have and how many hosts it needs; and a run's slices of one generation (Slice): their TPU type,
machine type, chips, hosts and JAX devices.

Source: AI-Hypercomputer/xpk@367c838 (2026-06-25), src/xpk/core/system_characteristics.py:
get_tpu_system_characteristics_map (234-282: a type's name counts TensorCores, `<prefix>-<chips x
tensorcores_per_chip>`), compute_chips_per_vm (285-286: 4 chips per VM but for a 1-chip slice),
generate_tpu_topologies (207-231: 3D slices are 2x2x1, 2x2x2, 2x2x4, 2x4x4, then AxBxC of
multiples of 4, A <= B <= C), and the tpu7x, v6e and v5p entries (572-596, 706-728: gke_accelerator,
machine_type, tensorcores_per_chip, pathways_tpu_version). JAX devices per chip: MaxText
maxtext-v0.2.4 src/maxtext/utils/accelerator_to_spec_map.py:36-42, 139-144, 168-172
(devices_per_slice: v6e-32 32, v5p-64 32 "megacore", tpu7x-128 128 "two cores per chip").

Boot disk (the TPU node pool's `disk_type`): Cloud TPU's disk table ("TPU support for Hyperdisk and
Persistent Disk", https://cloud.google.com/tpu/docs/setup-persistent-disk; "TPU generation and
supported disk types", https://docs.cloud.google.com/tpu/docs/storage-options-compute) gives v6e
and TPU7x Hyperdisk Balanced and Hyperdisk ML, v5p Balanced Persistent Disk (and Hyperdisk ML);
a GKE node boots from pd-balanced, pd-standard, pd-ssd or hyperdisk-balanced ("Configuring a
custom boot disk", https://cloud.google.com/kubernetes-engine/docs/how-to/custom-boot-disks), so
v6e and TPU7x boot from hyperdisk-balanced (as Cluster Toolkit's examples set, at 1047080:
examples/gke-tpu-v6e/gke-tpu-v6e.yaml:170, examples/gke-tpu-7x/gke-tpu-7x.yaml:160) and v5p from
pd-balanced.

Workload policy: "Ironwood (TPU7x) uses a workload policy to configure the physical placement of
the underlying infrastructure when you create multi-host TPU slice node pools. [...] This policy
replaces the --tpu-topology flag used by other TPU versions."
(https://docs.cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood, "Workload policy for
multi-host node pools", read 2026-12-05; tpu_rl.cluster.blueprint renders it.)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TpuGeneration:
    """One TPU generation as GKE, Pathways and JAX see it."""

    name: str  # the TPU type's prefix: v6e-32, v5p-64, tpu7x-128
    machine_type: str  # the multi-host VM (4 chips) GKE's node pool runs
    chips_per_vm: int
    tensorcores_per_chip: int  # a TPU type's number counts these
    devices_per_chip: int  # JAX devices (MaxText's chips_per_vm counts these per VM)
    accelerator_label: str  # cloud.google.com/gke-tpu-accelerator
    pathways_instance_type: str  # the Pathways server's --instance_type=<this>:<topology>
    dimensions: int  # 2: AxB, 3: AxBxC
    boot_disk_type: str  # the TPU node pool's disk_type (GKE boots its nodes from it)
    max_slice_chips: int  # the most chips one slice holds
    workload_policy: bool = False  # GKE places a multi-host slice by a workload policy

    @property
    def devices_per_vm(self) -> int:
        """JAX devices of one VM: MaxText's chips_per_vm flag."""
        return self.chips_per_vm * self.devices_per_chip

    def tpu_type(self, topology: str) -> str:
        """The TPU type of a slice of this topology ('4x8' -> 'v6e-32', '2x4x4' -> 'v5p-64')."""
        return f"{self.name}-{chips_in(topology) * self.tensorcores_per_chip}"

    def topology_problem(self, topology: str) -> str | None:
        """Why GKE would refuse a slice of this topology, or None."""
        dims = dims_of(topology)
        if len(dims) != self.dimensions:
            shape = "AxB, like 4x8" if self.dimensions == 2 else "AxBxC, like 2x2x4"
            return f"{self.name} slices are {shape}"
        if self.dimensions == 3 and topology not in SMALL_3D and not _cube_multiple(dims):
            return (
                f"{self.name} slices are {', '.join(SMALL_3D)}, or AxBxC of multiples of 4 "
                "with A <= B <= C"
            )
        if self.dimensions == 2 and topology not in V6E_TOPOLOGIES:
            return f"v6e multi-host slices are {', '.join(V6E_TOPOLOGIES)}"
        return None


# xpk system_characteristics.py:25 (SUB_SLICING_TOPOLOGIES, with 2x2: the ct6e-standard-4t ones)
V6E_TOPOLOGIES = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")  # generate_tpu_topologies' fixed ones
# Sources: the module docstring's (largest slice: MAX_SLICE_CHIPS's comment)
GENERATIONS = {
    g.name: g
    for g in (
        TpuGeneration(
            "v6e", "ct6e-standard-4t", 4, 1, 1, "tpu-v6e-slice", "tpuv6e", 2,
            boot_disk_type="hyperdisk-balanced", max_slice_chips=256,
        ),
        TpuGeneration(
            "v5p", "ct5p-hightpu-4t", 4, 2, 1, "tpu-v5p-slice", "tpuv5", 3,
            boot_disk_type="pd-balanced", max_slice_chips=6144,
        ),
        TpuGeneration(
            "tpu7x", "tpu7x-standard-4t", 4, 2, 2, "tpu7x", "tpu7x", 3,
            boot_disk_type="hyperdisk-balanced", max_slice_chips=9216, workload_policy=True,
        ),
    )
}  # fmt: skip
CHIPS_PER_HOST = {g.machine_type: g.chips_per_vm for g in GENERATIONS.values()}
# The most chips one slice of a generation holds: a v6e Pod's 256 (docs.cloud.google.com/tpu/docs/
# tpu7x, "Number of chips per pod", read 2026-12-06; 16x16, the largest of V6E_TOPOLOGIES); v5p's
# largest schedulable job, 96 cubes, 16x16x24 (docs.cloud.google.com/tpu/docs/v5p: "The largest
# job that can be scheduled is a 96 cube (6144 chip) job", of an 8960-chip Pod, read 2026-12-06);
# a TPU7x Pod's 9216 (the same tpu7x page; xpk's generate_tpu_topologies(max_cubes=144) for it)
MAX_SLICE_CHIPS = {g.name: g.max_slice_chips for g in GENERATIONS.values()}
TUTORIAL_GENERATION = GENERATIONS["v6e"]
TOPOLOGY_SHAPE = re.compile(r"[1-9]\d*(x[1-9]\d*){1,2}")


def dims_of(topology: str) -> tuple[int, ...]:
    """A topology's chip counts per axis ('2x2x4' -> (2, 2, 4)); () when malformed."""
    if not TOPOLOGY_SHAPE.fullmatch(topology):
        return ()
    return tuple(int(x) for x in topology.split("x"))


def chips_in(topology: str) -> int:
    """Chips in a slice of this topology (0 when malformed)."""
    dims = dims_of(topology)
    return math.prod(dims) if dims else 0


def _cube_multiple(dims: tuple[int, ...]) -> bool:
    return all(d % 4 == 0 for d in dims) and list(dims) == sorted(dims)


def generation_of(tpu_type: str) -> TpuGeneration | None:
    """The generation a TPU type names ('v5p-64' -> v5p), None when unknown."""
    return GENERATIONS.get(tpu_type.rpartition("-")[0])


def generation_for(tpu_type: str) -> TpuGeneration:
    """The generation of a validated run's TPU type (the tutorial's v6e for an unknown one)."""
    return generation_of(tpu_type) or TUTORIAL_GENERATION


def hosts_per_slice(topology: str, compute_type: str) -> int:
    """Hosts (pods) in one slice: chips in the topology / chips per host."""
    return chips_in(topology) // CHIPS_PER_HOST[compute_type]


@dataclass(frozen=True)
class Slice:
    """The run's TPU slices: `count` slices of one generation and topology (MaxText's
    num_slices, the settings' cluster_nodepool_count: one node pool each)."""

    generation: TpuGeneration
    topology: str
    count: int = 1

    @classmethod
    def of(cls, tpu_type: str, topology: str, count: int = 1) -> Slice:
        """The slices of a validated run's TPU type (the tutorial's v6e for an unknown one)."""
        return cls(generation_for(tpu_type), topology, count)

    @property
    def tpu_type(self) -> str:
        """One slice's TPU type ('v6e-32')."""
        return self.generation.tpu_type(self.topology)

    @property
    def machine_type(self) -> str:
        """The VM GKE's node pool runs (one host)."""
        return self.generation.machine_type

    @property
    def chips_per_slice(self) -> int:
        return chips_in(self.topology)

    @property
    def chips(self) -> int:
        """Chips of all the slices."""
        return self.chips_per_slice * self.count

    @property
    def hosts_per_slice(self) -> int:
        """Hosts (VMs, one pod each) of one slice."""
        return self.chips_per_slice // self.generation.chips_per_vm

    @property
    def hosts(self) -> int:
        """Hosts of all the slices."""
        return self.hosts_per_slice * self.count

    @property
    def devices_per_slice(self) -> int:
        """JAX devices of one slice."""
        return self.chips_per_slice * self.generation.devices_per_chip

    @property
    def devices(self) -> int:
        """JAX devices of all the slices."""
        return self.devices_per_slice * self.count
