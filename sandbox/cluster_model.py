"""A GKE cluster as the deployed blueprint makes it: node pools, nodes, IAM, Kueue objects.

`ClusterModel.from_blueprint` reads what the fake gcluster deployed (the expanded blueprint and
its staged Kueue template); `ClusterModel.described` stands for an existing cluster built from
the tutorial's blueprint. `provision(emu)` creates the nodes, service accounts and Kueue
objects in the emulator, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import yaml

from sandbox.autopilot import AUTOPILOT_VAR, warden
from sandbox.cluster_addons import VERSIONS, addon_versions, install_addons
from sandbox.kube_state import KINDS, KUEUE_GROUP, ApiError, ClusterState
from sandbox.kueue import suspend_webhook
from sandbox.paths import BLUEPRINT_FIXTURES
from sandbox.toolkit_expansion import expand_blueprint, pool_topology
from sandbox.tpu_machines import TPU_MACHINES

POOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU = "google.com/tpu"
TPU_TAINT = {"key": TPU, "value": "present", "effect": "NoSchedule"}
CAPACITY_LABELS = {  # GKE's own labels on the nodes of Spot and flex-start pools
    "spot": {"cloud.google.com/gke-spot": "true"},
    "flex_start": {"cloud.google.com/gke-flex-start": "true"},
    "reservation": {},
}
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"
WORKLOAD_IDENTITY_KSA = "workload-identity-k8s-sa"  # what configure_workload_identity_sa makes
PROJECT_NUMBER = 123456789012
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue")
_VAR = re.compile(r"^\$\(vars\.(\w+)\)$")
_STAGE = re.compile(r'^\$\(ghpc_stage\("\./(.+)"\)\)$')
_TEMPLATE_VAR = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class MachineType:
    """A machine type's allocatable resources on GKE (capacity minus system reservations)."""

    cpu: str
    memory: str
    tpu: int = 0


MACHINE_TYPES = {
    **{name: MachineType(m.cpu, m.memory, tpu=m.chips) for name, m in TPU_MACHINES.items()},
    "n4-standard-64": MachineType("63770m", "232Gi"),
    "e2-standard-8": MachineType("7910m", "27Gi"),
    "n2-standard-8": MachineType("7910m", "27Gi"),
}


@dataclass
class NodePool:
    """One node pool: its nodes' machine, labels, taints and the Google SA they run as."""

    name: str
    machine_type: str
    nodes: int
    service_account: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    max_nodes: int = 0  # > nodes: the cluster autoscaler may add nodes up to this
    capacity: str = "reservation"  # reservation | flex_start | spot (gke-node-pool settings)
    slice_hosts: int = 0  # a multi-host TPU slice: nodes come and go all together
    # the pool's zone (its node_locations; "": the cluster's). A pool whose zone changed is
    # another pool to replace_pools: GKE adds and removes its nodes (NodePool.locations,
    # container.v1: "changing node pool locations will result in nodes being added and/or
    # removed")
    zone: str = ""

    @property
    def scales_from_zero(self) -> bool:
        """An autoscaling pool with no static node: nodes exist only while pods need them."""
        return self.nodes == 0 and self.max_nodes > 0

    def node(self, cluster: str, zone: str, index: int) -> dict[str, Any]:
        """The pool's node `index`, in the pool's zone (`zone`, the cluster's, when it has none)."""
        zone = self.zone or zone
        machine = MACHINE_TYPES[self.machine_type]
        allocatable = {"cpu": machine.cpu, "memory": machine.memory, "pods": "110"}
        if machine.tpu:
            allocatable[TPU] = str(machine.tpu)
        name = f"gke-{cluster}-{self.name}-{index:04d}"[:63].rstrip("-")
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    **self.labels,
                    POOL_LABEL: self.name,
                    "kubernetes.io/hostname": name,
                    "node.kubernetes.io/instance-type": self.machine_type,
                    "topology.kubernetes.io/zone": zone,
                },
            },
            "spec": {"taints": [dict(t) for t in self.taints]},
            "status": {
                "capacity": dict(allocatable),
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }


@dataclass
class ClusterModel:
    """What the cluster has: pools, IAM roles per Google principal, Kueue objects, bound KSAs."""

    name: str
    project: str
    zone: str
    namespace: str
    pools: list[NodePool]
    roles: dict[str, set[str]]
    kueue: list[dict[str, Any]]
    bound_ksas: dict[str, str]  # KSA name in `namespace` -> Google SA
    running: bool = True  # False once destroyed: no node is added or repaired any more
    autopilot: bool = False  # GKE Autopilot: Warden refuses host-network pods (autopilot.py)
    # JobSet and Kueue controller versions, None: not installed (cluster_addons.py)
    addons: dict[str, str | None] = field(default_factory=lambda: dict(VERSIONS))
    # the admission webhooks provision registered for this cluster (replaced by the next one's)
    hooks: list[Any] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def from_blueprint(cls, expanded: dict[str, Any], staged: dict[str, str]) -> ClusterModel:
        """The cluster an expanded blueprint deploys; `staged` holds its ghpc_stage'd files."""
        return cls._build(expanded, lambda path: staged[Path(path).name])

    @classmethod
    def described(cls, variables: dict[str, Any]) -> ClusterModel:
        """An existing cluster made from the tutorial's blueprint (with its storage.admin edit).

        `variables["kueue"]`: "tutorial" (default) is the blueprint's Kueue template (covers
        google.com/tpu only); "pathways" is Cluster Toolkit's Pathways Kueue configuration
        (tpu, cpu and memory, a TPU flavor and a cpu-np flavor). `variables["capacity"]`:
        "reservation" (default), "flex_start" or "spot" edits the TPU pool as Cluster Toolkit's
        consumption-options examples do (flex-start: enable_flex_start, autoscaling 0..hosts;
        Spot: spot, and gcluster's static_node_count).
        `variables["autopilot"]`: True makes it an Autopilot cluster (sandbox/autopilot.py).
        """
        blueprint = yaml.safe_load((BLUEPRINT_FIXTURES / "gke-tpu-v6e-advanced.yaml").read_text())
        variables = dict(variables)
        kueue = variables.pop("kueue", "tutorial")
        capacity = variables.pop("capacity", "reservation")
        autopilot = bool(variables.pop(AUTOPILOT_VAR, False))
        addons = addon_versions(variables)
        blueprint["vars"].update(variables)
        for module in _modules(blueprint):
            if module["source"] == "modules/compute/gke-node-pool" and capacity != "reservation":
                _capacity_edits(module["settings"], capacity, blueprint["vars"])
            if module["id"] == "node_pool_service_account":
                roles = module["settings"]["project_roles"]
                module["settings"]["project_roles"] = [
                    "storage.admin" if r == "storage.objectViewer" else r for r in roles
                ]
        expand_blueprint(blueprint)  # as gcluster expanded it when it deployed the cluster
        model = cls._build(
            blueprint, lambda path: (BLUEPRINT_FIXTURES / _STAGE.sub(r"\1", path)).read_text()
        )
        if kueue == "pathways":
            model.kueue = pathways_kueue(
                str(blueprint["vars"].get("accelerator_type")),
                str(blueprint["vars"].get("tpu_topology")),
                sum(MACHINE_TYPES[p.machine_type].tpu * p.slice_hosts for p in model.pools),
                model.namespace,
            )
        model.autopilot = autopilot
        model.addons = addons
        return model

    @classmethod
    def _build(cls, blueprint: dict[str, Any], staged_file: Any) -> ClusterModel:
        v = blueprint["vars"]
        project, name, zone = v["project_id"], v["deployment_name"], v.get("zone") or ""
        modules = {m["id"]: m for m in _modules(blueprint)}
        by_source = {m["source"]: m for m in modules.values()}

        def setting(module: dict[str, Any], key: str, default: Any = None) -> Any:
            return _resolve((module.get("settings") or {}).get(key, default), v)

        roles: dict[str, set[str]] = {}
        emails: dict[str, str] = {}
        for module in modules.values():
            if module["source"] == "modules/project/service-account":
                email = f"{setting(module, 'name')}@{project}.iam.gserviceaccount.com"
                emails[module["id"]] = email
                roles[email] = set(setting(module, "project_roles", []))
        cluster = by_source["modules/scheduler/gke-cluster"]
        tpu_module = by_source["modules/compute/gke-node-pool"]
        machine = str(setting(tpu_module, "machine_type"))
        # the pool's own placement policy, or (tpu7x) its workload policy's accelerator topology
        topology = str(pool_topology(tpu_module, modules, v))
        hosts = prod(int(x) for x in topology.split("x")) // MACHINE_TYPES[machine].tpu
        slices = int(setting(tpu_module, "num_slices", 1) or 1)
        namespace = str(setting(cluster, "namespace", "default"))
        cluster_sa = next((emails[u] for u in cluster.get("use", []) if u in emails), "")
        pool_sa = next((emails[u] for u in tpu_module.get("use", []) if u in emails), "")
        system_sa = f"{project}-compute@developer.gserviceaccount.com"
        # gke-cluster/main.tf (cluster-toolkit 1047080) lines 132, 434, 533: the cluster's,
        # the system pool's and cpu-np's node_locations are all system_node_pool_zones;
        # gke-node-pool/main.tf line 108: the TPU pool's are its `zones`
        cluster_zone = (setting(cluster, "system_node_pool_zones") or [zone])[0]
        tpu_zone = (setting(tpu_module, "zones") or [zone])[0]
        machine_type = str(setting(cluster, "system_node_pool_machine_type"))
        pools = [NodePool("system", machine_type, 2, system_sa, zone=cluster_zone)]
        if setting(cluster, "enable_pathways_for_tpus"):
            pools.append(
                NodePool(
                    "cpu-np",
                    "n4-standard-64",
                    2,
                    cluster_sa or system_sa,
                    max_nodes=10,
                    zone=cluster_zone,
                )
            )
        base = str(setting(tpu_module, "name"))
        # GKE labels a TPU node with its machine type's accelerator, whatever the blueprint's
        # accelerator_type (which only its Kueue flavor reads)
        tpu_labels = {
            ACCELERATOR_LABEL: TPU_MACHINES[machine].accelerator,
            TOPOLOGY_LABEL: topology,
        }
        capacity = (
            "flex_start"
            if setting(tpu_module, "enable_flex_start")
            else "spot"
            if setting(tpu_module, "spot")
            else "reservation"
        )
        tpu_labels.update(CAPACITY_LABELS[capacity])
        static = setting(tpu_module, "static_node_count")
        most = setting(tpu_module, "autoscaling_max_node_count")
        autoscaling = static is None and most is not None
        least = int(setting(tpu_module, "autoscaling_min_node_count") or 0)
        for i in range(slices):
            pool_name = base if slices == 1 else f"{base}-{i}"
            pools.append(
                NodePool(
                    pool_name,
                    machine,
                    least if autoscaling else hosts,
                    pool_sa,
                    tpu_labels,
                    [TPU_TAINT],
                    max_nodes=int(most) if autoscaling else 0,
                    capacity=capacity,
                    slice_hosts=hosts,
                    zone=tpu_zone,
                )
            )
        bound = (
            {WORKLOAD_IDENTITY_KSA: cluster_sa}
            if setting(cluster, "configure_workload_identity_sa")
            else {}
        )
        kueue: list[dict[str, Any]] = []
        installer = by_source.get("modules/management/kubectl-apply")
        kueue_settings = setting(installer, "kueue", {}) if installer else {}
        if kueue_settings.get("install") and kueue_settings.get("config_path"):
            template = staged_file(_resolve(kueue_settings["config_path"], v))
            values = {
                "tpu_quota": str(slices * hosts * MACHINE_TYPES[machine].tpu),
                "accelerator_type": str(v.get("accelerator_type") or "tpu-v6e-slice"),
                "namespace": namespace,
            }
            rendered = _TEMPLATE_VAR.sub(lambda m: values.get(m.group(1), m.group(0)), template)
            kueue = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") in KUEUE_KINDS]
        return cls(name, project, zone, namespace, pools, roles, kueue, bound)

    def provision(self, emu: ClusterState) -> None:
        """Nodes, namespaces' service accounts and Kueue objects in the emulator (idempotent)."""
        for pool in self.pools:
            for i in range(pool.nodes):
                _create(emu, pool.node(self.name, self.zone, i))
        namespaces = {"default", self.namespace}
        for ns in sorted(namespaces):
            if emu.get("namespaces", "", ns) is None:
                _create(emu, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            _create(emu, _service_account(ns, "default"))
        for ksa, gsa in self.bound_ksas.items():
            _create(emu, _service_account(self.namespace, ksa, {GSA_ANNOTATION: gsa}))
        for obj in self.kueue:
            _create_or_replace(emu, {**obj, "apiVersion": f"{KUEUE_GROUP}/v1beta2"})
        install_addons(emu, self.addons)
        if emu.cluster is not self:
            # a new cluster on an emulator an earlier (destroyed) cluster used: its webhooks, not
            # the earlier one's (whose ServiceAccount check and Kueue were another cluster's)
            for hook in emu.cluster.hooks if emu.cluster is not None else []:
                emu.admission_hooks.remove(hook)
            self.hooks = [self.admit_pod(emu)]
            if self.autopilot:
                self.hooks.append(warden)
            if self.kueue:
                self.hooks.append(suspend_webhook)
            emu.admission_hooks.extend(self.hooks)
        emu.cluster = self

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.pools if p.name == name), None)

    def principal_of(self, emu: ClusterState, namespace: str, pod_name: str) -> str:
        """The Google identity a pod's GCS calls carry under Workload Identity.

        hostNetwork pods reach the node's metadata server: the node pool's service account.
        Other pods get their Kubernetes SA's bound Google SA, else its bare federated principal.
        """
        pod = emu.get("pods", namespace, pod_name) or {"spec": {}}
        spec = pod["spec"]
        if spec.get("hostNetwork"):
            node = emu.get("nodes", "", spec.get("nodeName") or "") or {"metadata": {}}
            pool = self.pool((node["metadata"].get("labels") or {}).get(POOL_LABEL, ""))
            return pool.service_account if pool else ""
        ksa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        account = emu.get("serviceaccounts", namespace, ksa) or {"metadata": {}}
        bound = (account["metadata"].get("annotations") or {}).get(GSA_ANNOTATION)
        return bound or (
            f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/"
            f"workloadIdentityPools/{self.project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
        )

    def roles_of(self, principal: str) -> set[str]:
        return set(self.roles.get(principal, set()))

    def admit_pod(self, emu: ClusterState) -> Any:
        """The ServiceAccount admission plugin: a pod's service account must exist."""

        def check(resource: Any, obj: dict[str, Any]) -> None:
            if resource.kind != "Pod":
                return
            ns, spec = obj["metadata"].get("namespace", "default"), obj.get("spec") or {}
            ksa = spec.get("serviceAccountName") or "default"
            if emu.get("serviceaccounts", ns, ksa) is None:
                raise ApiError(
                    403,
                    f'pods "{obj["metadata"].get("name", "")}" is forbidden: error looking up '
                    f'service account {ns}/{ksa}: serviceaccount "{ksa}" not found',
                    reason="Forbidden",
                )

        return check


def pathways_kueue(
    accelerator: str, topology: str, tpu_quota: int, namespace: str
) -> list[dict[str, Any]]:
    """Cluster Toolkit's kubectl-apply/kueue/kueue-configuration-pathways.yaml.tftpl, rendered
    (GoogleCloudPlatform/cluster-toolkit; high cpu/memory quotas on the TPU flavor)."""
    flavor = f"flavor-{accelerator}"

    def quota(tpu: Any, cpu: Any, memory: Any) -> list[dict[str, Any]]:
        return [
            {"name": TPU, "nominalQuota": tpu},
            {"name": "cpu", "nominalQuota": cpu},
            {"name": "memory", "nominalQuota": memory},
        ]

    return [
        {"kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": {ACCELERATOR_LABEL: accelerator, TOPOLOGY_LABEL: topology},
                  "tolerations": [{"effect": "NoSchedule", "key": TPU, "value": "present"}]}},
        {"kind": "ResourceFlavor", "metadata": {"name": "pathways-flavor"},
         "spec": {"nodeLabels": {POOL_LABEL: "cpu-np"}}},
        {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [
             {"coveredResources": [TPU, "cpu", "memory"],
              "flavors": [{"name": flavor, "resources": quota(tpu_quota, 10000, "10000Gi")},
                          {"name": "pathways-flavor", "resources": quota("0", 480, "2000G")}]}]}},
        {"kind": "LocalQueue", "metadata": {"namespace": namespace, "name": "user-queue"},
         "spec": {"clusterQueue": "cluster-queue"}},
    ]  # fmt: skip


def _capacity_edits(settings: dict[str, Any], capacity: str, variables: dict[str, Any]) -> None:
    """The TPU pool of an existing flex-start (no reservation, 0..hosts nodes, as Cluster
    Toolkit's flex-start example) or Spot (no reservation, spot: true) cluster; gcluster's
    expansion (toolkit_expansion) then makes the Spot pool static, as it did when it deployed."""
    settings.pop("reservation_affinity", None)
    if capacity == "spot":
        settings.update(spot=True)
        return
    settings.pop("static_node_count", None)
    topology = str(_resolve(settings["placement_policy"]["tpu_topology"], variables))
    chips = MACHINE_TYPES[str(_resolve(settings["machine_type"], variables))].tpu
    settings.update(autoscaling_min_node_count=0)
    settings.update(autoscaling_max_node_count=prod(int(x) for x in topology.split("x")) // chips)
    settings.update(enable_flex_start=True, auto_repair=False)


def _modules(blueprint: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for g in blueprint["deployment_groups"] for m in g.get("modules") or []]


def _resolve(value: Any, variables: dict[str, Any]) -> Any:
    """`$(vars.x)` -> the var's value (the only expression form the pool settings need)."""
    if isinstance(value, str) and (m := _VAR.match(value)):
        return variables.get(m.group(1))
    if isinstance(value, dict):
        return {k: _resolve(x, variables) for k, x in value.items()}
    if isinstance(value, list):
        return [_resolve(x, variables) for x in value]
    return value


def _service_account(
    namespace: str, name: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def _create(emu: ClusterState, obj: dict[str, Any]) -> None:
    try:
        emu.create(obj)
    except ApiError as error:
        if error.code != 409:
            raise


def _create_or_replace(emu: ClusterState, obj: dict[str, Any]) -> None:
    """This cluster's object, in place of one of the same name an earlier cluster on the
    emulator left (a ClusterQueue with another quota held the next cluster's runs back)."""
    try:
        emu.create(obj)
    except ApiError as error:
        if error.code != 409:
            raise
        kind = KINDS[obj["kind"]]
        namespace = obj["metadata"].get("namespace", "default") if kind.namespaced else ""
        emu.replace(kind.plural, namespace, obj["metadata"]["name"], obj)
