"""IAM: what the caller may do in the project (Resource Manager projects.testIamPermissions) and
which roles the node pools' service accounts hold there (projects.getIamPolicy).

https://cloud.google.com/resource-manager/reference/rest/v3/projects/testIamPermissions,
https://cloud.google.com/resource-manager/reference/rest/v3/projects/getIamPolicy
"""

from __future__ import annotations

from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.run_settings import RunSettings

RESOURCE_MANAGER = "cloudresourcemanager.googleapis.com"
# One permission of each tutorial role a step needs (the seed's list: roles/container.admin,
# compute.admin, storage.admin, iam.serviceAccountUser, iam.serviceAccountAdmin,
# resourcemanager.projectIamAdmin): what the run's own calls and gcluster's Terraform do.
EVERY_RUN = (
    "container.clusters.get",
    "storage.buckets.get",
    "storage.objects.create",
    "storage.objects.get",
    "storage.objects.list",
)
CREATING_A_CLUSTER = (
    "container.clusters.create",
    "container.clusters.delete",
    "compute.networks.create",
    "compute.subnetworks.create",
    "storage.buckets.create",
    "iam.serviceAccounts.create",
    "iam.serviceAccounts.actAs",
    "resourcemanager.projects.setIamPolicy",
)
# What a pod writing checkpoints as its node pool's account needs (the tutorial's blueprint
# edit: `- storage.objectViewer` -> `- storage.admin` on the node pool service account).
STORAGE_WRITERS = ("roles/storage.admin", "roles/storage.objectAdmin")
CALLER, POOLS = "caller permissions", "node pool roles"


def needed_permissions(s: RunSettings) -> tuple[str, ...]:
    if s.cluster_mode == ClusterMode.CREATE:
        return EVERY_RUN + CREATING_A_CLUSTER
    return EVERY_RUN


def check_caller(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The permissions the run's calls need, granted to the deployment's credentials."""
    wanted = needed_permissions(s)
    answer = api.read_rpc(
        RESOURCE_MANAGER,
        f"/v3/projects/{s.project}:testIamPermissions",
        {"permissions": list(wanted)},
    )
    granted = set(answer.get("permissions") or [])
    missing = [p for p in wanted if p not in granted]
    if missing:
        return [
            failed(
                CALLER,
                f"the deployment's credentials lack {', '.join(missing)} on {s.project}",
                "grant the tutorial's roles to the GCP connection's account (roles/container.admin,"
                " roles/compute.admin, roles/storage.admin, roles/iam.serviceAccountUser, "
                "roles/iam.serviceAccountAdmin, roles/resourcemanager.projectIamAdmin): gcloud "
                f"projects add-iam-policy-binding {s.project} --member=<account> --role=<role>",
            )
        ]
    return [passed(CALLER, f"{len(wanted)} permissions granted on {s.project}")]


def check_pool_roles(api: GoogleApi, s: RunSettings, accounts: dict[str, str]) -> CheckResult:
    """Every workload pool's account ({pool: email}) may write the bucket's objects."""
    policy = api.read_rpc(
        RESOURCE_MANAGER,
        f"/v3/projects/{s.project}:getIamPolicy",
        {"options": {"requestedPolicyVersion": 3}},
    )
    writers = {
        member
        for binding in policy.get("bindings") or []
        if binding.get("role") in STORAGE_WRITERS
        for member in binding.get("members") or []
    }
    lacking = {pool: sa for pool, sa in accounts.items() if f"serviceAccount:{sa}" not in writers}
    if lacking:
        listed = ", ".join(f"{pool} ({sa})" for pool, sa in sorted(lacking.items()))
        return failed(
            POOLS,
            f"no storage write role on {s.project} for {listed}: their host-network pods "
            "cannot write checkpoints",
            f"gcloud projects add-iam-policy-binding {s.project} "
            "--member=serviceAccount:<account> --role=roles/storage.admin (the tutorial's edit)",
        )
    return passed(POOLS, f"{', '.join(sorted(accounts))} run as accounts with a storage write role")
