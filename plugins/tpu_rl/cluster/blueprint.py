"""Cluster Toolkit inputs from the settings: edited blueprint, deployment file, gcluster argv."""

from __future__ import annotations

import copy
import platform
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from tpu_rl.cluster import capacity, ladder
from tpu_rl.names import DAG_ID
from tpu_rl.settings.capacity_modes import capacity_mode
from tpu_rl.tpu import generation_for

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

YamlMap = dict[str, Any]  # a mapping of the blueprint's YAML (the blueprint, a group, a module)

RELEASE_BASE_URL = "https://github.com/GoogleCloudPlatform/cluster-toolkit/releases/download"
# Where the tutorial's blueprint sits inside the release bundle.
BUNDLE_BLUEPRINT = "examples/gke-tpu-v6e/gke-tpu-v6e-advanced.yaml"
BLUEPRINT_FILE = "blueprint.yaml"
DEPLOYMENT_FILE = "deployment.yaml"

GKE_CLUSTER_SOURCE = "modules/scheduler/gke-cluster"
NODE_POOL_SOURCE = "modules/compute/gke-node-pool"  # the TPU pool; the CPU pool is the cluster's
# The cluster's CPU pool, where the Pathways head and the clients run: gke-cluster makes it with
# enable_pathways_for_tpus (its google_container_node_pool.cpu_np, sandbox/toolkit_expansion.py).
CPU_NODE_POOL = "cpu-np"
NODE_POOL_SA_ID = "node_pool_service_account"
SYSTEM_POOL_MACHINE_TYPE = "e2-standard-8"  # the tutorial's n2-standard-8 -> e2-standard-8
SYSTEM_POOL_ZONES = ["$(vars.zone)"]
# On a ladder: the cluster's zones (its node_locations, the system pool's and cpu-np's, all from
# system_node_pool_zones) stay the first rung's while the TPU pool follows vars.zone
# (tpu_rl.cluster.ladder, "The shape on a ladder").
CLUSTER_ZONE_VAR = "cluster_zone"
LADDER_SYSTEM_POOL_ZONES = [f"$(vars.{CLUSTER_ZONE_VAR})"]
TIMEOUT_CREATE = "timeout_create"  # gke-node-pool's terraform create timeout (variables.tf)
# A multi-host slice of a generation GKE places by a workload policy (tpu_rl.tpu's table: TPU7x)
# gets one, not a TPU topology alone: "You create a workload policy and then apply it by using
# the --placement-policy flag." and "Ironwood (TPU7x) supports the High throughput workload
# policy." (https://docs.cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood,
# "Workload policy for multi-host node pools", read 2026-12-05). The module and
# the pool's `use` of it are Cluster Toolkit's own gke-tpu-7x example's
# (examples/gke-tpu-7x/gke-tpu-7x.yaml at 1047080, lines 144-156): its resource-policy module
# outputs the pool's placement_policy (COMPACT, the policy's name, the topology;
# modules/compute/resource-policy/outputs.tf lines 17-30), which the pool takes only without a
# placement_policy setting of its own (modules/README.md, "Use": an explicit setting comes
# first), and gcluster counts the pool's hosts from the policy's accelerator_topology
# (pkg/config/hardware.go extractTopologyFromWorkloadPolicy, from v1.91.0).
WORKLOAD_POLICY_ID = "workload_policy"
WORKLOAD_POLICY_MODULE = {
    "id": WORKLOAD_POLICY_ID,
    "source": "modules/compute/resource-policy",
    "settings": {
        "name": "tpu7x-workload-policy",  # the module adds a random suffix (main.tf lines 16-22)
        "project_id": "$(vars.project_id)",
        "region": "$(vars.region)",
        "workload_policy": {
            "accelerator_topology": "$(vars.tpu_topology)",
            "type": "HIGH_THROUGHPUT",
        },
    },
}
READ_ROLE, WRITE_ROLE = "storage.objectViewer", "storage.admin"
MANAGED_BY = "tpu-rl-airflow"

# The tutorial's `case "$(uname -s)-$(uname -m)"` table: uname -s -> uname -m -> bundle platform.
_PLATFORMS = {
    "Linux": {"x86_64": "linux_amd64", "aarch64": "linux_arm64", "arm64": "linux_arm64"},
    "Darwin": {"x86_64": "mac_amd64", "arm64": "mac_arm64"},
}
BUNDLES = {
    (system, machine): f"gcluster_bundle_{bundle}.tgz"
    for system, machines in _PLATFORMS.items()
    for machine, bundle in machines.items()
}


class BlueprintError(ValueError):
    """The blueprint does not have the shape the tutorial's edits expect."""


def bundle_name(system: str | None = None, machine: str | None = None) -> str:
    """The release bundle for a platform (this machine's by default)."""
    key = (system or platform.system(), machine or platform.machine())
    try:
        return BUNDLES[key]
    except KeyError:
        raise BlueprintError(
            f"Cluster Toolkit publishes no bundle for {key[0]}-{key[1]} "
            f"(known: {sorted({f'{s}-{m}' for s, m in BUNDLES})})"
        ) from None


def bundle_url(version: str, bundle: str, base_url: str = RELEASE_BASE_URL) -> str:
    """The tutorial's download URL: <base>/<version>/<bundle>."""
    return f"{base_url.rstrip('/')}/{version}/{bundle}"


CLUSTER_DEPLOYMENT_LABEL = "tpu-rl-deployment"
CLUSTER_DAG_LABEL = "tpu-rl-dag"


def cluster_labels(settings: RunSettings, deployment: str) -> dict[str, str]:
    """Labels the toolkit merges into every module's resources, so a janitor can find them:
    `deployment` is the identity of the run that creates the cluster (tpu_rl.run_record)."""
    return {
        "managed-by": MANAGED_BY,
        "tpu-rl-cluster": settings.cluster_name,
        CLUSTER_DEPLOYMENT_LABEL: deployment,
        CLUSTER_DAG_LABEL: DAG_ID,
    }


def default_state_prefix(settings: RunSettings) -> str:
    """Terraform state prefix in the run's bucket: one per cluster, stable across runs."""
    return f"tpu-rl/terraform/{settings.cluster_name}"


def _module(groups: list[YamlMap], where: str, match: object) -> YamlMap:
    """The one module whose `where` key equals `match`."""
    found: list[YamlMap] = [
        m for g in groups for m in g.get("modules") or [] if m.get(where) == match
    ]
    if len(found) != 1:
        raise BlueprintError(
            f"blueprint: expected one module with {where}: {match}, found {len(found)} "
            "(the tutorial's edits need it)"
        )
    return found[0]


def _settings_of(module: YamlMap, anchor: str) -> YamlMap:
    settings = module.get("settings")
    if not isinstance(settings, dict) or anchor not in settings:
        raise BlueprintError(f"blueprint: module {module.get('id')!r} has no setting {anchor!r}")
    return settings


def _edit_system_pool(cluster: YamlMap) -> None:
    """e2-standard-8 system pool, pinned to the zone (zones inserted right after the type)."""
    settings = _settings_of(cluster, "system_node_pool_machine_type")
    edited: dict[str, Any] = {}
    for key, value in settings.items():
        if key == "system_node_pool_zones":
            continue
        edited[key] = value
        if key == "system_node_pool_machine_type":
            edited[key] = SYSTEM_POOL_MACHINE_TYPE
            edited["system_node_pool_zones"] = list(SYSTEM_POOL_ZONES)
    cluster["settings"] = edited


def _edit_node_pool_roles(service_account: YamlMap) -> None:
    """storage.objectViewer -> storage.admin, so TPU pods may write checkpoints."""
    roles = _settings_of(service_account, "project_roles")["project_roles"]
    if not isinstance(roles, list) or READ_ROLE not in roles:
        raise BlueprintError(
            f"blueprint: module {NODE_POOL_SA_ID!r} project_roles has no {READ_ROLE!r} to replace"
        )
    edited = [WRITE_ROLE if r == READ_ROLE else r for r in roles]
    service_account["settings"]["project_roles"] = [
        r for i, r in enumerate(edited) if r not in edited[:i]
    ]


def _edit_capacity(bp: YamlMap, groups: list[YamlMap], settings: RunSettings) -> YamlMap:
    """The capacity mode's edits (tpu_rl.cluster.capacity): vars, the TPU pool, its static count's
    uses;
    none for a mode that takes the reservation (the tutorial's pool consumes it)."""
    if capacity_mode(settings.capacity).takes_reservation:
        return bp
    pool = _module(groups, "source", NODE_POOL_SOURCE)
    pool["settings"] = capacity.edit_pool(_settings_of(pool, "machine_type"), settings)
    bp["vars"] = capacity.edit_vars(bp["vars"], settings)
    edited: YamlMap = capacity.edit_static_counts(bp, pool["id"], settings)
    return edited


def needs_workload_policy(settings: RunSettings) -> bool:
    """Whether the TPU pool is a multi-host slice of a generation GKE places by a workload
    policy (tpu_rl.tpu: TpuGeneration.workload_policy)."""
    tpu_slice = settings.slices
    return tpu_slice.generation.workload_policy and tpu_slice.hosts_per_slice > 1


def describe_workload_policy(settings: RunSettings) -> list[str]:
    """The workload policy edit in words, for the plan (none where the slice needs none)."""
    if settings.cluster_mode != "create" or not needs_workload_policy(settings):
        return []
    return [
        f"module {WORKLOAD_POLICY_ID!r} added: a HIGH_THROUGHPUT workload policy of accelerator "
        f"topology {settings.topology}, which the TPU pool uses in place of its placement "
        "policy (GKE places a multi-host TPU7x slice by a workload policy)"
    ]


def edit_workload_policy(groups: list[YamlMap], settings: RunSettings) -> None:
    """For a multi-host TPU7x slice: the workload policy module, before the TPU pool, which uses
    it in place of its own placement policy (WORKLOAD_POLICY_MODULE); nothing otherwise."""
    if not needs_workload_policy(settings):
        return
    pool = _module(groups, "source", NODE_POOL_SOURCE)
    modules = next(g["modules"] for g in groups if any(m is pool for m in g["modules"]))
    if any(m.get("id") == WORKLOAD_POLICY_ID for m in modules):
        raise BlueprintError(f"blueprint: a module {WORKLOAD_POLICY_ID!r} is there already")
    modules.insert(modules.index(pool), copy.deepcopy(WORKLOAD_POLICY_MODULE))
    pool["use"] = [*(pool.get("use") or []), WORKLOAD_POLICY_ID]
    _settings_of(pool, "machine_type").pop("placement_policy", None)


def edit_disk_type(groups: list[YamlMap], settings: RunSettings) -> None:
    """The TPU pool's boot disk: its generation's (tpu_rl.tpu: TpuGeneration.boot_disk_type); the
    tutorial's v6e blueprint gives every pool hyperdisk-balanced, which GKE refuses for v5p."""
    pool = _settings_of(_module(groups, "source", NODE_POOL_SOURCE), "machine_type")
    pool["disk_type"] = generation_for(settings.tpu_type).boot_disk_type


def rung_pool_name(name: str, settings: RunSettings) -> str:
    """The TPU pool's name on the settings' rung: the blueprint's on the first, `<name>-rungN`
    after it (a new name forces a new pool: tpu_rl.cluster.ladder)."""
    index = ladder.rung_index(settings)
    return name if index == 0 else f"{name}-rung{index + 1}"


def edit_ladder(bp: YamlMap, groups: list[YamlMap], settings: RunSettings) -> None:
    """On a capacity ladder (more than one rung): the rung's own TPU pool name, its create
    timeout above GKE's wait for a static pool's VMs, and the cluster's zones pinned to the first
    rung's (tpu_rl.cluster.ladder, "The shape on a ladder"); nothing without a ladder."""
    if len(ladder.rungs(settings)) == 1:
        return
    pool = _module(groups, "source", NODE_POOL_SOURCE)
    pool_settings = _settings_of(pool, "name")
    pool_settings["name"] = rung_pool_name(str(pool_settings["name"]), settings)
    pool_settings[TIMEOUT_CREATE] = capacity.POOL_CREATE_TIMEOUT
    cluster = _settings_of(_module(groups, "source", GKE_CLUSTER_SOURCE), "system_node_pool_zones")
    cluster["system_node_pool_zones"] = list(LADDER_SYSTEM_POOL_ZONES)
    bp["vars"][CLUSTER_ZONE_VAR] = None  # declared; the deployment file sets it


def edit_blueprint(blueprint_yaml: str, settings: RunSettings, deployment: str) -> str:
    """The tutorial's three sed edits, made on the YAML structure, a ladder's edits, a TPU7x
    slice's workload policy, the generation's boot disk, the capacity mode's edits, and the
    cluster's labels (with the deployment identity `deployment`)."""
    bp = yaml.safe_load(blueprint_yaml)
    if not isinstance(bp, dict) or not isinstance(bp.get("vars"), dict):
        raise BlueprintError("blueprint: no top-level `vars` mapping")
    groups = bp.get("deployment_groups")
    if not isinstance(groups, list) or not groups:
        raise BlueprintError("blueprint: no `deployment_groups` list")
    if len(groups) != 1:
        raise BlueprintError(
            f"blueprint: {len(groups)} deployment groups; the deployment file's single "
            "terraform state prefix supports one"
        )
    _edit_system_pool(_module(groups, "source", GKE_CLUSTER_SOURCE))
    _edit_node_pool_roles(_module(groups, "id", NODE_POOL_SA_ID))
    edit_ladder(bp, groups, settings)
    edit_workload_policy(groups, settings)
    edit_disk_type(groups, settings)
    labels = bp["vars"].get("labels") or {}
    if not isinstance(labels, dict):
        raise BlueprintError("blueprint: vars.labels must be a mapping")
    bp["vars"]["labels"] = {**labels, **cluster_labels(settings, deployment)}
    # the Kueue configuration's TPU flavor selects this label (the blueprint's var, v6e's)
    bp["vars"]["accelerator_type"] = generation_for(settings.tpu_type).accelerator_label
    return dump_yaml(_edit_capacity(bp, groups, settings))


def deployment_vars(settings: RunSettings) -> dict[str, Any]:
    """The blueprint vars a run sets (the tutorial's --vars, plus machine type and namespace;
    the capacity mode's vars in place of the reservation for flex-start and Spot; on a ladder,
    the cluster's zone)."""
    cluster_zone = (
        {CLUSTER_ZONE_VAR: ladder.cluster_zone(settings)} if len(ladder.rungs(settings)) > 1 else {}
    )
    return {
        "project_id": settings.project,
        "deployment_name": settings.cluster_name,
        "region": settings.region,
        "zone": settings.zone,
        "num_slices": settings.cluster_nodepool_count,
        "machine_type": settings.compute_type,
        "tpu_topology": settings.topology,
        "authorized_cidr": settings.authorized_cidr,
        **cluster_zone,
        **capacity.capacity_vars(settings),
        "user_namespace": settings.namespace,
    }


def deployment_file(settings: RunSettings, state_prefix: str) -> str:
    """The deployment file: terraform state in the run's bucket, and the run's vars."""
    return dump_yaml(
        {
            "terraform_backend_defaults": {
                "type": "gcs",
                "configuration": {"bucket": settings.gcs_bucket, "prefix": state_prefix},
            },
            "vars": deployment_vars(settings),
        }
    )


def vars_flag(settings: RunSettings) -> str:
    """The tutorial's --vars value, in its order (no reservation where the mode takes none)."""
    v = deployment_vars(settings)
    keys = (
        "project_id",
        "deployment_name",
        "region",
        "zone",
        "num_slices",
        "tpu_topology",
        "authorized_cidr",
        "reservation",
    )
    return ",".join(f"{k}={v[k]}" for k in keys if k in v)


def blueprint_argv(
    verb: str,
    settings: RunSettings,
    gcluster: str = "gcluster",
    blueprint: str = BLUEPRINT_FILE,
    deployment: str = DEPLOYMENT_FILE,
) -> list[str]:
    """`gcluster deploy` as the tutorial runs it (plus `-d` for the state backend), or
    `gcluster create` with deploy's inputs (rewrites the deployment folder, applies nothing)."""
    approve = ["--auto-approve"] if verb == "deploy" else []
    return [
        gcluster,
        verb,
        blueprint,
        "-d",
        deployment,
        "--vars",
        vars_flag(settings),
        "-l",
        "IGNORE",
        *approve,
        "-w",
    ]


def destroy_argv(settings: RunSettings, gcluster: str = "gcluster") -> list[str]:
    """The tutorial's `gcluster destroy CLUSTER_NAME --auto-approve` (the deployment folder)."""
    return [gcluster, "destroy", settings.cluster_name, "--auto-approve"]


@dataclass(frozen=True)
class ClusterToolkitPlan:
    """What the cluster steps write and run, relative to one working folder."""

    files: dict[str, str]
    deploy: list[str]
    create: list[str]
    destroy: list[str]


def plan(
    blueprint_yaml: str,
    settings: RunSettings,
    deployment: str,
    state_prefix: str | None = None,
    gcluster: str = "gcluster",
) -> ClusterToolkitPlan:
    """Files to write into the working folder and the argv lists to run there."""
    prefix = state_prefix or default_state_prefix(settings)
    return ClusterToolkitPlan(
        files={
            BLUEPRINT_FILE: edit_blueprint(blueprint_yaml, settings, deployment),
            DEPLOYMENT_FILE: deployment_file(settings, prefix),
        },
        deploy=blueprint_argv("deploy", settings, gcluster),
        create=blueprint_argv("create", settings, gcluster),
        destroy=destroy_argv(settings, gcluster),
    )


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no types
    """Block style for multi-line strings (the blueprint's job commands stay readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # Quote number-like strings ("1.35.") so no YAML reader takes them for numbers.
    style = "|" if "\n" in value else '"' if re.fullmatch(r"[-+0-9._eE:]+", value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    return str(
        yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
    )
