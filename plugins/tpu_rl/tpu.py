"""TPU v6e slice facts: which topology each slice type has, and how many hosts it needs."""

from __future__ import annotations

# ct6e-standard-4t hosts carry 4 chips each (multi-host slices).
CHIPS_PER_HOST = {"ct6e-standard-4t": 4}
TOPOLOGY_BY_TPU_TYPE = {
    "v6e-8": "2x4",
    "v6e-16": "4x4",
    "v6e-32": "4x8",
    "v6e-64": "8x8",
    "v6e-128": "8x16",
    "v6e-256": "16x16",
}
ACCELERATOR_LABEL = "tpu-v6e-slice"
PATHWAYS_INSTANCE_TYPE = "tpuv6e"


def hosts_per_slice(topology: str, compute_type: str) -> int:
    """Hosts (pods) in one slice: chips in the topology / chips per host."""
    a, b = (int(x) for x in topology.split("x"))
    return a * b // CHIPS_PER_HOST[compute_type]
