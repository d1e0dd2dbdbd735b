"""The janitor's rules: what this package left behind, and which of it no active run owns.

Pure decisions on plain data; the sweep operator (operators/janitor.py) does the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tpu_rl import deployment
from tpu_rl.cluster.blueprint import CLUSTER_DAG_LABEL, CLUSTER_DEPLOYMENT_LABEL
from tpu_rl.cluster.blueprint import MANAGED_BY as CLUSTER_MANAGED_BY
from tpu_rl.janitor.params import JanitorParams
from tpu_rl.layout import MANAGED_BY, RUN_ID_ANNOTATION
from tpu_rl.names import DAG_ID
from tpu_rl.settings.capacity_modes import CAPACITY_MODES
from tpu_rl.settings.choices import Capacity
from tpu_rl.settings.params import default_settings
from tpu_rl.tpu import GENERATIONS, Slice, chips_in

ACTIVE_STATES = ["queued", "running"]
CLUSTER_NAME_LABEL = "tpu-rl-cluster"


def managed_selector() -> str:
    """Objects of this package, this Airflow deployment and the DAG the janitor knows: no other."""
    return ",".join(
        [
            f"app.kubernetes.io/managed-by={MANAGED_BY}",
            f"{deployment.DEPLOYMENT_LABEL}={deployment.deployment_id()}",
            f"{deployment.DAG_LABEL}={DAG_ID}",
        ]
    )


@dataclass(frozen=True)
class KubeObject:
    """One labelled object of a swept kind (tpu_rl.kube.swept), by what the janitor needs of it."""

    cluster: str
    namespace: str
    kind: str
    name: str
    created: datetime | None
    run_id: str | None
    owned: bool  # has an owner (a JobSet's Jobs): it goes with its owner

    @property
    def ref(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.kind}/{self.name}"


def kube_object(cluster: str, kind: str, meta: Mapping[str, Any]) -> KubeObject:
    """A KubeObject from Kubernetes metadata in its JSON form."""
    return KubeObject(
        cluster=cluster,
        namespace=meta.get("namespace") or "",
        kind=kind,
        name=meta["name"],
        created=parse_time(meta.get("creationTimestamp")),
        run_id=(meta.get("annotations") or {}).get(RUN_ID_ANNOTATION),
        owned=bool(meta.get("ownerReferences")),
    )


def parse_time(value: Any) -> datetime | None:
    """An aware datetime from an RFC 3339 string or a datetime; None when unknown."""
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def too_young(created: datetime | None, now: datetime, grace: timedelta) -> str | None:
    """Why something must stay for its age, if it must (an unknown age stays)."""
    if created is None:
        return "creation time unknown"
    if now - created <= grace:
        return f"younger than the grace period ({int((now - created).total_seconds() // 60)} min)"
    return None


def is_labelled(name: str, labels: Mapping[str, str]) -> bool:
    """Whether a cluster carries the labels this package's blueprint gives the clusters of this
    deployment's runs of the DAG the janitor knows."""
    return (
        labels.get("managed-by") == CLUSTER_MANAGED_BY
        and labels.get(CLUSTER_NAME_LABEL) == name
        and labels.get(CLUSTER_DEPLOYMENT_LABEL) == deployment.deployment_id()
        and labels.get(CLUSTER_DAG_LABEL) == DAG_ID
    )


def tpu_type_of(machine_type: str, topology: str) -> str:
    """The slice type of a TPU pool's machine type and topology ('' when unknown)."""
    found = [g for g in GENERATIONS.values() if g.machine_type == machine_type]
    return Slice(found[0], topology).tpu_type if found and chips_in(topology) else ""


def capacity_of(node_config: Any) -> str:
    """The capacity a TPU pool's nodes run on: the mode whose flag their GKE NodeConfig sets
    (flex_start, spot), else a reservation (a calendar one's nodes look the same)."""
    flagged = (
        mode.capacity
        for mode in CAPACITY_MODES.values()
        if mode.node_config_flag and getattr(node_config, mode.node_config_flag)
    )
    return str(next(flagged, Capacity.RESERVATION))


def destroy_settings(cluster: Any, p: JanitorParams) -> dict[str, Any]:
    """Settings for DestroyClusterOperator, from the GKE cluster (node pools) and the Params: a
    cluster's, not a run's (checked by run_settings.load_cluster_settings)."""
    tpu_pools = [np for np in cluster.node_pools if np.placement_policy.tpu_topology]
    first = tpu_pools[0] if tpu_pools else None
    zones = list(first.locations) if first and first.locations else list(cluster.locations)
    reservations = list(first.config.reservation_affinity.values) if first else []
    cidrs = [b.cidr_block for b in cluster.master_authorized_networks_config.cidr_blocks]
    topology = first.placement_policy.tpu_topology if first else ""
    return {
        "project": p.project,
        "region": p.region,
        "zone": zones[0] if zones else "",
        "cluster_name": cluster.name,
        "gcs_bucket": p.gcs_bucket,
        "reservation": reservations[0] if reservations else "",
        "capacity": capacity_of(first.config) if first else str(Capacity.RESERVATION),
        "authorized_cidr": cidrs[0] if cidrs else default_settings().authorized_cidr,
        "cluster_toolkit_version": p.cluster_toolkit_version,
        "compute_type": first.config.machine_type if first else "",
        "tpu_type": tpu_type_of(first.config.machine_type if first else "", topology),
        "topology": topology,
        "cluster_nodepool_count": max(len(tpu_pools), 1),
        "namespace": p.namespace,
    }
